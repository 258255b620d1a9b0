//! Watched folders of one kind (e.g. `.github/prompts`): a `directory` customization whose
//! children are the folder's component files; `writable` ones accept `resource*` writes.

use std::path::Path;

use ahp_types::state::{Customization, CustomizationType, DirectoryCustomization};

use super::components::{self, Bounds};
use super::source::failure;
use super::{display_path, Problems, Scan};
use crate::spec::{ContentKind, DirectorySpec, Problem};

/// The AHP `contents` value for a component kind.
pub fn contents_type(kind: ContentKind) -> CustomizationType {
    match kind {
        ContentKind::Skill | ContentKind::Command => CustomizationType::Skill,
        ContentKind::Agent => CustomizationType::Agent,
        ContentKind::Rule => CustomizationType::Rule,
        ContentKind::Prompt => CustomizationType::Prompt,
        ContentKind::Hook => CustomizationType::Hook,
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
            problems.push(Problem::at(
                display_path(&spec.path, &display_base),
                "not a folder",
            ));
            (problems.error_state(), Vec::new())
        }
        Err(e) => {
            problems.push(failure(
                &display_path(&spec.path, &display_base),
                "cannot open folder",
                &e,
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
        unparsable: Vec::new(),
    }
}
