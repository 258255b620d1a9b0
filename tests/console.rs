//! The web console in a real browser (headless Chromium over WebDriver): the bundled tree
//! with its states, steering from the page, a crash shown live, an MCP App View in its
//! sandbox calling a tool through the `mcp://` channel, the page's mirror equal to a fresh
//! snapshot, a call paused for authorization resumed with a pasted token or given up, a
//! foreign origin refused, render times with 1,000 plugins and 50 servers and the filter
//! over them; the workbench (every server's offer, a tool called from its schema form, a
//! resource read, a prompt got), the summary and what needs attention, the activity's JSON,
//! timing and charts; focus, announcements and names for assistive technology, and the page
//! on a phone; an open tool form, its typed value and the focus kept through redraws; a call
//! held for approval, and a result held for review, decided from the page; the pictures of
//! the documentation. Screenshots go to `target/tmp/console-screenshots/`.

mod browser;
mod common;
#[allow(dead_code)] // the metadata fields are for tests/auth.rs
#[path = "common/protected.rs"]
mod protected;

use std::path::Path;
use std::time::Duration;

use browser::{screenshot_dir, Browser};
use common::{alive, child_pids, examples, server, Proxy, Raw, ScratchDir, Watcher, PATIENCE};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One browser at a time: the machine has two cores.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The console's URL with the approval key, as the banner shows it on a terminal.
fn console_url(proxy: &Proxy) -> String {
    proxy.console_url()
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

/// A fresh browser with the console of `proxy` open, once each server of `ready` shows as
/// ready in it.
async fn console_with(proxy: &Proxy, ready: &[&str]) -> Browser {
    let browser = Browser::start().await;
    open_console(&browser, proxy).await;
    for name in ready {
        server_state(&browser, name, "ready").await;
    }
    browser
}

/// Open server `name`'s offer (*Tools, resources and prompts*) once it was read (its summary
/// counts `counts`): clicked before, the section could still grow above the summary as the
/// read lands (its MCP Apps' *Try it* forms), and the click fall beside it.
async fn open_offer(browser: &Browser, name: &str, counts: &str) {
    let summary = format!(".server[data-server=\"{name}\"] details.offer > summary");
    browser
        .until(
            &format!("{name}'s offer, read"),
            &format!("const s = document.querySelector('{summary}'); return s && s.textContent.includes('{counts}')"),
        )
        .await;
    browser.click(&summary).await;
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

/// The bundled examples (what `proxy.toml` serves), their data in a scratch folder; `extra`
/// is more configuration.
fn bundled(tag: &str, extra: &str) -> (Proxy, ScratchDir) {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins-examples");
    let data = ScratchDir::new(tag);
    let proxy = Proxy::start(&format!(
        "plugin_roots = [{:?}]\nmanifests = [{:?}]\ndata_dir = {:?}\n{extra}",
        examples.display().to_string(),
        examples.join("plugins.json").display().to_string(),
        data.path().display().to_string(),
    ));
    (proxy, data)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_bundled_tree_renders_with_the_right_states() {
    let _one = ONE_BROWSER.lock().await;
    let (proxy, _data) = bundled("console-bundled", "");
    let browser = console_with(
        &proxy,
        &[
            "lint",
            "clock",
            "release-dashboard",
            "notes",
            "scratch-notes",
        ],
    )
    .await;
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
    let browser = console_with(&proxy, &["a"]).await;
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
                       "initialSubscriptions": ["ahp-root://", "ahp-proxy:/default", "ahp-chat:/harness"]}),
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
                "ahp-proxy:/default" => "session",
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
    let browser = console_with(&proxy, &["c"]).await;
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

/// Call the `app` example's `show_dashboard` from its *Try it* form and wait for its View.
async fn open_dashboard_view(browser: &Browser) {
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
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_view_renders_in_its_sandbox_and_calls_a_tool_through_the_channel() {
    let _one = ONE_BROWSER.lock().await;
    let proxy = Proxy::start(&server("dashboard", "app", &[]));
    let browser = console_with(&proxy, &["dashboard"]).await;
    open_dashboard_view(&browser).await;
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
    // The refusal is logged as it is sent: the line may land just after the browser hears it.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while proxy.log_count("http://evil.example") == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
        .goto(&format!("http://{}/?token={token}", proxy.addr))
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
        let skills: Vec<_> = (0..3)
            .map(|n| (format!("skill-{n}"), format!("Skill {n} of plugin {i}")))
            .collect();
        let plugin = plugin_folder(
            root.path(),
            &format!("plugin-{i:04}"),
            &format!(", \"version\": \"1.0.{i}\""),
            &skills,
        );
        if i % 20 == 0 {
            std::fs::write(
                plugin.join(".mcp.json"),
                json!({"mcpServers": {format!("server-{i:04}"): {"command": examples(), "args": ["echo"]}}})
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
    // The filter, typed: each keystroke narrows the 1,000 plugins (input → next frame, style
    // and layout included); by a plugin's name, then by a tool's name (every server's
    // `echo`, read through its channel).
    // Each keystroke's latency as the browser's Event Timing API measures it (the key's
    // events, from the key press to the next paint after they were handled): entries of
    // 16 ms or more are reported, shorter ones are not.
    browser
        .eval(
            "window.keyEvents = []; window.keyMarks = [];\
             window.keyObserver = new PerformanceObserver((list) => window.keyEvents.push(...list.getEntries().map((e) => ({name: e.name, start: e.startTime, duration: e.duration}))));\
             window.keyObserver.observe({type: 'event', durationThreshold: 16, buffered: false}); return true",
        )
        .await;
    let mut typed = Vec::new();
    // By a plugin's name, by a tool's name, then the tool's name erased key by key (the
    // last erasure shows the 1,000 plugins again).
    let erase = ["\u{E003}"; 4];
    let runs: [(bool, Vec<&str>, usize); 3] = [
        (
            true,
            "plugin-0999".split_terminator("").skip(1).collect(),
            1,
        ),
        (true, "echo".split_terminator("").skip(1).collect(), 50),
        (false, erase.to_vec(), 1000),
    ];
    for (fresh, keys, cards) in runs {
        browser
            .until(
                "the 50 servers' tools, read",
                "return document.querySelectorAll('.server .tool-count').length === 50",
            )
            .await;
        let mut query = browser
            .eval(&format!(
                "const f = document.getElementById('filter'); if ({fresh}) {{ f.value = ''; f.dispatchEvent(new Event('input')); }} f.focus(); return f.value"
            ))
            .await
            .as_str()
            .unwrap()
            .to_string();
        browser
            .until(
                "every plugin shown before typing",
                "return !document.getElementById('filter').value && document.querySelectorAll('#tree > .card:not([hidden])').length === 1000 || document.getElementById('filter').value",
            )
            .await;
        // One key at a time, each measured alone (keys sent at once share a frame).
        for key in &keys {
            if *key == "\u{E003}" {
                query.pop();
            } else {
                query.push_str(key);
            }
            browser
                .eval(&format!(
                    "window.ahpConsole.stats.filters.length = 0; window.keyMarks.push([performance.now(), '{}']); return true",
                    if query.is_empty() { "(empty)" } else { &query }
                ))
                .await;
            browser
                .client
                .active_element()
                .await
                .unwrap()
                .send_keys(key)
                .await
                .unwrap();
            let time = browser
                .until(
                    &format!("the filter on screen for {query:?}"),
                    &format!(
                        "const f = window.ahpConsole.stats.filters; const l = f[f.length - 1]; return l && l.query === '{query}' && (l.done !== undefined || !l.batched) && [l.ms, l.applied, l.done === undefined ? l.ms : l.done]"
                    ),
                )
                .await;
            typed.push((
                if query.is_empty() {
                    "(empty)".to_string()
                } else {
                    query.clone()
                },
                time[0].as_f64().unwrap(),
                time[1].as_f64().unwrap(),
                time[2].as_f64().unwrap(),
            ));
        }
        browser
            .until(
                &format!("{cards} plugin(s) left for {query:?}"),
                &format!("return document.querySelectorAll('#tree > .card:not([hidden])').length === {cards}"),
            )
            .await;
        if query == "echo" {
            let shown = browser
                .eval("return [...document.querySelectorAll('#tree > .card:not([hidden]) .tool[data-tool=\"echo\"]')].filter(t => t.offsetParent).length")
                .await;
            assert_eq!(shown, 50, "each server's echo tool, shown");
            browser.screenshot("filter-1000-plugins").await;
        }
    }
    // The observer's last entries, then each keystroke's slowest event (0: under 16 ms).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let keys = browser
        .eval(
            "window.keyEvents.push(...window.keyObserver.takeRecords().map((e) => ({name: e.name, start: e.startTime, duration: e.duration})));\
             const marks = window.keyMarks; return marks.map(([at, query], i) => {\
               const until = i + 1 < marks.length ? marks[i + 1][0] : Infinity;\
               const mine = window.keyEvents.filter((e) => e.start >= at && e.start < until);\
               return [query, Math.max(0, ...mine.map((e) => e.duration)), mine.map((e) => `${e.name} ${e.duration}`).join(' ')]; })",
        )
        .await;
    let keys: Vec<(String, f64, String)> = keys
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k[0].as_str().unwrap().to_string(),
                k[1].as_f64().unwrap(),
                k[2].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let report = format!(
        "console with 1,000 plugins (5,000 children) and 50 servers, headless Chromium:\n\
         first render (navigation start → tree on screen), 3 loads: {} ms (median {:.0} ms)\n\
         live server state change → on screen, 10 updates: median {:.1} ms, max {:.1} ms\n\
         plugin edit on disk → customizationUpdated → on screen: {:.1} ms\n\
         filter, each of {} keystrokes → the narrowed tree on screen: median {:.1} ms, max {:.1} ms\n\
         filter, by keystroke (in brackets: the first batch's script, before style and layout; the last batch applied): {}\n\
         filter, Event Timing (key press → next paint; under 16 ms is not reported) over {} keystrokes: slowest {}, median {}\n\
         filter, Event Timing by keystroke: {}\n",
        firsts
            .iter()
            .map(|f| format!("{f:.0}"))
            .collect::<Vec<_>>()
            .join(", "),
        median(firsts.clone()),
        median(updates.clone()),
        updates.iter().copied().fold(0.0, f64::max),
        edit,
        typed.len(),
        median(typed.iter().map(|(_, ms, _, _)| *ms).collect()),
        typed.iter().map(|(_, ms, _, _)| *ms).fold(0.0, f64::max),
        typed
            .iter()
            .map(|(query, ms, applied, done)| format!("{query} {ms:.1} ({applied:.1}; all cards {done:.1})"))
            .collect::<Vec<_>>()
            .join(", "),
        keys.len(),
        event_ms(keys.iter().map(|(_, ms, _)| *ms).fold(0.0, f64::max)),
        event_ms(median(keys.iter().map(|(_, ms, _)| *ms).collect())),
        keys.iter()
            .map(|(query, ms, events)| format!("{query} {} [{events}]", event_ms(*ms)))
            .collect::<Vec<_>>()
            .join(", "),
    );
    eprintln!("{report}");
    std::fs::write(screenshot_dir().join("render-figures.txt"), &report).unwrap();
    browser.close().await;
}

/// An Event Timing duration: "< 16 ms" when none was reported (the API's lowest threshold).
fn event_ms(ms: f64) -> String {
    if ms > 0.0 {
        format!("{ms:.0} ms")
    } else {
        "< 16 ms".into()
    }
}

/// Plugin folder `name` under `root`: its manifest (`name`, then `manifest_rest`, more JSON
/// members), each skill of `skills` (name, description) and one agent, `helper`.
fn plugin_folder(
    root: &Path,
    name: &str,
    manifest_rest: &str,
    skills: &[(String, String)],
) -> std::path::PathBuf {
    let plugin = root.join(name);
    std::fs::create_dir_all(plugin.join(".claude-plugin")).unwrap();
    std::fs::write(
        plugin.join(".claude-plugin/plugin.json"),
        format!("{{\"name\": \"{name}\"{manifest_rest}}}"),
    )
    .unwrap();
    for (skill, description) in skills {
        let dir = plugin.join(format!("skills/{skill}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {skill}\ndescription: {description}\n---\nbody\n"),
        )
        .unwrap();
    }
    std::fs::create_dir_all(plugin.join("agents")).unwrap();
    std::fs::write(
        plugin.join("agents/helper.md"),
        "---\ndescription: An agent\n---\nbody\n",
    )
    .unwrap();
    plugin
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
    let browser = console_with(&proxy, &["remote"]).await;

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

/// A harness session on the proxy's MCP front.
async fn harness(proxy: &Proxy) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    ().serve(StreamableHttpClientTransport::from_uri(
        proxy.mcp_url.clone(),
    ))
    .await
    .expect("harness session")
}

/// The harness calls `name` with `args`.
async fn harness_calls(
    harness: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &str,
    args: Value,
) {
    let params: CallToolRequestParams =
        serde_json::from_value(json!({"name": name, "arguments": args})).unwrap();
    harness.peer().call_tool(params).await.expect(name);
}

/// The workbench on the bundled examples: every server's tools, resources, templates and
/// prompts listed through its channel; `file_note` (nested objects, arrays, an enum with a
/// default, `$ref`s) called from its form and as raw JSON, its structured result checked
/// against its output schema; an image resource read, a template filled in and read, a
/// prompt got with its arguments; the console's own call in the activity, marked as its.
#[tokio::test(flavor = "multi_thread")]
async fn the_workbench_lists_every_offer_and_calls_reads_and_gets_through_the_channel() {
    let _one = ONE_BROWSER.lock().await;
    let (proxy, _data) = bundled("console-workbench", "");
    let browser = console_with(&proxy, &["notes", "release-dashboard"]).await;
    let notes = ".server[data-server=\"notes\"]";
    open_offer(
        &browser,
        "notes",
        "4 tools, 1 resource, 1 template, 1 prompt",
    )
    .await;
    let listed = browser
        .until(
            "the notes offer, open",
            &format!(
                "const o = document.querySelector('{notes} details.offer'); const all = (sel, key) => [...o.querySelectorAll(sel)].map(e => e.dataset[key]);\
                 const tools = all('li.tool', 'tool'); return tools.length && {{tools, resources: all('li.resource', 'uri'), templates: all('li.template', 'template'), prompts: all('li.prompt', 'prompt')}}"
            ),
        )
        .await;
    assert_eq!(
        listed,
        json!({"tools": ["add_note", "list_notes", "read_note", "file_note"],
               "resources": ["notes://icon.svg"], "templates": ["notes:///{title}"],
               "prompts": ["summarize_note"]})
    );
    // Annotations, title and description are shown; the App server's View resource and
    // app-only tool too.
    let file_note = format!("{notes} li.tool[data-tool=\"file_note\"]");
    let summary = browser
        .eval(&format!(
            "return document.querySelector('{file_note} summary').textContent"
        ))
        .await;
    assert_eq!(summary, "file_note File a note idempotent");
    open_offer(&browser, "release-dashboard", "2 tools, 1 resource").await;
    let dashboard = browser
        .until(
            "the dashboard's offer",
            "const o = document.querySelector('.server[data-server=\"release-dashboard\"] details.offer'); const r = o.querySelector('li.resource'); return r && [r.dataset.uri, o.querySelector('li.tool[data-tool=\"refresh_dashboard\"] summary').textContent, o.innerText.includes('null')]",
        )
        .await;
    assert_eq!(
        dashboard,
        json!([
            "ui://release-dashboard/view.html",
            "refresh_dashboard App only",
            false
        ])
    );

    // file_note from its form: the `$ref`s resolved into fields, the enum's default chosen.
    browser.click(&format!("{file_note} summary")).await;
    let form = format!("{file_note} form.call-tool");
    let fields = browser
        .until(
            "file_note's form",
            &format!("const f = document.querySelector('{form}'); return f && [...f.querySelectorAll('[data-path]')].map(e => e.tagName.toLowerCase() + ' ' + e.dataset.path + (e.tagName === 'SELECT' ? ' = ' + e.value : ''))"),
        )
        .await;
    assert_eq!(
        fields,
        json!([
            "textarea text",
            "input title",
            "fieldset meta",
            "fieldset meta.author",
            "input meta.author.name",
            "input meta.author.email",
            "select meta.priority = \"normal\"",
            "fieldset meta.reviewers",
            "button meta.reviewers",
            "fieldset meta.tags",
            "button meta.tags"
        ])
    );
    // Nothing typed yet: checked against the schema, not sent.
    browser
        .click(&format!("{form} button[type=\"submit\"]"))
        .await;
    let refused = browser
        .until(
            "the form's refusal",
            &format!(
                "const p = document.querySelector('{form} .form-error'); return p && p.textContent"
            ),
        )
        .await;
    assert!(
        refused.as_str().unwrap().starts_with("Not sent: ")
            && refused.as_str().unwrap().contains("text is required")
            && refused.as_str().unwrap().contains("title is required"),
        "{refused}"
    );
    browser
        .eval(&format!(
            "const f = document.querySelector('{form}'); const set = (p, v) => f.querySelector(`[data-path=\"${{p}}\"]:not(button)`).value = v;\
             set('title', 'plan'); set('text', 'ship the workbench'); set('meta.priority', '\"high\"'); set('meta.author.name', 'Ada');\
             f.querySelector('button.add-item[data-path=\"meta.tags\"]').click(); set('meta.tags[0]', 'console');\
             f.querySelector('button.add-item[data-path=\"meta.reviewers\"]').click(); set('meta.reviewers[0].name', 'Bo'); return true"
        ))
        .await;
    browser.screenshot("workbench-form").await;
    browser
        .click(&format!("{form} button[type=\"submit\"]"))
        .await;
    let result = browser
        .until(
            "file_note's result",
            &format!(
                "const r = document.querySelector('{file_note} .result'); return r && r.innerText"
            ),
        )
        .await;
    let result = result.as_str().unwrap();
    assert!(
        result.contains("filed \"plan\": 3 words, high priority, 2 people"),
        "{result}"
    );
    assert!(
        result.contains("structuredContent matches the output schema"),
        "{result}"
    );
    // The picture in the README and docs/console.md.
    browser
        .until(
            "the call in the activity",
            "return document.querySelector('.call[data-tool=\"file_note\"][data-status=\"completed\"]') && document.querySelector('.chart-row')",
        )
        .await;
    // A turn's head says what is known, never "null" for a duration not measured yet.
    let heads = browser
        .eval("return [...document.querySelectorAll('.turn-head')].map(h => h.innerText)")
        .await;
    assert!(!heads.to_string().contains("null"), "{heads}");
    browser
        .eval(&format!(
            "document.querySelector('{file_note}').scrollIntoView(); return true"
        ))
        .await;
    browser.screenshot("workbench").await;
    // The same tool as raw JSON, and back to the form with what was typed there.
    browser.click(&format!("{form} .form-tools button")).await;
    let raw: Value = serde_json::from_str(
        browser
            .eval(&format!(
                "return document.querySelector('{form} textarea.raw-json').value"
            ))
            .await
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        raw,
        json!({"title": "plan", "text": "ship the workbench",
               "meta": {"priority": "high", "tags": ["console"], "author": {"name": "Ada"},
                        "reviewers": [{"name": "Bo"}]}})
    );
    browser
        .eval(&format!(
            "document.querySelector('{form} textarea.raw-json').value = '{{\"title\": \"raw\", \"text\": \"typed as JSON\"}}'; return true"
        ))
        .await;
    browser
        .click(&format!("{form} button[type=\"submit\"]"))
        .await;
    browser
        .until(
            "the raw call's result",
            &format!("const r = document.querySelector('{file_note} .result'); return r && r.innerText.includes('filed \"raw\": 3 words, normal priority, 0 people')"),
        )
        .await;
    browser.click(&format!("{form} .form-tools button")).await;
    assert_eq!(
        browser
            .eval(&format!(
                "return document.querySelector('{form} input[data-path=\"title\"]').value"
            ))
            .await,
        "raw"
    );

    // An image resource, read: shown, and offered as a download.
    browser
        .click(&format!(
            "{notes} li.resource[data-uri=\"notes://icon.svg\"] button"
        ))
        .await;
    let image = browser
        .until(
            "the icon, read",
            &format!("const r = document.querySelector('{notes} li.resource .result'); const i = r && r.querySelector('img'); return i && i.complete && i.naturalWidth > 0 && [i.naturalWidth, r.querySelector('a.download').textContent]"),
        )
        .await;
    assert_eq!(image[1], "Download icon.svg", "{image}");
    // A template filled in and read.
    browser
        .eval(&format!("document.querySelector('{notes} li.template input[data-variable=\"title\"]').value = 'plan'; return true"))
        .await;
    browser
        .click(&format!("{notes} li.template button[type=\"submit\"]"))
        .await;
    let note = browser
        .until(
            "the note, read",
            &format!("const r = document.querySelector('{notes} li.template .result'); return r && r.innerText"),
        )
        .await;
    assert!(
        note.as_str()
            .unwrap()
            .contains("notes:///plan text/plain\nship the workbench"),
        "{note}"
    );
    // A prompt with its arguments.
    browser
        .eval(&format!("const f = document.querySelector('{notes} form.get-prompt[data-prompt=\"summarize_note\"]'); f.querySelector('[data-argument=\"title\"]').value = 'plan'; f.querySelector('[data-argument=\"style\"]').value = 'bullets'; return true"))
        .await;
    browser
        .click(&format!(
            "{notes} form.get-prompt[data-prompt=\"summarize_note\"] button"
        ))
        .await;
    let prompt = browser
        .until(
            "the prompt, got",
            &format!("const r = document.querySelector('{notes} li.prompt .result'); return r && r.innerText"),
        )
        .await;
    assert!(
        prompt
            .as_str()
            .unwrap()
            .contains("user\nSummarize the note \"plan\" in bullets:\n\nship the workbench"),
        "{prompt}"
    );
    // The console's calls are in the activity, marked as its own.
    let ours = browser
        .until(
            "the console's calls in the activity",
            "const c = [...document.querySelectorAll('.call[data-tool=\"file_note\"][data-status=\"completed\"]')]; return c.length === 2 && c.map(x => [x.dataset.by, x.querySelector('.badge-by').textContent])",
        )
        .await;
    assert_eq!(
        ours,
        json!([
            ["console", "from this console"],
            ["console", "from this console"]
        ])
    );
    browser.screenshot("workbench-results").await;
    // Filtered by a tool's name: the servers that have it, their offer narrowed to it.
    browser
        .eval("const f = document.getElementById('filter'); f.value = 'file_note'; f.dispatchEvent(new Event('input')); return true")
        .await;
    let narrowed = browser
        .until(
            "the servers with file_note",
            "const rows = [...document.querySelectorAll('#tree .server')].filter(r => r.offsetParent); return rows.length && rows.every(r => r.querySelector('details.offer').open) && rows.map(r => [r.dataset.server, [...r.querySelectorAll('li.tool')].filter(t => t.offsetParent).map(t => t.dataset.tool)])",
        )
        .await;
    assert_eq!(
        narrowed,
        json!([
            ["lint", ["file_note"]],
            ["notes", ["file_note"]],
            ["scratch-notes", ["file_note"]]
        ])
    );
    browser.close().await;
}

/// The header's counts equal the host's state and jump to what they count; what needs
/// attention comes first; a harness call's arguments and result are there as JSON with the
/// proxy's timing; each server's chart of calls and latency follows new calls.
#[tokio::test(flavor = "multi_thread")]
async fn the_summary_attention_activity_json_and_charts() {
    let _one = ONE_BROWSER.lock().await;
    // Fast retries: `misconfigured` reaches its crash loop (and stays there) at once.
    let (proxy, _data) = bundled("console-glance", "[supervisor]\nrestart_delay_ms = 20\n");
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    for name in [
        "notes",
        "lint",
        "clock",
        "release-dashboard",
        "scratch-notes",
        "flaky",
    ] {
        w.until(name, "ready", &mut seen).await;
    }
    loop {
        let state = w.until("misconfigured", "error", &mut seen).await;
        if state["error"]["errorType"] == "crashLoop" {
            break;
        }
        w.until("misconfigured", "starting", &mut seen).await;
    }
    // The host's figures, from its state.
    let mut counts = json!({"ready": 0, "starting": 0, "error": 0, "stopped": 0});
    for server in w.servers() {
        let kind = server["state"]["kind"].as_str().unwrap().to_string();
        counts[&kind] = json!(counts[&kind].as_u64().unwrap_or(0) + 1);
    }
    let problems: usize = serde_json::to_value(&w.mirror.customizations)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["load"]["message"].as_str())
        .map(|m| m.lines().filter(|l| !l.is_empty()).count())
        .sum();
    counts["problem"] = json!(problems);
    assert_eq!(
        counts,
        json!({"ready": 6, "starting": 0, "error": 1, "stopped": 0, "problem": 2})
    );
    let browser = console_with(&proxy, &[]).await;
    browser
        .until(
            "the summary, as the host counts",
            &format!(
                "const n = (k) => Number(document.querySelector(`#summary [data-key=\"${{k}}\"]`).dataset.count);\
                 const want = {counts}; return Object.keys(want).every(k => n(k === 'problem' ? 'is:problem' : `state:${{k}}`) === want[k])"
            ),
        )
        .await;
    // What needs attention is first: above the tree, and the tree's first cards.
    let first = browser
        .eval("return {attention: [...document.querySelectorAll('#attention li')].map(l => l.innerText), cards: [...document.querySelectorAll('#tree > .card')].slice(0, 2).map(c => c.getAttribute('aria-label'))}")
        .await;
    let attention: Vec<&str> = first["attention"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        attention
            .iter()
            .any(|a| a.starts_with("misconfigured (ops-tools) crashLoop: failed")),
        "{attention:?}"
    );
    assert!(
        attention
            .iter()
            .any(|a| a.starts_with("broken-plugin broken-plugin/.mcp.json:4:41: invalid JSON")),
        "{attention:?}"
    );
    assert_eq!(first["cards"], json!(["broken-plugin", "ops-tools"]));
    // A part of the summary shows exactly what it counts and takes the focus there.
    browser.click("#summary [data-key=\"state:error\"]").await;
    let jumped = browser
        .until(
            "the failing server, alone",
            "const rows = [...document.querySelectorAll('#tree .server')].filter(r => r.offsetParent); return rows.length === 1 && [document.getElementById('filter').value, rows[0].dataset.server, document.activeElement === rows[0]]",
        )
        .await;
    assert_eq!(jumped, json!(["state:error", "misconfigured", true]));
    browser.click("#summary [data-key=\"state:ready\"]").await;
    browser
        .until(
            "the ready servers",
            "return [...document.querySelectorAll('#tree .server')].filter(r => r.offsetParent).length === 6",
        )
        .await;
    browser.screenshot("summary").await;
    // The problems: the containers with problems or a failing server, and Escape clears it.
    browser.click("#summary [data-key=\"is:problem\"]").await;
    browser
        .until(
            "what needs attention, alone",
            "const shown = [...document.querySelectorAll('#tree > .card')].filter(c => !c.hidden).map(c => c.getAttribute('aria-label'));\
             const want = window.ahpConsole.mirror.session.customizations.filter(c => (c.load && c.load.message) || (c.children || []).some(s => s.state && s.state.kind === 'error')).map(c => c.name);\
             return document.getElementById('filter').value === 'is:problem' && JSON.stringify(shown.sort()) === JSON.stringify(want.sort())",
        )
        .await;
    browser
        .eval("document.getElementById('filter').focus(); return true")
        .await;
    browser
        .client
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E00C}") // Escape
        .await
        .unwrap();
    browser
        .until(
            "every card again",
            "return document.getElementById('filter').value === '' && [...document.querySelectorAll('#tree > .card')].every(c => !c.hidden)",
        )
        .await;

    // A harness call: its arguments and result as JSON, the proxy's timing, its server.
    let harness = harness(&proxy).await;
    harness_calls(&harness, "sleep", json!({"ms": 40})).await;
    let call = ".call[data-tool=\"sleep\"][data-status=\"completed\"]";
    browser
        .until(
            "the harness call",
            &format!("return document.querySelector('{call}')"),
        )
        .await;
    browser
        .click(&format!("{call} details.call-input > summary"))
        .await;
    browser
        .click(&format!("{call} details.call-output > summary"))
        .await;
    let shown = browser
        .eval(&format!(
            "const c = document.querySelector('{call}'); const tc = window.ahpConsole.mirror.chat.turns.concat(window.ahpConsole.mirror.chat.activeTurn || []).flatMap(t => t.responseParts).find(p => p.kind === 'toolCall' && p.toolCall.toolName === 'sleep').toolCall;\
             return {{input: c.querySelector('details.call-input pre').textContent, output: JSON.parse(c.querySelector('details.call-output pre').textContent), duration: c.querySelector('.call-duration').textContent, host: tc._meta['ahp-proxy/call'].durationMs, server: c.querySelector('.call-head').innerText, by: c.dataset.by, era: [c.dataset.era, c.querySelector('.badge-era').textContent]}}"
        ))
        .await;
    assert_eq!(shown["input"], "{\n  \"ms\": 40\n}", "{shown}");
    assert_eq!(
        shown["output"]["content"],
        json!([{"type": "text", "text": "slept 40 ms"}]),
        "{shown}"
    );
    assert_eq!(
        shown["duration"],
        format!("{} ms", shown["host"]),
        "{shown}"
    );
    assert!(shown["host"].as_u64().unwrap() >= 40, "{shown}");
    assert!(
        shown["server"].as_str().unwrap().contains("on clock"),
        "{shown}"
    );
    assert_eq!(shown["by"], "harness");
    // The harness (rmcp, MCP 2025-11-25) spoke the legacy era.
    assert_eq!(shown["era"], json!(["legacy", "MCP 2025"]), "{shown}");
    // The clock's chart: drawn, and following the next calls.
    let chart = ".chart-row[data-server=\"clock\"]";
    let drawn = browser
        .until(
            "the clock's chart",
            &format!("const r = document.querySelector('{chart}'); return r && r.dataset.calls === '1' && [r.querySelectorAll('svg rect.bar').length, r.querySelector('.chart-figures').textContent]"),
        )
        .await;
    assert_eq!(drawn[0], 1, "{drawn}");
    assert!(
        drawn[1].as_str().unwrap().starts_with("1 call · p50 "),
        "{drawn}"
    );
    harness_calls(&harness, "sleep", json!({"ms": 10})).await;
    harness_calls(&harness, "now", json!({})).await;
    let updated = browser
        .until(
            "the chart after two more calls",
            &format!("const r = document.querySelector('{chart}'); return r && r.dataset.calls === '3' && [Number(r.dataset.p50), Number(r.dataset.p95)]"),
        )
        .await;
    assert!(
        updated[1].as_u64().unwrap() >= 40 && updated[0].as_u64() <= updated[1].as_u64(),
        "p50 and p95 of 40, 10 and a few ms: {updated}"
    );
    // The first call, redrawn around by the later ones, is still expanded.
    let open = browser
        .eval("const c = [...document.querySelectorAll('.call[data-tool=\"sleep\"]')].find(c => c.querySelector('details.call-input pre').textContent.includes('40')); return [c.querySelector('details.call-input').open, c.querySelector('details.call-output').open]")
        .await;
    assert_eq!(open, json!([true, true]));
    browser.screenshot("activity-charts").await;
    browser.close().await;
}

/// The element with the keyboard focus, described (`aria-label`, else its text).
const FOCUSED: &str = "const a = document.activeElement; return a === document.body ? 'the page' : (a.getAttribute('aria-label') || a.textContent)";

/// Press Enter on the focused element.
async fn press_enter(browser: &Browser) {
    browser
        .client
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E007}")
        .await
        .unwrap();
}

/// Issue 29, item 20: Stop and Start by keyboard keep the focus on the button pressed (its
/// row is redrawn for the new state), and each state change is said to screen readers.
#[tokio::test(flavor = "multi_thread")]
async fn the_focus_stays_after_stop_and_start_and_state_changes_are_announced() {
    let _one = ONE_BROWSER.lock().await;
    let proxy = Proxy::start(&server("a", "echo", &[]));
    let browser = console_with(&proxy, &["a"]).await;
    let announced = |words: &str| {
        format!("return [...document.querySelectorAll('[aria-live]')].some(r => r.textContent.includes('{words}'))")
    };
    for (button, state) in [("Stop a", "stopped"), ("Start a", "ready")] {
        browser
            .eval(&format!(
                "document.querySelector('.server[data-server=\"a\"] button[aria-label=\"{button}\"]').focus(); return true"
            ))
            .await;
        press_enter(&browser).await;
        server_state(&browser, "a", state).await;
        browser
            .until(
                &format!("\"a: {state}\" announced"),
                &announced(&format!("a: {state}")),
            )
            .await;
        assert_eq!(browser.eval(FOCUSED).await, button, "after {button}");
    }
    browser.close().await;
}

/// Issue 29, item 20: a switch's accessible name holds its visible label (it used to be named
/// by the action, "Disable a", while showing the state, "Enabled"), and its state is
/// `aria-checked`, in both states.
#[tokio::test(flavor = "multi_thread")]
async fn a_switch_is_named_by_its_visible_label() {
    let _one = ONE_BROWSER.lock().await;
    let proxy = Proxy::start(&server("a", "echo", &[]));
    let browser = console_with(&proxy, &["a"]).await;
    let switch = ".server[data-server=\"a\"] button[role=\"switch\"]";
    let named = format!(
        "const s = document.querySelector('{switch}'); const name = (s.getAttribute('aria-label') || s.textContent).toLowerCase();\
         return [s.textContent.trim(), name.includes(s.textContent.trim().toLowerCase()), s.getAttribute('aria-checked')]"
    );
    assert_eq!(browser.eval(&named).await, json!(["Enabled", true, "true"]));
    browser.click(switch).await;
    server_state(&browser, "a", "stopped").await;
    let off = browser
        .until(
            "the switch off",
            &format!("return document.querySelector('{switch}').getAttribute('aria-checked') === 'false'"),
        )
        .await;
    assert_eq!(off, true);
    let shown = browser.eval(&named).await;
    assert_eq!(shown[1], true, "{shown}");
    assert_eq!(shown[2], "false", "{shown}");
    browser.close().await;
}

/// Issue 29, item 21: a call the page did not see live shows the proxy's timing (it showed
/// "0 ms").
#[tokio::test(flavor = "multi_thread")]
async fn a_calls_duration_is_the_proxys_measure_even_when_the_page_came_later() {
    let _one = ONE_BROWSER.lock().await;
    let proxy = Proxy::start(&server("clock", "clock", &[]));
    let mut w = Watcher::open(&proxy).await;
    w.until("clock", "ready", &mut Vec::new()).await;
    let harness = harness(&proxy).await;
    harness_calls(&harness, "sleep", json!({"ms": 80})).await;
    let browser = console_with(&proxy, &[]).await;
    let head = browser
        .until(
            "the earlier call",
            "const c = document.querySelector('.call[data-tool=\"sleep\"][data-status=\"completed\"]'); return c && c.querySelector('.call-head').innerText",
        )
        .await;
    let head = head.as_str().unwrap().to_string();
    // A line of its own ("90 ms" contains "0 ms").
    assert!(head.lines().all(|line| line.trim() != "0 ms"), "{head}");
    // What the proxy measured, as any AHP client reads it.
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize("reader", &[]).await;
    let chat = raw
        .request("subscribe", json!({"channel": "ahp-chat:/harness"}))
        .await;
    let text = chat.to_string();
    let at = text
        .find("\"durationMs\":")
        .unwrap_or_else(|| panic!("the proxy's timing of the call: {chat}"));
    let ms: String = text[at + 13..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    assert!(ms.parse::<u64>().unwrap() >= 80, "{ms}");
    assert!(head.contains(&format!("{ms} ms")), "{head} shows {ms} ms");
    browser.close().await;
}

/// Issue 29, item 22: "1 skill", not "1 skills"; the favicon is served.
#[tokio::test(flavor = "multi_thread")]
async fn children_are_counted_in_the_singular_and_the_favicon_is_served() {
    let _one = ONE_BROWSER.lock().await;
    let root = ScratchDir::new("console-plurals");
    for (plugin, skills) in [("one-each", 1), ("two-skills", 2)] {
        let skills: Vec<_> = (0..skills)
            .map(|n| (format!("s{n}"), "A skill".to_string()))
            .collect();
        plugin_folder(root.path(), plugin, "", &skills);
    }
    let proxy = Proxy::start(&format!(
        "plugin_roots = [{:?}]\n",
        root.path().display().to_string()
    ));
    let authority = proxy.addr.to_string();
    let icon = http_get(&authority, "/favicon.ico", &[("host", &authority)]).await;
    assert!(
        icon.starts_with("HTTP/1.1 200") && icon.contains("image/svg+xml"),
        "{icon}"
    );
    let browser = console_with(&proxy, &[]).await;
    let counts = browser
        .until(
            "the children's counts",
            "const s = [...document.querySelectorAll('.card')].map(c => c.getAttribute('aria-label') + ': ' + c.querySelector('details.children summary').textContent).sort(); return s.length === 2 && s",
        )
        .await;
    assert_eq!(
        counts,
        json!([
            "one-each: 1 agent, 1 skill",
            "two-skills: 1 agent, 2 skills"
        ])
    );
    let linked = browser
        .eval("const l = document.querySelector('link[rel=\"icon\"]'); return l && new URL(l.href).pathname")
        .await;
    let path = linked.as_str().expect("the page names its icon");
    let served = http_get(&authority, path, &[("host", &authority)]).await;
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
    browser.close().await;
}

/// Issue 29, item 22: on a phone the header is one row ("ahp-proxy" used to break in two and
/// the header took 100 px), nothing is wider than the screen, and a View scrolled to lands
/// below the sticky header, not under it.
#[tokio::test(flavor = "multi_thread")]
async fn on_a_phone_the_header_is_one_row_and_a_view_scrolled_to_is_below_it() {
    let _one = ONE_BROWSER.lock().await;
    let servers: String = (0..8)
        .map(|i| server(&format!("echo-{i}"), "echo", &[]))
        .collect();
    let proxy = Proxy::start(&format!("{servers}{}", server("dashboard", "app", &[])));
    let browser = Browser::start().await;
    browser.client.set_window_size(375, 740).await.unwrap();
    open_console(&browser, &proxy).await;
    server_state(&browser, "dashboard", "ready").await;
    let layout = browser
        .eval("const h1 = document.querySelector('h1'); return {width: innerWidth, h1: h1.getBoundingClientRect().height / parseFloat(getComputedStyle(h1).lineHeight), header: document.querySelector('header').getBoundingClientRect().height, overflow: document.documentElement.scrollWidth - innerWidth}")
        .await;
    assert!(layout["width"].as_f64().unwrap() <= 400.0, "{layout}");
    assert!(
        layout["h1"].as_f64().unwrap() < 1.5,
        "the title on one line: {layout}"
    );
    assert!(layout["header"].as_f64().unwrap() <= 60.0, "{layout}");
    assert!(layout["overflow"].as_f64().unwrap() <= 0.0, "{layout}");
    browser.screenshot("phone").await;
    // A View opened, the page scrolled away and back to it.
    open_dashboard_view(&browser).await;
    let place = browser
        .eval("window.scrollTo(0, document.body.scrollHeight); const v = document.querySelector('.view'); v.scrollIntoView(); return {scrolled: scrollY, view: v.getBoundingClientRect().top, header: document.querySelector('header').getBoundingClientRect().bottom}")
        .await;
    assert!(place["scrolled"].as_f64().unwrap() > 0.0, "{place}");
    assert!(
        place["view"].as_f64().unwrap() >= place["header"].as_f64().unwrap(),
        "the View's top is under the header: {place}"
    );
    browser.screenshot("phone-view").await;
    browser.close().await;
}

/// The harness calls `name` with `args` in the background; its answer comes from the task.
fn harness_calls_later(
    harness: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &str,
    args: Value,
) -> tokio::task::JoinHandle<rmcp::model::CallToolResult> {
    let peer = harness.peer().clone();
    let params: CallToolRequestParams =
        serde_json::from_value(json!({"name": name, "arguments": args})).unwrap();
    let name = name.to_string();
    tokio::spawn(async move { peer.call_tool(params).await.expect(&name) })
}

/// The text of a tool result.
fn result_text(result: &rmcp::model::CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The console's part of `innerText` for the held call of `tool`, once it is shown and the
/// header counts `count` pending approvals.
async fn held_in_console(browser: &Browser, tool: &str, count: u32) -> String {
    let shown = browser
        .until(
            &format!("the held call of {tool}, counted {count}"),
            &format!(
                "const li = document.querySelector('#approvals .approval[data-tool=\"{tool}\"]'); \
                 const n = document.querySelector('.sum-approvals'); \
                 return li && !document.getElementById('approvals').hidden && n && !n.hidden \
                   && n.dataset.count === '{count}' ? n.textContent + '\\n' + li.innerText : null"
            ),
        )
        .await;
    shown.as_str().unwrap_or_default().to_string()
}

/// Issue 44: a manifest's server that waits for trust is asked about at the top of the
/// console, saying what it would run; Approve trusts it, and it starts.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_awaiting_trust_is_trusted_from_the_console() {
    let _one = ONE_BROWSER.lock().await;
    let dir = ScratchDir::new("console-trust");
    let manifest = dir.path().join("project.mcp.json");
    let declared = json!({"mcpServers": {"calc": {"command": examples(), "args": ["echo"]}}});
    std::fs::write(&manifest, declared.to_string()).unwrap();
    let proxy = Proxy::start(&format!(
        "manifests = [{:?}]\n[trust]\nmanifests = \"ask\"\n",
        manifest.display().to_string()
    ));
    let browser = console_with(&proxy, &[]).await;
    let shown = held_in_console(&browser, "trust_mcp_server", 1).await;
    for part in [
        "Trust and run MCP server calc?",
        &format!("runs: {} echo", examples()),
        "project.mcp.json",
        "Approve",
    ] {
        assert!(shown.contains(part), "{part:?} in {shown}");
    }
    assert!(
        !shown.contains("Allow this tool"),
        "no session grant: {shown}"
    );
    server_state(&browser, "calc", "stopped").await;
    browser.screenshot("trust-pending").await;
    browser
        .click(".approval[data-tool=\"trust_mcp_server\"] button.approve")
        .await;
    server_state(&browser, "calc", "ready").await;
    browser.close().await;
}

/// Issue 32: a harness call held by `[approval]` shows at the top of the console with its
/// tool, server, who asked, arguments and options, counted in the header (the count jumps
/// to it); Approve with an edited input lets it through with that input; Deny with a reason
/// gives the harness `isError` naming the console and the reason.
#[tokio::test(flavor = "multi_thread")]
async fn a_held_call_is_approved_with_an_edited_input_or_denied_with_a_reason_in_the_console() {
    let _one = ONE_BROWSER.lock().await;
    let proxy = Proxy::start(&format!(
        "{}[approval]\nmode = \"always\"\n",
        server("echo", "echo", &[])
    ));
    let browser = console_with(&proxy, &["echo"]).await;
    let harness = harness(&proxy).await;

    let call = harness_calls_later(&harness, "echo", json!({"text": "as asked"}));
    let shown = held_in_console(&browser, "echo", 1).await;
    for part in [
        "1 pending approval",
        // The Markdown title's code spans shown as code, without their backticks.
        "Allow echo on echo?",
        "tool echo on echo, asked by the harness",
        "as asked",
        "Allow once",
        "Allow this tool for this session",
        "Allow this server for this session",
        "Approve",
        "Deny",
    ] {
        assert!(shown.contains(part), "{part:?} in {shown}");
    }
    let codes = browser
        .eval(
            "return [...document.querySelectorAll('#approvals .approval[data-tool=\"echo\"] .approval-head strong code')].map((c) => c.textContent)",
        )
        .await;
    assert_eq!(codes, json!(["echo", "echo"]), "the title's code spans");
    browser.screenshot("approval-pending").await;
    // The header's count jumps to the list: the first Approve gets the focus.
    browser.click(".sum-approvals").await;
    let focused = browser
        .until(
            "Approve focused",
            "return document.activeElement && document.activeElement.dataset.key",
        )
        .await;
    assert!(
        focused.as_str().unwrap_or_default().starts_with("approve:"),
        "{focused}"
    );
    // Input that is not JSON is refused unsent, the call still waiting.
    browser
        .eval("document.querySelector('.approval[data-tool=\"echo\"] textarea').value = '{text'; return true")
        .await;
    browser
        .click(".approval[data-tool=\"echo\"] button.approve")
        .await;
    browser
        .until(
            "the input refused",
            "const e = document.querySelector('.approval[data-tool=\"echo\"] .approval-error'); return e && !e.hidden && e.textContent.includes('not JSON')",
        )
        .await;
    browser
        .eval("document.querySelector('.approval[data-tool=\"echo\"] textarea').value = '{\"text\": \"as edited\"}'; return true")
        .await;
    browser
        .click(".approval[data-tool=\"echo\"] button.approve")
        .await;
    let result = call.await.unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(result_text(&result), "as edited", "{result:?}");
    browser
        .until(
            "the list and the count gone",
            "return document.getElementById('approvals').hidden && document.querySelector('.sum-approvals').hidden",
        )
        .await;

    let call = harness_calls_later(&harness, "echo", json!({"text": "rm -rf"}));
    held_in_console(&browser, "echo", 1).await;
    browser
        .eval("document.querySelector('.approval[data-tool=\"echo\"] .approval-reason').value = 'not on my machine'; return true")
        .await;
    browser
        .click(".approval[data-tool=\"echo\"] button.deny")
        .await;
    let result = call.await.unwrap();
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let said = result_text(&result);
    assert!(
        said.contains("denied by AHP client \"console-") && said.contains("not on my machine"),
        "{said}"
    );
    browser
        .until(
            "the list gone again",
            "return document.getElementById('approvals').hidden",
        )
        .await;
    browser.close().await;
}

/// Issue 32: a result held for review (`review_result`) shows in the console with its content;
/// *Approve result* lets it reach the harness.
#[tokio::test(flavor = "multi_thread")]
async fn a_result_held_for_review_is_approved_in_the_console() {
    let _one = ONE_BROWSER.lock().await;
    let proxy = Proxy::start(&format!(
        "{}[approval.servers.echo.tools.echo]\nreview_result = true\n",
        server("echo", "echo", &[])
    ));
    let browser = console_with(&proxy, &["echo"]).await;
    let harness = harness(&proxy).await;
    let call = harness_calls_later(&harness, "echo", json!({"text": "for your eyes"}));
    let shown = browser
        .until(
            "the result held for review",
            "const li = document.querySelector('#approvals .approval[data-kind=\"result\"]'); \
             const n = document.querySelector('.sum-approvals'); \
             return li && n && !n.hidden ? n.textContent + '\\n' + li.innerText : null",
        )
        .await;
    let shown = shown.as_str().unwrap_or_default();
    for part in [
        "1 pending approval",
        "for your eyes",
        "Approve result",
        "Deny result",
    ] {
        assert!(shown.contains(part), "{part:?} in {shown}");
    }
    browser
        .click(".approval[data-kind=\"result\"] button.approve")
        .await;
    let result = call.await.unwrap();
    assert_eq!(result_text(&result), "for your eyes", "{result:?}");
    browser
        .until(
            "the list gone",
            "return document.getElementById('approvals').hidden",
        )
        .await;
    browser.close().await;
}

/// Press `key` (a WebDriver key code, or text) on the focused element.
async fn press(browser: &Browser, key: &str) {
    browser
        .client
        .active_element()
        .await
        .unwrap()
        .send_keys(key)
        .await
        .unwrap();
}

const TAB: &str = "\u{E004}";
const ENTER: &str = "\u{E007}";

/// Press Tab until the focused element satisfies `test` (a JavaScript expression over `a`,
/// the focused element), at most `most` times; returns how many presses it took.
async fn tab_to(browser: &Browser, what: &str, test: &str, most: usize) -> usize {
    tab_until(browser, what, test, most, TAB).await
}

/// Like `tab_to`, backwards (Shift+Tab).
async fn shift_tab_to(browser: &Browser, what: &str, test: &str, most: usize) -> usize {
    tab_until(browser, what, test, most, "\u{E008}\u{E004}").await
}

async fn tab_until(browser: &Browser, what: &str, test: &str, most: usize, key: &str) -> usize {
    for presses in 0..=most {
        let here = browser
            .eval(&format!(
                "const a = document.activeElement; return !!(a && ({test}))"
            ))
            .await;
        if here == true {
            return presses;
        }
        press(browser, key).await;
    }
    let at = browser.eval(FOCUSED).await;
    panic!("{what}: not reached in {most} presses (the focus is on {at})");
}

/// Issue 33: what a person does in the workbench survives the page redrawing around it. On a
/// phone, by keyboard only, `echo`'s form is opened on server `a` and a value typed; then the
/// page redraws from outside (the harness calls a tool; `a` adds a tool, so its tools are
/// read again; another AHP client disables and enables `a`'s sibling `b` in the same plugin;
/// a plugin appears on disk): the form stays open, the typed value stays, the focus stays in the field, and typing and Enter go on
/// to call the tool.
#[tokio::test(flavor = "multi_thread")]
async fn an_open_form_its_typed_value_and_the_focus_survive_redraws_on_a_phone() {
    let _one = ONE_BROWSER.lock().await;
    let root = ScratchDir::new("console-redraws");
    let pair = plugin_folder(root.path(), "pair", "", &[]);
    std::fs::write(
        pair.join(".mcp.json"),
        json!({"mcpServers": {
            "a": {"command": examples(), "args": ["features"]},
            "b": {"command": examples(), "args": ["clock"]},
        }})
        .to_string(),
    )
    .unwrap();
    let proxy = Proxy::start(&format!(
        "plugin_roots = [{:?}]\n[limits]\nwatch_debounce_ms = 0\n",
        root.path().display().to_string()
    ));
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    for name in ["a", "b"] {
        w.until(name, "ready", &mut seen).await;
    }
    let browser = Browser::start().await;
    browser.client.set_window_size(390, 844).await.unwrap();
    open_console(&browser, &proxy).await;
    server_state(&browser, "a", "ready").await;
    server_state(&browser, "b", "ready").await;
    let a = ".server[data-server=\"a\"]";
    browser
        .until(
            "a's offer, read",
            &format!("const s = document.querySelector('{a} details.offer > summary'); return s && s.textContent.includes(' tools')"),
        )
        .await;

    // By keyboard: the skip link, the tree, a's offer, echo's form, its field.
    browser
        .eval("document.activeElement && document.activeElement.blur(); return true")
        .await;
    tab_to(&browser, "the skip link", "a.classList.contains('skip')", 3).await;
    press(&browser, ENTER).await;
    tab_to(
        &browser,
        "a's offer",
        &format!("a.matches('{a} details.offer > summary')"),
        60,
    )
    .await;
    press(&browser, ENTER).await;
    tab_to(
        &browser,
        "echo's summary",
        &format!("a.matches('{a} li.tool[data-tool=\"echo\"] > details > summary')"),
        10,
    )
    .await;
    press(&browser, ENTER).await;
    tab_to(
        &browser,
        "echo's text field",
        &format!("a.matches('{a} form.call-tool [data-path=\"text\"]')"),
        10,
    )
    .await;
    press(&browser, "kept ").await;
    browser
        .eval("window.typedField = document.activeElement; return true")
        .await;
    let kept = format!(
        "const f = window.typedField; const tool = document.querySelector('{a} li.tool[data-tool=\"echo\"] > details');\
         return {{connected: f.isConnected, value: f.value, focused: document.activeElement === f,\
                  offer: !!document.querySelector('{a} details.offer[open]'), form: !!(tool && tool.open && tool.contains(f))}}"
    );
    let intact =
        json!({"connected": true, "value": "kept ", "focused": true, "offer": true, "form": true});
    assert_eq!(browser.eval(&kept).await, intact, "before any redraw");
    // What echo has not (an output schema, annotations) is left out, not shown as "null".
    let opened = browser
        .eval(&format!(
            "return document.querySelector('{a} li.tool[data-tool=\"echo\"]').innerText"
        ))
        .await;
    assert!(!opened.as_str().unwrap().contains("null"), "{opened}");

    // A harness call: the activity gets a new entry.
    let harness = harness(&proxy).await;
    harness_calls(&harness, "now", json!({})).await;
    browser
        .until(
            "the harness's call in the activity",
            "return !!document.querySelector('.call[data-tool=\"now\"][data-status=\"completed\"]')",
        )
        .await;
    let mut seen_after = vec![("a harness call", browser.eval(&kept).await)];

    // a adds a tool: its tools are read again (its tool count and offer change).
    harness_calls(&harness, "add_tool", json!({"name": "added_later"})).await;
    browser
        .until(
            "the added tool in a's offer",
            &format!("return !!document.querySelector('{a} li.tool[data-tool=\"added_later\"]')"),
        )
        .await;
    seen_after.push(("a's tools read again", browser.eval(&kept).await));

    // Another client disables b, then enables it again: the plugin's card is redrawn.
    let b = w.id("b");
    for (enabled, state) in [(false, "stopped"), (true, "ready")] {
        w.dispatch(json!({"type": "session/customizationToggled", "id": b,
                          "enablement": [{"kind": "session", "enabled": enabled}]}))
            .await;
        server_state(&browser, "b", state).await;
        let step = if enabled { "b enabled" } else { "b disabled" };
        seen_after.push((step, browser.eval(&kept).await));
    }

    // A plugin appears on disk: the list of customizations changes.
    plugin_folder(root.path(), "newcomer", "", &[]);
    browser
        .until(
            "the new plugin's card",
            "return [...document.querySelectorAll('.card-title')].some(t => t.textContent === 'newcomer')",
        )
        .await;
    seen_after.push(("a new plugin", browser.eval(&kept).await));
    browser.screenshot("phone-form-kept").await;
    for (step, shown) in &seen_after {
        assert_eq!(shown, &intact, "after {step}: {seen_after:?}");
    }

    // The keyboard goes on where it was: the rest of the value; Tab to the call, Enter.
    press(&browser, "by keyboard").await;
    tab_to(
        &browser,
        "echo's Call button",
        &format!("a.matches('{a} form.call-tool[data-tool=\"echo\"] button[type=\"submit\"]')"),
        5,
    )
    .await;
    press(&browser, ENTER).await;
    let answer = browser
        .until(
            "echo's answer",
            &format!("const s = document.querySelector('{a} li.tool[data-tool=\"echo\"] .result-slot'); return s && s.innerText.includes('kept by keyboard') && s.innerText"),
        )
        .await;
    assert!(
        answer.as_str().unwrap().contains("kept by keyboard"),
        "{answer}"
    );

    // a stops and starts again: its offer leaves the page and comes back with echo's form
    // as it was left (echo's definition did not change).
    let id = w.id("a");
    for (action, state) in [
        ("session/mcpServerStopRequested", "stopped"),
        ("session/mcpServerStartRequested", "ready"),
    ] {
        w.dispatch(json!({"type": action, "id": id})).await;
        server_state(&browser, "a", state).await;
    }
    let back = browser
        .until(
            "echo's form back on the page",
            &format!(
                "const f = window.typedField; const tool = document.querySelector('{a} li.tool[data-tool=\"echo\"] > details');\
                 return f.isConnected && tool && tool.contains(f) && [f.value, tool.open, !!document.querySelector('{a} details.offer[open]'), tool.querySelector('.result-slot').innerText.includes('kept by keyboard')]"
            ),
        )
        .await;
    assert_eq!(back, json!(["kept by keyboard", true, true, true]));
    browser.close().await;
}

/// Where a picture for the documentation goes: `docs/images/<name>.png` when
/// `AHP_PROXY_PICTURES=1` (regenerating them), else beside the other screenshots.
fn save_picture(png: &[u8], name: &str) {
    let docs = std::env::var_os("AHP_PROXY_PICTURES").is_some_and(|v| v == "1");
    let path = if docs {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("docs/images/{name}.png"))
    } else {
        screenshot_dir().join(format!("{name}.png"))
    };
    std::fs::write(&path, png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The pictures in README.md and docs/console.md, from the running console on the bundled
/// examples at 1280×800: the workbench (the notes server's tools, `add_note` called from its
/// form, its answer beside it), and the activity (a harness call's arguments and result
/// expanded as JSON, the clock server's chart). `AHP_PROXY_PICTURES=1 cargo test --test
/// console pictures` writes them into docs/images/.
#[tokio::test(flavor = "multi_thread")]
async fn pictures_of_the_workbench_and_the_activity() {
    let _one = ONE_BROWSER.lock().await;
    let (proxy, _data) = bundled("console-pictures", "[supervisor]\nrestart_delay_ms = 20\n");
    let harness = harness(&proxy).await;
    let browser = Browser::start().await;
    browser.client.set_window_size(1280, 800).await.unwrap();
    // The page itself 1280×800: the window's frame added.
    let frame = browser
        .eval("return [outerWidth - innerWidth, outerHeight - innerHeight]")
        .await;
    let frame = |i: usize| frame[i].as_u64().unwrap() as u32;
    browser
        .client
        .set_window_size(1280 + frame(0), 800 + frame(1))
        .await
        .unwrap();
    open_console(&browser, &proxy).await;
    assert_eq!(
        browser.eval("return [innerWidth, innerHeight]").await,
        json!([1280, 800])
    );
    for name in ["notes", "clock"] {
        server_state(&browser, name, "ready").await;
    }
    // A few harness calls for the activity and the chart; for the documentation's picture,
    // spread over four of the chart's 10-second intervals.
    let spread = std::env::var_os("AHP_PROXY_PICTURES").is_some_and(|v| v == "1");
    for (i, ms) in [120, 40, 260, 80].into_iter().enumerate() {
        if spread && i > 0 {
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        harness_calls(&harness, "sleep", json!({"ms": ms})).await;
        harness_calls(&harness, "sleep", json!({"ms": ms / 2})).await;
    }
    harness_calls(&harness, "now", json!({})).await;

    // The workbench: the notes server's tools, add_note's form filled in and called.
    let notes = ".server[data-server=\"notes\"]";
    open_offer(
        &browser,
        "notes",
        "4 tools, 1 resource, 1 template, 1 prompt",
    )
    .await;
    let add_note = format!("{notes} li.tool[data-tool=\"add_note\"]");
    browser
        .until(
            "add_note, listed",
            &format!("return !!document.querySelector('{add_note} summary')"),
        )
        .await;
    browser.click(&format!("{add_note} summary")).await;
    for (path, value) in [
        ("title", "release-checklist"),
        ("text", "Tag v0.2, then update the changelog"),
    ] {
        browser
            .until(
                &format!("add_note's {path} field"),
                &format!("return document.querySelector('{add_note} [data-path=\"{path}\"]')"),
            )
            .await;
        browser
            .client
            .find(fantoccini::Locator::Css(&format!(
                "{add_note} [data-path=\"{path}\"]"
            )))
            .await
            .unwrap()
            .send_keys(value)
            .await
            .unwrap();
    }
    browser
        .click(&format!(
            "{add_note} form.call-tool button[type=\"submit\"]"
        ))
        .await;
    let answer = browser
        .until(
            "add_note's answer",
            &format!("const s = document.querySelector('{add_note} .result-slot'); return s && s.innerText.includes('saved') && s.innerText"),
        )
        .await;
    assert!(
        answer
            .as_str()
            .unwrap()
            .contains("saved \"release-checklist\""),
        "{answer}"
    );
    browser
        .until(
            "the console's call in the activity",
            "return !!document.querySelector('.call[data-tool=\"add_note\"][data-by=\"console\"][data-status=\"completed\"]')",
        )
        .await;
    browser
        .eval(&format!(
            "document.activeElement.blur(); document.querySelector('{notes}').scrollIntoView({{block: 'start'}}); return true"
        ))
        .await;
    let shown = browser
        .eval(&format!(
            "const r = document.querySelector('{add_note} .result-slot').getBoundingClientRect(); return r.bottom <= innerHeight && r.top > 0"
        ))
        .await;
    assert_eq!(shown, true, "add_note's answer is in the picture");
    save_picture(
        &browser.client.screenshot().await.unwrap(),
        "console-workbench",
    );

    // The activity: the latest sleep call's arguments and result expanded, the chart above.
    let call = ".call[data-tool=\"sleep\"][data-status=\"completed\"]";
    browser
        .eval(&format!(
            "const c = document.querySelector('{call}'); for (const d of c.querySelectorAll('details')) d.open = true;\
             document.querySelector('#tree').scrollIntoView({{block: 'start'}}); document.querySelector('main > .pane:last-child').scrollTop = 0; return true"
        ))
        .await;
    let activity = browser
        .until(
            "the chart and the expanded call",
            &format!(
                "const row = document.querySelector('.chart-row[data-server=\"clock\"]'); const c = document.querySelector('{call}');\
                 const json = c && c.querySelector('details.call-output[open] .json-text');\
                 return row && json && [Number(row.dataset.calls), JSON.parse(json.textContent).success, c.querySelector('details.call-input[open] .json-text').textContent.includes('\"ms\"')]"
            ),
        )
        .await;
    assert_eq!(activity, json!([9, true, true]));
    save_picture(
        &browser.client.screenshot().await.unwrap(),
        "console-activity",
    );
    browser.close().await;
}

/// Issue 33: the approvals work by keyboard alone. From the page, Tab reaches the header's
/// count of pending approvals; Enter moves the focus to the held call's Approve; Shift+Tab
/// and an arrow key choose *Allow this tool for this session*; Enter on Approve lets the call
/// through, and the harness's next call of that tool is not held. A held call of another
/// tool: its reason typed, Tab to Deny, Enter: the harness gets the refusal with the reason.
#[tokio::test(flavor = "multi_thread")]
async fn the_approvals_work_by_keyboard_alone() {
    let _one = ONE_BROWSER.lock().await;
    let proxy = Proxy::start(&format!(
        "{}{}[approval]\nmode = \"always\"\n",
        server("echo", "echo", &[]),
        server("clock", "clock", &[])
    ));
    let browser = console_with(&proxy, &["echo", "clock"]).await;
    let harness = harness(&proxy).await;
    let focused_is = |css: &str| format!("a.matches('{css}')");

    // Approve, allowing the tool for the session.
    let call = harness_calls_later(&harness, "echo", json!({"text": "by keyboard"}));
    held_in_console(&browser, "echo", 1).await;
    browser
        .eval("document.activeElement && document.activeElement.blur(); return true")
        .await;
    tab_to(
        &browser,
        "the pending count",
        &focused_is(".sum-approvals"),
        20,
    )
    .await;
    press(&browser, ENTER).await;
    let echo = ".approval[data-tool=\"echo\"]";
    browser
        .until(
            "Approve focused",
            &format!("return document.activeElement.matches('{echo} button.approve')"),
        )
        .await;
    press(&browser, "\u{E008}\u{E004}").await; // Shift+Tab: back to the options
    let option = browser
        .eval("const a = document.activeElement; return a.type === 'radio' && a.checked && a.parentElement.textContent.trim()")
        .await;
    assert_eq!(option, "Allow once", "the checked option has the focus");
    press(&browser, "\u{E015}").await; // Arrow down: the next option
    let option = browser
        .eval("const a = document.activeElement; return a.type === 'radio' && a.checked && a.parentElement.textContent.trim()")
        .await;
    assert_eq!(option, "Allow this tool for this session");
    tab_to(
        &browser,
        "Approve",
        &focused_is(&format!("{echo} button.approve")),
        3,
    )
    .await;
    press(&browser, ENTER).await;
    let result = tokio::time::timeout(PATIENCE, call)
        .await
        .expect("the approved call completes")
        .unwrap();
    assert_eq!(result_text(&result), "by keyboard", "{result:?}");
    let again = tokio::time::timeout(
        PATIENCE,
        harness_calls_later(&harness, "echo", json!({"text": "no question"})),
    )
    .await
    .expect("echo is allowed for the session: not held")
    .unwrap();
    assert_eq!(result_text(&again), "no question", "{again:?}");

    // Deny with a reason: from where the keyboard was, Shift+Tab back up to the count.
    let call = harness_calls_later(&harness, "now", json!({}));
    held_in_console(&browser, "now", 1).await;
    shift_tab_to(
        &browser,
        "the pending count",
        &focused_is(".sum-approvals"),
        80,
    )
    .await;
    press(&browser, ENTER).await;
    let now = ".approval[data-tool=\"now\"]";
    browser
        .until(
            "Approve focused",
            &format!("return document.activeElement.matches('{now} button.approve')"),
        )
        .await;
    tab_to(
        &browser,
        "the reason",
        &focused_is(&format!("{now} .approval-reason")),
        2,
    )
    .await;
    press(&browser, "not now").await;
    tab_to(
        &browser,
        "Deny",
        &focused_is(&format!("{now} button.deny")),
        2,
    )
    .await;
    press(&browser, ENTER).await;
    let refused = tokio::time::timeout(PATIENCE, call)
        .await
        .expect("the denied call ends")
        .unwrap();
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    assert!(result_text(&refused).contains("not now"), "{refused:?}");
    browser
        .until(
            "the list gone",
            "return document.getElementById('approvals').hidden",
        )
        .await;
    browser.close().await;
}
