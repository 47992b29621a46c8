//! Pending approvals kept in the store: the input-required round trip (`requestState`) and
//! approvals held across a question to the user.

use std::fmt;

use time::OffsetDateTime;

use crate::approval::PendingApproval;
use crate::args::CapturedArgs;
use crate::bound::{self, LiveRecord, Refusal, StoredApproval};
use crate::ids::{ApprovalId, Principal, StateId, ToolName};
use crate::store::{RecordKind, Store, StoreError, StoreKey};

/// The one text every round-trip refusal renders to, whatever the reason.
pub const ROUND_TRIP_REFUSAL_MESSAGE: &str = "This approval request is no longer valid (it expired, was already answered, \
or does not match this call), so nothing was changed. Call the tool again to ask the user anew.";

/// Why a stored approval or round-trip state was refused. Kept for the audit trail
/// ([`as_str`](Self::as_str)); [`Display`](fmt::Display) renders [`ROUND_TRIP_REFUSAL_MESSAGE`]
/// for every variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RoundTripRejection {
    /// Not a well-formed state value: forged or altered.
    Malformed,
    /// No such state: forged, altered, or forgotten after its retention.
    Unknown,
    /// Presented at or after the end of the approval clock.
    Expired,
    /// Already used once: a replay.
    Replayed,
    /// Opened for another principal. The attempt uses the state up.
    OtherPrincipal,
    /// Opened for another tool. The attempt uses the state up.
    OtherTool,
    /// Opened for other arguments. The attempt uses the state up.
    OtherArguments,
    /// The store failed or held a record it could not read.
    Store,
}

impl RoundTripRejection {
    /// A stable, kebab-case name for the audit trail.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::Unknown => "unknown",
            Self::Expired => "expired",
            Self::Replayed => "replayed",
            Self::OtherPrincipal => "other-principal",
            Self::OtherTool => "other-tool",
            Self::OtherArguments => "other-arguments",
            Self::Store => "store",
        }
    }

    /// The text to show: the same for every reason.
    pub fn user_message(self) -> &'static str {
        ROUND_TRIP_REFUSAL_MESSAGE
    }
}

impl fmt::Display for RoundTripRejection {
    /// Renders [`ROUND_TRIP_REFUSAL_MESSAGE`], whatever the reason.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(ROUND_TRIP_REFUSAL_MESSAGE)
    }
}

impl From<Refusal> for RoundTripRejection {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Unknown => Self::Unknown,
            Refusal::Expired => Self::Expired,
            Refusal::Used => Self::Replayed,
            Refusal::OtherPrincipal => Self::OtherPrincipal,
            Refusal::OtherTool => Self::OtherTool,
            Refusal::OtherArguments => Self::OtherArguments,
            Refusal::Store => Self::Store,
        }
    }
}

/// Stores `pending` as the state of an input-required round trip and returns the opaque
/// `requestState` value to hand to the client. The state expires with the approval clock
/// (`pending.expires_at`) and can be taken once, by [`take_round_trip`].
pub async fn open_round_trip<S: Store + ?Sized>(
    store: &S,
    pending: &PendingApproval,
    now: OffsetDateTime,
) -> Result<StateId, StoreError> {
    let id = StateId::random();
    put_pending(
        store,
        StoreKey::new(RecordKind::RoundTrip, id.to_string()),
        pending,
        now,
    )
    .await?;
    Ok(id)
}

/// Takes the round-trip state `state` (the client's echoed `requestState`) for `principal`
/// retrying `tool` with `args` at `now`. Succeeds once, while the approval clock runs
/// (`now < expires_at`), when principal, tool and the digest of `args` all match what was opened.
/// Any attempt that finds the state uses it up (fail closed); a second attempt is
/// [`RoundTripRejection::Replayed`]. The returned approval still has to
/// [`decide`](PendingApproval::decide) the user's answer, and its
/// [`args`](PendingApproval::args) are the ones to apply.
pub async fn take_round_trip<S: Store + ?Sized>(
    store: &S,
    state: &str,
    principal: &Principal,
    tool: &ToolName,
    args: &CapturedArgs,
    now: OffsetDateTime,
) -> Result<PendingApproval, RoundTripRejection> {
    let id: StateId = state.parse().map_err(|_| RoundTripRejection::Malformed)?;
    let key = StoreKey::new(RecordKind::RoundTrip, id.to_string());
    take_pending(store, key, principal, tool, args, now).await
}

/// Stores `pending` under its own [`ApprovalId`] (for example while a question to the user is in
/// flight on another replica), until its approval clock runs out.
pub async fn store_approval<S: Store + ?Sized>(
    store: &S,
    pending: &PendingApproval,
    now: OffsetDateTime,
) -> Result<ApprovalId, StoreError> {
    let key = StoreKey::new(RecordKind::Approval, pending.id.to_string());
    put_pending(store, key, pending, now).await?;
    Ok(pending.id)
}

/// Takes a stored approval once; the same checks as [`take_round_trip`].
pub async fn take_approval<S: Store + ?Sized>(
    store: &S,
    id: &str,
    principal: &Principal,
    tool: &ToolName,
    args: &CapturedArgs,
    now: OffsetDateTime,
) -> Result<PendingApproval, RoundTripRejection> {
    let id: ApprovalId = id.parse().map_err(|_| RoundTripRejection::Malformed)?;
    let key = StoreKey::new(RecordKind::Approval, id.to_string());
    take_pending(store, key, principal, tool, args, now).await
}

async fn put_pending<S: Store + ?Sized>(
    store: &S,
    key: StoreKey,
    pending: &PendingApproval,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let record = LiveRecord {
        principal: pending.principal.clone(),
        tool: pending.tool.clone(),
        digest: pending.args.digest(),
        issued_at_ns: bound::to_ns(pending.asked_at)?,
        expires_at_ns: bound::to_ns(pending.expires_at)?,
        retain_until_ns: bound::to_ns(bound::retain_until(pending.asked_at, pending.expires_at))?,
        approval: Some(StoredApproval {
            id: pending.id.to_string(),
            arguments: pending.args.arguments().clone(),
            preview: pending.preview.clone(),
        }),
    };
    bound::put(store, key, record, now).await
}

async fn take_pending<S: Store + ?Sized>(
    store: &S,
    key: StoreKey,
    principal: &Principal,
    tool: &ToolName,
    args: &CapturedArgs,
    now: OffsetDateTime,
) -> Result<PendingApproval, RoundTripRejection> {
    let live = bound::take(store, key, principal, tool, args.digest(), now).await?;
    restore(live).ok_or(RoundTripRejection::Store)
}

fn restore(live: LiveRecord) -> Option<PendingApproval> {
    let stored = live.approval?;
    let id: ApprovalId = stored.id.parse().ok()?;
    let args = CapturedArgs::restore(stored.arguments, live.digest).ok()?;
    Some(PendingApproval::from_parts(
        id,
        live.principal,
        live.tool,
        args,
        stored.preview,
        bound::from_ns(live.issued_at_ns).ok()?,
        bound::from_ns(live.expires_at_ns).ok()?,
    ))
}
