//! Asks the user, where they already look, to trust each server awaiting trust: a
//! confirmation in the harness chat (VS Code's card, the console's approvals, `ahp-proxy
//! approve`) saying what it would run, decided only by a client holding the approval key; an
//! approval trusts that definition. Also reads the trust file again when it changes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::host::approvals::Decision;
use crate::mirror::{code_span, Asks, CallStart, Confirmation, Mirror, Outcome, Runner, Ticket};
use crate::supervisor::{Awaiting, AwaitingTrust};
use crate::trust::TrustStore;
use crate::untrusted::Untrusted;

/// How often the trust file is looked at for changes made elsewhere (`ahp-proxy trust`).
const REREAD_EVERY: Duration = Duration::from_secs(1);

/// The tool name a trust question carries in the chat.
pub const TRUST_TOOL: &str = "trust_mcp_server";

/// [`run`] in a task of its own, until `stop`.
pub fn start(
    awaiting: watch::Receiver<Awaiting>,
    trust: Arc<TrustStore>,
    mirror: Mirror,
    stop: &CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let stop = stop.clone();
    tokio::spawn(async move {
        stop.clone()
            .run_until_cancelled(run(awaiting, trust, mirror, stop))
            .await;
    })
}

/// Ask about every server awaiting trust until `shutdown`.
pub async fn run(
    mut awaiting: watch::Receiver<Awaiting>,
    trust: Arc<TrustStore>,
    mirror: Mirror,
    shutdown: CancellationToken,
) {
    // The question open for each fingerprint, and those the user turned down this run.
    let mut asking: HashMap<String, CancellationToken> = HashMap::new();
    let denied: Arc<std::sync::Mutex<HashSet<String>>> = Arc::default();
    let mut reread = tokio::time::interval(REREAD_EVERY);
    loop {
        let now = awaiting.borrow_and_update().clone();
        let waiting: HashSet<&str> = now.values().map(|s| s.fingerprint.as_str()).collect();
        asking.retain(|fingerprint, question| {
            let open = waiting.contains(fingerprint.as_str()) && !question.is_cancelled();
            if !open {
                question.cancel();
            }
            open
        });
        for (id, server) in &now {
            let turned_down =
                (denied.lock().unwrap_or_else(|p| p.into_inner())).contains(&server.fingerprint);
            if asking.contains_key(&server.fingerprint) || turned_down {
                continue;
            }
            let question = shutdown.child_token();
            asking.insert(server.fingerprint.clone(), question.clone());
            let (trust, mirror, denied) = (trust.clone(), mirror.clone(), denied.clone());
            let (id, server) = (id.clone(), server.clone());
            tokio::spawn(async move {
                if let Some(false) = ask(&id, &server, &trust, &mirror, question).await {
                    (denied.lock().unwrap_or_else(|p| p.into_inner())).insert(server.fingerprint);
                }
            });
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = awaiting.changed() => if changed.is_err() { return },
            _ = reread.tick() => {
                trust.refresh();
            }
        }
    }
}

/// Ask once about `server` (`id`): `Some(approved)` when someone decided, `None` when the
/// question was withdrawn (trusted elsewhere, changed, gone) or could not be shown.
async fn ask(
    id: &str,
    server: &AwaitingTrust,
    trust: &TrustStore,
    mirror: &Mirror,
    withdrawn: CancellationToken,
) -> Option<bool> {
    let ticket = mirror
        .begin_client(|call| question(call, id, server))
        .await?;
    let heard = ticket.hold_for_approval()?;
    tokio::select! {
        decision = decided(&ticket, heard) => {
            let decision = decision?;
            let who = decision.client.as_deref().unwrap_or("-");
            tracing::info!(server = %Untrusted(&server.name), client = %Untrusted(who), trusted = decision.approved, "server trust decided");
            if !decision.approved {
                ticket.finish(Outcome::Failed("not trusted: the server stays stopped".into()));
                return Some(false);
            }
            if let Err(error) = trust.trust(&server.fingerprint, &server.name) {
                tracing::warn!(server = %Untrusted(&server.name), file = %trust.path().display(), %error, "the trust decision could not be kept");
                ticket.finish(Outcome::Failed(format!("the decision could not be kept: {error}")));
                return None;
            }
            let text = format!("Trusted; MCP server {:?} starts.", server.name);
            ticket.finish(Outcome::Result(serde_json::json!({"content": [{"type": "text", "text": text}]})));
            Some(true)
        }
        _ = withdrawn.cancelled() => {
            ticket.decide(false, "no longer awaiting trust (trusted elsewhere, changed or removed)");
            None
        }
    }
}

/// The first decision about `ticket`'s call; `None` when no host is left to decide.
async fn decided(ticket: &Ticket, mut heard: broadcast::Receiver<Decision>) -> Option<Decision> {
    loop {
        match heard.recv().await {
            Ok(decision) if ticket.is_about(&decision) && !decision.result => {
                return Some(decision)
            }
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => {
                if let Some(decision) = ticket.decision().filter(|d| !d.result) {
                    return Some(decision);
                }
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        }
    }
}

/// The question as the chat shows it: a call of [`TRUST_TOOL`] on the server, pending
/// confirmation, with what it would run.
fn question(call: u64, id: &str, server: &AwaitingTrust) -> CallStart {
    let input = serde_json::json!({
        "server": server.name,
        "declaredAt": server.declared_at,
        "fingerprint": server.fingerprint,
    });
    let message = format!(
        "MCP server {} is declared in {}, outside proxy.toml: ahp-proxy runs it only once you trust it. It would start this:\n\n```\n{}\n```\n\nApprove to trust this definition and start it (you are asked again if it changes); deny to leave it stopped.",
        code_span(&server.name),
        code_span(&server.declared_at),
        server.described,
    );
    CallStart {
        call,
        runner: Runner::Server {
            id: id.to_string(),
            name: server.name.clone(),
        },
        tool: TRUST_TOOL.into(),
        display_name: "Trust MCP server".into(),
        input: input.to_string(),
        ui: None,
        confirmation: Some(Confirmation {
            title: format!("Trust and run MCP server {}?", code_span(&server.name)),
            message,
            asks: Asks::Trust,
        }),
        era: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_names_the_server_where_it_was_declared_and_what_it_would_run() {
        let server = AwaitingTrust {
            name: "notes".into(),
            declared_at: "/clone/.mcp.json:3:5".into(),
            fingerprint: "ab".repeat(32),
            described: "runs: npx -y notes-server\nwith environment: TOKEN".into(),
        };
        let call = question(7, "file:///clone/.mcp.json#mcp=notes", &server);
        let asked = call.confirmation.expect("a confirmation");
        assert_eq!(asked.title, "Trust and run MCP server `notes`?");
        assert!(asked.message.contains("`/clone/.mcp.json:3:5`"));
        assert!(asked
            .message
            .contains("runs: npx -y notes-server\nwith environment: TOKEN"));
        assert_eq!(call.tool, TRUST_TOOL);
        let input: serde_json::Value = serde_json::from_str(&call.input).unwrap();
        assert_eq!(input["server"], "notes");
        assert_eq!(input["fingerprint"], "ab".repeat(32));
    }
}
