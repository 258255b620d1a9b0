//! A harness tool call held for approval as the chat shows it (pure): pending confirmation,
//! with its title, a message naming the tool, server, arguments and annotations, its input
//! editable, and the options (allow once, for the session by tool or server, deny).

use ahp_types::actions::ChatToolCallReadyAction;
use ahp_types::common::StringOrMarkdown;
use ahp_types::state::{ConfirmationOption, ConfirmationOptionKind};

use super::{Confirmation, OPTION_DENY, OPTION_ONCE, OPTION_SERVER, OPTION_TOOL};

/// `ready` turned into the pending-confirmation `chat/toolCallReady` `asked` describes.
pub fn pending(ready: ChatToolCallReadyAction, asked: &Confirmation) -> ChatToolCallReadyAction {
    let option = |id: &str, label: &str, kind, group| ConfirmationOption {
        id: id.into(),
        label: label.into(),
        kind,
        group: Some(group),
    };
    ChatToolCallReadyAction {
        invocation_message: StringOrMarkdown::Markdown {
            markdown: asked.message.clone(),
        },
        confirmation_title: Some(StringOrMarkdown::Plain(asked.title.clone())),
        editable: Some(true),
        options: Some(vec![
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
        ]),
        confirmed: None,
        ..ready
    }
}
