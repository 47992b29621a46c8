//! The adapter's errors.
//!
//! None of these reaches the model as an `Err`: on the write path every error becomes a refusal
//! (`isError: true`, nothing written, one audit record). They are public so that the audit
//! reason and the logs can name them.

use mcp_write_guard_core::StoreError;

/// Something went wrong while guarding a write. Always ends in a refusal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The client could not be asked (a transport error, or the client's handler failed).
    #[error("asking the user failed: {0}")]
    Ask(String),
    /// The question was not answered within the approval clock.
    #[error("the question was not answered in time")]
    TimedOut,
    /// The request was cancelled while the user was being asked.
    #[error("the request was cancelled while asking the user")]
    Cancelled,
    /// The answer was not an elicitation result the guard can read.
    #[error("the answer could not be read: {0}")]
    MalformedAnswer(String),
    /// The approval form could not be built.
    #[error("the approval form could not be built: {0}")]
    Form(String),
    /// The approval store failed.
    #[error("the approval store failed: {0}")]
    Store(#[from] StoreError),
    /// The audit file could not be opened (feature `audit-jsonl`).
    #[cfg(feature = "audit-jsonl")]
    #[error("cannot open the audit file {path}: {source}")]
    AuditFile {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
}
