//! The records this crate stores, as they are stored (the JSON a backend holds is their serde
//! form), and the instants they keep (Unix nanoseconds). Below the store and every module that
//! stores something.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::answer::AnswerChannel;
use crate::ids::{ApprovalId, ArgsDigest, DefinitionDigest, Principal, ToolName};
use crate::key::{RecordKind, StoreError, StoreKey};

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
    /// The tool's definition when the record was made (see
    /// [`ToolDefinition`](crate::ToolDefinition)). Required: a record written before
    /// definitions were bound cannot be read, and is refused like any record the store cannot
    /// read.
    pub(crate) definition: DefinitionDigest,
    pub(crate) issued_at_ns: i64,
    pub(crate) expires_at_ns: i64,
    pub(crate) retain_until_ns: i64,
    /// Boxed: most records (tokens) have none, and a record is moved about whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) approval: Option<Box<StoredApproval>>,
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

impl Record {
    /// The JSON a store holds for this record.
    pub(crate) fn to_json(&self) -> Result<Value, StoreError> {
        serde_json::to_value(self).map_err(|e| StoreError::Corrupt(e.to_string()))
    }
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
    key.with_suffix(".receipt")
}

/// The answer entry under the approval's id.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AnswerRecord {
    pub(crate) action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) content: Option<Value>,
    pub(crate) channel: AnswerChannel,
    pub(crate) answered_at_ns: i64,
}

/// The key of the answer of the question about `approval`.
pub(crate) fn answer_key(approval: &ApprovalId) -> StoreKey {
    StoreKey::new(RecordKind::Question, format!("{approval}.answer"))
}
