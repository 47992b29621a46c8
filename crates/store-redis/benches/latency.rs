//! Latency of the store operations a write needs, one at a time, on the memory store and on a
//! local Redis: a confirmation token issued and spent, an approval stored and taken.
//!
//! ```sh
//! cargo bench -p mcp-write-guard-redis --features test-util --bench latency
//! ```
//!
//! Uses the Redis named by `MCP_WRITE_GUARD_REDIS_URL`, or starts its own `redis-server`.
//! Prints the median and the 99th percentile of each, in microseconds.

#![allow(clippy::print_stdout, clippy::panic, missing_docs)]

use std::time::{Duration, Instant};

use mcp_write_guard_core::{
    ApprovalPolicy, Approvals, Binding, CapturedArgs, MemoryStore, PendingApproval, Principal,
    Store, ToolName, ids::DefinitionDigest,
};
use mcp_write_guard_redis::RedisStore;
use mcp_write_guard_redis::test_util::redis_url;
use time::OffsetDateTime;

/// The definition of the tool the records are for (the adapter digests the real one).
const DEFINITION: DefinitionDigest = DefinitionDigest::from_bytes([7; 32]);

const WARM_UP: usize = 1_000;
const SAMPLES: usize = 20_000;

fn args() -> CapturedArgs {
    let value = serde_json::json!({"sku": "TLS-002", "delta": -2, "reason": "damaged in transit"});
    match CapturedArgs::capture_value(
        &value,
        &mcp_write_guard_core::canonical::ArgLimits::default(),
    ) {
        Ok(args) => args,
        Err(err) => panic!("{err}"),
    }
}

async fn token_round(store: &dyn Store, policy: &ApprovalPolicy, args: &CapturedArgs) -> Duration {
    let (principal, tool) = (Principal::new("bench"), ToolName::new("cancel_order"));
    let now = OffsetDateTime::now_utc();
    let started = Instant::now();
    let token = match Approvals::new(store)
        .issue_token(
            Binding::new(&principal, &tool, args),
            DEFINITION,
            policy,
            now,
        )
        .await
    {
        Ok(token) => token,
        Err(err) => panic!("issue: {err}"),
    };
    if let Err(err) = Approvals::new(store)
        .spend_token(
            &token.id(),
            Binding::new(&principal, &tool, args),
            DEFINITION,
            now,
        )
        .await
    {
        panic!("spend: {err:?}");
    }
    started.elapsed()
}

async fn approval_round(
    store: &dyn Store,
    policy: &ApprovalPolicy,
    args: &CapturedArgs,
) -> Duration {
    let (principal, tool) = (Principal::new("bench"), ToolName::new("adjust_stock"));
    let now = OffsetDateTime::now_utc();
    let preview = serde_json::json!({"sku": "TLS-002", "before": 12, "after": 10});
    let pending = PendingApproval::new(
        principal.clone(),
        tool.clone(),
        DEFINITION,
        args.clone(),
        preview,
        now,
        policy,
    );
    let started = Instant::now();
    let id = match Approvals::new(store).store_approval(&pending, now).await {
        Ok(id) => id,
        Err(err) => panic!("store: {err}"),
    };
    if let Err(err) = Approvals::new(store)
        .take_approval(id, Binding::new(&principal, &tool, args), now)
        .await
    {
        panic!("take: {err:?}");
    }
    started.elapsed()
}

fn report(backend: &str, operation: &str, mut samples: Vec<Duration>) {
    samples.sort_unstable();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples.get(i).map_or(f64::NAN, |d| d.as_secs_f64() * 1e6)
    };
    println!(
        "{backend:<7} {operation:<28} median {:>8.1} µs   p99 {:>8.1} µs   ({} samples)",
        at(0.5),
        at(0.99),
        samples.len()
    );
}

async fn measure(backend: &str, store: &dyn Store) {
    let policy = ApprovalPolicy::default();
    let args = args();
    for _ in 0..WARM_UP {
        token_round(store, &policy, &args).await;
        approval_round(store, &policy, &args).await;
    }
    let mut tokens = Vec::with_capacity(SAMPLES);
    let mut approvals = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        tokens.push(token_round(store, &policy, &args).await);
        approvals.push(approval_round(store, &policy, &args).await);
    }
    report(backend, "token issue + spend", tokens);
    report(backend, "approval store + take", approvals);
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let Ok(runtime) = runtime else {
        panic!("no runtime");
    };
    let redis = redis_url();
    runtime.block_on(async {
        measure("memory", &MemoryStore::new()).await;
        let prefix = format!("bench-{}", std::process::id());
        let store = match RedisStore::builder(redis.url())
            .prefix(prefix)
            .connect()
            .await
        {
            Ok(store) => store,
            Err(err) => panic!("{err}"),
        };
        measure("redis", &store).await;
    });
}
