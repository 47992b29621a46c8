//! Asking on the approval page (feature `approval-page`): the page variant of [`super::ask`] and
//! of the 2026-07-28 retry in [`super::decide`].
//!
//! The pending approval is opened on a page ([`open_page`]) and the client is asked to send the
//! person there: below 2026-07-28 with a url-mode `elicitation/create`, then the call waits for
//! the page's answer up to the end of the clock; from 2026-07-28 with a url-mode input request,
//! and each retry looks at the page. The client's own answer only says whether the person went
//! to the page: `decline` or `cancel` is a denial and withdraws the page, `accept` approves
//! nothing by itself. The page's answer is decided by [`PendingApproval::decide`], as a form
//! answer is.

use std::sync::Arc;

use mcp_write_guard_core::{
    AnswerAction, PageId, PageOutcome, PageSubject, PendingApproval, open_page, open_round_trip,
    page_outcome, render_key, store_approval, withdraw_page,
};
use rmcp::{
    ServerHandler,
    service::{RequestContext, RoleServer},
};
use tokio::sync::Notify;

use super::{Call, ask::Asked, capture::AdminTarget, decide::Retried, refusal::Refusal};
use crate::{
    WriteGuard,
    audit::Channel,
    elicit::{self, Answer, Era},
    error::Error,
    page::Pages,
};

impl<S: ServerHandler> WriteGuard<S> {
    /// The page to ask on, when one is configured and the client can open it (URL mode).
    pub(super) fn page_for(&self, context: &RequestContext<RoleServer>) -> Option<Arc<Pages>> {
        let pages = self.shared.pages.as_ref()?;
        elicit::can_ask_url(context).then(|| Arc::clone(pages))
    }

    /// What the page shows about `pending`: the tool and arguments the person approves (for
    /// `prepare_admin_action`, the target's), and the preview when the tool has one.
    pub(super) fn page_subject(
        &self,
        pending: &PendingApproval,
        admin_target: Option<&AdminTarget>,
    ) -> PageSubject {
        let (tool, arguments, preview) = self.shown(pending, admin_target);
        let subject = PageSubject::new(tool.clone(), arguments, preview.cloned());
        if admin_target.is_some() {
            subject.issuing_token()
        } else {
            subject
        }
    }

    /// Asks about `pending` on a page of `pages`; `prompt` is the question a form would have
    /// carried, sent along as the message beside the link.
    pub(super) async fn ask_on_page(
        &self,
        call: &mut Call,
        pending: PendingApproval,
        subject: PageSubject,
        prompt: &str,
        pages: &Pages,
        context: &RequestContext<RoleServer>,
    ) -> Result<Asked, Refusal> {
        call.channel = Some(Channel::Page);
        let store = &*self.shared.store;
        let now = self.shared.clock.now();
        let store_refusal = |error| Refusal::store(&error, &self.shared.policy);
        let pending = open_page(store, pending, subject, now)
            .await
            .map_err(store_refusal)?;
        let page = *pending.page().ok_or_else(|| {
            Refusal::ask_failed(&Error::Ask("the approval page was not opened".into()))
        })?;
        let message = format!("{prompt}\nApprove or decline it on the server's approval page.");
        let question = elicit::url_request(
            message.clone(),
            pages.config.url(&page),
            pending.id().to_string(),
        );
        let era = elicit::era(context);
        match era {
            Era::InputRounds => {
                let state = open_round_trip(store, &pending, now)
                    .await
                    .map_err(store_refusal)?;
                self.record_asked(call, &pending, &message, era, Channel::Page);
                Ok(Asked::OnRetry(
                    elicit::input_required(question, state.to_string()).into(),
                ))
            }
            Era::Legacy => {
                let Some(time_left) = pending.time_left(now) else {
                    withdraw_page(store, &page, now).await;
                    return Err(Refusal::denied(mcp_write_guard_core::DenyReason::Expired));
                };
                let id = store_approval(store, &pending, now)
                    .await
                    .map_err(store_refusal)?;
                self.record_asked(call, &pending, &message, era, Channel::Page);
                let waiter = pages.waiter(&page);
                let answer = self
                    .answer_on_page(context, page, question, time_left, &waiter)
                    .await;
                pages.forget(&page);
                self.take_back(id, &pending, answer).await
            }
        }
    }

    /// Below 2026-07-28: sends the person to the page, then waits for the page's answer until
    /// `time_left` runs out. The client's `decline` or `cancel` is the answer (and withdraws the
    /// page); its `accept` only means the page was opened.
    async fn answer_on_page(
        &self,
        context: &RequestContext<RoleServer>,
        page: PageId,
        question: rmcp::model::ElicitRequestParams,
        time_left: std::time::Duration,
        waiter: &Notify,
    ) -> Result<Answer, Error> {
        let store = &*self.shared.store;
        let deadline = tokio::time::Instant::now() + time_left;
        let elicitation_id = match &question {
            rmcp::model::ElicitRequestParams::UrlElicitationParams { elicitation_id, .. } => {
                elicitation_id.clone()
            }
            _ => String::new(),
        };
        let opened = elicit::ask_legacy(context, question, time_left).await;
        match opened.map(|answer| answer.action) {
            Ok(AnswerAction::Accept) => {}
            Ok(action) => {
                withdraw_page(store, &page, self.shared.clock.now()).await;
                return Ok(Answer::action_only(action));
            }
            Err(error) => {
                withdraw_page(store, &page, self.shared.clock.now()).await;
                return Err(error);
            }
        }
        loop {
            // Registered before looking, so an answer in between still wakes this call.
            let notified = waiter.notified();
            match page_outcome(store, &page, self.shared.clock.now()).await {
                PageOutcome::Answered { action, content } => {
                    elicit::complete(context, &elicitation_id).await;
                    return Ok(Answer { action, content });
                }
                PageOutcome::Open => {}
                // Expired, or the store failed: nothing will be answered.
                PageOutcome::Closed | _ => return Err(Error::TimedOut),
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep(Pages::poll_every()) => {}
                () = tokio::time::sleep_until(deadline) => {
                    withdraw_page(store, &page, self.shared.clock.now()).await;
                    return Err(Error::TimedOut);
                }
                () = context.ct.cancelled() => {
                    withdraw_page(store, &page, self.shared.clock.now()).await;
                    return Err(Error::Cancelled);
                }
            }
        }
    }

    /// From 2026-07-28: a retry of a call asked on `page`, whose round trip was taken at `now`
    /// (so the approval clock still ran then). The client's `accept` sends the guard to the
    /// page: answered, it is decided; still open, the person is asked again with the same page
    /// on the same clock; anything else is a refusal.
    pub(super) async fn retry_on_page(
        &self,
        call: &mut Call,
        pending: PendingApproval,
        page: PageId,
        client: Result<Answer, Refusal>,
        now: time::OffsetDateTime,
    ) -> Result<Retried, Refusal> {
        call.channel = Some(Channel::Page);
        let store = &*self.shared.store;
        let client = match client {
            Ok(client) => client,
            Err(refusal) => {
                withdraw_page(store, &page, now).await;
                return Err(refusal);
            }
        };
        if client.action != AnswerAction::Accept {
            withdraw_page(store, &page, now).await;
            let answer = Answer::action_only(client.action);
            return self.decide(call, pending, &answer).map(Retried::Decided);
        }
        let answer = match page_outcome(store, &page, now).await {
            PageOutcome::Answered { action, content } => Answer { action, content },
            // Still open, and the clock ran at `now`, when the round trip was taken.
            PageOutcome::Open => {
                let Some(pages) = &self.shared.pages else {
                    withdraw_page(store, &page, now).await;
                    return Err(Refusal::ask_failed(&Error::Ask(
                        "no approval page is configured".into(),
                    )));
                };
                let state = open_round_trip(store, &pending, now)
                    .await
                    .map_err(|error| Refusal::store(&error, &self.shared.policy))?;
                let message = format!(
                    "The approval page for {} is still waiting for your answer: approve or \
                     decline the change there.",
                    render_key(pending.tool().as_str())
                );
                let question =
                    elicit::url_request(message, pages.config.url(&page), pending.id().to_string());
                return Ok(Retried::AskAgain(
                    elicit::input_required(question, state.to_string()).into(),
                ));
            }
            PageOutcome::Closed | _ => {
                withdraw_page(store, &page, now).await;
                return Err(Refusal::denied(mcp_write_guard_core::DenyReason::Expired));
            }
        };
        self.decide(call, pending, &answer).map(Retried::Decided)
    }
}
