//! The [`Store`] contract as a test suite, so that every backend passes the same checks as
//! [`MemoryStore`](crate::MemoryStore) (feature `test-util`).
//!
//! Each property is an async function that asserts (and so panics on a breach, naming the
//! property). It takes a factory `make_store(per_principal_cap)` that returns a fresh, empty
//! store with that cap and no store-wide cap below a few hundred entries; a backend shared between
//! tests (one Redis server) gives each store its own namespace. No property sleeps: `now` is
//! a fake timeline passed to the store, and every entry lives at least a minute of it, so a
//! backend that also expires entries by its own clock (a TTL of `expires_at - now`) keeps them for
//! the whole test.
//!
//! The futures need no particular runtime: [`MemoryStore`](crate::MemoryStore)'s are ready at
//! once, a Redis store's run on tokio.
//!
//! ```
//! use mcp_write_guard_core::{MemoryStore, store::DEFAULT_MAX_ENTRIES, store_conformance};
//!
//! # let waker = std::task::Waker::noop();
//! let suite = store_conformance::run_all(async |cap| MemoryStore::with_caps(cap, DEFAULT_MAX_ENTRIES));
//! // The memory store's futures are ready at once, so one poll runs the whole suite.
//! let mut suite = std::pin::pin!(suite);
//! assert!(suite.as_mut().poll(&mut std::task::Context::from_waker(waker)).is_ready());
//! # use std::future::Future;
//! ```

use std::collections::BTreeMap;

use futures_util::future::join_all;

use proptest::prelude::*;
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};

use crate::ids::Principal;
use crate::store::{Record, RecordKind, Store, StoreError, StoreKey};

/// The start of every property's fake timeline (2026-01-01T00:00:00Z).
pub const T0: OffsetDateTime = match OffsetDateTime::from_unix_timestamp(1_767_225_600) {
    Ok(t) => t,
    Err(_) => OffsetDateTime::UNIX_EPOCH,
};

/// The cap the properties give a store unless they test the cap itself.
const ROOMY_CAP: usize = 64;

fn minutes(n: i64) -> OffsetDateTime {
    T0 + Duration::minutes(n)
}

fn token(id: &str) -> StoreKey {
    StoreKey::new(RecordKind::Token, id)
}

/// Inserts a record holding `value` under the token key `id` for `principal`, live until
/// `expires_at`, at `now`.
async fn put<S: Store>(
    store: &S,
    id: &str,
    principal: &Principal,
    value: impl Into<Value>,
    expires_at: OffsetDateTime,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    store
        .insert(token(id), principal, record(value), expires_at, now)
        .await
}

/// As [`put`], as a tombstone ([`Store::insert_tombstone`]).
async fn put_tombstone<S: Store>(
    store: &S,
    id: &str,
    principal: &Principal,
    value: impl Into<Value>,
    expires_at: OffsetDateTime,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    store
        .insert_tombstone(token(id), principal, record(value), expires_at, now)
        .await
}

/// A record to store under a key of kind [`Token`](RecordKind::Token),
/// [`Approval`](RecordKind::Approval) or [`RoundTrip`](RecordKind::RoundTrip) in a test,
/// carrying `value`: records told apart by their values come back as themselves.
pub fn record(value: impl Into<Value>) -> Record {
    record_for(&token("any"), value)
}

/// A record of the variant `key` holds (see [`Record`]), carrying `value`, to store under
/// `key` in a test.
pub fn record_for(key: &StoreKey, value: impl Into<Value>) -> Record {
    Record::carrying(key, value.into())
}

/// Runs every property below against fresh stores from `make_store`.
pub async fn run_all<S: Store>(make_store: impl AsyncFn(usize) -> S) {
    take_is_single_use(&make_store).await;
    get_reads_without_taking(&make_store).await;
    an_entry_is_live_until_its_expiry(&make_store).await;
    an_already_expired_insert_stores_nothing(&make_store).await;
    insert_refuses_a_live_key(&make_store).await;
    a_key_is_free_again_once_taken_or_expired(&make_store).await;
    records_come_back_as_stored(&make_store).await;
    keys_of_other_kinds_and_principals_do_not_collide(&make_store).await;
    live_entries_are_capped_per_principal(&make_store).await;
    tombstones_do_not_count_towards_the_cap(&make_store).await;
    purge_leaves_live_entries(&make_store).await;
    concurrent_takes_grant_once(&make_store).await;
}

/// A taken entry comes back once; a second take (and a get) find nothing.
pub async fn take_is_single_use<S: Store>(make_store: &impl AsyncFn(usize) -> S) {
    let store = make_store(ROOMY_CAP).await;
    let p = Principal::new("p");
    let k = token("k");
    assert_eq!(
        store
            .insert(k.clone(), &p, record(json!({"a": 1})), minutes(2), T0)
            .await,
        Ok(())
    );
    assert_eq!(store.take(&k, T0).await, Ok(Some(record(json!({"a": 1})))));
    assert_eq!(store.take(&k, T0).await, Ok(None), "take is single use");
    assert_eq!(store.get(&k, T0).await, Ok(None), "a taken entry is gone");
    assert_eq!(store.take(&token("never"), T0).await, Ok(None));
}

/// A get returns a copy of a live entry and leaves it in place; an expired or unknown key reads
/// as nothing.
pub async fn get_reads_without_taking<S: Store>(make_store: &impl AsyncFn(usize) -> S) {
    let store = make_store(ROOMY_CAP).await;
    let p = Principal::new("p");
    let k = token("k");
    assert_eq!(
        store
            .insert(k.clone(), &p, record(json!("r")), minutes(2), T0)
            .await,
        Ok(())
    );
    assert_eq!(
        put(&store, "k2", &p, json!("r2"), minutes(2), T0).await,
        Ok(())
    );
    assert_eq!(store.get(&k, T0).await, Ok(Some(record(json!("r")))));
    assert_eq!(
        store.get(&k, minutes(1)).await,
        Ok(Some(record(json!("r"))))
    );
    assert_eq!(store.get(&token("never"), T0).await, Ok(None));
    assert_eq!(
        store.take(&k, minutes(1)).await,
        Ok(Some(record(json!("r")))),
        "get did not take the entry"
    );
    assert_eq!(
        store.get(&token("k2"), minutes(2)).await,
        Ok(None),
        "expired"
    );
}

/// An entry is live while `now < expires_at`, to the millisecond.
pub async fn an_entry_is_live_until_its_expiry<S: Store>(make_store: &impl AsyncFn(usize) -> S) {
    let store = make_store(ROOMY_CAP).await;
    let p = Principal::new("p");
    let expires = minutes(2);
    for id in ["a", "b", "c"] {
        assert_eq!(put(&store, id, &p, json!(id), expires, T0).await, Ok(()));
    }
    let last_ms = expires - Duration::milliseconds(1);
    assert_eq!(
        store.get(&token("a"), last_ms).await,
        Ok(Some(record(json!("a"))))
    );
    assert_eq!(
        store.take(&token("a"), last_ms).await,
        Ok(Some(record(json!("a"))))
    );
    assert_eq!(
        store.take(&token("b"), expires).await,
        Ok(None),
        "at expiry"
    );
    assert_eq!(store.get(&token("c"), expires).await, Ok(None), "at expiry");
    assert_eq!(
        store.take(&token("c"), minutes(60)).await,
        Ok(None),
        "long after"
    );
}

/// Inserting an entry whose expiry is not after `now` succeeds and stores nothing.
pub async fn an_already_expired_insert_stores_nothing<S: Store>(
    make_store: &impl AsyncFn(usize) -> S,
) {
    let store = make_store(1).await;
    let p = Principal::new("p");
    let now = minutes(5);
    assert_eq!(put(&store, "at", &p, json!(0), now, now).await, Ok(()));
    assert_eq!(
        put(&store, "before", &p, json!(0), minutes(4), now).await,
        Ok(())
    );
    assert_eq!(
        put_tombstone(&store, "tomb", &p, json!(0), now, now).await,
        Ok(())
    );
    // Read from an earlier instant, when the entries would have been live had they been stored.
    for id in ["at", "before", "tomb"] {
        assert_eq!(store.get(&token(id), T0).await, Ok(None), "{id} stored");
    }
    // Nothing took the principal's only place, and the keys are free.
    assert_eq!(
        put(&store, "at", &p, json!(1), minutes(7), now).await,
        Ok(())
    );
    assert_eq!(
        store.take(&token("at"), now).await,
        Ok(Some(record(json!(1))))
    );
}

/// A live key is refused with [`StoreError::KeyExists`], whichever kind of insert holds it, and
/// the entry in place is left as it was.
pub async fn insert_refuses_a_live_key<S: Store>(make_store: &impl AsyncFn(usize) -> S) {
    let store = make_store(ROOMY_CAP).await;
    let (p, q) = (Principal::new("p"), Principal::new("q"));
    assert_eq!(
        put(&store, "k", &p, json!("first"), minutes(2), T0).await,
        Ok(())
    );
    assert_eq!(
        put(&store, "k", &q, json!("second"), minutes(9), minutes(1)).await,
        Err(StoreError::KeyExists)
    );
    assert_eq!(
        put_tombstone(&store, "k", &p, json!("tomb"), minutes(9), minutes(1)).await,
        Err(StoreError::KeyExists)
    );
    assert_eq!(
        put_tombstone(&store, "t", &p, json!("tomb"), minutes(2), T0).await,
        Ok(())
    );
    assert_eq!(
        put(&store, "t", &p, json!("second"), minutes(2), T0).await,
        Err(StoreError::KeyExists)
    );
    assert_eq!(
        store.get(&token("k"), minutes(1)).await,
        Ok(Some(record(json!("first"))))
    );
    assert_eq!(
        store
            .get(&token("k"), minutes(2) - Duration::milliseconds(1))
            .await,
        Ok(Some(record(json!("first")))),
        "the refused insert did not move the expiry"
    );
    assert_eq!(
        store.get(&token("t"), T0).await,
        Ok(Some(record(json!("tomb"))))
    );
}

/// Once taken or expired, a key can be inserted again, for any principal.
pub async fn a_key_is_free_again_once_taken_or_expired<S: Store>(
    make_store: &impl AsyncFn(usize) -> S,
) {
    let store = make_store(ROOMY_CAP).await;
    let (p, q) = (Principal::new("p"), Principal::new("q"));
    let k = token("k");
    assert_eq!(
        store
            .insert(k.clone(), &p, record(json!(1)), minutes(2), T0)
            .await,
        Ok(())
    );
    assert_eq!(store.take(&k, T0).await, Ok(Some(record(json!(1)))));
    assert_eq!(
        store
            .insert(k.clone(), &p, record(json!(2)), minutes(2), T0)
            .await,
        Ok(())
    );
    // Expired, never taken: the key is free at the expiry instant.
    assert_eq!(
        store
            .insert(k.clone(), &q, record(json!(3)), minutes(4), minutes(2))
            .await,
        Ok(())
    );
    assert_eq!(store.get(&k, minutes(3)).await, Ok(Some(record(json!(3)))));
    assert_eq!(
        store
            .insert_tombstone(k.clone(), &q, record(json!(4)), minutes(6), minutes(4))
            .await,
        Ok(())
    );
    assert_eq!(store.take(&k, minutes(5)).await, Ok(Some(record(json!(4)))));
}

/// Records of any JSON shape come back equal to what was stored.
pub async fn records_come_back_as_stored<S: Store>(make_store: &impl AsyncFn(usize) -> S) {
    let store = make_store(ROOMY_CAP).await;
    let p = Principal::new("p");
    let records = [
        record(json!(null)),
        record(json!(true)),
        record(json!(0)),
        record(json!(-12.5)),
        record(json!(18_446_744_073_709_551_615_u64)),
        record(json!("")),
        record(json!("\u{0}\"\\ é 🔑 \n")),
        record(json!([])),
        record(json!({})),
        record(
            json!({"nested": {"list": [1, "two", null, {"three": 3.0}]}, "z": "last", "a": "first"}),
        ),
    ];
    for (i, record) in records.iter().enumerate() {
        let k = StoreKey::new(RecordKind::RoundTrip, format!("r{i}"));
        assert_eq!(
            store
                .insert(k.clone(), &p, record.clone(), minutes(2), T0)
                .await,
            Ok(())
        );
        assert_eq!(store.get(&k, T0).await, Ok(Some(record.clone())));
        assert_eq!(store.take(&k, T0).await, Ok(Some(record.clone())));
    }
}

/// The same id under another kind is another record; principals whose names share a prefix, or
/// hold separators, have caps of their own.
pub async fn keys_of_other_kinds_and_principals_do_not_collide<S: Store>(
    make_store: &impl AsyncFn(usize) -> S,
) {
    let store = make_store(1).await;
    let kinds = [
        RecordKind::Approval,
        RecordKind::RoundTrip,
        RecordKind::Token,
        RecordKind::Page,
        RecordKind::Question,
    ];
    let names = ["a", "a:b", "a:", "", "b", "é:{x}", "a*", "a b"];
    for (i, kind) in kinds.iter().enumerate() {
        let k = StoreKey::new(*kind, "same");
        let p = Principal::new(format!("kind{i}"));
        let r = record_for(&k, kind.as_str());
        assert_eq!(store.insert(k, &p, r, minutes(2), T0).await, Ok(()));
    }
    for kind in kinds {
        let k = StoreKey::new(kind, "same");
        let r = record_for(&k, kind.as_str());
        assert_eq!(store.take(&k, T0).await, Ok(Some(r)));
    }
    for name in names {
        let p = Principal::new(name);
        let k = StoreKey::new(RecordKind::Approval, format!("of {name}"));
        assert_eq!(
            store
                .insert(k, &p, record(json!(name)), minutes(2), T0)
                .await,
            Ok(()),
            "principal {name:?} shares a cap with another"
        );
    }
}

/// A principal holds at most `cap` live entries; a refused insert stores nothing; other
/// principals are not affected; a take or an expiry frees a place.
pub async fn live_entries_are_capped_per_principal<S: Store>(
    make_store: &impl AsyncFn(usize) -> S,
) {
    let store = make_store(3).await;
    let (alice, bob) = (Principal::new("alice"), Principal::new("bob"));
    for i in 0..3 {
        let expires = minutes(2 + i);
        assert_eq!(
            put(&store, &format!("a{i}"), &alice, json!(i), expires, T0).await,
            Ok(())
        );
    }
    let refused = put(&store, "a3", &alice, json!(3), minutes(9), T0).await;
    assert_eq!(refused, Err(StoreError::PrincipalCapReached { cap: 3 }));
    assert_eq!(
        store.get(&token("a3"), T0).await,
        Ok(None),
        "the refused entry was not stored"
    );
    assert_eq!(
        put(&store, "b0", &bob, json!(0), minutes(2), T0).await,
        Ok(()),
        "another principal has a cap of its own"
    );
    // Taking one frees a place, once.
    assert_eq!(
        store.take(&token("a0"), T0).await,
        Ok(Some(record(json!(0))))
    );
    assert_eq!(store.take(&token("a0"), T0).await, Ok(None));
    assert_eq!(
        put(&store, "a3", &alice, json!(3), minutes(9), T0).await,
        Ok(())
    );
    assert_eq!(
        put(&store, "a4", &alice, json!(4), minutes(9), T0).await,
        Err(StoreError::PrincipalCapReached { cap: 3 })
    );
    // a1 expires at minute 3: one place is free then, not before.
    let before = minutes(3) - Duration::milliseconds(1);
    assert_eq!(
        put(&store, "a4", &alice, json!(4), minutes(9), before).await,
        Err(StoreError::PrincipalCapReached { cap: 3 })
    );
    assert_eq!(
        put(&store, "a4", &alice, json!(4), minutes(9), minutes(3)).await,
        Ok(())
    );
    assert_eq!(
        put(&store, "a5", &alice, json!(5), minutes(9), minutes(3)).await,
        Err(StoreError::PrincipalCapReached { cap: 3 })
    );
}

/// Tombstones are stored beside a full principal and do not use up its places.
pub async fn tombstones_do_not_count_towards_the_cap<S: Store>(
    make_store: &impl AsyncFn(usize) -> S,
) {
    let store = make_store(1).await;
    let p = Principal::new("p");
    for id in ["t0", "t1"] {
        assert_eq!(
            put_tombstone(&store, id, &p, json!("spent"), minutes(4), T0).await,
            Ok(())
        );
    }
    assert_eq!(
        put(&store, "live", &p, json!(0), minutes(2), T0).await,
        Ok(())
    );
    assert_eq!(
        put(&store, "more", &p, json!(0), minutes(2), T0).await,
        Err(StoreError::PrincipalCapReached { cap: 1 })
    );
    assert_eq!(
        put_tombstone(&store, "t2", &p, json!("spent"), minutes(4), T0).await,
        Ok(()),
        "a full principal still gets tombstones"
    );
    // Taking a tombstone frees no place; taking the counted entry does.
    assert_eq!(
        store.take(&token("t0"), T0).await,
        Ok(Some(record(json!("spent"))))
    );
    assert_eq!(
        put(&store, "more", &p, json!(0), minutes(2), T0).await,
        Err(StoreError::PrincipalCapReached { cap: 1 })
    );
    assert_eq!(
        store.take(&token("live"), T0).await,
        Ok(Some(record(json!(0))))
    );
    assert_eq!(
        put(&store, "more", &p, json!(0), minutes(2), T0).await,
        Ok(())
    );
    assert_eq!(
        store.get(&token("t1"), minutes(1)).await,
        Ok(Some(record(json!("spent"))))
    );
}

/// A purge removes no live entry and reports no more than what had expired. (A backend that
/// expires entries by TTL may report 0.)
pub async fn purge_leaves_live_entries<S: Store>(make_store: &impl AsyncFn(usize) -> S) {
    let store = make_store(ROOMY_CAP).await;
    let p = Principal::new("p");
    for i in 1..=4 {
        assert_eq!(
            put(&store, &format!("k{i}"), &p, json!(i), minutes(i), T0).await,
            Ok(())
        );
    }
    let purged = store.purge_expired(minutes(2)).await;
    assert!(
        matches!(purged, Ok(0..=2)),
        "two entries had expired: {purged:?}"
    );
    for i in 1..=2 {
        let k = token(&format!("k{i}"));
        assert_eq!(store.get(&k, minutes(2)).await, Ok(None));
    }
    for i in 3..=4 {
        let k = token(&format!("k{i}"));
        assert_eq!(store.take(&k, minutes(2)).await, Ok(Some(record(json!(i)))));
    }
}

/// Of many takes of one key polled together, exactly one gets the record.
pub async fn concurrent_takes_grant_once<S: Store>(make_store: &impl AsyncFn(usize) -> S) {
    let store = make_store(ROOMY_CAP).await;
    let p = Principal::new("p");
    let k = token("k");
    assert_eq!(
        store
            .insert(k.clone(), &p, record(json!("once")), minutes(2), T0)
            .await,
        Ok(())
    );
    let takes: Vec<_> = (0..16).map(|_| store.take(&k, T0)).collect();
    let results = join_all(takes).await;
    let granted = results
        .iter()
        .filter(|r| **r == Ok(Some(record(json!("once")))));
    assert_eq!(granted.count(), 1, "{results:?}");
    assert!(
        results.iter().all(Result::is_ok),
        "no take failed: {results:?}"
    );
}

/// One step of the model-based test ([`check_against_model`]).
#[derive(Debug, Clone)]
pub enum Op {
    /// Insert (or, if `tombstone`, insert a tombstone) under key `key` for principal `principal`,
    /// expiring `lifetime` minutes from now (0 or less: already expired).
    Insert {
        /// Which of a few keys.
        key: u8,
        /// Which of a few principals.
        principal: u8,
        /// Minutes from now.
        lifetime: i64,
        /// Whether the entry is a tombstone.
        tombstone: bool,
    },
    /// Take the key.
    Take(u8),
    /// Get the key.
    Get(u8),
    /// Move the clock on by this many minutes.
    Advance(i64),
    /// Purge expired entries.
    Purge,
}

/// The per-principal cap the model test gives its store.
pub const MODEL_CAP: usize = 2;

/// Sequences of [`Op`] over 4 keys of two kinds, 2 principals, lifetimes and clock steps in whole
/// minutes (so that expiries and `now` often meet exactly).
pub fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (0u8..4, 0u8..2, -1i64..4, any::<bool>()).prop_map(
            |(key, principal, lifetime, tombstone)| Op::Insert { key, principal, lifetime, tombstone }
        ),
        2 => (0u8..4).prop_map(Op::Take),
        1 => (0u8..4).prop_map(Op::Get),
        2 => (0i64..3).prop_map(Op::Advance),
        1 => Just(Op::Purge),
    ];
    prop::collection::vec(op, 1..40)
}

struct ModelEntry {
    principal: u8,
    record: Record,
    expires_at: OffsetDateTime,
    counted: bool,
}

fn model_key(key: u8) -> StoreKey {
    let kind = if key.is_multiple_of(2) {
        RecordKind::Token
    } else {
        RecordKind::Approval
    };
    StoreKey::new(kind, format!("key{key}"))
}

/// Runs `ops` against `store` (fresh, per-principal cap [`MODEL_CAP`]) and against a map, and
/// asserts that every answer matches.
pub async fn check_against_model<S: Store>(store: &S, ops: &[Op]) {
    let mut model: BTreeMap<u8, ModelEntry> = BTreeMap::new();
    let mut now = T0;
    let mut stored = 0;
    for (step, op) in ops.iter().enumerate() {
        model.retain(|_, e| now < e.expires_at);
        match op {
            Op::Insert {
                key,
                principal,
                lifetime,
                tombstone,
            } => {
                let expires_at = now + Duration::minutes(*lifetime);
                let record = record(json!({"step": step}));
                let held = model
                    .values()
                    .filter(|e| e.counted && e.principal == *principal)
                    .count();
                let expected = if expires_at <= now {
                    Ok(())
                } else if model.contains_key(key) {
                    Err(StoreError::KeyExists)
                } else if !tombstone && held >= MODEL_CAP {
                    Err(StoreError::PrincipalCapReached { cap: MODEL_CAP })
                } else {
                    stored += 1;
                    model.insert(
                        *key,
                        ModelEntry {
                            principal: *principal,
                            record: record.clone(),
                            expires_at,
                            counted: !tombstone,
                        },
                    );
                    Ok(())
                };
                let p = Principal::new(format!("principal{principal}"));
                let k = model_key(*key);
                let got = if *tombstone {
                    store.insert_tombstone(k, &p, record, expires_at, now).await
                } else {
                    store.insert(k, &p, record, expires_at, now).await
                };
                assert_eq!(got, expected, "step {step}: {op:?}");
            }
            Op::Take(key) => {
                let expected = model.remove(key).map(|e| e.record);
                let got = store.take(&model_key(*key), now).await;
                assert_eq!(got, Ok(expected), "step {step}: {op:?}");
            }
            Op::Get(key) => {
                let expected = model.get(key).map(|e| e.record.clone());
                let got = store.get(&model_key(*key), now).await;
                assert_eq!(got, Ok(expected), "step {step}: {op:?}");
            }
            Op::Advance(by) => now += Duration::minutes(*by),
            Op::Purge => {
                let got = store.purge_expired(now).await;
                assert!(
                    matches!(got, Ok(n) if n <= stored),
                    "step {step}: purged more than was ever stored: {got:?}"
                );
            }
        }
    }
}
