//! A question outlives the call that asked it.
//!
//! Clients give up before people do (a 60 s request timeout is common, the approval clock is
//! 120 s), and some clients cannot ask at all. So a question is not held by the call that asked
//! it: it lives in the store for its whole clock, and any later call of the **same tool with the
//! same exact arguments by the same principal** finds it.
//!
//! - [`Approvals::open_question`](crate::Approvals::open_question) stores the pending approval (under its [`ApprovalId`], as
//!   [`Approvals::store_approval`](crate::Approvals::store_approval) does) and an index entry under the question's binding (principal, tool,
//!   arguments' digest). Of two calls that open the same question at once, one opens it and the
//!   other is handed the open one ([`Opened::Existing`]): there is never a second question.
//! - [`Approvals::answer_question`](crate::Approvals::answer_question) keeps the person's answer, once: whichever channel answers first (the
//!   form, the 2026-07-28 retry, the approval page) is the answer, and a later answer is handed
//!   the first one back.
//! - [`Approvals::find_question`](crate::Approvals::find_question) reads the question for a binding, with its answer (an answer given on the
//!   question's approval page is taken over as the question's answer here).
//! - [`Approvals::refresh_question`](crate::Approvals::refresh_question) reads a question's answer again by its approval id.
//! - [`question_status`] says what the answer comes to at `now`: still open, approved, or refused
//!   (declined, cancelled, expired, ...). Pure; a truth table beside it.
//! - The apply takes the stored approval with [`Approvals::take_approval`](crate::Approvals::take_approval): atomic and single use, so of any
//!   number of calls that find the same approved question, exactly one applies.
//! - [`Approvals::close_question`](crate::Approvals::close_question) forgets the index once the question is over (applied, expired), so the
//!   next call of the same change asks anew.
//!
//! The index and the answer are kept one more lifetime after the clock (as receipts are), so a
//! call shortly after the end is told "expired" rather than asked anew without a word; they are
//! tombstones (they grant nothing) and do not count towards the principal's cap. The approval
//! itself counts, for its clock.
//!
//! | key | holds | until |
//! |---|---|---|
//! | `question:<binding>` | the approval id, the clock, the page if any | one lifetime after the clock |
//! | `question:<approval id>.answer` | the first answer, and its channel | one lifetime after the clock |
//! | `approval:<approval id>` | the pending approval (taken once, by the apply) | the clock's end |
//!
//! `<binding>` is the SHA-256 of the principal, the tool and the arguments' digest, so a key
//! says nothing of them.
//!
//! [`Approvals::store_approval`](crate::Approvals::store_approval): crate::round_trip::store_approval
//! [`Approvals::take_approval`](crate::Approvals::take_approval): crate::round_trip::take_approval

use serde_json::Value;
use sha2::{Digest as _, Sha256};
use time::OffsetDateTime;

use crate::answer::AnswerChannel;
use crate::answer::{AnswerAction, Decision, DenyReason, decide_answer};
use crate::approval::PendingApproval;
use crate::binding::Binding;
use crate::ids::{ApprovalId, ArgsDigest, Principal, ToolName};
use crate::page::{PageId, PageOutcome, page_outcome};
use crate::record::{
    AnswerRecord, QuestionIndex, Record, answer_key, from_ns, retain_until, to_ns,
};
use crate::round_trip::store_approval;
use crate::store::{RecordKind, Store, StoreError, StoreKey};

/// The answer a question got: the first one, from whichever channel gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct GivenAnswer {
    /// The answer's action.
    pub action: AnswerAction,
    /// Its content (`{"approve": true}` approves).
    pub content: Option<Value>,
    /// Where it came from.
    pub channel: AnswerChannel,
    /// When it was given.
    pub answered_at: OffsetDateTime,
}

impl GivenAnswer {
    /// An answer given through `channel` at `answered_at`.
    pub fn new(
        action: AnswerAction,
        content: Option<Value>,
        channel: AnswerChannel,
        answered_at: OffsetDateTime,
    ) -> Self {
        Self {
            action,
            content,
            channel,
            answered_at,
        }
    }
}

/// A question as the store holds it: which approval, its clock, where it is asked, and the
/// answer if one was given.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    approval: ApprovalId,
    asked_at: OffsetDateTime,
    expires_at: OffsetDateTime,
    page: Option<PageId>,
    answer: Option<GivenAnswer>,
}

impl Question {
    /// The question `pending` asks, not yet answered: what [`Approvals::open_question`](crate::Approvals::open_question) stores for it.
    pub fn asked(pending: &PendingApproval) -> Self {
        Self {
            approval: pending.id(),
            asked_at: pending.asked_at(),
            expires_at: pending.expires_at(),
            page: pending.page().copied(),
            answer: None,
        }
    }

    /// The same question with `answer` (the one [`Approvals::answer_question`](crate::Approvals::answer_question) said counts).
    #[must_use]
    pub fn with_answer(mut self, answer: GivenAnswer) -> Self {
        self.answer = Some(answer);
        self
    }

    /// The id of the pending approval the question asks about (the audit records' approval id).
    pub fn approval(&self) -> ApprovalId {
        self.approval
    }

    /// When the question was asked.
    pub fn asked_at(&self) -> OffsetDateTime {
        self.asked_at
    }

    /// The end of the approval clock: an answer counts only before it.
    pub fn expires_at(&self) -> OffsetDateTime {
        self.expires_at
    }

    /// The approval page the question is asked on, if any.
    pub fn page(&self) -> Option<&PageId> {
        self.page.as_ref()
    }

    /// The answer, once one was given.
    pub fn answer(&self) -> Option<&GivenAnswer> {
        self.answer.as_ref()
    }
}

/// What [`Approvals::open_question`](crate::Approvals::open_question) did.
#[derive(Debug, Clone, PartialEq)]
pub enum Opened {
    /// The question was opened: the pending approval is stored under its id.
    New,
    /// The same question (same principal, tool and arguments) was already open, or answered:
    /// nothing was stored, and this call goes on with that one.
    Existing(Question),
}

/// What a question's answer comes to at a given instant ([`question_status`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
/// Not `#[non_exhaustive]`: a new state must be a compile error where states become actions.
pub enum QuestionStatus {
    /// Not answered yet, and the clock runs: wait for the answer (or put the same question
    /// again); never open a second one.
    Open,
    /// Approved, and the clock runs: take the approval (once) and apply it.
    Approved,
    /// Answered with anything but an approval, or the clock ran out: refused, nothing applies.
    Refused(DenyReason),
}

/// What `question`'s answer comes to at `now`. The clock first: at or after
/// [`Question::expires_at`] every question is [`DenyReason::Expired`], answered or not; then
/// only `accept` with `approve == true` ([`decide_answer`]) is [`QuestionStatus::Approved`].
pub fn question_status(question: &Question, now: OffsetDateTime) -> QuestionStatus {
    if now >= question.expires_at {
        return QuestionStatus::Refused(DenyReason::Expired);
    }
    match &question.answer {
        None => QuestionStatus::Open,
        Some(answer) => match decide_answer(&answer.action, answer.content.as_ref()) {
            Decision::Approve => QuestionStatus::Approved,
            Decision::Deny(reason) => QuestionStatus::Refused(reason),
        },
    }
}

/// The key of the question for `principal` calling `tool` with arguments of `digest`: the
/// SHA-256 of the three, each length-prefixed, so no two bindings share a key.
fn binding_key(principal: &Principal, tool: &ToolName, digest: &ArgsDigest) -> StoreKey {
    let mut hash = Sha256::new();
    for part in [principal.as_str().as_bytes(), tool.as_str().as_bytes()] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    hash.update(digest.as_bytes());
    let binding = ArgsDigest::from_bytes(hash.finalize().into());
    StoreKey::new(RecordKind::Question, binding.to_hex())
}

fn corrupt(error: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(error.to_string())
}

/// A record of another kind where `what` should be.
fn not_a(what: &str) -> StoreError {
    StoreError::Corrupt(format!("not a {what}"))
}

/// Opens the question `pending` asks (after its page, if any, was opened with
/// [`Approvals::open_page`](crate::Approvals::open_page)), or finds the same question already asked.
///
/// # Errors
/// The store's error: nothing is asked (a pending approval that cannot be stored, or a
/// principal at its cap, is a refusal).
pub(crate) async fn open_question<S: Store + ?Sized>(
    store: &S,
    pending: &PendingApproval,
    now: OffsetDateTime,
) -> Result<Opened, StoreError> {
    let key = binding_key(
        pending.principal(),
        pending.tool(),
        &pending.args().digest(),
    );
    let index = QuestionIndex {
        approval: pending.id(),
        asked_at_ns: to_ns(pending.asked_at())?,
        expires_at_ns: to_ns(pending.expires_at())?,
        page: pending.page().map(ToString::to_string),
    };
    let index = Record::Question(index);
    let keep_until = retain_until(pending.asked_at(), pending.expires_at());
    // Twice at most: an index found and gone again before it could be read (it was closed in
    // between) is tried once more.
    for _ in 0..2 {
        match store
            .insert_tombstone(
                key.clone(),
                pending.principal(),
                index.clone(),
                keep_until,
                now,
            )
            .await
        {
            Ok(()) => {
                if let Err(error) = store_approval(store, pending, now).await {
                    // Nothing can be answered without the approval: forget the index.
                    let _ignored = store.take(&key, now).await;
                    return Err(error);
                }
                return Ok(Opened::New);
            }
            Err(StoreError::KeyExists) => {
                if let Some(existing) = read_question(store, &key, pending.principal(), now).await?
                {
                    return Ok(Opened::Existing(existing));
                }
            }
            Err(error) => return Err(error),
        }
    }
    Err(StoreError::KeyExists)
}

/// The question for `principal` calling `tool` with arguments of `digest`, if one was asked and
/// is not yet forgotten, with its answer. An answer given on the question's approval page is
/// taken over here as the question's answer (once; [`Approvals::answer_question`](crate::Approvals::answer_question)'s first-answer rule
/// applies to it like to any channel).
///
/// # Errors
/// The store's error, or a record it cannot read.
pub(crate) async fn find_question<S: Store + ?Sized>(
    store: &S,
    call: Binding<'_>,
    now: OffsetDateTime,
) -> Result<Option<Question>, StoreError> {
    let key = binding_key(call.principal, call.tool, &call.args.digest());
    read_question(store, &key, call.principal, now).await
}

async fn read_question<S: Store + ?Sized>(
    store: &S,
    key: &StoreKey,
    principal: &Principal,
    now: OffsetDateTime,
) -> Result<Option<Question>, StoreError> {
    let Some(index) = store.get(key, now).await? else {
        return Ok(None);
    };
    let index = index
        .into_question()
        .ok_or_else(|| not_a("question's index"))?;
    let page = match index.page {
        Some(page) => Some(page.parse::<PageId>().map_err(corrupt)?),
        None => None,
    };
    let question = Question {
        approval: index.approval,
        asked_at: from_ns(index.asked_at_ns)?,
        expires_at: from_ns(index.expires_at_ns)?,
        page,
        answer: None,
    };
    refresh_question(store, question, principal, now)
        .await
        .map(Some)
}

/// `question` as the store holds it now: its answer, read by its approval id (so a question
/// whose index was closed meanwhile is still seen answered), or taken over from its page.
///
/// # Errors
/// The store's error, or a record it cannot read.
pub(crate) async fn refresh_question<S: Store + ?Sized>(
    store: &S,
    mut question: Question,
    principal: &Principal,
    now: OffsetDateTime,
) -> Result<Question, StoreError> {
    if question.answer.is_some() {
        return Ok(question);
    }
    question.answer = read_answer(store, &question.approval, now).await?;
    if question.answer.is_none()
        && let Some(page) = question.page
        && let PageOutcome::Answered { action, content } = page_outcome(store, &page, now).await
    {
        let given = GivenAnswer::new(action, content, AnswerChannel::Page, now);
        question.answer = Some(answer_question(store, &question, principal, given, now).await?);
    }
    Ok(question)
}

async fn read_answer<S: Store + ?Sized>(
    store: &S,
    approval: &ApprovalId,
    now: OffsetDateTime,
) -> Result<Option<GivenAnswer>, StoreError> {
    let Some(answer) = store.get(&answer_key(approval), now).await? else {
        return Ok(None);
    };
    let answer = answer
        .into_answer()
        .ok_or_else(|| not_a("question's answer"))?;
    Ok(Some(GivenAnswer {
        action: AnswerAction::from_wire(&answer.action),
        content: answer.content,
        channel: answer.channel,
        answered_at: from_ns(answer.answered_at_ns)?,
    }))
}

/// Keeps `answer` as `question`'s answer, if it is the first; returns the answer that counts
/// (this one, or the one given first through another channel).
///
/// # Errors
/// The store's error: the answer was not kept (and counts for nothing).
pub(crate) async fn answer_question<S: Store + ?Sized>(
    store: &S,
    question: &Question,
    principal: &Principal,
    answer: GivenAnswer,
    now: OffsetDateTime,
) -> Result<GivenAnswer, StoreError> {
    let action = match &answer.action {
        AnswerAction::Accept => "accept",
        AnswerAction::Decline => "decline",
        AnswerAction::Cancel => "cancel",
        AnswerAction::Other(other) => other.as_str(),
    };
    let record = AnswerRecord {
        action: action.to_owned(),
        // As its JSON reads back: a `null` content is no content, in every store.
        content: answer.content.clone().filter(|content| !content.is_null()),
        channel: answer.channel,
        answered_at_ns: to_ns(answer.answered_at)?,
    };
    let record = Record::Answer(record);
    let keep_until = retain_until(question.asked_at, question.expires_at);
    let key = answer_key(&question.approval);
    match store
        .insert_tombstone(key, principal, record, keep_until, now)
        .await
    {
        Ok(()) => Ok(answer),
        Err(StoreError::KeyExists) => read_answer(store, &question.approval, now)
            .await?
            .ok_or(StoreError::KeyExists),
        Err(error) => Err(error),
    }
}

/// Forgets the question for `principal` calling `tool` with arguments of `digest`, if it is
/// still the one about `approval` (a newer question of the same change stays). Best effort: a
/// question not forgotten is forgotten when its retention ends, and until then reads as what
/// it was.
pub(crate) async fn close_question<S: Store + ?Sized>(
    store: &S,
    call: Binding<'_>,
    approval: ApprovalId,
    now: OffsetDateTime,
) {
    let principal = call.principal;
    let key = binding_key(principal, call.tool, &call.args.digest());
    let Ok(Some(taken)) = store.take(&key, now).await else {
        return;
    };
    let Some(index) = taken.into_question() else {
        return;
    };
    if index.approval == approval {
        return;
    }
    // Another question's index: put it back as it was.
    if let (Ok(asked_at), Ok(expires_at)) =
        (from_ns(index.asked_at_ns), from_ns(index.expires_at_ns))
    {
        let _ignored = store
            .insert_tombstone(
                key,
                principal,
                Record::Question(index),
                retain_until(asked_at, expires_at),
                now,
            )
            .await;
    }
}

#[cfg(test)]
mod tests {
    use crate::Binding;
    use proptest::prelude::*;
    use serde_json::json;
    use time::Duration;

    use super::*;
    use crate::round_trip::{RoundTripRejection, take_approval};
    use crate::{
        ApprovalPolicy, CapturedArgs, MemoryStore, Verdict, test_support::ready as block_on,
    };

    fn t0() -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + Duration::days(20_000)
    }

    fn pending(who: &str, delta: i64, at: OffsetDateTime) -> PendingApproval {
        let args = json!({"sku": "TLS-002", "delta": delta});
        PendingApproval::new(
            Principal::new(who),
            ToolName::new("adjust_stock"),
            crate::test_support::definition(),
            CapturedArgs::capture(args.as_object(), &ApprovalPolicy::default().limits)
                .unwrap_or_else(|e| panic!("{e}")),
            json!({"before": 3, "after": 3 + delta}),
            at,
            &ApprovalPolicy::default(),
        )
    }

    /// A `null` content is kept as no content, so the memory store reads it back as a store
    /// that keeps JSON does (where `null` reads back as absent): a question is decided alike in
    /// every store.
    #[test]
    fn a_null_content_reads_back_alike_from_every_store() {
        let memory = MemoryStore::new();
        let json = crate::test_support::ThroughJson::default();
        let mut read = Vec::new();
        for store in [&memory as &dyn Store, &json] {
            let p = open_new(store);
            let null = GivenAnswer::new(
                AnswerAction::Accept,
                Some(serde_json::Value::Null),
                AnswerChannel::Form,
                t0(),
            );
            block_on(answer_question(
                store,
                &Question::asked(&p),
                p.principal(),
                null,
                t0(),
            ))
            .unwrap_or_else(|e| panic!("{e}"));
            let call = Binding::new(p.principal(), p.tool(), p.args());
            let found =
                block_on(find_question(store, call, t0())).unwrap_or_else(|e| panic!("{e}"));
            let answer = found.and_then(|q| q.answer().cloned());
            read.push(answer.map(|a| (a.action, a.content)));
        }
        assert_eq!(read[0], Some((AnswerAction::Accept, None)), "memory");
        assert_eq!(read[0], read[1], "memory and JSON");
    }

    /// Opens the question of alice's change (delta 1) at [`t0`], asserting that it is new.
    fn open_new<S: Store + ?Sized>(store: &S) -> PendingApproval {
        let p = pending("alice", 1, t0());
        assert_eq!(block_on(open_question(store, &p, t0())), Ok(Opened::New));
        p
    }

    fn find(store: &MemoryStore, p: &PendingApproval, now: OffsetDateTime) -> Option<Question> {
        block_on(find_question(
            store,
            Binding::new(p.principal(), p.tool(), p.args()),
            now,
        ))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn approve(at: OffsetDateTime, channel: AnswerChannel) -> GivenAnswer {
        GivenAnswer::new(
            AnswerAction::Accept,
            Some(json!({"approve": true})),
            channel,
            at,
        )
    }

    fn decline(at: OffsetDateTime, channel: AnswerChannel) -> GivenAnswer {
        GivenAnswer::new(AnswerAction::Decline, None, channel, at)
    }

    fn question(answer: Option<GivenAnswer>) -> Question {
        Question {
            approval: ApprovalId::random(),
            asked_at: t0(),
            expires_at: t0() + Duration::seconds(120),
            page: None,
            answer,
        }
    }

    #[test]
    fn status_truth_table() {
        let at = |s| t0() + Duration::seconds(s);
        let form = AnswerChannel::Form;
        let cases: Vec<(Option<GivenAnswer>, i64, QuestionStatus)> = vec![
            (None, 0, QuestionStatus::Open),
            (None, 119, QuestionStatus::Open),
            (None, 120, QuestionStatus::Refused(DenyReason::Expired)),
            (Some(approve(at(5), form)), 5, QuestionStatus::Approved),
            (Some(approve(at(5), form)), 119, QuestionStatus::Approved),
            (
                Some(approve(at(5), form)),
                120,
                QuestionStatus::Refused(DenyReason::Expired),
            ),
            (
                Some(decline(at(5), form)),
                6,
                QuestionStatus::Refused(DenyReason::Declined),
            ),
            (
                Some(GivenAnswer::new(AnswerAction::Cancel, None, form, at(5))),
                6,
                QuestionStatus::Refused(DenyReason::Cancelled),
            ),
            (
                Some(GivenAnswer::new(
                    AnswerAction::Accept,
                    Some(json!({"approve": "true"})),
                    form,
                    at(5),
                )),
                6,
                QuestionStatus::Refused(DenyReason::ApproveNotBoolean),
            ),
            (
                Some(GivenAnswer::new(
                    AnswerAction::Accept,
                    Some(json!({"approve": false})),
                    form,
                    at(5),
                )),
                6,
                QuestionStatus::Refused(DenyReason::ApproveFalse),
            ),
        ];
        for (answer, now, expected) in cases {
            let q = question(answer.clone());
            assert_eq!(
                question_status(&q, at(now)),
                expected,
                "{answer:?} at {now}"
            );
        }
    }

    #[test]
    fn a_second_call_of_the_same_change_finds_the_first_question() {
        let store = MemoryStore::new();
        let first = open_new(&store);
        let again = pending("alice", 1, t0() + Duration::seconds(70));
        let Ok(Opened::Existing(found)) =
            block_on(open_question(&store, &again, t0() + Duration::seconds(70)))
        else {
            panic!("the open question is found");
        };
        assert_eq!(found.approval(), first.id());
        assert_eq!(found.expires_at(), first.expires_at(), "the same clock");
        // The second call stored nothing: its approval cannot be taken.
        assert_eq!(
            block_on(take_approval(
                &store,
                again.id(),
                Binding::new(again.principal(), again.tool(), again.args()),
                t0() + Duration::seconds(71)
            ))
            .map(|_| ()),
            Err(RoundTripRejection::Unknown)
        );
    }

    #[test]
    fn another_principal_or_other_arguments_find_nothing() {
        let store = MemoryStore::new();
        let first = open_new(&store);
        assert!(find(&store, &pending("bob", 1, t0()), t0()).is_none());
        assert!(find(&store, &pending("alice", 2, t0()), t0()).is_none());
        assert!(find(&store, &first, t0()).is_some());
    }

    #[test]
    fn the_first_answer_counts_whichever_channel_gives_it() {
        let store = MemoryStore::new();
        let p = open_new(&store);
        let q = find(&store, &p, t0()).unwrap_or_else(|| panic!("open"));
        let at = t0() + Duration::seconds(70);
        let answer = |given| block_on(answer_question(&store, &q, p.principal(), given, at));
        let first = answer(decline(at, AnswerChannel::Page));
        assert_eq!(first, Ok(decline(at, AnswerChannel::Page)));
        let later = answer(approve(at, AnswerChannel::Form));
        assert_eq!(
            later,
            Ok(decline(at, AnswerChannel::Page)),
            "the first stays"
        );
        let q = find(&store, &p, at).unwrap_or_else(|| panic!("answered"));
        assert_eq!(
            question_status(&q, at),
            QuestionStatus::Refused(DenyReason::Declined)
        );
    }

    #[test]
    fn closing_forgets_only_the_same_question() {
        let store = MemoryStore::new();
        let p = open_new(&store);
        let other = ApprovalId::random();
        let close = |id| {
            block_on(close_question(
                &store,
                Binding::new(p.principal(), p.tool(), p.args()),
                id,
                t0(),
            ))
        };
        close(other);
        assert!(find(&store, &p, t0()).is_some(), "another id leaves it");
        close(p.id());
        assert!(find(&store, &p, t0()).is_none());
        let next = pending("alice", 1, t0());
        assert_eq!(
            block_on(open_question(&store, &next, t0())),
            Ok(Opened::New),
            "the same change asks anew"
        );
    }

    #[test]
    fn an_expired_question_is_kept_one_more_lifetime_to_say_so() {
        let store = MemoryStore::new();
        let p = open_new(&store);
        let late = t0() + Duration::seconds(200);
        let q = find(&store, &p, late).unwrap_or_else(|| panic!("kept"));
        assert_eq!(
            question_status(&q, late),
            QuestionStatus::Refused(DenyReason::Expired)
        );
        assert!(find(&store, &p, t0() + Duration::seconds(240)).is_none());
    }

    /// One step of a model run over one change (alice, adjust_stock, delta 1).
    #[derive(Debug, Clone)]
    enum Step {
        /// A call asks (or finds the open question).
        Ask,
        /// A channel answers the open question (approve or not).
        Answer(bool, bool),
        /// A call finds the question and, if approved, takes the approval and applies.
        Retry,
        /// The applier closes the question.
        Close,
        /// Seconds pass.
        Wait(i64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            Just(Step::Ask),
            (any::<bool>(), any::<bool>()).prop_map(|(a, page)| Step::Answer(a, page)),
            Just(Step::Retry),
            Just(Step::Retry),
            Just(Step::Close),
            (0..80_i64).prop_map(Step::Wait),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any interleaving of asking, answering, retrying, closing and waiting: an approval
        /// applies at most once, only after an approving answer that was the question's first,
        /// and only inside its clock.
        #[test]
        fn an_approval_applies_at_most_once_and_only_as_first_answered(
            steps in prop::collection::vec(step(), 1..40)
        ) {
            let store = MemoryStore::new();
            let mut now = t0();
            let mut applied: Vec<ApprovalId> = Vec::new();
            // Per approval id: the first answer given (true: approve).
            let mut first: std::collections::HashMap<ApprovalId, bool> = Default::default();
            let mut last: Option<PendingApproval> = None;
            for step in steps {
                match step {
                    Step::Ask => {
                        let p = pending("alice", 1, now);
                        if block_on(open_question(&store, &p, now)) == Ok(Opened::New) {
                            last = Some(p);
                        }
                    }
                    Step::Answer(yes, page) => {
                        let Some(p) = &last else { continue };
                        let Some(q) = find(&store, p, now) else { continue };
                        let channel = if page { AnswerChannel::Page } else { AnswerChannel::Form };
                        let given = if yes { approve(now, channel) } else { decline(now, channel) };
                        if let Ok(counted) =
                            block_on(answer_question(&store, &q, p.principal(), given, now))
                        {
                            let counted_yes = counted.action == AnswerAction::Accept;
                            let earlier = *first.entry(q.approval()).or_insert(yes);
                            prop_assert_eq!(counted_yes, earlier, "the first answer counts");
                        }
                    }
                    Step::Retry => {
                        let Some(p) = &last else { continue };
                        let Some(q) = find(&store, p, now) else { continue };
                        if question_status(&q, now) != QuestionStatus::Approved {
                            continue;
                        }
                        let taken = block_on(take_approval(&store, q.approval(), Binding::new(p.principal(), p.tool(), p.args()), now));
                        if let Ok(pending) = taken {
                            let answer = q.answer().cloned().unwrap_or_else(|| panic!("answered"));
                            let verdict = pending.decide(&answer.action, answer.content.as_ref(), now);
                            prop_assert!(matches!(verdict, Verdict::Approved(_)));
                            prop_assert!(now < q.expires_at());
                            prop_assert_eq!(first.get(&q.approval()), Some(&true));
                            prop_assert!(!applied.contains(&q.approval()), "applied twice");
                            applied.push(q.approval());
                        }
                    }
                    Step::Close => {
                        let Some(p) = &last else { continue };
                        block_on(close_question(
                            &store, Binding::new(p.principal(), p.tool(), p.args()), p.id(), now,
                        ));
                    }
                    Step::Wait(s) => now += Duration::seconds(s),
                }
            }
        }
    }
}
