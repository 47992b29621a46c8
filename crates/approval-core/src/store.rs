//! Where approvals, round-trip state and tokens live between calls.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, binary_heap::PeekMut, hash_map};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

use parking_lot::Mutex;
use time::OffsetDateTime;

use crate::ids::Principal;
pub use crate::key::{RecordKind, StoreError, StoreKey};
use crate::policy::{ApprovalPolicy, DEFAULT_PER_PRINCIPAL_CAP};
pub use crate::record::{AnswerRecord, BoundRecord, PageRecord, QuestionIndex, Record};

/// A boxed, `Send` future (`futures`' own): what [`Store`] methods return, so that the trait is
/// dyn-compatible and an asynchronous backend (Redis) fits behind it.
pub use futures_util::future::BoxFuture;

/// Storage for approvals, round-trip state and tokens: insert a [`Record`] with an absolute
/// expiry, take it once atomically, purge expired entries.
///
/// A record is this crate's own: a backend keeps it as it is ([`MemoryStore`]) or as its JSON
/// ([`Record::to_json`], read back with [`Record::from_json`]), and never looks inside.
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
        record: Record,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Removes and returns the live record under `key`, if any. Atomic and single use.
    fn take<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Record>, StoreError>>;

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
        record: Record,
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
    ) -> BoxFuture<'a, Result<Option<Record>, StoreError>>;

    /// Removes every entry expired at `now`; returns how many.
    fn purge_expired(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<usize, StoreError>>;
}

/// Default [`MemoryStore`] cap on live entries across all principals.
pub const DEFAULT_MAX_ENTRIES: usize = 100_000;

/// An in-memory [`Store`] for a single process.
///
/// - A `parking_lot::Mutex` guards the map; it is taken and released inside each call, and the
///   returned futures are already complete, so no lock is ever held across an await point.
/// - Every insert, take and get first removes all expired entries (using an expiry index, so the
///   cost is proportional to what is removed), so memory stays bounded by the live entries; once
///   a peak has drained, the maps give their room back. Entries that expire are counted in the
///   unit tests by the million (`memory_flat`).
/// - Live entries are capped per principal (default 64, [`StoreError::PrincipalCapReached`];
///   tombstones from [`Store::insert_tombstone`] do not count) and in total, tombstones included
///   (default 100,000, [`StoreError::Full`]).
/// - Records are kept as they are, not as JSON.
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
    /// Hashed with foldhash, seeded at random per store: its keys are ids this crate drew at
    /// random (a caller cannot choose keys that collide), and SipHash was the largest single
    /// cost of a token's issue and spend. Principals, which callers do choose, keep SipHash.
    entries: HashMap<StoreKey, Entry, foldhash::fast::RandomState>,
    /// Every entry's key, soonest expiry first (ties: earliest inserted): (expiry in Unix
    /// nanoseconds, insertion number, key). A taken entry's item stays until its expiry or the
    /// next [`Inner::compact`]; an item whose insertion number is not its key's entry's is
    /// stale and skipped. A std binary heap: a push or pop costs a few comparisons for the
    /// thousands of records a busy store holds, which nobody waiting on a write can feel.
    by_expiry: BinaryHeap<Reverse<Item>>,
    /// Each principal's count of entries against its cap. A count that drops to 0 stays (the
    /// principal is likely back soon) until [`Inner::compact`] or an explicit purge drops it.
    per_principal: HashMap<Principal, Count>,
    /// The insertion number of the next entry.
    inserted: u64,
}

/// An item of `by_expiry`: the expiry (Unix nanoseconds), the insertion number (unique,
/// increasing) and the key.
type Item = (i128, u64, StoreKey);

#[derive(Debug)]
struct Entry {
    record: Record,
    /// Its place in `by_expiry`: the expiry in Unix nanoseconds and the insertion number.
    slot: (i128, u64),
    /// The principal whose cap the entry counts against, and that principal's count; `None`
    /// for tombstones, which count against no cap. Holding the count lets a removal give the
    /// place back without looking the principal up.
    owner: Option<(Principal, Count)>,
}

/// A principal's number of entries against its cap. Shared between `per_principal` and the
/// principal's entries; only ever changed under the store's lock.
type Count = Arc<AtomicUsize>;

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
        let now = now.unix_timestamp_nanos();
        self.inner
            .lock()
            .entries
            .values()
            .filter(|e| e.owner.as_ref().is_some_and(|(p, _)| p == principal) && now < e.slot.0)
            .count()
    }

    /// Stores `record` under `key` until `expires_at`, counted against `owner`'s cap (`None`: a
    /// tombstone, counted against no cap).
    fn insert_entry(
        &self,
        key: StoreKey,
        owner: Option<&Principal>,
        record: Record,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let (expires_at, now) = (
            expires_at.unix_timestamp_nanos(),
            now.unix_timestamp_nanos(),
        );
        if expires_at <= now {
            return Ok(());
        }
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        inner.purge(now);
        let full = inner.entries.len() >= self.max_entries;
        let hash_map::Entry::Vacant(vacant) = inner.entries.entry(key) else {
            return Err(StoreError::KeyExists);
        };
        // The owner's count, looked up once: first the cap, then the whole, then count it.
        let cap = self.per_principal_cap;
        let over_cap = || StoreError::PrincipalCapReached { cap };
        let too_many = || StoreError::Full {
            cap: self.max_entries,
        };
        let owner = match owner {
            Some(principal) => {
                let count = match inner.per_principal.get(principal) {
                    Some(count) if count.load(Relaxed) >= cap => return Err(over_cap()),
                    None if cap == 0 => return Err(over_cap()),
                    _ if full => return Err(too_many()),
                    Some(count) => Arc::clone(count),
                    None => {
                        let count = Count::default();
                        inner
                            .per_principal
                            .insert(principal.clone(), Arc::clone(&count));
                        count
                    }
                };
                // Under the store's lock, as every change of a count.
                count.store(count.load(Relaxed) + 1, Relaxed);
                Some((principal.clone(), count))
            }
            None if full => return Err(too_many()),
            None => None,
        };
        let slot = (expires_at, inner.inserted);
        inner.inserted = inner.inserted.wrapping_add(1);
        inner
            .by_expiry
            .push(Reverse((expires_at, slot.1, vacant.key().clone())));
        vacant.insert(Entry {
            record,
            slot,
            owner,
        });
        if slot.1.is_multiple_of(COMPACT_EVERY) {
            inner.compact();
        }
        Ok(())
    }

    /// Removes and returns the live entry under `key`.
    fn take_entry(&self, key: &StoreKey, now: OffsetDateTime) -> Option<Record> {
        let now = now.unix_timestamp_nanos();
        let mut inner = self.inner.lock();
        inner.purge(now);
        // The purge removed every expired entry; the check does not rely on it.
        let live = inner
            .entries
            .get(key)
            .is_some_and(|entry| now < entry.slot.0);
        live.then(|| inner.remove(key))
            .flatten()
            .map(|entry| entry.record)
    }

    /// A copy of the live entry under `key`.
    fn get_entry(&self, key: &StoreKey, now: OffsetDateTime) -> Option<Record> {
        let now = now.unix_timestamp_nanos();
        let mut inner = self.inner.lock();
        inner.purge(now);
        inner
            .entries
            .get(key)
            .filter(|entry| now < entry.slot.0)
            .map(|entry| entry.record.clone())
    }

    /// An explicit purge also forgets every principal that holds nothing, and gives back the
    /// memory its structures no longer need.
    fn purge_now(&self, now: OffsetDateTime) -> usize {
        let mut inner = self.inner.lock();
        let removed = inner.purge(now.unix_timestamp_nanos());
        inner.forget_idle();
        let room = 2 * inner.entries.len() + COMPACT_FLOOR;
        inner.shrink(room);
        removed
    }
}

impl Inner {
    /// Removes the entry under `key`. Its item in `by_expiry` goes stale.
    fn remove(&mut self, key: &StoreKey) -> Option<Entry> {
        let entry = self.entries.remove(key)?;
        uncount(&entry);
        Some(entry)
    }

    /// Removes every entry that expires at or before `now` (Unix nanoseconds), and the stale
    /// items due by then.
    fn purge(&mut self, now: i128) -> usize {
        let removed = self.drain(now);
        if removed > 0 {
            self.shrink(4 * (self.entries.len() + COMPACT_FLOOR));
        }
        removed
    }

    /// [`Inner::purge`] without giving memory back.
    fn drain(&mut self, now: i128) -> usize {
        let mut removed = 0;
        while let Some(due) = self.by_expiry.peek_mut()
            && due.0.0 <= now
        {
            let Reverse((expires_at, inserted, key)) = PeekMut::pop(due);
            if let hash_map::Entry::Occupied(found) = self.entries.entry(key)
                && found.get().slot == (expires_at, inserted)
            {
                let entry = found.remove();
                uncount(&entry);
                removed += 1;
            }
        }
        removed
    }

    /// Drops the stale items of `by_expiry` once they outnumber the entries (and a floor), so
    /// that the index stays within a constant factor of the entries: each insert adds one item,
    /// and the cost of a compaction is paid for by the inserts since the last one. Likewise
    /// drops the principals whose count is 0 once there are more principals than entries (and
    /// the floor), and gives back the room a drained peak left behind.
    fn compact(&mut self) {
        let floor = self.entries.len() + COMPACT_FLOOR;
        if self.by_expiry.len() > floor + self.entries.len() {
            let entries = &self.entries;
            self.by_expiry.retain(|Reverse((_, inserted, key))| {
                entries
                    .get(key)
                    .is_some_and(|entry| entry.slot.1 == *inserted)
            });
        }
        if self.per_principal.len() > floor {
            self.forget_idle();
        }
        self.shrink(4 * floor);
    }

    /// Forgets every principal that holds no entry.
    fn forget_idle(&mut self) {
        self.per_principal
            .retain(|_, count| count.load(Relaxed) > 0);
    }

    /// Gives back memory once a structure has room for more than `room` items.
    fn shrink(&mut self, room: usize) {
        if self.entries.capacity() > room {
            self.entries.shrink_to_fit();
        }
        if self.by_expiry.capacity() > room {
            self.by_expiry.shrink_to_fit();
        }
        if self.per_principal.capacity() > room {
            self.per_principal.shrink_to_fit();
        }
    }
}

/// Gives an entry's place back to its principal.
fn uncount(entry: &Entry) {
    if let Some((_, count)) = &entry.owner {
        // Under the store's lock: no other change can come between the load and the store.
        count.store(count.load(Relaxed).saturating_sub(1), Relaxed);
    }
}

/// Stale expiry items tolerated whatever the number of entries.
const COMPACT_FLOOR: usize = 1024;

/// How many inserts apart [`Inner::compact`] looks (each look is a few comparisons; the bounds
/// it keeps are then exceeded by at most this many).
const COMPACT_EVERY: u64 = 64;

impl Store for MemoryStore {
    fn insert<'a>(
        &'a self,
        key: StoreKey,
        principal: &'a Principal,
        record: Record,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let result = self.insert_entry(key, Some(principal), record, expires_at, now);
        Box::pin(std::future::ready(result))
    }

    fn insert_tombstone<'a>(
        &'a self,
        key: StoreKey,
        _principal: &'a Principal,
        record: Record,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let result = self.insert_entry(key, None, record, expires_at, now);
        Box::pin(std::future::ready(result))
    }

    fn take<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Record>, StoreError>> {
        Box::pin(std::future::ready(Ok(self.take_entry(key, now))))
    }

    fn get<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Record>, StoreError>> {
        Box::pin(std::future::ready(Ok(self.get_entry(key, now))))
    }

    fn purge_expired(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<usize, StoreError>> {
        let result = Ok(self.purge_now(now));
        Box::pin(std::future::ready(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Binding;
    use crate::test_support::ready;
    use crate::test_support::tid;
    use serde_json::json;
    use time::Duration;

    fn t(s: i64) -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + Duration::seconds(s)
    }

    #[test]
    fn a_key_hashes_as_its_kind_then_its_id() {
        use std::hash::{BuildHasher, Hash, Hasher};
        let hasher = std::collections::hash_map::RandomState::new();
        let of = |hash: &dyn Fn(&mut std::collections::hash_map::DefaultHasher)| {
            let mut state = hasher.build_hasher();
            hash(&mut state);
            state.finish()
        };
        for (kind, id) in [(RecordKind::Token, "a"), (RecordKind::Page, "b.receipt")] {
            let key = StoreKey::new(kind, id);
            let derived = of(&|state| {
                kind.hash(state);
                id.hash(state);
            });
            assert_eq!(of(&|state| key.hash(state)), derived);
            let shared = key.clone();
            assert_eq!(of(&|state| shared.hash(state)), derived);
        }
    }

    /// A record carrying `value`, to store under a token key.
    fn rec(value: serde_json::Value) -> Record {
        Record::carrying(&key(0), value)
    }

    fn key(i: usize) -> StoreKey {
        StoreKey::new(RecordKind::Token, format!("k{i}"))
    }

    /// Inserts a record of `value` under [`key`]`(i)` for `p`, live until `expires_at`, at `now`.
    ///
    /// # Panics
    /// When the store refuses it.
    fn put<S: Store + ?Sized>(
        store: &S,
        i: usize,
        p: &Principal,
        value: serde_json::Value,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) {
        ready(store.insert(key(i), p, rec(value), expires_at, now)).unwrap();
    }

    #[test]
    fn keys_are_equal_by_kind_and_id_however_held() {
        use std::hash::BuildHasher;
        let a = StoreKey::new(RecordKind::Token, "4f2a");
        let b = StoreKey::from_str(RecordKind::Token, "4f2a");
        let hasher = std::collections::hash_map::RandomState::new();
        assert_eq!(a, b);
        assert_eq!(a, a.clone());
        assert_eq!(hasher.hash_one(&a), hasher.hash_one(&b));
        assert_ne!(a, StoreKey::new(RecordKind::Page, "4f2a"));
        assert_ne!(a, StoreKey::new(RecordKind::Token, "4f2b"));
        assert_ne!(a, a.with_suffix(".receipt"));
        assert_eq!(a.with_suffix(".receipt").id(), "4f2a.receipt");
        let long = "x".repeat(200);
        let key = StoreKey::new(RecordKind::Token, long.clone());
        assert_eq!(key.with_suffix(".receipt").id(), format!("{long}.receipt"));
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
            ready(store.insert(key(0), &p, rec(json!(0)), expires, now)),
            Ok(())
        );
        assert!(!store.is_empty());
        assert_eq!(store.len(), 1);
        assert_eq!(store.live_count(&p, expires - Duration::milliseconds(1)), 1);
        assert_eq!(store.live_count(&p, expires), 0);
    }

    #[test]
    fn a_cap_of_zero_refuses_every_principal_from_the_first_entry() {
        let store = MemoryStore::with_caps(0, DEFAULT_MAX_ENTRIES);
        let p = Principal::new("p");
        assert_eq!(
            ready(store.insert(key(0), &p, rec(json!(0)), t(10), t(0))),
            Err(StoreError::PrincipalCapReached { cap: 0 })
        );
        assert!(store.is_empty());
        // A tombstone counts against no cap.
        assert_eq!(
            ready(store.insert_tombstone(key(1), &p, rec(json!(1)), t(10), t(0))),
            Ok(())
        );
    }

    #[test]
    fn an_expired_entry_is_never_handed_out_even_if_the_purge_missed_it() {
        let store = MemoryStore::new();
        let p = Principal::new("p");
        for i in 0..2 {
            put(&store, i, &p, json!(i), t(10), t(0));
        }
        // The expiry index loses its items: nothing purges these entries any more.
        store.inner.lock().by_expiry.clear();
        assert_eq!(ready(store.get(&key(0), t(10))).unwrap(), None);
        assert_eq!(ready(store.take(&key(0), t(10))).unwrap(), None);
        assert_eq!(ready(store.take(&key(1), t(10))).unwrap(), None);
        // A moment before, they were live.
        assert_eq!(
            ready(store.get(&key(0), t(10) - Duration::nanoseconds(1))).unwrap(),
            Some(rec(json!(0)))
        );
    }

    #[test]
    fn an_explicit_purge_keeps_the_count_of_a_principal_that_holds_entries() {
        let store = MemoryStore::with_caps(2, DEFAULT_MAX_ENTRIES);
        let (p, q) = (Principal::new("p"), Principal::new("q"));
        put(&store, 0, &p, json!(0), t(100), t(0));
        put(&store, 1, &p, json!(1), t(100), t(0));
        put(&store, 2, &q, json!(2), t(5), t(0));
        // q's entry expires and q is forgotten; p, at its cap, is not.
        assert_eq!(ready(store.purge_expired(t(10))).unwrap(), 1);
        assert_eq!(store.inner.lock().per_principal.len(), 1);
        assert_eq!(
            ready(store.insert(key(3), &p, rec(json!(3)), t(100), t(10))),
            Err(StoreError::PrincipalCapReached { cap: 2 })
        );
        assert_eq!(store.live_count(&p, t(10)), 2);
    }

    /// The room the entries and the expiry index have, in items.
    fn room(store: &MemoryStore) -> (usize, usize) {
        let inner = store.inner.lock();
        (inner.entries.capacity(), inner.by_expiry.capacity())
    }

    /// A peak of entries until `t(10)`, beside `LASTING` that last until `t(100)`.
    const LASTING: usize = 50;

    fn peak(store: &MemoryStore, p: &Principal) -> usize {
        // One more than a multiple of COMPACT_EVERY: the insert after the peak is not one that
        // compacts (and gives room back on its own).
        let peak = 20 * COMPACT_FLOOR + 1;
        assert!(!((peak + LASTING) as u64).is_multiple_of(COMPACT_EVERY));
        for i in 0..LASTING {
            ready(store.insert(key(peak + 1 + i), p, rec(json!(i)), t(100), t(0))).unwrap();
        }
        for i in 0..peak {
            ready(store.insert(key(i), p, rec(json!(i)), t(10), t(0))).unwrap();
        }
        assert!(room(store).0 >= peak);
        peak
    }

    #[test]
    fn a_drained_peak_gives_its_room_back_without_an_explicit_purge() {
        let store = MemoryStore::with_caps(usize::MAX, DEFAULT_MAX_ENTRIES);
        let p = Principal::new("p");
        let peak = peak(&store, &p);
        // One ordinary insert after the peak expired purges it, and gives the room back.
        put(&store, peak, &p, json!(0), t(30), t(20));
        assert_eq!(store.len(), LASTING + 1);
        let (entries, index) = room(&store);
        let bound = 4 * (LASTING + 1 + COMPACT_FLOOR);
        assert!(entries <= bound, "{entries}");
        assert!(index <= bound, "{index}");
    }

    #[test]
    fn the_items_of_taken_entries_are_dropped_before_they_outnumber_the_floor() {
        let store = MemoryStore::with_caps(usize::MAX, DEFAULT_MAX_ENTRIES);
        let p = Principal::new("p");
        for i in 0..LASTING {
            put(&store, i, &p, json!(i), t(1000), t(0));
        }
        // Each taken at once, long before it would expire: its item in the index goes stale.
        for i in LASTING..LASTING + 10 * COMPACT_FLOOR {
            put(&store, i, &p, json!(i), t(1000), t(0));
            assert!(ready(store.take(&key(i), t(0))).unwrap().is_some());
            let items = store.inner.lock().by_expiry.len();
            let bound = 2 * LASTING + COMPACT_FLOOR + COMPACT_EVERY as usize;
            assert!(items <= bound, "{items} items for {LASTING} entries");
        }
        assert_eq!(store.len(), LASTING);
        // The compactions kept the items of the entries still held: they expire as before.
        put(&store, 0, &p, json!(0), t(2000), t(1000));
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn principals_whose_entries_expired_are_forgotten_and_their_room_given_back() {
        let store = MemoryStore::with_caps(1, DEFAULT_MAX_ENTRIES);
        let many = 5 * COMPACT_FLOOR;
        for i in 0..many {
            let p = Principal::new(format!("p{i}"));
            put(&store, i, &p, json!(i), t(10), t(0));
        }
        assert_eq!(store.inner.lock().per_principal.len(), many);
        // Past their expiry, ordinary inserts (one compacts) forget the idle principals.
        let q = Principal::new("q");
        for i in 0..COMPACT_EVERY as usize {
            let key = key(many + i);
            ready(store.insert(key.clone(), &q, rec(json!(i)), t(30), t(20))).unwrap();
            assert!(ready(store.take(&key, t(20))).unwrap().is_some());
        }
        let principals = store.inner.lock().per_principal.len();
        assert!(principals <= 1, "{principals} principals remembered");
        // And an explicit purge gives back the room they took.
        ready(store.purge_expired(t(20))).unwrap();
        let room = store.inner.lock().per_principal.capacity();
        assert!(room <= 2 * COMPACT_FLOOR, "room for {room} principals");
    }

    #[test]
    fn idle_principals_are_forgotten_once_they_outnumber_the_floor() {
        let store = MemoryStore::with_caps(2, DEFAULT_MAX_ENTRIES);
        let busy = Principal::new("busy");
        for i in 0..2 {
            put(&store, i, &busy, json!(i), t(1000), t(0));
        }
        let many = 5 * COMPACT_FLOOR;
        for i in 0..many {
            let p = Principal::new(format!("p{i}"));
            put(&store, 10 + i, &p, json!(i), t(1000), t(0));
            assert!(ready(store.take(&key(10 + i), t(0))).unwrap().is_some());
            let principals = store.inner.lock().per_principal.len();
            let bound = 2 + 2 + COMPACT_FLOOR + COMPACT_EVERY as usize;
            assert!(principals <= bound, "{principals} principals remembered");
        }
        // Forgetting the idle ones did not forget the count of the one at its cap.
        assert_eq!(
            ready(store.insert(key(2), &busy, rec(json!(2)), t(1000), t(0))),
            Err(StoreError::PrincipalCapReached { cap: 2 })
        );
        // An explicit purge forgets the rest, and gives their room back.
        assert_eq!(ready(store.purge_expired(t(1))).unwrap(), 0);
        let inner = store.inner.lock();
        assert_eq!(inner.per_principal.len(), 1);
        let room = inner.per_principal.capacity();
        assert!(room <= 2 * COMPACT_FLOOR, "room for {room} principals");
    }

    #[test]
    fn an_explicit_purge_gives_back_the_room_of_entries_taken_since() {
        let store = MemoryStore::with_caps(usize::MAX, DEFAULT_MAX_ENTRIES);
        let p = Principal::new("p");
        let peak = peak(&store, &p);
        // Taken, not expired: the purge finds nothing to remove, and still gives the room back.
        for i in 0..peak {
            assert!(ready(store.take(&key(i), t(1))).unwrap().is_some());
        }
        assert_eq!(ready(store.purge_expired(t(2))).unwrap(), 0);
        assert_eq!(store.len(), LASTING);
        let (entries, _) = room(&store);
        assert!(entries <= 4 * (2 * LASTING + COMPACT_FLOOR), "{entries}");
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
        put(&*store, 0, &p, json!(1), t(10), t(0));
        assert_eq!(
            ready(store.take(&key(0), t(1))).unwrap(),
            Some(rec(json!(1)))
        );
    }

    #[test]
    fn get_reads_a_live_entry_without_taking_it() {
        let store = MemoryStore::new();
        let p = Principal::new("p");
        put(&store, 0, &p, json!({"a": 1}), t(10), t(0));
        assert_eq!(
            ready(store.get(&key(0), t(1))).unwrap(),
            Some(rec(json!({"a": 1})))
        );
        assert_eq!(
            ready(store.get(&key(0), t(1))).unwrap(),
            Some(rec(json!({"a": 1})))
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
        put(&store, 0, &p, json!({"a": 1}), t(10), t(0));
        assert_eq!(
            ready(store.take(&key(0), t(1))).unwrap(),
            Some(rec(json!({"a": 1})))
        );
        assert_eq!(ready(store.take(&key(0), t(1))).unwrap(), None);
        assert!(store.is_empty());
    }

    #[test]
    fn an_entry_is_live_while_now_is_before_its_expiry() {
        let store = MemoryStore::new();
        let p = Principal::new("p");
        put(&store, 0, &p, json!(0), t(10), t(0));
        put(&store, 1, &p, json!(1), t(10), t(0));
        assert_eq!(
            ready(store.take(&key(0), t(10) - Duration::nanoseconds(1))).unwrap(),
            Some(rec(json!(0)))
        );
        assert_eq!(ready(store.take(&key(1), t(10))).unwrap(), None);
        assert!(store.is_empty(), "the expired entry was purged by the take");
    }

    #[test]
    fn an_already_expired_insert_stores_nothing() {
        let store = MemoryStore::new();
        let p = Principal::new("p");
        put(&store, 0, &p, json!(0), t(5), t(5));
        assert!(store.is_empty());
    }

    #[test]
    fn live_keys_are_not_overwritten() {
        let store = MemoryStore::new();
        let p = Principal::new("p");
        put(&store, 0, &p, json!(0), t(10), t(0));
        assert_eq!(
            ready(store.insert(key(0), &p, rec(json!(1)), t(10), t(0))),
            Err(StoreError::KeyExists)
        );
        // Once expired, the key can be used again.
        put(&store, 0, &p, json!(2), t(20), t(10));
        assert_eq!(
            ready(store.take(&key(0), t(11))).unwrap(),
            Some(rec(json!(2)))
        );
    }

    #[test]
    fn live_entries_are_capped_per_principal() {
        let store = MemoryStore::new();
        let (alice, bob) = (Principal::new("alice"), Principal::new("bob"));
        for i in 0..DEFAULT_PER_PRINCIPAL_CAP {
            put(&store, i, &alice, json!(i), t(100), t(0));
        }
        assert_eq!(
            ready(store.insert(key(1000), &alice, rec(json!(0)), t(100), t(0))),
            Err(StoreError::PrincipalCapReached { cap: 64 })
        );
        assert_eq!(store.len(), 64, "the refused entry was not stored");
        assert_eq!(store.live_count(&alice, t(0)), 64);
        // Other principals are not affected.
        put(&store, 2000, &bob, json!(0), t(100), t(0));
        // Taking one frees a slot.
        ready(store.take(&key(0), t(1))).unwrap();
        put(&store, 1000, &alice, json!(0), t(100), t(1));
        // Expiry frees them all.
        put(&store, 1001, &alice, json!(0), t(200), t(100));
        assert_eq!(store.live_count(&alice, t(100)), 1);
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn the_cap_is_configurable_and_the_error_clear() {
        let policy = ApprovalPolicy::default().with_per_principal_cap(2);
        let store = MemoryStore::for_policy(&policy);
        let p = Principal::new("p");
        put(&store, 0, &p, json!(0), t(10), t(0));
        put(&store, 1, &p, json!(0), t(10), t(0));
        let err = ready(store.insert(key(2), &p, rec(json!(0)), t(10), t(0))).unwrap_err();
        assert_eq!(err, StoreError::PrincipalCapReached { cap: 2 });
        assert!(err.to_string().contains("limit 2"), "{err}");
    }

    #[test]
    fn tombstones_do_not_use_up_a_principals_cap_but_count_towards_the_whole() {
        let store = MemoryStore::with_caps(1, 3);
        let p = Principal::new("p");
        ready(store.insert_tombstone(key(0), &p, rec(json!("spent")), t(10), t(0))).unwrap();
        ready(store.insert_tombstone(key(1), &p, rec(json!("spent")), t(10), t(0))).unwrap();
        assert_eq!(store.live_count(&p, t(0)), 0);
        put(&store, 2, &p, json!(0), t(10), t(0));
        assert_eq!(store.live_count(&p, t(0)), 1);
        assert_eq!(
            ready(store.insert(key(3), &p, rec(json!(0)), t(10), t(0))),
            Err(StoreError::PrincipalCapReached { cap: 1 })
        );
        let q = Principal::new("q");
        assert_eq!(
            ready(store.insert_tombstone(key(4), &q, rec(json!("spent")), t(10), t(0))),
            Err(StoreError::Full { cap: 3 })
        );
        // Taking the counted entry frees the principal's place; taking a tombstone changes nothing.
        ready(store.take(&key(0), t(1))).unwrap();
        ready(store.take(&key(2), t(1))).unwrap();
        put(&store, 5, &p, json!(0), t(10), t(1));
    }

    #[test]
    fn the_store_as_a_whole_is_capped() {
        let store = MemoryStore::with_caps(10, 3);
        for i in 0..3 {
            let p = Principal::new(format!("p{i}"));
            put(&store, i, &p, json!(0), t(10), t(0));
        }
        let p = Principal::new("late");
        assert_eq!(
            ready(store.insert(key(9), &p, rec(json!(0)), t(10), t(0))),
            Err(StoreError::Full { cap: 3 })
        );
    }

    #[test]
    fn purge_removes_exactly_the_expired() {
        let store = MemoryStore::new();
        for i in 0..10 {
            let p = Principal::new(format!("p{i}"));
            put(&store, i, &p, json!(i), t(i as i64 + 1), t(0));
        }
        assert_eq!(ready(store.purge_expired(t(5))).unwrap(), 5);
        assert_eq!(store.len(), 5);
        assert_eq!(ready(store.purge_expired(t(5))).unwrap(), 0);
        assert_eq!(
            ready(store.take(&key(5), t(5))).unwrap(),
            Some(rec(json!(5)))
        );
        assert_eq!(ready(store.purge_expired(t(100))).unwrap(), 4);
        assert!(store.is_empty());
        assert!(store.inner.lock().per_principal.is_empty());
        assert_eq!(store.inner.lock().by_expiry.len(), 0);
    }

    #[test]
    fn memory_stays_bounded_without_explicit_purges() {
        // Many principals each insert short-lived entries over a long time, and half of them
        // are taken at once (leaving stale expiry items); nobody calls purge.
        let store = MemoryStore::new();
        for i in 0..10_000usize {
            let p = Principal::new(format!("p{i}"));
            let now = t(i as i64);
            ready(store.insert(key(i), &p, rec(json!(i)), now + Duration::seconds(5), now))
                .unwrap();
            if i % 2 == 0 {
                assert!(ready(store.take(&key(i), now)).unwrap().is_some());
            }
            assert!(store.len() <= 5, "{} entries at step {i}", store.len());
            let inner = store.inner.lock();
            assert!(
                inner.by_expiry.len() <= 2 * 5 + COMPACT_FLOOR + COMPACT_EVERY as usize,
                "step {i}"
            );
            assert!(
                inner.per_principal.len() <= 5 + COMPACT_FLOOR + COMPACT_EVERY as usize,
                "step {i}"
            );
        }
        // An explicit purge forgets every principal that holds nothing.
        ready(store.purge_expired(t(20_000))).unwrap();
        let inner = store.inner.lock();
        assert!(inner.entries.is_empty() && inner.by_expiry.is_empty());
        assert!(inner.per_principal.is_empty());
    }

    mod memory_flat {
        //! Memory stays flat: records issued by the million and left to expire leave the store
        //! as it started, through the purge every store call makes (the adapter never calls
        //! `purge_expired`). The million-record runs take about half a minute in a debug build
        //! (a few seconds in release), so the default suite runs 100,000 each and CI the million:
        //! `cargo test -p mcp-write-guard-core --lib -- --ignored memory_flat`.
        use super::*;
        use crate::clock::{Clock, ManualClock};
        use crate::round_trip::{store_approval, take_approval};
        use crate::token::{TokenRejection, issue_token, spend_token};
        use crate::{CapturedArgs, PendingApproval, ToolName};

        /// Principals the records are spread over (the cap is per principal).
        const PRINCIPALS: usize = 1_000;

        fn args(i: usize) -> CapturedArgs {
            CapturedArgs::capture_value(
                &json!({ "n": i % 7 }),
                &crate::canonical::ArgLimits::default(),
            )
            .unwrap()
        }

        /// Everything the store holds, in all its structures.
        fn held(store: &MemoryStore) -> (usize, usize, usize) {
            let inner = store.inner.lock();
            (
                inner.entries.len(),
                inner.by_expiry.len(),
                inner.per_principal.len(),
            )
        }

        /// After the last record's retention, one more store call (as the next request would
        /// make) leaves nothing behind.
        fn assert_back_to_empty(store: &MemoryStore, clock: &ManualClock, lifetime: i64) {
            clock.advance(Duration::seconds(2 * lifetime + 1));
            let forged = crate::ids::TokenId::random().to_string();
            let (p, t) = (Principal::new("late"), ToolName::new("t"));
            let refused = ready(spend_token(
                store,
                &tid(&forged),
                Binding::new(&p, &t, &args(0)),
                crate::test_support::definition(),
                clock.now(),
            ));
            assert_eq!(refused, Err(TokenRejection::Unknown));
            assert_eq!(store.len(), 0);
            let (entries, index, principals) = held(store);
            assert_eq!(
                (entries, index),
                (0, 0),
                "entries and expiry index are empty"
            );
            // Principals whose count went to 0 are forgotten in bulk, not one by one.
            assert!(
                principals <= PRINCIPALS,
                "{principals} principals remembered"
            );
            ready(store.purge_expired(clock.now())).unwrap();
            assert_eq!(held(store), (0, 0, 0));
            // And the room the peak needed is given back, not only the entries.
            let inner = store.inner.lock();
            let room = [
                inner.entries.capacity(),
                inner.by_expiry.capacity(),
                inner.per_principal.capacity(),
            ];
            assert!(room.iter().all(|&r| r <= 2 * COMPACT_FLOOR), "{room:?}");
        }

        /// Replaying a spent token (anyone who saw it can) is refused every time and leaves the
        /// store as flat as it was: no entry and no principal more, and an expiry index that
        /// stays within the bound compaction keeps for any load (each replay takes the
        /// tombstone and puts it back, like every store), even on a store that nothing else
        /// writes to.
        #[test]
        fn replays_of_a_spent_token_leave_the_store_flat() {
            let policy = ApprovalPolicy::default();
            let store = MemoryStore::for_policy(&policy);
            let clock = ManualClock::default();
            let (p, tool, a) = (Principal::new("alice"), ToolName::new("t"), args(0));
            let mallory = Principal::new("mallory");
            let token = ready(issue_token(
                &store,
                Binding::new(&p, &tool, &a),
                crate::test_support::definition(),
                &policy,
                clock.now(),
            ))
            .unwrap();
            let spend = |who: &Principal| {
                ready(spend_token(
                    &store,
                    &tid(token.as_str()),
                    Binding::new(who, &tool, &a),
                    crate::test_support::definition(),
                    clock.now(),
                ))
            };
            assert_eq!(spend(&p), Ok(()));
            let after_spend = held(&store);
            for i in 0..20_000 {
                if i % 1_000 == 0 {
                    clock.advance(Duration::seconds(1));
                }
                let who = if i % 2 == 0 { &p } else { &mallory };
                assert_eq!(spend(who), Err(TokenRejection::AlreadySpent), "replay {i}");
                let (entries, index, principals) = held(&store);
                assert_eq!(
                    (entries, principals),
                    (after_spend.0, after_spend.2),
                    "replay {i}"
                );
                let bound = 2 * entries + COMPACT_FLOOR + usize::try_from(COMPACT_EVERY).unwrap();
                assert!(index <= bound, "replay {i}: {index} index items");
            }
        }

        /// Issues `n` tokens 20 ms apart over [`PRINCIPALS`] principals, spends every other one
        /// at once, and lets the rest expire.
        fn tokens(n: usize) {
            let policy = ApprovalPolicy::default();
            let store = MemoryStore::for_policy(&policy);
            let clock = ManualClock::default();
            let principals: Vec<Principal> = (0..PRINCIPALS)
                .map(|i| Principal::new(format!("p{i}")))
                .collect();
            let (tool, argument_sets) = (ToolName::new("t"), (0..7).map(args).collect::<Vec<_>>());
            assert!(store.is_empty());
            let mut peak = 0;
            for i in 0..n {
                clock.advance(Duration::milliseconds(20));
                let (p, a) = (&principals[i % PRINCIPALS], &argument_sets[i % 7]);
                let now = clock.now();
                let token = ready(issue_token(
                    &store,
                    Binding::new(p, &tool, a),
                    crate::test_support::definition(),
                    &policy,
                    now,
                ))
                .unwrap();
                if i % 2 == 0 {
                    let spent = ready(spend_token(
                        &store,
                        &tid(token.as_str()),
                        Binding::new(p, &tool, a),
                        crate::test_support::definition(),
                        now,
                    ));
                    assert_eq!(spent, Ok(()));
                }
                peak = peak.max(store.len());
            }
            // 600 s of records 20 ms apart, each a receipt and either the token or its
            // tombstone: bounded by the clock, not by how many were issued.
            assert!(peak <= 2 * 30_000 + 2, "peak {peak}");
            assert!(n < 30_000 || peak > 50_000, "peak {peak}");
            assert_back_to_empty(&store, &clock, 300);
        }

        /// Stores `n` approvals 10 ms apart over [`PRINCIPALS`] principals, takes every other
        /// one at once, and lets the rest expire.
        fn approvals(n: usize) {
            let policy = ApprovalPolicy::default();
            let store = MemoryStore::for_policy(&policy);
            let clock = ManualClock::default();
            let principals: Vec<Principal> = (0..PRINCIPALS)
                .map(|i| Principal::new(format!("p{i}")))
                .collect();
            let (tool, argument_sets) = (ToolName::new("t"), (0..7).map(args).collect::<Vec<_>>());
            let mut peak = 0;
            for i in 0..n {
                clock.advance(Duration::milliseconds(10));
                let (p, a) = (&principals[i % PRINCIPALS], &argument_sets[i % 7]);
                let now = clock.now();
                let pending = PendingApproval::new(
                    p.clone(),
                    tool.clone(),
                    crate::test_support::definition(),
                    a.clone(),
                    json!(i),
                    now,
                    &policy,
                );
                let id = ready(store_approval(&store, &pending, now)).unwrap();
                if i % 2 == 0 {
                    let taken = ready(take_approval(&store, id, Binding::new(p, &tool, a), now));
                    assert!(taken.is_ok(), "{taken:?}");
                }
                peak = peak.max(store.len());
            }
            // 240 s of records 10 ms apart.
            assert!(peak <= 2 * 24_000 + 2, "peak {peak}");
            assert_back_to_empty(&store, &clock, 120);
        }

        #[test]
        fn a_hundred_thousand_tokens_leave_nothing_behind() {
            tokens(100_000);
        }

        #[test]
        fn a_hundred_thousand_approvals_leave_nothing_behind() {
            approvals(100_000);
        }

        #[test]
        #[ignore = "a million records, about half a minute in debug: see the module doc"]
        fn a_million_tokens_leave_nothing_behind() {
            tokens(1_000_000);
        }

        #[test]
        #[ignore = "a million records, about half a minute in debug: see the module doc"]
        fn a_million_approvals_leave_nothing_behind() {
            approvals(1_000_000);
        }
    }
}
