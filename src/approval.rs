//! The approval policy, pure: which harness tool calls wait for an AHP client's decision
//! (`[approval]`'s mode with its per-server and per-tool overrides) and whose results do.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// When a harness tool call waits for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Never: the call goes straight to its server (the default).
    #[default]
    Never,
    /// Unless the tool is annotated `readOnlyHint: true` or pre-approved.
    Destructive,
    /// Unless the tool is pre-approved.
    Always,
}

impl Mode {
    /// `mode` as `proxy.toml` writes it.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "never" => Some(Self::Never),
            "destructive" => Some(Self::Destructive),
            "always" => Some(Self::Always),
            _ => None,
        }
    }

    /// How `proxy.toml` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Never => "never",
            Self::Destructive => "destructive",
            Self::Always => "always",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happens to a call nobody approved or denied in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnTimeout {
    /// Denied (the default).
    #[default]
    Deny,
    /// Sent on to its server.
    Allow,
}

impl OnTimeout {
    /// `on_timeout` as `proxy.toml` writes it.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "deny" => Some(Self::Deny),
            "allow" => Some(Self::Allow),
            _ => None,
        }
    }

    /// How `proxy.toml` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Allow => "allow",
        }
    }
}

/// `[approval.servers.<name>.tools.<tool>]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolRule {
    /// Its own mode (else its server's).
    pub mode: Option<Mode>,
    /// Whether its results wait for a client's review (`requiresResultConfirmation`).
    pub review_result: bool,
}

/// `[approval.servers.<name>]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerRule {
    /// Its own mode (else `[approval] mode`).
    pub mode: Option<Mode>,
    /// Per-tool rules, by the tool's name at its server.
    pub tools: BTreeMap<String, ToolRule>,
}

/// `[approval]`: the whole policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The mode of every server without its own.
    pub mode: Mode,
    /// How long a call waits for a decision.
    pub timeout: Duration,
    /// What an unanswered call becomes.
    pub on_timeout: OnTimeout,
    /// Per-server rules, by the server's declared name.
    pub servers: BTreeMap<String, ServerRule>,
}

/// The default wait for a decision.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

impl Default for Policy {
    fn default() -> Self {
        Self {
            mode: Mode::Never,
            timeout: DEFAULT_TIMEOUT,
            on_timeout: OnTimeout::Deny,
            servers: BTreeMap::new(),
        }
    }
}

/// What the policy says of one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Verdict {
    /// The call waits for approval.
    pub ask: bool,
    /// Its result waits for review.
    pub review_result: bool,
}

/// What is known of a tool when its call is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Facts {
    /// Annotated `readOnlyHint: true`.
    pub read_only: bool,
    /// In its server's `alwaysAllow` / `autoApprove`.
    pub pre_approved: bool,
}

impl Policy {
    /// Whether nothing ever waits (today's pass-through, the default).
    pub fn is_inert(&self) -> bool {
        self.mode == Mode::Never
            && self.servers.values().all(|server| {
                server.mode.is_none_or(|m| m == Mode::Never)
                    && server
                        .tools
                        .values()
                        .all(|t| t.mode.is_none_or(|m| m == Mode::Never) && !t.review_result)
            })
    }

    /// The mode of tool `tool` of server `server`, overrides applied.
    pub fn mode_of(&self, server: &str, tool: &str) -> Mode {
        let rule = self.servers.get(server);
        rule.and_then(|s| s.tools.get(tool))
            .and_then(|t| t.mode)
            .or_else(|| rule.and_then(|s| s.mode))
            .unwrap_or(self.mode)
    }

    /// Judge a call of tool `tool` of server `server`.
    pub fn judge(&self, server: &str, tool: &str, facts: Facts) -> Verdict {
        let ask = match self.mode_of(server, tool) {
            Mode::Never => false,
            Mode::Destructive => !facts.read_only && !facts.pre_approved,
            Mode::Always => !facts.pre_approved,
        };
        let review_result = (self.servers.get(server))
            .and_then(|s| s.tools.get(tool))
            .is_some_and(|t| t.review_result);
        Verdict { ask, review_result }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        let mut tools = BTreeMap::new();
        tools.insert(
            "read".to_string(),
            ToolRule {
                mode: Some(Mode::Always),
                review_result: true,
            },
        );
        let mut servers = BTreeMap::new();
        servers.insert(
            "notes".to_string(),
            ServerRule {
                mode: Some(Mode::Destructive),
                tools,
            },
        );
        Policy {
            mode: Mode::Never,
            servers,
            ..Policy::default()
        }
    }

    #[test]
    fn the_default_never_asks() {
        let policy = Policy::default();
        assert!(policy.is_inert());
        let verdict = policy.judge("any", "tool", Facts::default());
        assert_eq!(verdict, Verdict::default());
    }

    #[test]
    fn the_tool_overrides_the_server_which_overrides_the_default() {
        let policy = policy();
        assert!(!policy.is_inert());
        assert_eq!(policy.mode_of("other", "x"), Mode::Never);
        assert_eq!(policy.mode_of("notes", "x"), Mode::Destructive);
        assert_eq!(policy.mode_of("notes", "read"), Mode::Always);
    }

    #[test]
    fn destructive_spares_read_only_and_pre_approved_tools() {
        let policy = policy();
        let judge = |read_only, pre_approved| {
            let facts = Facts {
                read_only,
                pre_approved,
            };
            policy.judge("notes", "write", facts).ask
        };
        assert!(judge(false, false));
        assert!(!judge(true, false));
        assert!(!judge(false, true));
    }

    #[test]
    fn always_spares_only_pre_approved_tools() {
        let policy = policy();
        let read_only = Facts {
            read_only: true,
            pre_approved: false,
        };
        assert_eq!(
            policy.judge("notes", "read", read_only),
            Verdict {
                ask: true,
                review_result: true
            }
        );
        let pre = Facts {
            read_only: false,
            pre_approved: true,
        };
        assert!(!policy.judge("notes", "read", pre).ask);
    }

    #[test]
    fn a_result_review_alone_is_not_inert() {
        let mut policy = Policy::default();
        let mut server = ServerRule::default();
        server.tools.insert(
            "t".into(),
            ToolRule {
                mode: None,
                review_result: true,
            },
        );
        policy.servers.insert("s".into(), server);
        assert!(!policy.is_inert());
        assert!(policy.judge("s", "t", Facts::default()).review_result);
        assert!(!policy.judge("s", "t", Facts::default()).ask);
    }
}
