//! Asking on the approval page (feature `approval-page`): the page variant of [`super::ask`],
//! and the notice that reaches a person when the client cannot ask at all.
//!
//! The pending approval is opened on a page ([`Approvals::open_page`]), then as a question
//! ([`Approvals::open_question`]), and the client is asked to send the person there: below
//! 2026-07-28 with a url-mode `elicitation/create`, then the call waits for the page's answer up
//! to the end of the clock (see [`super::settle`]); from 2026-07-28 with a url-mode input
//! request, and each retry looks at the question. The client's own answer only says whether the
//! person went to the page: `decline` or `cancel` is the answer (and withdraws the page),
//! `accept` approves nothing by itself. The page's answer is decided like a form answer.
//!
//! A client that cannot be asked at all (no elicitation) is answered at once when a
//! [`Notifier`] is configured: the question is opened on the page, the notifier sends the person
//! its link, and the model is told that a person was asked and to call again with the same
//! arguments. The link never reaches the model.

use std::sync::Arc;

#[cfg(doc)]
use mcp_write_guard_core::Approvals;
use mcp_write_guard_core::{
    AnswerAction, PendingApproval, Principal,
    answer::AnswerChannel,
    page::{PageId, PageSubject},
    question::{GivenAnswer, Opened, Question},
};
use rmcp::{
    ServerHandler,
    service::{RequestContext, RoleServer},
};
use time::format_description::well_known::Rfc3339;

use super::{
    Call,
    ask::Put,
    books::Books,
    capture::AdminTarget,
    channels::Channels,
    refusal::Refusal,
    settle::{Settled, UrlQuestion},
};
use crate::{
    audit::{Channel, Outcome},
    elicit,
    error::Error,
    notify::{Notice, Notifier},
    page::Pages,
};

impl<S: ServerHandler> Channels<'_, S> {
    /// The page to ask on, when one is configured and the client can open it (URL mode).
    pub(super) fn page_for(&self, context: &RequestContext<RoleServer>) -> Option<Arc<Pages>> {
        let pages = self.pages?;
        elicit::can_ask_url(context).then(|| Arc::clone(pages))
    }

    /// The page and the notifier that reach a person when the client cannot ask, when both are
    /// configured.
    pub(super) fn notice_channel(&self) -> Option<(Arc<Pages>, Arc<dyn Notifier>)> {
        let pages = self.pages?;
        let notifier = self.notifier?;
        Some((Arc::clone(pages), Arc::clone(notifier)))
    }

    /// The page to ask on: the client opens it (URL mode); or, when the client cannot ask at
    /// all, a notifier sends the person its link. `None`: ask with a form.
    pub(super) fn page_to_ask_on(&self, context: &RequestContext<RoleServer>) -> Option<PageToAsk> {
        if let Some(pages) = self.page_for(context) {
            return Some(PageToAsk {
                pages,
                notifier: None,
            });
        }
        if elicit::can_ask(context) {
            return None;
        }
        let (pages, notifier) = self.notice_channel()?;
        Some(PageToAsk {
            pages,
            notifier: Some(notifier),
        })
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
    /// carried, sent along as the message beside the link. With a `notifier` (the client
    /// cannot ask at all), it sends the person the link and the call is answered at once (a
    /// person was asked; call again); without one, the client is sent the link.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn ask_on_page(
        &self,
        call: &Call,
        pending: PendingApproval,
        subject: PageSubject,
        prompt: &str,
        pages: &Pages,
        notifier: Option<&dyn Notifier>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Settled, Refusal> {
        let opened = match self
            .open_on_page(call, pending, subject, prompt, context)
            .await?
        {
            Ok(opened) => opened,
            Err(joined) => return Ok(joined),
        };
        let url = pages.config.url(&opened.page);
        if let Some(notifier) = notifier {
            return Err(self.notify(call, opened, url, notifier, context).await);
        }
        let OnPage {
            pending,
            message,
            tool_shown,
            ..
        } = opened;
        let elicitation_id = pending.id().to_string();
        let put = Put {
            request: elicit::url_request(message.clone(), url.clone(), elicitation_id.clone()),
            url: Some(UrlQuestion {
                elicitation_id,
                notice: self.notice(&pending, tool_shown, message.clone(), url),
            }),
            shown: message,
            channel: Channel::Page,
        };
        self.put(call, pending, put, context).await
    }

    /// Opens `pending` on a page, then as a question; `prompt` is the question a form would
    /// have carried. If the same change's question was open already, this page is withdrawn
    /// again and that question settles this call (`Err`).
    async fn open_on_page(
        &self,
        call: &Call,
        pending: PendingApproval,
        subject: PageSubject,
        prompt: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Result<OnPage, Settled>, Refusal> {
        let books = self.books();
        let (approvals, now) = (books.approvals, books.now());
        let tool_shown = subject.tool.as_str().to_owned();
        let pending = approvals
            .open_page(pending, subject, now)
            .await
            .map_err(|error| books.store_failed(&error))?;
        let opened = approvals.open_question(&pending, now).await;
        let page = pending.page().copied();
        if !matches!(opened, Ok(Opened::New))
            && let Some(page) = &page
        {
            approvals.withdraw_page(page, now).await;
        }
        match (opened.map_err(|error| books.store_failed(&error))?, page) {
            (Opened::New, Some(page)) => Ok(Ok(OnPage {
                pending,
                page,
                message: format!("{prompt}\n{ON_THE_PAGE}"),
                tool_shown,
            })),
            (Opened::New, None) => Err(Refusal::ask_failed(&Error::Ask(
                "the approval page was not opened".into(),
            ))),
            (Opened::Existing(question), _) => {
                let (principal, args) = (pending.principal(), pending.args());
                let joined = self.settle(call, question, principal, args, None, context);
                Ok(Err(joined.await?))
            }
        }
    }

    /// The client cannot ask: `notifier` sends the person the link of the page `opened`
    /// (at `url`); the refusal that tells the model so (or that nobody could be reached, when
    /// the question is withdrawn).
    async fn notify(
        &self,
        call: &Call,
        opened: OnPage,
        url: String,
        notifier: &dyn Notifier,
        context: &RequestContext<RoleServer>,
    ) -> Refusal {
        let books = self.books();
        let era = elicit::era(context);
        books.record_asked(call, &opened.pending, &opened.message, era, Channel::Page);
        let notice = self.notice(&opened.pending, opened.tool_shown, opened.message, url);
        let told = deliver(books, call, &notice, notifier).await;
        if told.outcome == Outcome::NotifyFailed {
            books
                .approvals
                .withdraw_page(&opened.page, books.now())
                .await;
            books.forget(&opened.pending).await;
        }
        told
    }

    /// The notice that tells a person about `pending` on the page at `url`: the tool they
    /// approve (for `prepare_admin_action`, the target) and the question as worded.
    pub(super) fn page_notice(
        &self,
        pending: &PendingApproval,
        admin_target: Option<&AdminTarget>,
        prompt: &str,
        url: String,
    ) -> Notice {
        let (tool, _, _) = self.shown(pending, admin_target);
        let message = format!("{prompt}\n{ON_THE_PAGE}");
        self.notice(pending, tool.as_str().to_owned(), message, url)
    }

    /// The notice about `pending`: `tool` and `message` as the person is shown them, the page
    /// at `url`.
    fn notice(
        &self,
        pending: &PendingApproval,
        tool: String,
        message: String,
        url: String,
    ) -> Notice {
        Notice::new(
            pending.id(),
            self.server_name.to_owned(),
            tool,
            message,
            url,
            pending.expires_at(),
        )
    }

    /// Below 2026-07-28, the client answered the page's link with an error (it will not show
    /// links, by policy or by fault): nobody was asked through it. With a notifier, the person
    /// is sent the same page's link instead (once per question: a later call of the same change
    /// whose client refuses the link too is told to call again, and nobody is notified twice) and
    /// the model is told to call again; without one (or when the notice fails), the question is
    /// over: the page is withdrawn, the question recorded as cancelled (so calls of the same
    /// change waiting for it end too) and the call refused, nothing saved.
    pub(super) async fn link_not_shown(
        &self,
        call: &Call,
        question: &Question,
        principal: &Principal,
        notice: Option<Notice>,
        error: &Error,
    ) -> Refusal {
        if let (Some(notice), Some(notifier)) = (notice, self.notifier.cloned()) {
            if !self.notices_sent.first(question, self.books().now()) {
                return Refusal::awaiting(question.expires_at());
            }
            let told = deliver(self.books(), call, &notice, &*notifier).await;
            if told.outcome != Outcome::NotifyFailed {
                return told;
            }
            self.notices_sent.forget(question);
            end_question(self.books(), question, principal).await;
            return told;
        }
        end_question(self.books(), question, principal).await;
        Refusal::ask_failed(error)
    }
}

/// What a person reads beside the question when they are sent to the page.
const ON_THE_PAGE: &str = "Approve or decline it on the server's approval page.";

/// The page a question is asked on, and the notifier that sends the person its link when the
/// client cannot ask.
pub(super) struct PageToAsk {
    pub(super) pages: Arc<Pages>,
    pub(super) notifier: Option<Arc<dyn Notifier>>,
}

/// A pending approval opened on a page, and what the person is told about it.
struct OnPage {
    pending: PendingApproval,
    page: PageId,
    /// The question as a form would have carried it, and where to answer it.
    message: String,
    /// The tool the person approves (for `prepare_admin_action`, the target).
    tool_shown: String,
}

/// Sends `notice` through `notifier`. Delivered: the refusal that tells the model a person
/// was asked and to call again (the question stays open). Not delivered
/// ([`Outcome::NotifyFailed`]): the refusal that says nobody could be reached; the caller
/// withdraws the question.
async fn deliver(
    books: Books<'_>,
    call: &Call,
    notice: &Notice,
    notifier: &dyn Notifier,
) -> Refusal {
    let channel = notifier.channel().to_owned();
    match notifier.notify(notice).await {
        Ok(()) => {
            books.record(
                call,
                Outcome::Notified,
                Some(format!("{channel}: delivered")),
            );
            let until = notice
                .expires_at
                .format(&Rfc3339)
                .unwrap_or_else(|_| notice.expires_at.to_string());
            Refusal::new(
                Outcome::AwaitingAnswer,
                format!("asked through {channel}"),
                format!(
                    "This client cannot show approval requests, so a person was asked to \
                     approve this change through another channel. Nothing was saved yet. \
                     Call this tool again with exactly the same arguments after they \
                     approve, before {until}; the change is applied then, once."
                ),
            )
        }
        Err(error) => Refusal::new(
            Outcome::NotifyFailed,
            format!("{channel}: {}", error.reason()),
            "This change needs a person's approval, but nobody could be reached (the \
             notification failed), so nothing was saved. Try again later; if it keeps \
             failing, ask the server's operator.",
        ),
    }
}

/// Ends `question` for every call: its page withdrawn, and the question answered `cancel`
/// (unless an answer came first), so calls of the same change waiting for it stop waiting.
async fn end_question(books: Books<'_>, question: &Question, principal: &Principal) {
    books.withdraw(question).await;
    let now = books.now();
    let cancelled = GivenAnswer::new(AnswerAction::Cancel, None, AnswerChannel::Form, now);
    let _first_answer = books
        .approvals
        .answer_question(question, principal, cancelled, now)
        .await;
}

/// The questions a notice was delivered for on this process, until their clock ends: a question
/// is notified once, however many calls of it find a client that will not show the link.
#[derive(Debug, Default)]
pub(crate) struct NoticesSent {
    sent: parking_lot::Mutex<
        std::collections::HashMap<mcp_write_guard_core::ApprovalId, time::OffsetDateTime>,
    >,
}

impl NoticesSent {
    /// Whether this is the first notice of `question` (then it is counted); forgets questions
    /// whose clock has ended.
    fn first(&self, question: &Question, now: time::OffsetDateTime) -> bool {
        let mut sent = self.sent.lock();
        sent.retain(|_, expires_at| *expires_at > now);
        sent.insert(question.approval(), question.expires_at())
            .is_none()
    }

    /// The notice of `question` was not delivered after all.
    fn forget(&self, question: &Question) {
        self.sent.lock().remove(&question.approval());
    }
}
