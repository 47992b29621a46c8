//! Adversarial tests: a Redis store under hostile ids and principal names, planted and corrupted
//! keys, racing replicas, skewed clocks, a Redis that dies, pauses or never answers.
//!
//! How one would try to break it, and what each test checks:
//! - Key layout `PREFIX:KIND:ID` / `PREFIX:principal:NAME`: ids and names with `:`, glob
//!   characters, `{}`, CR/LF, NUL, RESP and Lua text, 100,000 characters. Every key stays under
//!   the prefix, no kind, principal or prefix sees another's record, records come back
//!   byte for byte, and nothing is left once everything is taken (`KEYS *` on a private server).
//! - Two prefixes (and two databases) on one Redis share no record and no cap.
//! - A key of another type planted under a record's or a principal's name: every operation fails
//!   closed and leaves the planted key as it was.
//! - Corrupted hashes (non-numeric, empty or missing `e`, missing or non-JSON `r`, `z` naming a
//!   key of another type): never a grant of an unreadable record, never two grants.
//! - The per-principal cap under 64 concurrent inserts from 8 connections, takes racing inserts,
//!   and inserts racing takes of one key: never above the cap, each record granted at most once.
//! - The clock: the millisecond edge with sub-millisecond expiries, instants before 1970 and at
//!   the ends of `OffsetDateTime`'s range.
//! - TTLs: record keys live their lifetime plus one second; a principal's set outlives its
//!   longest member and is gone once its last member is taken.
//! - Redis killed and restarted between insert and take; `SCRIPT FLUSH`; a client-paused Redis
//!   (late replies must not reach the wrong request); a listener that never answers or hangs up.
//!
//! - A planted expiry Lua reads as a number but is not a whole number (`nan`, `inf`, `0x…`): take
//!   and insert refuse it as corrupt, as get does.
//! - A failover: with `wait_for_replicas`, a take the replica never heard of is not granted, so
//!   the promoted replica grants the record at most once overall.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mcp_write_guard_core::store::Record;
use mcp_write_guard_core::store_conformance::{T0, record, record_for};
use mcp_write_guard_core::{
    Principal, Store, StoreError,
    store::{RecordKind, StoreKey},
};
use redis::aio::MultiplexedConnection;
use serde_json::json;
use time::OffsetDateTime;

use crate::RedisStore;
use crate::test_util::{
    RedisServer, assert_take_and_get_unavailable, connect_store as store, redis_url,
};

const KINDS: [RecordKind; 4] = [
    RecordKind::Approval,
    RecordKind::RoundTrip,
    RecordKind::Token,
    RecordKind::Page,
];

fn fresh_prefix() -> String {
    format!("attack-{}", uuid::Uuid::new_v4().simple())
}

/// `T0` plus `ms` milliseconds (the fake timeline every test runs on).
fn at(ms: i64) -> OffsetDateTime {
    T0 + time::Duration::milliseconds(ms)
}

const MINUTE: i64 = 60_000;

async fn admin(url: &str) -> MultiplexedConnection {
    let client = redis::Client::open(url).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// Runs one admin command and panics on failure.
async fn q<T: redis::FromRedisValue>(connection: &mut MultiplexedConnection, args: &[&str]) -> T {
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    match command.query_async(connection).await {
        Ok(value) => value,
        Err(err) => panic!("{:?}: {err}", args[0]),
    }
}

/// Runs one admin command, returning Redis's answer.
async fn try_q<T: redis::FromRedisValue>(
    connection: &mut MultiplexedConnection,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command.query_async(connection).await
}

async fn all_keys(connection: &mut MultiplexedConnection) -> BTreeSet<String> {
    let keys: Vec<Vec<u8>> = q(connection, &["KEYS", "*"]).await;
    keys.into_iter()
        .map(|k| String::from_utf8(k).unwrap())
        .collect()
}

/// Keys under `prefix:` (the prefixes these tests use hold no glob characters).
async fn keys_under(connection: &mut MultiplexedConnection, prefix: &str) -> BTreeSet<String> {
    let pattern = format!("{prefix}:*");
    let keys: Vec<Vec<u8>> = q(connection, &["KEYS", &pattern]).await;
    keys.into_iter()
        .map(|k| String::from_utf8(k).unwrap())
        .collect()
}

fn record_key(prefix: &str, kind: RecordKind, id: &str) -> String {
    format!("{prefix}:{}:{id}", kind.as_str())
}

fn principal_key(prefix: &str, name: &str) -> String {
    format!("{prefix}:principal:{name}")
}

fn text(record: &Record) -> String {
    record.to_json().unwrap()
}

fn hostile_strings() -> Vec<String> {
    let mut strings: Vec<String> = [
        "",
        " ",
        ":",
        "::",
        "a:b",
        "a:b:",
        "*",
        "?",
        "[a-z]",
        "\\",
        "{",
        "}",
        "{tag}x",
        "\n",
        "\r\n",
        "\0",
        "a\0b",
        "principal",
        "principal:x",
        "token:x",
        "approval",
        "round-trip:",
        "x.receipt",
        "*3\r\n$3\r\nDEL\r\n$1\r\n*\r\n",
        "-ERR injected\r\n",
        "'); redis.call('FLUSHALL') --",
        "]] redis.call('FLUSHALL') --[[",
        "KEYS[1]",
        "ARGV[6]",
        "%s%n%d",
        "é😀\u{202e}",
        "-inf",
        "nan",
        "0x10",
        "ok",
        "exists",
        "cap",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    strings.push("k".repeat(100_000));
    strings.push(format!("{}\0tail", ":".repeat(1_000)));
    strings
}

/// Ids and principal names of every hostile shape stay in their own keys under the prefix,
/// never meet another kind's, principal's or prefix's, and come back byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_ids_and_principals_stay_in_their_own_keys() {
    let server = RedisServer::start();
    let url = server.url();
    let mut a = admin(&url).await;
    let prefix = fresh_prefix();
    let neighbour = format!("{prefix}-other");
    // Someone else's keys, one of them shaped like ours under a longer prefix.
    let _: () = q(&mut a, &["SET", "unrelated", "kept"]).await;
    let theirs = record_key(&format!("{prefix}-third"), RecordKind::Token, "");
    let _: () = q(&mut a, &["SET", &theirs, "theirs"]).await;
    let planted = all_keys(&mut a).await;

    let ours = store(&url, &prefix, 100_000).await;
    let other = store(&url, &neighbour, 100_000).await;
    let hostile = hostile_strings();
    let n = hostile.len();

    // (kind, id) -> (record, principal key or "" for a tombstone)
    let mut expected: BTreeMap<String, (StoreKey, Record, String)> = BTreeMap::new();
    let mut members: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (i, id) in hostile.iter().enumerate() {
        for (k, kind) in KINDS.into_iter().enumerate() {
            let name = &hostile[(i * 7 + k) % n];
            let principal = Principal::new(name.clone());
            let counted = (i + k) % 3 != 0;
            let key = StoreKey::new(kind, id.clone());
            let record = record_for(
                &key,
                json!({"id": id, "kind": kind.as_str(), "principal": name, "i": i}),
            );
            let inserted = if counted {
                ours.insert(key.clone(), &principal, record.clone(), at(MINUTE), T0)
                    .await
            } else {
                ours.insert_tombstone(key.clone(), &principal, record.clone(), at(MINUTE), T0)
                    .await
            };
            assert_eq!(inserted, Ok(()), "{kind:?} {id:?}");
            let redis_key = record_key(&prefix, kind, id);
            let owner = if counted {
                let owner = principal_key(&prefix, name);
                members
                    .entry(owner.clone())
                    .or_default()
                    .insert(redis_key.clone());
                owner
            } else {
                String::new()
            };
            let previous = expected.insert(redis_key, (key, record, owner));
            assert!(previous.is_none(), "two records on one Redis key");
        }
    }

    // Exactly the keys we meant, all under the prefix, and nothing of anyone else's touched.
    let now_keys = all_keys(&mut a).await;
    let added: BTreeSet<String> = now_keys.difference(&planted).cloned().collect();
    let meant: BTreeSet<String> = expected.keys().chain(members.keys()).cloned().collect();
    assert_eq!(added.len(), meant.len());
    assert!(added == meant, "keys other than the ones meant");
    assert!(planted.is_subset(&now_keys));
    let lead = format!("{prefix}:");
    assert!(added.iter().all(|k| k.starts_with(&lead)));
    let kept: String = q(&mut a, &["GET", "unrelated"]).await;
    assert_eq!(kept, "kept");

    // Each principal's set holds exactly its own counted records.
    for (owner, keys) in &members {
        let held: Vec<Vec<u8>> = q(&mut a, &["ZRANGE", owner, "0", "-1"]).await;
        let held: BTreeSet<String> = held
            .into_iter()
            .map(|k| String::from_utf8(k).unwrap())
            .collect();
        assert!(&held == keys, "members of {:?}", owner.len());
    }
    // Each hash holds the record's exact text and its owner.
    for (redis_key, (_, record, owner)) in &expected {
        let (r, z): (Vec<u8>, Vec<u8>) = q(&mut a, &["HMGET", redis_key, "r", "z"]).await;
        assert_eq!(r, text(record).into_bytes());
        assert_eq!(z, owner.as_bytes());
    }

    // The neighbouring prefix sees none of it, and can use every one of the same names.
    for (key, _, _) in expected.values() {
        assert_eq!(other.get(key, T0).await, Ok(None));
        assert_eq!(other.take(key, T0).await, Ok(None));
    }
    for (i, (key, _, _)) in expected.values().enumerate() {
        let name = Principal::new(hostile[i % n].clone());
        let inserted = other
            .insert(key.clone(), &name, record_for(key, "other"), at(MINUTE), T0)
            .await;
        assert_eq!(inserted, Ok(()));
    }

    // Every record reads back and is taken exactly once, byte for byte.
    for (key, record, _) in expected.values() {
        let read = ours.get(key, at(1)).await.unwrap().unwrap();
        assert_eq!(text(&read), text(record));
    }
    for (key, record, _) in expected.values() {
        let taken = ours.take(key, at(1)).await.unwrap().unwrap();
        assert_eq!(text(&taken), text(record));
        assert_eq!(ours.take(key, at(1)).await, Ok(None));
        assert_eq!(ours.get(key, at(1)).await, Ok(None));
    }
    // Nothing of ours is left (empty principal sets go with their last member).
    assert!(keys_under(&mut a, &prefix).await.is_empty());
    for (key, _, _) in expected.values() {
        assert_eq!(
            other.take(key, at(1)).await,
            Ok(Some(record_for(key, "other")))
        );
    }
    assert!(
        all_keys(&mut a).await == planted,
        "only the planted keys remain"
    );
}

/// Two stores with different prefixes (and two databases) on one Redis share no record and no
/// cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefixes_and_databases_share_nothing() {
    let redis = redis_url();
    let base = fresh_prefix();
    let first = store(redis.url(), &base, 3).await;
    let second = store(redis.url(), &format!("{base}-b"), 3).await;
    let db1_url = other_database(redis.url());
    let third = store(&db1_url, &base, 3).await;
    let alice = Principal::new("alice");
    for i in 0..3 {
        let key = StoreKey::new(RecordKind::Token, format!("t{i}"));
        for (which, s) in [(1, &first), (2, &second), (3, &third)] {
            assert_eq!(
                s.insert(key.clone(), &alice, record(json!(which)), at(MINUTE), T0)
                    .await,
                Ok(()),
                "store {which}, {i}: the same id and principal in another namespace"
            );
        }
    }
    let full = StoreKey::new(RecordKind::Token, "t3");
    for s in [&first, &second, &third] {
        assert_eq!(
            s.insert(full.clone(), &alice, record(json!(0)), at(MINUTE), T0)
                .await,
            Err(StoreError::PrincipalCapReached { cap: 3 })
        );
    }
    // Taking from one frees a place there only.
    let t0 = StoreKey::new(RecordKind::Token, "t0");
    assert_eq!(second.take(&t0, T0).await, Ok(Some(record(json!(2)))));
    assert_eq!(first.get(&t0, T0).await, Ok(Some(record(json!(1)))));
    assert_eq!(third.get(&t0, T0).await, Ok(Some(record(json!(3)))));
    assert_eq!(
        first
            .insert(full.clone(), &alice, record(json!(0)), at(MINUTE), T0)
            .await,
        Err(StoreError::PrincipalCapReached { cap: 3 })
    );
    assert_eq!(
        second
            .insert(full.clone(), &alice, record(json!(0)), at(MINUTE), T0)
            .await,
        Ok(())
    );
    for (which, s) in [(1, &first), (3, &third)] {
        assert_eq!(s.take(&t0, T0).await, Ok(Some(record(json!(which)))));
    }
}

/// The same Redis, another database (15, or 14 if the URL already names 15).
fn other_database(url: &str) -> String {
    let rest = url.trim_start_matches("redis://");
    let host = rest.split_once('/').map_or(rest, |(host, _)| host);
    let db = if rest.ends_with("/15") { 14 } else { 15 };
    format!("redis://{host}/{db}")
}

/// A key of another type planted under a record's or a principal's name: every operation fails
/// closed and leaves the planted key as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_fails_closed() {
    let redis = redis_url();
    let prefix = fresh_prefix();
    let mut a = admin(redis.url()).await;
    let s = store(redis.url(), &prefix, 64).await;
    let p = Principal::new("p");
    let plants: [(&str, &[&str]); 5] = [
        ("string", &["SET", "{}", "{\"granted\":true}"]),
        ("list", &["RPUSH", "{}", "e", "99999999999999"]),
        ("set", &["SADD", "{}", "e"]),
        ("zset", &["ZADD", "{}", "99999999999999", "e"]),
        ("stream", &["XADD", "{}", "*", "e", "99999999999999"]),
    ];
    for (i, (kind, plant)) in plants.into_iter().enumerate() {
        let key = StoreKey::new(RecordKind::Token, format!("planted-{i}"));
        let redis_key = record_key(&prefix, RecordKind::Token, key.id());
        let args: Vec<String> = plant.iter().map(|a| a.replace("{}", &redis_key)).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let _: redis::Value = q(&mut a, &args).await;
        let dump_before: Vec<u8> = q(&mut a, &["DUMP", &redis_key]).await;

        let inserted = s
            .insert(key.clone(), &p, record(json!(1)), at(MINUTE), T0)
            .await;
        assert!(
            matches!(inserted, Err(StoreError::Unavailable(_))),
            "{kind}: {inserted:?}"
        );
        let tomb = s
            .insert_tombstone(key.clone(), &p, record(json!(1)), at(MINUTE), T0)
            .await;
        assert!(tomb.is_err(), "{kind}: {tomb:?}");
        for _ in 0..2 {
            let taken = s.take(&key, T0).await;
            assert!(taken.is_err(), "{kind}: {taken:?}");
            let read = s.get(&key, T0).await;
            assert!(read.is_err(), "{kind}: {read:?}");
        }
        let found: String = q(&mut a, &["TYPE", &redis_key]).await;
        assert_eq!(found, kind);
        let dump_after: Vec<u8> = q(&mut a, &["DUMP", &redis_key]).await;
        assert!(dump_before == dump_after, "{kind}: the planted key changed");
        // The failed insert counted nothing for the principal.
        let held: u64 = q(&mut a, &["ZCARD", &principal_key(&prefix, "p")]).await;
        assert_eq!(held, 0, "{kind}");
    }

    // A principal's set planted as a string: counted inserts fail and store nothing.
    let victim = Principal::new("victim");
    let victim_key = principal_key(&prefix, "victim");
    let _: () = q(&mut a, &["SET", &victim_key, "not a set"]).await;
    let key = StoreKey::new(RecordKind::Approval, "a1");
    let inserted = s
        .insert(key.clone(), &victim, record(json!(1)), at(MINUTE), T0)
        .await;
    assert!(inserted.is_err(), "{inserted:?}");
    let exists: u64 = q(
        &mut a,
        &["EXISTS", &record_key(&prefix, RecordKind::Approval, "a1")],
    )
    .await;
    assert_eq!(exists, 0, "a failed insert left a record behind");
    assert_eq!(s.take(&key, T0).await, Ok(None));
    let kept: String = q(&mut a, &["GET", &victim_key]).await;
    assert_eq!(kept, "not a set");
    // A tombstone does not touch the principal's set, so it is stored; it still grants once.
    assert_eq!(
        s.insert_tombstone(key.clone(), &victim, record(json!("t")), at(MINUTE), T0)
            .await,
        Ok(())
    );
    assert_eq!(s.take(&key, T0).await, Ok(Some(record(json!("t")))));
    assert_eq!(s.take(&key, T0).await, Ok(None));

    // A principal's set with members that never expire holds the principal at its cap
    // (fail closed), but takes nothing from others.
    let capped = store(redis.url(), &prefix, 2).await;
    let bob_key = principal_key(&prefix, "bob");
    let _: u64 = q(&mut a, &["ZADD", &bob_key, "+inf", "x", "+inf", "y"]).await;
    let bob = Principal::new("bob");
    assert_eq!(
        capped
            .insert(
                StoreKey::new(RecordKind::Token, "b"),
                &bob,
                record(json!(1)),
                at(MINUTE),
                T0
            )
            .await,
        Err(StoreError::PrincipalCapReached { cap: 2 })
    );
}

async fn plant_hash(connection: &mut MultiplexedConnection, key: &str, fields: &[(&str, &str)]) {
    let _: u64 = q(connection, &["DEL", key]).await;
    let mut args = vec!["HSET", key];
    for (field, value) in fields {
        args.push(field);
        args.push(value);
    }
    let _: u64 = q(connection, &args).await;
}

/// Corrupted records: never granted when unreadable, never granted twice, never overwritten
/// silently by an insert that cannot read them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_record_never_grants() {
    let redis = redis_url();
    let prefix = fresh_prefix();
    let mut a = admin(redis.url()).await;
    let s = store(redis.url(), &prefix, 64).await;
    let p = Principal::new("p");
    let live = at(MINUTE).unix_timestamp_nanos() / 1_000_000;
    let live = live.to_string();
    let valid = text(&record(json!({"granted": true})));
    let valid = valid.as_str();
    let string_key = format!("{prefix}:not-a-set");
    let _: () = q(&mut a, &["SET", &string_key, "x"]).await;

    // (what is wrong, the planted fields)
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        (
            "e not a number",
            vec![("e", "abc"), ("z", ""), ("r", valid)],
        ),
        ("e empty", vec![("e", ""), ("z", ""), ("r", valid)]),
        ("e missing", vec![("z", ""), ("r", valid)]),
        ("r missing", vec![("e", &live), ("z", "")]),
        (
            "r not JSON",
            vec![("e", &live), ("z", ""), ("r", "{not json")],
        ),
        ("r empty", vec![("e", &live), ("z", ""), ("r", "")]),
        (
            "r two documents",
            vec![("e", &live), ("z", ""), ("r", "{} {}")],
        ),
        (
            "z names a string",
            vec![("e", &live), ("z", &string_key), ("r", valid)],
        ),
        ("only junk", vec![("x", "1")]),
    ];
    for (i, (name, fields)) in cases.iter().enumerate() {
        let key = StoreKey::new(RecordKind::Token, format!("c{i}"));
        let redis_key = record_key(&prefix, RecordKind::Token, key.id());
        plant_hash(&mut a, &redis_key, fields).await;
        let read = s.get(&key, T0).await;
        // Only the bad-`z` record has a readable expiry and record (`get` does not read `z`).
        let readable = name.starts_with("z names");
        if readable {
            assert_eq!(read, Ok(Some(record(json!({"granted": true})))), "{name}");
        } else {
            assert!(matches!(read, Err(_) | Ok(None)), "{name}: get {read:?}");
        }
        // A take of an unreadable record never grants; any record is granted at most once.
        let mut granted = 0;
        for _ in 0..3 {
            if let Ok(Some(value)) = s.take(&key, T0).await {
                assert!(readable, "{name}: granted {value:?}");
                granted += 1;
            }
        }
        assert!(granted <= 1, "{name}: granted {granted} times");
        if name.starts_with("z names") {
            // The take deleted the record before the bad `z` stopped it: granted zero times.
            assert_eq!(granted, 0, "{name}");
            let kept: String = q(&mut a, &["GET", &string_key]).await;
            assert_eq!(kept, "x");
        }
    }

    // An insert over a record whose expiry cannot be read fails and leaves it alone.
    let key = StoreKey::new(RecordKind::Token, "unreadable");
    let redis_key = record_key(&prefix, RecordKind::Token, key.id());
    plant_hash(&mut a, &redis_key, &[("e", "abc"), ("z", ""), ("r", valid)]).await;
    let inserted = s
        .insert(key.clone(), &p, record(json!("mine")), at(MINUTE), T0)
        .await;
    assert!(inserted.is_err(), "{inserted:?}");
    let e: String = q(&mut a, &["HGET", &redis_key, "e"]).await;
    assert_eq!(e, "abc");
    let held: u64 = q(&mut a, &["ZCARD", &principal_key(&prefix, "p")]).await;
    assert_eq!(held, 0);
}

/// 64 concurrent inserts for one principal from 8 connections with cap 8: exactly 8 get in;
/// then takes racing inserts never let the principal above 8, and its set always matches its
/// records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cap_holds_under_racing_inserts_and_takes() {
    const CAP: usize = 8;
    let redis = redis_url();
    let prefix = fresh_prefix();
    let mut a = admin(redis.url()).await;
    let mut stores = Vec::new();
    for _ in 0..8 {
        stores.push(Arc::new(store(redis.url(), &prefix, CAP).await));
    }
    let alice = Principal::new("alice");
    let alice_key = principal_key(&prefix, "alice");

    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..64 {
        let s = Arc::clone(&stores[i % stores.len()]);
        let alice = alice.clone();
        tasks.spawn(async move {
            let key = StoreKey::new(RecordKind::Token, format!("first-{i}"));
            (
                key.clone(),
                s.insert(key, &alice, record(json!(i)), at(10 * MINUTE), T0)
                    .await,
            )
        });
    }
    let mut live: BTreeSet<StoreKey> = BTreeSet::new();
    for (key, result) in tasks.join_all().await {
        match result {
            Ok(()) => {
                live.insert(key);
            }
            Err(StoreError::PrincipalCapReached { cap: CAP }) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(live.len(), CAP);
    let held: usize = q(&mut a, &["ZCARD", &alice_key]).await;
    assert_eq!(held, CAP);
    // Tombstones never count, however many race in.
    let mut tombs = tokio::task::JoinSet::new();
    for i in 0..32 {
        let s = Arc::clone(&stores[i % stores.len()]);
        let alice = alice.clone();
        tombs.spawn(async move {
            let key = StoreKey::new(RecordKind::Token, format!("tomb-{i}"));
            s.insert_tombstone(key, &alice, record(json!("spent")), at(10 * MINUTE), T0)
                .await
        });
    }
    assert!(tombs.join_all().await.iter().all(Result::is_ok));
    let held: usize = q(&mut a, &["ZCARD", &alice_key]).await;
    assert_eq!(held, CAP);

    for round in 0..6 {
        let now = at(round);
        let mut tasks = tokio::task::JoinSet::new();
        // Take half of what is live (odd rounds: all of it), racing 48 inserts.
        let to_take: Vec<StoreKey> = live
            .iter()
            .take(if round % 2 == 0 { CAP / 2 } else { CAP })
            .cloned()
            .collect();
        for (j, key) in to_take.into_iter().enumerate() {
            let s = Arc::clone(&stores[j % stores.len()]);
            tasks.spawn(async move {
                let taken = s.take(&key, now).await;
                (key, true, taken.map(|v| v.is_some()))
            });
        }
        for j in 0..48 {
            let s = Arc::clone(&stores[(j + 3) % stores.len()]);
            let alice = alice.clone();
            tasks.spawn(async move {
                let key = StoreKey::new(RecordKind::Approval, format!("r{round}-{j}"));
                let inserted = s
                    .insert(key.clone(), &alice, record(json!(j)), at(10 * MINUTE), now)
                    .await;
                let ok = match inserted {
                    Ok(()) => Ok(true),
                    Err(StoreError::PrincipalCapReached { .. }) => Ok(false),
                    Err(other) => Err(other),
                };
                (key, false, ok)
            });
        }
        let (mut freed, mut added) = (0, 0);
        let room = CAP - live.len();
        for (key, was_take, result) in tasks.join_all().await {
            let happened = result.unwrap();
            if was_take {
                assert!(happened, "round {round}: a live record was not granted");
                assert!(live.remove(&key));
                freed += 1;
            } else if happened {
                assert!(live.insert(key));
                added += 1;
            }
        }
        assert!(
            added <= freed + room,
            "round {round}: {added} inserts got in with {freed} places freed and {room} free"
        );
        assert!(live.len() <= CAP, "round {round}: {} live", live.len());
        // Redis agrees: the set and the counted records are exactly the live ones.
        let held: Vec<String> = q(&mut a, &["ZRANGE", &alice_key, "0", "-1"]).await;
        let held: BTreeSet<String> = held.into_iter().collect();
        let expected: BTreeSet<String> = live
            .iter()
            .map(|k| record_key(&prefix, k.kind(), k.id()))
            .collect();
        assert!(held == expected, "round {round}: {held:?} vs {expected:?}");
        let approvals = keys_under(&mut a, &format!("{prefix}:approval")).await;
        let tokens = keys_under(&mut a, &format!("{prefix}:token")).await;
        let counted = approvals.len() + tokens.iter().filter(|k| k.contains(":first-")).count();
        assert_eq!(counted, live.len(), "round {round}");
    }
}

/// The same key inserted and taken from many connections at once: each record is granted at
/// most once, and every record that got in is granted exactly once in the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inserts_racing_takes_of_one_key_grant_each_record_once() {
    let redis = redis_url();
    let prefix = fresh_prefix();
    let mut a = admin(redis.url()).await;
    let mut stores = Vec::new();
    for _ in 0..6 {
        stores.push(Arc::new(store(redis.url(), &prefix, 1_000).await));
    }
    let p = Principal::new("p");
    for round in 0..10 {
        let key = StoreKey::new(RecordKind::RoundTrip, format!("same-{round}"));
        let first = format!("{round}-first");
        assert_eq!(
            stores[0]
                .insert(key.clone(), &p, record(json!(first)), at(MINUTE), T0)
                .await,
            Ok(())
        );
        let mut tasks = tokio::task::JoinSet::new();
        for j in 0..24 {
            let s = Arc::clone(&stores[j % stores.len()]);
            let (key, p) = (key.clone(), p.clone());
            tasks.spawn(async move {
                if j % 2 == 0 {
                    (None, s.take(&key, T0).await)
                } else {
                    let value = format!("{round}-{j}");
                    let inserted = s
                        .insert(key, &p, record(json!(value)), at(MINUTE), T0)
                        .await;
                    match inserted {
                        Ok(()) => (Some(value), Ok(None)),
                        Err(StoreError::KeyExists) => (None, Ok(None)),
                        Err(other) => (None, Err(other)),
                    }
                }
            });
        }
        let mut stored = vec![text(&record(json!(first)))];
        let mut granted = Vec::new();
        for (inserted, taken) in tasks.join_all().await {
            stored.extend(inserted.map(|value| text(&record(json!(value)))));
            if let Some(value) = taken.unwrap() {
                granted.push(text(&value));
            }
        }
        if let Some(value) = stores[1].take(&key, T0).await.unwrap() {
            granted.push(text(&value));
        }
        stored.sort();
        granted.sort();
        assert_eq!(stored, granted, "round {round}");
        let held: u64 = q(&mut a, &["ZCARD", &principal_key(&prefix, "p")]).await;
        assert_eq!(held, 0, "round {round}");
    }
    assert!(keys_under(&mut a, &prefix).await.is_empty());
}

/// The millisecond edge, sub-millisecond expiries, instants before 1970 and the ends of
/// `OffsetDateTime`: never live at or after `expires_at`, always live a millisecond before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_edges_are_never_late() {
    let redis = redis_url();
    let prefix = fresh_prefix();
    let mut a = admin(redis.url()).await;
    let s = store(redis.url(), &prefix, 1_000).await;
    let p = Principal::new("p");
    let ns = time::Duration::nanoseconds;
    let ms = time::Duration::milliseconds;
    let min = time::PrimitiveDateTime::MIN.assume_utc();
    let max = time::PrimitiveDateTime::MAX.assume_utc();
    let epoch = OffsetDateTime::UNIX_EPOCH;
    let starts = [
        T0,
        epoch - ms(5 * MINUTE),
        epoch - ns(1),
        min,
        max - ms(10 * MINUTE),
    ];
    let mut n = 0;
    for start in starts {
        for offset in [0, 1, 500_000, 999_999] {
            let expires = (start + ms(MINUTE) + ns(offset)).min(max);
            let probes = [
                expires - ms(1),
                expires - ns(1),
                expires,
                expires + ns(1),
                expires + ms(1),
            ];
            for now in probes {
                n += 1;
                let key = StoreKey::new(RecordKind::Token, format!("t{n}"));
                assert_eq!(
                    s.insert(key.clone(), &p, record(json!(n)), expires, start)
                        .await,
                    Ok(())
                );
                let read = s.get(&key, now).await.unwrap();
                let taken = s.take(&key, now).await.unwrap();
                if now >= expires {
                    assert_eq!(read, None, "late get at {now} for {expires}");
                    assert_eq!(taken, None, "late take at {now} for {expires}");
                } else if now <= expires - ms(1) {
                    assert_eq!(
                        read,
                        Some(record(json!(n))),
                        "early get at {now} for {expires}"
                    );
                    assert_eq!(
                        taken,
                        Some(record(json!(n))),
                        "early take at {now} for {expires}"
                    );
                } else {
                    // Within the last millisecond it may end early, by rounding; a get that saw
                    // it live is followed by a take that grants it.
                    assert!(read.is_none() || taken == read, "{read:?} then {taken:?}");
                }
                assert_eq!(s.take(&key, start).await, Ok(None), "taken once");
            }
        }
    }
    // Inserting something already expired (to the millisecond) stores nothing.
    let before = keys_under(&mut a, &prefix).await;
    for (expires, now) in [
        (T0, T0),
        (T0 - ns(1), T0),
        (T0 + ns(500_000), T0),
        (min, min),
        (max, max),
        (epoch - ns(1), epoch),
    ] {
        n += 1;
        let key = StoreKey::new(RecordKind::Token, format!("t{n}"));
        assert_eq!(
            s.insert(key.clone(), &p, record(json!(n)), expires, now)
                .await,
            Ok(())
        );
        assert_eq!(
            s.insert_tombstone(key.clone(), &p, record(json!(n)), expires, now)
                .await,
            Ok(())
        );
        assert_eq!(s.get(&key, now).await, Ok(None));
    }
    assert!(keys_under(&mut a, &prefix).await == before);

    // The whole range at once: inserted at the first instant, live until the last.
    let key = StoreKey::new(RecordKind::Page, "forever");
    assert_eq!(
        s.insert(key.clone(), &p, record_for(&key, "f"), max, min)
            .await,
        Ok(())
    );
    let ttl: i64 = q(
        &mut a,
        &["PTTL", &record_key(&prefix, RecordKind::Page, "forever")],
    )
    .await;
    let span = (max - min).whole_milliseconds();
    assert!(i128::from(ttl) > span, "{ttl} vs {span}");
    assert_eq!(
        s.get(&key, max - ms(1)).await,
        Ok(Some(record_for(&key, "f")))
    );
    assert_eq!(s.take(&key, max).await, Ok(None));
    let held: u64 = q(&mut a, &["ZCARD", &principal_key(&prefix, "p")]).await;
    assert_eq!(held, 0);
}

/// Record keys live their lifetime plus one second; a principal's set outlives its longest
/// member, is never shortened, and goes with its last member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttls_cover_exactly_the_lifetime() {
    let redis = redis_url();
    let prefix = fresh_prefix();
    let mut a = admin(redis.url()).await;
    let s = store(redis.url(), &prefix, 64).await;
    let p = Principal::new("p");
    let p_key = principal_key(&prefix, "p");
    let hour = 60 * MINUTE;
    let slack = 1_000;

    let cases = [
        ("five-minutes", 5 * MINUTE, true),
        ("hour", hour, true),
        ("minute", MINUTE, true),
        ("tomb-one-ms", 1, false),
        ("tomb-ten-hours", 10 * hour, false),
    ];
    let mut longest = 0;
    for (id, lifetime, counted) in cases {
        let key = StoreKey::new(RecordKind::Token, id);
        let inserted = if counted {
            longest = longest.max(lifetime);
            s.insert(key, &p, record(json!(id)), at(lifetime), T0).await
        } else {
            s.insert_tombstone(key, &p, record(json!(id)), at(lifetime), T0)
                .await
        };
        assert_eq!(inserted, Ok(()));
        let ttl = pttl(&mut a, &record_key(&prefix, RecordKind::Token, id)).await;
        assert!(
            ttl >= lifetime && ttl <= lifetime + slack,
            "{id}: TTL {ttl} for a lifetime of {lifetime}"
        );
        let set_ttl = pttl(&mut a, &p_key).await;
        assert!(
            (longest..=longest + slack).contains(&set_ttl),
            "after {id}: the principal's set has TTL {set_ttl}, its longest member {longest}"
        );
    }
    let held: u64 = q(&mut a, &["ZCARD", &p_key]).await;
    assert_eq!(held, 3, "tombstones are not counted");
    // A skewed insert (its `now` an hour behind) keeps its record for what is left of it by that
    // clock, and the set still outlives it.
    let key = StoreKey::new(RecordKind::Token, "skewed");
    assert_eq!(
        s.insert(key, &p, record(json!(0)), at(2 * hour), at(-hour))
            .await,
        Ok(())
    );
    // The set's TTL is read first, so that it cannot look shorter for being read later.
    let set_ttl = pttl(&mut a, &p_key).await;
    let ttl = pttl(&mut a, &record_key(&prefix, RecordKind::Token, "skewed")).await;
    assert!((3 * hour..=3 * hour + slack).contains(&ttl), "{ttl}");
    assert!(set_ttl >= ttl, "set {set_ttl} < member {ttl}");

    for id in ["five-minutes", "hour", "minute", "skewed"] {
        let key = StoreKey::new(RecordKind::Token, id);
        assert_eq!(
            s.take(&key, T0).await.map(|v| v.is_some()),
            Ok(true),
            "{id}"
        );
        // A take never lengthens or shortens the set's TTL below its live members'.
        if id != "skewed" {
            let set_ttl = pttl(&mut a, &p_key).await;
            assert!(set_ttl >= 2 * hour, "{set_ttl}");
        }
    }
    let exists: u64 = q(&mut a, &["EXISTS", &p_key]).await;
    assert_eq!(exists, 0, "an empty principal set is left behind");
    let tombstone: u64 = q(
        &mut a,
        &[
            "EXISTS",
            &record_key(&prefix, RecordKind::Token, "tomb-ten-hours"),
        ],
    )
    .await;
    assert_eq!(tombstone, 1);
}

async fn pttl(connection: &mut MultiplexedConnection, key: &str) -> i64 {
    q(connection, &["PTTL", key]).await
}

/// Redis killed between insert and take: every operation fails while it is down, the old
/// record is never granted after the restart, and the store works again by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_redis_never_grants_an_old_record() {
    let mut server = RedisServer::start();
    let url = server.url();
    let s = RedisStore::builder(&url)
        .prefix(fresh_prefix())
        .timeout(Duration::from_millis(400))
        .connect()
        .await
        .unwrap();
    let p = Principal::new("p");
    let key = StoreKey::new(RecordKind::Token, "before");
    assert_eq!(
        s.insert(key.clone(), &p, record(json!("old")), at(MINUTE), T0)
            .await,
        Ok(())
    );
    server.stop();
    let started = Instant::now();
    assert_take_and_get_unavailable(&s, &key, T0).await;
    let other = StoreKey::new(RecordKind::Token, "while-down");
    let inserted = s
        .insert(other.clone(), &p, record(json!(1)), at(MINUTE), T0)
        .await;
    assert!(
        matches!(inserted, Err(StoreError::Unavailable(_))),
        "{inserted:?}"
    );
    assert!(s.ping().await.is_err());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    server.restart();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match s.take(&key, T0).await {
            Ok(None) => break,
            Ok(Some(value)) => panic!("an old record granted after a restart: {value:?}"),
            Err(StoreError::Unavailable(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(err) => panic!("the store did not recover: {err}"),
        }
    }
    assert_eq!(s.get(&key, T0).await, Ok(None));
    assert_eq!(s.take(&other, T0).await, Ok(None));
    // Works again, scripts reloaded by themselves.
    assert_eq!(
        s.insert(key.clone(), &p, record(json!("new")), at(MINUTE), T0)
            .await,
        Ok(())
    );
    assert_eq!(s.take(&key, T0).await, Ok(Some(record(json!("new")))));
    let mut a = admin(&url).await;
    let _: () = q(&mut a, &["SCRIPT", "FLUSH"]).await;
    assert_eq!(
        s.insert(key.clone(), &p, record(json!("again")), at(MINUTE), T0)
            .await,
        Ok(())
    );
    assert_eq!(s.take(&key, T0).await, Ok(Some(record(json!("again")))));
}

/// A loopback listener that accepts connections and then reads and never writes
/// (`hang_up` false) or hangs up at once (`hang_up` true). Stops when the returned flag is set.
fn fake_redis(hang_up: bool) -> (u16, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = Arc::clone(&stop);
    std::thread::spawn(move || {
        while !stopping.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, _)) => {
                    if hang_up {
                        drop(stream);
                        continue;
                    }
                    let stopping = Arc::clone(&stopping);
                    std::thread::spawn(move || silent(stream, &stopping));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    (port, stop)
}

fn silent(mut stream: TcpStream, stop: &AtomicBool) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buffer = [0_u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        match stream.read(&mut buffer) {
            Ok(0) => return,
            Ok(_) => {}
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

async fn every_operation(s: &RedisStore) -> Vec<(&'static str, Result<(), StoreError>, Duration)> {
    let p = Principal::new("p");
    let key = StoreKey::new(RecordKind::Token, "t");
    let mut results = Vec::new();
    let started = Instant::now();
    let r = s
        .insert(key.clone(), &p, record(json!(1)), at(MINUTE), T0)
        .await;
    results.push(("insert", r, started.elapsed()));
    let started = Instant::now();
    let r = s
        .insert_tombstone(key.clone(), &p, record(json!(1)), at(MINUTE), T0)
        .await;
    results.push(("tombstone", r, started.elapsed()));
    let started = Instant::now();
    let r = s.take(&key, T0).await.map(|v| assert_eq!(v, None));
    results.push(("take", r, started.elapsed()));
    let started = Instant::now();
    let r = s.get(&key, T0).await.map(|v| assert_eq!(v, None));
    results.push(("get", r, started.elapsed()));
    let started = Instant::now();
    let r = s.ping().await;
    results.push(("ping", r, started.elapsed()));
    results
}

/// A Redis that accepts the connection and never answers, or hangs up at once: every operation
/// is unavailable within about the timeout, alone or many at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_or_hanging_up_redis_is_unavailable_within_the_timeout() {
    let timeout = Duration::from_millis(300);
    let bound = timeout * 2 + Duration::from_millis(200);
    for hang_up in [false, true] {
        let (port, stop) = fake_redis(hang_up);
        let url = format!("redis://127.0.0.1:{port}");
        let s = RedisStore::builder(&url)
            .timeout(timeout)
            .connect_lazy()
            .unwrap();
        for (what, result, took) in every_operation(&s).await {
            assert!(
                matches!(result, Err(StoreError::Unavailable(_))),
                "hang up {hang_up}, {what}: {result:?}"
            );
            assert!(took < bound, "hang up {hang_up}, {what}: took {took:?}");
        }
        // Many at once, from clones sharing the connection.
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..16 {
            let s = s.clone();
            tasks.spawn(async move {
                let key = StoreKey::new(RecordKind::Token, format!("k{i}"));
                if i % 2 == 0 {
                    s.take(&key, T0).await.map(|_| ())
                } else {
                    s.insert(key, &Principal::new("p"), record(json!(i)), at(MINUTE), T0)
                        .await
                }
            });
        }
        for result in tasks.join_all().await {
            assert!(
                matches!(result, Err(StoreError::Unavailable(_))),
                "{result:?}"
            );
        }
        assert!(started.elapsed() < bound, "{:?}", started.elapsed());
        let started = Instant::now();
        let connected = RedisStore::builder(&url).timeout(timeout).connect().await;
        assert!(
            matches!(connected, Err(crate::ConnectError::Unreachable(_))),
            "{connected:?}"
        );
        assert!(started.elapsed() < bound, "{:?}", started.elapsed());
        stop.store(true, Ordering::Relaxed);
    }
}

/// A paused Redis (`CLIENT PAUSE`): operations time out, and once it answers again no late reply
/// reaches another request, and no record is granted twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_replies_never_reach_another_request() {
    let server = RedisServer::start();
    let url = server.url();
    let prefix = fresh_prefix();
    let fast = RedisStore::builder(&url)
        .prefix(&prefix)
        .timeout(Duration::from_millis(200))
        .connect()
        .await
        .unwrap();
    let p = Principal::new("p");
    let keys: Vec<StoreKey> = (0..6)
        .map(|i| StoreKey::new(RecordKind::Token, format!("k{i}")))
        .collect();
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(
            fast.insert(key.clone(), &p, record(json!(i)), at(MINUTE), T0)
                .await,
            Ok(())
        );
    }
    let mut a = admin(&url).await;
    let _: () = q(&mut a, &["CLIENT", "PAUSE", "1500", "ALL"]).await;
    let started = Instant::now();
    // While paused: two takes and a read, each unavailable after its timeout.
    for (what, result) in [
        ("take k0", fast.take(&keys[0], T0).await),
        ("take k1", fast.take(&keys[1], T0).await),
        ("get k3", fast.get(&keys[3], T0).await),
    ] {
        assert!(
            matches!(result, Err(StoreError::Unavailable(_))),
            "{what}: {result:?}"
        );
    }
    assert!(started.elapsed() < Duration::from_millis(1_500));
    // Once it answers again, each request gets its own key's answer.
    let deadline = Instant::now() + Duration::from_secs(5);
    while fast.ping().await.is_err() {
        assert!(Instant::now() < deadline, "the store never recovered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut granted: BTreeMap<usize, usize> = BTreeMap::new();
    for round in 0..3 {
        for (i, key) in keys.iter().enumerate() {
            let read = fast.get(key, T0).await.unwrap();
            if let Some(value) = &read {
                assert_eq!(
                    value,
                    &record(json!(i)),
                    "round {round}: a reply for another key"
                );
            }
            if let Some(value) = fast.take(key, T0).await.unwrap() {
                assert_eq!(
                    value,
                    record(json!(i)),
                    "round {round}: a reply for another key"
                );
                *granted.entry(i).or_default() += 1;
            }
        }
    }
    // Keys not taken while paused are granted exactly once; the two whose takes timed out at
    // most once (a late take may have spent them).
    for i in 2..6 {
        assert_eq!(granted.get(&i), Some(&1), "key {i}: {granted:?}");
    }
    assert!(granted.values().all(|&n| n == 1), "{granted:?}");
}

/// A record is byte-identical on the way back, however odd its JSON; one too deep to read back
/// fails closed (and is spent) rather than grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_come_back_byte_for_byte() {
    let redis = redis_url();
    let prefix = fresh_prefix();
    let s = store(redis.url(), &prefix, 64).await;
    let p = Principal::new("p");
    let records = [
        record(json!(null)),
        record(json!("")),
        record(json!("\0\r\n$-1\r\n*1\r\n")),
        record(json!("'); redis.call('FLUSHALL') --")),
        record(json!({"é😀\u{202e}": ["\u{0}", "\u{1f}", "\u{7f}", "\u{2028}"]})),
        record(json!([
            u64::MAX,
            i64::MIN,
            0.1,
            1e308,
            5e-324,
            -0.0,
            1.5e-7
        ])),
        record(json!({"nested": {"a": [[[[{"b": []}]]]], "": {}}})),
        record(json!("x".repeat(1_000_000))),
        record(json!({"ok": "exists", "cap": false, "e": 1, "r": "z"})),
    ];
    for (i, record) in records.iter().enumerate() {
        let key = StoreKey::new(RecordKind::Approval, format!("r{i}"));
        assert_eq!(
            s.insert(key.clone(), &p, record.clone(), at(MINUTE), T0)
                .await,
            Ok(())
        );
        let read = s.get(&key, T0).await.unwrap().unwrap();
        assert_eq!(text(&read), text(record), "record {i}");
        let taken = s.take(&key, T0).await.unwrap().unwrap();
        assert_eq!(text(&taken), text(record), "record {i}");
    }
    // 130 nested arrays: serde_json writes it, but its parser stops at 128.
    let mut deep = json!(1);
    for _ in 0..130 {
        deep = json!([deep]);
    }
    let deep = record(deep);
    let key = StoreKey::new(RecordKind::Approval, "deep");
    assert_eq!(
        s.insert(key.clone(), &p, deep, at(MINUTE), T0).await,
        Ok(())
    );
    assert!(matches!(s.get(&key, T0).await, Err(StoreError::Corrupt(_))));
    assert!(matches!(
        s.take(&key, T0).await,
        Err(StoreError::Corrupt(_))
    ));
    assert_eq!(s.take(&key, T0).await, Ok(None), "spent, not granted");
}

/// Caps and timeouts at their extremes: cap 0 refuses every counted insert, cap `usize::MAX`
/// refuses none; a zero timeout fails closed, `Duration::MAX` works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_and_timeouts_at_their_extremes() {
    let redis = redis_url();
    let prefix = fresh_prefix();
    let p = Principal::new("p");
    let none = store(redis.url(), &prefix, 0).await;
    let key = StoreKey::new(RecordKind::Token, "a");
    assert_eq!(
        none.insert(key.clone(), &p, record(json!(1)), at(MINUTE), T0)
            .await,
        Err(StoreError::PrincipalCapReached { cap: 0 })
    );
    assert_eq!(
        none.insert_tombstone(key.clone(), &p, record(json!(1)), at(MINUTE), T0)
            .await,
        Ok(())
    );
    assert_eq!(none.take(&key, T0).await, Ok(Some(record(json!(1)))));
    let all = store(redis.url(), &prefix, usize::MAX).await;
    for i in 0..100 {
        let key = StoreKey::new(RecordKind::Token, format!("m{i}"));
        assert_eq!(
            all.insert(key, &p, record(json!(i)), at(MINUTE), T0).await,
            Ok(())
        );
    }

    let forever = RedisStore::builder(redis.url())
        .prefix(&prefix)
        .timeout(Duration::MAX)
        .connect()
        .await
        .unwrap();
    let key = StoreKey::new(RecordKind::Token, "m0");
    assert_eq!(forever.take(&key, T0).await, Ok(Some(record(json!(0)))));
    let zero = RedisStore::builder(redis.url())
        .prefix(&prefix)
        .timeout(Duration::ZERO)
        .connect_lazy()
        .unwrap();
    // A zero timeout still lets an answer that is there within the timer's tick through (tokio
    // polls the request before the deadline); either way, never a hang and never two grants.
    for i in 1..40 {
        let key = StoreKey::new(RecordKind::Token, format!("m{i}"));
        let started = Instant::now();
        let first = zero.take(&key, T0).await;
        assert!(started.elapsed() < Duration::from_secs(1));
        let second = all.take(&key, T0).await;
        match first {
            Ok(Some(value)) => {
                assert_eq!(value, record(json!(i)));
                assert_eq!(second, Ok(None));
            }
            Ok(None) => panic!("a live record read as absent"),
            // Timed out: Redis may or may not have run the take (then the record is spent).
            Err(StoreError::Unavailable(_)) => {
                assert!(
                    matches!(second, Ok(Some(ref v)) if v == &record(json!(i)))
                        || second == Ok(None)
                );
            }
            Err(other) => panic!("{other:?}"),
        }
    }
}

/// Lua's `tonumber` reads `nan`, `inf`, `1e400`, `0x…` and padded numbers, where `get` (Rust's
/// `i64` parse) calls the record corrupt: take refuses them as corrupt too (and spends them), so
/// a planted `e = "nan"` is never a record that does not expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn take_parses_an_expiry_that_get_refuses() {
    let redis = redis_url();
    let prefix = fresh_prefix();
    let mut a = admin(redis.url()).await;
    let s = store(redis.url(), &prefix, 64).await;
    let mut granted = Vec::new();
    // A record that reads back: only the expiry can make the take refuse it.
    let valid = text(&record(json!(1)));
    for (i, e) in ["nan", "inf", "1e400", "0x7fffffffffff", " 99999999999999 "]
        .into_iter()
        .enumerate()
    {
        let key = StoreKey::new(RecordKind::Token, format!("odd-{i}"));
        let redis_key = record_key(&prefix, RecordKind::Token, key.id());
        plant_hash(&mut a, &redis_key, &[("e", e), ("z", ""), ("r", &valid)]).await;
        let read = s.get(&key, T0).await;
        assert!(
            matches!(read, Err(StoreError::Corrupt(_))),
            "{e:?}: {read:?}"
        );
        let taken = s.take(&key, T0).await;
        if let Ok(Some(_)) = taken {
            granted.push(e);
        }
        assert!(
            matches!(taken, Err(StoreError::Corrupt(_))),
            "{e:?}: {taken:?}"
        );
        let left: u64 = q(&mut a, &["EXISTS", &redis_key]).await;
        assert_eq!(left, 0, "{e:?}: the take spent it");
        plant_hash(&mut a, &redis_key, &[("e", e), ("z", ""), ("r", &valid)]).await;
        let over = s
            .insert(
                key.clone(),
                &Principal::new("p"),
                record(json!(1)),
                at(MINUTE),
                T0,
            )
            .await;
        assert!(
            matches!(over, Err(StoreError::Corrupt(_))),
            "{e:?}: {over:?}"
        );
    }
    assert!(
        granted.is_empty(),
        "take granted records whose expiry get calls corrupt: {granted:?}"
    );
}

/// Forwards a TCP connection's bytes both ways until `cut` is set; from then on, drops what the
/// upstream sends (a replication link that stalls: the replica no longer hears the primary).
fn cutting_proxy(upstream: u16, cut: Arc<AtomicBool>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for downstream in listener.incoming() {
            let Ok(downstream) = downstream else { return };
            let Ok(up) = TcpStream::connect(("127.0.0.1", upstream)) else {
                return;
            };
            let (mut down_r, mut up_w) = (downstream.try_clone().unwrap(), up.try_clone().unwrap());
            std::thread::spawn(move || {
                let mut buffer = [0_u8; 16_384];
                while let Ok(n) = down_r.read(&mut buffer) {
                    if n == 0 || up_w.write_all(&buffer[..n]).is_err() {
                        return;
                    }
                }
            });
            let (mut up_r, mut down_w) = (up, downstream);
            let cut = Arc::clone(&cut);
            std::thread::spawn(move || {
                let mut buffer = [0_u8; 16_384];
                while let Ok(n) = up_r.read(&mut buffer) {
                    if n == 0 {
                        return;
                    }
                    if !cut.load(Ordering::SeqCst) && down_w.write_all(&buffer[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A child process killed (and waited for) when dropped, even if the test panics first.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Replication is asynchronous: a take acknowledged by the primary can be lost if the primary
/// dies before its replica hears the `DEL`, and a replica promoted in its place would grant the
/// record again. With `wait_for_replicas`, the primary's take is granted only once a replica
/// holds it: here the replica's link is stalled by a proxy just before the take, so that take is
/// refused (spent, not granted) and the promoted replica grants the record once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_replica_wait_a_failover_grants_a_record_at_most_once() {
    let mut primary = RedisServer::start();
    let cut = Arc::new(AtomicBool::new(false));
    let link = cutting_proxy(primary.port(), Arc::clone(&cut));
    let replica_port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The replica loads the primary's snapshot without a file, in a directory of its own.
    let dir = std::env::temp_dir().join(fresh_prefix());
    std::fs::create_dir_all(&dir).unwrap();
    let replica = std::process::Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(["--repl-diskless-load", "on-empty-db"])
        .arg("--dir")
        .arg(&dir)
        .args(["--port", &replica_port.to_string()])
        .args(["--replicaof", "127.0.0.1", &link.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let replica = Reaped(replica);
    let replica_url = format!("redis://127.0.0.1:{replica_port}");
    let prefix = fresh_prefix();
    let on_primary = RedisStore::builder(primary.url())
        .prefix(&prefix)
        .wait_for_replicas(1, Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    let p = Principal::new("p");
    let key = StoreKey::new(RecordKind::Token, "once");
    assert_eq!(
        on_primary
            .insert(key.clone(), &p, record(json!("grant")), at(MINUTE), T0)
            .await,
        Ok(())
    );
    // Wait until the replica holds the record.
    let redis_key = record_key(&prefix, RecordKind::Token, "once");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(client) = redis::Client::open(replica_url.as_str())
            && let Ok(mut r) = client.get_multiplexed_async_connection().await
            && let Ok(1) = try_q::<u64>(&mut r, &["EXISTS", &redis_key]).await
        {
            break;
        }
        assert!(Instant::now() < deadline, "the replica never synced");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // While the replica hears the primary, a take waits for it and is granted.
    let healthy = StoreKey::new(RecordKind::Token, "healthy");
    assert_eq!(
        on_primary
            .insert(healthy.clone(), &p, record(json!("ok")), at(MINUTE), T0)
            .await,
        Ok(())
    );
    assert_eq!(
        on_primary.take(&healthy, T0).await,
        Ok(Some(record(json!("ok"))))
    );
    cut.store(true, Ordering::SeqCst);
    let first = on_primary.take(&key, T0).await;
    assert!(
        matches!(first, Err(StoreError::Unavailable(_))),
        "a take no replica confirmed is not granted: {first:?}"
    );
    primary.stop();
    let mut r = admin(&replica_url).await;
    let _: () = q(&mut r, &["REPLICAOF", "NO", "ONE"]).await;
    let on_replica = store(&replica_url, &prefix, 64).await;
    let second = on_replica.take(&key, T0).await;
    drop(replica);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        second,
        Ok(Some(record(json!("grant")))),
        "granted once, by the promoted replica (the primary's take was never granted)"
    );
}
