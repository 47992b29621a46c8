//! [`Approvals`]: everything this crate keeps in a [`Store`] (confirmation tokens, stored
//! approvals, round-trip states, questions and approval pages), reached through one handle.
//!
//! Every method takes typed ids: a caller parses what came over the wire once, at its edge
//! ([`token::token_in`](crate::token::token_in) or [`token::parse_token`](crate::token::parse_token)
//! for a `confirmationToken`, [`round_trip::parse_state`](crate::round_trip::parse_state) for a
//! `requestState`, `PageId`'s [`FromStr`](std::str::FromStr) for a page's URL), so a malformed
//! id is refused there, with the same refusal as always, and never reaches the store. Every
//! take checks the record against a [`Binding`]: the principal, tool and exact arguments it was
//! made for.

use time::OffsetDateTime;

use crate::approval::PendingApproval;
use crate::binding::Binding;
use crate::ids::{ApprovalId, ConfirmationToken, DefinitionDigest, Principal, StateId, TokenId};
use crate::page::{
    PageAnswered, PageChoice, PageId, PageOutcome, PagePerson, PageRefusal, PageSubject, PageView,
};
use crate::policy::ApprovalPolicy;
use crate::question::{GivenAnswer, Opened, Question};
use crate::round_trip::RoundTripRejection;
use crate::store::{Store, StoreError};
use crate::token::TokenRejection;
use crate::{page, question, round_trip, token};

/// The tokens, approvals, round trips, questions and pages kept in one store.
///
/// A borrowed handle: `Approvals::new(&store)` costs nothing, so make one where it is used.
///
/// ```
/// # futures_util::FutureExt::now_or_never(async {
/// use mcp_write_guard_core::{
///     Approvals, ApprovalPolicy, Binding, CapturedArgs, MemoryStore, Principal, ToolName,
///     canonical::ArgLimits, ids::DefinitionDigest, token::TokenRejection,
/// };
/// use time::OffsetDateTime;
///
/// let store = MemoryStore::new();
/// let approvals = Approvals::new(&store);
/// let (alice, tool) = (Principal::new("alice"), ToolName::new("delete_order"));
/// let args = CapturedArgs::capture_value(&serde_json::json!({"orderId": 7}), &ArgLimits::default())?;
/// let call = Binding::new(&alice, &tool, &args);
/// let definition = DefinitionDigest::from_bytes([0; 32]);
/// let now = OffsetDateTime::now_utc();
/// let token = approvals
///     .issue_token(call, definition, &ApprovalPolicy::default(), now)
///     .await?;
/// let id = token.as_str().parse()?;
/// assert_eq!(approvals.spend_token(&id, call, definition, now).await, Ok(()));
/// assert_eq!(
///     approvals.spend_token(&id, call, definition, now).await,
///     Err(TokenRejection::AlreadySpent)
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap().unwrap();
/// ```
#[derive(Debug)]
pub struct Approvals<'s, S: Store + ?Sized> {
    store: &'s S,
}

impl<S: Store + ?Sized> Clone for Approvals<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S: Store + ?Sized> Copy for Approvals<'_, S> {}

impl<'s, S: Store + ?Sized> Approvals<'s, S> {
    /// The records kept in `store`.
    pub fn new(store: &'s S) -> Self {
        Self { store }
    }

    /// Issues a confirmation token for `call` (bound to
    /// [`CapturedArgs::token_digest`](crate::CapturedArgs::token_digest), so a `confirmationToken` member in the arguments is
    /// ignored) while its tool has the definition `definition`, live from `now` for
    /// [`ApprovalPolicy::token_ttl`] (default 300 s). Call this only after the person approved
    /// issuing it.
    ///
    /// # Errors
    /// The store's error: no token was issued.
    pub async fn issue_token(
        self,
        call: Binding<'_>,
        definition: DefinitionDigest,
        policy: &ApprovalPolicy,
        now: OffsetDateTime,
    ) -> Result<ConfirmationToken, StoreError> {
        token::issue_token(self.store, call, definition, policy, now).await
    }

    /// Spends `token` for `call`, whose tool now has the definition `definition`: `Ok(())`
    /// exactly once, for a live token issued for this principal, this tool while it had this
    /// definition, and these arguments. Atomic; **any attempt that finds a live token uses it
    /// up**, a mismatched one included (fail closed).
    ///
    /// # Errors
    /// Why the token was not spent; a store error is [`TokenRejection::Store`].
    pub async fn spend_token(
        self,
        token: &TokenId,
        call: Binding<'_>,
        definition: DefinitionDigest,
        now: OffsetDateTime,
    ) -> Result<(), TokenRejection> {
        token::spend_token(self.store, token, call, definition, now).await
    }

    /// Checks `token` exactly as [`spend_token`](Self::spend_token) would, **without spending
    /// it**: use it to refuse early. It grants nothing; a mismatched check burns nothing.
    ///
    /// # Errors
    /// Why a spend at `now` would be refused.
    pub async fn check_token(
        self,
        token: &TokenId,
        call: Binding<'_>,
        definition: DefinitionDigest,
        now: OffsetDateTime,
    ) -> Result<(), TokenRejection> {
        token::check_token(self.store, token, call, definition, now).await
    }

    /// Stores `pending` under its own [`ApprovalId`] until its approval clock runs out. Store
    /// each pending approval once: its id is its key, and a pending approval stored again after
    /// it was taken would be taken again.
    ///
    /// # Errors
    /// The store's error: nothing was stored.
    pub async fn store_approval(
        self,
        pending: &PendingApproval,
        now: OffsetDateTime,
    ) -> Result<ApprovalId, StoreError> {
        round_trip::store_approval(self.store, pending, now).await
    }

    /// Takes the stored approval `id` once, for `call`: while its clock runs, and only when
    /// principal, tool and the digest of the arguments all match. Any attempt that finds it
    /// uses it up (fail closed).
    ///
    /// # Errors
    /// Why it was not taken.
    pub async fn take_approval(
        self,
        id: ApprovalId,
        call: Binding<'_>,
        now: OffsetDateTime,
    ) -> Result<PendingApproval, RoundTripRejection> {
        round_trip::take_approval(self.store, id, call, now).await
    }

    /// A copy of the stored approval `id` for `call` (the same checks as
    /// [`take_approval`](Self::take_approval)), to put the same question again. Grants nothing:
    /// the approval stays, and is still taken once.
    ///
    /// # Errors
    /// The same refusals as a take; nothing is used up.
    pub async fn peek_approval(
        self,
        id: ApprovalId,
        call: Binding<'_>,
        now: OffsetDateTime,
    ) -> Result<PendingApproval, RoundTripRejection> {
        round_trip::peek_approval(self.store, id, call, now).await
    }

    /// Stores `pending` as the state of an input-required round trip (MCP 2026-07-28) and
    /// returns the `requestState` to hand to the client; it expires with the approval clock,
    /// and holds its principal's place in the cap until then.
    ///
    /// # Errors
    /// The store's error.
    pub async fn open_round_trip(
        self,
        pending: &PendingApproval,
        now: OffsetDateTime,
    ) -> Result<StateId, StoreError> {
        round_trip::open_round_trip(self.store, pending, now).await
    }

    /// [`open_round_trip`](Self::open_round_trip) for a question opened with
    /// [`open_question`](Self::open_question): the question's stored approval already holds
    /// the principal's place in the cap, so the state does not hold a second one.
    ///
    /// # Errors
    /// The store's error.
    pub async fn open_question_round_trip(
        self,
        pending: &PendingApproval,
        now: OffsetDateTime,
    ) -> Result<StateId, StoreError> {
        round_trip::open_question_round_trip(self.store, pending, now).await
    }

    /// Takes the round-trip state `state` (the client's echoed `requestState`) once, for
    /// `call`; the same checks as [`take_approval`](Self::take_approval). The approval returned
    /// still has to [`decide`](PendingApproval::decide) the person's answer.
    ///
    /// # Errors
    /// Why it was not taken.
    pub async fn take_round_trip(
        self,
        state: StateId,
        call: Binding<'_>,
        now: OffsetDateTime,
    ) -> Result<PendingApproval, RoundTripRejection> {
        round_trip::take_round_trip(self.store, state, call, now).await
    }

    /// Opens the question `pending` asks (after its page, if any, was opened), or finds the
    /// same question already asked: one question per principal, tool and exact arguments.
    ///
    /// # Errors
    /// The store's error: nothing is asked.
    pub async fn open_question(
        self,
        pending: &PendingApproval,
        now: OffsetDateTime,
    ) -> Result<Opened, StoreError> {
        question::open_question(self.store, pending, now).await
    }

    /// The question about `call`, if one was asked and is not yet forgotten, with its answer
    /// (an answer given on its page is taken over as the question's answer).
    ///
    /// # Errors
    /// The store's error, or a record it cannot read.
    pub async fn find_question(
        self,
        call: Binding<'_>,
        now: OffsetDateTime,
    ) -> Result<Option<Question>, StoreError> {
        question::find_question(self.store, call, now).await
    }

    /// `question` as the store holds it now, for `principal` who asked it.
    ///
    /// # Errors
    /// The store's error, or a record it cannot read.
    pub async fn refresh_question(
        self,
        question: Question,
        principal: &Principal,
        now: OffsetDateTime,
    ) -> Result<Question, StoreError> {
        question::refresh_question(self.store, question, principal, now).await
    }

    /// Keeps `answer` as `question`'s answer if it is the first, whatever the channel; returns
    /// the answer that counts.
    ///
    /// # Errors
    /// The store's error: the answer was not kept (and counts for nothing).
    pub async fn answer_question(
        self,
        question: &Question,
        principal: &Principal,
        answer: GivenAnswer,
        now: OffsetDateTime,
    ) -> Result<GivenAnswer, StoreError> {
        question::answer_question(self.store, question, principal, answer, now).await
    }

    /// Forgets the question about `call` if it is still the one about `approval`. Best effort.
    pub async fn close_question(
        self,
        call: Binding<'_>,
        approval: ApprovalId,
        now: OffsetDateTime,
    ) {
        question::close_question(self.store, call, approval, now).await;
    }

    /// Opens an approval page for `pending` showing `subject`, until its clock runs out, and
    /// returns the approval, now asked about on that page.
    ///
    /// # Errors
    /// The store's error, or no random bytes from the operating system.
    pub async fn open_page(
        self,
        pending: PendingApproval,
        subject: PageSubject,
        now: OffsetDateTime,
    ) -> Result<PendingApproval, StoreError> {
        page::open_page(self.store, pending, subject, now).await
    }

    /// What the page `id` shows at `now`. Reads only.
    pub async fn show_page(self, id: &PageId, now: OffsetDateTime) -> PageView {
        page::show_page(self.store, id, now).await
    }

    /// The person at `person` chose `choice` on the page `id` with the form's `csrf` token: the
    /// token and the person are checked first (a refusal changes nothing), then the page is
    /// taken once and the answer kept for the guard.
    ///
    /// # Errors
    /// A [`PageRefusal`]: nothing was recorded.
    pub async fn answer_page(
        self,
        id: &PageId,
        csrf: &str,
        person: PagePerson<'_>,
        choice: PageChoice,
        now: OffsetDateTime,
    ) -> Result<PageAnswered, PageRefusal> {
        page::answer_page(self.store, id, csrf, person, choice, now).await
    }

    /// Takes the person's answer on the page `id`, if there is one (once), else says whether the
    /// page is still open.
    pub async fn page_outcome(self, id: &PageId, now: OffsetDateTime) -> PageOutcome {
        page::page_outcome(self.store, id, now).await
    }

    /// Closes the page `id` if it is still open, so nobody can answer on it any more.
    pub async fn withdraw_page(self, id: &PageId, now: OffsetDateTime) {
        page::withdraw_page(self.store, id, now).await;
    }
}
