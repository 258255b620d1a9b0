//! Unit tests of `mirror::turns`: bounds, closing, waiting calls and held calls, applied
//! with the official reducers.
use super::*;
use ahp::reducers::{apply_action_to_chat, ReduceOutcome};
use ahp_types::state::{ChatState, ToolCallState};
use serde_json::{json, Value};

fn chat() -> ChatState {
    serde_json::from_value(json!({
        "resource": "ahp-chat:/t", "title": "t", "status": 1,
        "modifiedAt": "2026-01-01T00:00:00.000Z", "turns": []
    }))
    .unwrap()
}

fn call(n: u64) -> CallStart {
    CallStart::example(n)
}

/// Apply actions with the official reducers; every one must apply.
fn apply(state: &mut ChatState, actions: Vec<StateAction>) {
    for action in actions {
        assert!(
            !matches!(action, StateAction::Unknown(_)),
            "unknown action {action:?}"
        );
        let outcome = apply_action_to_chat(state, &action);
        assert_eq!(outcome, ReduceOutcome::Applied, "{action:?}");
    }
}

const T0: &str = "2026-01-01T00:00:00.000Z";

#[test]
fn a_call_paused_for_authorization_resumes_and_completes() {
    let mut state = chat();
    let mut turns = Turns::new();
    apply(&mut state, turns.start(call(1), 0, 0, T0));
    let auth: ahp_types::state::McpAuthRequirement = serde_json::from_value(json!({
        "reason": "insufficientScope", "resource": {"resource": "http://h/mcp"},
        "requiredScopes": ["admin"]
    }))
    .unwrap();
    let (turn, paused) = turns.auth_required(1, auth).expect("in flight");
    assert_eq!(turn, crate::mirror::turn_id(1));
    apply(&mut state, vec![paused]);
    let status = |state: &ChatState| match &state.active_turn.as_ref().unwrap().response_parts[0] {
        ResponsePart::ToolCall(tc) => {
            serde_json::to_value(&tc.tool_call).unwrap()["status"].clone()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(status(&state), "auth-required");
    apply(&mut state, turns.auth_resolved(1));
    assert_eq!(status(&state), "running");
    apply(
        &mut state,
        turns.finish(1, &Outcome::Result(json!({"content": []})), 7, 0, T0),
    );
    assert_eq!(status(&state), "completed");
    assert!(turns
        .auth_required(
            2,
            serde_json::from_value(json!({
        "reason": "required", "resource": {"resource": "http://h/mcp"}}))
            .unwrap()
        )
        .is_none());
}

#[test]
fn concurrent_calls_share_a_turn_that_closes_when_idle() {
    let mut state = chat();
    let mut turns = Turns::new();
    apply(&mut state, turns.start(call(1), 0, 0, T0));
    let by_a_client = CallStamp {
        started_at: "2026-01-01T00:00:01.000Z".into(),
        client_id: Some("console-1".into()),
        ..CallStamp::default()
    };
    apply(
        &mut state,
        turns.start_stamped(
            CallStart {
                era: None,
                ..call(2)
            },
            &by_a_client,
            0,
            1,
            T0,
        ),
    );
    assert!(!turns.idle());
    assert!(turns.close(2, T0).is_empty(), "a busy turn stays open");
    let active = state.active_turn.as_ref().expect("turn open");
    assert_eq!(active.response_parts.len(), 2);
    match &active.response_parts[0] {
        ResponsePart::ToolCall(tc) => match &tc.tool_call {
            ToolCallState::Running(r) => {
                assert_eq!(r.tool_name, "echo");
                assert_eq!(
                    serde_json::to_value(&r.contributor).unwrap(),
                    json!({"kind": "mcp", "customizationId": "file:///m.json#mcp=s"})
                );
                assert_eq!(
                    serde_json::to_value(&r.meta).unwrap(),
                    json!({"ui": {"resourceUri": "ui://v"},
                           "ahp-proxy/call": {"startedAt": T0, "era": "legacy"}})
                );
            }
            other => panic!("expected running, got {other:?}"),
        },
        other => panic!("expected a tool call, got {other:?}"),
    }
    apply(
        &mut state,
        turns.finish(
            2,
            &Outcome::Result(json!({"content": [{"type": "text", "text": "hi"}]})),
            12,
            3,
            T0,
        ),
    );
    apply(
        &mut state,
        turns.finish(1, &Outcome::Failed("boom".into()), 7, 4, T0),
    );
    assert!(turns.idle());
    // Each completed call carries its `ui`, when it began, how long it took, and the era
    // the harness spoke or, for the call an AHP client made, that client.
    let metas: Vec<Value> = state
        .active_turn
        .as_ref()
        .unwrap()
        .response_parts
        .iter()
        .map(|part| match part {
            ResponsePart::ToolCall(tc) => match &tc.tool_call {
                ToolCallState::Completed(c) => serde_json::to_value(&c.meta).unwrap(),
                other => panic!("expected completed, got {other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        metas,
        [
            json!({"ui": {"resourceUri": "ui://v"},
                   "ahp-proxy/call": {"startedAt": T0, "era": "legacy", "durationMs": 7}}),
            json!({"ui": {"resourceUri": "ui://v"},
                   "ahp-proxy/call": {"startedAt": "2026-01-01T00:00:01.000Z",
                                      "clientId": "console-1", "durationMs": 12}}),
        ]
    );
    apply(&mut state, turns.close(40, T0));
    assert!(state.active_turn.is_none());
    assert_eq!(state.turns.len(), 1);
    assert_eq!(state.status & 0b11111, 1, "idle again");
}

#[test]
fn a_full_turn_defers_new_calls_to_the_next_turn() {
    let mut state = chat();
    let mut turns = Turns::new();
    for n in 0..MAX_CALLS_PER_TURN as u64 {
        apply(&mut state, turns.start(call(n), 0, 0, T0));
    }
    assert!(turns.start(call(999), 3, 0, T0).is_empty());
    // The deferred call finishes before its turn exists: it appears complete.
    assert!(turns.finish(999, &Outcome::Cancelled, 7, 1, T0).is_empty());
    for n in 0..MAX_CALLS_PER_TURN as u64 {
        apply(&mut state, turns.finish(n, &Outcome::Cancelled, 7, n, T0));
    }
    // The last call of the full turn ended: that turn completed at once, without waiting
    // for the mirror's linger, and the deferred call opened the next one.
    assert_eq!(state.turns.len(), 1);
    let active = state.active_turn.as_ref().expect("second turn");
    // The skipped-calls note, then the deferred call, already complete.
    assert_eq!(active.response_parts.len(), 2);
    assert!(matches!(
        active.response_parts[0],
        ResponsePart::Markdown(_)
    ));
    match &active.response_parts[1] {
        ResponsePart::ToolCall(tc) => {
            assert!(matches!(tc.tool_call, ToolCallState::Completed(_)))
        }
        other => panic!("{other:?}"),
    }
    assert!(turns.idle());
}

#[test]
fn steady_traffic_keeps_turns_moving_and_holds_no_backlog() {
    // Always one call in flight (a harness calling back to back while the previous
    // answer is on its way): the turn is never idle for the linger, yet turns advance.
    let mut state = chat();
    let mut turns = Turns::new();
    apply(&mut state, turns.start(call(0), 0, 0, T0));
    for n in 1..10_000u64 {
        apply(&mut state, turns.start(call(n), 0, n, T0));
        apply(
            &mut state,
            turns.finish(n - 1, &Outcome::Cancelled, 7, n, T0),
        );
        assert!(
            turns.waiting.len() <= 1,
            "call {n}: {} waiting",
            turns.waiting.len()
        );
    }
    assert!(state.turns.len() <= MAX_TURNS);
    assert!(turns.next_turn > 10_000 / MAX_CALLS_PER_TURN as u64);
    assert_eq!(turns.missed, 0, "every call was shown");
}

#[test]
fn one_slow_call_holds_at_most_max_waiting_calls() {
    let mut state = chat();
    let mut turns = Turns::new();
    for n in 0..MAX_CALLS_PER_TURN as u64 {
        apply(&mut state, turns.start(call(n), 0, 0, T0));
    }
    // Every call but the first ends; thousands more come and go meanwhile.
    for n in 1..MAX_CALLS_PER_TURN as u64 {
        apply(&mut state, turns.finish(n, &Outcome::Cancelled, 7, 1, T0));
    }
    let more = 5_000u64;
    for n in 1_000..1_000 + more {
        apply(&mut state, turns.start(call(n), 0, 2, T0));
        apply(&mut state, turns.finish(n, &Outcome::Cancelled, 7, 2, T0));
    }
    assert_eq!(turns.waiting.len(), MAX_WAITING);
    assert_eq!(turns.missed, more - MAX_WAITING as u64);
    // The slow call ends: the waiting calls fill the next turns at once, the last of
    // them stays open (it lingers like any turn), and it says how many were not shown.
    apply(&mut state, turns.finish(0, &Outcome::Cancelled, 7, 3, T0));
    assert_eq!(turns.waiting.len(), 0);
    assert_eq!(
        state.turns.len(),
        MAX_WAITING / MAX_CALLS_PER_TURN,
        "the slow turn and all but the last of the waiting ones completed"
    );
    let active = state.active_turn.as_ref().expect("the last waiting turn");
    assert_eq!(active.response_parts.len(), MAX_CALLS_PER_TURN);
    let notes: Vec<&ResponsePart> = state
        .turns
        .iter()
        .flat_map(|t| &t.response_parts)
        .filter(|p| matches!(p, ResponsePart::Markdown(_)))
        .collect();
    assert_eq!(notes.len(), 1, "one note for the calls not shown");
}

#[test]
fn history_is_bounded() {
    let mut state = chat();
    let mut turns = Turns::new();
    for n in 0..(MAX_TURNS as u64 + 3) {
        apply(&mut state, turns.start(call(n), 0, n, T0));
        apply(&mut state, turns.finish(n, &Outcome::Cancelled, 7, n, T0));
        apply(&mut state, turns.close(n + 1, T0));
    }
    assert!(state.turns.len() <= MAX_TURNS);
}

#[test]
fn a_call_held_for_approval_is_shown_even_in_a_full_turn() {
    let mut state = chat();
    let mut turns = Turns::new();
    // One never-ending call and 63 quick ones fill the turn.
    for n in 0..MAX_CALLS_PER_TURN as u64 {
        apply(&mut state, turns.start(call(n), 0, 0, T0));
    }
    for n in 1..MAX_CALLS_PER_TURN as u64 {
        apply(&mut state, turns.finish(n, &Outcome::Cancelled, 7, 1, T0));
    }
    // A plain call waits for the next turn; a held one is shown now, pending confirmation.
    apply(&mut state, turns.start(call(500), 0, 2, T0));
    let mut held = call(501);
    held.confirmation = Some(super::super::Confirmation {
        title: "Allow echo on s?".into(),
        message: "The MCP harness wants to call echo".into(),
        asks: super::super::Asks::ToolCall,
    });
    apply(&mut state, turns.start(held, 0, 2, T0));
    let active = state.active_turn.as_ref().expect("the full turn");
    let pending: Vec<&str> = (active.response_parts.iter())
        .filter_map(|part| match part {
            ResponsePart::ToolCall(tc) => match &tc.tool_call {
                ToolCallState::PendingConfirmation(p) => Some(p.tool_call_id.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(pending, [call_id(501).as_str()]);
    assert_eq!(active.response_parts.len(), MAX_CALLS_PER_TURN + 1);
    assert_eq!(turns.waiting.len(), 1, "the plain call waits");
}
