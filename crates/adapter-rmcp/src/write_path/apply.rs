//! Step 5 of a write: apply exactly what was approved.
//!
//! Only an [`Approved`] gets here. Nothing is spent, issued or applied for a request the
//! client cancelled. Then the tool is read again from the inner server, the way the call found
//! it: unless its definition is still the one the person approved a call of (for
//! `prepare_admin_action`, the definition of the tool it names), the apply is refused, and the
//! approval, already taken from the store, is used up. A token-gated tool's token is spent,
//! atomically, once, and only while the tool has the definition it was issued for. Then the
//! apply runs with the approval's own arguments as a compare-and-apply: the approved preview
//! travels with it ([`crate::WriteStep::Apply`]) and the tool compares it inside the
//! transaction that applies. For `prepare_admin_action` the apply is issuing the token, bound
//! to the target's definition.

use mcp_write_guard_core::{Approved, Binding, ToolName};
use mcp_write_guard_policy::Classification;
use rmcp::{
    ServerHandler,
    model::{CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock},
    service::{RequestContext, RoleServer},
};
use time::format_description::well_known::Rfc3339;

use super::{
    Call,
    books::Books,
    capture::{AdminTarget, admin_input},
    refusal::Refusal,
    tool_calls::ToolCalls,
};
use crate::{
    audit::Outcome,
    step::{ApprovedPreview, Comparison, attach_approved},
    tools::{self, AdminActionToken, PREPARE_ADMIN_ACTION},
};

impl<S: ServerHandler> ToolCalls<'_, S> {
    pub(super) async fn apply(
        &self,
        call: &Call,
        approved: Approved,
        class: Classification,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Refusal> {
        if context.ct.is_cancelled() {
            return Err(Refusal::cancelled("after approval"));
        }
        if call.tool.as_str() == PREPARE_ADMIN_ACTION {
            return self.apply_admin(call, &approved, &context).await;
        }
        // The tool as the inner server defines it now: the one the person approved a call of.
        let found = self
            .find_tool(approved.tool().as_str(), &context)
            .await
            .map_err(|error| Refusal::lookup_failed(&error.message))?;
        tools::check_definition(self.known_tools, &approved, found.as_ref())
            .map_err(|changed| Refusal::tool_changed(approved.tool(), &changed))?;
        if class.token_gated {
            self.books.spend(&approved).await.map_err(Refusal::token)?;
        }
        if context.ct.is_cancelled() {
            return Err(Refusal::cancelled("before the apply"));
        }
        self.apply_approved(call, &approved, class, request, context)
            .await
    }

    /// `prepare_admin_action`'s apply: the tool the token will be for, as the inner server
    /// defines it now, must be the one the person approved; then the token is issued.
    async fn apply_admin(
        &self,
        call: &Call,
        approved: &Approved,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Refusal> {
        let input = admin_input(approved.args())?;
        let found = self.find_admin_target(&input.tool, context).await?;
        let name = ToolName::new(input.tool.as_str());
        tools::check_definition(self.known_tools, approved, found.as_ref())
            .map_err(|changed| Refusal::tool_changed(&name, &changed))?;
        let target = self.admin_target_of(input, found.as_ref())?;
        issue_admin_token(self.books, call, approved, &target).await
    }

    /// Calls the inner tool with the approved arguments, as a compare-and-apply when the tool
    /// opted in to previews, and judges what it says.
    async fn apply_approved(
        &self,
        call: &Call,
        approved: &Approved,
        class: Classification,
        mut request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Refusal> {
        let tool = call.tool.as_str();
        request.arguments = Some(approved.args().arguments().clone());
        let compare = self
            .previews
            .contains(tool)
            .then(|| ApprovedPreview::new(approved.preview().clone()));
        if let Some(compare) = &compare {
            attach_approved(&mut context.extensions, compare);
        }
        let response = self.server.call_tool(request, context).await;
        let compared = compare.as_ref().map(ApprovedPreview::comparison);
        match (response, compared) {
            // Stale and a success: the tool broke its contract (roll back on a stale check),
            // so nothing can be said about what it saved.
            (Ok(CallToolResponse::Complete(result)), Some(Some(Comparison::Stale)))
                if result.is_error != Some(true) =>
            {
                Err(not_vouched(
                    tool,
                    "the tool returned success after a stale compare",
                ))
            }
            (_, Some(Some(Comparison::Stale))) => Err(Refusal::stale("preview changed")),
            (Ok(CallToolResponse::Complete(result)), compared) => {
                self.applied(call, class, result, compared)
            }
            (Ok(_), _) => Err(Refusal::new(
                Outcome::ApplyFailed,
                "tool did not complete",
                "The change was approved, but the tool did not complete it (it asked for more \
                 input or started a task, which guarded writes do not support). Check the \
                 current state before trying again.",
            )),
            // The inner text goes to the audit record only.
            (Err(error), _) => Err(Refusal::new(
                Outcome::ApplyFailed,
                error.message.to_string(),
                "The change was approved, but the tool reported an error while applying it. \
                 Check the current state before trying again; if it keeps failing, ask the \
                 server's operator.",
            )),
        }
    }

    /// The tool completed: recorded as applied, or as failed when it says so; a tool that
    /// opted in to previews and never compared is not vouched for.
    fn applied(
        &self,
        call: &Call,
        class: Classification,
        result: CallToolResult,
        compared: Option<Option<Comparison>>,
    ) -> Result<CallToolResponse, Refusal> {
        let tool = call.tool.as_str();
        if result.is_error == Some(true) {
            let failed = Some("tool returned an error".into());
            self.books.record(call, Outcome::ApplyFailed, failed);
        } else if compared == Some(None) {
            // Opted in to previews, applied, never compared.
            return Err(not_vouched(
                tool,
                "the tool did not compare the approved preview",
            ));
        } else {
            self.books.record(call, Outcome::Applied, None);
        }
        Ok(self.wrap(tool, class, result).into())
    }
}

/// A tool that opted in to previews broke the compare-and-apply contract: the guard cannot
/// say whether, or on which state, it wrote.
fn not_vouched(tool: &str, reason: &'static str) -> Refusal {
    tracing::error!(
        target: "mcp_write_guard_rmcp",
        tool,
        reason,
        "a tool that opted in to previews must call ApprovedPreview::check in its apply and \
         roll back when it says stale"
    );
    Refusal::new(
        Outcome::ApplyFailed,
        reason,
        "The change was approved, but the tool did not confirm that the data was still as \
         approved when it applied, so the server cannot vouch for what was saved. Check the \
         current state; if this keeps happening, ask the server's operator.",
    )
}

/// `prepare_admin_action`'s apply: a token bound to the target tool, its definition as the
/// person approved it, and its exact arguments, for the principal who was asked.
async fn issue_admin_token(
    books: Books<'_>,
    call: &Call,
    approved: &Approved,
    target: &AdminTarget,
) -> Result<CallToolResponse, Refusal> {
    let binding = Binding::new(approved.principal(), &target.tool, &target.args);
    let token = books.issue_token(binding, approved).await?;
    let tool = &target.tool;
    books.record(call, Outcome::TokenIssued, Some(format!("for {tool}")));
    let expires_at = token
        .expires_at()
        .format(&Rfc3339)
        .unwrap_or_else(|_| token.expires_at().to_string());
    let structured = AdminActionToken {
        confirmation_token: token.as_str().to_owned(),
        tool: tool.to_string(),
        expires_at: expires_at.clone(),
    };
    // Three strings always serialise; should that ever fail, the token is not handed out.
    let structured = serde_json::to_value(structured).map_err(|error| {
        Refusal::new(
            Outcome::ApplyFailed,
            format!("the token could not be written: {error}"),
            "The user approved, but the server could not write the confirmation token, so \
             nothing was saved. Try again; if it keeps failing, ask the server's operator.",
        )
    })?;
    let mut result = CallToolResult::structured(structured);
    result.content = vec![ContentBlock::text(format!(
        "The user approved preparing {tool}. Call {tool} with exactly the same arguments \
         and confirmationToken \"{}\" (valid once, until {expires_at}); the user will be \
         asked to approve it again.",
        token.as_str()
    ))];
    Ok(result.into())
}
