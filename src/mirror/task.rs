//! The mirror task: takes call events off the queue in order, runs them through the pure
//! turn bookkeeping, emits the resulting actions into the host, and raises or lifts the
//! session's input-needed entry of calls paused for authorization.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp_types::actions::StateAction;
use ahp_types::state::ResponsePart;
use tokio::sync::mpsc;

use super::{call_id, Event, Turns, LINGER};
use crate::host::Host;

/// How long the task lets events gather once it handled some (with several worker threads):
/// a busy front then hands it calls in batches instead of waking it, and often a second
/// thread, twice per call. AHP clients see the same actions, at most this much later.
const GATHER: Duration = Duration::from_millis(1);

pub(super) async fn run(
    host: Arc<Host>,
    chat: String,
    mut rx: mpsc::Receiver<Event>,
    skipped: Arc<AtomicU64>,
) {
    let epoch = Instant::now();
    let mut turns = Turns::new();
    let mut linger: Option<tokio::time::Instant> = None;
    // Calls shown as waiting for authorization (each with a session input-needed entry).
    let mut paused: HashSet<u64> = HashSet::new();
    let lift = |host: &Host, call: u64| {
        let removed = StateAction::SessionInputNeededRemoved(
            ahp_types::actions::SessionInputNeededRemovedAction {
                id: input_id(&chat, call),
            },
        );
        let _ = host.emit(crate::host::DEFAULT_SESSION_URI, removed);
    };
    // With one worker thread a wake costs no hand-off between threads, and a batch would
    // make the calls answered on that thread wait behind it: events are handled as they come.
    let gathers = tokio::runtime::Handle::current().metrics().num_workers() > 1;
    // Whether events came since the task last let some gather.
    let mut handled = false;
    loop {
        let event = match rx.try_recv() {
            Ok(event) => Some(event),
            Err(mpsc::error::TryRecvError::Empty) if handled && gathers => {
                handled = false;
                tokio::time::sleep(GATHER).await;
                continue;
            }
            Err(_) => tokio::select! {
                event = rx.recv() => match event {
                    Some(event) => Some(event),
                    None => break,
                },
                _ = async {
                    match linger {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => None,
            },
        };
        handled |= event.is_some();
        let now = epoch.elapsed().as_millis() as u64;
        if event.is_none() {
            linger = None;
        }
        let actions = match event {
            Some(Event::Start(start)) => {
                let missed = skipped.swap(0, Ordering::Relaxed);
                turns.start(start, missed, now, &crate::host::store::now_iso8601())
            }
            Some(Event::Finish(call, outcome)) => {
                let outcome = outcome.read();
                // A paused call that ends (given up) fails from `auth-required`.
                let actions = turns.finish(call, &outcome, now, &crate::host::store::now_iso8601());
                if paused.remove(&call) {
                    lift(&host, call);
                }
                actions
            }
            Some(Event::AuthRequired(call, auth)) => {
                if let Some((turn, action)) = turns.auth_required(call, *auth) {
                    if host.emit(&chat, action).is_ok() {
                        raise_input_needed(&host, &chat, &turn, call);
                        paused.insert(call);
                    }
                }
                Vec::new()
            }
            Some(Event::AuthResolved(call)) => {
                if paused.remove(&call) {
                    lift(&host, call);
                }
                turns.auth_resolved(call)
            }
            None => turns.close(now, &crate::host::store::now_iso8601()),
        };
        for action in actions {
            if let Err(error) = host.emit(&chat, action) {
                tracing::debug!(?error, "tool call not mirrored");
            }
        }
        // The countdown starts when the turn becomes idle; events that leave it idle (a call
        // waiting for the next turn, an authorization) do not restart it.
        linger = if turns.idle() {
            linger.or_else(|| Some(tokio::time::Instant::now() + LINGER))
        } else {
            None
        };
    }
    // The front is gone: close the open turn so no call stays running in clients' eyes.
    let now = epoch.elapsed().as_millis() as u64;
    for action in turns.shutdown(now) {
        let _ = host.emit(&chat, action);
    }
}

/// The session-level entry for call `call` of `chat` waiting for authorization.
fn input_id(chat: &str, call: u64) -> String {
    format!("{chat}#{}", call_id(call))
}

/// Surface a paused call at the session level (`session/inputNeededSet`, kind
/// `toolAuthentication`), with the tool call as the chat now holds it.
fn raise_input_needed(host: &Host, chat: &str, turn: &str, call: u64) {
    use ahp_types::state::{SnapshotState, ToolCallState};
    let Some(snapshot) = host.snapshot(chat) else {
        return;
    };
    let SnapshotState::Chat(state) = snapshot.state else {
        return;
    };
    let id = call_id(call);
    let paused = state
        .active_turn
        .iter()
        .flat_map(|t| &t.response_parts)
        .find_map(|p| match p {
            ResponsePart::ToolCall(t) => match &t.tool_call {
                ToolCallState::AuthRequired(a) if a.tool_call_id == id => Some((**a).clone()),
                _ => None,
            },
            _ => None,
        });
    let Some(tool_call) = paused else {
        return;
    };
    let request = ahp_types::state::SessionInputRequest::ToolAuthentication(Box::new(
        ahp_types::state::SessionToolAuthenticationRequest {
            id: input_id(chat, call),
            chat: chat.to_string(),
            turn_id: turn.to_string(),
            tool_call,
        },
    ));
    let set = StateAction::SessionInputNeededSet(Box::new(
        ahp_types::actions::SessionInputNeededSetAction { request },
    ));
    if let Err(error) = host.emit(crate::host::DEFAULT_SESSION_URI, set) {
        tracing::debug!(?error, "input-needed not raised");
    }
}
