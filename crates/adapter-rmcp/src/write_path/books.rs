//! The steps that keep the books: what a write call reads from and writes to the guard's store
//! (questions, stored approvals, tokens), the decision on an answer, and the audit records.
//!
//! They borrow four things of the guard, [`Books`], and nothing else: no inner server, no
//! client, no page. The steps that talk to those (admit, capture, ask, settle's waiting, apply)
//! go through the guard and call these for every read, write and record.

use mcp_write_guard_core::{
    ApprovalId, ApprovalPolicy, Approvals, Approved, Binding, Clock, PendingApproval, Principal,
    Store, StoreError, Verdict,
    ids::ConfirmationToken,
    question::Question,
    round_trip::RoundTripRejection,
    token::{TokenRejection, parse_token},
};
use time::OffsetDateTime;

use super::{Call, refusal::Refusal};
use crate::{
    audit::{Asked as AskedRecord, AuditRecord, AuditSink, Channel, Outcome, Redaction},
    elicit::{Answer, Era},
};

/// What the book-keeping steps borrow of the guard: the approvals in its store, its clock, its
/// approval policy and its audit trail (with what it redacts).
#[derive(Clone, Copy)]
pub(crate) struct Books<'g> {
    /// The approvals, tokens, questions and pages in the store.
    pub(crate) approvals: Approvals<'g, dyn Store>,
    pub(crate) clock: &'g dyn Clock,
    pub(crate) policy: &'g ApprovalPolicy,
    pub(crate) audit: &'g dyn AuditSink,
    pub(crate) redaction: &'g Redaction,
}

impl<'g> Books<'g> {
    /// The clock's time now.
    pub(super) fn now(self) -> OffsetDateTime {
        self.clock.now()
    }

    /// The refusal of a call whose store read or write failed.
    pub(super) fn store_failed(self, error: &StoreError) -> Refusal {
        Refusal::store(error, self.policy)
    }

    /// Sends one audit record of `call`.
    pub(super) fn record(self, call: &Call, outcome: Outcome, reason: Option<String>) {
        self.audit.record(&self.record_of(call, outcome, reason));
    }

    /// The `asked` record: what the person was shown of `pending` (`prompt`), under which
    /// approval id, until when, in which era and on which channel.
    pub(super) fn record_asked(
        self,
        call: &Call,
        pending: &PendingApproval,
        prompt: &str,
        era: Era,
        channel: Channel,
    ) {
        let asked = AskedRecord::new(pending, prompt, era, channel, self.redaction);
        let record = self.record_of(call, Outcome::Asked, None).with_asked(asked);
        self.audit.record(&record);
    }

    /// An audit record of `call`, now.
    fn record_of(self, call: &Call, outcome: Outcome, reason: Option<String>) -> AuditRecord {
        AuditRecord::new(
            self.now(),
            call.principal.clone(),
            call.tool.as_str(),
            call.digest,
            outcome,
            reason,
        )
        .with_approval(call.approval)
        .with_channel(call.channel)
    }

    /// The answer to `pending`'s question turned into an approval (recorded), or a refusal:
    /// mcp-write-guard-core decides.
    pub(super) fn decide(
        self,
        call: &Call,
        pending: PendingApproval,
        answer: &Answer,
    ) -> Result<Approved, Refusal> {
        match pending.decide(&answer.action, answer.content.as_ref(), self.now()) {
            Verdict::Approved(approved) => {
                self.record(call, Outcome::Approved, None);
                Ok(approved)
            }
            Verdict::Denied(reason) => Err(Refusal::denied(reason)),
        }
    }

    /// The open or answered question of the change `binding` names, if there is one.
    pub(super) async fn find(self, binding: Binding<'_>) -> Result<Option<Question>, Refusal> {
        self.approvals
            .find_question(binding, self.now())
            .await
            .map_err(|error| self.store_failed(&error))
    }

    /// Takes the question's stored approval (once): the person's approval is for this call.
    pub(super) async fn take(
        self,
        binding: Binding<'_>,
        approval: ApprovalId,
    ) -> Result<PendingApproval, Refusal> {
        self.approvals
            .take_approval(approval, binding, self.now())
            .await
            .map_err(used_or_rejected)
    }

    /// A copy of the question's stored approval, to put the same question again (nothing is
    /// taken: the apply still takes it once).
    pub(super) async fn peek(
        self,
        binding: Binding<'_>,
        approval: ApprovalId,
        now: OffsetDateTime,
    ) -> Result<PendingApproval, Refusal> {
        self.approvals
            .peek_approval(approval, binding, now)
            .await
            .map_err(used_or_rejected)
    }

    /// The question as the store holds it now (an answer on another channel or replica, read
    /// by its approval id: an index closed meanwhile does not hide it).
    pub(super) async fn reread(
        self,
        question: Question,
        principal: &Principal,
    ) -> Result<Question, Refusal> {
        self.approvals
            .refresh_question(question, principal, self.now())
            .await
            .map_err(|error| self.store_failed(&error))
    }

    /// Forgets the question's index, so the next call of the same change asks anew.
    pub(super) async fn close(self, binding: Binding<'_>, approval: ApprovalId) {
        self.approvals
            .close_question(binding, approval, self.now())
            .await;
    }

    /// Forgets the question of `pending`, and its stored approval (it will not be asked after
    /// all), so it holds no place in the principal's cap.
    pub(super) async fn forget(self, pending: &PendingApproval) {
        let binding = Binding::new(pending.principal(), pending.tool(), pending.args());
        let now = self.now();
        self.approvals
            .close_question(binding, pending.id(), now)
            .await;
        let _gone = self
            .approvals
            .take_approval(pending.id(), binding, now)
            .await;
    }

    /// Closes the question that `binding` finds, when its clock has ended (a retry that came
    /// too late): the next call of the same change asks anew.
    pub(super) async fn close_expired(self, binding: Binding<'_>) {
        let now = self.now();
        if let Ok(Some(found)) = self.approvals.find_question(binding, now).await
            && now >= found.expires_at()
        {
            self.approvals
                .close_question(binding, found.approval(), now)
                .await;
        }
    }

    /// Closes the question's page, if it has one, so nobody answers it any more.
    pub(super) async fn withdraw(self, question: &Question) {
        #[cfg(feature = "approval-page")]
        if let Some(page) = question.page() {
            self.approvals.withdraw_page(page, self.now()).await;
        }
        #[cfg(not(feature = "approval-page"))]
        let _ = question;
    }

    /// Spends the confirmation token the approved arguments carry: bound to this principal,
    /// tool, arguments and definition, once.
    pub(super) async fn spend(self, approved: &Approved) -> Result<(), TokenRejection> {
        let Some(token) = approved.args().confirmation_token() else {
            return Err(TokenRejection::Missing);
        };
        let token = parse_token(token)?;
        let call = Binding::new(approved.principal(), approved.tool(), approved.args());
        self.approvals
            .spend_token(&token, call, approved.definition(), self.now())
            .await
    }

    /// Issues the admin confirmation token for `binding` (the target tool and its arguments),
    /// approved by the person as `approved`.
    pub(super) async fn issue_token(
        self,
        binding: Binding<'_>,
        approved: &Approved,
    ) -> Result<ConfirmationToken, Refusal> {
        self.approvals
            .issue_token(binding, approved.definition(), self.policy, self.now())
            .await
            .map_err(|error| self.store_failed(&error))
    }
}

/// A question's approval that could not be read or taken: gone because another call of the
/// same change took it (or it was forgotten), or refused for another reason.
pub(super) fn used_or_rejected(rejection: RoundTripRejection) -> Refusal {
    match rejection {
        RoundTripRejection::Replayed | RoundTripRejection::Unknown => Refusal::already_used(),
        other => Refusal::rejection(other),
    }
}
