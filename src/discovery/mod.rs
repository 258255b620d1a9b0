//! Discovery: plugin folders, MCP manifests and watched directories in, AHP customizations
//! (with ranges, load states, stable ids) and server launch specs out. Reads files; no other I/O.

pub mod components;
pub mod configured;
pub mod directory;
pub mod dotenv;
pub mod expand;
pub mod frontmatter;
pub mod icon;
pub mod json;
pub mod manifest;
pub mod mcp;
pub mod plugin;
pub mod server_entry;
pub mod source;
pub mod uri;

use std::fmt;
use std::path::{Path, PathBuf};

use ahp_types::state::{
    CustomizationDegradedState, CustomizationErrorState, CustomizationLoadState,
    CustomizationLoadedState,
};

use crate::spec::{Launch, LaunchError, Problem};

use source::SourceFile;

/// A server some customization declares: what the supervisor will run.
/// `Debug` leaves the launch spec out: it holds secrets.
#[derive(Clone, PartialEq)]
pub struct DeclaredServer {
    /// The `mcpServer` customization id (also the server's identity everywhere else).
    pub id: String,
    /// The name it was declared under.
    pub name: String,
    /// `file:line:col` of the declaration.
    pub declared_at: String,
    /// `false` when declared `disabled`.
    pub enabled: bool,
    /// The expanded launch spec, or why it cannot be used.
    pub launch: Result<Launch, LaunchError>,
    /// The tools it hides from the harness and pre-approves.
    pub tools: crate::spec::ToolFilters,
    /// The id of the plugin or directory whose children show it (`None` for a top-level
    /// server); the catalog fills it in.
    pub container: Option<std::sync::Arc<str>>,
}

impl fmt::Debug for DeclaredServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeclaredServer")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("declared_at", &self.declared_at)
            .field("enabled", &self.enabled)
            .field("launch", &self.launch.as_ref().map(Launch::kind))
            .field("tools", &self.tools)
            .finish()
    }
}

/// At most this many problems are kept per container; the rest are counted.
pub const MAX_PROBLEMS: usize = 100;

/// Problems found while scanning one container.
#[derive(Debug, Default)]
pub struct Problems {
    /// The first [`MAX_PROBLEMS`] reported, in order.
    pub list: Vec<Problem>,
    /// How many more were reported and dropped.
    pub dropped: usize,
    /// What could not be parsed this time (see [`Scan::unparsable`]).
    pub unparsable: Vec<String>,
}

impl Problems {
    /// A problem at a byte offset of `file`.
    pub fn warn(&mut self, file: &SourceFile, offset: usize, message: String) {
        self.warn_at(&file.location(offset), message);
    }

    /// `what` (a file URI, a container id or a server id) did not parse: the servers it
    /// last declared stay as they were.
    pub fn unparsable(&mut self, what: &str) {
        self.unparsable.push(what.to_string());
    }

    /// A problem at a location already formatted.
    pub fn warn_at(&mut self, location: &str, message: String) {
        self.push(Problem {
            location: location.to_string(),
            message,
        });
    }

    /// A problem as found (a file that could not be read, a path outside its folder).
    pub fn push(&mut self, problem: Problem) {
        if self.list.len() < MAX_PROBLEMS {
            self.list.push(problem);
        } else {
            self.dropped += 1;
        }
    }

    /// The container's load state: `loaded`, or `degraded` listing every problem.
    pub fn load_state(&self) -> CustomizationLoadState {
        if self.list.is_empty() {
            CustomizationLoadState::Loaded(CustomizationLoadedState {})
        } else {
            CustomizationLoadState::Degraded(CustomizationDegradedState {
                message: self.summary(),
            })
        }
    }

    /// `error` with every problem listed.
    pub fn error_state(&self) -> CustomizationLoadState {
        CustomizationLoadState::Error(CustomizationErrorState {
            message: self.summary(),
        })
    }

    fn summary(&self) -> String {
        let mut lines: Vec<String> = self.list.iter().map(Problem::to_string).collect();
        if self.dropped > 0 {
            lines.push(format!("… and {} more problems", self.dropped));
        }
        lines.join("\n")
    }
}

/// Looks up the value of `${NAME}`.
pub type EnvLookup = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Everything scanning needs besides the files themselves.
pub struct Context {
    /// Parent of every plugin's `${PLUGIN_DATA}` folder.
    pub data_dir: PathBuf,
    /// Looks up `${VAR}` values (the process environment, plus `AHP_PROXY_EXE`,
    /// `AHP_PROXY_EXAMPLES` and `AHP_PROXY_DATA`).
    pub env: EnvLookup,
}

/// The example-server binary's name (its crate, `example-servers/`, is built next to the proxy).
pub const EXAMPLES_BINARY: &str = "ahp-proxy-example-server";

impl Context {
    /// The production context: the process environment, plus `AHP_PROXY_EXE` (this binary),
    /// `AHP_PROXY_EXAMPLES` (the example-server binary next to it), `AHP_PROXY_DATA` (the
    /// data folder), the working directory (`${cwd}`) and, for `${input:<id>}`, `inputs`
    /// (proxy.toml's `[inputs]`) behind the `AHP_PROXY_INPUT_<ID>` variables.
    pub fn from_process(
        data_dir: PathBuf,
        inputs: &std::collections::BTreeMap<String, String>,
    ) -> Self {
        let inputs: std::collections::HashMap<String, String> = inputs
            .iter()
            .map(|(id, value)| (expand::input_variable(id), value.clone()))
            .collect();
        let cwd = std::env::current_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_else(|_| ".".into());
        let exe = std::env::current_exe().ok();
        let examples = exe.as_ref().map_or_else(
            || EXAMPLES_BINARY.into(),
            |exe| {
                let name = format!("{EXAMPLES_BINARY}{}", std::env::consts::EXE_SUFFIX);
                exe.with_file_name(name).to_string_lossy().into_owned()
            },
        );
        let exe = exe.map_or_else(|| "ahp-proxy".into(), |p| p.to_string_lossy().into_owned());
        let data = data_dir.to_string_lossy().into_owned();
        Self {
            data_dir,
            env: Box::new(move |name| match name {
                "AHP_PROXY_EXE" => Some(exe.clone()),
                "AHP_PROXY_EXAMPLES" => Some(examples.clone()),
                "AHP_PROXY_DATA" => Some(data.clone()),
                expand::CWD_VARIABLE => Some(cwd.clone()),
                _ => std::env::var(name)
                    .ok()
                    .or_else(|| inputs.get(name).cloned()),
            }),
        }
    }

    /// `${PLUGIN_DATA}` for a plugin: `<data_dir>/plugin-data/<name>-<hash of its folder>`,
    /// stable across restarts and distinct for same-named plugins in different folders.
    pub fn plugin_data(&self, name: &str, root: &Path) -> PathBuf {
        let safe: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        let hash = fnv1a(root.as_os_str().as_encoded_bytes());
        self.data_dir
            .join("plugin-data")
            .join(format!("{safe}-{:08x}", hash as u32))
    }
}

/// FNV-1a: a stable (not randomly seeded) hash for folder names.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `path` relative to `base` for messages, or the whole path when it is elsewhere.
pub fn display_path(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// What scanning one unit (a plugin folder, a manifest file, a watched directory) found.
#[derive(Debug, Default)]
pub struct Scan {
    /// Top-level customizations, in a stable order.
    pub customizations: Vec<ahp_types::state::Customization>,
    /// Launch specs of every server those customizations declare.
    pub servers: Vec<DeclaredServer>,
    /// Every problem found (also summarised in the containers' load states).
    pub problems: Vec<Problem>,
    /// Folders and files whose changes should trigger a rescan of this unit.
    pub watched: Vec<PathBuf>,
    /// What could not be parsed this time: a file's URI (nothing in it parsed), a
    /// container's id (its manifest did not parse) or a server's id (its entry was refused).
    /// A rescan keeps the servers they declared last time (`catalog::last_good`), so a
    /// half-typed save stops nothing.
    pub unparsable: Vec<String>,
}
