//! Reaching a person when the client cannot ask: a [`Notifier`].
//!
//! A client without elicitation (a headless agent, a scheduler, CI) cannot put the question to
//! anyone; nor can one that declared URL mode but answers the page's link with an error (it
//! opens no links; below 2026-07-28, where the server hears that error). With an approval page and a notifier configured
//! ([`WriteGuardBuilder::notifier`](crate::WriteGuardBuilder::notifier)), the guard opens the
//! question on the page anyway, hands the notifier a [`Notice`] (the rendered question and the
//! page's link), and answers the call at once: a person was asked, nothing is saved yet, call
//! again with the same arguments once they approved. The next call of the same tool with the
//! same arguments by the same principal within the clock finds the answer and applies it once.
//!
//! The notice goes through a channel the model cannot read: the page's URL is a credential
//! (whoever holds it can answer, unless the page signs people in), and it never reaches the
//! model. A notifier that fails means nobody was asked: the call is refused and says so.
//!
//! A team plugs in its own channel by implementing the trait:
//!
//! ```
//! use mcp_write_guard_rmcp::notify::{Notice, Notifier, NotifyError};
//! use mcp_write_guard_rmcp::approval::store::BoxFuture;
//!
//! /// Writes each notice to a queue another process delivers (a pager, a chat bot, e-mail).
//! struct Outbox(tokio::sync::mpsc::Sender<String>);
//!
//! impl Notifier for Outbox {
//!     fn channel(&self) -> &str {
//!         "outbox"
//!     }
//!
//!     fn notify<'a>(&'a self, notice: &'a Notice) -> BoxFuture<'a, Result<(), NotifyError>> {
//!         Box::pin(async move {
//!             let text = format!("{}\nApprove or decline: {}", notice.prompt, notice.url);
//!             self.0.send(text).await.map_err(|_| NotifyError::new("the outbox is closed"))
//!         })
//!     }
//! }
//! ```

use mcp_write_guard_core::{ApprovalId, store::BoxFuture};
use time::OffsetDateTime;

/// What a notifier tells a person about one question.
///
/// `Debug` leaves out the prompt and the URL (a credential).
#[derive(Clone, PartialEq, Eq, derive_more::Debug)]
#[non_exhaustive]
pub struct Notice {
    /// The question's approval id: every audit record about it carries the same id.
    pub approval_id: ApprovalId,
    /// The server's name (as in the audit records).
    pub server: String,
    /// The tool the person is asked about (for `prepare_admin_action`, the target tool).
    pub tool: String,
    /// The question exactly as the guard words it (every argument through the one renderer).
    #[debug(skip)]
    pub prompt: String,
    /// The approval page's URL: a credential. Send it only where the person reads it.
    #[debug(skip)]
    pub url: String,
    /// When the question expires: an answer at or after it is a denial.
    pub expires_at: OffsetDateTime,
}

impl Notice {
    /// A notice about `approval_id` (fields as documented on the struct).
    pub fn new(
        approval_id: ApprovalId,
        server: impl Into<String>,
        tool: impl Into<String>,
        prompt: impl Into<String>,
        url: impl Into<String>,
        expires_at: OffsetDateTime,
    ) -> Self {
        Self {
            approval_id,
            server: server.into(),
            tool: tool.into(),
            prompt: prompt.into(),
            url: url.into(),
            expires_at,
        }
    }
}

/// Tells a person about a question, through a channel the model cannot read.
///
/// [`notify`](Notifier::notify) returns once the notice was delivered (or definitely was not):
/// an `Err` means nobody was asked, and the call is refused with nothing saved. Bound its time
/// (the call waits for it) and retry inside it as the channel needs.
pub trait Notifier: Send + Sync + 'static {
    /// A short name of the channel for the audit records (`webhook`, `outbox`, ...).
    fn channel(&self) -> &str;

    /// Delivers `notice`.
    fn notify<'a>(&'a self, notice: &'a Notice) -> BoxFuture<'a, Result<(), NotifyError>>;
}

/// A notice that was not delivered: nobody was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the notice was not delivered: {0}")]
pub struct NotifyError(String);

impl NotifyError {
    /// A failure described by `reason` (for the audit record; the model never reads it).
    pub fn new(reason: impl Into<String>) -> Self {
        Self(reason.into())
    }

    /// The reason given.
    pub fn reason(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use crate::test_util::notice;

    #[test]
    fn debug_leaves_out_the_url_and_the_prompt() {
        let notice = notice("https://approve.example/approvals/pagesecret");
        for shown in [format!("{notice:?}"), format!("{notice:#?}")] {
            for hidden in ["pagesecret", "approve.example", "TLS-002", "prompt", "url"] {
                assert!(!shown.contains(hidden), "{hidden}: {shown}");
            }
        }
        // Exactly these fields: one added later shows up here and has to be looked at.
        assert_eq!(
            format!("{notice:?}"),
            "Notice { approval_id: ApprovalId(0b7f3a52-2c1e-4f4e-9a51-3c6d2e8f9a10), \
             server: \"inventory\", tool: \"adjust_stock\", \
             expires_at: 2026-01-01 0:02:00.0 +00:00:00, .. }"
        );
    }
}
