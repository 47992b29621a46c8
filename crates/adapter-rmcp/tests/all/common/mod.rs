//! Shared test support: the fixture servers, and a harness that connects the crate's
//! [`ScriptedClient`] to them through a guard over an in-memory duplex, in either protocol era.
#![allow(unreachable_pub)]

pub mod counter;
pub mod custom;
pub mod fixture;
pub mod gated;
pub mod logs;
/// The server of the crate's `stdio_notes` example (its `main` is not used here).
#[allow(dead_code)]
#[path = "../../../examples/stdio_notes.rs"]
pub mod notes;
pub mod paged;

use std::sync::Arc;

use mcp_write_guard_core::ManualClock;
use mcp_write_guard_rmcp::{MemorySink, Outcome, WriteGuard, WriteGuardBuilder};
use rmcp::{
    RoleClient, ServerHandler,
    model::*,
    service::{RunningService, ServiceError},
};
use serde_json::{Value, json};
use time::OffsetDateTime;

pub use fixture::{Fixture, State};

pub use mcp_write_guard_rmcp::{
    Era,
    test_util::{ERAS, Reply, ScriptedClient, SilentClient, connect},
};

pub type Client = RunningService<RoleClient, ScriptedClient>;

/// How to build the guard for a test, and whether its client declares form elicitation. Any
/// other setting is the builder's own: see [`Harness::custom`].
#[derive(Debug, Clone)]
pub struct Options {
    pub writes: bool,
    pub elicitation: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            writes: true,
            elicitation: true,
        }
    }
}

impl Options {
    /// The defaults, for a client that declares no form elicitation.
    pub fn without_elicitation() -> Self {
        Self {
            elicitation: false,
            ..Self::default()
        }
    }

    /// The defaults, with writes disabled.
    pub fn writes_disabled() -> Self {
        Self {
            writes: false,
            ..Self::default()
        }
    }
}

/// A scripted client that declares form elicitation, or none.
pub fn scripted_client(elicitation: bool) -> ScriptedClient {
    if elicitation {
        ScriptedClient::new()
    } else {
        ScriptedClient::without_elicitation()
    }
}

pub fn start_time() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
}

/// A guard around the fixture, with a memory audit sink and a manual clock.
pub fn guard(
    fixture: Fixture,
    audit: &MemorySink,
    clock: &ManualClock,
    options: &Options,
) -> WriteGuard<Fixture> {
    custom::guard_builder(fixture, audit, clock, options).build()
}

/// A scripted client connected to a guard around any `server`: writes enabled, a memory audit
/// sink and a manual clock, and whatever else `configure` sets.
pub struct Connected<S> {
    pub client: Client,
    pub scripted: ScriptedClient,
    pub server: S,
    pub audit: MemorySink,
    pub guard: WriteGuard<S>,
}

impl<S: ServerHandler + Clone> Connected<S> {
    pub async fn guarded(
        era: Era,
        server: S,
        configure: impl FnOnce(WriteGuardBuilder<S>) -> WriteGuardBuilder<S>,
    ) -> Self {
        Self::guarded_for(era, server, ScriptedClient::new(), configure).await
    }

    /// [`Connected::guarded`] with this `scripted` client.
    pub async fn guarded_for(
        era: Era,
        server: S,
        scripted: ScriptedClient,
        configure: impl FnOnce(WriteGuardBuilder<S>) -> WriteGuardBuilder<S>,
    ) -> Self {
        let audit = MemorySink::new();
        let builder = WriteGuard::builder(server.clone())
            .writes_enabled(true)
            .audit(Arc::new(audit.clone()))
            .clock(Arc::new(ManualClock::new(start_time())));
        let guard = configure(builder).build();
        let client = connect(guard.clone(), era, scripted.clone()).await.unwrap();
        Self {
            client,
            scripted,
            server,
            audit,
            guard,
        }
    }

    pub async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        call_on(&self.client, tool, args).await.unwrap()
    }

    /// Scripts the client to approve the next question, then calls `tool` with `args`.
    pub async fn approve_and_call(&self, tool: &str, args: Value) -> CallToolResult {
        self.scripted.script([Reply::Approve]);
        self.call(tool, args).await
    }

    /// Calls `prepare_admin_action` for `tool` with `args`: a token or a refusal.
    pub async fn prepare(&self, tool: &str, args: Value) -> CallToolResult {
        prepare_on(&self.client, tool, args).await.unwrap()
    }
}

/// A connected client, the guard it talks to, and everything the test reads back.
pub struct Harness {
    pub era: Era,
    pub client: Client,
    pub scripted: ScriptedClient,
    pub fixture: Fixture,
    pub audit: MemorySink,
    pub clock: ManualClock,
    pub guard: WriteGuard<Fixture>,
}

impl Harness {
    pub async fn start(era: Era) -> Self {
        Self::with(era, Options::default()).await
    }

    pub async fn with(era: Era, options: Options) -> Self {
        Self::custom(era, options, |builder| builder).await
    }

    /// Another connection (another principal) to the same guard configuration and store.
    pub async fn second_connection(&self) -> (Client, ScriptedClient) {
        let scripted = ScriptedClient::new();
        let client = connect(self.guard.clone(), self.era, scripted.clone())
            .await
            .unwrap();
        (client, scripted)
    }

    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.scripted.script(replies);
    }

    /// Scripts the client to approve the next question after `meanwhile` has changed the inner
    /// server while the person looks at the question.
    pub fn approve_after(&self, meanwhile: impl FnOnce(&Fixture) + Send + 'static) {
        let fixture = self.fixture.clone();
        self.script([Reply::after(move || meanwhile(&fixture), Reply::Approve)]);
    }

    pub fn state(&self) -> State {
        self.fixture.snapshot()
    }

    pub fn asked(&self) -> Vec<String> {
        self.scripted.asked()
    }

    pub fn outcomes(&self) -> Vec<Outcome> {
        self.audit.outcomes()
    }

    pub async fn try_call(&self, tool: &str, args: Value) -> Result<CallToolResult, ServiceError> {
        call_on(&self.client, tool, args).await
    }

    pub async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        self.try_call(tool, args).await.unwrap()
    }

    /// Scripts the client to approve the next question, then calls `tool` with `args`.
    pub async fn approve_and_call(&self, tool: &str, args: Value) -> CallToolResult {
        self.script([Reply::Approve]);
        self.call(tool, args).await
    }

    /// Approves and calls `delete_row` on row `a` with the confirmation `token`; asserts that
    /// the call succeeded and row `a` is gone.
    pub async fn assert_token_deletes_row_a(&self, token: &str) {
        let result = self
            .approve_and_call("delete_row", delete_with_token("a", token))
            .await;
        assert_row_deleted(&result, &self.state(), "a");
    }

    /// Approves and calls `set_counter` with `{"value": 7}`; asserts that it wrote 7. Returns
    /// the result.
    pub async fn assert_set_counter_applied(&self) -> CallToolResult {
        let result = self
            .approve_and_call("set_counter", json!({"value": 7}))
            .await;
        assert_ne!(result.is_error, Some(true), "{result:?}");
        assert_eq!(self.state().counter, 7);
        result
    }

    /// Calls `set_counter` with `{"value": 7}`; while the question is open somebody else sets
    /// the counter to 3, then the client approves. Returns the result.
    pub async fn set_counter_gone_stale(&self) -> CallToolResult {
        self.approve_after(move |fixture| fixture.state.lock().counter = 3);
        self.call("set_counter", json!({"value": 7})).await
    }

    /// Scripts the client to answer the next question with `reply`, calls `set_counter` with
    /// `{"value": 7}` and asserts it was refused (see [`Harness::assert_refused`]), measured
    /// against the state before the call.
    pub async fn assert_set_counter_refused(
        &self,
        reply: Reply,
        outcome: Outcome,
        reason: Option<&str>,
    ) {
        let before = self.state();
        self.script([reply]);
        let result = self.call("set_counter", json!({"value": 7})).await;
        self.assert_refused(&result, &before, outcome, reason);
    }

    /// Scripts `reply`, prepares a token to delete row `a`, and asserts that no token was
    /// issued: [`Harness::assert_refused`] with `outcome` (and `reason`, if given), no structured
    /// content and no `TokenIssued` record. Returns the result.
    pub async fn assert_preparing_refused(
        &self,
        reply: Reply,
        outcome: Outcome,
        reason: Option<&str>,
    ) -> CallToolResult {
        let before = self.state();
        self.script([reply]);
        let result = self.prepare("delete_row", json!({"name": "a"})).await;
        self.assert_refused(&result, &before, outcome, reason);
        assert!(result.structured_content.is_none(), "no token: {result:?}");
        assert!(!self.outcomes().contains(&Outcome::TokenIssued));
        result
    }

    /// Asserts the audit trail of a write approved and then found stale at the apply: asked,
    /// approved, stale, the last record's reason "preview changed".
    pub fn assert_stale_trail(&self) {
        assert_eq!(
            self.outcomes(),
            vec![Outcome::Asked, Outcome::Approved, Outcome::Stale]
        );
        assert_eq!(
            self.audit.last().unwrap().reason.as_deref(),
            Some("preview changed")
        );
    }

    /// Calls `prepare_admin_action` for `tool` with `args`: a token or a refusal.
    pub async fn prepare(&self, tool: &str, args: Value) -> CallToolResult {
        prepare_on(&self.client, tool, args).await.unwrap()
    }

    /// Runs `prepare_admin_action` for `tool` and `args` (approving it) and returns the token.
    pub async fn prepare_token(&self, tool: &str, args: Value) -> String {
        prepare_token_on(&self.client, &self.scripted, tool, args).await
    }

    /// Asserts a refusal: `isError`, a "nothing was saved"-style message, the fixture's data as
    /// `before`, no apply, and the last audit record naming `outcome` (and `reason`, if given).
    pub fn assert_refused(
        &self,
        result: &CallToolResult,
        before: &State,
        outcome: Outcome,
        reason: Option<&str>,
    ) {
        assert_eq!(result.is_error, Some(true), "{result:?}");
        let text = text_of(result);
        assert!(
            text.contains("nothing was") || text.contains("Nothing was"),
            "refusal text says nothing was saved: {text}"
        );
        let last = assert_unchanged_and_recorded(before, &self.state(), &self.audit, outcome);
        if let Some(reason) = reason {
            assert_eq!(last.reason.as_deref(), Some(reason), "{last:?}");
        }
    }
}

/// Asserts what a refused call leaves behind: `after` (the fixture's state read after the call)
/// holds the data and the apply count of `before`, and the last of `audit`'s records, the only
/// one that names `outcome`, names it. Returns that record.
pub fn assert_unchanged_and_recorded(
    before: &State,
    after: &State,
    audit: &MemorySink,
    outcome: Outcome,
) -> mcp_write_guard_rmcp::AuditRecord {
    assert_eq!(after.data(), before.data(), "the fixture's data changed");
    assert_eq!(
        after.applies, before.applies,
        "the inner tool was asked to apply"
    );
    let last = audit.last().expect("an audit record");
    assert_eq!(last.outcome, outcome, "{:?}", audit.records());
    assert_eq!(
        audit.outcomes().iter().filter(|o| **o == outcome).count(),
        1,
        "exactly one record names the refusal: {:?}",
        audit.records()
    );
    last
}

/// One call of each kind of write, as tool and arguments: `set_counter` (previewed), `add_row`
/// (not previewed), and preparing a token for `delete_row`.
pub fn a_write_of_each_kind() -> [(&'static str, Value); 3] {
    [
        ("set_counter", json!({"value": 7})),
        ("add_row", json!({"name": "b", "value": 2})),
        (
            mcp_write_guard_rmcp::PREPARE_ADMIN_ACTION,
            json!({"tool": "delete_row", "arguments": {"name": "a"}}),
        ),
    ]
}

/// Each of `audit`'s records as its outcome and reason, in order.
pub fn outcomes_and_reasons(audit: &MemorySink) -> Vec<(Outcome, Option<String>)> {
    audit
        .records()
        .into_iter()
        .map(|r| (r.outcome, r.reason))
        .collect()
}

/// The params of a `tools/call` of `tool` with `args` (an object).
pub fn params(tool: &str, args: &Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().expect("object arguments"))
}

pub async fn call_on(
    client: &Client,
    tool: &str,
    args: Value,
) -> Result<CallToolResult, ServiceError> {
    client.call_tool(params(tool, &args)).await
}

/// Calls `prepare_admin_action` on `client` for `tool` with `args`.
pub async fn prepare_on(
    client: &Client,
    tool: &str,
    args: Value,
) -> Result<CallToolResult, ServiceError> {
    call_on(
        client,
        mcp_write_guard_rmcp::PREPARE_ADMIN_ACTION,
        json!({"tool": tool, "arguments": args}),
    )
    .await
}

pub async fn prepare_token_on(
    client: &Client,
    scripted: &ScriptedClient,
    tool: &str,
    args: Value,
) -> String {
    scripted.script([Reply::Approve]);
    let result = prepare_on(client, tool, args).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let structured = result.structured_content.expect("structured token");
    structured["confirmationToken"].as_str().unwrap().to_owned()
}

/// The audit trail of a token-gated write carried through: the intent asked, approved and its
/// token issued, then the act asked, approved and applied.
pub const TOKEN_FLOW_APPLIED: [Outcome; 6] = [
    Outcome::Asked,
    Outcome::Approved,
    Outcome::TokenIssued,
    Outcome::Asked,
    Outcome::Approved,
    Outcome::Applied,
];

/// The arguments of a `delete_row` call for row `name` that carries the confirmation `token`.
pub fn delete_with_token(name: &str, token: &str) -> Value {
    json!({"name": name, "confirmationToken": token})
}

/// Asserts that a write's `result` is not an error and that row `name` is gone from `state`
/// (the fixture's state read after the call).
pub fn assert_row_deleted(result: &CallToolResult, state: &State, name: &str) {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert!(!state.rows.contains_key(name));
}

/// Asserts that a write's `result` deleted row `name`, which existed: the inner tool's answer
/// says so, and `state` (the fixture's state read after the call) has no such row after one
/// apply in all.
pub fn assert_deleted_once(result: &CallToolResult, state: &State, name: &str) {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(unwrapped(result), json!({"deleted": name, "existed": true}));
    assert!(!state.rows.contains_key(name));
    assert_eq!(state.applies, 1);
}

/// All text content of a result, joined.
pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `data` of a wrapped structured result (panics when it is not wrapped).
pub fn unwrapped(result: &CallToolResult) -> Value {
    let structured = result
        .structured_content
        .as_ref()
        .expect("structured content");
    mcp_write_guard_envelope::unwrap(structured)
        .unwrap_or_else(|| panic!("not wrapped: {structured}"))
        .clone()
}

/// Runs a test once per protocol era, as `case_1_legacy` and `case_2_rounds`, each on its own
/// default tokio runtime: `#[apply(both_eras)]` on an `async fn name(era: Era)`. (race.rs has
/// its own template for a multi-threaded runtime.)
#[rstest_reuse::template]
#[rstest::rstest]
#[case::legacy(Era::Legacy)]
#[case::rounds(Era::InputRounds)]
#[tokio::test]
fn both_eras(#[case] era: Era) {}
