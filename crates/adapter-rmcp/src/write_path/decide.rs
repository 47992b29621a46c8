//! Step 4 of a write: the person's answer becomes an [`Approved`](mcp_write_guard_core::Approved) or a refusal.
//!
//! mcp-write-guard-core decides: only `accept` with `approve == true`, inside the approval clock,
//! approves, and [`PendingApproval::decide`] consumes the pending approval, so the arguments
//! that reach the apply are the ones the person was asked about.

use mcp_write_guard_core::{
    AnswerAction, Binding, PendingApproval,
    answer::AnswerChannel,
    question::{GivenAnswer, Question},
    round_trip::{RoundTripRejection, parse_state},
};
use rmcp::{
    ServerHandler,
    model::InputResponses,
    service::{RequestContext, RoleServer},
};

use super::{
    Call,
    admit::{Admitted, Retry},
    books::Books,
    channels::Channels,
    refusal::Refusal,
    settle::Settled,
};
use crate::elicit;

impl<S: ServerHandler> Channels<'_, S> {
    /// A 2026-07-28 retry: the `requestState` names the question's round trip (taken once, only
    /// by the same principal, tool and arguments, only while the clock runs); the input
    /// responses carry the answer (for a question on the approval page: only whether the person
    /// went there; the page holds the answer). The answer is kept as the question's (the first
    /// answer counts), then the question is settled like any other: approved, the approval is
    /// taken once and applied; still open, the same question is put again.
    pub(super) async fn decide_retry(
        &self,
        admitted: Admitted,
        retry: Retry,
        context: &RequestContext<RoleServer>,
    ) -> Result<Settled, Refusal> {
        let Admitted {
            call,
            principal,
            args,
            ..
        } = admitted;
        let books = self.books();
        let binding = Binding::new(&principal, &call.tool, &args);
        let taken = match parse_state(&retry.state) {
            Ok(state) => {
                let approvals = books.approvals;
                approvals.take_round_trip(state, binding, books.now()).await
            }
            Err(malformed) => Err(malformed),
        };
        let pending = match taken {
            Ok(pending) => pending,
            Err(rejection) => {
                if rejection == RoundTripRejection::Expired {
                    books.close_expired(binding).await;
                }
                return Err(Refusal::rejection(rejection));
            }
        };
        let call = call.with_approval(pending.id());
        let question = retried_question(books, &call, &pending, retry.responses)
            .await
            .map_err(|refusal| refusal.at(&call))?;
        self.settle(&call, question, &principal, &args, None, context)
            .await
    }
}

/// The retried question, with the answer the retry carries kept as its answer (the first
/// answer counts): as the store holds it (another channel may have answered), else as the
/// round trip remembers it (its index was closed: the clock and the approval decide).
async fn retried_question(
    books: Books<'_>,
    call: &Call,
    pending: &PendingApproval,
    responses: Option<InputResponses>,
) -> Result<Question, Refusal> {
    let (approvals, now) = (books.approvals, books.now());
    let (principal, args) = (pending.principal(), pending.args());
    let found = books
        .find(Binding::new(principal, &call.tool, args))
        .await?;
    let question = match found {
        Some(found) if found.approval() == pending.id() => found,
        _ => Question::asked(pending),
    };
    let on_page = question.page().is_some();
    match elicit::answer_from_responses(responses) {
        Err(error) => {
            if on_page {
                books.withdraw(&question).await;
            }
            Err(Refusal::ask_failed(&error))
        }
        // On a page, the client's accept only says the person went there.
        Ok(answer) if on_page && answer.action == AnswerAction::Accept => Ok(question),
        Ok(_) if question.answer().is_some() => Ok(question),
        Ok(answer) => {
            let given = GivenAnswer::new(answer.action, answer.content, AnswerChannel::Form, now);
            let counted = approvals
                .answer_question(&question, principal, given, now)
                .await
                .map_err(|error| books.store_failed(&error))?;
            Ok(question.with_answer(counted))
        }
    }
}
