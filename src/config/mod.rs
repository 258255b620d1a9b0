//! The `proxy.toml` schema: defaults, validation, and errors that name file:line:col.
//! Parsing is pure (`Config::parse`); `Config::load` only adds reading the file.
//!
//! `keys` is the one table of keys, defaults and bounds; `raw` is the file as written and
//! `recover` reads it, leaving out what serde refuses; `checker` collects located problems; `sections`, `paths` and `servers` validate their
//! parts into the `settings` types; `origin` is the one normal form of an `Origin`;
//! `documented` (tests) holds docs/configuration.md's table and the bundled proxy.toml to `keys`;
//! `locate` finds the file a command reads without `--config`.

mod approval;
mod checker;
#[cfg(test)]
mod documented;
mod error;
mod keys;
pub mod locate;
mod origin;
mod paths;
mod raw;
mod recover;
mod sections;
mod servers;
mod settings;
#[cfg(test)]
mod tests;
mod trust;

use std::path::{Path, PathBuf};

pub use error::ConfigError;
pub use origin::normalize_origin;
pub use paths::normalize;
pub use settings::{
    AccessToken, AgentConfig, AhpConfig, ClientsConfig, Config, Fairness, Inputs, Limits,
    McpConfig, ServerConfig, SessionConfig, SupervisorConfig, MCP_TOKEN_ENV, TOKEN_ENV,
};

use checker::Checker;
use paths::Resolver;

use crate::spec::Problem;

impl Config {
    /// Read and validate `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let read = crate::file_read::read_text(path, crate::file_read::MAX_SOURCE_BYTES);
        let text = read.map_err(|error| ConfigError {
            problems: vec![Problem {
                location: path.display().to_string(),
                message: format!("cannot read config file: {error}"),
            }],
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let base = std::path::absolute(&base).unwrap_or(base);
        Self::parse(&text, &path.display().to_string(), &base)
    }

    /// Validate `text` (the contents of `file`); relative paths are resolved against `base`.
    pub fn parse(text: &str, file: &str, base: &Path) -> Result<Self, ConfigError> {
        let mut checker = Checker::new(file, text);
        // Whatever serde refuses is a problem and is left out; the rest is still checked,
        // so one run reports every mistake.
        let Some(raw) = recover::read(text, &mut checker) else {
            return checker.finish(None);
        };
        let mcp = sections::mcp(&mut checker, raw.mcp);
        let ahp = sections::ahp(&mut checker, raw.ahp);
        let agent = sections::agent(&mut checker, raw.agent);
        let limits = sections::limits(&mut checker, raw.limits);
        let supervisor = sections::supervisor(&mut checker, raw.supervisor);
        let resolver = Resolver { base };
        let plugin_roots = paths::list(
            &mut checker,
            keys::PLUGIN_ROOTS.name,
            raw.plugin_roots,
            &resolver,
        );
        let manifests = paths::list(&mut checker, keys::MANIFESTS.name, raw.manifests, &resolver);
        let directories = paths::directories(&mut checker, raw.directories, &resolver);
        let servers = servers::servers(&mut checker, raw.servers, &resolver);
        let approval = approval::approval(&mut checker, raw.approval);
        let trust = trust::trust(&mut checker, raw.trust, &resolver);
        let session = sections::session(&mut checker, raw.session, &resolver);
        let config = ahp.map(|ahp| Config {
            ahp,
            agent,
            session,
            limits,
            supervisor,
            mcp,
            clients: sections::clients(raw.clients),
            approval,
            trust,
            plugin_roots,
            manifests,
            servers,
            directories,
            data_dir: resolver.data_dir(raw.data_dir),
            path: resolver.config_path(file),
            inputs: settings::Inputs(raw.inputs),
        });
        checker.finish(config)
    }
}
