//! A harness tool call held for approval as the chat shows it (pure): pending confirmation,
//! with its title, a message naming the tool, server, arguments and annotations, its input
//! editable, and the options (allow once, for the session by tool or server, deny); a
//! server's definition awaiting trust, with its own two (trust and run, do not trust).

use ahp_types::actions::ChatToolCallReadyAction;
use ahp_types::common::StringOrMarkdown;
use ahp_types::state::{ConfirmationOption, ConfirmationOptionKind};

use super::{Asks, Confirmation, OPTION_DENY, OPTION_ONCE, OPTION_SERVER, OPTION_TOOL};

/// `ready` turned into the pending-confirmation `chat/toolCallReady` `asked` describes.
pub fn pending(ready: ChatToolCallReadyAction, asked: &Confirmation) -> ChatToolCallReadyAction {
    let option = |id: &str, label: &str, kind, group| ConfirmationOption {
        id: id.into(),
        label: label.into(),
        kind,
        group: Some(group),
    };
    let trust = asked.asks == Asks::Trust;
    let options = match trust {
        true => vec![
            option(
                OPTION_ONCE,
                "Trust and run",
                ConfirmationOptionKind::Approve,
                1,
            ),
            option(OPTION_DENY, "Do not trust", ConfirmationOptionKind::Deny, 2),
        ],
        false => vec![
            option(
                OPTION_ONCE,
                "Allow once",
                ConfirmationOptionKind::Approve,
                1,
            ),
            option(
                OPTION_TOOL,
                "Allow this tool for this session",
                ConfirmationOptionKind::Approve,
                1,
            ),
            option(
                OPTION_SERVER,
                "Allow this server for this session",
                ConfirmationOptionKind::Approve,
                1,
            ),
            option(OPTION_DENY, "Deny", ConfirmationOptionKind::Deny, 2),
        ],
    };
    ChatToolCallReadyAction {
        invocation_message: StringOrMarkdown::Markdown {
            markdown: asked.message.clone(),
        },
        confirmation_title: Some(StringOrMarkdown::Markdown {
            markdown: asked.title.clone(),
        }),
        editable: Some(!trust),
        options: Some(options),
        confirmed: None,
        ..ready
    }
}

/// `text` as a Markdown code span, shown as written (VS Code renders a confirmation title
/// as Markdown, where `add_note` loses its underscores): fenced by one backtick more than the
/// longest run inside, padded with a space when it starts or ends with one (CommonMark).
pub fn code_span(text: &str) -> String {
    if text.is_empty() {
        return "` `".into();
    }
    // The longest run of backticks inside (most names have none: one pass finds out).
    let (mut longest, mut run) = (0, 0);
    for byte in text.bytes() {
        run = if byte == b'`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    // CommonMark takes one space off each end when both have one: a name that starts or
    // ends with a backtick or a space keeps it.
    let edges = |c: char| c == '`' || c == ' ';
    let pad = if text.starts_with(edges) || text.ends_with(edges) {
        " "
    } else {
        ""
    };
    let mut span = String::with_capacity(text.len() + 2 * (longest + 2));
    let fence = |span: &mut String| (0..=longest).for_each(|_| span.push('`'));
    fence(&mut span);
    span.push_str(pad);
    span.push_str(text);
    span.push_str(pad);
    fence(&mut span);
    span
}

#[cfg(test)]
mod tests {
    use ahp::reducers::{apply_action_to_chat, ReduceOutcome};
    use ahp_types::state::{ChatState, ResponsePart, ToolCallState};
    use serde_json::json;

    use crate::mirror::{CallStart, Outcome, Turns};

    use super::{code_span, pending};
    use crate::mirror::{Asks, Confirmation};

    #[test]
    fn a_trust_question_offers_trust_or_not_and_nothing_to_edit() {
        let ready: ahp_types::actions::ChatToolCallReadyAction = serde_json::from_value(json!({
            "turnId": "t", "toolCallId": "c", "invocationMessage": "x", "confirmed": "user-action"
        }))
        .unwrap();
        let asked = |asks| Confirmation {
            title: "t".into(),
            message: "m".into(),
            asks,
        };
        let labels = |action: &ahp_types::actions::ChatToolCallReadyAction| -> Vec<String> {
            (action.options.iter().flatten())
                .map(|o| o.label.clone())
                .collect()
        };
        let trust = pending(ready.clone(), &asked(Asks::Trust));
        assert_eq!(labels(&trust), ["Trust and run", "Do not trust"]);
        assert_eq!(trust.editable, Some(false));
        let call = pending(ready, &asked(Asks::ToolCall));
        assert_eq!(labels(&call).len(), 4);
        assert_eq!(call.editable, Some(true));
    }

    #[test]
    fn a_code_span_shows_a_name_as_written() {
        assert_eq!(code_span("add_note"), "`add_note`");
        assert_eq!(code_span("*bold* <b>"), "`*bold* <b>`");
        assert_eq!(code_span("a`b"), "``a`b``");
        assert_eq!(code_span("a``b`"), "``` a``b` ```");
        assert_eq!(code_span("`a"), "`` `a ``");
        assert_eq!(code_span(" a"), "`  a `");
        assert_eq!(code_span(""), "` `");
    }

    /// A result held for review, as the official reducers see it: pending result
    /// confirmation, its call in flight (the turn open) until it ends in the chat.
    #[test]
    fn a_reviewed_result_waits_in_the_open_turn_until_it_ends_in_the_chat() {
        let mut state: ChatState = serde_json::from_value(json!({
            "resource": "ahp-chat:/t", "title": "t", "status": 1,
            "modifiedAt": "2026-01-01T00:00:00.000Z", "turns": []
        }))
        .unwrap();
        let t0 = "2026-01-01T00:00:00.000Z";
        let mut turns = Turns::new();
        let result = Outcome::Result(json!({"content": [{"type": "text", "text": "r"}]}));
        let actions = (turns.start(CallStart::example(1), 0, 0, t0).into_iter())
            .chain(turns.review(1, &result, 5));
        for action in actions {
            assert_eq!(
                apply_action_to_chat(&mut state, &action),
                ReduceOutcome::Applied
            );
        }
        let tc = match &state.active_turn.as_ref().unwrap().response_parts[0] {
            ResponsePart::ToolCall(tc) => tc.tool_call.clone(),
            other => panic!("{other:?}"),
        };
        assert!(
            matches!(tc, ToolCallState::PendingResultConfirmation(_)),
            "{tc:?}"
        );
        assert!(!turns.idle());
        assert!(turns.ended(1, 10, t0).is_empty());
        assert!(turns.idle());
        // Not in flight: nothing to show.
        assert!(turns.review(2, &result, 5).is_empty());
    }
}
