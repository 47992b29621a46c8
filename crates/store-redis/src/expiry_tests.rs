//! Redis frees what it stores by itself: records by the hundred thousand, once expired, leave its
//! key count where it started, with no sweeper and no purge. The default suite stores 100,000;
//! the million takes most of a minute in a debug build (the test's own client side is most of
//! it), so it is ignored unless asked for:
//! `cargo test -p mcp-write-guard-redis --lib -- --ignored a_million`.

use std::sync::Arc;
use std::time::Duration;

use mcp_write_guard_core::store_conformance::record;
use mcp_write_guard_core::{
    Principal, Store,
    store::{RecordKind, StoreKey},
};
use serde_json::json;
use time::OffsetDateTime;

use crate::RedisStore;
use crate::test_util::RedisServer;

const PRINCIPALS: usize = 1_000;
const IN_FLIGHT: usize = 512;

async fn redis_number(connection: &mut redis::aio::MultiplexedConnection, command: &str) -> u64 {
    let reply: Result<u64, _> = redis::cmd(command).query_async(connection).await;
    match reply {
        Ok(n) => n,
        Err(err) => panic!("{command}: {err}"),
    }
}

async fn expired_keys(connection: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: Result<String, _> = redis::cmd("INFO")
        .arg("stats")
        .query_async(connection)
        .await;
    let info = match info {
        Ok(info) => info,
        Err(err) => panic!("INFO: {err}"),
    };
    info.lines()
        .find_map(|line| line.strip_prefix("expired_keys:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// A hundred thousand records, as below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_expired_records_leave_the_key_count_where_it_started() {
    expired_records_leave_the_key_count_where_it_started(100_000).await;
}

/// A million records, as below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a million records, most of a minute in debug: see the module doc"]
async fn a_million_expired_records_leave_the_key_count_where_it_started() {
    expired_records_leave_the_key_count_where_it_started(1_000_000).await;
}

/// `records` records (counted entries for a thousand principals, and tombstones), each with a
/// one-second lifetime: Redis expires every one of them, and the principals' sorted sets, by TTL.
async fn expired_records_leave_the_key_count_where_it_started(records: usize) {
    // Its own server: DBSIZE counts every key, and no other test may add any meanwhile.
    let server = RedisServer::start();
    let client = redis::Client::open(server.url());
    let Ok(client) = client else {
        panic!("{client:?}");
    };
    let mut admin = match client.get_multiplexed_async_connection().await {
        Ok(connection) => connection,
        Err(err) => panic!("{err}"),
    };
    // Something that is not ours and never expires: the count to come back to is not 0.
    let set: Result<(), _> = redis::cmd("SET")
        .arg("unrelated")
        .arg("kept")
        .query_async(&mut admin)
        .await;
    assert!(set.is_ok(), "{set:?}");
    let started_with = redis_number(&mut admin, "DBSIZE").await;
    let expired_before = expired_keys(&mut admin).await;

    let store = RedisStore::builder(server.url())
        .per_principal_cap(records)
        .timeout(Duration::from_secs(30))
        .connect()
        .await;
    let store = match store {
        Ok(store) => Arc::new(store),
        Err(err) => panic!("{err}"),
    };
    let principals: Arc<Vec<Principal>> = Arc::new(
        (0..PRINCIPALS)
            .map(|i| Principal::new(format!("principal-{i}")))
            .collect(),
    );
    let mut tasks = tokio::task::JoinSet::new();
    for lane in 0..IN_FLIGHT {
        let (store, principals) = (Arc::clone(&store), Arc::clone(&principals));
        tasks.spawn(async move {
            let mut i = lane;
            while i < records {
                let now = OffsetDateTime::now_utc();
                let expires_at = now + time::Duration::seconds(1);
                let key = StoreKey::new(RecordKind::Token, format!("t{i}"));
                let Some(principal) = principals.get(i % PRINCIPALS) else {
                    return Err(format!("no principal for {i}"));
                };
                let stored = if i % 4 == 0 {
                    store
                        .insert_tombstone(key, principal, record(json!(i)), expires_at, now)
                        .await
                } else {
                    store
                        .insert(key, principal, record(json!(i)), expires_at, now)
                        .await
                };
                stored.map_err(|err| format!("record {i}: {err}"))?;
                i += IN_FLIGHT;
            }
            Ok::<(), String>(())
        });
    }
    for result in tasks.join_all().await {
        assert_eq!(result, Ok(()));
    }

    // Redis's own expiry cycle frees the keys; wait for it (no purge call, no sweeper of ours).
    let mut left = redis_number(&mut admin, "DBSIZE").await;
    for _ in 0..600 {
        if left == started_with {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = redis_number(&mut admin, "DBSIZE").await;
    }
    assert_eq!(left, started_with, "keys left after every record expired");
    let expired = expired_keys(&mut admin).await - expired_before;
    // Every record expired by TTL (a principal's set may also go when its last member is
    // dropped, so it need not be counted here; DBSIZE above shows none is left).
    assert!(
        expired >= records as u64,
        "Redis expired only {expired} keys of {records} records"
    );
    let kept: Result<String, _> = redis::cmd("GET")
        .arg("unrelated")
        .query_async(&mut admin)
        .await;
    assert_eq!(kept.ok().as_deref(), Some("kept"));
}
