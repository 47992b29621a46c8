//! Step 4 of a write: the person's answer becomes an [`Approved`] or a refusal (DESIGN step 7).
//!
//! mcp-write-guard-core decides: only `accept` with `approve == true`, inside the approval clock,
//! approves, and [`PendingApproval::decide`] consumes the pending approval, so the arguments
//! that reach the apply are the ones the person was asked about.

use mcp_write_guard_core::{
    Approved, CapturedArgs, PendingApproval, Principal, Verdict, take_round_trip,
};
use rmcp::{ServerHandler, model::CallToolResponse};

use super::{Call, admit::Retry, refusal::Refusal};
use crate::{
    WriteGuard,
    audit::Outcome,
    elicit::{self, Answer},
};

/// What a 2026-07-28 retry comes to.
pub(super) enum Retried {
    /// The answer was decided: approved (a refusal is the `Err` beside it).
    Decided(Approved),
    /// The person has not answered on the approval page yet: ask again with the same page.
    #[cfg_attr(
        not(feature = "approval-page"),
        expect(dead_code, reason = "asked on pages only")
    )]
    AskAgain(CallToolResponse),
}

impl<S: ServerHandler> WriteGuard<S> {
    /// Decides on an answer to `pending`.
    pub(super) fn decide(
        &self,
        call: &Call,
        pending: PendingApproval,
        answer: &Answer,
    ) -> Result<Approved, Refusal> {
        let now = self.shared.clock.now();
        match pending.decide(&answer.action, answer.content.as_ref(), now) {
            Verdict::Approved(approved) => {
                self.record(call, Outcome::Approved, None);
                Ok(approved)
            }
            Verdict::Denied(reason) => Err(Refusal::denied(reason)),
        }
    }

    /// A 2026-07-28 retry: the `requestState` names the pending approval (taken once, only by
    /// the same principal, tool and arguments, only while the clock runs), the input responses
    /// carry the answer (for a question on the approval page: only whether the person went
    /// there; the page holds the answer).
    pub(super) async fn decide_retry(
        &self,
        call: &mut Call,
        principal: &Principal,
        args: CapturedArgs,
        retry: Retry,
    ) -> Result<Retried, Refusal> {
        // One instant for the whole retry: the state is taken while the clock runs, and the
        // page is read at that same instant.
        let now = self.shared.clock.now();
        let pending = take_round_trip(
            &*self.shared.store,
            &retry.state,
            principal,
            &call.tool,
            &args,
            now,
        )
        .await
        .map_err(Refusal::rejection)?;
        call.approval = Some(pending.id());
        let answer = elicit::answer_from_responses(retry.responses)
            .map_err(|error| Refusal::ask_failed(&error));
        if let Some(page) = pending.page().copied() {
            return self.retry_on_page(call, pending, page, answer, now).await;
        }
        self.decide(call, pending, &answer?).map(Retried::Decided)
    }

    /// A retry of a question on the approval page, without the `approval-page` feature (a
    /// store shared with a build that has it): nobody here can show the page.
    #[cfg(not(feature = "approval-page"))]
    async fn retry_on_page(
        &self,
        call: &mut Call,
        _pending: PendingApproval,
        _page: mcp_write_guard_core::PageId,
        _answer: Result<elicit::Answer, Refusal>,
        _now: time::OffsetDateTime,
    ) -> Result<Retried, Refusal> {
        call.channel = Some(crate::audit::Channel::Page);
        Err(Refusal::ask_failed(&crate::error::Error::Ask(
            "this server cannot serve the approval page".into(),
        )))
    }
}
