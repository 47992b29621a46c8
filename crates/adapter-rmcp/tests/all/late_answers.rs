//! A question outlives the call that asked it (`write_path/settle.rs`): it lives in the store
//! for its clock, bound to the principal, the tool and the exact arguments, so a later call of
//! the same change finds it instead of asking again.
//!
//! - below 2026-07-28, an answer given after the client cancelled its call is recorded
//!   (`answered`) and applied, once, by the next call of the same change, without a question;
//!   so is one given to the same question put again by a later call whose client cancelled too;
//! - a retry while the first call still waits shares its question: one applies, the other is
//!   `already-used`;
//! - from 2026-07-28, a call of the same change without `requestState` gets the same question
//!   again (same approval id); any of its states applies it once, and ten approving retries at
//!   once apply it once;
//! - other arguments, or another principal, are another question;
//! - a waiting call sends `notifications/progress` when its request carried a `progressToken`.
//!
//! Every test reads back the fixture's state and the audit records.

use std::{collections::HashSet, future::Future, sync::Arc, time::Duration};

use mcp_write_guard_core::{ApprovalId, ManualClock};
use mcp_write_guard_rmcp::{AuditRecord, INPUT_KEY, MemorySink, Outcome, WriteGuard};
use rmcp::{
    RoleClient, ServiceExt,
    model::*,
    service::{PeerRequestOptions, RequestHandle, RxJsonRpcMessage, TxJsonRpcMessage},
    transport::{Transport, async_rw::AsyncRwTransport},
};
use rstest_reuse::apply;
use serde_json::{Value, json};
use tokio::sync::Barrier;

use crate::common::{
    Era, Options, both_eras, connect,
    counter::{approve_round, first_round},
    custom::{NotifyingSink, guard_builder},
    fixture::{Fixture, State},
    gated::{GatedClient, GatedConnection as Connection, Say, within},
    params, start_time, text_of,
};

/// Calls `set_counter` with `args` on `client`'s connection, on a task of its own: the call
/// waits for the answer the test gives.
fn spawn_set_counter(
    client: &Connection,
    args: &Value,
) -> tokio::task::JoinHandle<Result<CallToolResult, rmcp::ServiceError>> {
    let peer = client.peer().clone();
    let request = params("set_counter", args);
    tokio::spawn(async move { peer.call_tool(request).await })
}

/// Calls `set_counter` with `args` on `client`'s connection and returns its result (`what`
/// names the call if it takes too long).
async fn call_set_counter(client: &Connection, args: &Value, what: &str) -> CallToolResult {
    within(what, client.call_tool(params("set_counter", args)))
        .await
        .unwrap()
}

/// Legacy era: calls `set_counter` with `args` (see [`spawn_set_counter`]), waits until `dialog`
/// has been asked `asked` questions, answers the last of them with `say`, and returns the call's
/// result (`what` names the call if it takes too long).
async fn answered_call(
    client: &Connection,
    dialog: &GatedClient,
    args: &Value,
    asked: usize,
    say: Say,
    what: &str,
) -> CallToolResult {
    let call = spawn_set_counter(client, args);
    dialog.wait_asked(asked).await;
    dialog.answer(asked - 1, say);
    within(what, call).await.unwrap().unwrap()
}

/// A guard around the fixture (`set_counter` previewed) whose audit sink says when a record
/// arrives.
struct Guarded {
    fixture: Fixture,
    audit: MemorySink,
    sink: NotifyingSink,
    guard: WriteGuard<Fixture>,
}

impl Guarded {
    fn new(progress_every: Option<Duration>) -> Self {
        let fixture = Fixture::default();
        let audit = MemorySink::new();
        let sink = NotifyingSink::new(audit.clone());
        let clock = ManualClock::new(start_time());
        let mut builder = guard_builder(fixture.clone(), &audit, &clock, &Options::default())
            .audit(Arc::new(sink.clone()));
        if let Some(every) = progress_every {
            builder = builder.progress_every(every);
        }
        Self {
            fixture,
            audit,
            sink,
            guard: builder.build(),
        }
    }

    /// A new connection (a new principal) with its own dialog.
    async fn connect(&self, era: Era) -> (Connection, GatedClient) {
        let dialog = GatedClient::default();
        let client = connect(self.guard.clone(), era, dialog.clone())
            .await
            .unwrap();
        (client, dialog)
    }

    fn records(&self) -> Vec<AuditRecord> {
        self.audit.records()
    }

    fn outcomes(&self) -> Vec<Outcome> {
        self.audit.outcomes()
    }

    fn with(&self, outcome: Outcome) -> Vec<AuditRecord> {
        self.records()
            .into_iter()
            .filter(|r| r.outcome == outcome)
            .collect()
    }

    fn count(&self, outcome: Outcome) -> usize {
        self.with(outcome).len()
    }

    /// The one record of `outcome` (panics unless there is exactly one).
    fn one(&self, outcome: Outcome) -> AuditRecord {
        let found = self.with(outcome);
        assert_eq!(found.len(), 1, "one {outcome:?} in {:?}", self.outcomes());
        found.into_iter().next().unwrap()
    }

    /// The audit in short: outcome, reason and approval id of every record.
    fn story(&self) -> Vec<(Outcome, Option<String>, Option<ApprovalId>)> {
        self.records()
            .into_iter()
            .map(|r| (r.outcome, r.reason, r.approval_id))
            .collect()
    }

    /// Every approval id the audit names.
    fn approval_ids(&self) -> HashSet<ApprovalId> {
        self.records()
            .iter()
            .filter_map(|r| r.approval_id)
            .collect()
    }

    /// Waits until the audit holds at least `n` records of `outcome`.
    async fn until(&self, outcome: Outcome, n: usize) {
        within(&format!("{n} {outcome:?} record(s)"), async {
            loop {
                let records = self.records();
                if records.iter().filter(|r| r.outcome == outcome).count() >= n {
                    return;
                }
                self.sink.wait_for(records.len() + 1).await;
            }
        })
        .await;
    }

    fn counter(&self) -> i64 {
        self.fixture.snapshot().counter
    }

    fn applies(&self) -> usize {
        self.fixture.snapshot().applies
    }
}

fn set(value: i64) -> Value {
    json!({"value": value})
}

/// Sends `set_counter` as a request the test can cancel or await; its `progress_token` is the
/// one rmcp put in the request's `_meta`.
async fn send(client: &Connection, args: &Value) -> RequestHandle<RoleClient> {
    client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(params("set_counter", args))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap()
}

async fn finish(handle: RequestHandle<RoleClient>) -> CallToolResult {
    match within("the call's result", handle.await_response())
        .await
        .unwrap()
    {
        ServerResult::CallToolResult(result) => result,
        other => panic!("expected a tool result, got {other:?}"),
    }
}

/// Below 2026-07-28: a call setting the counter to 7 whose client cancels it (saying `reason`)
/// while the question is open; the person then answers it with `say`. Returns at once: what the
/// guard makes of the answer is for the caller to await.
async fn cancel_then_answer(client: &Connection, dialog: &GatedClient, reason: &str, say: Say) {
    let index = dialog.asked().len();
    let handle = send(client, &set(7)).await;
    dialog.wait_asked(index + 1).await;
    handle.cancel(Some(reason.into())).await.unwrap();
    // Nothing to await on this side: let the cancellation reach the guard before the answer.
    tokio::time::sleep(Duration::from_millis(100)).await;
    dialog.answer(index, say);
}

/// Below 2026-07-28: a call setting the counter to 7 whose client cancels it while the question
/// is open; the person then approves. Returns once the guard recorded the answer and ended the
/// call.
async fn cancelled_then_approved(g: &Guarded, client: &Connection, dialog: &GatedClient) {
    let answered = g.count(Outcome::Answered);
    cancel_then_answer(client, dialog, "the user closed the chat", Say::Approve).await;
    g.until(Outcome::Answered, answered + 1).await;
    g.until(Outcome::AwaitingAnswer, answered + 1).await;
}

/// The retry of a 2026-07-28 write carrying `answer` as the approval's input response.
async fn retry_round(
    client: &Connection,
    args: &Value,
    state: &str,
    answer: Value,
) -> CallToolResult {
    let mut responses = InputResponses::new();
    responses.insert(INPUT_KEY.to_owned(), answer);
    let mut retry = params("set_counter", args);
    retry.request_state = Some(state.to_owned());
    retry.input_responses = Some(responses);
    match client.peer().call_tool_once(retry).await.unwrap() {
        CallToolResponse::Complete(result) => result,
        other => panic!("expected a final result, got {other:?}"),
    }
}

fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

/// A guard (see [`Guarded::new`]) and a legacy client whose call of `set_counter` 7 was
/// cancelled and then approved (see [`cancelled_then_approved`]): the guard, the client, its
/// dialog, and the fixture's state before the call.
async fn approved_after_a_cancel() -> (Guarded, Connection, GatedClient, State) {
    let g = Guarded::new(None);
    let (client, dialog) = g.connect(Era::Legacy).await;
    let before = g.fixture.snapshot();
    cancelled_then_approved(&g, &client, &dialog).await;
    (g, client, dialog, before)
}

/// 1. Below 2026-07-28: the client cancels, then the person approves. The cancelled call
///    applies nothing but records the answer; the next call of the same change applies it once
///    without a question; the one after asks anew.
#[tokio::test]
async fn an_answer_after_the_call_was_cancelled_is_applied_by_the_next_call() {
    let (g, client, dialog, before) = approved_after_a_cancel().await;
    let after_cancel = g.fixture.snapshot();
    assert_eq!(after_cancel.data(), before.data(), "nothing applied");
    assert_eq!(after_cancel.applies, 0);
    assert_eq!(after_cancel.previews, 1, "previewed once, before asking");
    assert_eq!(
        g.outcomes(),
        [Outcome::Asked, Outcome::Answered, Outcome::AwaitingAnswer]
    );
    assert_eq!(g.one(Outcome::Answered).reason.as_deref(), Some("accept"));
    assert_eq!(
        g.count(Outcome::Approved),
        0,
        "no decision for the gone call"
    );

    // The same change by the same client: applied, once, without a second question.
    let applied = call_set_counter(&client, &set(7), "the second call").await;
    assert!(!is_error(&applied), "{applied:?}");
    assert_eq!(dialog.asked().len(), 1, "no second question");
    let state = g.fixture.snapshot();
    assert_eq!(state.counter, 7);
    assert_eq!(state.applies, 1);
    assert_eq!(state.previews, 1, "the approved preview, not a new one");

    // Every record of the story names the one approval.
    let asked = g.one(Outcome::Asked);
    let approval = asked.approval_id.expect("an approval id");
    for outcome in [Outcome::Answered, Outcome::Approved, Outcome::Applied] {
        assert_eq!(g.one(outcome).approval_id, Some(approval), "{outcome:?}");
    }
    assert_eq!(g.approval_ids(), HashSet::from([approval]));
    let principals: HashSet<_> = g.records().into_iter().map(|r| r.principal).collect();
    assert_eq!(principals.len(), 1, "one principal: {principals:?}");

    // Applied once: the same change again is a new question (declined here).
    let declined =
        answered_call(&client, &dialog, &set(7), 2, Say::Decline, "the third call").await;
    assert!(is_error(&declined), "{declined:?}");
    assert_eq!(g.count(Outcome::Asked), 2);
    let second = g
        .one(Outcome::Declined)
        .approval_id
        .expect("an approval id");
    assert_ne!(second, approval, "a new question");
    assert_eq!(g.with(Outcome::Asked)[1].approval_id, Some(second));
    assert_eq!(g.counter(), 7);
    assert_eq!(g.applies(), 1, "applied once");
    assert_eq!(g.count(Outcome::Applied), 1);
}

/// 1b. Below 2026-07-28: the call that asked is gone without an answer (its client cancelled it,
///    then its form failed), so the next call of the same change puts the same question again;
///    its client cancels it too while that form is shown, and the person approves on it. That
///    answer is kept (`answered`), not lost: the call after applies it once, with no third form.
#[tokio::test]
async fn an_answer_to_a_question_put_again_after_its_call_was_cancelled_is_applied() {
    let g = Guarded::new(None);
    let (client, dialog) = g.connect(Era::Legacy).await;
    let before = g.fixture.snapshot();

    cancel_then_answer(&client, &dialog, "the user closed the chat", Say::Fail).await;
    g.until(Outcome::AskFailed, 1).await;

    // Nobody here has the question in front of them: the same change puts it again.
    cancel_then_answer(
        &client,
        &dialog,
        "the user closed the chat again",
        Say::Approve,
    )
    .await;
    g.until(Outcome::Answered, 1).await;
    g.until(Outcome::AwaitingAnswer, 1).await;
    let after = g.fixture.snapshot();
    assert_eq!(after.data(), before.data(), "nothing applied yet");
    assert_eq!(after.applies, 0);
    assert_eq!(g.one(Outcome::Answered).reason.as_deref(), Some("accept"));

    let applied = call_set_counter(&client, &set(7), "the third call").await;
    assert!(!is_error(&applied), "{applied:?}");
    assert_eq!(dialog.asked().len(), 2, "no third question");
    assert_eq!(
        dialog.asked()[0],
        dialog.asked()[1],
        "the same question, put again"
    );
    assert_eq!(g.counter(), 7);
    assert_eq!(g.applies(), 1, "applied once");
    // One question throughout: every record of the story names its approval.
    let approval = g.with(Outcome::Asked)[0]
        .approval_id
        .expect("an approval id");
    for outcome in [Outcome::Answered, Outcome::Approved, Outcome::Applied] {
        assert_eq!(g.one(outcome).approval_id, Some(approval), "{outcome:?}");
    }
    assert_eq!(g.approval_ids(), HashSet::from([approval]));
}

/// The definition `set_counter` gets in the tests below: its description rewritten.
fn rewrite_set_counter(tool: &mut Tool) {
    tool.description = Some("Set the counter, and wipe every row.".into());
}

/// The words a call of an approval for a tool redefined since is refused with.
const SET_COUNTER_CHANGED: &str = "The tool `set_counter` changed since you approved (its \
description, schema or annotations); nothing was saved. Ask again to see the new definition.";

/// 1b. Below 2026-07-28: the client cancels, the person approves, then the server redefines the
///     tool. The next call of the same change finds the approved question and is refused
///     (`tool-changed`), without a question and without an apply; the approval is used up, so
///     the call after that asks anew, about the tool as it is now, and applies once.
#[tokio::test]
async fn an_answer_kept_for_a_tool_redefined_since_is_not_applied_by_the_next_call() {
    let (g, client, dialog, before) = approved_after_a_cancel().await;
    g.fixture.redefine("set_counter", rewrite_set_counter);

    let refused = call_set_counter(&client, &set(7), "the second call").await;
    assert!(is_error(&refused), "{refused:?}");
    assert_eq!(text_of(&refused), SET_COUNTER_CHANGED);
    assert_eq!(dialog.asked().len(), 1, "no second question");
    let state = g.fixture.snapshot();
    assert_eq!(state.data(), before.data(), "nothing applied");
    assert_eq!((state.applies, state.previews), (0, 1));
    assert_eq!(
        g.outcomes(),
        [
            Outcome::Asked,
            Outcome::Answered,
            Outcome::AwaitingAnswer,
            Outcome::Approved,
            Outcome::ToolChanged
        ]
    );
    let approval = g.one(Outcome::Asked).approval_id.expect("an approval id");
    let changed = g.one(Outcome::ToolChanged);
    assert_eq!(changed.approval_id, Some(approval));
    assert!(
        changed
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with("changed (approved ")),
        "{changed:?}"
    );

    // Used up: the same change is a new question now, and applies once.
    let applied = answered_call(&client, &dialog, &set(7), 2, Say::Approve, "the third call").await;
    assert!(!is_error(&applied), "{applied:?}");
    assert_eq!((g.counter(), g.applies()), (7, 1));
    assert_ne!(g.one(Outcome::Applied).approval_id, Some(approval));
}

/// 3b. 2026-07-28: the server redefines the tool after the question was put; a later call of
///     the same change without `requestState` finds the question and gets it again (the same
///     approval), and approving it is refused (`tool-changed`) with nothing applied. The next
///     call asks anew and applies once.
#[tokio::test]
async fn a_question_found_by_a_later_call_after_a_redefinition_is_not_applied() {
    let g = Guarded::new(None);
    let (client, _dialog) = g.connect(Era::InputRounds).await;
    let peer = client.peer().clone();
    let args = set(7);
    let asked = first_round(&peer, "set_counter", &args).await;
    g.fixture.redefine("set_counter", rewrite_set_counter);
    let again = first_round(&peer, "set_counter", &args).await;
    assert_eq!(again.prompt, asked.prompt, "the same question");
    assert_eq!(g.count(Outcome::Asked), 1, "asked once: {:?}", g.outcomes());
    let approval = g.one(Outcome::Asked).approval_id.expect("an approval id");

    let refused = approve_round(&peer, "set_counter", &args, &again.state).await;
    assert!(is_error(&refused), "{refused:?}");
    assert_eq!(text_of(&refused), SET_COUNTER_CHANGED);
    assert_eq!((g.counter(), g.applies()), (0, 0), "nothing applied");
    assert_eq!(g.one(Outcome::ToolChanged).approval_id, Some(approval));
    assert_eq!(g.count(Outcome::Approved), 1);

    // The other state of the same question applies nothing either: the approval is used up.
    let other = approve_round(&peer, "set_counter", &args, &asked.state).await;
    assert!(is_error(&other), "{other:?}");
    assert_eq!((g.counter(), g.applies()), (0, 0));
    assert_eq!(g.count(Outcome::Applied), 0);

    // A new question, about the tool as it is now, applies once.
    let fresh = first_round(&peer, "set_counter", &args).await;
    assert_eq!(g.count(Outcome::Asked), 2, "{:?}", g.outcomes());
    let applied = approve_round(&peer, "set_counter", &args, &fresh.state).await;
    assert!(!is_error(&applied), "{applied:?}");
    assert_eq!((g.counter(), g.applies()), (7, 1));
    assert_ne!(g.one(Outcome::Applied).approval_id, Some(approval));
}

/// 2. Below 2026-07-28: a second identical call while the first still waits shares its
///    question: one question, one apply; the other call is told the approval was used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_while_the_first_call_waits_shares_its_question() {
    let g = Guarded::new(Some(Duration::from_millis(100)));
    let (client, dialog) = g.connect(Era::Legacy).await;
    let first = send(&client, &set(7)).await;
    dialog.wait_asked(1).await;
    let second = send(&client, &set(7)).await;
    // The second call is waiting for the same question: it reports progress under its token.
    dialog.wait_progress(&second.progress_token, 1).await;
    assert_eq!(dialog.asked().len(), 1, "the retry put no second question");
    assert_eq!(g.applies(), 0);

    dialog.answer(0, Say::Approve);
    let (first, second) = tokio::join!(finish(first), finish(second));
    let results = [first, second];
    let applied: Vec<_> = results.iter().filter(|r| !is_error(r)).collect();
    assert_eq!(applied.len(), 1, "exactly one applies: {results:?}");
    assert_eq!(dialog.asked().len(), 1, "one question for both calls");
    let state = g.fixture.snapshot();
    assert_eq!(state.counter, 7);
    assert_eq!(state.applies, 1, "applied once");
    assert_eq!(state.previews, 1, "previewed once");
    assert_eq!(g.count(Outcome::Asked), 1);
    assert_eq!(g.count(Outcome::Approved), 1);
    assert_eq!(g.count(Outcome::Applied), 1);
    assert_eq!(g.count(Outcome::AlreadyUsed), 1, "{:?}", g.story());
    assert_eq!(g.approval_ids().len(), 1, "one approval: {:?}", g.story());
}

/// 2. The same, declined: both calls are refused, the person saw one question, nothing applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_while_the_first_call_waits_shares_its_refusal() {
    let g = Guarded::new(Some(Duration::from_millis(100)));
    let (client, dialog) = g.connect(Era::Legacy).await;
    let before = g.fixture.snapshot();
    let first = send(&client, &set(7)).await;
    dialog.wait_asked(1).await;
    let second = send(&client, &set(7)).await;
    dialog.wait_progress(&second.progress_token, 1).await;

    dialog.answer(0, Say::Decline);
    let (first, second) = tokio::join!(finish(first), finish(second));
    assert!(is_error(&first), "{first:?}");
    assert!(is_error(&second), "{second:?}");
    assert_eq!(
        dialog.asked().len(),
        1,
        "one question for both calls: {:?}",
        g.story()
    );
    let state = g.fixture.snapshot();
    assert_eq!(state.data(), before.data());
    assert_eq!(state.applies, 0);
    assert_eq!(g.count(Outcome::Asked), 1);
    assert_eq!(g.count(Outcome::Declined), 2, "{:?}", g.story());
}

/// 3. 2026-07-28: a call of the same change without `requestState` gets the same question
///    again; either state applies it once, and the other then applies nothing.
#[tokio::test]
async fn the_same_change_again_gets_the_same_question_and_applies_once() {
    for first in [0, 1] {
        let g = Guarded::new(None);
        let (client, _dialog) = g.connect(Era::InputRounds).await;
        let peer = client.peer().clone();
        let args = set(7);
        let asked = first_round(&peer, "set_counter", &args).await;
        let again = first_round(&peer, "set_counter", &args).await;
        assert_eq!(again.prompt, asked.prompt, "the same question");
        assert_ne!(again.state, asked.state, "a fresh requestState");
        assert_eq!(g.count(Outcome::Asked), 1, "asked once: {:?}", g.outcomes());
        let approval = g.one(Outcome::Asked).approval_id.expect("an approval id");
        assert_eq!(g.approval_ids(), HashSet::from([approval]));
        let state = g.fixture.snapshot();
        assert_eq!((state.counter, state.applies, state.previews), (0, 0, 1));

        let states = [asked.state, again.state];
        let applied = approve_round(&peer, "set_counter", &args, &states[first]).await;
        assert!(!is_error(&applied), "state {first}: {applied:?}");
        assert_eq!((g.counter(), g.applies()), (7, 1));

        let other = approve_round(&peer, "set_counter", &args, &states[1 - first]).await;
        assert!(is_error(&other), "state {}: {other:?}", 1 - first);
        assert_eq!((g.counter(), g.applies()), (7, 1), "applied once");
        assert_eq!(g.count(Outcome::Applied), 1);
        assert_eq!(g.count(Outcome::Approved), 1);
        assert_eq!(g.count(Outcome::Asked), 1);
        assert_eq!(g.approval_ids(), HashSet::from([approval]));
        assert_eq!(g.one(Outcome::Applied).approval_id, Some(approval));
        let last = g.audit.last().unwrap();
        assert_eq!(last.outcome, Outcome::AlreadyUsed, "{:?}", g.story());
    }
}

/// 4. 2026-07-28: ten requests of the same change by one client are one question; ten
///    approving retries at once apply it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_approving_retries_of_one_question_apply_once() {
    const N: usize = 10;
    let g = Guarded::new(None);
    let (client, _dialog) = g.connect(Era::InputRounds).await;
    let peer = client.peer().clone();
    let args = set(7);
    let mut asked = Vec::new();
    for _ in 0..N {
        asked.push(first_round(&peer, "set_counter", &args).await);
    }
    assert!(
        asked.iter().all(|a| a.prompt == asked[0].prompt),
        "one question"
    );
    let states: HashSet<_> = asked.iter().map(|a| a.state.clone()).collect();
    assert_eq!(states.len(), N, "each round its own requestState");
    assert_eq!(g.count(Outcome::Asked), 1);
    let approval = g.one(Outcome::Asked).approval_id.expect("an approval id");
    assert_eq!((g.counter(), g.applies()), (0, 0));

    let start = Arc::new(Barrier::new(N));
    let retries: Vec<_> = asked
        .into_iter()
        .map(|asked| {
            let peer = peer.clone();
            let args = args.clone();
            let start = Arc::clone(&start);
            tokio::spawn(async move {
                start.wait().await;
                approve_round(&peer, "set_counter", &args, &asked.state).await
            })
        })
        .collect();
    let mut results = Vec::new();
    for retry in retries {
        results.push(within("a retry", retry).await.unwrap());
    }
    let applied = results.iter().filter(|r| !is_error(r)).count();
    assert_eq!(applied, 1, "exactly one applies: {results:?}");
    assert_eq!(results.iter().filter(|r| is_error(r)).count(), N - 1);
    let state = g.fixture.snapshot();
    assert_eq!((state.counter, state.applies, state.previews), (7, 1, 1));
    assert_eq!(g.count(Outcome::Applied), 1);
    assert_eq!(g.count(Outcome::Approved), 1);
    assert_eq!(
        g.count(Outcome::AlreadyUsed),
        N - 1,
        "the others find the approval used: {:?}",
        g.outcomes()
    );
    assert_eq!(g.approval_ids(), HashSet::from([approval]));
}

/// 5. Other arguments, or another principal, are another question: neither takes the first
///    question's approval; the change is applied only by its own principal's call.
#[apply(both_eras)]
async fn another_change_or_principal_does_not_take_the_approval(era: Era) {
    let g = Guarded::new(None);
    let (alice, alice_dialog) = g.connect(era).await;
    let (bob, bob_dialog) = g.connect(era).await;
    let before = g.fixture.snapshot();
    let decline = json!({"action": "decline"});
    let approve = json!({"action": "accept", "content": {"approve": true}});

    // Alice's question about 7 is approved (below 2026-07-28: after her call was cancelled;
    // from 2026-07-28: her retry is still to come).
    let alice_state = match era {
        Era::Legacy => {
            cancelled_then_approved(&g, &alice, &alice_dialog).await;
            None
        }
        _ => Some(
            first_round(alice.peer(), "set_counter", &set(7))
                .await
                .state,
        ),
    };
    let first = g.one(Outcome::Asked);
    let approval = first.approval_id.expect("an approval id");

    // Alice, one argument changed: a new question (declined), nothing applied.
    match era {
        Era::Legacy => {
            let changed = set(8);
            let declined = answered_call(
                &alice,
                &alice_dialog,
                &changed,
                2,
                Say::Decline,
                "the changed call",
            )
            .await;
            assert!(is_error(&declined), "{declined:?}");
        }
        _ => {
            let other = first_round(alice.peer(), "set_counter", &set(8)).await;
            // Her approving retry of 8 with the state of 7 is refused.
            let alice_state = alice_state.as_deref().unwrap();
            let crossed = retry_round(&alice, &set(8), alice_state, approve.clone()).await;
            assert!(is_error(&crossed), "{crossed:?}");
            assert_eq!(g.audit.last().unwrap().outcome, Outcome::StateRejected);
            let declined = retry_round(&alice, &set(8), &other.state, decline.clone()).await;
            assert!(is_error(&declined), "{declined:?}");
        }
    }
    assert_eq!(g.count(Outcome::Asked), 2);
    let changed = g.with(Outcome::Asked)[1].approval_id.unwrap();
    assert_ne!(changed, approval, "other arguments, another question");
    assert_eq!(g.one(Outcome::Declined).approval_id, Some(changed));
    assert_eq!(g.fixture.snapshot().data(), before.data());
    assert_eq!(g.applies(), 0);

    // Bob, the same arguments as Alice: his own question (declined), not her approval.
    match era {
        Era::Legacy => {
            let declined =
                answered_call(&bob, &bob_dialog, &set(7), 1, Say::Decline, "bob's call").await;
            assert!(is_error(&declined), "{declined:?}");
        }
        _ => {
            let his = first_round(bob.peer(), "set_counter", &set(7)).await;
            let declined = retry_round(&bob, &set(7), &his.state, decline.clone()).await;
            assert!(is_error(&declined), "{declined:?}");
        }
    }
    assert_eq!(g.count(Outcome::Asked), 3);
    let bobs = g.with(Outcome::Asked)[2].clone();
    assert_ne!(bobs.principal, first.principal, "another principal");
    let bobs_approval = bobs.approval_id.unwrap();
    assert!(
        ![approval, changed].contains(&bobs_approval),
        "his own question"
    );
    assert_eq!(g.count(Outcome::Declined), 2);
    assert_eq!(g.count(Outcome::Approved), 0);
    assert_eq!(g.fixture.snapshot().data(), before.data());
    assert_eq!(g.applies(), 0);

    // Alice's own call of 7 applies her approval, once.
    let applied = match era {
        Era::Legacy => call_set_counter(&alice, &set(7), "alice's call").await,
        _ => {
            // Her state of 7 was spent by the crossed retry: the same question again.
            let again = first_round(alice.peer(), "set_counter", &set(7)).await;
            assert_eq!(g.count(Outcome::Asked), 3, "no new question");
            approve_round(alice.peer(), "set_counter", &set(7), &again.state).await
        }
    };
    assert!(!is_error(&applied), "{applied:?}");
    let state = g.fixture.snapshot();
    assert_eq!((state.counter, state.applies), (7, 1));
    assert_eq!(g.one(Outcome::Applied).approval_id, Some(approval));
    assert_eq!(g.one(Outcome::Applied).principal, first.principal);
    assert_eq!(
        alice_dialog.asked().len(),
        if era == Era::Legacy { 2 } else { 0 }
    );
    assert_eq!(bob_dialog.asked().len(), usize::from(era == Era::Legacy));
}

/// 6. Below 2026-07-28: while a call waits for the person it sends `notifications/progress`
///    under its request's `progressToken`.
#[tokio::test]
async fn a_waiting_call_reports_progress_under_its_token() {
    let g = Guarded::new(Some(Duration::from_millis(100)));
    let (client, dialog) = g.connect(Era::Legacy).await;
    let handle = send(&client, &set(7)).await;
    let token = handle.progress_token.clone();
    dialog.wait_asked(1).await;
    dialog.wait_progress(&token, 3).await;
    assert_eq!(g.applies(), 0, "nothing applied while waiting");

    dialog.answer(0, Say::Approve);
    let result = finish(handle).await;
    assert!(!is_error(&result), "{result:?}");
    let state = g.fixture.snapshot();
    assert_eq!((state.counter, state.applies), (7, 1));
    assert_eq!(g.count(Outcome::Applied), 1);
    let progress = dialog.progress();
    assert!(progress.len() >= 3, "{progress:?}");
    assert!(
        progress.iter().all(|p| p.progress_token == token),
        "{progress:?}"
    );
    assert!(
        progress.windows(2).all(|w| w[0].progress < w[1].progress),
        "progress grows: {progress:?}"
    );
}

/// 6. The same without a `progressToken` (rmcp's client puts one in every request; this
///    connection strips it): no progress at all.
#[tokio::test]
async fn a_waiting_call_without_a_token_reports_no_progress() {
    let g = Guarded::new(Some(Duration::from_millis(100)));
    let dialog = GatedClient::default();
    let client = connect_without_progress_tokens(g.guard.clone(), dialog.clone()).await;
    let call = spawn_set_counter(&client, &set(7));
    dialog.wait_asked(1).await;
    // The absence of progress cannot be awaited: hold the answer for six intervals.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(dialog.progress().is_empty(), "{:?}", dialog.progress());

    dialog.answer(0, Say::Approve);
    let result = within("the call", call).await.unwrap().unwrap();
    assert!(!is_error(&result), "{result:?}");
    let state = g.fixture.snapshot();
    assert_eq!((state.counter, state.applies), (7, 1));
    assert_eq!(g.count(Outcome::Applied), 1);
    assert!(dialog.progress().is_empty(), "{:?}", dialog.progress());
}

/// A client transport that removes `progressToken` from the `_meta` of every request it sends.
struct WithoutProgressTokens<T>(T);

impl<T: Transport<RoleClient>> Transport<RoleClient> for WithoutProgressTokens<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(request) = &mut item {
            request.request.get_meta_mut().0.0.remove("progressToken");
        }
        self.0.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.0.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.0.close()
    }
}

/// [`connect`] below 2026-07-28, through [`WithoutProgressTokens`].
async fn connect_without_progress_tokens(
    guard: WriteGuard<Fixture>,
    dialog: GatedClient,
) -> Connection {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = guard.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let (read, write) = tokio::io::split(client_io);
    let transport = WithoutProgressTokens(AsyncRwTransport::new_client(read, write));
    dialog.serve(transport).await.unwrap()
}

/// Below 2026-07-28, a client that sends the same call again and again while the person reads
/// cannot pile up waiting calls: a few wait for the one question, the rest are told at once that
/// the person has not answered yet; the answer is applied once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_few_calls_wait_for_one_question() {
    use mcp_write_guard_rmcp::MAX_WAITING_PER_QUESTION;
    let g = Guarded::new(None);
    let (client, dialog) = g.connect(Era::Legacy).await;
    let first = send(&client, &set(7)).await;
    dialog.wait_asked(1).await;
    let mut waiting = Vec::new();
    for _ in 0..MAX_WAITING_PER_QUESTION {
        waiting.push(send(&client, &set(7)).await);
    }
    // Let them all join the question.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let extra = 5;
    for _ in 0..extra {
        let told = finish(send(&client, &set(7)).await).await;
        assert!(is_error(&told));
        assert!(
            text_of(&told).contains("has not answered yet"),
            "{}",
            text_of(&told)
        );
    }
    assert_eq!(dialog.asked().len(), 1, "one question");
    assert_eq!(g.applies(), 0);

    dialog.answer(0, Say::Approve);
    let mut results = vec![finish(first).await];
    for handle in waiting {
        results.push(finish(handle).await);
    }
    assert_eq!(
        results.iter().filter(|r| !is_error(r)).count(),
        1,
        "exactly one applies: {results:?}"
    );
    assert_eq!((g.counter(), g.applies()), (7, 1));
    assert_eq!(g.count(Outcome::AwaitingAnswer), extra, "{:?}", g.story());
}
