//! The stored form shared by tokens and approvals: a record bound to a principal, a tool and an
//! argument digest, taken once, then remembered as a tombstone until its retention ends.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::ids::{ArgsDigest, Principal, ToolName};
use crate::store::{Store, StoreError, StoreKey};

/// A stored record.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "camelCase")]
pub(crate) enum Record {
    /// Not yet used.
    Live(LiveRecord),
    /// Taken (spent, or burned by a mismatched attempt).
    Used(Tombstone),
    /// Taken after its expiry.
    Expired(Tombstone),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Tombstone {
    pub(crate) owner: Principal,
    pub(crate) retain_until_ns: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LiveRecord {
    pub(crate) principal: Principal,
    pub(crate) tool: ToolName,
    pub(crate) digest: ArgsDigest,
    pub(crate) issued_at_ns: i64,
    pub(crate) expires_at_ns: i64,
    pub(crate) retain_until_ns: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) approval: Option<StoredApproval>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StoredApproval {
    pub(crate) id: String,
    pub(crate) arguments: Map<String, Value>,
    pub(crate) preview: Value,
}

/// Why taking a bound record failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Unknown,
    Expired,
    Used,
    OtherPrincipal,
    OtherTool,
    OtherArguments,
    Store,
}

pub(crate) fn to_ns(t: OffsetDateTime) -> Result<i64, StoreError> {
    i64::try_from(t.unix_timestamp_nanos())
        .map_err(|_| StoreError::Corrupt("time out of range".into()))
}

pub(crate) fn from_ns(ns: i64) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns))
        .map_err(|_| StoreError::Corrupt("time out of range".into()))
}

/// When a record issued at `issued_at` and expiring at `expires_at` may be forgotten: one more
/// lifetime after its expiry (never before the expiry).
pub(crate) fn retain_until(
    issued_at: OffsetDateTime,
    expires_at: OffsetDateTime,
) -> OffsetDateTime {
    let lifetime = expires_at - issued_at;
    if lifetime <= time::Duration::ZERO {
        return expires_at;
    }
    expires_at.checked_add(lifetime).unwrap_or(expires_at)
}

/// Stores a live record, kept by the store until its retention ends.
pub(crate) async fn put<S: Store + ?Sized>(
    store: &S,
    key: StoreKey,
    record: LiveRecord,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let keep_until = from_ns(record.retain_until_ns)?;
    let principal = record.principal.clone();
    let value = serde_json::to_value(Record::Live(record))
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    store.insert(key, &principal, value, keep_until, now).await
}

/// Takes the record under `key` once and checks it against the caller. Whatever the outcome, a
/// record that was live is gone afterwards (a mismatched attempt burns it: fail closed), and a
/// tombstone remembers why until the retention ends.
pub(crate) async fn take<S: Store + ?Sized>(
    store: &S,
    key: StoreKey,
    principal: &Principal,
    tool: &ToolName,
    digest: ArgsDigest,
    now: OffsetDateTime,
) -> Result<LiveRecord, Refusal> {
    let value = match store.take(&key, now).await {
        Ok(Some(value)) => value,
        Ok(None) => return Err(Refusal::Unknown),
        Err(_) => return Err(Refusal::Store),
    };
    let record: Record = serde_json::from_value(value).map_err(|_| Refusal::Store)?;
    let live = match record {
        Record::Used(tomb) => {
            remember(store, key, Record::Used(tomb), now).await;
            return Err(Refusal::Used);
        }
        Record::Expired(tomb) => {
            remember(store, key, Record::Expired(tomb), now).await;
            return Err(Refusal::Expired);
        }
        Record::Live(live) => live,
    };
    let tomb = Tombstone {
        owner: live.principal.clone(),
        retain_until_ns: live.retain_until_ns,
    };
    let expires_at = from_ns(live.expires_at_ns).map_err(|_| Refusal::Store)?;
    if now >= expires_at {
        remember(store, key, Record::Expired(tomb), now).await;
        return Err(Refusal::Expired);
    }
    let refusal = mismatch(&live, principal, tool, digest);
    // Fail closed: a mismatched attempt uses the record up too.
    remember(store, key, Record::Used(tomb), now).await;
    match refusal {
        Some(refusal) => Err(refusal),
        None => Ok(live),
    }
}

/// Reads the record under `key` without taking it and checks it against the caller exactly as
/// [`take`] would. Nothing changes in the store, so this may only be used to refuse early: the
/// grant itself is always a [`take`].
pub(crate) async fn check<S: Store + ?Sized>(
    store: &S,
    key: &StoreKey,
    principal: &Principal,
    tool: &ToolName,
    digest: ArgsDigest,
    now: OffsetDateTime,
) -> Result<(), Refusal> {
    let value = match store.get(key, now).await {
        Ok(Some(value)) => value,
        Ok(None) => return Err(Refusal::Unknown),
        Err(_) => return Err(Refusal::Store),
    };
    let live = match serde_json::from_value(value).map_err(|_| Refusal::Store)? {
        Record::Used(_) => return Err(Refusal::Used),
        Record::Expired(_) => return Err(Refusal::Expired),
        Record::Live(live) => live,
    };
    if now >= from_ns(live.expires_at_ns).map_err(|_| Refusal::Store)? {
        return Err(Refusal::Expired);
    }
    mismatch(&live, principal, tool, digest).map_or(Ok(()), Err)
}

/// Whether a live record was issued for someone or something else than the caller.
fn mismatch(
    live: &LiveRecord,
    principal: &Principal,
    tool: &ToolName,
    digest: ArgsDigest,
) -> Option<Refusal> {
    if &live.principal != principal {
        Some(Refusal::OtherPrincipal)
    } else if &live.tool != tool {
        Some(Refusal::OtherTool)
    } else if live.digest != digest {
        Some(Refusal::OtherArguments)
    } else {
        None
    }
}

/// Puts a tombstone back. Best effort: it only sharpens the reason a later attempt is refused
/// with (already used or expired, rather than unknown); the later attempt is refused either way.
async fn remember<S: Store + ?Sized>(
    store: &S,
    key: StoreKey,
    record: Record,
    now: OffsetDateTime,
) {
    let (owner, until) = match &record {
        Record::Used(t) | Record::Expired(t) => (t.owner.clone(), t.retain_until_ns),
        Record::Live(_) => return,
    };
    let Ok(until) = from_ns(until) else { return };
    let Ok(value) = serde_json::to_value(record) else {
        return;
    };
    let _ignored = store.insert_tombstone(key, &owner, value, until, now).await;
}
