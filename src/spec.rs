//! The ground floor: plain data that several layers share (a server's launch spec and why
//! one cannot be used, a configured directory, the kind of content a folder holds, the name-prefix rule, a located
//! problem, a plugin an AHP client published, an enablement's effective value). It imports
//! nothing from the crate, so config, discovery, catalog, supervisor, host and front all
//! depend on it downward.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// How to reach one MCP server. Secret: never logged at info level, never sent over AHP;
/// `Debug` prints only the transport kind.
#[derive(Clone, PartialEq)]
pub enum Launch {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// Program to run.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables.
        env: BTreeMap<String, String>,
        /// Working directory; the config file's folder when absent.
        cwd: Option<PathBuf>,
    },
    /// A remote server over streamable HTTP (`sse: false`) or legacy SSE (`sse: true`).
    Http {
        /// Endpoint URL.
        url: String,
        /// Extra request headers.
        headers: BTreeMap<String, String>,
        /// Legacy HTTP+SSE transport instead of streamable HTTP.
        sse: bool,
    },
}

impl fmt::Debug for Launch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Launch({}, redacted)", self.kind())
    }
}

impl Launch {
    /// `stdio`, `http` or `sse` — safe to log.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Stdio { .. } => "stdio",
            Self::Http { sse: false, .. } => "http",
            Self::Http { sse: true, .. } => "sse",
        }
    }
}

/// Why a declared server cannot be launched: the field of its declaration at fault and
/// why, as users read it (on the wire as the server's `config` error, in `check`, in the
/// terminal). Never a value of the launch spec: only a token or a file name as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchError {
    /// The field at fault (`command`, `args`, `env`, `envFile`, `cwd`, `url`, `headers`);
    /// `None` when the server is not launched at all.
    pub field: Option<&'static str>,
    /// What is wrong with it.
    pub reason: LaunchReason,
}

/// What is wrong with a launch spec's field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchReason {
    /// A `${…}` in it cannot be expanded.
    Unexpanded {
        /// The token as written, e.g. `${ACME_TOKEN}`.
        token: String,
        /// Why, and what to do about it: "is not set", …
        why: String,
    },
    /// The file it names cannot be read.
    Unreadable {
        /// The file as the declaration writes it.
        written: String,
        /// Why: an I/O error kind, "not a regular file", a size …
        why: String,
    },
    /// The server is not launched on purpose: why.
    NotLaunched(&'static str),
}

impl LaunchError {
    /// A `${…}` in `field` cannot be expanded.
    pub fn unexpanded(field: &'static str, token: String, why: String) -> Self {
        Self {
            field: Some(field),
            reason: LaunchReason::Unexpanded { token, why },
        }
    }

    /// The file `field` names (`written`) cannot be read.
    pub fn unreadable(field: &'static str, written: &str, why: String) -> Self {
        Self {
            field: Some(field),
            reason: LaunchReason::Unreadable {
                written: written.to_string(),
                why,
            },
        }
    }

    /// Not launched on purpose.
    pub fn not_launched(why: &'static str) -> Self {
        Self {
            field: None,
            reason: LaunchReason::NotLaunched(why),
        }
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = self.field.unwrap_or("declaration");
        match &self.reason {
            LaunchReason::Unexpanded { token, why } => {
                write!(f, "{token} {why} (used in the server's {field})")
            }
            LaunchReason::Unreadable { written, why } => {
                write!(f, "{field} {written:?} cannot be read ({why})")
            }
            LaunchReason::NotLaunched(why) => write!(f, "not launched: {why}"),
        }
    }
}

impl std::error::Error for LaunchError {}

/// The kinds of content a folder can hold (plugin components, `[[directories]] contents`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentKind {
    /// `skills/<name>/SKILL.md` → `skill`.
    Skill,
    /// `commands/*.md` → `skill` named after the file.
    Command,
    /// `agents/*.md`, `*.agent.md` → `agent`.
    Agent,
    /// `rules/*.mdc`, `*.md`, `*.instructions.md` → `rule`.
    Rule,
    /// `prompts/*.prompt.md`, `*.md` → `prompt`.
    Prompt,
    /// `hooks/*.json` → one `hook` per file.
    Hook,
}

/// A configured directory (`[[directories]]` in proxy.toml).
#[derive(Debug, Clone, PartialEq)]
pub struct DirectorySpec {
    /// The folder, absolute.
    pub path: PathBuf,
    /// Label shown to clients.
    pub name: String,
    /// What its files are.
    pub contents: ContentKind,
    /// Whether clients may write files in it through `resourceWrite` and friends.
    pub writable: bool,
}

/// When tool and prompt names in the aggregated MCP endpoint get their server's prefix
/// (`[mcp] prefix`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamePrefix {
    /// Only names that two or more ready servers share.
    OnCollision,
    /// Every name.
    Always,
}

/// One thing wrong with a file the user wrote (proxy.toml, a manifest, a plugin), located as
/// precisely as the input allows.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// `file:line:col` (1-based), or just a path when there is no position.
    pub location: String,
    /// What is wrong and, where it helps, what is expected or what happened because of it.
    pub message: String,
}

impl Problem {
    /// A problem at `location`.
    pub fn at(location: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            location: location.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

/// A plugin an AHP client publishes in a session (`activeClients[].customizations`): what the
/// host hands the catalog, which reads it like any plugin folder.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedPlugin {
    /// The session it was published in (the only one that shows it).
    pub session: String,
    /// The publishing client's `clientId`.
    pub client: String,
    /// The plugin as the client published it.
    pub plugin: ahp_types::state::ClientPluginCustomization,
}

/// The effective value of an enablement array (its first entry), `None` when it is empty or
/// its first entry is of a kind this version does not know.
pub fn effective_enablement(
    enablement: &[ahp_types::state::CustomizationEnablement],
) -> Option<bool> {
    use ahp_types::state::CustomizationEnablement;
    match enablement.first()? {
        CustomizationEnablement::Session { enabled, .. }
        | CustomizationEnablement::Workspace { enabled, .. }
        | CustomizationEnablement::Global { enabled, .. } => Some(*enabled),
        CustomizationEnablement::Unknown(_) => None,
    }
}

/// Which of a server's tools the harness is offered, and which it may call without asking,
/// as the server's declaration says (`disabledTools`, `includeTools`, `excludeTools`,
/// `alwaysAllow`, `autoApprove`). Names are the server's own tool names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilters {
    /// `disabledTools`: hidden.
    pub disabled: Vec<String>,
    /// `includeTools`: when present, only these are offered.
    pub include: Option<Vec<String>>,
    /// `excludeTools`: hidden (wins over `includeTools`, as in Gemini CLI).
    pub exclude: Vec<String>,
    /// `alwaysAllow` and `autoApprove`: pre-approved (no approval flow asks yet).
    pub pre_approved: Vec<String>,
}

impl ToolFilters {
    /// Whether the harness is not offered tool `name`.
    pub fn hides(&self, name: &str) -> bool {
        let listed = |names: &[String]| names.iter().any(|n| n == name);
        listed(&self.disabled)
            || listed(&self.exclude)
            || self.include.as_deref().is_some_and(|only| !listed(only))
    }

    /// Whether the declaration restricts or pre-approves anything.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}
