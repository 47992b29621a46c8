//! approval-core's store contract, run against a real Redis: every property of
//! `store_conformance` and its model-based proptest, each store under a fresh key prefix.

use mcp_write_guard_core::store_conformance::{self, MODEL_CAP};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

use crate::RedisStore;
use crate::test_util::{connect_store, redis_url};

async fn fresh_store(url: &str, cap: usize) -> RedisStore {
    let prefix = format!("conformance-{}", uuid::Uuid::new_v4().simple());
    connect_store(url, &prefix, cap).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_store_keeps_the_store_contract() {
    let redis = redis_url();
    store_conformance::run_all(async |cap| fresh_store(redis.url(), cap).await).await;
}

/// Concurrent takes from separate connections (as from separate replicas) grant once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takes_from_many_connections_grant_once() {
    use mcp_write_guard_core::{
        Principal, Store,
        store::{RecordKind, StoreKey},
    };
    let redis = redis_url();
    let first = fresh_store(redis.url(), 64).await;
    let now = store_conformance::T0;
    for round in 0..20 {
        let key = StoreKey::new(RecordKind::Token, format!("t{round}"));
        let inserted = first
            .insert(
                key.clone(),
                &Principal::new("p"),
                mcp_write_guard_core::store_conformance::record(round),
                now + time::Duration::minutes(5),
                now,
            )
            .await;
        assert_eq!(inserted, Ok(()));
        let mut takes = tokio::task::JoinSet::new();
        for _ in 0..16 {
            // Each its own connection, under the same prefix.
            let other = RedisStore::builder(redis.url())
                .prefix(first.prefix())
                .connect()
                .await;
            let Ok(other) = other else {
                panic!("{other:?}");
            };
            let key = key.clone();
            takes.spawn(async move { other.take(&key, now).await });
        }
        let results = takes.join_all().await;
        let granted = results.iter().filter(|r| matches!(r, Ok(Some(_)))).count();
        assert_eq!(granted, 1, "round {round}: {results:?}");
        assert!(results.iter().all(Result::is_ok), "{results:?}");
    }
}

/// The model-based proptest: any sequence of inserts, takes, reads, purges and clock steps
/// answers as a map would.
#[test]
fn the_redis_store_answers_as_the_model() {
    let redis = redis_url();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let Ok(runtime) = runtime else {
        panic!("no runtime: {runtime:?}");
    };
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    });
    let result = runner.run(&store_conformance::ops(), |ops| {
        runtime.block_on(async {
            let store = fresh_store(redis.url(), MODEL_CAP).await;
            store_conformance::check_against_model(&store, &ops).await;
        });
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
