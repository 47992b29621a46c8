//! Shared test support: the fixture servers, a scripted elicitation client, and a harness that
//! connects them through a guard over an in-memory duplex, in either protocol era.
//!
//! Each test binary uses a different subset of these helpers.
#![allow(dead_code, unreachable_pub)]

pub mod counter;
pub mod custom;
pub mod fixture;
pub mod gated;
pub mod notes;
pub mod paged;

use std::{collections::VecDeque, sync::Arc};

use adapter_rmcp::{MemorySink, Outcome, WriteGuard};
use approval_core::ManualClock;
use parking_lot::Mutex;
use rmcp::{
    ClientHandler, ErrorData, RoleClient, ServerHandler, ServiceExt,
    model::*,
    service::{
        ClientLifecycleMode, ClientServiceExt, RequestContext, RunningService, ServiceError,
    },
};
use serde_json::{Value, json};
use time::OffsetDateTime;

pub use fixture::{Fixture, State};

/// Which protocol era the client negotiates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize`: the server asks with `elicitation/create`.
    Legacy,
    /// `server/discover` at 2026-07-28: the server asks with `InputRequiredResult`.
    Rounds,
}

pub const ERAS: [Era; 2] = [Era::Legacy, Era::Rounds];

/// One scripted answer to an approval question.
pub enum Reply {
    Approve,
    Decline,
    Cancel,
    /// `accept` with this content.
    Accept(Value),
    /// Any action, with any content.
    Raw(ElicitationAction, Option<Value>),
    /// The client's handler fails.
    Fail,
    /// Run a side effect (advance the clock, change the fixture), then answer.
    After(Box<dyn FnOnce() + Send>, Box<Reply>),
}

impl Reply {
    pub fn after(effect: impl FnOnce() + Send + 'static, then: Reply) -> Self {
        Self::After(Box::new(effect), Box::new(then))
    }

    fn answer(self) -> Result<ElicitResult, ErrorData> {
        match self {
            Self::Approve => {
                Ok(ElicitResult::new(ElicitationAction::Accept)
                    .with_content(json!({"approve": true})))
            }
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
                then.answer()
            }
        }
    }
}

#[derive(Default)]
struct ClientState {
    script: Mutex<VecDeque<Reply>>,
    asked: Mutex<Vec<String>>,
}

/// A client whose elicitation handler answers from a script and records every question.
#[derive(Clone)]
pub struct ScriptedClient {
    state: Arc<ClientState>,
    elicitation: bool,
}

impl ScriptedClient {
    pub fn new(elicitation: bool) -> Self {
        Self {
            state: Arc::default(),
            elicitation,
        }
    }

    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.script.lock().extend(replies);
    }

    /// Every question asked so far.
    pub fn asked(&self) -> Vec<String> {
        self.state.asked.lock().clone()
    }
}

impl ClientHandler for ScriptedClient {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let (message, schema) = match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => (message, requested_schema),
            _ => panic!("the guard asks with forms only"),
        };
        // The form asks for exactly one required boolean, `approve`.
        let schema = serde_json::to_value(&schema).unwrap();
        assert_eq!(schema["required"], json!(["approve"]), "{schema}");
        assert_eq!(
            schema["properties"]["approve"]["type"], "boolean",
            "{schema}"
        );
        self.state.asked.lock().push(message);
        let reply = self.state.script.lock().pop_front();
        match reply {
            Some(reply) => reply.answer(),
            None => Err(ErrorData::internal_error("no scripted answer", None)),
        }
    }

    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.elicitation {
            ClientCapabilities::builder()
                .enable_elicitation_with(
                    ElicitationCapability::new().with_form(FormElicitationCapability::new()),
                )
                .build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(
            capabilities,
            Implementation::new("scripted-client", "0.1.0"),
        )
    }
}

pub type Client = RunningService<RoleClient, ScriptedClient>;

/// Connects a client to `server` over an in-memory duplex, in `era`.
pub async fn connect<S: ServerHandler>(server: S, era: Era, client: ScriptedClient) -> Client {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    match era {
        Era::Legacy => client.serve(client_io).await.unwrap(),
        Era::Rounds => client
            .serve_with_lifecycle(
                client_io,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .unwrap(),
    }
}

/// How to build the guard for a test.
#[derive(Debug, Clone)]
pub struct Options {
    pub writes: bool,
    pub elicitation: bool,
    pub danger: bool,
    pub text_prefix: bool,
    pub trust_list_rows: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            writes: true,
            elicitation: true,
            danger: false,
            text_prefix: true,
            trust_list_rows: false,
        }
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
        let fixture = Fixture::default();
        let audit = MemorySink::new();
        let clock = ManualClock::new(start_time());
        let guard = guard(fixture.clone(), &audit, &clock, &options);
        let scripted = ScriptedClient::new(options.elicitation);
        let client = connect(guard.clone(), era, scripted.clone()).await;
        Self {
            era,
            client,
            scripted,
            fixture,
            audit,
            clock,
            guard,
        }
    }

    /// Another connection (another principal) to the same guard configuration and store.
    pub async fn second_connection(&self) -> (Client, ScriptedClient) {
        let scripted = ScriptedClient::new(true);
        let client = connect(self.guard.clone(), self.era, scripted.clone()).await;
        (client, scripted)
    }

    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.scripted.script(replies);
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
        let after = self.state();
        assert_eq!(after.data(), before.data(), "the fixture's data changed");
        assert_eq!(
            after.applies, before.applies,
            "the inner tool was asked to apply"
        );
        let last = self.audit.last().expect("an audit record");
        assert_eq!(last.outcome, outcome, "{:?}", self.audit.records());
        assert_eq!(
            self.outcomes().iter().filter(|o| **o == outcome).count(),
            1,
            "exactly one record names the refusal: {:?}",
            self.outcomes()
        );
        if let Some(reason) = reason {
            assert_eq!(last.reason.as_deref(), Some(reason), "{last:?}");
        }
    }
}

pub async fn call_on(
    client: &Client,
    tool: &str,
    args: Value,
) -> Result<CallToolResult, ServiceError> {
    let params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().expect("object arguments"));
    client.call_tool(params).await
}

pub async fn prepare_token_on(
    client: &Client,
    scripted: &ScriptedClient,
    tool: &str,
    args: Value,
) -> String {
    scripted.script([Reply::Approve]);
    let result = call_on(
        client,
        adapter_rmcp::PREPARE_ADMIN_ACTION,
        json!({"tool": tool, "arguments": args}),
    )
    .await
    .unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let structured = result.structured_content.expect("structured token");
    structured["confirmationToken"].as_str().unwrap().to_owned()
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
    envelope::unwrap(structured)
        .unwrap_or_else(|| panic!("not wrapped: {structured}"))
        .clone()
}

/// Declares one test per protocol era from an `async fn(Era)`.
#[macro_export]
macro_rules! both_eras {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test]
                async fn legacy() {
                    super::$name($crate::common::Era::Legacy).await;
                }
                #[tokio::test]
                async fn rounds() {
                    super::$name($crate::common::Era::Rounds).await;
                }
            }
        )*
    };
}
