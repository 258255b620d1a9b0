//! The four `*/list` requests: the aggregated endpoint answers from the namespace of every
//! ready server (items as their servers wrote them, renamed where names collide; with one
//! server and nothing renamed, that server's own answer); a per-server endpoint asks its
//! server. Tools a server's declaration filters out are never listed. A harness's first listing waits for servers still
//! starting; app-only tools are hidden from a harness without MCP Apps.

use std::sync::Arc;

use super::answers::result_answer;
use super::exchange::Exchange;
use super::harness::Harness;
use super::outbox::Stream;
use super::registry::Scope;
use super::steps::{self, shape::HideAppOnly, shape::HideFiltered};
use crate::mcp::message::Message;
use crate::upstream::offer::{self, Lists};

/// The result member that holds a list method's items.
pub fn field_of(method: &str) -> &'static str {
    match method {
        "prompts/list" => "prompts",
        "resources/list" => "resources",
        "resources/templates/list" => "resourceTemplates",
        _ => "tools",
    }
}

/// Answer a `*/list` request.
pub fn answer(harness: Arc<Harness>, message: Message, stream: Stream) {
    let waits = harness.first_listing() && harness.hub.connections.starting();
    let refresh = harness.scope == Scope::All && message.method() == Some("resources/list");
    if !waits && !refresh {
        return respond(harness, message, stream);
    }
    tokio::spawn(async move {
        if waits {
            harness.hub.settle().await;
        }
        if refresh {
            refresh_unannounced_resources(&harness).await;
        }
        respond(harness, message, stream);
    });
}

fn respond(harness: Arc<Harness>, message: Message, stream: Stream) {
    let id = message.id().unwrap_or("null").to_string();
    let method = message.method().unwrap_or_default().to_string();
    let field = field_of(&method);
    let apps = harness.abilities().apps;
    match &harness.scope {
        Scope::Server(server) => {
            if harness.hub.connections.get(server).is_none() {
                stream.finish(result_answer(&id, &format!(r#"{{"{field}":[]}}"#)));
                return;
            }
            let server = server.clone();
            let steps = tool_list_steps(apps, &method);
            Exchange::start(&harness, &server, message, stream, None, steps);
        }
        Scope::All => {
            // One server and nothing renamed: its own answer, as for its own endpoint (the
            // list's other members and its pages included).
            if let Some(server) = super::routes::only_server(&harness) {
                let steps = tool_list_steps(apps, &method);
                return Exchange::start(&harness, &server, message, stream, None, steps);
            }
            let names = harness.hub.namespace();
            let entries = match field {
                "prompts" => &names.prompts,
                "resources" => &names.resources,
                "resourceTemplates" => &names.templates,
                _ => &names.tools,
            };
            let items: Vec<&str> = entries
                .iter()
                .filter(|e| apps || field != "tools" || !e.item.app_only())
                .map(|e| e.item.raw.as_str())
                .collect();
            let result = format!(r#"{{"{field}":[{}]}}"#, items.join(","));
            stream.finish(result_answer(&id, &result));
        }
    }
}

/// The steps of a list request forwarded to one server: a `tools/list` answer loses the
/// tools the server's declaration filters out, and its app-only tools for a harness
/// without MCP Apps.
fn tool_list_steps(apps: bool, method: &str) -> super::exchange::Steps {
    let tools = method == "tools/list";
    steps::base()
        .with_if(tools, || HideFiltered)
        .with_if(!apps && tools, || HideAppOnly)
}

/// Servers that do not announce resource list changes are asked again on each aggregated
/// listing (all at once, briefly); a real difference updates the namespace and is
/// announced like any change.
async fn refresh_unannounced_resources(harness: &Harness) {
    let hub = &harness.hub;
    let patience = hub
        .settings
        .request_timeout
        .min(std::time::Duration::from_secs(5));
    let asks = hub
        .connections
        .snapshot()
        .into_iter()
        .filter(|(_, c)| c.has("resources") && !c.flag("resources", "listChanged"))
        .map(|(id, connected)| async move {
            let lists = Lists {
                resources: true,
                ..Lists::default()
            };
            let caps = connected.initialized.capabilities.clone();
            let fresh = offer::read(&connected.session, &caps, lists, patience).await;
            (id, connected, fresh)
        });
    for (id, connected, fresh) in futures_util::future::join_all(asks).await {
        let Ok(fresh) = fresh else { continue };
        let changed = {
            let mut offer = connected.offer.write().unwrap_or_else(|p| p.into_inner());
            let changed = offer.resources != fresh.resources || offer.templates != fresh.templates;
            if changed {
                let mut next = (**offer).clone();
                next.resources = fresh.resources;
                next.templates = fresh.templates;
                *offer = Arc::new(next);
            }
            changed
        };
        if changed {
            hub.connections.changed(
                &id,
                Lists {
                    resources: true,
                    ..Lists::default()
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_methods_name_their_field() {
        assert_eq!(field_of("resources/templates/list"), "resourceTemplates");
    }
}
