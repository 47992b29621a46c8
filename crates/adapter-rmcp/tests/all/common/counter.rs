//! A one-counter server for races, and a harness that talks to it through a guard with a
//! [`GatedClient`], in either protocol era.
//!
//! Tools (every write opted in to previews; each preview is `{"before": c, "after": c'}`):
//! - `get_counter` (read)
//! - `add_to_counter {delta}`: a correct compare-and-apply;
//! - `careless_set {value}`: forgets the compare: applies without calling `check`;
//! - `stubborn_set {value}`: calls `check`, ignores its verdict and returns success (and
//!   commits anyway while [`Tally::stubborn_commits`] is set, else rolls back);
//! - `heedless_add {delta}`: forgets to look at the step: writes on a preview as on an apply,
//!   and applies without calling `check`.

use std::sync::Arc;

use mcp_write_guard_core::ManualClock;
use mcp_write_guard_rmcp::{INPUT_KEY, MemorySink, WriteGuard, WriteStep, write_step};
use parking_lot::Mutex;
use rmcp::{
    ErrorData, Peer, RoleClient, ServerHandler,
    model::*,
    service::{RequestContext, RoleServer},
};
use serde_json::{Value, json};

use super::{
    Client, Era, ScriptedClient,
    fixture::{closed_write, object},
    gated::{GatedClient, GatedConnection},
    params, start_time,
};

/// One change the server committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub tool: String,
    pub before: i64,
    pub after: i64,
}

impl Committed {
    /// As a preview shows it.
    pub fn change(&self) -> Value {
        json!({"before": self.before, "after": self.after})
    }
}

/// Everything the counter server holds.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Tally {
    pub counter: i64,
    /// Every committed change, in commit order.
    pub committed: Vec<Committed>,
    /// Calls to a write tool that were previews.
    pub previews: usize,
    /// Calls to a write tool that were not previews (attempts to apply).
    pub applies: usize,
    /// `stubborn_set` commits although its check said stale.
    pub stubborn_commits: bool,
}

#[derive(Clone, Default)]
pub struct Counter {
    pub tally: Arc<Mutex<Tally>>,
}

/// The tools that opted in to previews.
pub const PREVIEWED: [&str; 4] = [
    "add_to_counter",
    "careless_set",
    "stubborn_set",
    "heedless_add",
];

fn integer_arg(tool: &str, description: &str, arg: &str) -> Tool {
    Tool::new(
        tool.to_owned(),
        description.to_owned(),
        object(json!({
            "type": "object",
            "properties": {arg: {"type": "integer"}},
            "required": [arg]
        })),
    )
    .with_annotations(closed_write(false))
}

fn counter_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "get_counter",
            "Read the counter.",
            object(json!({"type": "object", "properties": {}})),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        integer_arg("add_to_counter", "Add delta to the counter.", "delta"),
        integer_arg(
            "careless_set",
            "Set the counter (forgets the compare).",
            "value",
        ),
        integer_arg(
            "stubborn_set",
            "Set the counter (ignores the compare).",
            "value",
        ),
        integer_arg(
            "heedless_add",
            "Add delta to the counter (writes on previews too).",
            "delta",
        ),
    ]
}

fn error_result(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

impl Counter {
    pub fn snapshot(&self) -> Tally {
        self.tally.lock().clone()
    }

    /// Sets the counter as another program would, behind the guard's back.
    pub fn set_behind_the_guard(&self, value: i64) {
        self.tally.lock().counter = value;
    }

    fn call(&self, request: &CallToolRequestParams, step: &WriteStep) -> CallToolResult {
        let empty = JsonObject::new();
        let args = request.arguments.as_ref().unwrap_or(&empty);
        let tool = request.name.as_ref();
        // The mutex is the transaction: everything below reads, compares and commits under it.
        let mut tally = self.tally.lock();
        if tool == "get_counter" {
            return CallToolResult::structured(json!({"counter": tally.counter}));
        }
        let arg = |name: &str| args.get(name).and_then(Value::as_i64);
        let before = tally.counter;
        let after = match tool {
            "add_to_counter" | "heedless_add" => {
                arg("delta").and_then(|delta| before.checked_add(delta))
            }
            "careless_set" | "stubborn_set" => arg("value"),
            other => return error_result(format!("no tool {other}")),
        };
        let Some(after) = after else {
            return error_result("the argument must be an integer and the sum must fit");
        };
        let change = json!({"before": before, "after": after});
        match step {
            WriteStep::Preview => {
                tally.previews += 1;
                // Forgot to look at the step: the preview writes as an apply would.
                if tool != "heedless_add" {
                    return CallToolResult::structured(change);
                }
            }
            WriteStep::Apply(approved) => {
                tally.applies += 1;
                match tool {
                    // Forgot the compare: commits whatever it finds.
                    "careless_set" | "heedless_add" => {}
                    // Compares, then ignores the verdict: success either way, and a commit
                    // only while told to.
                    "stubborn_set" => {
                        if approved.check(&change).is_err() && !tally.stubborn_commits {
                            return CallToolResult::structured(change);
                        }
                    }
                    _ => {
                        if let Err(stale) = approved.check(&change) {
                            return error_result(stale.to_string());
                        }
                    }
                }
            }
            WriteStep::Direct => tally.applies += 1,
        }
        tally.counter = after;
        tally.committed.push(Committed {
            tool: tool.to_owned(),
            before,
            after,
        });
        CallToolResult::structured(change)
    }
}

impl ServerHandler for Counter {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("counter", "0.1.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(counter_tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        counter_tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self.call(&request, &write_step(&context)).into())
    }
}

/// A [`GatedClient`] connected to a guard around a [`Counter`].
pub struct CounterHarness {
    pub era: Era,
    pub client: GatedConnection,
    pub gated: GatedClient,
    pub counter: Counter,
    pub audit: MemorySink,
    pub clock: ManualClock,
    pub guard: WriteGuard<Counter>,
}

/// What the first round of a 2026-07-28 write handed out.
#[derive(Debug, Clone)]
pub struct Asked {
    /// The question the person reads.
    pub prompt: String,
    /// The `requestState` the retry carries back.
    pub state: String,
}

impl CounterHarness {
    pub async fn start(era: Era, initial: i64) -> Self {
        let counter = Counter::default();
        counter.set_behind_the_guard(initial);
        let audit = MemorySink::new();
        let clock = ManualClock::new(start_time());
        let mut builder = WriteGuard::builder(counter.clone())
            .writes_enabled(true)
            .audit(Arc::new(audit.clone()))
            .clock(Arc::new(clock.clone()));
        for tool in PREVIEWED {
            builder = builder.preview(tool);
        }
        let guard = builder.build();
        let gated = GatedClient::default();
        let client = super::connect(guard.clone(), era, gated.clone())
            .await
            .unwrap();
        Self {
            era,
            client,
            gated,
            counter,
            audit,
            clock,
            guard,
        }
    }

    pub fn tally(&self) -> Tally {
        self.counter.snapshot()
    }

    /// Another connection (another principal) to the same guard, whose client answers from a
    /// script.
    pub async fn second_connection(&self) -> (Client, ScriptedClient) {
        let scripted = ScriptedClient::new();
        let client = super::connect(self.guard.clone(), self.era, scripted.clone())
            .await
            .unwrap();
        (client, scripted)
    }

    /// Below 2026-07-28: starts a write whose question the [`GatedClient`] will hold; the task
    /// ends with the call's result once the question is released.
    pub fn spawn_call(&self, tool: &str, args: Value) -> tokio::task::JoinHandle<CallToolResult> {
        assert_eq!(self.era, Era::Legacy);
        let peer = self.client.peer().clone();
        let params = params(tool, &args);
        tokio::spawn(async move { peer.call_tool(params).await.unwrap() })
    }

    /// One approved write in either era, with `between` run after the person was asked and
    /// before the answer reaches the guard. Returns the question and the final result.
    pub async fn write_with(
        &self,
        tool: &str,
        args: &Value,
        between: impl Future<Output = ()>,
    ) -> (String, CallToolResult) {
        match self.era {
            Era::Legacy => {
                let index = self.gated.asked().len();
                let call = self.spawn_call(tool, args.clone());
                let prompt = self.gated.wait_asked(index + 1).await.swap_remove(index);
                between.await;
                self.gated.release(index);
                (prompt, call.await.unwrap())
            }
            Era::InputRounds => {
                let asked = self.ask(tool, args).await;
                between.await;
                let result = self.approve(tool, args, &asked).await;
                (asked.prompt, result)
            }
            other => unreachable!("no test written for {other:?}"),
        }
    }

    /// At 2026-07-28: the first round of a write, which asks and returns at once.
    pub async fn ask(&self, tool: &str, args: &Value) -> Asked {
        assert_eq!(self.era, Era::InputRounds);
        first_round(&self.client.peer().clone(), tool, args).await
    }

    /// At 2026-07-28: the retry that approves an asked write.
    pub async fn approve(&self, tool: &str, args: &Value, asked: &Asked) -> CallToolResult {
        approve_round(&self.client.peer().clone(), tool, args, &asked.state).await
    }
}

/// The first round of a 2026-07-28 write on `peer`.
pub async fn first_round(peer: &Peer<RoleClient>, tool: &str, args: &Value) -> Asked {
    let response = peer.call_tool_once(params(tool, args)).await.unwrap();
    let CallToolResponse::InputRequired(input) = response else {
        panic!("expected an input round, got {response:?}");
    };
    let requests = input.input_requests.unwrap();
    let Some(InputRequest::Elicitation(request)) = requests.get(INPUT_KEY) else {
        panic!("no approval question in {requests:?}");
    };
    let ElicitRequestParams::FormElicitationParams { message, .. } = &request.params else {
        panic!("the guard asks with forms only");
    };
    Asked {
        prompt: message.clone(),
        state: input.request_state.unwrap(),
    }
}

/// The retry of a 2026-07-28 write on `peer`, approving it.
pub async fn approve_round(
    peer: &Peer<RoleClient>,
    tool: &str,
    args: &Value,
    state: &str,
) -> CallToolResult {
    let mut responses = InputResponses::new();
    responses.insert(
        INPUT_KEY.to_owned(),
        json!({"action": "accept", "content": {"approve": true}}),
    );
    let mut retry = params(tool, args);
    retry.request_state = Some(state.to_owned());
    retry.input_responses = Some(responses);
    match peer.call_tool_once(retry).await.unwrap() {
        CallToolResponse::Complete(result) => result,
        other => panic!("expected a final result, got {other:?}"),
    }
}
