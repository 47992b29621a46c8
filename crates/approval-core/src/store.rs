//! Where approvals, round-trip state and tokens live between calls.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::future::Future;
use std::pin::Pin;

use parking_lot::Mutex;
use serde_json::Value;
use time::OffsetDateTime;

use crate::ids::Principal;
use crate::policy::{ApprovalPolicy, DEFAULT_PER_PRINCIPAL_CAP};

/// A boxed, `Send` future: what [`Store`] methods return, so that the trait is dyn-compatible and
/// an asynchronous backend (Redis) fits behind it.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a stored record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordKind {
    /// A pending approval kept in the store (see [`store_approval`](crate::store_approval)).
    Approval,
    /// Round-trip state: the `requestState` of an input-required round trip.
    RoundTrip,
    /// A confirmation token.
    Token,
    /// An approval page: what it shows, and the person's answer until the guard reads it.
    Page,
}

impl RecordKind {
    /// A stable short name, usable as a key prefix by backends.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approval => "approval",
            Self::RoundTrip => "round-trip",
            Self::Token => "token",
            Self::Page => "page",
        }
    }
}

/// The key of a stored record: its kind and its opaque id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StoreKey {
    kind: RecordKind,
    id: String,
}

impl StoreKey {
    /// A key for a record of `kind` with the opaque `id`.
    pub fn new(kind: RecordKind, id: impl Into<String>) -> Self {
        Self {
            kind,
            id: id.into(),
        }
    }

    /// The record kind.
    pub fn kind(&self) -> RecordKind {
        self.kind
    }

    /// The opaque id.
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl fmt::Display for StoreKey {
    /// `kind:id`, for example `token:4f…`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.as_str(), self.id)
    }
}

/// A store failure. Every store failure is a denial for the write that needed the store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The backend could not be reached or failed.
    #[error("approval store unavailable: {0}")]
    Unavailable(String),
    /// The principal already has `cap` live entries.
    #[error(
        "too many pending approvals and tokens for this user (limit {cap}); finish or let some expire first"
    )]
    PrincipalCapReached {
        /// The per-principal cap.
        cap: usize,
    },
    /// The whole store holds `cap` live entries.
    #[error("the approval store is full (limit {cap} entries)")]
    Full {
        /// The store-wide cap.
        cap: usize,
    },
    /// A live entry with this key already exists (ids are random, so this means misuse).
    #[error("a record with this key already exists")]
    KeyExists,
    /// A stored record could not be read back.
    #[error("corrupt record in the approval store: {0}")]
    Corrupt(String),
}

/// Storage for approvals, round-trip state and tokens: insert with an absolute expiry, take once
/// atomically, purge expired entries.
///
/// Methods return boxed futures so the trait is dyn-compatible (`Arc<dyn Store>`) and fits an
/// asynchronous, fallible backend. Callers in this crate turn every [`StoreError`] into a denial.
///
/// Contract for implementations:
/// - [`take`](Store::take) is atomic: of any number of concurrent takes of one key, at most one
///   gets `Some`. A taken entry is gone.
/// - [`get`](Store::get) reads a live entry without taking it. It is only ever used to refuse
///   early; every grant goes through [`take`](Store::take).
/// - An entry is live while `now < expires_at`; [`take`](Store::take) at or after `expires_at`
///   returns `None`. A backend may round both instants down to its resolution (a millisecond at
///   least), so an entry may end up to that much early, never late.
/// - [`insert`](Store::insert) refuses a key that is live ([`StoreError::KeyExists`]) and may
///   refuse when a principal holds too many live entries ([`StoreError::PrincipalCapReached`]).
///   Inserting an entry whose `expires_at` is not after `now` stores nothing.
/// - [`insert_tombstone`](Store::insert_tombstone) stores an entry that grants nothing; a backend
///   with a per-principal cap should leave it out of the cap (the default does not).
/// - [`purge_expired`](Store::purge_expired) frees the memory of expired entries; a backend that
///   expires entries by itself (a TTL) may do nothing and return 0.
///
/// The module `store_conformance` (feature `test-util`) checks this contract.
///
/// How this crate uses it: an approval, round-trip state or token is [`insert`](Store::insert)ed
/// with `expires_at` equal to the end of its lifetime, so it holds its principal's place for
/// exactly that long (or until taken). Alongside it, a receipt (that it was issued, and when it
/// expires) and, once taken, a tombstone are stored with
/// [`insert_tombstone`](Store::insert_tombstone) for one more lifetime, so that a late attempt is
/// told "expired" or "already used" rather than "unknown".
pub trait Store: Send + Sync + 'static {
    /// Stores `record` under `key` for `principal` until `expires_at`.
    fn insert<'a>(
        &'a self,
        key: StoreKey,
        principal: &'a Principal,
        record: Value,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Removes and returns the live record under `key`, if any. Atomic and single use.
    fn take<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Value>, StoreError>>;

    /// Stores a record that is kept only to explain a later refusal (a spent token's tombstone,
    /// the receipt of an issued one). It grants nothing, so a backend should leave it out of its
    /// per-principal cap. The default stores it like any other record with
    /// [`insert`](Store::insert): a backend that caps principals and keeps the default counts
    /// these records too, so an unspent token or unanswered approval then weighs on its
    /// principal's cap for its whole retention (twice its lifetime), not just its lifetime.
    fn insert_tombstone<'a>(
        &'a self,
        key: StoreKey,
        principal: &'a Principal,
        record: Value,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.insert(key, principal, record, expires_at, now)
    }

    /// Returns a copy of the live record under `key`, if any, leaving it in place.
    fn get<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Value>, StoreError>>;

    /// Removes every entry expired at `now`; returns how many.
    fn purge_expired(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<usize, StoreError>>;
}

/// Default [`MemoryStore`] cap on live entries across all principals.
pub const DEFAULT_MAX_ENTRIES: usize = 100_000;

/// An in-memory [`Store`] for a single process.
///
/// - A `parking_lot::Mutex` guards the map; it is taken and released inside each call, and the
///   returned futures are already complete, so no lock is ever held across an await point.
/// - Every insert and take first removes all expired entries (in expiry order, using an index, so
///   the cost is proportional to what is removed), so memory stays bounded by the live entries.
/// - Live entries are capped per principal (default 64, [`StoreError::PrincipalCapReached`];
///   tombstones from [`Store::insert_tombstone`] do not count) and in total, tombstones included
///   (default 100,000, [`StoreError::Full`]).
///
/// Replicas of a server do not share it: behind a load balancer use a shared backend.
#[derive(Debug)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    per_principal_cap: usize,
    max_entries: usize,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<StoreKey, Entry>,
    by_expiry: BTreeSet<(OffsetDateTime, StoreKey)>,
    per_principal: HashMap<Principal, usize>,
}

#[derive(Debug)]
struct Entry {
    principal: Principal,
    record: Value,
    expires_at: OffsetDateTime,
    /// Whether the entry counts against its principal's cap (tombstones do not).
    counted: bool,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// A store with the default caps (64 per principal, 100,000 in total).
    pub fn new() -> Self {
        Self::with_caps(DEFAULT_PER_PRINCIPAL_CAP, DEFAULT_MAX_ENTRIES)
    }

    /// A store with the per-principal cap of `policy`.
    pub fn for_policy(policy: &ApprovalPolicy) -> Self {
        Self::with_caps(policy.per_principal_cap, DEFAULT_MAX_ENTRIES)
    }

    /// A store with the given caps on live entries per principal and in total.
    pub fn with_caps(per_principal_cap: usize, max_entries: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            per_principal_cap,
            max_entries,
        }
    }

    /// The number of entries held (live, or expired but not yet purged).
    pub fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    /// Whether the store holds no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of unexpired entries held for `principal` at `now` that count against its cap
    /// (tombstones do not).
    pub fn live_count(&self, principal: &Principal, now: OffsetDateTime) -> usize {
        self.inner
            .lock()
            .entries
            .values()
            .filter(|e| e.counted && &e.principal == principal && now < e.expires_at)
            .count()
    }

    fn insert_now(
        &self,
        key: StoreKey,
        principal: &Principal,
        record: Value,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
        counted: bool,
    ) -> Result<(), StoreError> {
        let mut inner = self.inner.lock();
        inner.purge(now);
        if expires_at <= now {
            return Ok(());
        }
        if inner.entries.contains_key(&key) {
            return Err(StoreError::KeyExists);
        }
        let held = inner.per_principal.get(principal).copied().unwrap_or(0);
        if counted && held >= self.per_principal_cap {
            return Err(StoreError::PrincipalCapReached {
                cap: self.per_principal_cap,
            });
        }
        if inner.entries.len() >= self.max_entries {
            return Err(StoreError::Full {
                cap: self.max_entries,
            });
        }
        if counted {
            *inner.per_principal.entry(principal.clone()).or_insert(0) += 1;
        }
        inner.by_expiry.insert((expires_at, key.clone()));
        inner.entries.insert(
            key,
            Entry {
                principal: principal.clone(),
                record,
                expires_at,
                counted,
            },
        );
        Ok(())
    }

    fn take_now(&self, key: &StoreKey, now: OffsetDateTime) -> Option<Value> {
        let mut inner = self.inner.lock();
        inner.purge(now);
        inner.remove(key).map(|entry| entry.record)
    }

    fn get_now(&self, key: &StoreKey, now: OffsetDateTime) -> Option<Value> {
        let mut inner = self.inner.lock();
        inner.purge(now);
        inner.entries.get(key).map(|entry| entry.record.clone())
    }

    fn purge_now(&self, now: OffsetDateTime) -> usize {
        self.inner.lock().purge(now)
    }
}

impl Inner {
    fn remove(&mut self, key: &StoreKey) -> Option<Entry> {
        let entry = self.entries.remove(key)?;
        self.by_expiry.remove(&(entry.expires_at, key.clone()));
        if !entry.counted {
            return Some(entry);
        }
        if let Some(count) = self.per_principal.get_mut(&entry.principal) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.per_principal.remove(&entry.principal);
            }
        }
        Some(entry)
    }

    /// Removes every entry with `expires_at <= now`.
    fn purge(&mut self, now: OffsetDateTime) -> usize {
        let mut removed = 0;
        while let Some((expires_at, key)) = self.by_expiry.first().cloned() {
            if expires_at > now {
                break;
            }
            if self.remove(&key).is_some() {
                removed += 1;
            } else {
                // Index out of step with the map: drop the stray index entry.
                self.by_expiry.remove(&(expires_at, key));
            }
        }
        removed
    }
}

impl Store for MemoryStore {
    fn insert<'a>(
        &'a self,
        key: StoreKey,
        principal: &'a Principal,
        record: Value,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let result = self.insert_now(key, principal, record, expires_at, now, true);
        Box::pin(std::future::ready(result))
    }

    fn insert_tombstone<'a>(
        &'a self,
        key: StoreKey,
        principal: &'a Principal,
        record: Value,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let result = self.insert_now(key, principal, record, expires_at, now, false);
        Box::pin(std::future::ready(result))
    }

    fn take<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Value>, StoreError>> {
        let result = Ok(self.take_now(key, now));
        Box::pin(std::future::ready(result))
    }

    fn get<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Value>, StoreError>> {
        let result = Ok(self.get_now(key, now));
        Box::pin(std::future::ready(result))
    }

    fn purge_expired(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<usize, StoreError>> {
        let result = Ok(self.purge_now(now));
        Box::pin(std::future::ready(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::ready;
    use serde_json::json;
    use time::Duration;

    fn t(s: i64) -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + Duration::seconds(s)
    }

    fn key(i: usize) -> StoreKey {
        StoreKey::new(RecordKind::Token, format!("k{i}"))
    }

    #[test]
    fn a_key_gives_back_its_kind_and_id() {
        let key = StoreKey::new(RecordKind::Page, "4f2a");
        assert_eq!(key.kind(), RecordKind::Page);
        assert_eq!(key.id(), "4f2a");
        assert_eq!(key.to_string(), "page:4f2a");
    }

    #[test]
    fn live_count_ends_at_the_expiry_instant() {
        let store = MemoryStore::new();
        let p = Principal::new("p");
        let now = OffsetDateTime::UNIX_EPOCH;
        let expires = now + Duration::minutes(2);
        assert!(store.is_empty());
        assert_eq!(
            ready(store.insert(key(0), &p, json!(0), expires, now)),
            Ok(())
        );
        assert!(!store.is_empty());
        assert_eq!(store.len(), 1);
        assert_eq!(store.live_count(&p, expires - Duration::milliseconds(1)), 1);
        assert_eq!(store.live_count(&p, expires), 0);
    }

    #[test]
    fn the_memory_store_keeps_the_store_contract() {
        ready(crate::store_conformance::run_all(async |cap| {
            MemoryStore::with_caps(cap, DEFAULT_MAX_ENTRIES)
        }));
    }

    proptest::proptest! {
        #[test]
        fn the_memory_store_answers_as_the_model(ops in crate::store_conformance::ops()) {
            let store = MemoryStore::with_caps(crate::store_conformance::MODEL_CAP, DEFAULT_MAX_ENTRIES);
            ready(crate::store_conformance::check_against_model(&store, &ops));
        }
    }

    #[test]
    fn the_store_is_dyn_compatible() {
        let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(MemoryStore::new());
        let p = Principal::new("p");
        ready(store.insert(key(0), &p, json!(1), t(10), t(0))).unwrap();
        assert_eq!(ready(store.take(&key(0), t(1))).unwrap(), Some(json!(1)));
    }

    #[test]
    fn get_reads_a_live_entry_without_taking_it() {
        let store = MemoryStore::new();
        let p = Principal::new("p");
        ready(store.insert(key(0), &p, json!({"a": 1}), t(10), t(0))).unwrap();
        assert_eq!(
            ready(store.get(&key(0), t(1))).unwrap(),
            Some(json!({"a": 1}))
        );
        assert_eq!(
            ready(store.get(&key(0), t(1))).unwrap(),
            Some(json!({"a": 1}))
        );
        assert_eq!(ready(store.get(&key(0), t(10))).unwrap(), None, "expired");
        assert_eq!(
            ready(store.get(&key(1), t(1))).unwrap(),
            None,
            "never stored"
        );
        assert!(store.is_empty(), "the expired entry was purged by the get");
    }

    #[test]
    fn take_is_single_use() {
        let store = MemoryStore::new();
        let p = Principal::new("p");
        ready(store.insert(key(0), &p, json!({"a": 1}), t(10), t(0))).unwrap();
        assert_eq!(
            ready(store.take(&key(0), t(1))).unwrap(),
            Some(json!({"a": 1}))
        );
        assert_eq!(ready(store.take(&key(0), t(1))).unwrap(), None);
        assert!(store.is_empty());
    }

    #[test]
    fn an_entry_is_live_while_now_is_before_its_expiry() {
        let store = MemoryStore::new();
        let p = Principal::new("p");
        ready(store.insert(key(0), &p, json!(0), t(10), t(0))).unwrap();
        ready(store.insert(key(1), &p, json!(1), t(10), t(0))).unwrap();
        assert_eq!(
            ready(store.take(&key(0), t(10) - Duration::nanoseconds(1))).unwrap(),
            Some(json!(0))
        );
        assert_eq!(ready(store.take(&key(1), t(10))).unwrap(), None);
        assert!(store.is_empty(), "the expired entry was purged by the take");
    }

    #[test]
    fn an_already_expired_insert_stores_nothing() {
        let store = MemoryStore::new();
        let p = Principal::new("p");
        ready(store.insert(key(0), &p, json!(0), t(5), t(5))).unwrap();
        assert!(store.is_empty());
    }

    #[test]
    fn live_keys_are_not_overwritten() {
        let store = MemoryStore::new();
        let p = Principal::new("p");
        ready(store.insert(key(0), &p, json!(0), t(10), t(0))).unwrap();
        assert_eq!(
            ready(store.insert(key(0), &p, json!(1), t(10), t(0))),
            Err(StoreError::KeyExists)
        );
        // Once expired, the key can be used again.
        ready(store.insert(key(0), &p, json!(2), t(20), t(10))).unwrap();
        assert_eq!(ready(store.take(&key(0), t(11))).unwrap(), Some(json!(2)));
    }

    #[test]
    fn live_entries_are_capped_per_principal() {
        let store = MemoryStore::new();
        let (alice, bob) = (Principal::new("alice"), Principal::new("bob"));
        for i in 0..DEFAULT_PER_PRINCIPAL_CAP {
            ready(store.insert(key(i), &alice, json!(i), t(100), t(0))).unwrap();
        }
        assert_eq!(
            ready(store.insert(key(1000), &alice, json!(0), t(100), t(0))),
            Err(StoreError::PrincipalCapReached { cap: 64 })
        );
        assert_eq!(store.len(), 64, "the refused entry was not stored");
        assert_eq!(store.live_count(&alice, t(0)), 64);
        // Other principals are not affected.
        ready(store.insert(key(2000), &bob, json!(0), t(100), t(0))).unwrap();
        // Taking one frees a slot.
        ready(store.take(&key(0), t(1))).unwrap();
        ready(store.insert(key(1000), &alice, json!(0), t(100), t(1))).unwrap();
        // Expiry frees them all.
        ready(store.insert(key(1001), &alice, json!(0), t(200), t(100))).unwrap();
        assert_eq!(store.live_count(&alice, t(100)), 1);
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn the_cap_is_configurable_and_the_error_clear() {
        let policy = ApprovalPolicy::default().with_per_principal_cap(2);
        let store = MemoryStore::for_policy(&policy);
        let p = Principal::new("p");
        ready(store.insert(key(0), &p, json!(0), t(10), t(0))).unwrap();
        ready(store.insert(key(1), &p, json!(0), t(10), t(0))).unwrap();
        let err = ready(store.insert(key(2), &p, json!(0), t(10), t(0))).unwrap_err();
        assert_eq!(err, StoreError::PrincipalCapReached { cap: 2 });
        assert!(err.to_string().contains("limit 2"), "{err}");
    }

    #[test]
    fn tombstones_do_not_use_up_a_principals_cap_but_count_towards_the_whole() {
        let store = MemoryStore::with_caps(1, 3);
        let p = Principal::new("p");
        ready(store.insert_tombstone(key(0), &p, json!("spent"), t(10), t(0))).unwrap();
        ready(store.insert_tombstone(key(1), &p, json!("spent"), t(10), t(0))).unwrap();
        assert_eq!(store.live_count(&p, t(0)), 0);
        ready(store.insert(key(2), &p, json!(0), t(10), t(0))).unwrap();
        assert_eq!(store.live_count(&p, t(0)), 1);
        assert_eq!(
            ready(store.insert(key(3), &p, json!(0), t(10), t(0))),
            Err(StoreError::PrincipalCapReached { cap: 1 })
        );
        let q = Principal::new("q");
        assert_eq!(
            ready(store.insert_tombstone(key(4), &q, json!("spent"), t(10), t(0))),
            Err(StoreError::Full { cap: 3 })
        );
        // Taking the counted entry frees the principal's place; taking a tombstone changes nothing.
        ready(store.take(&key(0), t(1))).unwrap();
        ready(store.take(&key(2), t(1))).unwrap();
        ready(store.insert(key(5), &p, json!(0), t(10), t(1))).unwrap();
    }

    #[test]
    fn the_store_as_a_whole_is_capped() {
        let store = MemoryStore::with_caps(10, 3);
        for i in 0..3 {
            let p = Principal::new(format!("p{i}"));
            ready(store.insert(key(i), &p, json!(0), t(10), t(0))).unwrap();
        }
        let p = Principal::new("late");
        assert_eq!(
            ready(store.insert(key(9), &p, json!(0), t(10), t(0))),
            Err(StoreError::Full { cap: 3 })
        );
    }

    #[test]
    fn purge_removes_exactly_the_expired() {
        let store = MemoryStore::new();
        for i in 0..10 {
            let p = Principal::new(format!("p{i}"));
            ready(store.insert(key(i), &p, json!(i), t(i as i64 + 1), t(0))).unwrap();
        }
        assert_eq!(ready(store.purge_expired(t(5))).unwrap(), 5);
        assert_eq!(store.len(), 5);
        assert_eq!(ready(store.purge_expired(t(5))).unwrap(), 0);
        assert_eq!(ready(store.take(&key(5), t(5))).unwrap(), Some(json!(5)));
        assert_eq!(ready(store.purge_expired(t(100))).unwrap(), 4);
        assert!(store.is_empty());
        assert!(store.inner.lock().per_principal.is_empty());
        assert!(store.inner.lock().by_expiry.is_empty());
    }

    #[test]
    fn memory_stays_bounded_without_explicit_purges() {
        // Many principals each insert short-lived entries over a long time; nobody calls purge.
        let store = MemoryStore::new();
        for i in 0..10_000usize {
            let p = Principal::new(format!("p{}", i % 500));
            let now = t(i as i64);
            ready(store.insert(key(i), &p, json!(i), now + Duration::seconds(5), now)).unwrap();
            assert!(store.len() <= 5, "{} entries at step {i}", store.len());
        }
        assert!(store.inner.lock().per_principal.len() <= 5);
    }
}
