//! One modern request forwarded to (legacy) servers: a stand-in harness made of the request's
//! envelope carries it through the front's usual routes and steps; what comes back is
//! answered in modern shape (`resultType`, cache hints, `serverInfo`), with progress and,
//! only when the request asked for a level, log messages on its stream. A server's request
//! in the middle of `tools/call`, `prompts/get` or `resources/read` becomes an
//! `input_required` result carrying a `requestState` the proxy mints ([`super::state`]);
//! the server's call is held until the harness's retry delivers the answers, or is cancelled
//! upstream once [`held_for`] passes without one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::super::answers::INTERNAL_ERROR;
use super::super::harness::Harness;
use super::super::hub::Hub;
use super::super::in_flight::HarnessId;
use super::super::naming::Route;
use super::super::outbox::{Outgoing, Stream};
use super::super::registry::{Abilities, Level, Need, Scope};
use super::super::steps::logs;
use super::state::{self, Claims};
use super::{initialize_params, scope_hint, server_era, Cancel};
use crate::mcp::era::{self, CacheHint, Completion, Envelope, Era, Problem};
use crate::mcp::message::{self, Kind, Message};

/// How long a call held for the harness's input waits for its retry (at most the front's
/// request timeout): then the server's call is cancelled and its requests refused.
pub const HELD_FOR: Duration = Duration::from_secs(120);

/// [`HELD_FOR`], within the hub's request timeout.
pub fn held_for(hub: &Hub) -> Duration {
    HELD_FOR.min(hub.settings.request_timeout)
}

/// A harness's retry, delivered to the held call.
struct Resume {
    /// The answers, by the keys of the `inputRequests`.
    responses: Map<String, Value>,
    /// Where the answer goes now, and under which id.
    out: Stream,
    id: String,
    /// The progress token the retry carries, if any.
    token: Option<String>,
    cancel: Cancel,
}

/// A held call, waiting for round `round`'s answers.
struct Held {
    round: u32,
    resume: mpsc::UnboundedSender<Resume>,
}

fn held() -> &'static Mutex<HashMap<u64, Held>> {
    static HELD: OnceLock<Mutex<HashMap<u64, Held>>> = OnceLock::new();
    HELD.get_or_init(Mutex::default)
}

/// What binds a `requestState` to its request: the endpoint (`/mcp`, `/mcp/<server>`) and
/// the server the request goes to, its method, what it names, and a SHA-256 of its params
/// without the members a retry adds or changes (`requestState`, `inputResponses`, `_meta`),
/// read as values (member order and spacing aside): a state answers only the request it
/// was minted for, where it was minted, and (on stdio, the one front where a modern request
/// comes from a known harness) for whom.
fn binding(hub: &Hub, scope: &Scope, harness: Option<HarnessId>, message: &Message) -> String {
    let method = message.method().unwrap_or_default();
    let named = era::named_by(method)
        .and_then(|member| message.string(&[member]))
        .unwrap_or_default();
    let endpoint = match (scope, harness) {
        (_, Some(harness)) => format!("stdio {harness}"),
        (Scope::All, None) => "/mcp".to_string(),
        (Scope::Server(_), None) => "/mcp/".to_string(),
    };
    let server = target(hub, scope, message).unwrap_or_default();
    let params = message
        .body()
        .and_then(|span| serde_json::from_str::<Value>(message.slice(span)).ok());
    let digest = state::params_digest(params);
    format!("{endpoint}\n{server}\n{method}\n{named}\n{digest}")
}

/// Forward a modern request to the servers of `scope` (`from`: the stdio harness that sent it).
pub fn forward(
    hub: &Arc<Hub>,
    scope: Scope,
    from: Option<HarnessId>,
    envelope: Envelope,
    message: Message,
    out: Stream,
    cancel: Cancel,
) {
    let level = envelope.log_level.as_deref().and_then(Level::parse);
    let declared = Abilities::of(&envelope.capabilities);
    let harness = stand_in(hub, scope.clone(), envelope);
    if let Some(level) = level {
        hub.tables().registry.set_log_level(harness.id, level);
    }
    let (inward, frames) = Stream::channel();
    let pump = Pump {
        hub: hub.clone(),
        harness: harness.clone(),
        frames,
        out,
        id: message.id().unwrap_or("null").to_string(),
        token: token_of(&message),
        method: message.method().unwrap_or_default().to_string(),
        binding: binding(hub, &scope, from, &message),
        declared,
        shape: shape(hub, &scope),
        level,
        cancel,
        call: None,
        round: 0,
        buffered: Vec::new(),
    };
    let hub = hub.clone();
    tokio::spawn(async move {
        if level.is_some() {
            // Servers log at the most verbose level asked for; this request's filters here.
            for server in hub.connections.snapshot().into_keys() {
                if scope.includes(&server) {
                    hub.apply_log_level(&server).await;
                }
            }
        }
        harness.handle(message, inward);
        pump.run().await;
    });
}

/// A retry carrying a `requestState`: delivered to the call it was minted for, or refused.
pub fn resume(
    hub: &Arc<Hub>,
    scope: &Scope,
    harness: Option<HarnessId>,
    envelope: &Envelope,
    message: Message,
    out: Stream,
    cancel: Cancel,
) -> Result<(), Problem> {
    let refuse = |text: &str| Problem {
        code: era::INVALID_PARAMS,
        status: 400,
        message: text.to_string(),
        data: None,
    };
    let token = message
        .string(&["requestState"])
        .unwrap_or_default()
        .into_owned();
    let claims = match state::verify(&token, &binding(hub, scope, harness, &message)) {
        Ok(claims) => claims,
        Err(refused) => {
            let to = target(hub, scope, &message);
            if to.is_some_and(|server| server_era(hub, &server) == Era::Modern) {
                // Minted by a modern server: its own to judge.
                forward(
                    hub,
                    scope.clone(),
                    harness,
                    envelope.clone(),
                    message,
                    out,
                    cancel,
                );
                return Ok(());
            }
            return Err(refuse(refused.describe()));
        }
    };
    let responses = match message.find(&["inputResponses"]) {
        None => Map::new(),
        Some(span) => match serde_json::from_str::<Value>(message.slice(span)) {
            Ok(Value::Object(map)) => map,
            _ => return Err(refuse("Invalid params: inputResponses must be an object")),
        },
    };
    let mut table = held().lock().unwrap_or_else(|p| p.into_inner());
    let Some(call) = table.remove(&claims.call) else {
        return Err(refuse(
            "Invalid params: requestState was already used, or its call is over",
        ));
    };
    if call.round != claims.round {
        table.insert(claims.call, call);
        return Err(refuse(
            "Invalid params: requestState was already used (a later round is pending)",
        ));
    }
    drop(table);
    let resume = Resume {
        responses,
        out,
        id: message.id().unwrap_or("null").to_string(),
        token: token_of(&message),
        cancel,
    };
    call.resume
        .send(resume)
        .map_err(|_| refuse("Invalid params: the call this requestState was for is over"))
}

/// The server a request that may need input goes to in `scope` (by the tool, prompt or
/// resource it names on `/mcp`), when one is known.
fn target(hub: &Hub, scope: &Scope, message: &Message) -> Option<String> {
    if let Scope::Server(server) = scope {
        return Some(server.clone());
    }
    let method = message.method()?;
    let named = message.string(&[era::named_by(method)?])?;
    let namespace = hub.namespace();
    let found = match method {
        "tools/call" => namespace.tool(&named).map(|e| e.server.clone()),
        "prompts/get" => namespace.prompt(&named).map(|e| e.server.clone()),
        _ => match namespace.route_uri(&named) {
            Route::To { server, .. } => Some(server),
            Route::Ask(servers) => servers.into_iter().next(),
        },
    };
    found.or_else(|| {
        // One server and nothing renamed: what is not known is that server's.
        let ready = hub.connections.snapshot();
        (ready.len() == 1)
            .then(|| ready.into_keys().next())
            .flatten()
    })
}

/// The harness a modern request stands for while it runs: the scope of its endpoint, what its
/// envelope declared, never asked anything outside its calls.
fn stand_in(hub: &Arc<Hub>, scope: Scope, envelope: Envelope) -> Arc<Harness> {
    let harness = Harness::new(hub.clone(), scope.clone(), false);
    harness
        .stand_in
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let declared = harness.initialized(initialize_params(&envelope, false));
    harness.speaks_modern(envelope);
    hub.join(harness.state());
    harness.go_live();
    harness.complete_handshake();
    // Every server request during its calls reaches it: the pump answers those it did not
    // declare with -32021 (registered here, so joining announced no roots to servers).
    let every = Abilities {
        sampling: true,
        roots: true,
        elicit_form: true,
        elicit_url: true,
        apps: declared.apps,
    };
    hub.tables().registry.join(harness.id, scope, every, false);
    harness
}

/// How answers to a modern harness are shaped.
enum Shape {
    /// As the server wrote them (a modern server on its own endpoint, `/mcp/<server>`).
    AsWritten,
    /// Completed where they lack it (`era::complete`), naming this `serverInfo`: the proxy's
    /// on `/mcp`, a legacy server's on its endpoint.
    Completed(Option<String>),
}

/// How answers to `scope` are shaped.
fn shape(hub: &Hub, scope: &Scope) -> Shape {
    match scope {
        Scope::All => Shape::Completed(Some(
            super::super::initialize::proxy_info_json().to_string(),
        )),
        Scope::Server(server) => {
            let initialized = match hub.connections.get(server) {
                Some(connected) if connected.session.discovered().is_some() => {
                    return Shape::AsWritten
                }
                Some(connected) => Some(connected.initialized),
                None => hub.connections.last_initialized(server),
            };
            let info = initialized.and_then(|i| i.server_info_json.clone());
            Shape::Completed(info)
        }
    }
}

fn token_of(message: &Message) -> Option<String> {
    message
        .find(&["_meta", "progressToken"])
        .map(|span| message.slice(span).to_string())
}

/// Carries one modern request's answer, and what comes before it, to the harness.
struct Pump {
    hub: Arc<Hub>,
    harness: Arc<Harness>,
    frames: mpsc::UnboundedReceiver<Outgoing>,
    out: Stream,
    /// The harness's id for the request (the retry's, after a round of input).
    id: String,
    /// Its progress token as the harness knows it (the first request's goes to servers).
    token: Option<String>,
    method: String,
    binding: String,
    declared: Abilities,
    shape: Shape,
    level: Option<Level>,
    cancel: Cancel,
    /// The held call's id and its retries, once input was asked for.
    call: Option<(
        u64,
        mpsc::UnboundedSender<Resume>,
        mpsc::UnboundedReceiver<Resume>,
    )>,
    round: u32,
    /// Frames that came while the call was held.
    buffered: Vec<Outgoing>,
}

impl Pump {
    async fn run(mut self) {
        loop {
            let frame = match self.buffered.is_empty() {
                false => Some(self.buffered.remove(0)),
                true => tokio::select! {
                    frame = self.frames.recv() => frame,
                    // An HTTP client closed its stream, or a stdio one cancelled: the
                    // stand-in goes, which cancels the request upstream.
                    _ = self.out.closed() => return,
                    _ = self.cancel.cancelled() => return,
                },
            };
            let Some(frame) = frame else {
                let text =
                    era::error_answer(&self.id, INTERNAL_ERROR, "the request was dropped", None);
                self.out.finish(text);
                return;
            };
            if frame.last {
                self.out.finish(self.complete(frame.text));
                return;
            }
            let Ok(message) = Message::parse(frame.text) else {
                continue;
            };
            if message.kind() == Kind::Request {
                if !self.ask(message).await {
                    return;
                }
            } else if let Some(text) = self.related(message) {
                self.out.send(text);
            }
        }
    }

    /// The final answer in modern shape, under the harness's current id.
    fn complete(&self, text: String) -> String {
        let message = match Message::parse(text) {
            Ok(message) => message.rewrite(Some(&self.id), Vec::new()),
            Err(invalid) => {
                return era::error_answer(&self.id, INTERNAL_ERROR, &invalid.message, None)
            }
        };
        let Shape::Completed(info) = &self.shape else {
            return message.into_text();
        };
        let hint = era::cacheable(&self.method).then(|| self.cache_hint());
        let completion = Completion {
            hint,
            server_info: info.as_deref(),
        };
        era::complete_message(message, completion)
    }

    /// The cache hints of this request's answer: every server's the scope joins, merged to
    /// the strictest (a legacy server's are [`CacheHint::LEGACY`], a modern server's its
    /// own; a modern server's answer keeps its hints, since only absent hints are added).
    fn cache_hint(&self) -> CacheHint {
        scope_hint(&self.hub, &self.harness.scope)
    }

    /// A message the servers sent about the request: progress (under the harness's current
    /// token), and log messages only when the request asked for a level and they reach it.
    fn related(&self, message: Message) -> Option<String> {
        match message.method() {
            Some("notifications/progress") => {
                let span = message.find(&["progressToken"]);
                Some(match (span, &self.token) {
                    (Some(span), Some(token)) if message.slice(span.clone()) != token => message
                        .rewrite(None, vec![(span, token.clone())])
                        .into_text(),
                    _ => message.into_text(),
                })
            }
            Some("notifications/message") => {
                let wanted = self.level?;
                logs::passes(&message, Some(wanted)).then(|| message.into_text())
            }
            // List changes and the like travel on listen streams only.
            _ => None,
        }
    }

    /// A server asked the harness for input (`first`, and whatever else came with it): an
    /// `input_required` result, then the call is held until the retry. `false` when the
    /// request is over.
    async fn ask(&mut self, first: Message) -> bool {
        let mut asked = vec![first];
        while let Ok(frame) = self.frames.try_recv() {
            match Message::parse(frame.text.clone()) {
                Ok(m) if m.kind() == Kind::Request && !frame.last => asked.push(m),
                _ => self.buffered.push(frame),
            }
        }
        let mut requests = Map::new();
        for request in asked {
            let method = request.method().unwrap_or_default().to_string();
            let Some(ours) = request.numeric_id() else {
                continue;
            };
            if !era::may_need_input(&self.method) {
                self.refuse(
                    ours,
                    &format!(
                        "a {} client cannot be asked {method} during {}",
                        era::MODERN,
                        self.method
                    ),
                );
                continue;
            }
            let mode = request.string(&["mode"]).map(|m| m.into_owned());
            let need = Need::of(&method, mode.as_deref());
            if !declares(self.declared, need) {
                let required = match need {
                    Need::Sampling => json!({"sampling": {}}),
                    Need::Roots => json!({"roots": {}}),
                    Need::ElicitUrl => json!({"elicitation": {"url": {}}}),
                    _ => json!({"elicitation": {"form": {}}}),
                };
                let why = format!(
                    "the server needs {} for this request, which did not declare it",
                    need.capability()
                );
                self.out
                    .finish(era::missing_capability(&required, &why).answer(&self.id));
                return false;
            }
            let mut input = json!({ "method": method });
            if let Some(span) = request.body() {
                if let Ok(params) = serde_json::from_str::<Value>(request.slice(span)) {
                    input["params"] = params;
                }
            }
            requests.insert(format!("ahp-{ours}"), input);
        }
        if requests.is_empty() {
            return true;
        }
        self.hold(requests).await
    }

    /// Answer `input_required` for `requests`, then wait for the retry (or give up).
    async fn hold(&mut self, mut requests: Map<String, Value>) -> bool {
        let ttl = held_for(&self.hub);
        loop {
            let (call, tx, resumes) = match self.call.take() {
                Some(held) => held,
                None => {
                    let (tx, rx) = mpsc::unbounded_channel();
                    (state::next_call(), tx, rx)
                }
            };
            self.round += 1;
            let claims = Claims {
                call,
                round: self.round,
            };
            // Each round's state answers once: the entry goes when a retry takes it.
            let entry = Held {
                round: self.round,
                resume: tx.clone(),
            };
            let Some(minted) = state::mint(claims, &self.binding, ttl) else {
                let why = "the proxy cannot mint a requestState: the system has no randomness";
                let answer = era::error_answer(&self.id, INTERNAL_ERROR, why, None);
                self.out.finish(answer);
                return false;
            };
            held()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(call, entry);
            let result = json!({
                "resultType": "input_required",
                "inputRequests": Value::Object(requests.clone()),
                "requestState": minted,
            });
            let answer = super::super::answers::result_answer(&self.id, &result.to_string());
            self.out.finish(answer);
            self.call = Some((call, tx, resumes));
            let Some(resume) = self.wait(ttl).await else {
                held()
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&call);
                tracing::info!(method = %self.method, "a held call got no retry with the input it asked for in time; cancelled upstream");
                return false;
            };
            self.out = resume.out;
            self.id = resume.id;
            self.cancel = resume.cancel;
            if resume.token.is_some() {
                self.token = resume.token;
            }
            requests.retain(|key, _| !resume.responses.contains_key(key));
            for (key, value) in resume.responses {
                let Some(ours) = key.strip_prefix("ahp-").and_then(|n| n.parse::<u64>().ok())
                else {
                    continue; // Unknown keys are ignored, as the spec asks.
                };
                let text = format!(r#"{{"jsonrpc":"2.0","id":{ours},"result":{value}}}"#);
                if let Ok(answer) = Message::parse(text) {
                    self.harness.handle(answer, Stream::channel().0);
                }
            }
            if requests.is_empty() {
                return true;
            }
        }
    }

    /// The retry, while frames that come meanwhile are kept; `None` when [`held_for`] passes.
    async fn wait(&mut self, ttl: Duration) -> Option<Resume> {
        let deadline = tokio::time::Instant::now() + ttl;
        let (_, _, resumes) = self.call.as_mut()?;
        loop {
            tokio::select! {
                resume = resumes.recv() => return resume,
                frame = self.frames.recv(), if !self.buffered.last().is_some_and(|f| f.last) => match frame {
                    Some(frame) => self.buffered.push(frame),
                    None => return None,
                },
                _ = tokio::time::sleep_until(deadline) => return None,
            }
        }
    }

    /// Refuse the server's request `ours` (the proxy's id for it) with `why`.
    fn refuse(&self, ours: u64, why: &str) {
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":{ours},"error":{{"code":{},"message":{}}}}}"#,
            era::METHOD_NOT_FOUND,
            message::quote(why)
        );
        if let Ok(answer) = Message::parse(text) {
            self.harness.handle(answer, Stream::channel().0);
        }
    }
}

impl Drop for Pump {
    /// A call that ends (answered, cancelled, given up) takes its pending state with it.
    fn drop(&mut self) {
        if let Some((call, _, _)) = &self.call {
            held()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(call);
        }
    }
}

fn declares(declared: Abilities, need: Need) -> bool {
    match need {
        Need::Sampling => declared.sampling,
        Need::Roots => declared.roots,
        Need::ElicitForm => declared.elicit_form,
        Need::ElicitUrl => declared.elicit_url,
        Need::Any => true,
    }
}
