//! The mirror task: takes call events off the queue in order, runs them through the pure
//! turn bookkeeping, emits the resulting actions into the host, and has the host raise or
//! lift the session's input-needed entry of calls paused for authorization.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::{call_id, CallStamp, Event, Runner, Turns, LINGER};
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
    // The session the chat belongs to, whose servers' `mcp://` channels App calls name.
    let session = host
        .session_of_chat(&chat)
        .unwrap_or_else(|| host.default_session());
    let mut turns = Turns::new();
    let mut linger: Option<tokio::time::Instant> = None;
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
            Some(Event::Start(start, at, client_id)) => {
                let missed = skipped.swap(0, Ordering::Relaxed);
                // A harness's App call names the channel its View is read over; a call an
                // AHP client made on that channel (the View's own, the console's) does not,
                // so that VS Code does not render a second View for it.
                let channel = match &start.runner {
                    Runner::Server { id, .. } if start.ui.is_some() && client_id.is_none() => {
                        Some(crate::host::apps::channel_uri(&session, id))
                    }
                    _ => None,
                };
                let stamp = CallStamp {
                    started_at: iso8601(at),
                    client_id,
                    channel,
                };
                turns.start_stamped(
                    *start,
                    &stamp,
                    missed,
                    now,
                    &crate::host::store::now_iso8601(),
                )
            }
            Some(Event::Finish(call, outcome, took)) => {
                let outcome = outcome.read();
                let took = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
                // A paused call that ends (given up) fails from `auth-required`.
                let actions = turns.finish(
                    call,
                    &outcome,
                    took,
                    now,
                    &crate::host::store::now_iso8601(),
                );
                host.withdraw_paused(&chat, &call_id(call));
                actions
            }
            Some(Event::Review(call, outcome, took)) => {
                let took = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
                turns.review(call, &outcome.read(), took)
            }
            Some(Event::AuthRequired(call, auth)) => {
                if let Some((turn, action)) = turns.auth_required(call, *auth) {
                    if host.emit(&chat, action).is_ok() {
                        host.announce_paused(&chat, &turn, &call_id(call));
                    }
                }
                Vec::new()
            }
            Some(Event::Ended(call)) => turns.ended(call, now, &crate::host::store::now_iso8601()),
            Some(Event::AuthResolved(call)) => {
                host.withdraw_paused(&chat, &call_id(call));
                turns.auth_resolved(call)
            }
            None => turns.close(now, &crate::host::store::now_iso8601()),
        };
        // A call held for approval (or its result for review) is listed in the session's
        // input-needed entries once shown.
        let held = actions.iter().find_map(|action| match action {
            ahp_types::actions::StateAction::ChatToolCallReady(a) if a.confirmed.is_none() => {
                Some((a.turn_id.clone(), a.tool_call_id.clone()))
            }
            ahp_types::actions::StateAction::ChatToolCallComplete(a)
                if a.requires_result_confirmation == Some(true) =>
            {
                Some((a.turn_id.clone(), a.tool_call_id.clone()))
            }
            _ => None,
        });
        for action in actions {
            if let Err(error) = host.emit(&chat, action) {
                tracing::debug!(?error, "tool call not mirrored");
            }
        }
        if let Some((turn, call)) = held {
            host.announce_approval(&chat, &turn, &call);
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

/// `at` as ISO 8601 in milliseconds, like every timestamp the host writes.
fn iso8601(at: std::time::SystemTime) -> String {
    match jiff::Timestamp::try_from(at) {
        Ok(at) => format!("{at:.3}"),
        Err(_) => crate::host::store::now_iso8601(),
    }
}
