//! The start-up banner: which config was read, where AHP and MCP are served, what was found.
//! Pure: facts in, lines out; `serve` prints them (or logs them as one JSON event). The
//! console's and VS Code's URLs carry the approval key (or the token) only where `serve`
//! says it may be shown.

use std::path::PathBuf;

/// What a person starting the proxy wants to know first.
#[derive(Debug, Clone, Default)]
pub struct Banner {
    /// The config file read, or `None` when none was found and every key took its default.
    pub config: Option<PathBuf>,
    /// `ws://…` of the AHP endpoint.
    pub ahp_url: String,
    /// Why the AHP endpoint is not where the config said (a fallback), if it is not.
    pub ahp_note: Option<String>,
    /// What to paste into VS Code's **Agents: Add Remote Agent Host…** (the token in `tkn`
    /// when one is needed and the banner goes to a terminal); not in the JSON log event.
    pub vscode_url: Option<String>,
    /// The aggregated MCP endpoint over HTTP, when the HTTP front is on.
    pub mcp_url: Option<String>,
    /// Whether that endpoint needs its access token (said, never shown).
    pub mcp_token: bool,
    /// Whether MCP is also served on stdin/stdout.
    pub stdio: bool,
    /// The web console's URL (`http://` at the AHP address; the key in `token` when shown).
    pub console_url: Option<String>,
    /// Plugin containers found (plugin folders, manifests, inline plugins).
    pub plugins: usize,
    /// Watched directories.
    pub directories: usize,
    /// Declared servers.
    pub servers: usize,
    /// Declared servers whose launch spec cannot be used (each is also logged).
    pub servers_in_error: usize,
    /// Problems found in the files read (each is also logged).
    pub problems: usize,
    /// The names of the servers that wait for the user's trust before they run.
    pub awaiting_trust: Vec<String>,
}

impl Banner {
    /// The banner as lines of text, without colour.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![format!("ahp-proxy {}", env!("CARGO_PKG_VERSION"))];
        let config = match &self.config {
            Some(path) => path.display().to_string(),
            None => "none found (proxy.toml here or in a folder above); every key has its default"
                .into(),
        };
        lines.push(format!("  config   {config}"));
        let note = self
            .ahp_note
            .as_ref()
            .map(|n| format!("  ({n})"))
            .unwrap_or_default();
        lines.push(format!("  AHP      {}{note}", self.ahp_url));
        lines.extend(self.vscode_line());
        let mut mcp: Vec<String> = Vec::new();
        if self.stdio {
            mcp.push("stdin/stdout".into());
        }
        if let Some(url) = &self.mcp_url {
            let token = if self.mcp_token {
                "; token required"
            } else {
                ""
            };
            mcp.push(format!("{url} (one server: {url}/<server>{token})"));
        }
        if mcp.is_empty() {
            mcp.push("off ([mcp] http = false)".into());
        }
        lines.push(format!("  MCP      {}", mcp.join(", ")));
        if let Some(console) = &self.console_url {
            lines.push(format!("  console  {console}"));
        }
        let mut found = format!(
            "{} plugin{}, {} server{}",
            self.plugins,
            plural(self.plugins),
            self.servers,
            plural(self.servers)
        );
        if self.directories > 0 {
            found.push_str(&format!(
                ", {} director{}",
                self.directories,
                if self.directories == 1 { "y" } else { "ies" }
            ));
        }
        if self.servers_in_error > 0 {
            found.push_str(&format!(
                "; {} server{} cannot start (see the warnings above)",
                self.servers_in_error,
                plural(self.servers_in_error)
            ));
        }
        if self.problems > 0 {
            found.push_str(&format!(
                "; {} problem{} in the files read (see the warnings above)",
                self.problems,
                plural(self.problems)
            ));
        }
        lines.push(format!("  found    {found}"));
        if !self.awaiting_trust.is_empty() {
            lines.push(format!(
                "  trust    {} await your trust before they run: {} (`ahp-proxy trust` lists what each would run; approve in the console or VS Code, or `ahp-proxy trust NAME`)",
                self.awaiting_trust.len(),
                self.awaiting_trust.join(", ")
            ));
        }
        lines.push(format!(
            "  status   ahp-proxy status --url {} (in another terminal); Ctrl-C stops",
            self.ahp_url
        ));
        lines
    }
}

impl Banner {
    /// The console's and VS Code's URLs for the AHP endpoint at `addr`: with `secret` (the
    /// token, or the approval key: what lets a client decide held calls) when it may be
    /// `shown`, else saying that `ahp-proxy status` prints them.
    pub fn urls(&mut self, addr: std::net::SocketAddr, secret: Option<&str>, shown: bool) {
        let console = format!("http://{addr}/");
        let ahp = format!("ws://{addr}");
        match (secret, shown) {
            (Some(secret), true) => {
                let escaped: String = form_urlencoded::byte_serialize(secret.as_bytes()).collect();
                self.console_url = Some(format!("{console}?token={escaped}"));
                self.vscode_url = Some(crate::ahp::presented::vscode_url(&ahp, Some(secret)));
            }
            (Some(_), false) => {
                self.console_url = Some(format!(
                    "{console} (`ahp-proxy status` prints it with the key, to approve from it)"
                ));
                self.vscode_url =
                    Some("`ahp-proxy status` prints it (the key stays out of logs)".into());
            }
            (None, _) => {
                self.console_url = Some(console);
                self.vscode_url = Some(ahp);
            }
        }
    }

    /// The line saying what to paste into VS Code, when there is a URL for it.
    fn vscode_line(&self) -> Option<String> {
        let url = self.vscode_url.as_ref()?;
        Some(format!(
            "  VS Code  {url}  (Agents: Add Remote Agent Host…)"
        ))
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_says_where_everything_is() {
        let banner = Banner {
            config: None,
            ahp_url: "ws://127.0.0.1:8765".into(),
            mcp_url: Some("http://127.0.0.1:8766/mcp".into()),
            plugins: 1,
            servers: 3,
            servers_in_error: 1,
            ..Banner::default()
        };
        let text = banner.lines().join("\n");
        assert!(text.contains("config   none found"), "{text}");
        assert!(text.contains("AHP      ws://127.0.0.1:8765\n"), "{text}");
        assert!(
            text.contains("MCP      http://127.0.0.1:8766/mcp (one server"),
            "{text}"
        );
        assert!(text.contains("found    1 plugin, 3 servers; 1 server cannot start"));
        assert!(
            !text.contains("console"),
            "no console line without a console"
        );
        assert!(!text.contains("trust"), "nothing awaits trust: {text}");
        let waiting = Banner {
            awaiting_trust: vec!["calc".into(), "notes".into()],
            ..banner.clone()
        };
        let asked = waiting.lines().join("\n");
        assert!(
            asked.contains("  trust    2 await your trust before they run: calc, notes"),
            "{asked}"
        );
        assert!(!text.contains("VS Code"), "{text}");
        let guarded = Banner {
            mcp_token: true,
            ..banner.clone()
        };
        let text = guarded.lines().join("\n");
        assert!(
            text.contains("/mcp (one server: http://127.0.0.1:8766/mcp/<server>; token required)"),
            "{text}"
        );
        let for_vscode = Banner {
            vscode_url: Some("ws://127.0.0.1:8765/?tkn=t".into()),
            ..banner
        };
        let text = for_vscode.lines().join("\n");
        assert!(
            text.contains(
                "  VS Code  ws://127.0.0.1:8765/?tkn=t  (Agents: Add Remote Agent Host…)"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_key_is_in_the_urls_only_where_it_may_be_shown() {
        let addr: std::net::SocketAddr = "127.0.0.1:8765".parse().unwrap();
        let key = "0123456789abcdef0123456789abcdef";
        let mut banner = Banner::default();
        banner.urls(addr, Some(key), true);
        let text = banner.lines().join("\n");
        assert!(
            text.contains(&format!("  console  http://127.0.0.1:8765/?token={key}\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("  VS Code  ws://127.0.0.1:8765/?tkn={key}  ")),
            "{text}"
        );
        banner.urls(addr, Some(key), false);
        let text = banner.lines().join("\n");
        assert!(!text.contains(key), "{text}");
        assert!(
            text.contains("  console  http://127.0.0.1:8765/ (`ahp-proxy status` prints it"),
            "{text}"
        );
        assert!(
            text.contains("  VS Code  `ahp-proxy status` prints it"),
            "{text}"
        );
    }
}
