//! What a server offers (tools, prompts, resources, templates), read page by page and kept
//! as the text the server wrote, with the few facts the proxy routes and names by.

use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::Value;

use super::session::{Session, Unanswered};
use crate::mcp::message::{self, Kind, Message};

/// Pages read per list at the most (a server whose cursor never ends is cut off here).
const MAX_PAGES: usize = 1000;

/// One listed item.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// What it is known by: a tool's or prompt's `name`, a resource's `uri`, a template's
    /// `uriTemplate`.
    pub key: String,
    /// The item as the server wrote it.
    pub raw: String,
}

impl Item {
    /// The string at `path` inside the item.
    pub fn string(&self, path: &[&str]) -> Option<String> {
        let span = message::find(&self.raw, 0..self.raw.len(), path)?;
        message::string_at(&self.raw, span).map(|s| s.into_owned())
    }

    /// The value at `path`, parsed.
    pub fn value(&self, path: &[&str]) -> Option<Value> {
        let span = message::find(&self.raw, 0..self.raw.len(), path)?;
        serde_json::from_str(&self.raw[span]).ok()
    }

    /// The tool's `_meta.ui` (MCP Apps), if any.
    pub fn ui(&self) -> Option<Value> {
        self.value(&["_meta", "ui"])
    }

    /// A human name: the title, else the annotations' title, else the key.
    pub fn title(&self) -> String {
        self.string(&["title"])
            .or_else(|| self.string(&["annotations", "title"]))
            .unwrap_or_else(|| self.key.clone())
    }

    /// Whether only an MCP App view may call this tool (`_meta.ui.visibility` without
    /// `model`).
    pub fn app_only(&self) -> bool {
        match self.value(&["_meta", "ui", "visibility"]) {
            Some(Value::Array(visibility)) => !visibility.iter().any(|v| v == "model"),
            _ => false,
        }
    }

    /// The item with the string at `path` replaced by `text` (a no-op without one).
    pub fn with_string(&self, path: &[&str], text: &str) -> Item {
        let Some(span) = message::find(&self.raw, 0..self.raw.len(), path) else {
            return self.clone();
        };
        let quoted = message::quote(text);
        Item {
            key: self.key.clone(),
            raw: message::splice(&self.raw, &mut [(span, quoted.as_str())]),
        }
    }

    /// The item known by `key` instead, written into its `field` (`name`, `uri`…).
    pub fn with_key(&self, field: &str, key: &str) -> Item {
        Item {
            key: key.to_string(),
            ..self.with_string(&[field], key)
        }
    }
}

/// Which lists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lists {
    /// `tools/list`.
    pub tools: bool,
    /// `prompts/list`.
    pub prompts: bool,
    /// `resources/list` and `resources/templates/list`.
    pub resources: bool,
}

impl Lists {
    /// Every list.
    pub const ALL: Self = Self {
        tools: true,
        prompts: true,
        resources: true,
    };
}

/// Everything a server offers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Offer {
    /// Tools, in the server's order.
    pub tools: Vec<Item>,
    /// Prompts.
    pub prompts: Vec<Item>,
    /// Resources.
    pub resources: Vec<Item>,
    /// Resource templates.
    pub templates: Vec<Item>,
}

impl Offer {
    /// Tool `name`.
    pub fn tool(&self, name: &str) -> Option<&Item> {
        self.tools.iter().find(|t| t.key == name)
    }
}

/// Why a list could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ListError {
    /// No answer.
    #[error("{0}")]
    Failed(Unanswered),
    /// An error answer or an unreadable result.
    #[error("{method} failed: {message}")]
    Refused {
        /// The list method.
        method: &'static str,
        /// What the server said, or what was wrong with the result.
        message: String,
    },
}

/// Read the lists in `lists` that `capabilities` (the server's) say it has, every page.
/// Only `tools/list` must succeed; a server whose prompts or resources cannot be read
/// offers none.
pub async fn read(
    session: &Session,
    capabilities: &Value,
    lists: Lists,
    timeout: Duration,
) -> Result<Offer, ListError> {
    let has = |name: &str| capabilities.get(name).is_some_and(|c| !c.is_null());
    let mut offer = Offer::default();
    if lists.tools && has("tools") {
        offer.tools = list(session, "tools/list", "tools", "name", timeout).await?;
    }
    if lists.prompts && has("prompts") {
        offer.prompts = list(session, "prompts/list", "prompts", "name", timeout)
            .await
            .unwrap_or_default();
    }
    if lists.resources && has("resources") {
        offer.resources = list(session, "resources/list", "resources", "uri", timeout)
            .await
            .unwrap_or_default();
        offer.templates = list(
            session,
            "resources/templates/list",
            "resourceTemplates",
            "uriTemplate",
            timeout,
        )
        .await
        .unwrap_or_default();
    }
    Ok(offer)
}

/// Every page of one list.
pub async fn list(
    session: &Session,
    method: &'static str,
    field: &str,
    key: &str,
    timeout: Duration,
) -> Result<Vec<Item>, ListError> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .as_ref()
            .map(|c| format!(r#"{{"cursor":{}}}"#, message::quote(c)));
        let answer = session
            .call(method, params.as_deref(), timeout)
            .await
            .map_err(ListError::Failed)?;
        let (page, next) =
            page(&answer, field, key).map_err(|message| ListError::Refused { method, message })?;
        items.extend(page);
        match next {
            Some(next) if cursor.as_deref() != Some(next.as_str()) => cursor = Some(next),
            _ => break,
        }
    }
    Ok(items)
}

/// The items of one page and its `nextCursor`.
pub fn page(
    answer: &Message,
    field: &str,
    key: &str,
) -> Result<(Vec<Item>, Option<String>), String> {
    if answer.kind() == Kind::Error {
        return Err(answer
            .string(&["message"])
            .map(|m| m.into_owned())
            .unwrap_or_else(|| "an error".into()));
    }
    let next = answer.string(&["nextCursor"]).map(|c| c.into_owned());
    let Some(span) = answer.find(&[field]) else {
        return Err(format!("no {field} in the result"));
    };
    let raws: Vec<&RawValue> =
        serde_json::from_str(answer.slice(span)).map_err(|e| format!("{field}: {e}"))?;
    let mut items = Vec::with_capacity(raws.len());
    for raw in raws {
        let text = raw.get();
        // An item without its key cannot be named or routed: left out.
        let Some(found) = message::find(text, 0..text.len(), &[key]) else {
            continue;
        };
        let Some(value) = message::string_at(text, found) else {
            continue;
        };
        items.push(Item {
            key: value.into_owned(),
            raw: text.to_string(),
        });
    }
    Ok((items, next))
}

/// A `tools/list` answer's text without its app-only tools; `None` when it has none.
pub fn without_app_only(text: &str) -> Option<String> {
    without_tools(text, Item::app_only)
}

/// A `tools/list` answer's text without the tools `drop` picks (each seen as an [`Item`]
/// keyed by its name); `None` when it picks none.
pub fn without_tools(text: &str, drop: impl Fn(&Item) -> bool) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named {
        name: Option<String>,
    }
    let span = message::find(text, 0..text.len(), &["result", "tools"])?;
    let tools: Vec<&RawValue> = serde_json::from_str(&text[span.clone()]).ok()?;
    let kept: Vec<&str> = tools
        .iter()
        .map(|raw| raw.get())
        .filter(|raw| {
            let key = serde_json::from_str::<Named>(raw)
                .ok()
                .and_then(|n| n.name)
                .unwrap_or_default();
            !drop(&Item {
                key,
                raw: raw.to_string(),
            })
        })
        .collect();
    if kept.len() == tools.len() {
        return None;
    }
    let list = format!("[{}]", kept.join(","));
    Some(message::splice(text, &mut [(span, list.as_str())]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_keeps_each_item_as_written() {
        let answer = Message::parse(
            r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"b","inputSchema":{"type":"object","properties":{"z":{},"a":{}}},"execution":{"taskSupport":"optional"},"_meta":{"ui":{"resourceUri":"ui://v","visibility":["app"]}}},{"title":"no name"}],"nextCursor":"2"}}"#
                .to_string(),
        )
        .unwrap();
        let (items, next) = page(&answer, "tools", "name").unwrap();
        assert_eq!(next.as_deref(), Some("2"));
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].key, "b");
        assert!(items[0].raw.contains(r#""properties":{"z":{},"a":{}}"#));
        assert!(items[0]
            .raw
            .contains(r#""execution":{"taskSupport":"optional"}"#));
        assert!(items[0].app_only());
        assert_eq!(items[0].ui().unwrap()["resourceUri"], "ui://v");
        assert_eq!(items[0].title(), "b");
        let renamed = items[0].with_key("name", "s__b");
        assert_eq!(renamed.key, "s__b");
        assert!(renamed.raw.starts_with(r#"{"name":"s__b","inputSchema""#));
    }

    #[test]
    fn an_error_page_says_what_the_server_said() {
        let answer = Message::parse(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no tools here"}}"#.into(),
        )
        .unwrap();
        assert_eq!(page(&answer, "tools", "name").unwrap_err(), "no tools here");
    }

    #[test]
    fn app_only_tools_are_cut_from_a_server_answer_and_nothing_else_moves() {
        let text = r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"a","_meta":{"ui":{"visibility":["app"]}}},{"name":"b","z":0.7}],"x-extra":1}}"#;
        assert_eq!(
            without_app_only(text).unwrap(),
            r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"b","z":0.7}],"x-extra":1}}"#
        );
        assert_eq!(
            without_app_only(r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"b"}]}}"#),
            None
        );
    }
}
