//! `mcp://` channels and `mcpApp`: seen only by clients that declared `mcpApps`, serving
//! exactly the advertised MCP methods on the server's live connection, with list changes
//! relayed to channel subscribers. Real binary, real example servers, official client.

mod common;

use common::{server, Proxy, Raw, Watcher, DEFAULT_SESSION};
use serde_json::{json, Value};

const APP_URI: &str = "ui://release-dashboard/view.html";

fn config() -> String {
    format!(
        "[supervisor]\nrestart_delay_ms = 50\n{}{}",
        server("dash", "app", &[]),
        server("clock", "clock", &[])
    )
}

/// A channel request through the official client's generic request; `Err` carries the
/// JSON-RPC error code.
async fn on_channel(
    w: &Watcher,
    method: &str,
    channel: &str,
    mut params: Value,
) -> Result<Value, (i32, String)> {
    params["channel"] = json!(channel);
    w.client
        .request::<_, Value>(method, params)
        .await
        .map_err(|e| match e {
            ahp::ClientError::Rpc(e) => (e.code, e.message),
            other => panic!("transport failure: {other}"),
        })
}

/// The session as a fresh subscriber of the same kind sees it: the host's view for it.
async fn fresh_view(proxy: &Proxy, apps: bool, id: &str) -> Value {
    let w = if apps {
        Watcher::open_with_apps(proxy, id).await
    } else {
        Watcher::open(proxy).await
    };
    serde_json::to_value(&w.mirror.customizations).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn only_mcp_apps_clients_see_channels_and_they_serve_exactly_what_is_advertised() {
    let proxy = Proxy::start(&config());
    let mut apps = Watcher::open_with_apps(&proxy, "apps-client").await;
    let mut plain = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    apps.until("dash", "ready", &mut seen).await;
    apps.until("clock", "ready", &mut seen).await;
    plain.until("dash", "ready", &mut seen).await;
    plain.until("clock", "ready", &mut seen).await;

    // Advertised per server: the app has tools and resources, the clock only tools;
    // neither logs, and no harness is connected to answer sampling.
    let dash = apps.server("dash");
    assert_eq!(
        dash["mcpApp"],
        json!({"capabilities": {"serverTools": {}, "serverResources": {}}}),
        "{dash}"
    );
    assert_eq!(
        apps.server("clock")["mcpApp"],
        json!({"capabilities": {"serverTools": {}}})
    );
    let channel = dash["channel"]
        .as_str()
        .expect("a channel while ready")
        .to_string();
    let clock = apps.server("clock")["channel"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        channel.starts_with("mcp://") && channel != clock,
        "{channel} {clock}"
    );
    // The other client gets the same tree without either field.
    let plain_tree = serde_json::to_string(&plain.mirror.customizations).unwrap();
    assert!(
        !plain_tree.contains("mcp://") && !plain_tree.contains("mcpApp"),
        "{plain_tree}"
    );

    // The View's HTML, with its mime type and _meta, through the channel.
    let read = on_channel(&apps, "resources/read", &channel, json!({"uri": APP_URI}))
        .await
        .unwrap();
    let content = &read["contents"][0];
    assert_eq!(content["mimeType"], "text/html;profile=mcp-app", "{read}");
    assert!(content["text"].as_str().unwrap().contains("<"), "{read}");
    assert_eq!(content["_meta"]["ui"]["prefersBorder"], true, "{read}");
    // Tools: listed (app-only ones included: the View may call them) and called.
    let tools = on_channel(&apps, "tools/list", &channel, json!({}))
        .await
        .unwrap();
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["show_dashboard", "refresh_dashboard"]);
    let called = on_channel(
        &apps,
        "tools/call",
        &channel,
        json!({"name": "refresh_dashboard", "arguments": {}}),
    )
    .await
    .unwrap();
    assert_eq!(called["isError"], json!(false), "{called}");
    let templates = on_channel(&apps, "resources/templates/list", &channel, json!({}))
        .await
        .unwrap();
    assert!(templates["resourceTemplates"].is_array(), "{templates}");
    // A server's own error comes back as it was.
    let unknown = on_channel(
        &apps,
        "tools/call",
        &channel,
        json!({"name": "no_such_tool", "arguments": {}}),
    )
    .await
    .unwrap_err();
    assert_ne!(unknown.0, -32601, "{unknown:?}");

    // Everything not advertised: -32601, even what the server itself would answer.
    for (method, on) in [
        ("prompts/list", &channel),
        ("initialize", &channel),
        ("ping", &channel),
        ("logging/setLevel", &channel),
        ("sampling/createMessage", &channel),
        ("resources/read", &clock),
        ("resources/list", &clock),
    ] {
        let error = on_channel(&apps, method, on, json!({"uri": APP_URI, "level": "debug"}))
            .await
            .unwrap_err();
        assert_eq!(error.0, -32601, "{method} on {on}: {error:?}");
    }
    // A client without mcpApps cannot use a channel, even knowing its URI.
    let refused = on_channel(&plain, "resources/read", &channel, json!({"uri": APP_URI}))
        .await
        .unwrap_err();
    assert_eq!(refused.0, -32602, "{refused:?}");
    assert!(refused.1.contains("mcpApps"), "{refused:?}");

    // Stopped: the channel is cleared (and unusable); started again: the same channel.
    let id = apps.id("dash");
    apps.dispatch(json!({"type": "session/mcpServerStopRequested", "id": id}))
        .await;
    apps.until("dash", "stopped", &mut seen).await;
    assert!(
        apps.server("dash").get("channel").is_none(),
        "{}",
        apps.server("dash")
    );
    let closed = on_channel(&apps, "tools/list", &channel, json!({}))
        .await
        .unwrap_err();
    assert_eq!(closed.0, -32602, "{closed:?}");
    apps.dispatch(json!({"type": "session/mcpServerStartRequested", "id": id}))
        .await;
    apps.until("dash", "ready", &mut seen).await;
    assert_eq!(apps.server("dash")["channel"], json!(channel));
    plain.until("dash", "stopped", &mut seen).await;
    plain.until("dash", "ready", &mut seen).await;

    // Both mirrors, kept by the official reducers, equal what a fresh subscriber of the same
    // kind is sent now: per-connection views do not drift.
    assert_eq!(
        serde_json::to_value(&apps.mirror.customizations).unwrap(),
        fresh_view(&proxy, true, "fresh-apps").await
    );
    assert_eq!(
        serde_json::to_value(&plain.mirror.customizations).unwrap(),
        fresh_view(&proxy, false, "fresh-plain").await
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn list_changes_reach_channel_subscribers_and_logging_is_served() {
    let proxy = Proxy::start(&format!(
        "[supervisor]\nrestart_delay_ms = 50\n{}",
        server("features", "features", &[])
    ));
    let mut raw = Raw::connect(&proxy).await;
    let init = raw
        .request(
            "initialize",
            json!({"channel": "ahp-root://", "clientId": "raw-apps", "protocolVersions": ["1.0.0"],
                   "capabilities": {"mcpApps": {}}, "initialSubscriptions": [DEFAULT_SESSION]}),
        )
        .await;
    assert!(init.get("result").is_some(), "{init}");
    // Wait for the channel to appear (the snapshot may predate `ready`).
    let find = |tree: &Value| -> Option<(String, Value)> {
        tree.as_array()?
            .iter()
            .find(|c| c["name"] == "features")
            .and_then(|c| Some((c["channel"].as_str()?.to_string(), c["mcpApp"].clone())))
    };
    let mut found = find(&init["result"]["snapshots"][0]["state"]["customizations"]);
    while found.is_none() {
        let frame = raw.recv().await;
        let action = &frame["params"]["action"];
        if action["type"] == "session/mcpServerStateChanged" {
            if let Some(channel) = action["channel"].as_str() {
                let app = json!({"capabilities": {"serverTools": {"listChanged": true},
                    "serverResources": {"listChanged": true}, "logging": {}}});
                found = Some((channel.to_string(), app));
            }
        }
        if action["type"] == "session/customizationUpdated" {
            found = find(&json!([action["customization"]]));
        }
    }
    let (channel, app) = found.unwrap();
    assert_eq!(
        app,
        json!({"capabilities": {"serverTools": {"listChanged": true},
            "serverResources": {"listChanged": true}, "logging": {}}})
    );

    // Subscribing to a channel is stateless: no snapshot.
    let subscribed = raw.request("subscribe", json!({"channel": channel})).await;
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");
    let level = raw
        .request(
            "logging/setLevel",
            json!({"channel": channel, "level": "debug"}),
        )
        .await;
    assert_eq!(level["result"], json!({}), "{level}");
    // An App's own log line is accepted silently.
    raw.send_text(
        json!({"jsonrpc": "2.0", "method": "notifications/message",
               "params": {"channel": channel, "level": "info", "data": "hello from the view"}})
        .to_string(),
    )
    .await;
    let added = raw
        .request(
            "tools/call",
            json!({"channel": channel, "name": "add_tool", "arguments": {"name": "fresh"}}),
        )
        .await;
    assert_eq!(added["result"]["isError"], json!(false), "{added}");
    let announced = loop {
        if let Some(n) = raw
            .notifications
            .iter()
            .find(|n| n["method"] == "notifications/tools/list_changed")
        {
            break n.clone();
        }
        let frame = raw.recv().await;
        raw.notifications.push(frame);
    };
    assert_eq!(announced["params"], json!({"channel": channel}));
    assert!(announced.get("id").is_none(), "{announced}");
    // Pages pass through as the server cuts them (cursor included).
    let mut listed = Vec::new();
    let mut params = json!({"channel": channel});
    loop {
        let page = raw.request("tools/list", params.clone()).await;
        for tool in page["result"]["tools"].as_array().expect("tools") {
            listed.push(tool["name"].as_str().unwrap().to_string());
        }
        match page["result"]["nextCursor"].as_str() {
            Some(cursor) => params["cursor"] = json!(cursor),
            None => break,
        }
    }
    assert!(
        listed.len() > 3 && listed.contains(&"fresh".to_string()),
        "{listed:?}"
    );
    // Malformed params for a served method: the server's own error, verbatim.
    let bad = raw
        .request("tools/call", json!({"channel": channel, "arguments": 5}))
        .await;
    assert!(bad["error"]["code"].is_i64(), "{bad}");

    // A reconnecting client keeps its open channel subscription (it is not `missing`) ...
    let mut again = Raw::connect(&proxy).await;
    let resumed = again
        .request(
            "reconnect",
            json!({"channel": "ahp-root://", "clientId": "raw-apps",
                   "lastSeenServerSeq": init["result"]["serverSeq"],
                   "subscriptions": [DEFAULT_SESSION, channel]}),
        )
        .await;
    let missing = &resumed["result"]["missing"];
    assert!(
        missing.is_null() || missing == &json!([]),
        "the channel survives a reconnect: {resumed}"
    );
    let list_changes = |frames: &[Value]| {
        frames
            .iter()
            .filter(|n| n["method"] == "notifications/tools/list_changed")
            .count()
    };
    let (before, witnessed) = (
        list_changes(&raw.notifications),
        list_changes(&again.notifications),
    );
    let added =
        |name: &str| json!({"channel": channel, "name": "add_tool", "arguments": {"name": name}});
    raw.request("tools/call", added("second")).await;
    while list_changes(&again.notifications) == witnessed {
        let frame = again.recv().await;
        again.notifications.push(frame);
    }
    // ... and after `unsubscribe` (a notification) hears no more list changes, while the
    // other subscriber (the witness) does.
    again
        .notify("unsubscribe", json!({"channel": channel}))
        .await;
    again.ping().await;
    let heard = list_changes(&again.notifications);
    while list_changes(&raw.notifications) == before {
        let frame = raw.recv().await;
        raw.notifications.push(frame);
    }
    let before = list_changes(&raw.notifications);
    raw.request("tools/call", added("third")).await;
    while list_changes(&raw.notifications) == before {
        let frame = raw.recv().await;
        raw.notifications.push(frame);
    }
    // Both connections were told in the same step; a ping orders anything queued for it.
    again.ping().await;
    assert_eq!(
        list_changes(&again.notifications),
        heard,
        "an unsubscribed channel stays quiet"
    );
}

/// Prompts are no MCP Apps host capability: a server's channel serves them when the
/// server's `_meta["ahp-proxy/channel"]` says so. A `tools/call` made on a channel is
/// mirrored into the harness chat like a harness's call, marked with the client that made
/// it; every mirrored call carries the host's timing.
#[tokio::test(flavor = "multi_thread")]
async fn prompts_are_served_where_advertised_and_channel_calls_are_mirrored_as_the_clients() {
    let proxy = Proxy::start(&format!(
        "{}{}",
        server("notes", "notes", &[]),
        server("clock", "clock", &[])
    ));
    let mut apps = Watcher::open_with_apps(&proxy, "workbench").await;
    let mut plain = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    apps.until("notes", "ready", &mut seen).await;
    apps.until("clock", "ready", &mut seen).await;
    plain.until("notes", "ready", &mut seen).await;
    let notes = apps.server("notes");
    assert_eq!(
        notes["_meta"],
        json!({"ahp-proxy/channel": {"prompts": {}}}),
        "{notes}"
    );
    assert!(apps.server("clock").get("_meta").is_none());
    assert!(
        plain.server("notes").get("_meta").is_none(),
        "a client without mcpApps has no channel, so nothing about it"
    );
    let channel = notes["channel"].as_str().unwrap().to_string();
    let clock = apps.server("clock")["channel"]
        .as_str()
        .unwrap()
        .to_string();

    // The same client, raw, follows the harness chat.
    let mut raw = Raw::connect(&proxy).await;
    let init = raw
        .request(
            "initialize",
            json!({"channel": "ahp-root://", "clientId": "workbench", "protocolVersions": ["1.0.0"],
                   "capabilities": {"mcpApps": {}}, "initialSubscriptions": ["ahp-chat:/harness"]}),
        )
        .await;
    assert!(init.get("result").is_some(), "{init}");
    let added = raw
        .request(
            "tools/call",
            json!({"channel": channel, "name": "add_note",
                   "arguments": {"title": "plan", "text": "ship it"}}),
        )
        .await;
    assert_eq!(added["result"]["isError"], json!(false), "{added}");
    let start = raw
        .notification(|n| n["params"]["action"]["type"] == "chat/toolCallStart")
        .await;
    let start = &start["params"]["action"];
    assert_eq!(start["toolName"], "add_note", "{start}");
    assert_eq!(
        start["contributor"]["customizationId"],
        json!(apps.id("notes"))
    );
    assert_eq!(
        start["_meta"]["ahp-proxy/call"]["clientId"], "workbench",
        "{start}"
    );
    assert!(
        start["_meta"]["ahp-proxy/call"]["startedAt"].is_string(),
        "{start}"
    );
    // No MCP harness made it: no era.
    assert!(
        start["_meta"]["ahp-proxy/call"].get("era").is_none(),
        "{start}"
    );
    let done = raw
        .notification(|n| n["params"]["action"]["type"] == "chat/toolCallComplete")
        .await;
    let done = &done["params"]["action"];
    assert_eq!(done["result"]["success"], json!(true), "{done}");
    let call = &done["_meta"]["ahp-proxy/call"];
    assert_eq!(call["clientId"], "workbench", "{done}");
    assert_eq!(
        call["startedAt"],
        start["_meta"]["ahp-proxy/call"]["startedAt"]
    );
    assert!(call["durationMs"].is_u64(), "{done}");

    // Prompts on the notes channel, none on the clock's.
    let prompts = raw
        .request("prompts/list", json!({"channel": channel}))
        .await;
    assert_eq!(
        prompts["result"]["prompts"][0]["name"], "summarize_note",
        "{prompts}"
    );
    let got = raw
        .request(
            "prompts/get",
            json!({"channel": channel, "name": "summarize_note",
                   "arguments": {"title": "plan", "style": "bullets"}}),
        )
        .await;
    let text = got["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{got}"));
    assert!(
        text.contains("ship it") && text.contains("bullets"),
        "{text}"
    );
    let refused = raw.request("prompts/list", json!({"channel": clock})).await;
    assert_eq!(refused["error"]["code"], -32601, "{refused}");

    // A harness's call carries the host's timing and no client.
    let harness = rmcp::ServiceExt::serve(
        (),
        rmcp::transport::StreamableHttpClientTransport::from_uri(proxy.mcp_url.clone()),
    )
    .await
    .expect("harness session");
    let params: rmcp::model::CallToolRequestParams =
        serde_json::from_value(json!({"name": "sleep", "arguments": {"ms": 30}})).unwrap();
    harness.peer().call_tool(params).await.expect("sleep");
    let done = raw
        .notification(|n| {
            n["params"]["action"]["type"] == "chat/toolCallComplete"
                && n["params"]["action"]["_meta"]["ahp-proxy/call"]["clientId"].is_null()
        })
        .await;
    let call = &done["params"]["action"]["_meta"]["ahp-proxy/call"];
    assert!(
        call["durationMs"].as_u64().is_some_and(|ms| ms >= 30),
        "the proxy measured the 30 ms sleep: {done}"
    );
}
