//! Step 3 of a write: ask the person.
//!
//! The question is built from the preview through one renderer ([`PromptInput`]), opened in the
//! store for its whole clock (mcp-write-guard-core's `open_question`: a second call of the same
//! change finds it instead of asking again), then put in the request's protocol era: below
//! 2026-07-28 an `elicitation/create` form, whose answer this call waits for (see
//! [`super::settle`]); from 2026-07-28 an `InputRequiredResult` whose `requestState` names the
//! stored approval, answered on the retry (see [`super::decide`]). A store that is down, or a
//! person with too many open approvals, is a refusal; one `asked` record says what was shown.

use mcp_write_guard_core::{
    DenyReason, PendingApproval, ToolName,
    question::{Opened, Question},
    render::render_key,
};
use rmcp::{
    ServerHandler,
    model::ElicitRequestParams,
    service::{RequestContext, RoleServer},
};
use serde_json::{Map, Value};

use super::{
    Call,
    capture::{AdminTarget, Captured},
    channels::Channels,
    refusal::Refusal,
    settle::{Asking, Settled, UrlQuestion},
};
use crate::{
    audit::{Channel, Outcome},
    elicit::{self, Era},
    prompt::{PromptInput, default_prompt},
};

/// A question ready to be put to the client: its request (a form, or the page's link), the
/// text the person is shown, and the channel that answers it.
pub(super) struct Put {
    pub(super) request: ElicitRequestParams,
    pub(super) shown: String,
    pub(super) channel: Channel,
    /// For the page's link: its elicitation id and the notice for a client that will not show
    /// it.
    pub(super) url: Option<UrlQuestion>,
}

impl<S: ServerHandler> Channels<'_, S> {
    /// Asks the person about `captured`: on the approval page when the client can open it, by
    /// a notice when the client cannot ask at all, else with a form.
    pub(super) async fn ask(
        &self,
        captured: Captured,
        context: &RequestContext<RoleServer>,
    ) -> Result<Settled, Refusal> {
        let Captured {
            call,
            pending,
            admin_target,
        } = captured;
        let prompt = self.prompt_for(&pending, admin_target.as_ref());
        #[cfg(feature = "approval-page")]
        if let Some(page) = self.page_to_ask_on(context) {
            let subject = self.page_subject(&pending, admin_target.as_ref());
            let call = call.on(Channel::Page);
            let (pages, notifier) = (&page.pages, page.notifier.as_deref());
            return self
                .ask_on_page(&call, pending, subject, &prompt, pages, notifier, context)
                .await
                .map_err(|refusal| refusal.at(&call));
        }
        let call = call.on(Channel::Form);
        self.ask_by_form(&call, pending, prompt, context)
            .await
            .map_err(|refusal| refusal.at(&call))
    }

    /// Asks with a form: the question opened in the store (or the same change's open question
    /// joined), then put.
    async fn ask_by_form(
        &self,
        call: &Call,
        pending: PendingApproval,
        prompt: String,
        context: &RequestContext<RoleServer>,
    ) -> Result<Settled, Refusal> {
        let form = elicit::approval_form(prompt.clone()).map_err(|error| {
            Refusal::new(
                Outcome::AskFailed,
                error.to_string(),
                "The approval question could not be prepared, so nothing was saved.",
            )
        })?;
        let books = self.books();
        if let Opened::Existing(question) = books
            .approvals
            .open_question(&pending, books.now())
            .await
            .map_err(|error| books.store_failed(&error))?
        {
            let (principal, args) = (pending.principal(), pending.args());
            return self
                .settle(call, question, principal, args, None, context)
                .await;
        }
        let put = Put {
            request: form,
            shown: prompt,
            channel: Channel::Form,
            url: None,
        };
        self.put(call, pending, put, context).await
    }

    /// Puts the opened question to the client in the request's protocol era: from 2026-07-28
    /// an input request whose `requestState` names the stored approval (answered on the
    /// retry); below, an `elicitation/create` this call waits for until the clock's end.
    pub(super) async fn put(
        &self,
        call: &Call,
        pending: PendingApproval,
        put: Put,
        context: &RequestContext<RoleServer>,
    ) -> Result<Settled, Refusal> {
        let books = self.books();
        let (approvals, now) = (books.approvals, books.now());
        let era = elicit::era(context);
        if era == Era::InputRounds {
            let state = approvals
                .open_question_round_trip(&pending, now)
                .await
                .map_err(|error| books.store_failed(&error))?;
            books.record_asked(call, &pending, &put.shown, era, put.channel);
            let asked = elicit::input_required(put.request, state.to_string());
            return Ok(Settled::Respond(asked.into()));
        }
        let Some(time_left) = pending.time_left(now) else {
            if let Some(page) = pending.page() {
                approvals.withdraw_page(page, now).await;
            }
            books.forget(&pending).await;
            return Err(Refusal::denied(DenyReason::Expired));
        };
        books.record_asked(call, &pending, &put.shown, era, put.channel);
        let asking = Asking::new(elicit::ask_until(context, put.request, time_left), put.url)
            .in_flight(self.asked_now, pending.id());
        let (principal, args) = (pending.principal(), pending.args());
        let question = Question::asked(&pending);
        self.settle(call, question, principal, args, Some(asking), context)
            .await
    }

    /// The question: the tool's own wording, or the default. For `prepare_admin_action`: the
    /// target tool's question (its wording, or the default, with the target's preview when it
    /// has one) after a sentence saying what approving it does.
    pub(super) fn prompt_for(
        &self,
        pending: &PendingApproval,
        admin_target: Option<&AdminTarget>,
    ) -> String {
        let (tool, arguments, preview) = self.shown(pending, admin_target);
        let input = PromptInput::new(tool.as_str(), &arguments, preview);
        let question = match self.prompts.get(tool.as_str()) {
            Some(custom) => custom(&input),
            None => default_prompt(&input),
        };
        if admin_target.is_none() {
            return question;
        }
        format!(
            "Allow preparing an admin action? It issues a one-time confirmation token for tool \
             {} with exactly these arguments; the action itself will ask you again before it \
             runs.\n{question}",
            render_key(tool.as_str())
        )
    }

    /// What the person is shown about `pending`, in a form or on the page: the tool and its
    /// arguments without the token (for `prepare_admin_action`, the target's), and the preview
    /// when the tool has one (for `prepare_admin_action` the stored preview is the target's, see
    /// capture).
    pub(super) fn shown<'a>(
        &self,
        pending: &'a PendingApproval,
        admin_target: Option<&'a AdminTarget>,
    ) -> (&'a ToolName, Map<String, Value>, Option<&'a Value>) {
        let (tool, arguments) = match admin_target {
            Some(target) => (&target.tool, target.args.without_token()),
            None => (pending.tool(), pending.args().without_token()),
        };
        let preview = self
            .tool_calls
            .previews
            .contains(tool.as_str())
            .then(|| pending.preview());
        (tool, arguments, preview)
    }
}
