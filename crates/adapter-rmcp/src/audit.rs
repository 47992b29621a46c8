//! One record per decision: who asked, which tool, which arguments (by digest), what happened.
//!
//! The adapter hands every decision on the write path to an [`AuditSink`]: refusals, the user's
//! approval, the final apply, issued tokens. Reads are not decisions and are not recorded.
//! Arguments themselves are never recorded, only their [`ArgsDigest`], so an audit log does not
//! become a copy of the data.

use std::{
    fs::{File, OpenOptions},
    io::{BufWriter, Write},
    path::Path,
    sync::Arc,
};

use approval_core::{ArgsDigest, Principal};
use parking_lot::Mutex;
use serde::Serialize;
use time::OffsetDateTime;

use crate::error::Error;

/// What happened to one write request (or one step of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Outcome {
    /// Writes are disabled on this server; nothing was asked, nothing written.
    RefusedDisabled,
    /// The client cannot ask its user (no elicitation); nothing written.
    RefusedNoElicitation,
    /// The server could not tell who is asking; nothing written.
    RefusedNoPrincipal,
    /// The arguments were not an object, too large, too deep or not representable.
    BadArguments,
    /// The confirmation token was missing, unknown, expired, spent or bound to something else.
    TokenRejected,
    /// The tool's preview (dry run) failed; the user was not asked.
    PreviewFailed,
    /// The user declined, or accepted without setting `approve` to true.
    Declined,
    /// The user cancelled the question.
    Cancelled,
    /// The answer arrived after the approval clock ran out.
    Expired,
    /// Asking the user failed (client error, transport error, malformed answer).
    AskFailed,
    /// A retry carried a `requestState` that is forged, altered, expired, replayed or someone
    /// else's.
    StateRejected,
    /// The data changed between the preview the user approved and the apply.
    Stale,
    /// The approval store failed, or the user has too many open approvals; nothing written.
    StoreFailed,
    /// The request lets the inner server answer with a task (the tasks extension is declared by
    /// the request and supported by the server), which a guarded write cannot be; nothing was
    /// asked, nothing written.
    RefusedTask,
    /// The client cancelled the request after the user approved; nothing spent, issued or
    /// written.
    RequestCancelled,
    /// The inner server's tool list could not be read, so the tool named for
    /// `prepare_admin_action` could not be checked; no token issued, nothing written.
    LookupFailed,
    /// The user approved this exact change.
    Approved,
    /// No user was asked because the client cannot be asked and
    /// [`crate::danger::AllowWritesWithoutElicitation`] is on.
    ApprovedWithoutElicitation,
    /// The inner tool applied the approved change.
    Applied,
    /// The inner tool failed while applying the approved change.
    ApplyFailed,
    /// `prepare_admin_action` issued a confirmation token after the user approved.
    TokenIssued,
}

impl Outcome {
    /// The kebab-case name used in logs (`refused-disabled`, `token-rejected`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RefusedDisabled => "refused-disabled",
            Self::RefusedNoElicitation => "refused-no-elicitation",
            Self::RefusedNoPrincipal => "refused-no-principal",
            Self::BadArguments => "bad-arguments",
            Self::TokenRejected => "token-rejected",
            Self::PreviewFailed => "preview-failed",
            Self::Declined => "declined",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::AskFailed => "ask-failed",
            Self::StateRejected => "state-rejected",
            Self::Stale => "stale",
            Self::StoreFailed => "store-failed",
            Self::RefusedTask => "refused-task",
            Self::RequestCancelled => "request-cancelled",
            Self::LookupFailed => "lookup-failed",
            Self::Approved => "approved",
            Self::ApprovedWithoutElicitation => "approved-without-elicitation",
            Self::Applied => "applied",
            Self::ApplyFailed => "apply-failed",
            Self::TokenIssued => "token-issued",
        }
    }

    /// Whether this outcome is a refusal: nothing was written because of it.
    pub fn is_refusal(self) -> bool {
        !matches!(
            self,
            Self::Approved
                | Self::ApprovedWithoutElicitation
                | Self::Applied
                | Self::ApplyFailed
                | Self::TokenIssued
        )
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One decision on the write path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AuditRecord {
    /// When the decision was taken, by the adapter's clock.
    #[serde(serialize_with = "rfc3339")]
    pub time: OffsetDateTime,
    /// Who asked; `None` when the principal could not be resolved.
    pub principal: Option<Principal>,
    /// The tool that was called.
    pub tool: String,
    /// The digest of the captured arguments; `None` when they could not be captured.
    pub args_digest: Option<ArgsDigest>,
    /// What happened.
    pub outcome: Outcome,
    /// Why, in a few words (the deny reason, the token rejection, the error).
    pub reason: Option<String>,
}

impl AuditRecord {
    /// A record of `outcome` for `tool`.
    pub fn new(
        time: OffsetDateTime,
        principal: Option<Principal>,
        tool: impl Into<String>,
        args_digest: Option<ArgsDigest>,
        outcome: Outcome,
        reason: Option<String>,
    ) -> Self {
        Self {
            time,
            principal,
            tool: tool.into(),
            args_digest,
            outcome,
            reason,
        }
    }
}

fn rfc3339<S: serde::Serializer>(time: &OffsetDateTime, serializer: S) -> Result<S::Ok, S::Error> {
    let text = time
        .format(&time::format_description::well_known::Rfc3339)
        .map_err(serde::ser::Error::custom)?;
    serializer.serialize_str(&text)
}

/// Receives every decision. Called on the request path: keep it quick and never block on a
/// slow backend (buffer and ship elsewhere instead).
pub trait AuditSink: Send + Sync + 'static {
    /// Records one decision. A sink that fails to record reports through `tracing`; a failing
    /// audit sink does not turn a refusal into a write.
    fn record(&self, record: &AuditRecord);
}

impl<T: AuditSink + ?Sized> AuditSink for Arc<T> {
    fn record(&self, record: &AuditRecord) {
        (**self).record(record);
    }
}

/// The default sink: one `tracing` event per decision (target `adapter_rmcp::audit`), at
/// `info` for approvals and applies, `warn` for refusals.
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingSink;

impl AuditSink for TracingSink {
    fn record(&self, record: &AuditRecord) {
        let principal = record.principal.as_ref().map(Principal::as_str);
        let digest = record.args_digest.map(|d| d.to_string());
        if record.outcome.is_refusal() {
            tracing::warn!(
                target: "adapter_rmcp::audit",
                time = %record.time,
                principal,
                tool = %record.tool,
                args_digest = digest,
                outcome = %record.outcome,
                reason = record.reason.as_deref(),
                "write refused"
            );
        } else {
            tracing::info!(
                target: "adapter_rmcp::audit",
                time = %record.time,
                principal,
                tool = %record.tool,
                args_digest = digest,
                outcome = %record.outcome,
                reason = record.reason.as_deref(),
                "write decision"
            );
        }
    }
}

/// Appends one JSON object per decision to a file (JSON lines), flushing after each record.
///
/// The write and the flush happen synchronously, on the request's task, under a lock: every
/// write call waits for the file system (and for other calls recording at the same moment).
/// That is fine for a local disk and a modest rate of writes. For a slow or network file
/// system, or many writes per second, implement [`AuditSink`] with a channel to a background
/// writer instead.
#[derive(Debug)]
pub struct JsonLinesSink {
    file: Mutex<BufWriter<File>>,
}

impl JsonLinesSink {
    /// Opens (creating if needed) `path` for appending.
    ///
    /// # Errors
    /// [`Error::AuditFile`] when the file cannot be opened for appending.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| Error::AuditFile {
                path: path.to_owned(),
                source,
            })?;
        Ok(Self {
            file: Mutex::new(BufWriter::new(file)),
        })
    }
}

impl AuditSink for JsonLinesSink {
    fn record(&self, record: &AuditRecord) {
        let line = match serde_json::to_string(record) {
            Ok(line) => line,
            Err(error) => {
                tracing::error!(target: "adapter_rmcp::audit", %error, "cannot serialise audit record");
                return;
            }
        };
        let mut file = self.file.lock();
        let written = writeln!(file, "{line}").and_then(|()| file.flush());
        if let Err(error) = written {
            tracing::error!(target: "adapter_rmcp::audit", %error, "cannot write audit record");
        }
    }
}

/// Keeps every record in memory, for tests (yours and ours).
#[derive(Debug, Clone, Default)]
pub struct MemorySink {
    records: Arc<Mutex<Vec<AuditRecord>>>,
}

impl MemorySink {
    /// An empty sink. Clones share the same records.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every record so far, oldest first.
    pub fn records(&self) -> Vec<AuditRecord> {
        self.records.lock().clone()
    }

    /// The outcomes so far, oldest first.
    pub fn outcomes(&self) -> Vec<Outcome> {
        self.records.lock().iter().map(|r| r.outcome).collect()
    }

    /// The most recent record.
    pub fn last(&self) -> Option<AuditRecord> {
        self.records.lock().last().cloned()
    }

    /// Forgets every record.
    pub fn clear(&self) {
        self.records.lock().clear();
    }
}

impl AuditSink for MemorySink {
    fn record(&self, record: &AuditRecord) {
        self.records.lock().push(record.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(outcome: Outcome) -> AuditRecord {
        AuditRecord::new(
            OffsetDateTime::UNIX_EPOCH,
            Some(Principal::new("connection:1")),
            "adjust_stock",
            None,
            outcome,
            Some("declined".into()),
        )
    }

    #[test]
    fn memory_sink_keeps_records_in_order_and_clones_share_them() {
        let sink = MemorySink::new();
        let clone = sink.clone();
        sink.record(&record(Outcome::Declined));
        clone.record(&record(Outcome::Applied));
        assert_eq!(sink.outcomes(), vec![Outcome::Declined, Outcome::Applied]);
        sink.clear();
        assert!(clone.records().is_empty());
    }

    #[test]
    fn json_lines_sink_appends_one_object_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sink = JsonLinesSink::open(&path).unwrap();
        sink.record(&record(Outcome::Declined));
        sink.record(&record(Outcome::TokenRejected));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["outcome"], "declined");
        assert_eq!(lines[1]["outcome"], "token-rejected");
        assert_eq!(lines[1]["tool"], "adjust_stock");
        assert_eq!(lines[1]["time"], "1970-01-01T00:00:00Z");
    }

    #[test]
    fn refusals_are_told_apart_from_approvals() {
        assert!(Outcome::Stale.is_refusal());
        assert!(Outcome::RefusedTask.is_refusal());
        assert!(Outcome::RequestCancelled.is_refusal());
        assert!(Outcome::LookupFailed.is_refusal());
        assert!(Outcome::TokenRejected.is_refusal());
        assert!(!Outcome::Applied.is_refusal());
        assert!(!Outcome::TokenIssued.is_refusal());
    }
}
