//! A client whose approval dialog holds each question until the test answers it, so that a
//! test decides when, and how, every asked write may go on (below 2026-07-28, where the guard
//! waits inside the call for the answer).

use std::{collections::BTreeMap, future::Future, sync::Arc, time::Duration};

use rmcp::{
    ClientHandler, ErrorData, RoleClient,
    model::*,
    service::{NotificationContext, RequestContext, RunningService},
};
use serde_json::{Value, json};
use tokio::sync::watch;

/// How long any awaited event may take before the test fails instead of hanging.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Awaits `future`, failing the test after [`PATIENCE`] (`what` names what it waited for).
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// What the person answers a held question with.
#[derive(Debug, Clone, Copy)]
pub enum Say {
    /// `accept` with `{"approve": true}`.
    Approve,
    Decline,
    /// The form goes away without an answer (the client's dialog failed).
    Fail,
}

/// The answers the test gave so far.
#[derive(Debug, Default)]
struct Answers {
    /// Every question, held or still to come, is approved.
    all: bool,
    /// The answer to the question of each index (from 0, in arrival order).
    each: BTreeMap<usize, Say>,
}

impl Answers {
    fn to(&self, index: usize) -> Option<Say> {
        match self.each.get(&index) {
            Some(say) => Some(*say),
            None => self.all.then_some(Say::Approve),
        }
    }
}

/// A client with form elicitation that records every question in the order it arrives and
/// holds it until the test answers it, by that order; it also records every
/// `notifications/progress` it receives.
#[derive(Clone)]
pub struct GatedClient {
    asked: Arc<watch::Sender<Vec<String>>>,
    answers: Arc<watch::Sender<Answers>>,
    progress: Arc<watch::Sender<Vec<ProgressNotificationParam>>>,
}

impl Default for GatedClient {
    fn default() -> Self {
        Self {
            asked: Arc::new(watch::Sender::new(Vec::new())),
            answers: Arc::new(watch::Sender::new(Answers::default())),
            progress: Arc::new(watch::Sender::new(Vec::new())),
        }
    }
}

impl GatedClient {
    /// Every question asked so far, in the order they arrived.
    pub fn asked(&self) -> Vec<String> {
        self.asked.borrow().clone()
    }

    /// Waits until at least `n` questions have arrived (each is then held).
    pub async fn wait_asked(&self, n: usize) -> Vec<String> {
        let mut asked = self.asked.subscribe();
        let seen = within(
            "the question to reach the client",
            asked.wait_for(|questions| questions.len() >= n),
        )
        .await
        .unwrap();
        seen.clone()
    }

    /// The person answers the `index`-th question (from 0, in arrival order) with `say`.
    pub fn answer(&self, index: usize, say: Say) {
        self.answers.send_modify(|answers| {
            answers.each.insert(index, say);
        });
    }

    /// The person approves the `index`-th question (from 0, in arrival order).
    pub fn release(&self, index: usize) {
        self.answer(index, Say::Approve);
    }

    /// The person approves every question, held or still to come, all at once.
    pub fn release_all(&self) {
        self.answers.send_modify(|answers| answers.all = true);
    }

    /// Every progress notification received so far.
    pub fn progress(&self) -> Vec<ProgressNotificationParam> {
        self.progress.borrow().clone()
    }

    /// Waits until at least `n` progress notifications for `token` arrived.
    pub async fn wait_progress(&self, token: &ProgressToken, n: usize) {
        let mut progress = self.progress.subscribe();
        within(
            "progress notifications",
            progress.wait_for(|all| all.iter().filter(|p| p.progress_token == *token).count() >= n),
        )
        .await
        .unwrap();
    }
}

impl ClientHandler for GatedClient {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let index = record_form_question(&self.asked, request);
        let mut answers = self.answers.subscribe();
        let say = answers
            .wait_for(|answers| answers.to(index).is_some())
            .await
            .unwrap()
            .to(index)
            .unwrap();
        Ok(match say {
            Say::Approve => {
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true}))
            }
            Say::Decline => ElicitResult::new(ElicitationAction::Decline),
            Say::Fail => return Err(ErrorData::internal_error("the dialog was closed", None)),
        })
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.send_modify(|all| all.push(params));
    }

    fn get_info(&self) -> ClientConfig {
        form_client_info("gated-client")
    }
}

/// Records the message of a form question at the end of `asked` and returns its index (from
/// 0, in arrival order). The guard asks these test clients with forms only: any other kind of
/// question panics.
fn record_form_question(asked: &watch::Sender<Vec<String>>, request: ElicitRequestParams) -> usize {
    let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
        panic!("the guard asks this client with forms only");
    };
    let mut index = 0;
    asked.send_modify(|questions| {
        index = questions.len();
        questions.push(message);
    });
    index
}

/// The info of a test client named `name` that declares form elicitation only.
fn form_client_info(name: &str) -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::builder()
            .enable_elicitation_with(
                ElicitationCapability::new().with_form(FormElicitationCapability::new()),
            )
            .build(),
        Implementation::new(name, "0.1.0"),
    )
}

/// A connection of a [`GatedClient`].
pub type GatedConnection = RunningService<RoleClient, GatedClient>;

/// The before/after values a default prompt showed, as `{"before": …, "after": …}`: its one
/// change row `  (value): <before> -> <after>` (the row must appear exactly once and hold one
/// JSON value on each side).
pub fn shown_change(prompt: &str) -> Value {
    let rows: Vec<(Value, Value)> = prompt
        .lines()
        .filter_map(|line| line.strip_prefix("  (value): "))
        .map(|row| {
            let (before, after) = row.split_once(" -> ").unwrap();
            (
                serde_json::from_str(before).unwrap(),
                serde_json::from_str(after).unwrap(),
            )
        })
        .collect();
    assert_eq!(rows.len(), 1, "one change row in {prompt}");
    let (before, after) = rows.into_iter().next().unwrap();
    json!({"before": before, "after": after})
}
