//! The one value every step of the write path returns when it says no.
//!
//! A [`Refusal`] carries the audit outcome, the audit reason and the answer the model reads;
//! the pipeline records it and answers with it, nothing else. Texts that name a lifetime read it
//! from the configured [`ApprovalPolicy`].

use mcp_write_guard_core::{
    ApprovalPolicy, DenyReason, StoreError, ToolChanged, ToolName, definition::DefinitionError,
    render::render_key, round_trip::RoundTripRejection, token::TokenRejection,
};
use rmcp::model::{CallToolResult, ContentBlock};

use super::Call;
use crate::{audit::Outcome, error::Error};

/// What the user reads when the data changed between their approval and the apply.
pub const STALE_MESSAGE: &str = "The data changed since you approved; nothing was saved. \
Review the current state and ask for the change again if it is still wanted.";

/// What the user reads when another call of the same change already used the approval: this call
/// saved nothing.
pub const ALREADY_USED_MESSAGE: &str = "This approval was already used by another call of the \
same change, so this call saved nothing. Check the current state; call the tool again to ask for \
the change anew if it is still wanted.";

/// What the user reads when the approval store cannot be used (unreachable, timed out, full):
/// nothing was written.
pub const STORE_UNAVAILABLE_MESSAGE: &str = "Approvals are unavailable on this server right now, so \
nothing was saved. Try again later; if it keeps failing, ask the server's operator.";

/// A step said no: nothing was written (or, for an apply the guard cannot vouch for, nothing
/// more will be).
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) outcome: Outcome,
    /// For the audit record only; may hold text from the inner server.
    pub(crate) reason: String,
    /// What the model reads: the guard's own words, or a tool result in the envelope.
    pub(crate) answer: Box<CallToolResult>,
    /// The call as the step that refused knew it (who, which arguments, which question): what
    /// its audit record names. `None` until a step says; the pipeline then names the tool only.
    pub(crate) call: Option<Box<Call>>,
}

impl Refusal {
    /// A refusal the model reads as `message`.
    pub(crate) fn new(
        outcome: Outcome,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self::with_answer(
            outcome,
            reason,
            CallToolResult::error(vec![ContentBlock::text(message)]),
        )
    }

    /// A refusal the model reads as `answer` (a tool's own error result, already wrapped).
    pub(crate) fn with_answer(
        outcome: Outcome,
        reason: impl Into<String>,
        answer: CallToolResult,
    ) -> Self {
        Self {
            outcome,
            reason: reason.into(),
            answer: Box::new(answer),
            call: None,
        }
    }

    /// The same refusal, refused at `call` unless a step further in already said where.
    pub(crate) fn at(mut self, call: &Call) -> Self {
        if self.call.is_none() {
            self.call = Some(Box::new(call.clone()));
        }
        self
    }

    /// The caller's credential lacks the scope writes need. `scope` is the operator's setting,
    /// never text from the client.
    pub(crate) fn scope(scope: &str) -> Self {
        Self::new(
            Outcome::RefusedScope,
            format!("missing scope {scope}"),
            format!(
                "This change needs the `{scope}` permission (OAuth scope), which your sign-in \
                 does not grant, so nothing was saved and nobody was asked. Sign in with an \
                 account that has it, or ask the server's operator for it."
            ),
        )
    }

    pub(crate) fn stale(reason: &str) -> Self {
        Self::new(Outcome::Stale, reason, STALE_MESSAGE)
    }

    /// The store failed, or the principal has too many open approvals.
    pub(crate) fn store(error: &StoreError, policy: &ApprovalPolicy) -> Self {
        let message = match error {
            StoreError::PrincipalCapReached { .. } => format!(
                "Too many approvals are waiting for this user, so nothing was saved. Answer or \
                 let the open ones expire ({}; confirmation tokens {}), then try again.",
                describe(policy.approval_ttl),
                describe(policy.token_ttl)
            ),
            _ => STORE_UNAVAILABLE_MESSAGE.to_owned(),
        };
        Self::new(Outcome::StoreFailed, error.to_string(), message)
    }

    /// A stored approval or round-trip state that could not be taken back.
    pub(crate) fn rejection(rejection: RoundTripRejection) -> Self {
        match rejection {
            RoundTripRejection::Store => Self::new(
                Outcome::StoreFailed,
                rejection.as_str(),
                STORE_UNAVAILABLE_MESSAGE,
            ),
            // The same outcome and message as an answer that arrives late.
            RoundTripRejection::Expired => Self::denied(DenyReason::Expired),
            RoundTripRejection::Malformed
            | RoundTripRejection::Unknown
            | RoundTripRejection::Replayed
            | RoundTripRejection::OtherPrincipal
            | RoundTripRejection::OtherTool
            | RoundTripRejection::OtherArguments => Self::new(
                Outcome::StateRejected,
                rejection.as_str(),
                rejection.user_message(),
            ),
        }
    }

    /// A confirmation token that would not spend, or did not.
    pub(crate) fn token(rejection: TokenRejection) -> Self {
        let outcome = match rejection {
            TokenRejection::Store => Outcome::StoreFailed,
            TokenRejection::Missing
            | TokenRejection::Malformed
            | TokenRejection::Unknown
            | TokenRejection::Expired
            | TokenRejection::AlreadySpent
            | TokenRejection::OtherPrincipal
            | TokenRejection::OtherTool
            | TokenRejection::OtherArguments
            | TokenRejection::ToolChanged => Outcome::TokenRejected,
        };
        Self::new(outcome, rejection.as_str(), rejection.user_message())
    }

    /// The tool is no longer the one the person approved a call of: its definition changed
    /// between the question and the apply, it has no digest any more, or the server no longer
    /// offers it. The approval is used up; nothing was written.
    pub(crate) fn tool_changed(tool: &ToolName, changed: &ToolChanged) -> Self {
        let tool = render_key(tool.as_str());
        let message = match changed {
            ToolChanged::Gone => format!(
                "The tool `{tool}` is no longer offered by this server, so nothing was saved."
            ),
            ToolChanged::Changed { .. } | ToolChanged::Unreadable(_) => format!(
                "The tool `{tool}` changed since you approved (its description, schema or \
                 annotations); nothing was saved. Ask again to see the new definition."
            ),
        };
        Self::new(Outcome::ToolChanged, changed.to_string(), message)
    }

    /// The tool's definition has no digest, so no question can be bound to it: nobody was
    /// asked, nothing was written.
    pub(crate) fn unreadable_definition(tool: &str, error: &DefinitionError) -> Self {
        Self::new(
            Outcome::LookupFailed,
            error.to_string(),
            format!(
                "The definition of the tool `{}` could not be read, so nobody was asked and \
                 nothing was saved. If this keeps happening, ask the server's operator.",
                render_key(tool)
            ),
        )
    }

    /// The inner server's tools could not be looked up just before the apply: nothing was
    /// written.
    pub(crate) fn lookup_failed(reason: &str) -> Self {
        Self::new(
            Outcome::LookupFailed,
            format!("tool lookup failed: {reason}"),
            "The server could not look up the tool just before applying the change, so nothing \
             was saved. Try again later; if it keeps failing, ask the server's operator.",
        )
    }

    /// The person's answer, or the clock, said no.
    pub(crate) fn denied(reason: DenyReason) -> Self {
        let (outcome, message) = match reason {
            DenyReason::Cancelled => (
                Outcome::Cancelled,
                "The user cancelled the approval, so nothing was saved.",
            ),
            DenyReason::Expired => (
                Outcome::Expired,
                "The approval was not given in time, so nothing was saved. Call the tool again \
                 to ask the user anew.",
            ),
            DenyReason::Declined
            | DenyReason::ApproveFalse
            | DenyReason::ApproveMissing
            | DenyReason::ApproveNotBoolean
            | DenyReason::NoContent
            | DenyReason::ContentNotObject
            | DenyReason::UnknownAction => (
                Outcome::Declined,
                "The user did not approve this change, so nothing was saved.",
            ),
        };
        Self::new(outcome, reason.as_str(), message)
    }

    /// Asking failed: the client or the transport, or an answer that cannot be read.
    pub(crate) fn ask_failed(error: &Error) -> Self {
        Self::new(
            Outcome::AskFailed,
            error.to_string(),
            "The user could not be asked to approve this change, so nothing was saved. Try \
             again; if it keeps failing, check the client's approval prompts.",
        )
    }

    /// The question is open (or approved) and this call will not wait for it: a client that
    /// cannot be asked, or one that stopped waiting. The question stays for the next call.
    pub(crate) fn awaiting(expires_at: time::OffsetDateTime) -> Self {
        let until = expires_at
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|_| expires_at.to_string());
        Self::new(
            Outcome::AwaitingAnswer,
            "the question is still open",
            format!(
                "A person has been asked to approve this change and has not answered yet, so \
                 nothing was saved yet. Call this tool again with exactly the same arguments \
                 after they answer, before {until}; the change is applied then, once."
            ),
        )
    }

    /// Another call of the same change took this approval first: this call saved nothing.
    pub(crate) fn already_used() -> Self {
        Self::new(
            Outcome::AlreadyUsed,
            "the approval was taken by another call",
            ALREADY_USED_MESSAGE,
        )
    }

    /// The client cancelled the request after the person approved.
    pub(crate) fn cancelled(when: &str) -> Self {
        Self::new(
            Outcome::RequestCancelled,
            format!("the request was cancelled {when}"),
            "The request was cancelled after the user approved, so nothing was saved. Call the \
             tool again if the change is still wanted; the user will be asked again.",
        )
    }
}

/// A lifetime as a person reads it: "2 minutes", "90 seconds", "1 minute".
pub(crate) fn describe(ttl: time::Duration) -> String {
    let seconds = ttl.whole_seconds();
    let (n, unit) = if seconds % 60 == 0 && seconds >= 60 {
        (seconds / 60, "minute")
    } else {
        (seconds, "second")
    };
    let plural = if n == 1 { "" } else { "s" };
    format!("{n} {unit}{plural}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_read_as_a_person_would_say_them() {
        assert_eq!(describe(time::Duration::seconds(120)), "2 minutes");
        assert_eq!(describe(time::Duration::seconds(300)), "5 minutes");
        assert_eq!(describe(time::Duration::seconds(60)), "1 minute");
        assert_eq!(describe(time::Duration::seconds(90)), "90 seconds");
        assert_eq!(describe(time::Duration::seconds(1)), "1 second");
    }

    #[test]
    fn the_cap_message_names_the_configured_lifetimes() {
        let policy = ApprovalPolicy::default()
            .with_approval_ttl(time::Duration::seconds(30))
            .with_token_ttl(time::Duration::seconds(600));
        let refusal = Refusal::store(&StoreError::PrincipalCapReached { cap: 1 }, &policy);
        let text = refusal.answer.content[0].as_text().map(|t| t.text.clone());
        let text = text.unwrap_or_default();
        assert!(
            text.contains("30 seconds; confirmation tokens 10 minutes"),
            "{text}"
        );
        assert_eq!(refusal.outcome, Outcome::StoreFailed);
    }
}
