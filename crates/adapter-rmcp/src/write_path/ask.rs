//! Step 3 of a write: ask the person (DESIGN step 6).
//!
//! The question is built from the preview through one renderer ([`PromptInput`]), then put in
//! the request's protocol era: below 2026-07-28 an `elicitation/create` form, answered within
//! what is left of the approval clock; from 2026-07-28 an `InputRequiredResult` whose
//! `requestState` names the stored approval, answered on the retry (see [`super::decide`]).
//! Either way the open approval lives in the store (a store that is down, or a person with too
//! many open approvals, is a refusal), and one `asked` record says what was shown.

use mcp_write_guard_core::{ApprovalId, PendingApproval, ToolName, render_key, take_approval};
use rmcp::{
    ServerHandler,
    model::CallToolResponse,
    service::{RequestContext, RoleServer},
};
use serde_json::{Map, Value};

use super::{
    Call,
    capture::{AdminTarget, Captured},
    refusal::Refusal,
};
use crate::{
    WriteGuard,
    audit::{Asked as AskedRecord, AuditRecord, Channel, Outcome},
    elicit::{self, Answer, Era},
    error::Error,
    prompt::{PromptInput, default_prompt},
};

/// How the question was put.
pub(super) enum Asked {
    /// Below 2026-07-28: the person answered within this request. `pending` is the approval as
    /// taken back from the store, once.
    Answered {
        pending: PendingApproval,
        answer: Answer,
    },
    /// From 2026-07-28: the client must retry with the answer; this is what it gets now.
    OnRetry(CallToolResponse),
}

impl<S: ServerHandler> WriteGuard<S> {
    pub(super) async fn ask(
        &self,
        call: &mut Call,
        captured: Captured,
        context: &RequestContext<RoleServer>,
    ) -> Result<Asked, Refusal> {
        let Captured {
            pending,
            admin_target,
        } = captured;
        let prompt = self.prompt_for(&pending, admin_target.as_ref());
        #[cfg(feature = "approval-page")]
        if let Some(pages) = self.page_for(context) {
            let subject = self.page_subject(&pending, admin_target.as_ref());
            return self
                .ask_on_page(call, pending, subject, &prompt, &pages, context)
                .await;
        }
        call.channel = Some(Channel::Form);
        let form = elicit::approval_form(prompt.clone()).map_err(|error| {
            Refusal::new(
                Outcome::AskFailed,
                error.to_string(),
                "The approval question could not be prepared, so nothing was saved.",
            )
        })?;
        let store = &*self.shared.store;
        let now = self.shared.clock.now();
        let era = elicit::era(context);
        match era {
            Era::InputRounds => {
                let state = mcp_write_guard_core::open_round_trip(store, &pending, now)
                    .await
                    .map_err(|error| Refusal::store(&error, &self.shared.policy))?;
                self.record_asked(call, &pending, &prompt, era, Channel::Form);
                Ok(Asked::OnRetry(
                    elicit::input_required(form, state.to_string()).into(),
                ))
            }
            Era::Legacy => {
                let Some(time_left) = pending.time_left(now) else {
                    return Err(Refusal::denied(mcp_write_guard_core::DenyReason::Expired));
                };
                let id = mcp_write_guard_core::store_approval(store, &pending, now)
                    .await
                    .map_err(|error| Refusal::store(&error, &self.shared.policy))?;
                self.record_asked(call, &pending, &prompt, era, Channel::Form);
                let answer = elicit::ask_legacy(context, form, time_left).await;
                self.take_back(id, &pending, answer).await
            }
        }
    }

    /// Below 2026-07-28, once the question is over: takes the approval `id` back from the
    /// store, once, whatever the answer (so the slot is freed); only the approval taken from
    /// the store may continue, with the answer.
    pub(super) async fn take_back(
        &self,
        id: ApprovalId,
        pending: &PendingApproval,
        answer: Result<Answer, Error>,
    ) -> Result<Asked, Refusal> {
        let taken = take_approval(
            &*self.shared.store,
            &id.to_string(),
            pending.principal(),
            pending.tool(),
            pending.args(),
            self.shared.clock.now(),
        )
        .await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(Error::TimedOut) => {
                return Err(Refusal::denied(mcp_write_guard_core::DenyReason::Expired));
            }
            Err(error) => return Err(Refusal::ask_failed(&error)),
        };
        let pending = taken.map_err(Refusal::rejection)?;
        Ok(Asked::Answered { pending, answer })
    }

    /// The question: the tool's own wording, or the default. For `prepare_admin_action`: the
    /// target tool's question (its wording, or the default, with the target's preview when it
    /// has one) after a sentence saying what approving it does.
    fn prompt_for(&self, pending: &PendingApproval, admin_target: Option<&AdminTarget>) -> String {
        let (tool, arguments, preview) = self.shown(pending, admin_target);
        let input = PromptInput::new(tool.as_str(), &arguments, preview);
        let question = match self.shared.prompts.get(tool.as_str()) {
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
            .shared
            .previews
            .contains(tool.as_str())
            .then(|| pending.preview());
        (tool, arguments, preview)
    }

    /// The `asked` record: what the person was shown, under which approval id, until when.
    pub(super) fn record_asked(
        &self,
        call: &Call,
        pending: &PendingApproval,
        prompt: &str,
        era: Era,
        channel: Channel,
    ) {
        let asked = AskedRecord::new(pending, prompt, era, channel, &self.shared.redaction);
        let record = AuditRecord::new(
            self.shared.clock.now(),
            call.principal.clone(),
            call.tool.as_str(),
            call.digest,
            Outcome::Asked,
            None,
        )
        .with_approval(call.approval)
        .with_channel(call.channel)
        .with_asked(asked);
        self.shared.audit.record(&record);
    }
}
