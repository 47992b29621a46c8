//! One `tools/call` through the guard (the write path of the README), as a short pipeline of
//! steps, each taking the state the step before it returned:
//!
//! ```text
//! admit ─► Admitted ─┬─ retry ─────────────────────────────► decide_retry ─┐
//!                    ├─ same change asked already ─────────► join ─────────┤
//!                    └─ capture ─► Captured ─► ask ─► put ─► settle ───────┴─► Approved ─► apply ─► wrap
//! ```
//!
//! - [`admit`]: who is asking, writes on, the arguments captured once, no task, a retry or
//!   not, the client can be asked (or a notifier can reach a person), the token would spend
//!   (the order is mcp-write-guard-core's `admit`). Returns the proof: `Admitted`.
//! - [`capture`]: what the person will approve: the tool's preview (the target's, for
//!   `prepare_admin_action`) and the pending approval (`Captured`).
//! - [`ask`]: the question on a channel (a form, the approval page, or a notice through a
//!   [`Notifier`](crate::notify::Notifier)), opened in the store, then put in the request's
//!   protocol era by one `put` whatever the channel; the `asked` audit record.
//! - [`settle`]: a question outlives its call. The same change's question, if one is open or
//!   answered, is joined instead of asking again; whatever asked it, a question ends here:
//!   approved (the approval taken once), refused, or still open (wait, put it again, or tell
//!   the client to call again).
//! - [`decide`]: the answer turned into an [`Approved`](mcp_write_guard_core::Approved) or a
//!   refusal (mcp-write-guard-core decides); the 2026-07-28 retry.
//! - [`apply`]: only an `Approved` gets here: the tool read again and refused unless its
//!   definition is the one the person approved, then spend the token, compare-and-apply (or
//!   issue the admin token).
//! - [`wrap`]: the result in the envelope.
//!
//! Each step borrows only what it reaches of the guard. [`admit`] is the guard's own (the
//! connection, the identity resolver and the write switches); capture and apply are methods of
//! [`ToolCalls`] (the inner server, which tools preview, the envelope); join, ask, settle and
//! the retry are methods of [`Channels`] (the form, the page, the notifier, the wording, this
//! process's questions in front of a client); and every store read or write, the decision on an
//! answer and every audit record go through [`Books`] (the approvals in the store, the clock,
//! the policy, the audit trail).
//!
//! Every state carries the [`Call`] as its step knows it (who, which arguments, which
//! question, which channel): the audit records of that step name it. Every step returns
//! `Result<_, Refusal>`; a [`Refusal`] carries the audit outcome, the audit reason, the answer
//! the model reads and the call it was refused at, and [`WriteGuard::write`] records it. Every
//! decision is taken by mcp-write-guard-policy, mcp-write-guard-core or envelope; these modules
//! sequence them and talk to rmcp.

mod admit;
mod apply;
mod ask;
mod books;
mod capture;
mod channels;
mod decide;
#[cfg(feature = "approval-page")]
mod page;
mod refusal;
mod settle;
mod tool_calls;
mod wrap;

use mcp_write_guard_core::{
    ApprovalId, Principal, ToolName, danger,
    definition::DefinitionError,
    ids::{ArgsDigest, DefinitionDigest},
};
use mcp_write_guard_policy::Classification;
use rmcp::{
    ErrorData, ServerHandler,
    model::{CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Tool},
    service::{RequestContext, RoleServer},
};

#[cfg(feature = "approval-page")]
pub(crate) use page::NoticesSent;
pub use refusal::{ALREADY_USED_MESSAGE, STALE_MESSAGE, STORE_UNAVAILABLE_MESSAGE};
pub use settle::MAX_WAITING_PER_QUESTION;
pub(crate) use settle::PerQuestion;
pub(crate) use {books::Books, channels::Channels, tool_calls::ToolCalls};

use self::{
    admit::{Admitted, Next},
    refusal::Refusal,
    settle::Settled,
};
use crate::{
    WriteGuard,
    audit::{Channel, Outcome},
    tools::{self, PREPARE_ADMIN_ACTION},
};

/// One write call, as far as its audit records name it: the tool, then, as the steps learn
/// them, who is asking, the digest of the captured arguments, the question's approval id and
/// the channel it is asked on. Never changed in place: each step's state carries the call as
/// that step knows it, and a [`Refusal`] carries the one it was refused at.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    tool: ToolName,
    principal: Option<Principal>,
    digest: Option<ArgsDigest>,
    approval: Option<ApprovalId>,
    /// How the person is asked, once they are.
    channel: Option<Channel>,
}

/// The digest of the called tool's definition as the guard read it for this call, when the call
/// arrived (for `prepare_admin_action`, the guard's own tool; its question binds the definition
/// of the tool it names, read when that is looked up). `None`: the inner server no longer offers
/// the tool (a 2026-07-28 retry of a question about it). A tool that is gone, or whose
/// definition has no digest, is refused where a digest is needed.
pub(crate) type Seen = Option<Result<DefinitionDigest, DefinitionError>>;

/// What a write call's steps read of its request once it is admitted (the arguments and the
/// guard's own round-trip fields taken out of it): the tool's classification, its definition
/// as the guard read it when the call arrived, the request and its context. Borrowed by the
/// steps that capture and ask; the apply takes the request and context by value after them.
#[derive(Clone, Copy)]
pub(crate) struct Facts<'c> {
    class: Classification,
    seen: &'c Seen,
    request: &'c CallToolRequestParams,
    context: &'c RequestContext<RoleServer>,
}

impl Call {
    /// A call of `tool`, before any step has learnt more of it.
    fn new(tool: &str) -> Self {
        Self {
            tool: ToolName::new(tool),
            principal: None,
            digest: None,
            approval: None,
            channel: None,
        }
    }

    /// The same call, asked by `principal` with arguments of `digest` (as far as known).
    fn of(&self, principal: Option<&Principal>, digest: Option<ArgsDigest>) -> Self {
        Self {
            principal: principal.cloned(),
            digest,
            ..self.clone()
        }
    }

    /// The same call, its question's approval id known.
    fn with_approval(&self, approval: ApprovalId) -> Self {
        Self {
            approval: Some(approval),
            ..self.clone()
        }
    }

    /// The same call, asked on `channel`.
    fn on(&self, channel: Channel) -> Self {
        Self {
            channel: Some(channel),
            ..self.clone()
        }
    }
}

impl<S: ServerHandler> WriteGuard<S> {
    /// The entry point for every `tools/call`.
    pub(crate) async fn guard_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The write path's future is large; boxed, it is allocated only for writes, and every
        // `tools/call` future (which rmcp moves into a task of its own) stays small for reads.
        if request.name == PREPARE_ADMIN_ACTION {
            let own = tools::prepare_admin_action_tool();
            let (class, seen) = (tools::classify_tool(&own), tools::definition_digest(&own));
            return Ok(Box::pin(self.write(request, class, Some(seen), context)).await);
        }
        let Some(tool) = self
            .shared
            .tool_calls()
            .find_tool(&request.name, &context)
            .await?
        else {
            // The retry of a question about a tool the inner server no longer offers: the
            // question is settled as any other (its answer recorded), and an approval is
            // refused, the tool being gone. Written as the spec's defaults read a tool without
            // annotations: a destructive write.
            if request.request_state.is_some() {
                let gone = tools::classify_tool(&Tool::new(
                    request.name.clone(),
                    "",
                    rmcp::model::JsonObject::new(),
                ));
                return Ok(Box::pin(self.write(request, gone, None, context)).await);
            }
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {}", request.name),
                None,
            ));
        };
        let class = self.shared.known_tools.class(&tool);
        if let Some(refused) = self.refused_by_server(&tool, &request, class) {
            return Ok(refused);
        }
        if class.class.is_write() {
            // The definition the question will bind (and a token must have been issued for).
            let seen = self.shared.known_tools.digest(&tool);
            return Ok(Box::pin(self.write(request, class, Some(seen), context)).await);
        }
        self.read(request, class, context).await
    }

    /// The inner server refuses this tool now ([`refuse_calls_when`]): refused before anyone is
    /// asked, and recorded when it is a write.
    ///
    /// [`refuse_calls_when`]: crate::WriteGuardBuilder::refuse_calls_when
    fn refused_by_server(
        &self,
        tool: &Tool,
        request: &CallToolRequestParams,
        class: Classification,
    ) -> Option<CallToolResponse> {
        let why = self.shared.refuse_calls.as_ref()?(tool)?;
        if class.class.is_write() {
            let call = Call::new(&request.name);
            self.shared
                .books()
                .record(&call, Outcome::RefusedByServer, Some(why.clone()));
        }
        Some(CallToolResult::error(vec![ContentBlock::text(why)]).into())
    }

    /// A read goes straight to the inner server, then into the envelope. A read the client
    /// cancelled is dropped: nobody reads its answer, and a transport that counts requests in
    /// flight has already freed its place.
    async fn read(
        &self,
        request: CallToolRequestParams,
        class: Classification,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.clone();
        let cancelled = context.ct.clone();
        let response = tokio::select! {
            response = self.shared.inner.call_tool(request, context) => response?,
            () = cancelled.cancelled() => {
                return Err(ErrorData::internal_error("the request was cancelled", None));
            }
        };
        Ok(match response {
            CallToolResponse::Complete(result) => {
                self.shared.tool_calls().wrap(&name, class, result).into()
            }
            other => other,
        })
    }

    /// A write, step by step; a refusal from any step is recorded and answered.
    async fn write(
        &self,
        request: CallToolRequestParams,
        class: Classification,
        seen: Seen,
        context: RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let call = Call::new(&request.name);
        match self.write_steps(&call, request, class, seen, context).await {
            Ok(response) => response,
            Err(refusal) => {
                let at = refusal.call.as_deref().unwrap_or(&call);
                self.shared
                    .books()
                    .record(at, refusal.outcome, Some(refusal.reason));
                (*refusal.answer).into()
            }
        }
    }

    /// admit → (resume the retry's question | join the open question | capture → ask) →
    /// apply.
    async fn write_steps(
        &self,
        call: &Call,
        mut request: CallToolRequestParams,
        class: Classification,
        seen: Seen,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Refusal> {
        let mut admitted = self
            .admit(call, &mut request, class, &seen, &context)
            .await?;
        let next = std::mem::replace(&mut admitted.next, Next::Ask);
        let at = admitted.call.clone();
        let facts = Facts {
            class,
            seen: &seen,
            request: &request,
            context: &context,
        };
        let settled = match next {
            Next::Resume(retry) => {
                let channels = self.shared.channels();
                channels.decide_retry(admitted, retry, &context).await
            }
            Next::Ask => self.join_or_ask(admitted, facts).await,
            Next::WithoutAsking => {
                let captured = self.shared.tool_calls().capture(admitted, facts).await?;
                self.shared.books().record(
                    &captured.call,
                    Outcome::ApprovedWithoutElicitation,
                    Some("danger::AllowWritesWithoutElicitation".into()),
                );
                let approved = danger::approve_without_asking(captured.pending);
                Ok(Settled::Approved(approved, captured.call))
            }
        }
        .map_err(|refusal| refusal.at(&at))?;
        match settled {
            Settled::Approved(approved, call) => self
                .shared
                .tool_calls()
                .apply(&call, approved, class, request, context)
                .await
                .map_err(|refusal| refusal.at(&call)),
            Settled::Respond(response) => Ok(response),
        }
    }

    /// The same change may have been asked already (by a call whose client gave up, or one
    /// that could not ask): that question, not a second one. Else capture what the person
    /// approves and ask.
    async fn join_or_ask(&self, admitted: Admitted, facts: Facts<'_>) -> Result<Settled, Refusal> {
        let channels = self.shared.channels();
        if let Some(settled) = channels.join(&admitted, facts.context).await? {
            return Ok(settled);
        }
        let captured = channels.tool_calls.capture(admitted, facts).await?;
        let at = captured.call.clone();
        channels
            .ask(captured, facts.context)
            .await
            .map_err(|refusal| refusal.at(&at))
    }
}
