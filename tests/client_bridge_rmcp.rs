//! Both halves of the client bridge as an MCP harness built on the official Rust SDK sees
//! them: an rmcp client on `/mcp` lists and calls a tool an AHP client (an IDE, the official
//! `ahp` client) publishes, getting what the IDE completed, and a server inside a plugin the
//! same IDE publishes.

mod common;

use common::ide::{running, Ide, CHAT, SESSION};
use common::{Proxy, PATIENCE};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread")]
async fn an_rmcp_harness_calls_an_ide_tool_and_a_server_of_an_ide_plugin() {
    let dir = common::ScratchDir::new("rmcp-bridge");
    let plugin = dir.path().join("ide-plugin");
    std::fs::create_dir_all(&plugin).unwrap();
    let servers =
        json!({"mcpServers": {"notes": {"command": common::examples(), "args": ["notes"]}}});
    std::fs::write(plugin.join(".mcp.json"), servers.to_string()).unwrap();
    let proxy = Proxy::start("");
    let mut ide = Ide::join(&proxy, "ide-1").await;
    // The IDE offers its tool and a plugin of its own at once.
    ide.dispatch(
        SESSION,
        json!({"type": "session/activeClientSet", "activeClient": {
            "clientId": "ide-1", "displayName": "My IDE",
            "tools": [{"name": "runUnitTests", "title": "Run unit tests",
                       "description": "Run the project's unit tests",
                       "inputSchema": {"type": "object", "properties": {"filter": {"type": "string"}}}}],
            "customizations": [{"type": "plugin", "id": "ide-plugin", "name": "IDE plugin",
                                "uri": format!("file://{}", plugin.display())}]}}),
    )
    .await;

    let harness = ()
        .serve(StreamableHttpClientTransport::from_uri(
            proxy.mcp_url.clone(),
        ))
        .await
        .expect("an rmcp harness session");
    let peer = harness.peer().clone();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let tools = peer.list_all_tools().await.expect("tools/list");
        let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        if names.iter().any(|n| n == "runUnitTests") && names.iter().any(|n| n == "list_notes") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the IDE's tool and its plugin's server's tools are listed: {names:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // The harness calls the IDE's tool; the IDE completes it with text and an image.
    let caller = peer.clone();
    let call = tokio::spawn(async move {
        let params: CallToolRequestParams = serde_json::from_value(
            json!({"name": "runUnitTests", "arguments": {"filter": "parser"}}),
        )
        .unwrap();
        caller.call_tool(params).await
    });
    let (turn, state) = ide.until_call(|s| running(s).is_some()).await;
    let (call_id, _) = running(&state).unwrap();
    ide.dispatch(CHAT, json!({"type": "chat/toolCallComplete", "turnId": turn, "toolCallId": call_id,
        "result": {"success": true, "pastTenseMessage": "Ran the tests",
                   "content": [{"type": "text", "text": "12 passed"},
                               {"type": "embeddedResource", "data": "iVBORw0KGgo=", "contentType": "image/png"}]}}))
        .await;
    let result = tokio::time::timeout(PATIENCE, call)
        .await
        .expect("the call ends")
        .unwrap()
        .expect("a result");
    let result = serde_json::to_value(&result).unwrap();
    assert_eq!(
        result["content"][0],
        json!({"type": "text", "text": "12 passed"})
    );
    assert_eq!(
        result["content"][1],
        json!({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"})
    );
    assert_ne!(result["isError"], Value::Bool(true), "{result}");

    // And a tool of the server inside the IDE's plugin.
    let params: CallToolRequestParams =
        serde_json::from_value(json!({"name": "list_notes", "arguments": {}})).unwrap();
    let notes = tokio::time::timeout(PATIENCE, peer.call_tool(params))
        .await
        .expect("in time")
        .expect("the plugin's server answers");
    assert_ne!(notes.is_error, Some(true));
}
