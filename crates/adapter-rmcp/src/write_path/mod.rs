//! One `tools/call` through the guard (the write path of `docs/` and the README), as a short
//! pipeline.
//!
//! ```text
//! admit → (join the open question | capture → ask) → settle → apply → wrap
//! ```
//!
//! - [`admit`]: who is asking, writes on, the arguments captured once, no task, a retry or
//!   not, the client can be asked (or a notifier can reach a person), the token would spend
//!   (the order is mcp-write-guard-core's `admit`).
//! - [`settle`]: a question outlives its call. The same change's question, if one is open or
//!   answered, is joined instead of asking again; whatever asked it, a question ends here:
//!   approved (the approval taken once), refused, or still open (wait, put it again, or tell
//!   the client to call again).
//! - [`capture`]: what the person will approve: the tool's preview (the target's, for
//!   `prepare_admin_action`) and the pending approval.
//! - [`ask`]: the question, in the request's protocol era (a form, the approval page, or a
//!   notice through a [`Notifier`](crate::notify::Notifier)); the `asked` audit record.
//! - [`decide`]: the answer turned into an [`Approved`] or a refusal (mcp-write-guard-core decides);
//!   the 2026-07-28 retry.
//! - [`apply`]: only an [`Approved`] gets here: the tool read again and refused unless its
//!   definition is the one the person approved, then spend the token, compare-and-apply (or
//!   issue the admin token).
//! - [`wrap`]: the result in the envelope.
//!
//! Every step returns `Result<_, Refusal>`; [`Refusal`] carries the audit outcome, the audit
//! reason and the answer the model reads, and [`WriteGuard::write`] records it. Every decision
//! is taken by mcp-write-guard-policy, mcp-write-guard-core or envelope; these modules sequence them and talk
//! to rmcp.

mod admit;
mod apply;
mod ask;
mod capture;
mod decide;
#[cfg(feature = "approval-page")]
mod page;
mod refusal;
mod settle;
mod wrap;

use mcp_write_guard_core::{
    ApprovalId, Approved, Principal, ToolName, danger,
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

use self::{admit::Next, refusal::Refusal, settle::Settled};
use crate::{
    WriteGuard,
    audit::{AuditRecord, Channel, Outcome},
    tools::{self, PREPARE_ADMIN_ACTION},
};

/// One write call, as far as the audit records know it; filled in as the steps learn more, so
/// every record of the call carries the same principal, digest and approval id.
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
        let Some(tool) = self.find_tool(&request.name, &context).await? else {
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
        let class = self.shared.classified.of(&tool);
        if let Some(why) = self
            .shared
            .refuse_calls
            .as_ref()
            .and_then(|refuse| refuse(&tool))
        {
            // The inner server refuses this tool now: before anyone is asked.
            if class.class.is_write() {
                let call = Call::new(&request.name);
                self.record(&call, Outcome::RefusedByServer, Some(why.clone()));
            }
            return Ok(CallToolResult::error(vec![ContentBlock::text(why)]).into());
        }
        if class.class.is_write() {
            // The definition the question will bind (and a token must have been issued for).
            let seen = tools::definition_digest(&tool);
            return Ok(Box::pin(self.write(request, class, Some(seen), context)).await);
        }
        // A read goes straight to the inner server, then into the envelope. A read the client
        // cancelled is dropped: nobody reads its answer, and a transport that counts requests
        // in flight has already freed its place.
        let name = request.name.clone();
        let cancelled = context.ct.clone();
        let response = tokio::select! {
            response = self.shared.inner.call_tool(request, context) => response?,
            () = cancelled.cancelled() => {
                return Err(ErrorData::internal_error("the request was cancelled", None));
            }
        };
        Ok(match response {
            CallToolResponse::Complete(result) => self.wrap(&name, class, result).into(),
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
        let mut call = Call::new(&request.name);
        match self
            .write_steps(&mut call, request, class, seen, context)
            .await
        {
            Ok(response) => response,
            Err(refusal) => {
                self.record(&call, refusal.outcome, Some(refusal.reason));
                (*refusal.answer).into()
            }
        }
    }

    async fn write_steps(
        &self,
        call: &mut Call,
        mut request: CallToolRequestParams,
        class: Classification,
        seen: Seen,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Refusal> {
        let admitted = self
            .admit(call, &mut request, class, &seen, &context)
            .await?;
        let principal = admitted.principal;
        let settled = match admitted.next {
            Next::Resume(retry) => {
                self.decide_retry(call, &principal, admitted.args, retry, &context)
                    .await?
            }
            Next::Ask => {
                // The same change may have been asked already (by a call whose client gave
                // up, or one that could not ask): that question, not a second one.
                match self
                    .join(call, &principal, &admitted.args, &context)
                    .await?
                {
                    Some(settled) => settled,
                    None => {
                        let captured = self
                            .capture(
                                call,
                                principal,
                                admitted.args,
                                class,
                                &seen,
                                &request,
                                &context,
                            )
                            .await?;
                        self.ask(call, captured, &context).await?
                    }
                }
            }
            Next::WithoutAsking => {
                let captured = self
                    .capture(
                        call,
                        principal,
                        admitted.args,
                        class,
                        &seen,
                        &request,
                        &context,
                    )
                    .await?;
                self.record(
                    call,
                    Outcome::ApprovedWithoutElicitation,
                    Some("danger::AllowWritesWithoutElicitation".into()),
                );
                Settled::Approved(danger::approve_without_asking(captured.pending))
            }
        };
        let approved: Approved = match settled {
            Settled::Approved(approved) => approved,
            Settled::Respond(response) => return Ok(response),
        };
        self.apply(call, approved, class, request, context).await
    }

    /// Sends one audit record of `call`.
    fn record(&self, call: &Call, outcome: Outcome, reason: Option<String>) {
        let record = AuditRecord::new(
            self.shared.clock.now(),
            call.principal.clone(),
            call.tool.as_str(),
            call.digest,
            outcome,
            reason,
        )
        .with_approval(call.approval)
        .with_channel(call.channel);
        self.shared.audit.record(&record);
    }
}
