//! Which server definitions must be trusted before they run (`[trust]`): those of the
//! proxy's own config never; those of manifests, plugin folders, watched directories and
//! client-published plugins unless their source is set `trusted` or their file lies in one
//! of `[trust] folders`. Pure.

use std::path::{Path, PathBuf};

/// Where a server definition comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `[servers.*]` of the proxy.toml the user runs: the user's own.
    Config,
    /// A file named in `manifests`.
    Manifest,
    /// A plugin folder under `plugin_roots`.
    Plugin,
    /// A `[[directories]]` folder.
    Directory,
    /// A plugin an AHP client published.
    ClientPlugin,
}

/// What a source's definitions need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Each definition runs once the user trusted it (and again after any change).
    #[default]
    Ask,
    /// Its definitions run as declared.
    Trusted,
}

impl Mode {
    /// `ask` or `trusted`, as proxy.toml writes it.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "ask" => Some(Mode::Ask),
            "trusted" => Some(Mode::Trusted),
            _ => None,
        }
    }
}

/// `[trust]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustPolicy {
    /// `manifests`.
    pub manifests: Mode,
    /// `plugins`.
    pub plugins: Mode,
    /// `directories`.
    pub directories: Mode,
    /// `client_plugins`.
    pub client_plugins: Mode,
    /// Folders whose definitions are trusted as declared (absolute, normalised).
    pub folders: Vec<PathBuf>,
}

impl TrustPolicy {
    /// Everything runs as declared (the behaviour before trust existed).
    pub fn trust_all() -> Self {
        Self {
            manifests: Mode::Trusted,
            plugins: Mode::Trusted,
            directories: Mode::Trusted,
            client_plugins: Mode::Trusted,
            folders: Vec::new(),
        }
    }

    /// Whether a definition from `source`, in the file or folder `at`, waits for trust.
    pub fn asks(&self, source: Source, at: Option<&Path>) -> bool {
        let mode = match source {
            Source::Config => return false,
            Source::Manifest => self.manifests,
            Source::Plugin => self.plugins,
            Source::Directory => self.directories,
            Source::ClientPlugin => return self.client_plugins == Mode::Ask,
        };
        let in_trusted_folder = at.is_some_and(|at| self.folders.iter().any(|f| at.starts_with(f)));
        mode == Mode::Ask && !in_trusted_folder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_configs_own_servers_and_trusted_sources_or_folders_run_unasked() {
        let policy = TrustPolicy {
            plugins: Mode::Trusted,
            folders: vec![PathBuf::from("/home/me/own")],
            ..TrustPolicy::default()
        };
        let at = |p: &str| Some(PathBuf::from(p));
        assert!(!policy.asks(Source::Config, None));
        assert!(!policy.asks(Source::Plugin, at("/clone/p").as_deref()));
        assert!(policy.asks(Source::Manifest, at("/clone/.mcp.json").as_deref()));
        assert!(!policy.asks(Source::Manifest, at("/home/me/own/.mcp.json").as_deref()));
        assert!(policy.asks(Source::Manifest, at("/home/me/owner/.mcp.json").as_deref()));
        assert!(policy.asks(Source::Directory, None));
        // A client's plugin lies in no folder of the user's: only its setting counts.
        assert!(policy.asks(Source::ClientPlugin, at("/home/me/own/x").as_deref()));
        assert!(!TrustPolicy::trust_all().asks(Source::ClientPlugin, None));
        assert_eq!(Mode::parse("ask"), Some(Mode::Ask));
        assert_eq!(Mode::parse("trusted"), Some(Mode::Trusted));
        assert_eq!(Mode::parse("yes"), None);
    }
}
