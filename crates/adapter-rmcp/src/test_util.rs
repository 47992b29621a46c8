//! Helpers for testing a server behind a [`WriteGuard`](crate::WriteGuard) (feature
//! `test-util`): the same ones this crate's own tests use.
//!
//! - [`ScriptedClient`]: a client whose approval dialog answers from a script, in order, and
//!   records every question. It serves both protocol eras: below 2026-07-28 the guard asks it
//!   with `elicitation/create`; at 2026-07-28 the guard answers the `tools/call` with an
//!   `InputRequiredResult`, and rmcp's client runs the same handler and retries the call with
//!   the answers.
//!   A [`Gate`] holds answers back until the test opens it.
//! - [`SilentClient`]: a client whose dialog never answers, for timeouts and cancellation.
//! - [`connect`]: any client to any server over an in-memory duplex, in either [`Era`];
//!   [`connect_over`]: a client over any transport (a child process, streamable HTTP), checking
//!   the era the server agreed to.
//! - [`FailingStore`]: an approval store that can be switched down.
//! - [`ManualClock`]: mcp-write-guard-core's fake clock, so approvals and tokens expire without sleeping.
//! - [`notice`]: a [`Notice`] for a notifier's tests.
//!
//! # Example
//!
//! ```
//! use mcp_write_guard_rmcp::test_util::{ERAS, ManualClock, Reply, ScriptedClient, connect};
//! use mcp_write_guard_rmcp::{MemorySink, Outcome, WriteGuard};
//! use rmcp::{
//!     ServerHandler, handler::server::{router::tool::ToolRouter, wrapper::Parameters},
//!     model::CallToolRequestParams, schemars, tool, tool_handler, tool_router,
//! };
//! use std::sync::{Arc, atomic::{AtomicI64, Ordering}};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Add { n: i64 }
//!
//! #[derive(Clone)]
//! struct Counter { value: Arc<AtomicI64>, tool_router: ToolRouter<Self> }
//!
//! #[tool_router]
//! impl Counter {
//!     #[tool(description = "Add to the counter",
//!            annotations(read_only_hint = false, destructive_hint = false, open_world_hint = false))]
//!     async fn add(&self, Parameters(Add { n }): Parameters<Add>) -> String {
//!         (self.value.fetch_add(n, Ordering::SeqCst) + n).to_string()
//!     }
//! }
//!
//! #[tool_handler(router = self.tool_router)]
//! impl ServerHandler for Counter {}
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! for era in ERAS {
//!     let counter = Counter { value: Arc::default(), tool_router: Counter::tool_router() };
//!     let audit = MemorySink::new();
//!     let guard = WriteGuard::builder(counter.clone())
//!         .writes_enabled(true)
//!         .audit(Arc::new(audit.clone()))
//!         .clock(Arc::new(ManualClock::default()))
//!         .build();
//!     let person = ScriptedClient::new();
//!     // The person declines the first write and approves the second.
//!     person.script([Reply::Decline, Reply::Approve]);
//!     let client = connect(guard, era, person.clone()).await?;
//!     let add = || {
//!         let args = serde_json::json!({"n": 2});
//!         CallToolRequestParams::new("add").with_arguments(args.as_object().cloned().unwrap())
//!     };
//!
//!     let declined = client.call_tool(add()).await?;
//!     assert_eq!(declined.is_error, Some(true));
//!     assert_eq!(counter.value.load(Ordering::SeqCst), 0, "nothing was written");
//!
//!     let approved = client.call_tool(add()).await?;
//!     assert_ne!(approved.is_error, Some(true));
//!     assert_eq!(counter.value.load(Ordering::SeqCst), 2);
//!     assert_eq!(person.asked().len(), 2, "one question per write");
//!     assert_eq!(audit.outcomes().last(), Some(&Outcome::Applied));
//! }
//! # Ok(())
//! # }
//! ```

use std::{
    collections::VecDeque,
    fmt,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use mcp_write_guard_core::{
    MemoryStore, Principal, Store, StoreError,
    store::{BoxFuture, Record, StoreKey},
};
use parking_lot::Mutex;
use rmcp::{
    ClientHandler, ErrorData, RoleClient, ServerHandler, ServiceExt,
    model::{
        ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
        ElicitationCapability, FormElicitationCapability, Implementation, JsonObject,
        ProtocolVersion,
    },
    service::{
        ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RequestContext,
        RunningService,
    },
    transport::IntoTransport,
};
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::sync::{Notify, watch};

pub use mcp_write_guard_core::ManualClock;

use crate::{Era, notify::Notice};

/// A notice about adjusting TLS-002's stock on server `inventory`, with the page at `url`: the
/// same approval id, prompt and expiry every time, for a notifier's tests.
#[allow(clippy::expect_used)] // fixed values that parse
pub fn notice(url: &str) -> Notice {
    Notice::new(
        "0b7f3a52-2c1e-4f4e-9a51-3c6d2e8f9a10"
            .parse()
            .expect("a version 4 UUID"),
        "inventory",
        "adjust_stock",
        "Adjust \"TLS-002\": stock 3 -> 1?",
        url,
        OffsetDateTime::from_unix_timestamp(1_767_225_720).expect("a time in range"),
    )
}

/// Both protocol eras, for a test that runs once in each.
pub const ERAS: [Era; 2] = [Era::Legacy, Era::InputRounds];

/// The era named `name` ([`Era::as_str`]: `legacy` or `2026-07-28`), for a command line.
pub fn era_named(name: &str) -> Option<Era> {
    ERAS.into_iter().find(|era| era.as_str() == name)
}

/// Connects `client` to `server` over an in-memory duplex in `era`: below 2026-07-28 with
/// `initialize`, or with `server/discover` at 2026-07-28. The server runs on a spawned task
/// until the client goes away.
pub async fn connect<S, C>(
    server: S,
    era: Era,
    client: C,
) -> Result<RunningService<RoleClient, C>, ClientInitializeError>
where
    S: ServerHandler,
    C: ClientHandler,
{
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    start(client, client_io, era).await
}

/// The protocol version a client speaking `era` asks for and expects.
fn version(era: Era) -> ProtocolVersion {
    match era {
        Era::Legacy => ProtocolVersion::LATEST_WITH_INITIALIZE,
        Era::InputRounds => ProtocolVersion::V_2026_07_28,
    }
}

/// Starts `client` on `transport` in `era`: `initialize`, or `server/discover` at 2026-07-28.
async fn start<C, T, E, A>(
    client: C,
    transport: T,
    era: Era,
) -> Result<RunningService<RoleClient, C>, ClientInitializeError>
where
    C: ClientHandler,
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    match era {
        Era::Legacy => client.serve(transport).await,
        Era::InputRounds => {
            client
                .serve_with_lifecycle(
                    transport,
                    ClientLifecycleMode::Discover {
                        preferred_versions: vec![version(era)],
                    },
                )
                .await
        }
    }
}

/// Connects `client` over any client transport (an in-memory pipe, a child process, streamable
/// HTTP) in `era`, and checks that the server agreed to that era's protocol version.
///
/// # Errors
///
/// When the client cannot start, or the server negotiated another version.
pub async fn connect_over<C, T, E, A>(
    transport: T,
    era: Era,
    client: C,
) -> Result<RunningService<RoleClient, C>, Box<dyn std::error::Error + Send + Sync>>
where
    C: ClientHandler,
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = start(client, transport, era).await?;
    let expected = version(era);
    let negotiated = running
        .peer_info()
        .map(|info| info.protocol_version.clone());
    if negotiated.as_ref() != Some(&expected) {
        return Err(format!("{era:?}: negotiated {negotiated:?}, expected {expected:?}").into());
    }
    Ok(running)
}

/// The capabilities of a client that can show the guard's approval form.
fn form_elicitation() -> ClientCapabilities {
    ClientCapabilities::builder()
        .enable_elicitation_with(
            ElicitationCapability::new().with_form(FormElicitationCapability::new()),
        )
        .build()
}

/// One scripted answer of a [`ScriptedClient`] to an approval question.
#[non_exhaustive]
pub enum Reply {
    /// `accept` with `{"approve": true}`: the person approves.
    Approve,
    /// `decline`.
    Decline,
    /// `cancel`.
    Cancel,
    /// `accept` with this content.
    Accept(Value),
    /// Any action, with any content (or none).
    Raw(ElicitationAction, Option<Value>),
    /// The client's dialog fails: the handler returns an error.
    Fail,
    /// Runs a side effect (advance a clock, change the data behind the tool) while the question
    /// is open, then answers. Build it with [`Reply::after`].
    After(Box<dyn FnOnce() + Send>, Box<Reply>),
    /// Waits at the [`Gate`] until the test opens it, then answers: the question stays open
    /// (and shown) meanwhile. Build it with [`Reply::held`].
    Held(Gate, Box<Reply>),
}

impl Reply {
    /// Runs `effect` when the question arrives, then answers with `then`.
    pub fn after(effect: impl FnOnce() + Send + 'static, then: Reply) -> Self {
        Self::After(Box::new(effect), Box::new(then))
    }

    /// Lets the fake `clock` run on by `by` while the person thinks, then answers with `then`.
    pub fn late(clock: &ManualClock, by: time::Duration, then: Reply) -> Self {
        let clock = clock.clone();
        Self::after(move || clock.advance(by), then)
    }

    /// Waits at `gate` until the test opens it, then answers with `then`.
    pub fn held(gate: &Gate, then: Reply) -> Self {
        Self::Held(gate.clone(), Box::new(then))
    }

    fn answer(self) -> BoxFuture<'static, Result<ElicitResult, ErrorData>> {
        Box::pin(async move {
            match self {
                Self::Approve => Ok(ElicitResult::new(ElicitationAction::Accept)
                    .with_content(json!({"approve": true}))),
                Self::Decline => Ok(ElicitResult::new(ElicitationAction::Decline)),
                Self::Cancel => Ok(ElicitResult::new(ElicitationAction::Cancel)),
                Self::Accept(content) => {
                    Ok(ElicitResult::new(ElicitationAction::Accept).with_content(content))
                }
                Self::Raw(action, content) => {
                    let mut result = ElicitResult::new(action);
                    result.content = content;
                    Ok(result)
                }
                Self::Fail => Err(ErrorData::internal_error(
                    "the approval dialog crashed",
                    None,
                )),
                Self::After(effect, then) => {
                    effect();
                    then.answer().await
                }
                Self::Held(gate, then) => {
                    gate.pass().await;
                    then.answer().await
                }
            }
        })
    }
}

/// Holds [`Reply::held`] answers back until the test opens it, and counts the questions waiting
/// at it, so a test can let every question be asked (and shown) before any is answered, or
/// change the data while a question is open. Clones share the gate.
#[derive(Debug, Clone)]
pub struct Gate {
    waiting: watch::Sender<usize>,
    open: watch::Sender<bool>,
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// A closed gate with nobody waiting.
    pub fn new() -> Self {
        Self {
            waiting: watch::Sender::new(0),
            open: watch::Sender::new(false),
        }
    }

    /// Waits until at least `n` questions have arrived at the gate.
    ///
    /// # Errors
    ///
    /// When they have not arrived `within`.
    pub async fn wait_for_questions(
        &self,
        n: usize,
        within: Duration,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let mut waiting = self.waiting.subscribe();
        match tokio::time::timeout(within, waiting.wait_for(|arrived| *arrived >= n)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(closed)) => Err(closed.into()),
            Err(_) => Err(format!(
                "{} of {n} questions arrived within {within:?}",
                *self.waiting.borrow()
            )
            .into()),
        }
    }

    /// Opens the gate: every held answer, and every later one, goes through.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// Arrives at the gate and waits until it is open.
    async fn pass(&self) {
        let mut open = self.open.subscribe();
        self.waiting.send_modify(|arrived| *arrived += 1);
        // The sender lives in `self`, so the wait cannot fail; it only ends when opened.
        let _ = open.wait_for(|open| *open).await;
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Approve => f.write_str("Approve"),
            Self::Decline => f.write_str("Decline"),
            Self::Cancel => f.write_str("Cancel"),
            Self::Accept(content) => f.debug_tuple("Accept").field(content).finish(),
            Self::Raw(action, content) => {
                f.debug_tuple("Raw").field(action).field(content).finish()
            }
            Self::Fail => f.write_str("Fail"),
            Self::After(_, then) => f.debug_tuple("After").field(&"..").field(then).finish(),
            Self::Held(_, then) => f.debug_tuple("Held").field(&"..").field(then).finish(),
        }
    }
}

#[derive(Debug, Default)]
struct Script {
    replies: Mutex<VecDeque<Reply>>,
    asked: Mutex<Vec<String>>,
    /// When the last question arrived (the `approved-writes` bench splits a write's time there).
    last_asked_at: Mutex<Option<Instant>>,
}

/// A client whose approval dialog answers from a script, in order, and records every question.
///
/// Clones share the script and the record. When the script has run out, the dialog fails (the
/// handler returns an error, as [`Reply::Fail`] does), or, for a client made with
/// [`answering`](Self::answering), declines; either way a test that did not expect a question
/// sees a refusal instead of an approval.
#[derive(Debug, Clone)]
pub struct ScriptedClient {
    script: Arc<Script>,
    elicitation: bool,
    extensions: Vec<String>,
    decline_unscripted: bool,
}

impl Default for ScriptedClient {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptedClient {
    /// A client that declares form elicitation, with an empty script.
    pub fn new() -> Self {
        Self {
            script: Arc::default(),
            elicitation: true,
            extensions: Vec::new(),
            decline_unscripted: false,
        }
    }

    /// A client that declares form elicitation and answers with `replies` in order; a question
    /// after them is declined (a person closing a dialog they did not expect).
    pub fn answering(replies: impl IntoIterator<Item = Reply>) -> Self {
        let client = Self {
            decline_unscripted: true,
            ..Self::new()
        };
        client.script(replies);
        client
    }

    /// A client that declares no elicitation: the guard cannot ask it anything.
    pub fn without_elicitation() -> Self {
        Self {
            elicitation: false,
            ..Self::new()
        }
    }

    /// The same client, also declaring the extension `id` (for example
    /// [`TASKS_EXTENSION_ID`](rmcp::model::TASKS_EXTENSION_ID)) in its capabilities.
    pub fn with_extension(mut self, id: impl Into<String>) -> Self {
        self.extensions.push(id.into());
        self
    }

    /// Appends `replies` to the script.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.script.replies.lock().extend(replies);
    }

    /// Every question asked so far, in order.
    pub fn asked(&self) -> Vec<String> {
        self.script.asked.lock().clone()
    }

    /// When the last question arrived, if one has.
    pub fn last_asked_at(&self) -> Option<Instant> {
        *self.script.last_asked_at.lock()
    }

    /// How many scripted replies are still unused.
    pub fn unused_replies(&self) -> usize {
        self.script.replies.lock().len()
    }
}

impl ClientHandler for ScriptedClient {
    /// Records the question and answers with the next scripted [`Reply`].
    ///
    /// # Panics
    ///
    /// When the question is not the guard's approval form: a form whose schema requires
    /// exactly one boolean, `approve`. (The panic ends the client's connection, and the test
    /// fails on the broken call.)
    #[allow(
        clippy::panic,
        reason = "a question in another shape is a bug the test must see"
    )]
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            panic!("the guard asks with forms only: {request:?}");
        };
        let schema = serde_json::to_value(&requested_schema).unwrap_or_default();
        if schema.get("required") != Some(&json!(["approve"]))
            || schema.pointer("/properties/approve/type") != Some(&json!("boolean"))
        {
            panic!("the approval form asks for one required boolean, approve: {schema}");
        }
        *self.script.last_asked_at.lock() = Some(Instant::now());
        self.script.asked.lock().push(message);
        let reply = self.script.replies.lock().pop_front();
        match reply {
            Some(reply) => reply.answer().await,
            None if self.decline_unscripted => Reply::Decline.answer().await,
            None => Err(ErrorData::internal_error("no scripted answer", None)),
        }
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = if self.elicitation {
            form_elicitation()
        } else {
            ClientCapabilities::default()
        };
        if !self.extensions.is_empty() {
            let declared = capabilities.extensions.get_or_insert_with(Default::default);
            for id in &self.extensions {
                declared.insert(id.clone(), JsonObject::new());
            }
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("scripted-client", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A question that sends the person to the approval page, as a [`PageClient`] received it.
/// Answer it with [`reply`](Self::reply) (the client's own answer: whether the person went to
/// the page); the page itself is answered by whoever opens [`url`](Self::url).
#[cfg(feature = "approval-page")]
#[derive(Debug)]
#[non_exhaustive]
pub struct PageQuestion {
    /// The page's address.
    pub url: String,
    /// The message beside the link.
    pub message: String,
    /// The question's `elicitationId`.
    pub elicitation_id: String,
    reply: tokio::sync::oneshot::Sender<Result<ElicitResult, ErrorData>>,
}

#[cfg(feature = "approval-page")]
impl PageQuestion {
    /// The client answers the question with `action` (`Accept`: the person went to the page).
    pub fn reply(self, action: ElicitationAction) {
        let _ignored = self.reply.send(Ok(ElicitResult::new(action)));
    }

    /// The client will not show the link (a host that opens no links, by policy or by fault):
    /// it answers the question with a JSON-RPC error instead of an answer.
    pub fn refuse(self) {
        let _ignored = self.reply.send(Err(ErrorData::invalid_request(
            "this client does not open links",
            None,
        )));
    }

    /// The client answers with `action` and `content` (which a question on the page must
    /// ignore: only the page's own answer counts).
    pub fn reply_with(self, action: ElicitationAction, content: Value) {
        let _ignored = self
            .reply
            .send(Ok(ElicitResult::new(action).with_content(content)));
    }
}

/// A client that declares URL-mode elicitation (and, with [`with_form`](Self::with_form), form
/// elicitation too), for a guard with an approval page: every URL question is handed to the test
/// through [`next_question`](Self::next_question), and the client's handler waits for the
/// test's [`PageQuestion::reply`]. It records the `notifications/elicitation/complete` it gets.
/// Clones share the questions and the record.
#[cfg(feature = "approval-page")]
#[derive(Debug, Clone)]
pub struct PageClient {
    questions: Arc<tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<PageQuestion>>>,
    sender: tokio::sync::mpsc::UnboundedSender<PageQuestion>,
    completed: Arc<Mutex<Vec<String>>>,
    form: bool,
}

#[cfg(feature = "approval-page")]
impl Default for PageClient {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "approval-page")]
impl PageClient {
    /// A client that declares URL-mode elicitation only.
    pub fn new() -> Self {
        let (sender, questions) = tokio::sync::mpsc::unbounded_channel();
        Self {
            questions: Arc::new(tokio::sync::Mutex::new(questions)),
            sender,
            completed: Arc::default(),
            form: false,
        }
    }

    /// The same client, declaring form elicitation too (a form question fails its handler).
    #[must_use]
    pub fn with_form(mut self) -> Self {
        self.form = true;
        self
    }

    /// The next URL question, when it arrives.
    pub async fn next_question(&self) -> Option<PageQuestion> {
        self.questions.lock().await.recv().await
    }

    /// The `elicitationId`s the server said were completed, in order.
    pub fn completed(&self) -> Vec<String> {
        self.completed.lock().clone()
    }
}

#[cfg(feature = "approval-page")]
impl ClientHandler for PageClient {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::UrlElicitationParams {
            message,
            url,
            elicitation_id,
            ..
        } = request
        else {
            return Err(ErrorData::internal_error(
                "this client answers URL questions only",
                None,
            ));
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        let question = PageQuestion {
            url,
            message,
            elicitation_id,
            reply,
        };
        if self.sender.send(question).is_err() {
            return Err(ErrorData::internal_error(
                "nobody reads the questions",
                None,
            ));
        }
        match answer.await {
            Ok(result) => result,
            Err(_) => Err(ErrorData::internal_error("the question was dropped", None)),
        }
    }

    async fn on_custom_notification(
        &self,
        notification: rmcp::model::CustomNotification,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        if notification.method == "notifications/elicitation/complete"
            && let Some(id) = notification
                .params
                .as_ref()
                .and_then(|p| p.get("elicitationId"))
                .and_then(Value::as_str)
        {
            self.completed.lock().push(id.to_owned());
        }
    }

    fn get_info(&self) -> ClientConfig {
        let mut elicitation =
            ElicitationCapability::new().with_url(rmcp::model::UrlElicitationCapability::new());
        if self.form {
            elicitation = elicitation.with_form(FormElicitationCapability::new());
        }
        ClientConfig::new(
            ClientCapabilities::builder()
                .enable_elicitation_with(elicitation)
                .build(),
            Implementation::new("page-client", env!("CARGO_PKG_VERSION")),
        )
    }
}

#[derive(Debug, Default)]
struct Silence {
    questions: AtomicUsize,
    arrived: Notify,
}

/// A client that declares form elicitation and whose dialog never answers: it counts the
/// question, then waits forever. Clones share the count.
#[derive(Debug, Clone, Default)]
pub struct SilentClient {
    silence: Arc<Silence>,
}

impl SilentClient {
    /// A client that has not been asked anything yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many questions have arrived.
    pub fn questions(&self) -> usize {
        self.silence.questions.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` questions have arrived.
    pub async fn wait_for_questions(&self, n: usize) {
        loop {
            let arrived = self.silence.arrived.notified();
            if self.questions() >= n {
                return;
            }
            arrived.await;
        }
    }
}

impl ClientHandler for SilentClient {
    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.silence.questions.fetch_add(1, Ordering::SeqCst);
        self.silence.arrived.notify_waiters();
        std::future::pending().await
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            form_elicitation(),
            Implementation::new("silent-client", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A [`MemoryStore`] that can be switched down: while down, every call fails with
/// [`StoreError::Unavailable`] ("connection refused"), as an unreachable backend would.
///
/// It starts up. Switch it with [`set_down`](Self::set_down), from the test or from a
/// [`Reply::after`] while the person is being asked.
#[derive(Debug, Default)]
pub struct FailingStore {
    inner: MemoryStore,
    down: AtomicBool,
}

impl FailingStore {
    /// A store that works until it is switched down.
    pub fn new() -> Self {
        Self::default()
    }

    /// Switches the store down (`true`) or back up (`false`).
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Whether the store is down.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }

    fn fail<T: Send + 'static>(&self) -> Option<BoxFuture<'static, Result<T, StoreError>>> {
        self.is_down().then(|| {
            Box::pin(std::future::ready(Err(StoreError::Unavailable(
                "connection refused".into(),
            )))) as BoxFuture<'static, Result<T, StoreError>>
        })
    }
}

impl Store for FailingStore {
    fn insert<'a>(
        &'a self,
        key: StoreKey,
        principal: &'a Principal,
        record: Record,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        match self.fail() {
            Some(failed) => failed,
            None => self.inner.insert(key, principal, record, expires_at, now),
        }
    }

    fn take<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Record>, StoreError>> {
        match self.fail() {
            Some(failed) => failed,
            None => self.inner.take(key, now),
        }
    }

    fn get<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Record>, StoreError>> {
        match self.fail() {
            Some(failed) => failed,
            None => self.inner.get(key, now),
        }
    }

    fn purge_expired(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<usize, StoreError>> {
        match self.fail() {
            Some(failed) => failed,
            None => self.inner.purge_expired(now),
        }
    }
}
