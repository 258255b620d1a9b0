//! The web console in a real browser (headless Chromium over WebDriver): the bundled tree
//! with its states, steering from the page, a crash shown live, an MCP App View in its
//! sandbox calling a tool through the `mcp://` channel, the page's mirror equal to a fresh
//! snapshot, a call paused for authorization resumed with a pasted token or given up, a
//! foreign origin refused, and render times with 1,000 plugins and 50 servers.
//! Screenshots go to `target/tmp/console-screenshots/`.

mod browser;
mod common;
#[allow(dead_code)] // the metadata fields are for tests/auth.rs
#[path = "common/protected.rs"]
mod protected;

use std::path::Path;
use std::time::Duration;

use browser::{screenshot_dir, Browser};
use common::{alive, child_pids, server, Proxy, Raw, ScratchDir, Watcher, EXAMPLES, PATIENCE};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One browser at a time: the machine has two cores.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn console_url(proxy: &Proxy) -> String {
    format!("http://{}/", proxy.addr)
}

/// The page is up and has rendered its first snapshot.
async fn open_console(browser: &Browser, proxy: &Proxy) {
    browser
        .client
        .goto(&console_url(proxy))
        .await
        .expect("open the console");
    rendered(browser).await;
}

/// The page has rendered its first snapshot.
async fn rendered(browser: &Browser) {
    browser
        .until(
            "first render",
            "return document.body.dataset.rendered === '1'",
        )
        .await;
}

/// The `data-state` of server `name`'s row, once it is `state`.
async fn server_state(browser: &Browser, name: &str, state: &str) {
    browser
        .until(
            &format!("server {name} {state}"),
            &format!(
                "const row = document.querySelector('.server[data-server=\"{name}\"]'); return row && row.dataset.state === '{state}'"
            ),
        )
        .await;
}

/// Server `name`'s row once it is in `error`: the error type, message and stderr tail shown.
/// Read in the same script that sees the state: a failing server is restarted, and between
/// two scripts its row may already say `starting` again.
async fn server_error(browser: &Browser, name: &str) -> String {
    let shown = browser
        .until(
            &format!("server {name} error, with its error shown"),
            &format!(
                "const row = document.querySelector('.server[data-server=\"{name}\"]'); \
                 const error = row && row.dataset.state === 'error' && row.querySelector('.server-error'); \
                 return error ? error.innerText : null"
            ),
        )
        .await;
    shown.as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_bundled_tree_renders_with_the_right_states() {
    let _one = ONE_BROWSER.lock().await;
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins-examples");
    let data = ScratchDir::new("console-bundled");
    let proxy = Proxy::start(&format!(
        "plugin_roots = [{:?}]\nmanifests = [{:?}]\ndata_dir = {:?}\n",
        examples.display().to_string(),
        examples.join("plugins.json").display().to_string(),
        data.path().display().to_string(),
    ));
    let browser = Browser::start().await;
    open_console(&browser, &proxy).await;
    for name in [
        "lint",
        "clock",
        "release-dashboard",
        "notes",
        "scratch-notes",
    ] {
        server_state(&browser, name, "ready").await;
    }
    let error = server_error(&browser, "misconfigured").await;
    assert!(error.starts_with("startFailed"), "{error}");
    assert!(
        error.contains("refusing to start"),
        "the stderr tail: {error}"
    );
    // Problems as file:line:col, and the load states.
    let broken = browser
        .eval("const card = [...document.querySelectorAll('.card')].find(c => c.querySelector('.card-title').textContent === 'broken-plugin'); return {load: card.querySelector('.badge').textContent, problems: [...card.querySelectorAll('.problem')].map(p => p.textContent)}")
        .await;
    assert_eq!(broken["load"], "degraded", "{broken}");
    let problems: Vec<&str> = broken["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("broken-plugin/.mcp.json:4:41: invalid JSON")),
        "{problems:?}"
    );
    // Tool counts come from tools/list on each server's channel.
    browser
        .until(
            "notes' tool count",
            "const c = document.querySelector('.server[data-server=\"notes\"] .tool-count'); return c && c.textContent === '4 tools'",
        )
        .await;
    // Children by kind, with descriptions, once opened (with the keyboard).
    browser
        .eval("const s = [...document.querySelectorAll('.card')].find(c => c.querySelector('.card-title').textContent === 'team-notes').querySelector('details.children summary'); s.focus(); return true")
        .await;
    browser
        .client
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E00D}") // the space key toggles <details>
        .await
        .unwrap();
    browser
        .until(
            "team-notes' children",
            "const card = [...document.querySelectorAll('.card')].find(c => c.querySelector('.card-title').textContent === 'team-notes'); return card.querySelector('.child-list') && card.querySelector('.child-list').innerText",
        )
        .await;
    browser.screenshot("tree").await;
    // An App of the bundled examples, tried from its form.
    browser
        .click(".server[data-server=\"release-dashboard\"] form.try-it[data-tool=\"show_dashboard\"] button[type=\"submit\"]")
        .await;
    browser
        .until(
            "the dashboard View",
            "const v = document.querySelector('.view[data-tool=\"show_dashboard\"]'); return v && v.dataset.ready === '1'",
        )
        .await;
    browser.screenshot("console").await;
    browser.click("#theme").await;
    browser
        .until(
            "dark scheme",
            "return document.documentElement.dataset.theme",
        )
        .await;
    browser.screenshot("tree-other-scheme").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn toggling_a_server_in_the_page_stops_it_and_the_mirror_stays_equal_to_the_host() {
    let _one = ONE_BROWSER.lock().await;
    let proxy = Proxy::start(&format!(
        "{}{}",
        server("a", "echo", &[]),
        server("dashboard", "app", &[])
    ));
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("a", "ready", &mut seen).await;
    w.until("dashboard", "ready", &mut seen).await;
    let pid_of = |args: &str| {
        child_pids(proxy.pid())
            .into_iter()
            .find(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(args))
            })
            .unwrap_or_else(|| panic!("no {args} process"))
    };
    let pid = pid_of("echo");
    let browser = Browser::start().await;
    open_console(&browser, &proxy).await;
    server_state(&browser, "a", "ready").await;
    browser
        .click(".server[data-server=\"a\"] button[role=\"switch\"]")
        .await;
    server_state(&browser, "a", "stopped").await;
    // An AHP client sees it stopped, and its process is gone.
    w.until("a", "stopped", &mut seen).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while alive(pid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid} still runs"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Enabled again from the page (keyboard: Enter on the focused switch).
    browser
        .eval("document.querySelector('.server[data-server=\"a\"] button[role=\"switch\"]').focus(); return true")
        .await;
    browser
        .client
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E007}")
        .await
        .unwrap();
    server_state(&browser, "a", "ready").await;
    w.until("a", "ready", &mut seen).await;
    // Harness calls appear live in the activity pane.
    let harness = ()
        .serve(StreamableHttpClientTransport::from_uri(
            proxy.mcp_url.clone(),
        ))
        .await
        .expect("harness session");
    for (name, args) in [
        ("echo", json!({"text": "hello from the harness"})),
        ("show_dashboard", json!({})),
    ] {
        let params: CallToolRequestParams =
            serde_json::from_value(json!({"name": name, "arguments": args})).unwrap();
        harness.peer().call_tool(params).await.expect(name);
    }
    browser
        .until(
            "the harness turn, complete",
            "const c = window.ahpConsole.mirror.chat; return c.turns.length > 0 && !c.activeTurn && document.querySelectorAll('.call[data-status=\"completed\"]').length === 2",
        )
        .await;
    let echoed = browser
        .eval("return document.querySelector('.call[data-tool=\"echo\"] .call-result').textContent")
        .await;
    assert_eq!(echoed, "hello from the harness");
    // The harness's App call opens its View with the call's result.
    browser
        .click(".call[data-tool=\"show_dashboard\"] .call-head button")
        .await;
    browser
        .until(
            "the View of the harness call",
            "const v = document.querySelector('.view[data-tool=\"show_dashboard\"]'); return v && v.dataset.ready === '1'",
        )
        .await;
    browser
        .client
        .enter_frame(0)
        .await
        .expect("the relay frame");
    browser.client.enter_frame(0).await.expect("the View frame");
    browser
        .until(
            "the harness call's result in its View",
            "return document.getElementById('status').textContent.startsWith('Release 1.4.0')",
        )
        .await;
    browser.client.enter_parent_frame().await.unwrap();
    browser.client.enter_parent_frame().await.unwrap();
    // The page's mirror (JS port of the reducers) equals a fresh snapshot from the host.
    assert_mirror_matches_host(&browser, &proxy).await;
    browser.screenshot("activity").await;
    browser.close().await;
}

/// The console's mirror, compared with what a fresh `mcpApps` client is sent now, at the
/// same `serverSeq`.
async fn assert_mirror_matches_host(browser: &Browser, proxy: &Proxy) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let mut raw = Raw::connect(proxy).await;
        let fresh = raw
            .request(
                "initialize",
                json!({"channel": "ahp-root://", "clientId": "fresh", "protocolVersions": ["1.0.0"],
                       "capabilities": {"mcpApps": {}},
                       "initialSubscriptions": ["ahp-root://", "ahp-session:/default", "ahp-chat:/harness"]}),
            )
            .await;
        let seq = fresh["result"]["serverSeq"].as_u64().unwrap();
        let page = browser
            .until(
                "the page at the host's serverSeq",
                &format!("const m = window.ahpConsole.mirror; return m.serverSeq >= {seq} && {{seq: m.serverSeq, state: window.ahpConsole.snapshot()}}"),
            )
            .await;
        if page["seq"].as_u64() != Some(seq) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the host never settled"
            );
            continue; // something happened in between: again
        }
        for snapshot in fresh["result"]["snapshots"].as_array().unwrap() {
            let key = match snapshot["resource"].as_str().unwrap() {
                "ahp-root://" => "root",
                "ahp-session:/default" => "session",
                _ => "chat",
            };
            assert_eq!(
                page["state"][key], snapshot["state"],
                "the page's {key} differs from a fresh snapshot"
            );
        }
        return;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_shows_its_error_live() {
    let _one = ONE_BROWSER.lock().await;
    let proxy = Proxy::start(&format!(
        "[supervisor]\nrestart_delay_ms = 600000\n{}",
        server("c", "crash", &["--exit-code", "3"])
    ));
    let mut w = Watcher::open_with_apps(&proxy, "crasher").await;
    let mut seen = Vec::new();
    w.until("c", "ready", &mut seen).await;
    let channel = w.server("c")["channel"].as_str().unwrap().to_string();
    let browser = Browser::start().await;
    open_console(&browser, &proxy).await;
    server_state(&browser, "c", "ready").await;
    let _: Result<Value, _> = w
        .client
        .request(
            "tools/call",
            json!({"channel": channel, "name": "crash", "arguments": {}}),
        )
        .await;
    let error = server_error(&browser, "c").await;
    assert!(error.starts_with("exited"), "{error}");
    assert!(error.contains("exited with status 3"), "{error}");
    assert!(
        error.contains("crash tool called"),
        "the stderr tail: {error}"
    );
    assert_eq!(
        browser
            .eval("return performance.getEntriesByType('navigation').length")
            .await,
        json!(1),
        "no reload"
    );
    browser.screenshot("crash").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_view_renders_in_its_sandbox_and_calls_a_tool_through_the_channel() {
    let _one = ONE_BROWSER.lock().await;
    let proxy = Proxy::start(&server("dashboard", "app", &[]));
    let browser = Browser::start().await;
    open_console(&browser, &proxy).await;
    server_state(&browser, "dashboard", "ready").await;
    browser
        .until(
            "the Try it form",
            "return document.querySelector('form.try-it[data-tool=\"show_dashboard\"]')",
        )
        .await;
    browser
        .click("form.try-it[data-tool=\"show_dashboard\"] button[type=\"submit\"]")
        .await;
    browser
        .until(
            "the View, initialized",
            "const v = document.querySelector('.view[data-tool=\"show_dashboard\"]'); return v && v.dataset.ready === '1'",
        )
        .await;
    // The relay runs on the View origin, another port, with the spec's default CSP.
    let frame = browser
        .eval("const f = document.querySelector('.view-frame'); return {src: f.src, origin: location.origin, sandbox: f.getAttribute('sandbox')}")
        .await;
    let src = frame["src"].as_str().unwrap();
    let origin = frame["origin"].as_str().unwrap();
    assert!(!src.starts_with(origin), "{src} is on the console's origin");
    assert!(src.ends_with("/sandbox"), "{src}");
    let relay = reqwest_free_get(src).await;
    assert!(
        relay.contains("default-src 'none'") && relay.contains("connect-src 'none'"),
        "{relay}"
    );
    // Into the relay, then the View.
    browser
        .client
        .enter_frame(0)
        .await
        .expect("the relay frame");
    browser.client.enter_frame(0).await.expect("the View frame");
    browser
        .until(
            "the tool result in the View",
            "return document.getElementById('status').textContent.startsWith('Release 1.4.0')",
        )
        .await;
    // The View's own origin is opaque, and its CSP (inherited from the relay) holds.
    let blocked = browser
        .client
        .execute_async(
            &format!(
                "const done = arguments[arguments.length - 1];\
                 document.addEventListener('securitypolicyviolation', (e) => done({{blocked: e.violatedDirective, origin: String(self.origin)}}));\
                 fetch('http://{}/').then(() => done({{blocked: false}}), () => {{}});",
                proxy.addr
            ),
            vec![],
        )
        .await
        .expect("the CSP probe");
    assert_eq!(blocked["blocked"], "connect-src", "{blocked}");
    assert_eq!(blocked["origin"], "null", "{blocked}");
    // A control in the View calls a tool through the channel; the answer shows in the View.
    browser
        .until(
            "the Refresh button",
            "return !document.getElementById('refresh').disabled",
        )
        .await;
    browser.click("#refresh").await;
    browser
        .until(
            "the refreshed result in the View",
            "return document.getElementById('refreshed').textContent.includes('(refresh #1)')",
        )
        .await;
    browser.client.enter_parent_frame().await.unwrap();
    browser.client.enter_parent_frame().await.unwrap();
    // The View's log line and its tools/call reached the host through the bridge.
    browser
        .until(
            "the View's log",
            "return document.querySelector('.view-log').innerText.includes('refresh clicked')",
        )
        .await;
    // Resized to its content.
    let height = browser
        .eval("return document.querySelector('.view-frame').style.height")
        .await;
    assert!(height.as_str().unwrap().ends_with("px"), "{height}");
    browser.screenshot("app-view").await;
    // Teardown on close.
    browser
        .click(".view[data-tool=\"show_dashboard\"] button.close")
        .await;
    browser
        .until(
            "the View closed",
            "return !document.querySelector('.view[data-tool=\"show_dashboard\"]')",
        )
        .await;
    browser.close().await;
}

/// GET `url` over plain HTTP/1.1: the response head and body as text.
async fn reqwest_free_get(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    http_get(authority, &format!("/{path}"), &[("host", authority)]).await
}

/// `GET path` to `authority` with exactly these headers: the response as text.
async fn http_get(authority: &str, path: &str, headers: &[(&str, &str)]) -> String {
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    text
}

/// Without a browser: the pages need no token but pass the `Host` and `Origin` checks; the
/// WebSocket beside them still needs the token.
#[tokio::test(flavor = "multi_thread")]
async fn pages_need_no_token_but_pass_the_host_and_origin_checks() {
    let token = "pages-token-0123456789";
    let proxy = Proxy::start(&format!("[ahp]\ntoken = {token:?}\n"));
    let authority = proxy.addr.to_string();
    let host = ("host", authority.as_str());
    let page = http_get(&authority, "/", &[host]).await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(
        page.contains("name=\"ahp-console-token-required\" content=\"true\""),
        "{page}"
    );
    assert!(!page.contains(token));
    let script = http_get(&authority, "/mirror.js", &[host]).await;
    assert!(
        script.starts_with("HTTP/1.1 200") && script.contains("text/javascript"),
        "{script}"
    );
    for (refused, headers) in [
        ("403", vec![("host", "evil.example")]),
        ("403", vec![host, ("origin", "http://evil.example")]),
        ("404", vec![host]),
    ] {
        let path = if refused == "404" {
            "/../Cargo.toml"
        } else {
            "/"
        };
        let answer = http_get(&authority, path, &headers).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {refused}")),
            "{headers:?}: {answer}"
        );
    }
    let upgrade = http_get(
        &authority,
        "/",
        &[
            host,
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("sec-websocket-version", "13"),
        ],
    )
    .await;
    assert!(upgrade.starts_with("HTTP/1.1 401"), "{upgrade}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_on_another_origin_cannot_open_the_websocket() {
    let _one = ONE_BROWSER.lock().await;
    let proxy = Proxy::start("");
    // Any page at all, served on loopback but reached as http://evil.example:<port>/.
    let site = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = site.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = site.accept().await {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf).await;
            let page = "<!doctype html><title>elsewhere</title><p>another site";
            let _ = stream
                .write_all(format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}", page.len()).as_bytes())
                .await;
        }
    });
    let browser = Browser::start().await;
    let probe = format!(
        "const done = arguments[arguments.length - 1];\
         const ws = new WebSocket('ws://{}/');\
         ws.onopen = () => done('open');\
         ws.onerror = () => done('refused');",
        proxy.addr
    );
    browser
        .client
        .goto(&format!("http://evil.example:{port}/"))
        .await
        .unwrap();
    let outcome = browser.client.execute_async(&probe, vec![]).await.unwrap();
    assert_eq!(outcome, "refused");
    assert!(
        proxy.log_count("http://evil.example") > 0,
        "the proxy refused it for its origin:\n{}",
        proxy.logs()
    );
    // The console's own origin may.
    open_console(&browser, &proxy).await;
    let outcome = browser.client.execute_async(&probe, vec![]).await.unwrap();
    assert_eq!(outcome, "open");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_a_token_the_page_asks_for_it_or_takes_it_from_the_address() {
    let _one = ONE_BROWSER.lock().await;
    let token = "console-token-0123456789";
    let proxy = Proxy::start(&format!(
        "[ahp]\ntoken = {token:?}\n{}",
        server("a", "echo", &[])
    ));
    let browser = Browser::start().await;
    browser.client.goto(&console_url(&proxy)).await.unwrap();
    browser
        .until(
            "the login field",
            "return document.querySelector('form.login input')",
        )
        .await;
    browser
        .client
        .find(fantoccini::Locator::Css("form.login input"))
        .await
        .unwrap()
        .send_keys(&format!("{token}\u{E007}"))
        .await
        .unwrap();
    rendered(&browser).await;
    server_state(&browser, "a", "ready").await;
    // From the address: used, then taken out of it.
    browser
        .client
        .goto(&format!("{}?token={token}", console_url(&proxy)))
        .await
        .unwrap();
    rendered(&browser).await;
    assert_eq!(browser.eval("return location.search").await, "");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn first_render_and_live_updates_with_1000_plugins_and_50_servers() {
    let _one = ONE_BROWSER.lock().await;
    let root = ScratchDir::new("console-load");
    for i in 0..1000 {
        let plugin = root.path().join(format!("plugin-{i:04}"));
        std::fs::create_dir_all(plugin.join(".claude-plugin")).unwrap();
        std::fs::write(
            plugin.join(".claude-plugin/plugin.json"),
            format!("{{\"name\": \"plugin-{i:04}\", \"version\": \"1.0.{i}\"}}"),
        )
        .unwrap();
        for skill in 0..3 {
            let dir = plugin.join(format!("skills/skill-{skill}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("SKILL.md"),
                format!("---\nname: skill-{skill}\ndescription: Skill {skill} of plugin {i}\n---\nbody\n"),
            )
            .unwrap();
        }
        std::fs::create_dir_all(plugin.join("agents")).unwrap();
        std::fs::write(
            plugin.join("agents/helper.md"),
            "---\ndescription: An agent\n---\nbody\n",
        )
        .unwrap();
        if i % 20 == 0 {
            std::fs::write(
                plugin.join(".mcp.json"),
                json!({"mcpServers": {format!("server-{i:04}"): {"command": EXAMPLES, "args": ["echo"]}}})
                    .to_string(),
            )
            .unwrap();
        }
    }
    let proxy = Proxy::start(&format!(
        "plugin_roots = [{:?}]\n[limits]\nwatch_debounce_ms = 0\n",
        root.path().display().to_string()
    ));
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    for i in (0..1000).step_by(20) {
        w.until(&format!("server-{i:04}"), "ready", &mut seen).await;
    }
    let browser = Browser::start().await;
    let mut firsts = Vec::new();
    for _ in 0..3 {
        open_console(&browser, &proxy).await;
        firsts.push(
            browser
                .eval("return window.ahpConsole.stats.firstRenderMs")
                .await
                .as_f64()
                .unwrap(),
        );
    }
    let counts = browser
        .eval("return [document.querySelectorAll('.card').length, document.querySelectorAll('.server').length]")
        .await;
    assert_eq!(counts, json!([1000, 50]));
    // Live updates: a server stopped and started by another client, and an edit on disk.
    let mut updates = Vec::new();
    for i in [100, 300, 500, 700, 900] {
        let name = format!("server-{i:04}");
        let id = w.id(&name);
        forget_updates(&browser).await;
        w.dispatch(json!({"type": "session/mcpServerStopRequested", "id": id}))
            .await;
        server_state(&browser, &name, "stopped").await;
        w.until(&name, "stopped", &mut seen).await;
        updates.push(last_update(&browser, "session/mcpServerStopRequested").await);
        forget_updates(&browser).await;
        w.dispatch(json!({"type": "session/mcpServerStartRequested", "id": id}))
            .await;
        server_state(&browser, &name, "ready").await;
        updates.push(last_update(&browser, "session/mcpServerStateChanged").await);
    }
    forget_updates(&browser).await;
    std::fs::write(
        root.path().join("plugin-0500/.claude-plugin/plugin.json"),
        "{\"name\": \"plugin-0500-renamed\", \"version\": \"2.0.0\"}",
    )
    .unwrap();
    browser
        .until(
            "the renamed plugin",
            "return [...document.querySelectorAll('.card-title')].some(t => t.textContent === 'plugin-0500-renamed')",
        )
        .await;
    let edit = last_update(&browser, "session/customizationUpdated").await;
    browser.screenshot("load-1000-plugins").await;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let report = format!(
        "console with 1,000 plugins (5,000 children) and 50 servers, headless Chromium:\n\
         first render (navigation start → tree on screen), 3 loads: {} ms (median {:.0} ms)\n\
         live server state change → on screen, 10 updates: median {:.1} ms, max {:.1} ms\n\
         plugin edit on disk → customizationUpdated → on screen: {:.1} ms\n",
        firsts
            .iter()
            .map(|f| format!("{f:.0}"))
            .collect::<Vec<_>>()
            .join(", "),
        median(firsts.clone()),
        median(updates.clone()),
        updates.iter().copied().fold(0.0, f64::max),
        edit,
    );
    eprintln!("{report}");
    std::fs::write(screenshot_dir().join("render-figures.txt"), &report).unwrap();
    browser.close().await;
}

async fn forget_updates(browser: &Browser) {
    browser
        .eval("window.ahpConsole.stats.updates.length = 0; return true")
        .await;
}

/// How long the page took to show the latest action of `kind` (arrival → next frame).
async fn last_update(browser: &Browser, kind: &str) -> f64 {
    browser
        .until(
            &format!("the time of the last {kind}"),
            &format!("const u = window.ahpConsole.stats.updates.filter(u => u.type === '{kind}'); return u.length && u[u.length - 1].ms"),
        )
        .await
        .as_f64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_call_is_marked_and_resumed_with_a_pasted_token_or_given_up() {
    let _one = ONE_BROWSER.lock().await;
    // A protected server, ready with a token that may not call `add` (scope `admin`).
    let (server, proxy, _w, _seen) = protected::ready_with_narrow_token("").await;
    let browser = Browser::start().await;
    open_console(&browser, &proxy).await;
    server_state(&browser, "remote", "ready").await;

    // The server refuses `add` for want of scope: the page marks the call paused, with what
    // is needed.
    let paused =
        "document.querySelector('.call[data-tool=\"add\"][data-status=\"auth-required\"]')";
    let (_harness, call) = protected::harness_calls_add(&proxy, 2, 3).await;
    let shown = browser
        .until(
            "the call marked paused",
            &format!("const c = {paused}; return c && c.innerText"),
        )
        .await;
    let shown = shown.as_str().unwrap();
    assert!(shown.contains("paused for authorization"), "{shown}");
    assert!(shown.contains("notes admin"), "{shown}");
    assert!(shown.contains("add needs admin"), "{shown}");
    browser.screenshot("paused-call").await;

    // A token with the scope, typed into the call's field: the call resumes and completes.
    server.tokens.lock().unwrap().insert("WIDE-SENTINEL".into());
    server.admins.lock().unwrap().insert("WIDE-SENTINEL".into());
    let field = browser
        .client
        .find(fantoccini::Locator::Css(
            ".call[data-status=\"auth-required\"] form.paused input",
        ))
        .await
        .expect("the token field");
    field.send_keys("WIDE-SENTINEL").await.unwrap();
    browser
        .click(".call[data-status=\"auth-required\"] form.paused button[type=\"submit\"]")
        .await;
    let result = tokio::time::timeout(PATIENCE, call)
        .await
        .expect("the call completes")
        .unwrap()
        .expect("a result, not an error");
    let result = serde_json::to_value(&result).unwrap();
    assert_eq!(result["structuredContent"]["sum"], json!(5), "{result}");
    browser
        .until(
            "the resumed call, done",
            "const c = document.querySelector('.call[data-tool=\"add\"][data-status=\"completed\"]'); return c && c.classList.contains('call-ok')",
        )
        .await;

    // The same token loses the scope: the next call pauses, and the user gives up.
    server.admins.lock().unwrap().clear();
    let (_harness2, call) = protected::harness_calls_add(&proxy, 1, 1).await;
    browser
        .until("the second call paused", &format!("return !!{paused}"))
        .await;
    browser
        .click(".call[data-status=\"auth-required\"] form.paused button.danger")
        .await;
    let refused = tokio::time::timeout(PATIENCE, call)
        .await
        .expect("the call ends")
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(refused.contains("declined"), "{refused}");
    let failed = browser
        .until(
            "the given-up call, failed",
            "const c = document.querySelector('.call[data-tool=\"add\"].call-failed'); return c && c.innerText",
        )
        .await;
    assert!(
        failed
            .as_str()
            .unwrap()
            .contains("gave up waiting for authorization"),
        "{failed}"
    );
    let page = browser.eval("return document.body.innerText").await;
    assert!(!page.to_string().contains("SENTINEL"), "{page}");
    browser.close().await;
}
