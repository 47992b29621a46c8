//! A client that plays the user: it answers the server's approval questions from a script and
//! remembers every question it was asked.

use std::{collections::VecDeque, future::Future, pin::Pin, sync::Arc, time::Duration};

use mcp_write_guard_core::ManualClock;
use parking_lot::Mutex;
use rmcp::{
    ClientHandler, ErrorData,
    model::{
        ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
        Implementation,
    },
    service::{RequestContext, RoleClient},
};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::Failure;

/// Something the scripted user does while the server waits for an answer (before answering).
pub type SideEffect = Box<dyn FnOnce() + Send>;

/// One scripted answer to one approval question.
#[non_exhaustive]
pub enum Answer {
    /// `accept` with `{"approve": true}`.
    Approve,
    /// `accept` with `{"approve": false}`.
    ApproveFalse,
    /// `accept` with `{}`.
    ApproveMissing,
    /// `accept` with `{"approve": "yes"}`.
    ApproveNotBoolean,
    /// `accept` with no content at all.
    AcceptWithoutContent,
    /// `decline`.
    Decline,
    /// `cancel`.
    Cancel,
    /// The client fails to ask (a JSON-RPC error instead of an answer).
    Fail,
    /// Any answer: this action, with this content (if any).
    Raw {
        /// `accept`, `decline` or `cancel`.
        action: ElicitationAction,
        /// The form content sent with it.
        content: Option<Value>,
    },
    /// Let the fake clock run on by `by` while the user thinks, then answer.
    Late {
        /// The guard's clock.
        clock: ManualClock,
        /// How long the user takes.
        by: time::Duration,
        /// The answer given afterwards.
        then: Box<Answer>,
    },
    /// Do something (change the database behind the server's back, for example), then answer.
    After {
        /// What happens while the question is open.
        effect: SideEffect,
        /// The answer given afterwards.
        then: Box<Answer>,
    },
    /// Wait at `gate` until the test opens it, then answer: the question stays open (and
    /// shown) meanwhile.
    Held {
        /// The gate the answer waits at.
        gate: Gate,
        /// The answer given once the gate opens.
        then: Box<Answer>,
    },
}

impl Answer {
    /// [`Answer::Late`].
    pub fn late(clock: &ManualClock, by: time::Duration, then: Answer) -> Self {
        Self::Late {
            clock: clock.clone(),
            by,
            then: Box::new(then),
        }
    }

    /// [`Answer::After`].
    pub fn after(effect: impl FnOnce() + Send + 'static, then: Answer) -> Self {
        Self::After {
            effect: Box::new(effect),
            then: Box::new(then),
        }
    }

    /// [`Answer::Held`].
    pub fn held(gate: &Gate, then: Answer) -> Self {
        Self::Held {
            gate: gate.clone(),
            then: Box::new(then),
        }
    }
}

/// Holds answers back until the test opens it, and counts the questions waiting at it, so a
/// test can let every question be asked (and shown) before any of them is answered, or change
/// the data while a question is open. Clones share the gate.
#[derive(Clone)]
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

    /// Waits until at least `n` questions have arrived at the gate; an error after `within`.
    pub async fn wait_for_questions(&self, n: usize, within: Duration) -> Result<(), Failure> {
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

/// One question the user was asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// The message shown to the user.
    pub message: String,
    /// The form the user was asked to fill in (JSON schema).
    pub schema: Value,
}

#[derive(Default)]
struct State {
    answers: Mutex<VecDeque<Answer>>,
    asked: Mutex<Vec<Asked>>,
    /// When the last question arrived (the `approved-writes` bench splits a write's time there).
    last_asked_at: Mutex<Option<std::time::Instant>>,
}

/// The scripted user. Clones share the script and the record of questions.
///
/// A question with no scripted answer left is declined (so a test that forgot to script an
/// answer fails closed and shows up in [`ScriptedUser::asked`]).
#[derive(Clone)]
pub struct ScriptedUser {
    state: Arc<State>,
    elicitation: bool,
}

impl ScriptedUser {
    /// A user whose client supports form elicitation, answering with `answers` in order.
    pub fn answering(answers: impl IntoIterator<Item = Answer>) -> Self {
        let user = Self {
            state: Arc::default(),
            elicitation: true,
        };
        user.script(answers);
        user
    }

    /// A client that cannot ask its user at all (no elicitation capability).
    pub fn without_elicitation() -> Self {
        Self {
            state: Arc::default(),
            elicitation: false,
        }
    }

    /// Appends answers to the script.
    pub fn script(&self, answers: impl IntoIterator<Item = Answer>) {
        self.state.answers.lock().extend(answers);
    }

    /// Every question asked so far, in order.
    pub fn asked(&self) -> Vec<Asked> {
        self.state.asked.lock().clone()
    }

    /// The messages of every question asked so far, in order.
    pub fn messages(&self) -> Vec<String> {
        self.asked().into_iter().map(|a| a.message).collect()
    }

    /// When the last question arrived, if one has.
    pub fn last_asked_at(&self) -> Option<std::time::Instant> {
        *self.state.last_asked_at.lock()
    }

    /// How many scripted answers are still unused.
    pub fn unused_answers(&self) -> usize {
        self.state.answers.lock().len()
    }
}

/// The answer, once given (an answer that waits is a boxed future: it may wait for another).
type Response = Pin<Box<dyn Future<Output = Result<ElicitResult, ErrorData>> + Send>>;

fn respond(answer: Answer) -> Response {
    Box::pin(async move {
        let accept =
            |content: Value| Ok(ElicitResult::new(ElicitationAction::Accept).with_content(content));
        match answer {
            Answer::Approve => accept(json!({"approve": true})),
            Answer::ApproveFalse => accept(json!({"approve": false})),
            Answer::ApproveMissing => accept(json!({})),
            Answer::ApproveNotBoolean => accept(json!({"approve": "yes"})),
            Answer::AcceptWithoutContent => Ok(ElicitResult::new(ElicitationAction::Accept)),
            Answer::Decline => Ok(ElicitResult::new(ElicitationAction::Decline)),
            Answer::Cancel => Ok(ElicitResult::new(ElicitationAction::Cancel)),
            Answer::Fail => Err(ErrorData::internal_error(
                "the client could not show the form",
                None,
            )),
            Answer::Raw { action, content } => {
                let result = ElicitResult::new(action);
                Ok(match content {
                    Some(content) => result.with_content(content),
                    None => result,
                })
            }
            Answer::Late { clock, by, then } => {
                clock.advance(by);
                respond(*then).await
            }
            Answer::After { effect, then } => {
                effect();
                respond(*then).await
            }
            Answer::Held { gate, then } => {
                gate.pass().await;
                respond(*then).await
            }
        }
    })
}

impl ClientHandler for ScriptedUser {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let asked = match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => Asked {
                message,
                schema: serde_json::to_value(requested_schema).unwrap_or(Value::Null),
            },
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => Asked {
                message,
                schema: json!({"url": url}),
            },
            _ => Asked {
                message: String::new(),
                schema: Value::Null,
            },
        };
        *self.state.last_asked_at.lock() = Some(std::time::Instant::now());
        self.state.asked.lock().push(asked);
        let next = self.state.answers.lock().pop_front();
        respond(next.unwrap_or(Answer::Decline)).await
    }

    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.elicitation {
            ClientCapabilities::builder().enable_elicitation().build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(capabilities, Implementation::new("scripted-user", "0.1.0"))
    }
}
