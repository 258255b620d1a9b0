//! MCP tool results as AHP tool call results: content blocks mapped, large ones cut or
//! described, so a mirrored call never carries more than the mirror's limits.

use ahp_types::state::{
    ToolCallResult, ToolResultContent, ToolResultEmbeddedResourceContent,
    ToolResultResourceContent, ToolResultTextContent,
};
use serde_json::Value;

use super::wording::Subject;
use super::{Outcome, MAX_BINARY, MAX_TEXT};

/// An MCP outcome of a call of `subject` as an AHP tool call result: content blocks mapped
/// (text stays text, images and audio and blobs become embedded resources, resource links
/// resource refs), large ones cut or described, `structuredContent` kept when it is an
/// object; its past-tense message names the tool and who ran it.
pub fn tool_call_result(outcome: &Outcome, subject: &Subject) -> ToolCallResult {
    let past_tense_message = subject.past_tense(outcome);
    match outcome {
        Outcome::Raw(text) => tool_call_result(&Outcome::Raw(text.clone()).read(), subject),
        Outcome::Result(result) => {
            let failed = result.get("isError").and_then(Value::as_bool) == Some(true);
            let content: Vec<ToolResultContent> = result
                .get("content")
                .and_then(Value::as_array)
                .map(|blocks| blocks.iter().filter_map(content_block).collect())
                .unwrap_or_default();
            let structured = result
                .get("structuredContent")
                .and_then(Value::as_object)
                .filter(|o| Value::Object((*o).clone()).to_string().len() <= MAX_TEXT * 4)
                .cloned();
            ToolCallResult {
                success: !failed,
                past_tense_message,
                content: Some(content),
                structured_content: structured,
                error: None,
            }
        }
        Outcome::Failed(message) => ToolCallResult {
            success: false,
            past_tense_message,
            content: None,
            structured_content: None,
            error: Some(error(&cut(message, MAX_TEXT), None)),
        },
        Outcome::Cancelled => ToolCallResult {
            success: false,
            past_tense_message,
            content: None,
            structured_content: None,
            error: Some(error("the harness cancelled the call", Some("cancelled"))),
        },
    }
}

/// A `ToolCallResult.error`: `{"message", "code"?}`.
fn error(message: &str, code: Option<&str>) -> Value {
    let mut error = serde_json::Map::new();
    error.insert("message".into(), Value::from(message));
    if let Some(code) = code {
        error.insert("code".into(), Value::from(code));
    }
    Value::Object(error)
}

fn content_block(block: &Value) -> Option<ToolResultContent> {
    let text = |t: &str| {
        ToolResultContent::Text(ToolResultTextContent {
            text: cut(t, MAX_TEXT),
        })
    };
    let binary = |data: &str, mime: &str| {
        if data.len() <= MAX_BINARY {
            ToolResultContent::EmbeddedResource(ToolResultEmbeddedResourceContent {
                data: data.to_string(),
                content_type: mime.to_string(),
            })
        } else {
            text(&format!(
                "[{mime}, {} bytes of base64, not mirrored]",
                data.len()
            ))
        }
    };
    let str_of = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    match block.get("type").and_then(Value::as_str)? {
        "text" => Some(text(
            block.get("text").and_then(Value::as_str).unwrap_or(""),
        )),
        "image" | "audio" => Some(binary(
            block.get("data").and_then(Value::as_str).unwrap_or(""),
            block
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("application/octet-stream"),
        )),
        "resource" => {
            let resource = block.get("resource")?;
            let mime = str_of(resource, "mimeType");
            match (str_of(resource, "text"), str_of(resource, "blob")) {
                (Some(t), _) => Some(text(&t)),
                (None, Some(blob)) => Some(binary(
                    &blob,
                    mime.as_deref().unwrap_or("application/octet-stream"),
                )),
                (None, None) => None,
            }
        }
        "resource_link" => Some(ToolResultContent::Resource(ToolResultResourceContent {
            uri: str_of(block, "uri")?,
            size_hint: block.get("size").and_then(Value::as_i64),
            content_type: str_of(block, "mimeType"),
            nonce: None,
        })),
        _ => None,
    }
}

/// `text` cut to at most `max` bytes (on a character boundary), saying how much was cut.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… ({} more bytes not shown)",
        &text[..end],
        text.len() - end
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::CallStart;
    use serde_json::json;

    fn tool_call_result(outcome: &Outcome) -> ToolCallResult {
        super::tool_call_result(outcome, &Subject::of(&CallStart::example(1)))
    }

    #[test]
    fn results_map_to_ahp_content_with_limits() {
        let result = tool_call_result(&Outcome::Result(json!({
            "content": [
                {"type": "text", "text": "x".repeat(MAX_TEXT + 10)},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource_link", "uri": "file:///a", "name": "a", "mimeType": "text/plain"},
                {"type": "resource", "resource": {"uri": "x://b", "blob": "AAEC", "mimeType": "application/x"}},
                {"type": "mystery"}
            ],
            "structuredContent": {"sum": 3},
            "isError": false
        })));
        let value = serde_json::to_value(&result).unwrap();
        assert_eq!(value["success"], true);
        let content = value["content"].as_array().unwrap();
        assert_eq!(content.len(), 4);
        assert!(content[0]["text"]
            .as_str()
            .unwrap()
            .ends_with("(10 more bytes not shown)"));
        assert_eq!(
            content[1],
            json!({"type": "embeddedResource", "data": "AAAA", "contentType": "image/png"})
        );
        assert_eq!(
            content[2],
            json!({"type": "resource", "uri": "file:///a", "contentType": "text/plain"})
        );
        assert_eq!(content[3]["type"], "embeddedResource");
        assert_eq!(value["structuredContent"], json!({"sum": 3}));
        let failed = serde_json::to_value(tool_call_result(&Outcome::Result(
            json!({"content": [], "isError": true}),
        )))
        .unwrap();
        assert_eq!(failed["success"], false);
        assert_eq!(cut("héllo", 2), "h… (5 more bytes not shown)");
    }

    #[test]
    fn errors_are_objects_with_a_message() {
        let failed = tool_call_result(&Outcome::Failed("the server died".into()));
        assert_eq!(failed.error, Some(json!({"message": "the server died"})));
        let cancelled = tool_call_result(&Outcome::Cancelled);
        assert_eq!(
            cancelled.error,
            Some(json!({"message": "the harness cancelled the call", "code": "cancelled"}))
        );
    }
}
