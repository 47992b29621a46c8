//! Helpers for this crate's unit tests.

use futures_util::FutureExt as _;
use std::future::Future;

use serde_json::Value;
use time::OffsetDateTime;

use crate::ids::Principal;
use crate::store::{BoxFuture, Store, StoreError, StoreKey};

/// Polls a future once and returns its output: the memory store's futures are ready at once,
/// and a future that is not is a bug in the test.
pub(crate) fn ready<F: Future>(f: F) -> F::Output {
    f.now_or_never().expect("future was not ready")
}

/// A store whose every call fails, or whose takes return a record it cannot have written.
#[derive(Debug)]
pub(crate) enum BrokenStore {
    Unavailable,
    Garbage(Value),
}

impl Store for BrokenStore {
    fn insert<'a>(
        &'a self,
        _key: StoreKey,
        _principal: &'a Principal,
        _record: Value,
        _expires_at: OffsetDateTime,
        _now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let result = match self {
            Self::Unavailable => Err(StoreError::Unavailable("down".into())),
            Self::Garbage(_) => Ok(()),
        };
        Box::pin(std::future::ready(result))
    }

    fn take<'a>(
        &'a self,
        _key: &'a StoreKey,
        _now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Value>, StoreError>> {
        let result = match self {
            Self::Unavailable => Err(StoreError::Unavailable("down".into())),
            Self::Garbage(v) => Ok(Some(v.clone())),
        };
        Box::pin(std::future::ready(result))
    }

    fn get<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Value>, StoreError>> {
        self.take(key, now)
    }

    fn purge_expired(&self, _now: OffsetDateTime) -> BoxFuture<'_, Result<usize, StoreError>> {
        Box::pin(std::future::ready(Err(StoreError::Unavailable(
            "down".into(),
        ))))
    }
}

/// A store that reaches a [`MemoryStore`](crate::MemoryStore) only through the [`Store`]
/// methods, with JSON records: what any other backend gets. (It keeps the default
/// `as_memory_store`, so this crate takes its JSON path.) Clones share the same store.
#[derive(Debug, Clone, Default)]
pub(crate) struct JsonOnly(pub(crate) std::sync::Arc<crate::MemoryStore>);

impl Store for JsonOnly {
    fn insert<'a>(
        &'a self,
        key: StoreKey,
        principal: &'a Principal,
        record: Value,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.insert(key, principal, record, expires_at, now)
    }

    fn insert_tombstone<'a>(
        &'a self,
        key: StoreKey,
        principal: &'a Principal,
        record: Value,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0
            .insert_tombstone(key, principal, record, expires_at, now)
    }

    fn take<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Value>, StoreError>> {
        self.0.take(key, now)
    }

    fn get<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Value>, StoreError>> {
        self.0.get(key, now)
    }

    fn purge_expired(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<usize, StoreError>> {
        self.0.purge_expired(now)
    }
}

/// The digest of a tool definition, for records whose definition the test does not change.
pub(crate) fn definition() -> crate::ids::DefinitionDigest {
    crate::ids::DefinitionDigest::from_bytes([0xd1; 32])
}

/// The digest of another definition of the same tool.
pub(crate) fn other_definition() -> crate::ids::DefinitionDigest {
    crate::ids::DefinitionDigest::from_bytes([0xd2; 32])
}
