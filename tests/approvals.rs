//! Approvals end to end: the real binary with `[approval]`, a harness on its stdio, the
//! official AHP client deciding. A held call waits in pending confirmation (listed in the
//! session's `inputNeeded`, in the snapshot of a client that connects meanwhile), goes on
//! approved (with the edited input), answers `isError` denied (naming who and why), refuses a
//! late answer, is denied when nobody answers in time or when the harness cancels it; the
//! policy spares pre-approved and read-only tools and what a client allowed for the session.
//! A result held for review (`review_result`) reaches the harness only once approved, is an
//! `isError` naming who denied it, follows `on_timeout` when nobody answers, sends progress
//! meanwhile, and ends when the harness cancels.

mod common;

use std::process::Command;

use ahp_types::state::{
    SessionInputRequest, SnapshotState, ToolCallConfirmationState, ToolCallState,
};
use common::approver::Approver;
use common::http_session::RawSession;
use common::ide::SESSION;
use common::raw::RawClient;
use common::{examples, initialized_client, server, stdio_harness, Proxy, PATIENCE};
use serde_json::{json, Value};

/// The echo and notes examples under `approval` (the `[approval]` table's body).
fn config(approval: &str) -> String {
    format!(
        "{}{}alwaysAllow = [\"list_notes\"]\n[approval]\n{approval}",
        server("echo", "echo", &[]),
        server("notes", "notes", &[]),
    )
}

/// The harness calls `tool` with `arguments` (and progress token `p-1`) while `meanwhile` runs.
async fn call_meanwhile<T>(
    harness: &mut RawClient,
    tool: &str,
    arguments: Value,
    meanwhile: impl std::future::Future<Output = T>,
) -> (Value, Vec<String>, T) {
    let params = json!({"name": tool, "arguments": arguments, "_meta": {"progressToken": "p-1"}});
    let params = params.to_string();
    let mut none = |_: &str, _: &str| String::new();
    let (exchange, got) = tokio::join!(
        harness.request("tools/call", Some(&params), &mut none),
        meanwhile
    );
    let answer: Value = serde_json::from_str(exchange.response()).unwrap();
    let others = exchange.received().map(str::to_string).collect();
    (answer, others, got)
}

/// The text of a tool result.
fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text result: {answer}"))
        .to_string()
}

/// A call answered without anybody deciding (within the patience window: a held one waits
/// five minutes).
async fn answered_unasked(harness: &mut RawClient, tool: &str, arguments: Value) -> Value {
    let params = json!({"name": tool, "arguments": arguments}).to_string();
    let mut none = |_: &str, _: &str| String::new();
    let exchange = harness
        .request("tools/call", Some(&params), &mut none)
        .await;
    serde_json::from_str(exchange.response()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_waits_then_runs_with_the_input_a_client_edited() {
    let (proxy, mut harness) = stdio_harness(&config("mode = \"always\"\n")).await;
    let mut ide = Approver::join(&proxy, "ide-1").await;
    let (answer, received, ()) = call_meanwhile(&mut harness, "echo", json!({"text": "as asked"}), async {
        let (turn, pending) = ide.pending().await;
        // The call as AHP shows it: who, where, what, and the choices.
        let title = serde_json::to_value(&pending.confirmation_title).unwrap();
        // Markdown, the names as code (VS Code renders the title as Markdown).
        assert_eq!(title, json!({"markdown": "Allow `echo` on `echo`?"}));
        let message = serde_json::to_value(&pending.invocation_message).unwrap().to_string();
        assert!(message.contains("`echo`") && message.contains("as asked"), "{message}");
        assert_eq!(pending.editable, Some(true));
        let options: Vec<String> = pending.options.iter().flatten().map(|o| o.id.clone()).collect();
        assert_eq!(options, ["allow-once", "allow-tool-session", "allow-server-session", "deny"]);
        // A client that connects now sees it pending: in the chat and in the session's inputNeeded.
        let late = initialized_client(&proxy, "late").await;
        let (snapshot, _session) = late.subscribe(SESSION.into()).await.unwrap();
        let SnapshotState::Session(session) = snapshot.snapshot.unwrap().state else {
            panic!("a session snapshot");
        };
        let listed = session.input_needed.iter().flatten().any(|r| match r {
            SessionInputRequest::ToolConfirmation(r) => matches!(&r.tool_call,
                ToolCallConfirmationState::PendingConfirmation(p) if p.tool_call_id == pending.tool_call_id),
            _ => false,
        });
        assert!(listed, "{:?}", session.input_needed);
        ide.answer(&turn, &pending.tool_call_id, json!({"approved": true, "editedToolInput": "{\"text\":\"as edited\"}"})).await;
    })
    .await;
    assert_eq!(text(&answer), "as edited", "{answer}");
    assert!(
        received
            .iter()
            .any(|m| m.contains("notifications/progress") && m.contains("waiting for approval")),
        "the harness heard that its call waits: {received:?}"
    );
    // Approved, it ran and completed as usual.
    ide.until(|s| matches!(s, ToolCallState::Completed(c) if c.success))
        .await;
    assert!(proxy
        .wait_for_log("tool call approval")
        .contains("approved"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_answer_decides_a_denial_says_who_and_why_and_a_late_answer_is_refused() {
    let (proxy, mut harness) = stdio_harness(&config("mode = \"always\"\n")).await;
    let mut first = Approver::join(&proxy, "ide-a").await;
    let mut second = Approver::join(&proxy, "ide-b").await;
    let (answer, _, refused) = call_meanwhile(&mut harness, "echo", json!({"text": "rm -rf"}), async {
        let (turn, pending) = first.pending().await;
        let (_, seen) = second.pending().await;
        assert_eq!(seen.tool_call_id, pending.tool_call_id);
        first
            .answer(&turn, &pending.tool_call_id, json!({"approved": false, "reason": "denied", "reasonMessage": "not on my machine"}))
            .await;
        // The second answers once it saw the first's decision (answers racing on two
        // connections arrive in either order; the one that arrives first decides).
        second.until(|s| matches!(s, ToolCallState::Cancelled(_))).await;
        second.answer(&turn, &pending.tool_call_id, json!({"approved": true})).await;
        second.refusal(&pending.tool_call_id).await
    })
    .await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let said = text(&answer);
    assert!(
        said.contains("denied by AHP client \"ide-a\"") && said.contains("not on my machine"),
        "{said}"
    );
    assert!(
        refused.contains("already denied by client \"ide-a\""),
        "{refused}"
    );
    // Denied, the call shows cancelled with the reason.
    first
        .until(|s| matches!(s, ToolCallState::Cancelled(_)))
        .await;
    assert!(proxy.wait_for_log("tool call approval").contains("denied"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_call_is_denied_once_its_time_is_up() {
    let (proxy, mut harness) =
        stdio_harness(&config("mode = \"always\"\ntimeout_ms = 1000\n")).await;
    let mut ide = Approver::join(&proxy, "ide-1").await;
    let (answer, _, ()) = call_meanwhile(&mut harness, "echo", json!({"text": "x"}), async {
        ide.pending().await;
    })
    .await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let said = text(&answer);
    assert!(
        said.contains("denied by the proxy: nobody answered within 1000 ms"),
        "{said}"
    );
    ide.until(|s| matches!(s, ToolCallState::Cancelled(_)))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destructive_asks_only_for_tools_neither_read_only_nor_pre_approved() {
    let (proxy, mut harness) = stdio_harness(&format!(
        "{}alwaysAllow = [\"echo\"]\n{}[approval]\nmode = \"destructive\"\n",
        server("echo", "echo", &[]),
        server("notes", "notes", &[]),
    ))
    .await;
    // Nobody answers: these go straight through.
    let listed = answered_unasked(&mut harness, "list_notes", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
    let echoed = answered_unasked(&mut harness, "echo", json!({"text": "pre-approved"})).await;
    assert_eq!(text(&echoed), "pre-approved");
    // add_note is neither: it is held, and "allow this tool for this session" lets the next through.
    let mut ide = Approver::join(&proxy, "ide-1").await;
    let note = json!({"title": "t", "text": "x"});
    let (answer, _, ()) = call_meanwhile(&mut harness, "add_note", note.clone(), async {
        let (turn, pending) = ide.pending().await;
        ide.answer(
            &turn,
            &pending.tool_call_id,
            json!({"approved": true, "selectedOptionId": "allow-tool-session"}),
        )
        .await;
    })
    .await;
    assert!(answer.get("result").is_some(), "{answer}");
    let again = answered_unasked(&mut harness, "add_note", note).await;
    assert!(again.get("result").is_some(), "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_is_the_default_and_asks_nothing() {
    let (_proxy, mut harness) = stdio_harness(&server("notes", "notes", &[])).await;
    let added =
        answered_unasked(&mut harness, "add_note", json!({"title": "t", "text": "x"})).await;
    assert!(added.get("result").is_some(), "{added}");
}

/// A harness on the proxy's stdio writing raw lines (so it can cancel a call that waits).
struct RawStdio {
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl RawStdio {
    /// Write `line` (one JSON-RPC message).
    async fn say(&mut self, line: &str) {
        use tokio::io::AsyncWriteExt;
        let line = format!("{line}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
    }
}

/// `serve --stdio` on `config` with a raw harness, its handshake done, an approver following
/// the chat, and the harness's call of `echo` (id 2) sent.
async fn echo_called_on_raw_stdio(config: &str) -> (Proxy, Approver, RawStdio) {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let (proxy, (stdout, stdin)) = Proxy::start_stdio(config);
    let mut harness = RawStdio {
        stdin,
        stdout: BufReader::new(stdout).lines(),
    };
    harness.say(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}"#).await;
    harness
        .say(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    let first = tokio::time::timeout(PATIENCE, harness.stdout.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.contains(r#""id":1"#), "{first}");
    let ide = Approver::join(&proxy, "ide-1").await;
    harness.say(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}"#).await;
    (proxy, ide, harness)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_harness_that_cancels_ends_its_pending_call() {
    let (_proxy, mut ide, mut harness) =
        echo_called_on_raw_stdio(&config("mode = \"always\"\n")).await;
    let (turn, pending) = ide.pending().await;
    harness
        .say(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"changed my mind"}}"#)
        .await;
    let (_, cancelled) = ide
        .until(|s| matches!(s, ToolCallState::Cancelled(_)))
        .await;
    let shown = serde_json::to_value(&cancelled).unwrap().to_string();
    assert!(shown.contains("the harness cancelled the call"), "{shown}");
    ide.answer(&turn, &pending.tool_call_id, json!({"approved": true}))
        .await;
    let refused = ide.refusal(&pending.tool_call_id).await;
    assert!(refused.contains("already denied by the proxy"), "{refused}");
}

#[test]
fn check_shows_the_effective_policy() {
    let dir = common::ScratchDir::new("approvals-check");
    let path = dir.path().join("proxy.toml");
    let text = config(
        "mode = \"destructive\"\ntimeout_ms = 60000\n[approval.servers.notes]\nmode = \"always\"\n\
         [approval.servers.notes.tools.read_note]\nreview_result = true\n",
    );
    std::fs::write(&path, text).unwrap();
    let run = |json: bool| {
        let mut command = Command::new(common::proxy());
        command.arg("--config").arg(&path).arg("check");
        if json {
            command.arg("--json");
        }
        String::from_utf8_lossy(&command.output().unwrap().stdout).into_owned()
    };
    let text = run(false);
    assert!(
        text.contains(
            "approval       destructive; a call waits 60000 ms for a decision, then is denied\n"
        ),
        "{text}"
    );
    assert!(text.contains("  server notes: always\n"), "{text}");
    assert!(
        text.contains("  tool notes/read_note: results reviewed\n"),
        "{text}"
    );
    let report: Value = serde_json::from_str(&run(true)).unwrap();
    assert_eq!(report["approval"]["mode"], "destructive");
    assert_eq!(report["approval"]["servers"]["notes"]["mode"], "always");
    let _ = examples();
}

/// A modern (2026-07-28) harness's call, on stdio without a session: held the same way, it
/// answers nothing until a client decides, then completes as a modern result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_call_is_held_until_decided() {
    const ENVELOPE: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}"#;
    let (proxy, (stdout, stdin)) = Proxy::start_stdio(&config("mode = \"always\"\n"));
    let mut harness = RawClient::stdio(stdout, stdin);
    let mut ide = Approver::join(&proxy, "ide-1").await;
    let params = format!(r#"{{"name":"echo","arguments":{{"text":"modern"}},"_meta":{ENVELOPE}}}"#);
    let mut none = |_: &str, _: &str| String::new();
    let (exchange, ()) = tokio::join!(
        harness.request("tools/call", Some(&params), &mut none),
        async {
            let (turn, pending) = ide.pending().await;
            ide.answer(&turn, &pending.tool_call_id, json!({"approved": true}))
                .await;
        }
    );
    let answer: Value = serde_json::from_str(exchange.response()).unwrap();
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert_eq!(text(&answer), "modern");
}

/// A harness over streamable HTTP that ends its session (DELETE) while its call waits:
/// the pending call goes (cancelled in AHP), and a late answer is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_harness_that_goes_away_ends_its_pending_call() {
    let proxy = Proxy::start(&config("mode = \"always\"\n"));
    let http = reqwest::Client::new();
    let session = RawSession::open(&http, &format!("{}/echo", proxy.mcp_url)).await;
    let mut ide = Approver::join(&proxy, "ide-1").await;
    let call = session.post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": {"progressToken": 7}}}),
    );
    let (stream, (turn, pending)) = tokio::join!(call, ide.pending());
    let deleted = session.delete().await;
    assert!(deleted.status().is_success(), "{}", deleted.status());
    drop(stream);
    ide.until(|s| matches!(s, ToolCallState::Cancelled(_)))
        .await;
    ide.answer(&turn, &pending.tool_call_id, json!({"approved": true}))
        .await;
    let refused = ide.refusal(&pending.tool_call_id).await;
    assert!(refused.contains("already denied by the proxy"), "{refused}");
}

/// The echo example with `echo`'s results held for review (and the call itself not held).
fn reviewed(extra: &str) -> String {
    format!(
        "{}[approval]\n{extra}[approval.servers.echo.tools.echo]\nmode = \"never\"\nreview_result = true\n",
        server("echo", "echo", &[]),
    )
}

/// The harness calls `tool`; `meanwhile` runs and says (with `decided`) when it decided: the
/// answer, and whether a decision was sent before the answer reached the harness.
async fn reviewed_call<T>(
    harness: &mut RawClient,
    tool: &str,
    arguments: Value,
    meanwhile: impl std::future::Future<Output = T>,
    decided: &std::sync::atomic::AtomicBool,
) -> (Value, bool, T) {
    let params = json!({"name": tool, "arguments": arguments}).to_string();
    let mut none = |_: &str, _: &str| String::new();
    let call = async {
        let exchange = harness
            .request("tools/call", Some(&params), &mut none)
            .await;
        let after = decided.load(std::sync::atomic::Ordering::SeqCst);
        (
            serde_json::from_str::<Value>(exchange.response()).unwrap(),
            after,
        )
    };
    let ((answer, after), got) = tokio::join!(call, meanwhile);
    (answer, after, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewed_result_reaches_the_harness_only_once_a_client_approves_it() {
    let (proxy, mut harness) = stdio_harness(&reviewed("")).await;
    let mut ide = Approver::join(&proxy, "ide-1").await;
    let decided = std::sync::atomic::AtomicBool::new(false);
    let (answer, after, ()) = reviewed_call(
        &mut harness,
        "echo",
        json!({"text": "secret result"}),
        async {
            // The server answered: the chat shows the result waiting, the session lists it.
            let (turn, call, content) = ide.pending_result().await;
            assert!(content.contains("secret result"), "{content}");
            let late = initialized_client(&proxy, "late").await;
            let (snapshot, _session) = late.subscribe(SESSION.into()).await.unwrap();
            let SnapshotState::Session(session) = snapshot.snapshot.unwrap().state else {
                panic!("a session snapshot");
            };
            let listed = session.input_needed.iter().flatten().any(|r| {
                matches!(r,
            SessionInputRequest::ToolConfirmation(r) if matches!(&r.tool_call,
                ToolCallConfirmationState::PendingResultConfirmation(p) if p.tool_call_id == call))
            });
            assert!(listed, "{:?}", session.input_needed);
            // A decision on the call (not its result) is refused and changes nothing.
            ide.answer(&turn, &call, json!({"approved": false})).await;
            let refused = ide.refusal(&call).await;
            assert!(
                refused.contains("waits for a decision on its result"),
                "{refused}"
            );
            decided.store(true, std::sync::atomic::Ordering::SeqCst);
            ide.review(&turn, &call, true).await;
        },
        &decided,
    )
    .await;
    assert!(
        after,
        "the result reached the harness before it was approved: {answer}"
    );
    assert_eq!(text(&answer), "secret result", "{answer}");
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    ide.until(|s| matches!(s, ToolCallState::Completed(c) if c.success))
        .await;
    // A second answer is refused, naming who decided.
    let (turn, state) = ide
        .until(|s| matches!(s, ToolCallState::Completed(_)))
        .await;
    let ToolCallState::Completed(done) = state else {
        unreachable!()
    };
    ide.review(&turn, &done.tool_call_id, false).await;
    let refused = ide.refusal_of_result(&done.tool_call_id).await;
    assert!(
        refused.contains("already approved by client \"ide-1\""),
        "{refused}"
    );
    assert!(proxy
        .wait_for_log("tool result review")
        .contains("approved"));
}

/// A harness that gave a progress token hears progress while its result waits for review,
/// as while a call waits, so its own timeout does not fire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_waiting_for_review_sends_progress_to_a_harness_that_asked() {
    let (proxy, mut harness) = stdio_harness(&reviewed("")).await;
    let mut ide = Approver::join(&proxy, "ide-1").await;
    let (answer, received, ()) =
        call_meanwhile(&mut harness, "echo", json!({"text": "r"}), async {
            let (turn, call, _) = ide.pending_result().await;
            ide.review(&turn, &call, true).await;
        })
        .await;
    assert_eq!(text(&answer), "r", "{answer}");
    assert!(
        received.iter().any(|m| m.contains("notifications/progress")
            && m.contains(r#""progressToken":"p-1""#)
            && m.contains("waiting for review")),
        "the harness heard that its result waits: {received:?}"
    );
}

/// The progress a server reported for the harness's token goes on growing while the result
/// waits for review (progress only grows, says MCP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_while_a_result_waits_goes_on_above_the_servers() {
    let (proxy, mut harness) = stdio_harness(&format!(
        "{}[approval]\n[approval.servers.t.tools.progress]\nreview_result = true\n",
        server("t", "transparency", &[])
    ))
    .await;
    let mut ide = Approver::join(&proxy, "ide-1").await;
    let (_, received, ()) = call_meanwhile(&mut harness, "progress", json!({}), async {
        let (turn, call, _) = ide.pending_result().await;
        ide.review(&turn, &call, true).await;
    })
    .await;
    let heard: Vec<f64> = (received.iter())
        .map(|m| serde_json::from_str::<Value>(m).unwrap())
        .filter(|m| {
            m["method"] == "notifications/progress" && m["params"]["progressToken"] == "p-1"
        })
        .map(|m| m["params"]["progress"].as_f64().unwrap())
        .collect();
    // The server's 0, 50, 100, then the wait's.
    assert!(
        heard.len() > 3 && heard[..3] == [0.0, 50.0, 100.0],
        "{heard:?}"
    );
    assert!(heard.windows(2).all(|w| w[0] < w[1]), "{heard:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_result_gives_the_harness_an_error_instead_of_the_content() {
    let (proxy, mut harness) = stdio_harness(&reviewed("")).await;
    let mut ide = Approver::join(&proxy, "ide-1").await;
    let decided = std::sync::atomic::AtomicBool::new(false);
    let (answer, after, ()) = reviewed_call(
        &mut harness,
        "echo",
        json!({"text": "secret result"}),
        async {
            let (turn, call, _) = ide.pending_result().await;
            decided.store(true, std::sync::atomic::Ordering::SeqCst);
            ide.review(&turn, &call, false).await;
        },
        &decided,
    )
    .await;
    assert!(after, "{answer}");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let said = text(&answer);
    assert!(!answer.to_string().contains("secret result"), "{answer}");
    assert!(
        said.contains(
            "The result of tool \"echo\" on MCP server \"echo\" was denied by AHP client \"ide-1\""
        ),
        "{said}"
    );
    ide.until(|s| matches!(s, ToolCallState::Cancelled(_)))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreviewed_result_follows_on_timeout() {
    let (_proxy, mut harness) =
        stdio_harness(&reviewed("timeout_ms = 1000\non_timeout = \"allow\"\n")).await;
    let allowed = answered_unasked(&mut harness, "echo", json!({"text": "kept"})).await;
    assert_eq!(text(&allowed), "kept", "{allowed}");
    let (_proxy, mut harness) = stdio_harness(&reviewed("timeout_ms = 1000\n")).await;
    let denied = answered_unasked(&mut harness, "echo", json!({"text": "dropped"})).await;
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(
        text(&denied).contains("denied by the proxy: nobody answered within 1000 ms"),
        "{denied}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_harness_that_cancels_ends_the_review_of_its_result() {
    let (_proxy, mut ide, mut harness) = echo_called_on_raw_stdio(&reviewed("")).await;
    let (turn, id, _) = ide.pending_result().await;
    harness
        .say(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#)
        .await;
    // Denied in the chat by the proxy; a late review is refused, naming who decided.
    ide.until(|s| matches!(s, ToolCallState::Cancelled(_)))
        .await;
    ide.review(&turn, &id, true).await;
    let refused = ide.refusal_of_result(&id).await;
    assert!(refused.contains("already denied by the proxy"), "{refused}");
}

/// The harness is rmcp's own client over streamable HTTP (`/mcp/echo`): its call waits for
/// the decision, an approval with an edited input returns the echo of the edit, and a denial
/// comes back to rmcp as an `isError` result carrying who denied it and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmcp_harness_over_http_gets_the_approved_edit_and_the_denial() {
    use rmcp::ServiceExt;
    let proxy = Proxy::start(&config("mode = \"always\"\n"));
    let url = format!("{}/echo", proxy.mcp_url);
    let harness = ()
        .serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
            url,
        ))
        .await
        .expect("harness handshake");
    let mut ide = Approver::join(&proxy, "ide-1").await;
    let call = |text: &str| {
        let peer = harness.peer().clone();
        let arguments = json!({ "text": text }).as_object().cloned().unwrap();
        tokio::spawn(async move {
            let params = rmcp::model::CallToolRequestParams::new("echo").with_arguments(arguments);
            peer.call_tool(params).await
        })
    };

    let approved = call("as asked");
    let (turn, pending) = ide.pending().await;
    let edit = json!({"approved": true, "editedToolInput": "{\"text\":\"as edited\"}"});
    ide.answer(&turn, &pending.tool_call_id, edit).await;
    let result = tokio::time::timeout(PATIENCE, approved)
        .await
        .expect("answered in time")
        .unwrap()
        .expect("the approved call's result");
    let result = serde_json::to_value(&result).unwrap();
    assert_eq!(result["content"][0]["text"], "as edited", "{result}");
    // The follower's mirror catches up with the first call before looking for the next.
    ide.until(|s| matches!(s, ToolCallState::Completed(_)))
        .await;

    let denied = call("not this");
    let (turn, pending) = ide.pending().await;
    let no = json!({"approved": false, "reason": "denied", "reasonMessage": "not today"});
    ide.answer(&turn, &pending.tool_call_id, no).await;
    let result = tokio::time::timeout(PATIENCE, denied)
        .await
        .expect("answered in time")
        .unwrap()
        .expect("the denied call's result");
    let result = serde_json::to_value(&result).unwrap();
    assert_eq!(result["isError"], true, "{result}");
    let said = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        said.contains("denied by AHP client \"ide-1\"") && said.contains("not today"),
        "{said}"
    );
    let _ = harness.cancel().await;
}
