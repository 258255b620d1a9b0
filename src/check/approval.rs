//! What `check` says about `[approval]`: the effective mode, the wait and what an unanswered
//! call becomes, and every per-server and per-tool override (pure).

use serde_json::{json, Value};

use crate::approval::Policy;

/// The header's lines about the policy.
pub fn lines(policy: &Policy) -> String {
    if policy.is_inert() {
        return "approval       never (every tool call goes straight to its server)\n".into();
    }
    let mut out = format!(
        "approval       {}; a call waits {} ms for a decision, then {}\n",
        policy.mode,
        policy.timeout.as_millis(),
        match policy.on_timeout {
            crate::approval::OnTimeout::Deny => "is denied",
            crate::approval::OnTimeout::Allow => "is allowed",
        }
    );
    for (server, rule) in &policy.servers {
        if let Some(mode) = rule.mode {
            out.push_str(&format!("  server {server}: {mode}\n"));
        }
        for (tool, rule) in &rule.tools {
            let mut said = Vec::new();
            if let Some(mode) = rule.mode {
                said.push(mode.to_string());
            }
            if rule.review_result {
                said.push("results reviewed".into());
            }
            if !said.is_empty() {
                out.push_str(&format!("  tool {server}/{tool}: {}\n", said.join(", ")));
            }
        }
    }
    out
}

/// The policy as JSON: `{mode, timeoutMs, onTimeout, servers: {name: {mode, tools: {tool:
/// {mode, reviewResult}}}}}` (a mode not overridden is `null`).
pub fn json(policy: &Policy) -> Value {
    let servers: serde_json::Map<String, Value> = (policy.servers.iter())
        .map(|(name, rule)| {
            let tools: serde_json::Map<String, Value> = (rule.tools.iter())
                .map(|(tool, t)| {
                    let value = json!({
                        "mode": t.mode.map(|m| m.as_str()),
                        "reviewResult": t.review_result,
                    });
                    (tool.clone(), value)
                })
                .collect();
            let value = json!({"mode": rule.mode.map(|m| m.as_str()), "tools": tools});
            (name.clone(), value)
        })
        .collect();
    json!({
        "mode": policy.mode.as_str(),
        "timeoutMs": u64::try_from(policy.timeout.as_millis()).unwrap_or(u64::MAX),
        "onTimeout": policy.on_timeout.as_str(),
        "servers": servers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_says_never() {
        let policy = Policy::default();
        assert!(lines(&policy).starts_with("approval       never"));
        assert_eq!(json(&policy)["mode"], "never");
        assert_eq!(json(&policy)["onTimeout"], "deny");
    }

    #[test]
    fn overrides_are_listed() {
        let mut policy = Policy {
            mode: crate::approval::Mode::Destructive,
            ..Policy::default()
        };
        let mut server = crate::approval::ServerRule {
            mode: Some(crate::approval::Mode::Always),
            ..Default::default()
        };
        server.tools.insert(
            "list".into(),
            crate::approval::ToolRule {
                mode: None,
                review_result: true,
            },
        );
        policy.servers.insert("notes".into(), server);
        let text = lines(&policy);
        assert!(text.starts_with("approval       destructive; a call waits 300000 ms for a decision, then is denied\n"), "{text}");
        assert!(text.contains("  server notes: always\n"), "{text}");
        assert!(
            text.contains("  tool notes/list: results reviewed\n"),
            "{text}"
        );
        let value = json(&policy);
        assert_eq!(value["servers"]["notes"]["mode"], "always");
        assert_eq!(
            value["servers"]["notes"]["tools"]["list"]["reviewResult"],
            true
        );
    }
}
