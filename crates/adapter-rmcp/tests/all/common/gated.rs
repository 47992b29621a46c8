//! A client whose approval dialog holds each answer until the test releases it, so that a test
//! decides when every asked write may go on (below 2026-07-28, where the guard waits inside the
//! call for the answer).

use std::{collections::BTreeSet, sync::Arc};

use rmcp::{
    ClientHandler, ErrorData, RoleClient,
    model::*,
    service::{RequestContext, RunningService},
};
use serde_json::{Value, json};
use tokio::sync::watch;

/// Which held questions may be answered.
#[derive(Debug, Default)]
struct Released {
    all: bool,
    each: BTreeSet<usize>,
}

impl Released {
    fn lets(&self, index: usize) -> bool {
        self.all || self.each.contains(&index)
    }
}

/// A client with form elicitation that records every question in the order it arrives and
/// approves it (`accept`, `approve: true`) once the test released it, by that order.
#[derive(Clone)]
pub struct GatedClient {
    asked: Arc<watch::Sender<Vec<String>>>,
    released: Arc<watch::Sender<Released>>,
}

impl Default for GatedClient {
    fn default() -> Self {
        Self {
            asked: Arc::new(watch::Sender::new(Vec::new())),
            released: Arc::new(watch::Sender::new(Released::default())),
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
        let seen = asked
            .wait_for(|questions| questions.len() >= n)
            .await
            .unwrap();
        seen.clone()
    }

    /// Lets the `index`-th question (from 0, in arrival order) be answered.
    pub fn release(&self, index: usize) {
        self.released.send_modify(|released| {
            released.each.insert(index);
        });
    }

    /// Lets every question, held or still to come, be answered, all at once.
    pub fn release_all(&self) {
        self.released.send_modify(|released| released.all = true);
    }
}

impl ClientHandler for GatedClient {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let index = record_form_question(&self.asked, request);
        let mut released = self.released.subscribe();
        released
            .wait_for(|released| released.lets(index))
            .await
            .unwrap();
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true})))
    }

    fn get_info(&self) -> ClientConfig {
        form_client_info("gated-client")
    }
}

/// Records the message of a form question at the end of `asked` and returns its index (from
/// 0, in arrival order). The guard asks these test clients with forms only: any other kind of
/// question panics.
pub fn record_form_question(
    asked: &watch::Sender<Vec<String>>,
    request: ElicitRequestParams,
) -> usize {
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
pub fn form_client_info(name: &str) -> ClientConfig {
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
