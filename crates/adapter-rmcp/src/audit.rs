//! One record per event on the write path: who asked, which tool, which arguments, what the
//! person was shown, what happened.
//!
//! The adapter hands every decision to an [`AuditSink`]: the question put to the person
//! ([`Outcome::Asked`]), refusals, the person's approval, the final apply, issued tokens. Reads
//! are not decisions and are not recorded. Every record of one call carries the same
//! [`approval_id`](AuditRecord::approval_id) once the call has one, so an auditor can join
//! asked → approved / declined / expired → applied / stale.
//!
//! # What the `asked` record holds, and redaction
//!
//! The `asked` record ([`Asked`]) carries the approval's expiry, the protocol era, the channel,
//! the SHA-256 digest of the question exactly as sent, and by default the question itself and
//! the captured arguments (keys sorted, as canonicalised), so that the records alone say what
//! the person was shown and what was applied (the apply uses exactly those arguments).
//!
//! Values that must not be logged are redacted with
//! [`WriteGuardBuilder::redact`](crate::WriteGuardBuilder::redact) (per tool and argument name)
//! or [`redact_with`](crate::WriteGuardBuilder::redact_with) (any rule). A redacted argument is
//! recorded as `{"redacted": "<sha-256 of its canonical JSON>"}`, so a value produced later can
//! still be checked against it, and a call with any argument redacted this way records no
//! question text (the question may quote the value), only its digest. `confirmationToken` is
//! always redacted: it is a bearer secret until spent; no question ever shows it, so the
//! question of a token-gated call is kept. The default logs everything else because an
//! approval trail that cannot say what was approved does not do its job; redact what your
//! tools take that is secret or personal.

use std::{collections::HashSet, sync::Arc};

use mcp_write_guard_core::{
    ApprovalId, PendingApproval, Principal,
    canonical::{PREVIEW_LIMITS, canonical_json},
    ids::ArgsDigest,
    token::CONFIRMATION_TOKEN_ARG,
};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

use crate::elicit::Era;

#[cfg(feature = "audit-jsonl")]
mod jsonl;
#[cfg(feature = "audit-jsonl")]
pub use jsonl::{CHAIN_START, JsonLinesSink};

/// What happened to one write request (or one step of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Outcome {
    /// The person was asked; the record carries [`Asked`]. Not a decision yet.
    Asked,
    /// Writes are disabled on this server; nothing was asked, nothing written.
    RefusedDisabled,
    /// The client cannot ask its user (no elicitation); nothing written.
    RefusedNoElicitation,
    /// The server could not tell who is asking; nothing written.
    RefusedNoPrincipal,
    /// The caller's verified credential lacks the scope writes need; nothing written.
    RefusedScope,
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
    /// The tool changed between the question and the apply: its definition (name, title,
    /// description, input or output schema, annotations) is not the one the person approved a
    /// call of, or the server no longer offers it (reason: `changed (approved <digest>, now
    /// <digest>)`, `gone`, `unreadable: <why>`). The approval is used up; nothing written.
    ToolChanged,
    /// The inner server refuses calls to this tool now
    /// ([`WriteGuardBuilder::refuse_calls_when`](crate::WriteGuardBuilder::refuse_calls_when):
    /// a pinned surface it no longer matches, an upstream that stopped); nobody was asked,
    /// nothing written (reason: the server's).
    RefusedByServer,
    /// The approval store failed, or the user has too many open approvals; nothing written.
    StoreFailed,
    /// The request lets the inner server answer with a task (the tasks extension is declared by
    /// the request and supported by the server), which a guarded write cannot be; nothing was
    /// asked, nothing written.
    RefusedTask,
    /// The client cancelled the request after the user approved; nothing spent, issued or
    /// written.
    RequestCancelled,
    /// The inner server's tool list could not be read (the tool named for
    /// `prepare_admin_action`, or the tool just before the apply, could not be checked), or a
    /// tool's definition has no digest to bind a question to; no token issued, nothing written.
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
    /// The person answered on the approval page (reason `approve` or `decline`); the call
    /// that asked decides on it next. Not a decision of the call yet.
    PageAnswered,
    /// An answer on the approval page was refused (reason: `csrf`, `not-signed-in`,
    /// `other-person`, `answered`, `withdrawn`, `expired`, `store`); the page did not change.
    PageRefused,
    /// The client's form answered the question (reason: the action, `accept`, `decline`,
    /// `cancel`); the first answer of a question is the one that counts. Not a decision of the
    /// call yet.
    Answered,
    /// A notifier told a person about the question (reason: `<channel>: delivered`).
    Notified,
    /// The notifier failed, so nobody was asked; nothing written (reason: `<channel>: <why>`).
    NotifyFailed,
    /// The question is open and this call does not wait for it (the client cannot be asked,
    /// or stopped waiting); the model is told to call again. Nothing written yet.
    AwaitingAnswer,
    /// The question was approved, but another call of the same change took the approval
    /// first; this call wrote nothing.
    AlreadyUsed,
}

impl Outcome {
    /// The kebab-case name used in logs (`refused-disabled`, `token-rejected`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Asked => "asked",
            Self::RefusedDisabled => "refused-disabled",
            Self::RefusedNoElicitation => "refused-no-elicitation",
            Self::RefusedNoPrincipal => "refused-no-principal",
            Self::RefusedScope => "refused-scope",
            Self::BadArguments => "bad-arguments",
            Self::TokenRejected => "token-rejected",
            Self::PreviewFailed => "preview-failed",
            Self::Declined => "declined",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::AskFailed => "ask-failed",
            Self::StateRejected => "state-rejected",
            Self::Stale => "stale",
            Self::ToolChanged => "tool-changed",
            Self::RefusedByServer => "refused-by-server",
            Self::StoreFailed => "store-failed",
            Self::RefusedTask => "refused-task",
            Self::RequestCancelled => "request-cancelled",
            Self::LookupFailed => "lookup-failed",
            Self::Approved => "approved",
            Self::ApprovedWithoutElicitation => "approved-without-elicitation",
            Self::Applied => "applied",
            Self::ApplyFailed => "apply-failed",
            Self::TokenIssued => "token-issued",
            Self::PageAnswered => "page-answered",
            Self::PageRefused => "page-refused",
            Self::Answered => "answered",
            Self::Notified => "notified",
            Self::NotifyFailed => "notify-failed",
            Self::AwaitingAnswer => "awaiting-answer",
            Self::AlreadyUsed => "already-used",
        }
    }

    /// Whether this outcome is a refusal: nothing was written because of it.
    pub fn is_refusal(self) -> bool {
        !matches!(
            self,
            Self::Asked
                | Self::PageAnswered
                | Self::Answered
                | Self::Notified
                | Self::Approved
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

/// One event on the write path.
///
/// Every record of one call carries the same [`approval_id`](Self::approval_id) once the call
/// has one, so asked → approved / declined / expired → applied / stale can be joined. The
/// `asked` record ([`Asked`]) carries the approval's expiry, the protocol era, the channel, the
/// SHA-256 of the question as sent and, by default, the question itself and the captured
/// arguments, so the records alone say what the person was shown and what was applied (the
/// apply uses exactly those arguments). Values that must not be logged are redacted with
/// [`WriteGuardBuilder::redact`](crate::WriteGuardBuilder::redact) or
/// [`redact_with`](crate::WriteGuardBuilder::redact_with): a redacted argument is recorded as
/// `{"redacted": "<sha-256 of its canonical JSON>"}` and the call's question text is left out
/// (it may quote the value). `confirmationToken` is always redacted. The default records
/// everything else, because an approval trail that cannot say what was approved does not do
/// its job: redact what your tools take that is secret or personal.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct AuditRecord {
    /// When it happened, by the adapter's clock (RFC 3339 in every sink).
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
    /// The approval this call opened or answered, on every record of the call from the
    /// moment it has one (the preview ran, or a retry named its round trip).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<ApprovalId>,
    /// On an [`Outcome::Asked`] record: what the person was shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asked: Option<Asked>,
    /// How the person was asked, on every record of a call from its question on (and on the
    /// page's own records, [`Outcome::PageAnswered`] and [`Outcome::PageRefused`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<Channel>,
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
            approval_id: None,
            asked: None,
            channel: None,
        }
    }

    /// The same record, saying how the person was asked.
    #[must_use]
    pub fn with_channel(mut self, channel: Option<Channel>) -> Self {
        self.channel = channel;
        self
    }

    /// The same record, naming the call's approval.
    #[must_use]
    pub fn with_approval(mut self, approval_id: Option<ApprovalId>) -> Self {
        self.approval_id = approval_id;
        self
    }

    /// The same record, with what the person was shown.
    #[must_use]
    pub fn with_asked(mut self, asked: Asked) -> Self {
        self.asked = Some(asked);
        self
    }
}

/// How the question reached the person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Channel {
    /// A form elicitation (`elicitation/create`, or its input request from 2026-07-28 on):
    /// the answer travels through the client.
    Form,
    /// The server's own approval page (URL-mode elicitation): the person answers the server
    /// directly.
    Page,
}

impl Channel {
    /// The name used in logs (`form`, `page`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Form => "form",
            Self::Page => "page",
        }
    }
}

/// What an [`Outcome::Asked`] record says about the question.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Asked {
    /// When the approval clock runs out: an answer at or after it is a denial.
    #[serde(serialize_with = "rfc3339")]
    pub expires_at: OffsetDateTime,
    /// The protocol era of the request: `legacy` (below 2026-07-28, `elicitation/create`) or
    /// `2026-07-28` (an input-required round trip).
    pub era: Era,
    /// How the question was put.
    pub channel: Channel,
    /// SHA-256 of the question exactly as sent, as 64 lowercase hex digits.
    pub prompt_digest: String,
    /// The question as sent; `None` when an argument of the call is redacted by the server's
    /// rules (the confirmation token, which no question shows, does not count).
    pub prompt: Option<String>,
    /// The captured arguments (keys sorted), redacted values replaced by
    /// `{"redacted": "<sha-256 of the value's canonical JSON>"}`.
    pub arguments: Value,
}

impl Asked {
    /// What the person is asked about `pending` with `prompt`; `redaction` says which
    /// arguments must not be logged (for `prepare_admin_action`, the target tool's rules apply
    /// to the target's arguments inside `arguments`).
    pub(crate) fn new(
        pending: &PendingApproval,
        prompt: &str,
        era: Era,
        channel: Channel,
        redaction: &Redaction,
    ) -> Self {
        // A value redacted by the server's rules may be quoted in the question, so the question
        // is then not kept. The confirmation token is redacted too, but it never reaches a
        // question (every wording gets the arguments without it), so it does not hide one.
        let mut redacted_by_rule = false;
        let mut redact_map = |tool: &str, map: &Map<String, Value>| -> Map<String, Value> {
            map.iter()
                .map(|(name, value)| {
                    if redaction.redacts(tool, name) {
                        redacted_by_rule = true;
                        (name.clone(), redacted(value))
                    } else if name == CONFIRMATION_TOKEN_ARG {
                        (name.clone(), redacted(value))
                    } else {
                        (name.clone(), value.clone())
                    }
                })
                .collect()
        };
        let tool = pending.tool().as_str();
        let mut arguments = redact_map(tool, pending.args().arguments());
        // prepare_admin_action {tool, arguments}: the target's arguments, by the target's rules.
        if tool == crate::PREPARE_ADMIN_ACTION
            && let Some(Value::String(target)) = pending.args().arguments().get("tool")
            && let Some(Value::Object(inner)) = pending.args().arguments().get("arguments")
        {
            let inner = redact_map(target, inner);
            arguments.insert("arguments".to_owned(), Value::Object(inner));
        }
        Self {
            expires_at: pending.expires_at(),
            era,
            channel,
            prompt_digest: hex_sha256(prompt.as_bytes()),
            prompt: (!redacted_by_rule).then(|| prompt.to_owned()),
            arguments: Value::Object(arguments),
        }
    }
}

/// Which arguments the audit records must not show: per tool and argument name, or by a rule.
#[derive(Clone, Default, derive_more::Debug)]
pub(crate) struct Redaction {
    pairs: HashSet<(String, String)>,
    /// `Debug` shows how many.
    #[debug("{}", rules.len())]
    rules: Vec<RedactRule>,
}

/// A rule that says whether `(tool, argument)` is redacted.
pub(crate) type RedactRule = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

impl Redaction {
    pub(crate) fn add(&mut self, tool: String, argument: String) {
        self.pairs.insert((tool, argument));
    }

    pub(crate) fn add_rule(&mut self, rule: RedactRule) {
        self.rules.push(rule);
    }

    /// Whether `argument` of `tool` is kept out of the records.
    pub(crate) fn redacts(&self, tool: &str, argument: &str) -> bool {
        self.pairs.contains(&(tool.to_owned(), argument.to_owned()))
            || self.rules.iter().any(|rule| rule(tool, argument))
    }
}

fn redacted(value: &Value) -> Value {
    let canonical = canonical_json(value, &PREVIEW_LIMITS).unwrap_or_default();
    json!({ "redacted": hex_sha256(canonical.as_bytes()) })
}

fn hex_sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn rfc3339<S: serde::Serializer>(time: &OffsetDateTime, serializer: S) -> Result<S::Ok, S::Error> {
    let text = time.format(&Rfc3339).map_err(serde::ser::Error::custom)?;
    serializer.serialize_str(&text)
}

/// `time` in RFC 3339, as every sink prints it.
fn rfc3339_text(time: OffsetDateTime) -> String {
    time.format(&Rfc3339).unwrap_or_else(|_| time.to_string())
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

/// Both sinks, in order: `(TracingSink, JsonLinesSink::open(path)?)` logs every record and
/// keeps it in a file of its own.
impl<A: AuditSink, B: AuditSink> AuditSink for (A, B) {
    fn record(&self, record: &AuditRecord) {
        self.0.record(record);
        self.1.record(record);
    }
}

/// The default sink: one `tracing` event per decision (target `mcp_write_guard_rmcp::audit`), at
/// `info` for approvals and applies, `warn` for refusals.
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingSink;

impl AuditSink for TracingSink {
    fn record(&self, record: &AuditRecord) {
        let time = rfc3339_text(record.time);
        let principal = record.principal.as_ref().map(Principal::as_str);
        let digest = record.args_digest.map(|d| d.to_string());
        let approval_id = record.approval_id.map(|id| id.to_string());
        let asked = record.asked.as_ref();
        let expires_at = asked.map(|a| rfc3339_text(a.expires_at));
        let era = asked.map(|a| a.era.as_str());
        let channel = record
            .channel
            .or(asked.map(|a| a.channel))
            .map(Channel::as_str);
        let prompt_digest = asked.map(|a| a.prompt_digest.as_str());
        let prompt = asked.and_then(|a| a.prompt.as_deref());
        let arguments = asked.map(|a| a.arguments.to_string());
        macro_rules! event {
            ($level:ident, $message:literal) => {
                tracing::$level!(
                    target: "mcp_write_guard_rmcp::audit",
                    time = time.as_str(),
                    principal,
                    tool = record.tool.as_str(),
                    args_digest = digest,
                    approval_id,
                    outcome = record.outcome.as_str(),
                    reason = record.reason.as_deref(),
                    expires_at,
                    era,
                    channel,
                    prompt_digest,
                    prompt,
                    arguments,
                    $message
                )
            };
        }
        if record.outcome == Outcome::PageRefused {
            event!(warn, "approval page answer refused");
        } else if record.outcome == Outcome::PageAnswered {
            event!(info, "approval page answered");
        } else if record.outcome.is_refusal() {
            event!(warn, "write refused");
        } else if record.outcome == Outcome::Asked {
            event!(info, "write asked");
        } else {
            event!(info, "write decision");
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

    /// The decisions so far, oldest first: every outcome except [`Outcome::Asked`].
    pub fn decisions(&self) -> Vec<Outcome> {
        self.records
            .lock()
            .iter()
            .map(|r| r.outcome)
            .filter(|o| *o != Outcome::Asked)
            .collect()
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
pub(crate) mod tests {
    use super::*;

    pub(crate) fn record(outcome: Outcome) -> AuditRecord {
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
    fn refusals_are_told_apart_from_approvals() {
        assert!(Outcome::Stale.is_refusal());
        assert!(Outcome::ToolChanged.is_refusal());
        assert!(Outcome::RefusedByServer.is_refusal());
        assert_eq!(Outcome::RefusedByServer.as_str(), "refused-by-server");
        assert_eq!(Outcome::ToolChanged.as_str(), "tool-changed");
        assert!(Outcome::RefusedTask.is_refusal());
        assert!(Outcome::RequestCancelled.is_refusal());
        assert!(Outcome::LookupFailed.is_refusal());
        assert!(Outcome::TokenRejected.is_refusal());
        assert!(!Outcome::Applied.is_refusal());
        assert!(!Outcome::TokenIssued.is_refusal());
    }
}
