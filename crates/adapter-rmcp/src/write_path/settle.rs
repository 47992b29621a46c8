//! A question outlives the call that asked it: what a question comes to for this call.
//!
//! Every question lives in the store for its whole clock (mcp-write-guard-core's
//! `open_question`), bound to the principal, the tool and the exact arguments. A call that asks,
//! a call of the same change that finds the question open, and a 2026-07-28 retry all end here:
//!
//! - **approved** (by any channel, now or while an earlier call waited): the approval is taken
//!   from the store, once, and decided; of any number of calls, exactly one gets it;
//! - **refused** (declined, cancelled, expired): refused, nothing saved;
//! - **open**: below 2026-07-28 the call waits for the answer (the question's own form, the
//!   page, or another call's form), sending `notifications/progress` while it waits; from
//!   2026-07-28 the same question is put again (same approval id, same clock); a client that
//!   cannot be asked is told to call again once the person answered.
//!
//! A call whose client gave up (cancelled, or a dropped request) keeps listening for the form's
//! answer and records it, but applies nothing: the next call of the same change applies it.

use std::{collections::HashMap, future::Future, pin::Pin, sync::Arc, time::Duration};

use mcp_write_guard_core::{
    AnswerAction, ApprovalId, Binding, CapturedArgs, DenyReason, Principal,
    answer::AnswerChannel,
    question::{GivenAnswer, Question, QuestionStatus, question_status},
};
use rmcp::{
    ServerHandler,
    model::{CallToolResponse, ProgressNotificationParam, ProgressToken},
    service::{Peer, RequestContext, RoleServer},
};

use super::{
    Call, admit::Admitted, books::Books, capture::AdminTarget, channels::Channels, refusal::Refusal,
};
use crate::{
    audit::{Channel, Outcome},
    elicit::{self, Answer, Era},
    error::Error,
    notify::Notice,
    tools::PREPARE_ADMIN_ACTION,
};

/// How often a waiting call looks at the store again (answers given on another replica).
const POLL_EVERY: Duration = Duration::from_millis(250);

/// The most calls of one question that wait for its answer on this process besides the one that
/// asked (below 2026-07-28). A further call of the same change is told at once that the person
/// has not answered yet: waiting calls hold memory and poll the store, and a client sending the
/// same call again and again must not multiply either.
pub const MAX_WAITING_PER_QUESTION: usize = 8;

/// A question this call put to the client (`elicitation/create`), still in flight.
pub(super) struct Asking<'a> {
    answer: Pin<Box<dyn Future<Output = Result<Answer, Error>> + Send + 'a>>,
    /// For a url-mode question: its elicitation id, completed once the page is answered.
    url_elicitation: Option<String>,
    /// For a url-mode question: the notice that reaches the person instead when the client
    /// will not show the link (it answers the question with an error, not an answer).
    #[cfg_attr(not(feature = "approval-page"), allow(dead_code))]
    notice: Option<Notice>,
    /// Says, while this lives, that a client of this process has the question in front of it.
    _in_flight: Option<Counted>,
}

/// A url-mode question as it is put to the client: the request, its elicitation id, and the
/// notice a notifier sends instead if the client will not show it.
pub(super) struct UrlQuestion {
    pub(super) elicitation_id: String,
    pub(super) notice: Notice,
}

impl<'a> Asking<'a> {
    pub(super) fn new(
        answer: impl Future<Output = Result<Answer, Error>> + Send + 'a,
        url: Option<UrlQuestion>,
    ) -> Self {
        let (url_elicitation, notice) = match url {
            Some(url) => (Some(url.elicitation_id), Some(url.notice)),
            None => (None, None),
        };
        Self {
            answer: Box::pin(answer),
            url_elicitation,
            notice,
            _in_flight: None,
        }
    }

    /// The same, counted in `asked` under `approval` while it lives.
    pub(super) fn in_flight(mut self, asked: &Arc<PerQuestion>, approval: ApprovalId) -> Self {
        self._in_flight = PerQuestion::enter(asked, approval, usize::MAX);
        self
    }
}

/// Calls of this process counted per question while they live: the ones that have the
/// question in front of their client now ([`Shared::asked_now`], below 2026-07-28: a later call
/// of the same change waits for that answer instead of putting the question again; a question
/// asked on another replica is not here, and there the later call puts the same question again,
/// same approval id and clock, and the first answer counts), and the ones waiting for its answer
/// ([`Shared::waiting_now`], at most [`MAX_WAITING_PER_QUESTION`]).
///
/// [`Shared::asked_now`]: crate::guard::Shared
/// [`Shared::waiting_now`]: crate::guard::Shared
#[derive(Debug, Default)]
pub(crate) struct PerQuestion {
    counts: parking_lot::Mutex<HashMap<ApprovalId, usize>>,
}

impl PerQuestion {
    fn any(&self, approval: ApprovalId) -> bool {
        self.counts.lock().contains_key(&approval)
    }

    /// Counts one more call of `approval` while the returned guard lives, unless `max` are
    /// counted already.
    fn enter(registry: &Arc<Self>, approval: ApprovalId, max: usize) -> Option<Counted> {
        let mut counts = registry.counts.lock();
        let count = counts.entry(approval).or_default();
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(Counted {
            registry: Arc::clone(registry),
            approval,
        })
    }
}

/// One call counted in a [`PerQuestion`] until dropped.
struct Counted {
    registry: Arc<PerQuestion>,
    approval: ApprovalId,
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut counts = self.registry.counts.lock();
        if let Some(count) = counts.get_mut(&self.approval) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.approval);
            }
        }
    }
}

/// What a question comes to for this call.
pub(super) enum Settled {
    /// Approved: the approval was taken from the store (once); apply it. The call as the
    /// question names it (its approval id and channel), for the apply's audit records.
    Approved(mcp_write_guard_core::Approved, Call),
    /// Answer the call with this (the question put again, or the person asked elsewhere).
    Respond(CallToolResponse),
}

/// `notifications/progress` while a call waits, when its request carried a `progressToken`.
struct Progress {
    token: Option<ProgressToken>,
    interval: tokio::time::Interval,
    sent: u32,
}

impl Progress {
    fn new(context: &RequestContext<RoleServer>, every: Duration) -> Self {
        let every = every.max(Duration::from_millis(100));
        let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            token: context.meta.get_progress_token(),
            interval,
            sent: 0,
        }
    }

    /// Waits for the next tick; never, without a token.
    async fn tick(&mut self) {
        if self.token.is_some() {
            self.interval.tick().await;
        } else {
            std::future::pending::<()>().await;
        }
    }

    async fn send(&mut self, peer: &Peer<RoleServer>) {
        let Some(token) = self.token.clone() else {
            return;
        };
        self.sent = self.sent.saturating_add(1);
        let progress = ProgressNotificationParam::new(token, f64::from(self.sent))
            .with_message("Waiting for the person's answer to the approval question");
        // Best effort: a client that cannot take it still gets its answer.
        let _ignored = peer.notify_progress(progress).await;
    }
}

/// One call's wait for its question's end, as far as it has come.
struct Wait<'a> {
    question: Question,
    /// The question this call put to its client, while it is in flight.
    asking: Option<Asking<'a>>,
    /// For a url-mode question this call put: its elicitation id.
    url_elicitation: Option<String>,
    /// This call put the question to its client (once is enough).
    asked_here: bool,
    era: Era,
    /// The client can be asked neither with a form nor with the page's link.
    headless: bool,
    progress: Progress,
    poll: tokio::time::Interval,
    /// The end of the question's clock.
    deadline: tokio::time::Instant,
    /// Counts this call among the ones waiting for the question, while it does.
    _waiting: Option<Counted>,
}

impl Wait<'_> {
    /// A form's answer reaches only this call: it keeps listening for it even when its client
    /// gave up, so the answer counts for the next call. A page keeps its own.
    fn listening(&self) -> bool {
        self.asking
            .as_ref()
            .is_some_and(|asking| asking.url_elicitation.is_none())
    }

    /// The refusal that tells the client the person has not answered yet.
    fn awaiting(&self) -> Refusal {
        Refusal::awaiting(self.question.expires_at())
    }
}

/// What a call that has not put the question to its client does next.
enum Unasked {
    /// Answer the call with the question put again (from 2026-07-28).
    Respond(CallToolResponse),
    /// The question changed meanwhile: look at it again.
    Recheck,
    /// Wait for the answer.
    Listen,
}

/// The call a question is settled for: its audit context, who made it with which arguments,
/// and the request it came in.
#[derive(Clone, Copy)]
struct Settling<'c> {
    call: &'c Call,
    principal: &'c Principal,
    args: &'c CapturedArgs,
    context: &'c RequestContext<RoleServer>,
}

impl Settling<'_> {
    fn binding(&self) -> Binding<'_> {
        Binding::new(self.principal, &self.call.tool, self.args)
    }
}

impl<S: ServerHandler> Channels<'_, S> {
    /// Before asking: the question of this very change, if one is open or answered. `None`:
    /// ask.
    pub(super) async fn join(
        &self,
        admitted: &Admitted,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<Settled>, Refusal> {
        let (call, principal, args) = (&admitted.call, &admitted.principal, &admitted.args);
        let books = self.books();
        let found = books
            .find(Binding::new(principal, &call.tool, args))
            .await?;
        match found {
            Some(question) => self
                .settle(call, question, principal, args, None, context)
                .await
                .map(Some),
            None => Ok(None),
        }
    }

    /// Takes `question` to its end for this call; `asking` is the question this call put to
    /// the client, if it did.
    pub(super) async fn settle(
        &self,
        call: &Call,
        question: Question,
        principal: &Principal,
        args: &CapturedArgs,
        asking: Option<Asking<'_>>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Settled, Refusal> {
        let channel = if question.page().is_some() {
            Channel::Page
        } else {
            Channel::Form
        };
        let call = call.with_approval(question.approval()).on(channel);
        #[cfg(feature = "approval-page")]
        let page = question.page().copied();
        let approval = question.approval();
        let on = Settling {
            call: &call,
            principal,
            args,
            context,
        };
        let settled = self
            .settle_steps(on, question, asking)
            .await
            .map_err(|refusal| refusal.at(&call));
        // A refusal told to this call's client ends the question (the next call of the same
        // change asks anew); one nobody reads (the client gave up), or "call again", leaves it
        // for the next call.
        if let Err(refusal) = &settled
            && refusal.outcome != Outcome::AwaitingAnswer
            && !context.ct.is_cancelled()
        {
            self.books().close(on.binding(), approval).await;
        }
        #[cfg(feature = "approval-page")]
        if let (Some(page), Some(pages)) = (page, self.pages) {
            pages.forget(&page);
        }
        settled
    }

    /// Looks at the question until it ends for this call: approved, refused, put again, or
    /// the call told to call again.
    async fn settle_steps(
        &self,
        on: Settling<'_>,
        question: Question,
        asking: Option<Asking<'_>>,
    ) -> Result<Settled, Refusal> {
        let mut wait = self.wait_for(question, asking, on.context)?;
        loop {
            let (question, link) = (&wait.question, wait.url_elicitation.as_deref());
            if let Some(end) = self.ended(on, question, link).await {
                return end;
            }
            if !wait.listening() && on.context.ct.is_cancelled() {
                return Err(wait.awaiting());
            }
            if wait.asking.is_none() {
                match self.unasked(on, &mut wait).await? {
                    Unasked::Respond(response) => return Ok(Settled::Respond(response)),
                    Unasked::Recheck => continue,
                    Unasked::Listen => {}
                }
            }
            self.listen(on, &mut wait).await?;
        }
    }

    /// Starts this call's wait for `question`. A call that found the question open waits for
    /// it only while few others do.
    fn wait_for<'a>(
        &self,
        question: Question,
        asking: Option<Asking<'a>>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Wait<'a>, Refusal> {
        let era = elicit::era(context);
        let headless = !self.can_be_asked(context);
        let mut poll = tokio::time::interval(POLL_EVERY);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let left = question.expires_at() - self.books().now();
        let deadline =
            tokio::time::Instant::now() + Duration::try_from(left).unwrap_or(Duration::ZERO);
        let asked_here = asking.is_some();
        let open = question_status(&question, self.books().now()) == QuestionStatus::Open;
        let mut waiting = None;
        if open && !asked_here && era == Era::Legacy && !headless {
            let waiting_now = self.waiting_now;
            waiting =
                PerQuestion::enter(waiting_now, question.approval(), MAX_WAITING_PER_QUESTION);
            if waiting.is_none() {
                return Err(Refusal::awaiting(question.expires_at()));
            }
        }
        Ok(Wait {
            url_elicitation: asking.as_ref().and_then(|a| a.url_elicitation.clone()),
            question,
            asking,
            asked_here,
            era,
            headless,
            progress: Progress::new(context, self.progress_every),
            poll,
            deadline,
            _waiting: waiting,
        })
    }

    /// The end of the question for this call, if it has ended: approved (the approval taken
    /// once; the link's elicitation, `link`, completed) or refused.
    async fn ended(
        &self,
        on: Settling<'_>,
        question: &Question,
        link: Option<&str>,
    ) -> Option<Result<Settled, Refusal>> {
        match question_status(question, self.books().now()) {
            QuestionStatus::Approved => {
                if let Some(id) = link {
                    elicit::complete(on.context, id).await;
                }
                Some(take_approved(self.books(), on, question).await)
            }
            QuestionStatus::Refused(reason) => {
                self.books().withdraw(question).await;
                if on.context.ct.is_cancelled() {
                    // Nobody reads this refusal: the next call of the change is told.
                    return Some(Err(Refusal::awaiting(question.expires_at())));
                }
                Some(Err(Refusal::denied(reason)))
            }
            QuestionStatus::Open => None,
        }
    }

    /// The question is open and this call has not put it to its client (or its answer came):
    /// a client that cannot be asked is told to call again; from 2026-07-28 the same question
    /// is put again; below, when nobody here has it in front of them (it was asked by a call
    /// that is gone, or on another replica), this call puts the same question again.
    async fn unasked<'a>(&self, on: Settling<'a>, wait: &mut Wait<'a>) -> Result<Unasked, Refusal> {
        // A client that cannot be asked never gets the question (nor the page's link).
        if wait.headless {
            return Err(wait.awaiting());
        }
        if wait.era == Era::InputRounds {
            let question = &wait.question;
            return self.present_again(on, question).await.map(Unasked::Respond);
        }
        if wait.asked_here || self.asked_now.any(wait.question.approval()) {
            return Ok(Unasked::Listen);
        }
        // Only a question still open, as the store has it now, is put again.
        let question = wait.question.clone();
        wait.question = self.books().reread(question, on.principal).await?;
        if question_status(&wait.question, self.books().now()) != QuestionStatus::Open {
            return Ok(Unasked::Recheck);
        }
        wait.asked_here = true;
        let again = self.ask_again(on, &wait.question).await?;
        wait.url_elicitation.clone_from(&again.url_elicitation);
        wait.asking = Some(again);
        Ok(Unasked::Listen)
    }

    /// Waits for the next thing that can change the question for this call: the client's
    /// answer, the page's, another replica's (polled), the end of the clock, or the client
    /// giving up; sends progress meanwhile.
    async fn listen(&self, on: Settling<'_>, wait: &mut Wait<'_>) -> Result<(), Refusal> {
        let (principal, context) = (on.principal, on.context);
        let listening = wait.listening();
        let Wait {
            question,
            asking,
            url_elicitation,
            progress,
            poll,
            deadline,
            ..
        } = wait;
        let answered = async {
            match asking.as_mut() {
                Some(asking) => asking.answer.as_mut().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            answer = answered => {
                let (link, gave_up) = (url_elicitation.is_some(), context.ct.is_cancelled());
                *question = self
                    .on_answer(on, question, asking, link, gave_up, answer)
                    .await?;
            }
            () = self.page_answered(question) => {
                *question = self.books().reread(question.clone(), principal).await?;
            }
            _ = poll.tick() => *question = self.books().reread(question.clone(), principal).await?,
            () = progress.tick() => progress.send(&context.peer).await,
            () = tokio::time::sleep_until(*deadline) => {
                if !listening {
                    self.books().withdraw(question).await;
                    return Err(Refusal::denied(DenyReason::Expired));
                }
            }
            () = context.ct.cancelled(), if !listening => {
                return Err(Refusal::awaiting(question.expires_at()));
            }
        }
        Ok(())
    }

    /// The client answered the question this call put (`asking`, taken). `link`: it was the
    /// page's link, and an error (not an answer) means the client would not show it: nobody
    /// was asked here. A notifier asks the person instead; without one, the question is over.
    async fn on_answer(
        &self,
        on: Settling<'_>,
        question: &Question,
        asking: &mut Option<Asking<'_>>,
        link: bool,
        gave_up: bool,
        answer: Result<Answer, Error>,
    ) -> Result<Question, Refusal> {
        let asked = asking.take();
        #[cfg(feature = "approval-page")]
        if let Err(error) = &answer
            && link
            && !matches!(error, Error::TimedOut)
            && !gave_up
        {
            let notice = asked.and_then(|asked| asked.notice);
            return Err(self
                .link_not_shown(on.call, question, on.principal, notice, error)
                .await);
        }
        #[cfg(not(feature = "approval-page"))]
        let _ = link;
        // Still in flight until the answer is kept: a call of the same change that looks
        // meanwhile waits for it rather than asking again.
        let heard = heard(self.books(), on, question.clone(), answer, gave_up).await;
        drop(asked);
        heard
    }

    /// From 2026-07-28, for a call that found its question open: the same question again (the
    /// same approval id and clock), with a fresh `requestState`.
    async fn present_again(
        &self,
        on: Settling<'_>,
        question: &Question,
    ) -> Result<CallToolResponse, Refusal> {
        let books = self.books();
        let now = books.now();
        let pending = books.peek(on.binding(), question.approval(), now).await?;
        // Counted: each time the same question is put again holds a place in the principal's
        // cap, so calls of one open question cannot fill the store.
        let state = books
            .approvals
            .open_round_trip(&pending, now)
            .await
            .map_err(|error| books.store_failed(&error))?;
        let (asked, _) = self.same_question(on, &pending).await?;
        Ok(elicit::input_required(asked, state.to_string()).into())
    }

    /// Below 2026-07-28, for a call that found its question open and nobody here asking it:
    /// the same question again, in this call, until the clock's end.
    async fn ask_again<'a>(
        &self,
        on: Settling<'a>,
        question: &Question,
    ) -> Result<Asking<'a>, Refusal> {
        let books = self.books();
        let now = books.now();
        let pending = books.peek(on.binding(), question.approval(), now).await?;
        let Some(time_left) = pending.time_left(now) else {
            return Err(Refusal::denied(DenyReason::Expired));
        };
        let (asked, url) = self.same_question(on, &pending).await?;
        Ok(
            Asking::new(elicit::ask_until(on.context, asked, time_left), url)
                .in_flight(self.asked_now, pending.id()),
        )
    }

    /// The question about `pending` as it was put: the page's link to a client that opens
    /// links (URL mode) when it is asked on a page, else the form (whichever channel answers
    /// first counts). Beside a link: its elicitation id and the notice for a client that will
    /// not show it.
    async fn same_question(
        &self,
        on: Settling<'_>,
        pending: &mcp_write_guard_core::PendingApproval,
    ) -> Result<(rmcp::model::ElicitRequestParams, Option<UrlQuestion>), Refusal> {
        let (call, context) = (on.call, on.context);
        let admin_target: Option<AdminTarget> = if call.tool.as_str() == PREPARE_ADMIN_ACTION {
            Some(
                self.tool_calls
                    .admin_target(pending.args(), context)
                    .await?,
            )
        } else {
            None
        };
        let prompt = self.prompt_for(pending, admin_target.as_ref());
        #[cfg(feature = "approval-page")]
        if let (Some(page), Some(pages)) = (pending.page(), self.page_for(context)) {
            let message = format!(
                "The approval page for {} is still waiting for your answer: approve or decline \
                 the change there.",
                mcp_write_guard_core::render::render_key(pending.tool().as_str())
            );
            let url = pages.config.url(page);
            let notice = self.page_notice(pending, admin_target.as_ref(), &prompt, url.clone());
            let id = pending.id().to_string();
            let asked = elicit::url_request(message, url, id.clone());
            let url = UrlQuestion {
                elicitation_id: id,
                notice,
            };
            return Ok((asked, Some(url)));
        }
        let form = elicit::approval_form(prompt).map_err(|error| Refusal::ask_failed(&error))?;
        Ok((form, None))
    }

    /// Wakes when the question's page is answered on this process; never, without a page.
    async fn page_answered(&self, question: &Question) {
        #[cfg(feature = "approval-page")]
        if let (Some(page), Some(pages)) = (question.page(), self.pages) {
            let waiter = pages.waiter(page);
            waiter.notified().await;
            return;
        }
        let _ = question;
        std::future::pending::<()>().await;
    }

    /// Whether this client can be asked at all: a form, or the page through URL mode.
    pub(super) fn can_be_asked(&self, context: &RequestContext<RoleServer>) -> bool {
        #[cfg(feature = "approval-page")]
        if self.page_for(context).is_some() {
            return true;
        }
        elicit::can_ask(context)
    }
}

/// The question is approved: take the approval (once) and decide on the answer. A call
/// whose client stopped waiting takes nothing: the approval stays for the next call.
async fn take_approved(
    books: Books<'_>,
    on: Settling<'_>,
    question: &Question,
) -> Result<Settled, Refusal> {
    if on.context.ct.is_cancelled() {
        return Err(Refusal::awaiting(question.expires_at()));
    }
    let (call, binding) = (on.call, on.binding());
    let taken = books.take(binding, question.approval()).await;
    // Taken or not, this question is over: the next call of the same change asks anew.
    books.close(binding, question.approval()).await;
    let pending = taken?;
    let answer = match question.answer() {
        Some(given) => Answer {
            action: given.action.clone(),
            content: given.content.clone(),
        },
        None => Answer {
            action: AnswerAction::Other("none".into()),
            content: None,
        },
    };
    let approved = books.decide(call, pending, &answer)?;
    Ok(Settled::Approved(approved, call.clone()))
}

/// The client answered this call's own question: the first answer of the question is
/// kept (an answer on another channel may have come first). A url-mode question's `accept`
/// only says the page was opened; its `decline` or `cancel` is the answer. When the client
/// gave up on the call (`gave_up`), an `answered` record says the answer was kept: the
/// decision is the next call's.
async fn heard(
    books: Books<'_>,
    on: Settling<'_>,
    question: Question,
    answer: Result<Answer, Error>,
    gave_up: bool,
) -> Result<Question, Refusal> {
    let on_page = question.page().is_some();
    let answer = match answer {
        Ok(answer) if on_page && answer.action == AnswerAction::Accept => return Ok(question),
        Ok(answer) => answer,
        // Until the clock's end: the deadline says expired.
        Err(Error::TimedOut) => return Ok(question),
        // The page can still be answered.
        Err(_) if on_page => return Ok(question),
        Err(error) => return Err(Refusal::ask_failed(&error)),
    };
    let now = books.now();
    let given = GivenAnswer::new(answer.action, answer.content, AnswerChannel::Form, now);
    let counted = books
        .approvals
        .answer_question(&question, on.principal, given, now)
        .await
        .map_err(|error| books.store_failed(&error))?;
    if gave_up && counted.channel == AnswerChannel::Form {
        let action = match &counted.action {
            AnswerAction::Accept => "accept",
            AnswerAction::Decline => "decline",
            AnswerAction::Cancel => "cancel",
            AnswerAction::Other(other) => other.as_str(),
        };
        books.record(on.call, Outcome::Answered, Some(action.to_owned()));
    }
    Ok(question.with_answer(counted))
}
