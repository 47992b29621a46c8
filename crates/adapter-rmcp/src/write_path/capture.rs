//! Step 2 of a write: what the person will approve.
//!
//! The tool's preview, run with the captured arguments and the [`WriteStep::Preview`] marker
//! (for `prepare_admin_action`: the target tool's preview, with the target's arguments and no
//! token), and the pending approval that binds them to the principal and the clock.
//!
//! [`WriteStep::Preview`]: crate::WriteStep::Preview

use mcp_write_guard_core::{
    CapturedArgs, PendingApproval, ToolChanged, ToolName, ids::DefinitionDigest, previews_match,
};
use rmcp::{
    ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject, Tool,
    },
    service::{RequestContext, RoleServer},
};
use serde::Deserialize;
use serde_json::Value;

use super::{Call, Facts, Seen, admit::Admitted, refusal::Refusal, tool_calls::ToolCalls};
use crate::{
    audit::Outcome,
    step::mark_preview,
    tools::{AdminActionInput, PREPARE_ADMIN_ACTION},
};

/// The tool a `prepare_admin_action` call names, with its captured arguments and the digest of
/// its definition as the guard read it.
pub(super) struct AdminTarget {
    pub(super) tool: ToolName,
    pub(super) args: CapturedArgs,
    pub(super) definition: DefinitionDigest,
}

/// What the person is about to be asked.
pub(super) struct Captured {
    /// The call as its audit records name it from here on: with the approval id.
    pub(super) call: Call,
    pub(super) pending: PendingApproval,
    /// For `prepare_admin_action`: the tool the token will be for.
    pub(super) admin_target: Option<AdminTarget>,
}

impl<S: ServerHandler> ToolCalls<'_, S> {
    /// `seen` is the called tool's definition as the guard read it when the call arrived: the
    /// question binds it (for `prepare_admin_action`, the definition of the tool it names).
    pub(super) async fn capture(
        &self,
        admitted: Admitted,
        facts: Facts<'_>,
    ) -> Result<Captured, Refusal> {
        let Admitted {
            call,
            principal,
            args,
            ..
        } = admitted;
        let admin_target = if call.tool.as_str() == PREPARE_ADMIN_ACTION {
            Some(self.admin_target(&args, facts.context).await?)
        } else {
            None
        };
        let definition = bound_definition(&call.tool, admin_target.as_ref(), facts.seen)?;
        // The tool whose preview the person reads, with the arguments it runs with.
        let (tool, arguments) = match &admin_target {
            Some(target) => (&target.tool, target.args.without_token()),
            None => (&call.tool, args.arguments().clone()),
        };
        let preview = if self.previews.contains(tool.as_str()) {
            self.run_preview(tool, arguments, facts).await?
        } else {
            Value::Null
        };
        let pending = PendingApproval::new(
            principal,
            call.tool.clone(),
            definition,
            args,
            preview,
            self.books.now(),
            self.books.policy,
        );
        Ok(Captured {
            call: call.with_approval(pending.id()),
            pending,
            admin_target,
        })
    }

    /// Runs `tool`'s dry run with `arguments` and the out-of-band marker. A preview that says
    /// no is returned to the model as it is (in the envelope) and nobody is asked. Text from
    /// any other failure goes to the audit record only: outside the envelope it would reach
    /// the model as if the guard had said it.
    async fn run_preview(
        &self,
        tool: &ToolName,
        arguments: JsonObject,
        facts: Facts<'_>,
    ) -> Result<Value, Refusal> {
        let mut preview_request = facts.request.clone();
        preview_request.name = tool.as_str().to_owned().into();
        preview_request.arguments = Some(arguments);
        let mut preview_context = facts.context.clone();
        mark_preview(&mut preview_context.extensions);
        let failed = |reason: String| {
            Refusal::new(
                Outcome::PreviewFailed,
                reason,
                "The change could not be previewed (the tool reported an error), so nothing \
                 was saved and nobody was asked. Check the arguments and try again; if it keeps \
                 failing, ask the server's operator.",
            )
        };
        let again = self
            .check_dry_previews
            .then(|| (preview_request.clone(), preview_context.clone()));
        let first = match self
            .server
            .call_tool(preview_request, preview_context)
            .await
        {
            Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => {
                return Err(Refusal::with_answer(
                    Outcome::PreviewFailed,
                    "preview failed",
                    self.wrap(tool.as_str(), facts.class, result),
                ));
            }
            Ok(CallToolResponse::Complete(result)) => preview_value(&result),
            Ok(_) => return Err(failed("the preview did not complete".to_owned())),
            Err(error) => return Err(failed(error.message.to_string())),
        };
        if let Some((request, context)) = again {
            self.preview_again(tool, &first, request, context)
                .await
                .map_err(failed)?;
        }
        Ok(first)
    }

    /// The dry-run check ([`check_dry_previews`]): a second preview of the same call must match
    /// the first, else the preview is not a dry run.
    ///
    /// [`check_dry_previews`]: crate::WriteGuardBuilder::check_dry_previews
    async fn preview_again(
        &self,
        tool: &ToolName,
        first: &Value,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), String> {
        let second = match self.server.call_tool(request, context).await {
            Ok(CallToolResponse::Complete(result)) => preview_value(&result),
            _ => Value::Null,
        };
        if previews_match(first, &second) {
            return Ok(());
        }
        tracing::error!(
            tool = tool.as_str(),
            "two previews of one call differ: the tool writes (or is not deterministic) on \
             WriteStep::Preview"
        );
        Err("two previews of one call differ: the preview is not a dry run".to_owned())
    }

    /// For `prepare_admin_action`: the named tool, which must be token-gated, its captured
    /// arguments and its definition, as the inner server hands it out now.
    pub(super) async fn admin_target(
        &self,
        args: &CapturedArgs,
        context: &RequestContext<RoleServer>,
    ) -> Result<AdminTarget, Refusal> {
        let input = admin_input(args)?;
        let found = self.find_admin_target(&input.tool, context).await?;
        self.admin_target_of(input, found.as_ref())
    }

    /// The inner server's definition of the tool `name` a `prepare_admin_action` call names.
    pub(super) async fn find_admin_target(
        &self,
        name: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<Tool>, Refusal> {
        self.find_tool(name, context).await.map_err(|error| {
            Refusal::new(
                Outcome::LookupFailed,
                format!("tool lookup failed: {}", error.message),
                "The server could not look up the tool named for this admin action, so no \
                 confirmation token was issued and nothing was saved. Try again later; if it \
                 keeps failing, ask the server's operator.",
            )
        })
    }

    /// The admin target `input` names, `found` being the inner server's definition of it.
    pub(super) fn admin_target_of(
        &self,
        input: AdminActionInput,
        found: Option<&Tool>,
    ) -> Result<AdminTarget, Refusal> {
        let name = &input.tool;
        let Some(found) = found.filter(|tool| self.known_tools.class(tool).token_gated) else {
            return Err(refuse_admin(format!(
                "the tool {name:?} does not take a confirmation token"
            )));
        };
        let definition = self
            .known_tools
            .digest(found)
            .map_err(|error| Refusal::unreadable_definition(name, &error))?;
        let target_args = CapturedArgs::capture(Some(&input.arguments), &self.books.policy.limits)
            .map_err(|error| {
                refuse_admin(format!("the tool's arguments were not accepted ({error})"))
            })?;
        Ok(AdminTarget {
            tool: ToolName::new(name.as_str()),
            args: target_args,
            definition,
        })
    }
}

/// The definition the question binds: the admin target's, else the called tool's as the guard
/// read it when the call arrived. A tool that is gone, or whose definition has no digest, is
/// refused.
fn bound_definition(
    tool: &ToolName,
    admin_target: Option<&AdminTarget>,
    seen: &Seen,
) -> Result<DefinitionDigest, Refusal> {
    match (admin_target, seen) {
        (Some(target), _) => Ok(target.definition),
        (None, Some(Ok(definition))) => Ok(*definition),
        (None, Some(Err(error))) => Err(Refusal::unreadable_definition(tool.as_str(), error)),
        (None, None) => Err(Refusal::tool_changed(tool, &ToolChanged::Gone)),
    }
}

/// `prepare_admin_action`'s arguments, read.
pub(super) fn admin_input(args: &CapturedArgs) -> Result<AdminActionInput, Refusal> {
    AdminActionInput::deserialize(args.arguments()).map_err(|error| {
        refuse_admin(format!(
            "its arguments must be exactly `tool` (a tool's name) and `arguments` (an object), \
             and were not ({error})"
        ))
    })
}

/// A `prepare_admin_action` call that names no tool it can issue a token for.
fn refuse_admin(reason: String) -> Refusal {
    let message = format!(
        "{reason}, so no confirmation token was issued and nothing was saved. Name a tool that \
         takes a confirmationToken and give its exact arguments as an object."
    );
    Refusal::new(Outcome::BadArguments, reason, message)
}

/// The preview value: the result's `structuredContent`, else its text blocks joined.
fn preview_value(result: &CallToolResult) -> Value {
    if let Some(structured) = &result.structured_content {
        return structured.clone();
    }
    let text: Vec<&str> = result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect();
    Value::String(text.join("\n"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_preview_value_is_the_structured_content_else_the_text() {
        let structured = CallToolResult::structured(json!({"before": 1, "after": 2}));
        assert_eq!(preview_value(&structured), json!({"before": 1, "after": 2}));
        let text = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        assert_eq!(preview_value(&text), json!("a\nb"));
    }
}
