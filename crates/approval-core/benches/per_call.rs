//! Micro-benchmarks of the pure work the guard does per call, through the same functions the
//! rmcp adapter calls (`crates/adapter-rmcp/src/tools.rs`, `write_path/admit.rs`,
//! `write_path/apply.rs`):
//!
//! - `policy_per_call`: classifying a tool (`classify` on the tool's facts), the envelope
//!   decision (`EnvelopePolicy::should_wrap`) and capturing a ~1 KiB argument object
//!   (`CapturedArgs::capture`: limits, canonical form, SHA-256 of it with and without the
//!   `confirmationToken` member), each alone and all three together (`total`).
//! - `token_issue_spend`: `issue_token` then `spend_token` on the `MemoryStore`.
//! - `approval_store_take`: `store_approval` then `take_approval` on the `MemoryStore`.
//!
//! ```sh
//! cargo bench -p mcp-write-guard-core --bench per_call
//! ```
//!
//! Time is injected as in the adapter: `now` is a value. The store cases move it on by one
//! second per pair (16 seconds every 16 token pairs, so that computing the time, the caller's
//! work, stays out of the way), so records expire and are purged as they would on a server
//! taking one write a second, and the store holds its steady state (about 1,200 retained
//! records) throughout.
//! `examples/per_call_loop.rs` runs the same work in a plain loop, for instruction counts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod fixtures;

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use fixtures::{
    StoreFixture, TICK, Tool, cancel_order_args, envelope, policy_call, policy_call_owned,
    small_args,
};
use mcp_write_guard_core::{ApprovalPolicy, CapturedArgs};
use mcp_write_guard_policy::classify;
use serde_json::Value;

fn policy_per_call(c: &mut Criterion) {
    let tool = Tool::cancel_order();
    let facts = tool.facts();
    let envelope = envelope();
    let args = cancel_order_args();
    let policy = ApprovalPolicy::default();
    let class = classify(&facts);
    assert!(class.token_gated);
    let len = CapturedArgs::capture(Some(&args), &policy.limits)
        .unwrap()
        .canonical_len();
    assert!(
        (1000..=1100).contains(&len),
        "canonical form is {len} bytes"
    );

    let mut group = c.benchmark_group("policy_per_call");
    group.bench_function("classify", |b| b.iter(|| classify(black_box(&facts))));
    group.bench_function("should_wrap", |b| {
        b.iter(|| envelope.should_wrap(black_box("cancel_order"), black_box(class.class)))
    });
    group.bench_function("capture_1kib", |b| {
        b.iter(|| CapturedArgs::capture(Some(black_box(&args)), &policy.limits).unwrap())
    });
    // What capture_1kib is made of: one digest less (no confirmationToken), and the copy of
    // the arguments a CapturedArgs owns (cloned, then dropped).
    let mut without_token = args.clone();
    without_token.remove("confirmationToken");
    group.bench_function("capture_1kib_without_token", |b| {
        b.iter(|| CapturedArgs::capture(Some(black_box(&without_token)), &policy.limits).unwrap())
    });
    group.bench_function("clone_1kib", |b| b.iter(|| black_box(&args).clone()));
    // A caller that hands its arguments over (CapturedArgs::capture_owned) pays no copy. The
    // arguments it hands over are made outside the timing, one at a time (so they are as warm
    // in the cache as the borrowed ones), and dropped outside it: they are the request's, which
    // the caller drops either way.
    group.bench_function("capture_owned_1kib", |b| {
        b.iter_batched(
            || args.clone(),
            // Dropped inside the timing, as the copy a borrowed capture makes is.
            |owned| {
                drop(CapturedArgs::capture_owned(
                    Some(black_box(owned)),
                    &policy.limits,
                ))
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("total", |b| {
        b.iter(|| policy_call(black_box(&facts), &envelope, black_box(&args), &policy))
    });
    group.bench_function("total_owned", |b| {
        b.iter_batched(
            || args.clone(),
            |owned| {
                drop(policy_call_owned(
                    black_box(&facts),
                    &envelope,
                    black_box(owned),
                    &policy,
                ))
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn token_issue_spend(c: &mut Criterion) {
    let f = StoreFixture::new("cancel_order", &Value::Object(cancel_order_args()));
    let mut group = c.benchmark_group("token_issue_spend");
    group.bench_function("memory_store", |b| {
        let mut i = 0;
        b.iter(|| {
            let now = f.now_for(i);
            i += 1;
            f.token_pair(now);
        })
    });
    group.finish();
    // Steady state: the last 600 s of tokens (and up to one tick more), each a tombstone and a
    // receipt.
    let bound = 2 * (600 + TICK as usize);
    assert!(f.store.len() <= bound, "{} entries", f.store.len());
}

fn approval_store_take(c: &mut Criterion) {
    let f = StoreFixture::new("adjust_stock", &small_args());
    let mut group = c.benchmark_group("approval_store_take");
    group.bench_function("memory_store", |b| {
        // The pending approval is made outside the timing: the adapter has it before it stores.
        b.iter_batched(
            || {
                let now = f.tick();
                (f.pending(now), now)
            },
            |(pending, now)| f.approval_pair(&pending, now),
            BatchSize::PerIteration,
        )
    });
    group.finish();
    assert!(f.store.len() <= 2 * 241, "{} entries", f.store.len());
}

criterion_group!(
    benches,
    policy_per_call,
    token_issue_spend,
    approval_store_take
);
criterion_main!(benches);
