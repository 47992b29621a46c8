//! The stored form shared by tokens and approvals: a record bound to a principal, a tool and an
//! argument digest, taken once.
//!
//! Each record lives under two keys:
//! - its own key holds the [`LiveRecord`] **only while it is live** (until `expires_at`): that is
//!   the only entry that counts towards the principal's cap, so an unused record gives its place
//!   back the moment its lifetime ends. Once taken, the key holds a `Used` tombstone until the
//!   record's retention ends (one more lifetime), so a second attempt is told "already used".
//! - its receipt key ([`receipt_key`]) holds a [`Receipt`] from the moment it is stored until its
//!   retention ends: when the own key is empty, the receipt tells an expired record (now at or
//!   after `expires_at`) from one never issued (no receipt).
//!
//! Tombstones and receipts are stored with [`Store::insert_tombstone`]: they grant nothing and do
//! not count towards the principal's cap.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::ids::{ArgsDigest, Principal, ToolName};
use crate::store::{Store, StoreError, StoreKey};

/// A stored record.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "camelCase")]
pub(crate) enum Record {
    /// Not yet used; under the record's own key until it expires.
    Live(LiveRecord),
    /// Taken (spent, or burned by a mismatched attempt); under the record's own key.
    Used(Tombstone),
    /// That the record was stored, and when it expires; under the receipt key.
    Receipt(Receipt),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Tombstone {
    pub(crate) owner: Principal,
    pub(crate) retain_until_ns: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Receipt {
    pub(crate) owner: Principal,
    pub(crate) expires_at_ns: i64,
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
    /// The approval page that asks about it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) page: Option<String>,
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

/// The key of the receipt of the record under `key`. Record ids are canonical UUIDs, which hold
/// no `.`, so a receipt key is never the key of a record.
pub(crate) fn receipt_key(key: &StoreKey) -> StoreKey {
    StoreKey::new(key.kind(), format!("{}.receipt", key.id()))
}

/// Stores a live record until it expires (it counts towards its principal's cap for exactly its
/// lifetime), then its receipt until its retention ends.
pub(crate) async fn put<S: Store + ?Sized>(
    store: &S,
    key: StoreKey,
    record: LiveRecord,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let expires_at = from_ns(record.expires_at_ns)?;
    let keep_until = from_ns(record.retain_until_ns)?;
    let principal = record.principal.clone();
    let receipt = Record::Receipt(Receipt {
        owner: principal.clone(),
        expires_at_ns: record.expires_at_ns,
        retain_until_ns: record.retain_until_ns,
    });
    let receipt = serde_json::to_value(receipt).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let value = serde_json::to_value(Record::Live(record))
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let receipt_key = receipt_key(&key);
    // The record first: a record refused (over the cap, say) leaves no receipt behind.
    store
        .insert(key, &principal, value, expires_at, now)
        .await?;
    // Best effort, like every tombstone: without it a late attempt is told "unknown" rather than
    // "expired", and is refused either way.
    let _ignored = store
        .insert_tombstone(receipt_key, &principal, receipt, keep_until, now)
        .await;
    Ok(())
}

/// Takes the record under `key` once and checks it against the caller. Whatever the outcome, a
/// record that was live is gone afterwards (a mismatched attempt burns it: fail closed), and a
/// tombstone remembers that it was used until the retention ends.
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
        Ok(None) => return Err(absent(store, &key, now).await),
        Err(_) => return Err(Refusal::Store),
    };
    let record: Record = serde_json::from_value(value).map_err(|_| Refusal::Store)?;
    let live = match record {
        Record::Used(tomb) => {
            remember(store, key, tomb, now).await;
            return Err(Refusal::Used);
        }
        // A receipt is never stored under a record's own key.
        Record::Receipt(_) => return Err(Refusal::Store),
        Record::Live(live) => live,
    };
    let expires_at = from_ns(live.expires_at_ns).map_err(|_| Refusal::Store)?;
    if now >= expires_at {
        // A backend that handed back a record past its expiry: it is gone now, and its receipt
        // tells later attempts that it expired.
        return Err(Refusal::Expired);
    }
    let tomb = Tombstone {
        owner: live.principal.clone(),
        retain_until_ns: live.retain_until_ns,
    };
    let refusal = mismatch(&live, principal, tool, digest);
    // Fail closed: a mismatched attempt uses the record up too.
    remember(store, key, tomb, now).await;
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
        Ok(None) => return Err(absent(store, key, now).await),
        Err(_) => return Err(Refusal::Store),
    };
    let live = match serde_json::from_value(value).map_err(|_| Refusal::Store)? {
        Record::Used(_) => return Err(Refusal::Used),
        Record::Receipt(_) => return Err(Refusal::Store),
        Record::Live(live) => live,
    };
    if now >= from_ns(live.expires_at_ns).map_err(|_| Refusal::Store)? {
        return Err(Refusal::Expired);
    }
    mismatch(&live, principal, tool, digest).map_or(Ok(()), Err)
}

/// Why the record under `key` is not there, from its receipt: no receipt, never issued (or
/// forgotten after its retention); a receipt past its expiry, expired; a receipt still within its
/// lifetime, taken by another attempt a moment ago.
async fn absent<S: Store + ?Sized>(store: &S, key: &StoreKey, now: OffsetDateTime) -> Refusal {
    let value = match store.get(&receipt_key(key), now).await {
        Ok(Some(value)) => value,
        Ok(None) => return Refusal::Unknown,
        Err(_) => return Refusal::Store,
    };
    let receipt = match serde_json::from_value(value) {
        Ok(Record::Receipt(receipt)) => receipt,
        Ok(Record::Live(_) | Record::Used(_)) | Err(_) => return Refusal::Store,
    };
    let Ok(expires_at) = from_ns(receipt.expires_at_ns) else {
        return Refusal::Store;
    };
    if now >= expires_at {
        Refusal::Expired
    } else {
        Refusal::Used
    }
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

/// Stores the `Used` tombstone under the record's own key. Best effort: it only sharpens the
/// reason a later attempt is refused with (already used, rather than expired or unknown); the
/// later attempt is refused either way.
async fn remember<S: Store + ?Sized>(
    store: &S,
    key: StoreKey,
    tomb: Tombstone,
    now: OffsetDateTime,
) {
    let Ok(until) = from_ns(tomb.retain_until_ns) else {
        return;
    };
    let owner = tomb.owner.clone();
    let Ok(value) = serde_json::to_value(Record::Used(tomb)) else {
        return;
    };
    let _ignored = store.insert_tombstone(key, &owner, value, until, now).await;
}
