//! Step 4 of a write: the person's answer becomes an [`Approved`] or a refusal (DESIGN step 7).
//!
//! mcp-write-guard-core decides: only `accept` with `approve == true`, inside the approval clock,
//! approves, and [`PendingApproval::decide`] consumes the pending approval, so the arguments
//! that reach the apply are the ones the person was asked about.

use mcp_write_guard_core::{
    Approved, CapturedArgs, PendingApproval, Principal, Verdict, take_round_trip,
};
use rmcp::ServerHandler;

use super::{Call, admit::Retry, refusal::Refusal};
use crate::{
    WriteGuard,
    audit::Outcome,
    elicit::{self, Answer},
};

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
    /// carry the answer.
    pub(super) async fn decide_retry(
        &self,
        call: &mut Call,
        principal: &Principal,
        args: CapturedArgs,
        retry: Retry,
    ) -> Result<Approved, Refusal> {
        let pending = take_round_trip(
            &*self.shared.store,
            &retry.state,
            principal,
            &call.tool,
            &args,
            self.shared.clock.now(),
        )
        .await
        .map_err(Refusal::rejection)?;
        call.approval = Some(pending.id());
        let answer = elicit::answer_from_responses(retry.responses)
            .map_err(|error| Refusal::ask_failed(&error))?;
        self.decide(call, pending, &answer)
    }
}
