//! Watched folders of one kind (e.g. `.github/prompts`): a `directory` customization whose
//! children are the folder's component files; `writable` ones accept `resource*` writes.

use std::path::{Path, PathBuf};

use ahp_types::state::{Customization, CustomizationType, DirectoryCustomization};

use super::components::{self, Bounds, Kind};
use super::{display_path, Problems, Scan};

/// A configured directory (`[[directories]]` in proxy.toml).
#[derive(Debug, Clone, PartialEq)]
pub struct DirectorySpec {
    /// The folder, absolute.
    pub path: PathBuf,
    /// Label shown to clients.
    pub name: String,
    /// What its files are.
    pub contents: Kind,
    /// Whether clients may write files in it through `resourceWrite` and friends.
    pub writable: bool,
}

/// The AHP `contents` value for a component kind.
pub fn contents_type(kind: Kind) -> CustomizationType {
    match kind {
        Kind::Skill | Kind::Command => CustomizationType::Skill,
        Kind::Agent => CustomizationType::Agent,
        Kind::Rule => CustomizationType::Rule,
        Kind::Prompt => CustomizationType::Prompt,
        Kind::Hook => CustomizationType::Hook,
    }
}

/// Scan one configured directory.
pub fn scan_directory(spec: &DirectorySpec) -> Scan {
    let display_base = spec.path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let mut problems = Problems::default();
    let (load, children) = match std::fs::canonicalize(&spec.path) {
        Ok(root) if root.is_dir() => {
            let bounds = Bounds {
                root: &root,
                display_base: &display_base,
            };
            let children = components::scan_dir(spec.contents, &spec.path, &bounds, &mut problems);
            (problems.load_state(), children)
        }
        Ok(_) => {
            problems.push_message(format!(
                "{}: not a folder",
                display_path(&spec.path, &display_base)
            ));
            (problems.error_state(), Vec::new())
        }
        Err(e) => {
            problems.push_message(format!(
                "{}: cannot open folder: {e}",
                display_path(&spec.path, &display_base)
            ));
            (problems.error_state(), Vec::new())
        }
    };
    let uri = super::uri::file_uri(&spec.path);
    Scan {
        customizations: vec![Customization::Directory(DirectoryCustomization {
            id: uri.clone(),
            uri,
            name: spec.name.clone(),
            icons: None,
            range: None,
            meta: None,
            client_id: None,
            load: Some(load),
            children: Some(children),
            enabled: true,
            contents: contents_type(spec.contents),
            writable: spec.writable,
        })],
        servers: Vec::new(),
        problems: problems.list,
        watched: vec![spec.path.clone()],
    }
}
