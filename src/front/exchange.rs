//! A harness request from the moment the front takes it until it is answered, with one
//! owner: its [`Exchange`]. The upstream session holds the exchange while a server works on
//! the request, a task while a step makes it wait; its entry in the hub's in-flight table
//! goes when it is dropped ([`Tracked`]), whatever ended it. What the front does besides
//! passing raw messages on is a list of [`Step`]s run in order, each able to change a
//! message, drop a related one, or take the request's course in hand ([`Course`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::answers::{error_answer, INTERNAL_ERROR, REQUEST_TIMEOUT};
use super::harness::Harness;
use super::hub::Hub;
use super::in_flight::{Entry, HarnessId};
use super::lock::assert_free;
use super::outbox::Stream;
use crate::mcp::message::Message;
use crate::mirror::{Outcome, Ticket};
use crate::upstream::era::Era;
use crate::upstream::session::{Options, Reply, Unanswered};

/// One behaviour on the raw path of a harness request. Every method has a default that
/// passes the message on, so a step implements only what it does.
pub trait Step: Send {
    /// The request on its way to the server (once, before it is first sent).
    fn request(&mut self, _x: &mut Context, message: Message) -> Flow {
        Flow::Next(message)
    }
    /// The request as it goes to its server now (each time it is sent: after a step that
    /// made it wait or changed it, as sent).
    fn sent(&mut self, _message: &Message) {}
    /// A message the server sent about the request before its answer (progress, a log
    /// line on its stream); `None` drops it.
    fn related(&mut self, _x: &Context, message: Message) -> Option<Message> {
        Some(message)
    }
    /// The server's answer, as the steps before this one left it.
    fn answer(&mut self, _x: &mut Context, message: Message) -> Flow {
        Flow::Next(message)
    }
    /// No answer will come; `Some` takes the request's course in hand.
    fn failed(&mut self, _x: &mut Context, _why: &Unanswered) -> Option<Course> {
        None
    }
}

/// What a step did with a message.
pub enum Flow {
    /// On to the next step.
    Next(Message),
    /// The step decides what happens now; the steps after it are not run.
    Divert(Course),
}

/// What happens to a request next, when a step decides.
pub enum Course {
    /// Send this request to `server` (again, or to the next one); the exchange goes on.
    Send {
        /// The server's customization id.
        server: String,
        /// The request (its id is replaced on the way, as always).
        message: Message,
    },
    /// Wait for this, then follow the course it gives (with the mirrored call, which the
    /// waiting step held meanwhile). A harness that cancels, or goes away, ends the wait and
    /// the request, unanswered.
    Wait(Waiting),
    /// Answer the harness with this whole answer text, now.
    Answer(String),
    /// Answer the harness with this JSON-RPC error.
    Refuse {
        /// The error code.
        code: i64,
        /// Its message.
        message: String,
    },
}

/// A wait a step started: the course after it, and the mirrored call it held.
pub type Waiting = Pin<Box<dyn Future<Output = (Course, Option<Ticket>)> + Send>>;

/// The steps of one exchange, in order.
#[derive(Default)]
pub struct Steps(Vec<Box<dyn Step>>);

impl Steps {
    /// Room for `n` steps.
    pub fn with_capacity(n: usize) -> Self {
        Self(Vec::with_capacity(n))
    }

    /// `step` after those so far.
    pub fn with(mut self, step: impl Step + 'static) -> Self {
        self.0.push(Box::new(step));
        self
    }

    /// `step` after those so far, when there is one.
    pub fn with_some(self, step: Option<impl Step + 'static>) -> Self {
        match step {
            Some(step) => self.with(step),
            None => self,
        }
    }

    /// `step()` after those so far, when `wanted`.
    pub fn with_if<S: Step + 'static>(self, wanted: bool, step: impl FnOnce() -> S) -> Self {
        if wanted {
            self.with(step())
        } else {
            self
        }
    }
}

/// A harness request's entry in the hub's in-flight table, removed when this is dropped.
pub struct Tracked {
    hub: Arc<Hub>,
    tag: u64,
}

impl Tracked {
    /// Enter request `request` of harness `harness` (answered on `stream`, cancelled with
    /// `cancelled`), worked on by `server`, under a fresh tag.
    pub fn new(
        hub: Arc<Hub>,
        harness: HarnessId,
        request: Arc<str>,
        server: Arc<str>,
        stream: Stream,
        cancelled: CancellationToken,
    ) -> Self {
        let tag = hub.next_tag();
        let entry = Entry {
            server,
            harness,
            request,
            stream,
            cancelled,
        };
        hub.tables().registry.in_flight.insert(tag, entry);
        Self { hub, tag }
    }

    /// Leave the in-flight table (before the answer is queued on the request's stream:
    /// a notification routed there afterwards would land behind the answer, and be lost).
    fn release(&self) {
        let removed = self.hub.tables().registry.in_flight.remove(self.tag);
        drop(removed);
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.release();
    }
}

/// What the steps of an exchange see of it.
pub struct Context {
    tracked: Tracked,
    /// The harness that sent the request.
    pub harness: HarnessId,
    /// The server working on it now.
    pub server: Arc<str>,
    /// Its id, as the harness wrote it.
    pub id: Arc<str>,
    /// Its method.
    pub method: String,
    /// Where its answer goes.
    pub stream: Stream,
    /// Cancelled when the harness cancels it or goes away.
    pub cancelled: CancellationToken,
    /// Its mirrored tool call, if it is one (a step that makes it wait holds it meanwhile).
    pub ticket: Option<Ticket>,
    /// What its metrics say of it (`front::metrics`).
    timing: Timing,
}

/// When an exchange began and was sent, and what its labels say so far.
struct Timing {
    began: std::time::Instant,
    sent: Option<std::time::Instant>,
    tool: Option<String>,
    error: Option<String>,
}

impl Context {
    /// The hub.
    pub fn hub(&self) -> &Arc<Hub> {
        &self.tracked.hub
    }

    /// Its tag in the in-flight table.
    pub fn tag(&self) -> u64 {
        self.tracked.tag
    }
}

/// One harness request and its steps.
pub struct Exchange {
    x: Context,
    steps: Vec<Box<dyn Step>>,
}

impl Exchange {
    /// Take `harness`'s request `message` (its answer goes to `stream`) for server `server`,
    /// mirrored as `ticket`, through `steps`; then send it.
    pub fn start(
        harness: &Harness,
        server: &str,
        message: Message,
        stream: Stream,
        ticket: Option<Ticket>,
        steps: Steps,
    ) {
        let id: Arc<str> = message.id().unwrap_or("null").into();
        let server: Arc<str> = server.into();
        let cancelled = CancellationToken::new();
        let tracked = Tracked::new(
            harness.hub.clone(),
            harness.id,
            id.clone(),
            server.clone(),
            stream.clone(),
            cancelled.clone(),
        );
        let exchange = Box::new(Exchange {
            x: Context {
                tracked,
                harness: harness.id,
                server,
                id,
                method: message.method().unwrap_or_default().to_string(),
                stream,
                cancelled,
                ticket,
                timing: Timing {
                    began: std::time::Instant::now(),
                    sent: None,
                    tool: None,
                    error: None,
                },
            },
            steps: steps.0,
        });
        exchange.go(message);
    }

    /// Run the request through the steps and send it to its server.
    fn go(mut self: Box<Self>, message: Message) {
        let this = &mut *self;
        match run(&mut this.steps, &mut this.x, message, |s, x, m| {
            s.request(x, m)
        }) {
            Flow::Next(message) => self.send(message),
            Flow::Divert(course) => self.follow(course),
        }
    }

    fn follow(mut self: Box<Self>, course: Course) {
        match course {
            Course::Send { server, message } => {
                self.retarget(server);
                self.send(message);
            }
            Course::Wait(waiting) => {
                let cancelled = self.x.cancelled.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        (course, ticket) = waiting => {
                            self.x.ticket = ticket;
                            self.follow(course);
                        }
                        // Nobody waits for an answer any more.
                        _ = cancelled.cancelled() => {}
                    }
                });
            }
            Course::Answer(text) => self.finish(text),
            Course::Refuse { code, message } => self.refuse(code, &message),
        }
    }

    /// The request goes to `server` from now on.
    fn retarget(&mut self, server: String) {
        if *server != *self.x.server {
            let server: Arc<str> = server.into();
            let hub = self.x.hub();
            hub.tables()
                .registry
                .in_flight
                .retarget(self.x.tag(), &server);
            self.x.server = server;
        }
    }

    /// Send `message` to its server; the answer comes back to this exchange.
    fn send(mut self: Box<Self>, message: Message) {
        for step in &mut self.steps {
            step.sent(&message);
        }
        let hub = self.x.hub().clone();
        let hub = &hub;
        let Some(connected) = hub.connections.get(&self.x.server) else {
            let name = hub.connections.name_of(&self.x.server);
            return self.refuse(INTERNAL_ERROR, &format!("MCP server {name} is not running"));
        };
        let options = Options {
            timeout: hub.settings.request_timeout,
            reset_on_progress: true,
            tag: Some(self.x.tag()),
        };
        // A tool the server does not offer is no label of its own (names are unbounded).
        if self.x.method == "tools/call" {
            let offered = (message.string(&["name"]))
                .filter(|name| connected.offer().tool(name).is_some())
                .map(|name| name.into_owned());
            self.x.timing.tool = Some(offered.unwrap_or_else(|| "_OTHER".into()));
        }
        self.x.timing.sent = Some(std::time::Instant::now());
        // A modern server is told whom the request is for (a legacy one knew at `initialize`,
        // and is not shown a modern harness's own envelope: it would not match its session).
        let (envelope, message) = match connected.era() {
            Era::Modern => (super::envelope::of(hub, self.x.harness), message),
            Era::Legacy => (None, crate::upstream::envelope::unwrapped(message)),
        };
        assert_free("a server session called under a front lock");
        let session = &connected.session;
        if let Err((reply, failure)) = session.request_as(message, self, options, envelope.as_ref())
        {
            reply.fail(failure);
        }
    }

    /// Count it in the metrics, ended with `error` (none: a success).
    fn count(&mut self, error: Option<String>) {
        let operation = super::metrics::Operation {
            method: super::metrics::method_label(&self.x.method),
            tool: self.x.timing.tool.clone(),
            error,
        };
        let seconds = self.x.timing.began.elapsed().as_secs_f64();
        self.x.hub().settings.metrics.served(&operation, seconds);
    }

    /// Count the server's part (its answer, or `error`) in the metrics.
    fn count_asked(&mut self, error: Option<String>) {
        let Some(sent) = self.x.timing.sent.take() else {
            return;
        };
        let operation = super::metrics::Operation {
            method: super::metrics::method_label(&self.x.method),
            tool: self.x.timing.tool.clone(),
            error,
        };
        let hub = self.x.hub();
        let name = hub.connections.name_of(&self.x.server);
        (hub.settings.metrics).asked(&operation, &name, sent.elapsed().as_secs_f64());
    }

    /// Answer the harness with `text`; the mirrored call ends with it.
    fn finish(mut self, text: String) {
        let error = self.x.timing.error.take();
        self.count(error);
        if let Some(ticket) = self.x.ticket.take() {
            ticket.finish(Outcome::Raw(text.clone()));
        }
        self.x.tracked.release();
        self.x.stream.finish(text);
    }

    /// Answer the harness with an error; the mirrored call fails with it (or is cancelled,
    /// when the harness cancelled it).
    fn refuse(mut self, code: i64, text: &str) {
        self.count(Some(code.to_string()));
        if let Some(ticket) = self.x.ticket.take() {
            ticket.finish(if self.x.cancelled.is_cancelled() {
                Outcome::Cancelled
            } else {
                Outcome::Failed(text.to_string())
            });
        }
        self.x.tracked.release();
        self.x.stream.finish(error_answer(&self.x.id, code, text));
    }
}

impl Reply for Exchange {
    fn related(&mut self, mut message: Message) {
        for step in &mut self.steps {
            match step.related(&self.x, message) {
                Some(next) => message = next,
                None => return,
            }
        }
        self.x.stream.send(message.into_text());
    }

    fn respond(mut self: Box<Self>, message: Message) {
        let error = super::metrics::error_of(&message, &self.x.method);
        self.count_asked(error.clone());
        self.x.timing.error = error;
        let this = &mut *self;
        match run(&mut this.steps, &mut this.x, message, |s, x, m| {
            s.answer(x, m)
        }) {
            Flow::Next(message) => self.finish(message.into_text()),
            Flow::Divert(course) => self.follow(course),
        }
    }

    fn fail(mut self: Box<Self>, failure: Unanswered) {
        let this = &mut *self;
        let taken = (this.steps.iter_mut()).find_map(|step| step.failed(&mut this.x, &failure));
        if let Some(course) = taken {
            return self.follow(course);
        }
        let name = self.x.hub().connections.name_of(&self.x.server);
        let (code, text) = describe(&failure, &name, &self.x.method);
        self.count_asked(Some(code.to_string()));
        self.refuse(code, &text);
    }
}

/// `message` through `steps` at one stage (`stage` calls the step's method for it), until
/// one takes the course in hand.
fn run(
    steps: &mut [Box<dyn Step>],
    x: &mut Context,
    mut message: Message,
    stage: impl Fn(&mut dyn Step, &mut Context, Message) -> Flow,
) -> Flow {
    for step in steps {
        match stage(step.as_mut(), x, message) {
            Flow::Next(next) => message = next,
            diverted => return diverted,
        }
    }
    Flow::Next(message)
}

/// A failure as the harness sees it: never transport internals (which may quote a URL).
pub fn describe(failure: &Unanswered, server: &str, method: &str) -> (i64, String) {
    match failure {
        Unanswered::Timeout(limit) => (
            REQUEST_TIMEOUT,
            format!(
                "MCP server {server} did not answer {method} within {} ms",
                limit.as_millis()
            ),
        ),
        Unanswered::Stopped => (
            INTERNAL_ERROR,
            format!("MCP server {server} stopped before answering {method}"),
        ),
        Unanswered::Unauthorized { status, .. } => (
            INTERNAL_ERROR,
            format!("MCP server {server} refused {method}: HTTP {status} (authorization needed)"),
        ),
        Unanswered::Undelivered(why) => (
            INTERNAL_ERROR,
            format!("{method} could not be delivered to MCP server {server}: {why}"),
        ),
    }
}
