//! Servers declared in proxy.toml itself: bare top-level `mcpServer` customizations whose
//! `uri` is the config file and whose `range` spans their `[servers.<name>]` table.

use std::path::PathBuf;

use ahp_types::state::{Customization, McpServerCustomization, TextRange};

use super::expand::{expand_field, expand_remote, Vars};
use super::{DeclaredServer, Scan};
use crate::config::ServerConfig;
use crate::spec::{Launch, LaunchError};

/// proxy.toml's servers and where the file is.
#[derive(Debug, Clone)]
pub struct Configured {
    /// The config file, absolute.
    pub file: PathBuf,
    /// Its `[servers.*]`.
    pub servers: Vec<ServerConfig>,
}

/// Expand and project proxy.toml's servers.
pub fn scan_configured(configured: &Configured, ctx: &super::Context) -> Scan {
    let uri = super::uri::file_uri(&configured.file);
    let folder = configured
        .file
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut scan = Scan {
        watched: Vec::new(),
        ..Scan::default()
    };
    for server in &configured.servers {
        let data = ctx
            .plugin_data(&server.name, &configured.file)
            .to_string_lossy()
            .into_owned();
        let vars = Vars {
            plugin_root: &folder,
            plugin_data: &data,
            workspace: &folder,
            env: &*ctx.env,
        };
        let launch = expand_launch(&server.transport, &vars);
        let id = format!("{uri}#mcp={}", super::uri::fragment_component(&server.name));
        let state = super::mcp::initial_state(&launch, server.enabled);
        scan.customizations
            .push(Customization::McpServer(Box::new(McpServerCustomization {
                id: id.clone(),
                uri: uri.clone(),
                name: server.name.clone(),
                icons: None,
                range: Some(TextRange::clone(&server.range)),
                meta: None,
                enablement: super::mcp::declared_enablement(server.enabled),
                state,
                channel: None,
                mcp_app: None,
            })));
        scan.servers.push(DeclaredServer {
            id,
            name: server.name.clone(),
            declared_at: server.declared_at.clone(),
            enabled: server.enabled,
            launch,
            tools: server.tools.clone(),
            container: None,
        });
    }
    scan
}

/// Expand every `${…}` of a launch spec; the error names the token and the field.
pub fn expand_launch(launch: &Launch, vars: &Vars<'_>) -> Result<Launch, LaunchError> {
    let x = |field: &'static str, text: &str| expand_field(field, text, vars);
    match launch {
        Launch::Stdio {
            command,
            args,
            env,
            cwd,
        } => Ok(Launch::Stdio {
            command: x("command", command)?,
            args: args
                .iter()
                .map(|a| x("args", a))
                .collect::<Result<_, _>>()?,
            env: env
                .iter()
                .map(|(k, v)| Ok((k.clone(), x("env", v)?)))
                .collect::<Result<_, LaunchError>>()?,
            cwd: match cwd {
                Some(cwd) => Some(PathBuf::from(x("cwd", &cwd.to_string_lossy())?)),
                None => Some(PathBuf::from(vars.plugin_root)),
            },
        }),
        Launch::Http { url, headers, sse } => expand_remote(url, headers, *sse, vars),
    }
}
