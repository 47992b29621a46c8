//! The work of `benches/per_call.rs` in a plain loop, for counting instructions with callgrind:
//! the difference between two iteration counts, divided by the difference in iterations, is
//! the cost of one iteration without the set-up.
//!
//! ```sh
//! cargo build --release -p mcp-write-guard-core --example per_call_loop
//! for n in 2000 12000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.token.$n \
//!     target/release/examples/per_call_loop token $n
//! done
//! # instructions per iteration = (Ir(12000) - Ir(2000)) / 10000
//! ```
//!
//! Cases: `policy` (classify + should_wrap + capture of ~1 KiB), `capture`, `clone` (the copy of
//! the arguments a capture keeps), `owned` (a copy handed to `capture_owned`), `classify`, `token`
//! (issue + spend), `approval` (store + take).

#![allow(clippy::print_stdout, clippy::panic, missing_docs)]

#[path = "../benches/fixtures/mod.rs"]
mod fixtures;

use std::hint::black_box;

use fixtures::{StoreFixture, Tool, cancel_order_args, envelope, policy_call, small_args};
use mcp_write_guard_core::{ApprovalPolicy, CapturedArgs};
use mcp_write_guard_policy::classify;
use serde_json::Value;

fn main() {
    let mut argv = std::env::args().skip(1);
    let case = argv.next().unwrap_or_default();
    let n: u64 = argv.next().and_then(|n| n.parse().ok()).unwrap_or(1000);
    let tool = Tool::cancel_order();
    let facts = tool.facts();
    let envelope = envelope();
    let args = cancel_order_args();
    let policy = ApprovalPolicy::default();
    match case.as_str() {
        "policy" => {
            for _ in 0..n {
                black_box(policy_call(
                    black_box(&facts),
                    &envelope,
                    black_box(&args),
                    &policy,
                ));
            }
        }
        "capture" => {
            for _ in 0..n {
                black_box(CapturedArgs::capture(Some(black_box(&args)), &policy.limits).ok());
            }
        }
        "owned" => {
            // A copy made here and handed over: minus `clone`, the capture without the copy.
            for _ in 0..n {
                let owned = black_box(&args).clone();
                black_box(CapturedArgs::capture_owned(Some(owned), &policy.limits).ok());
            }
        }
        "clone" => {
            for _ in 0..n {
                black_box(black_box(&args).clone());
            }
        }
        "classify" => {
            for _ in 0..n {
                black_box(classify(black_box(&facts)));
            }
        }
        "token" => {
            let f = StoreFixture::new("cancel_order", &Value::Object(args));
            for i in 0..n {
                let now = f.now_for(i);
                f.token_pair(now);
            }
            black_box(f.store.len());
        }
        "approval" => {
            let f = StoreFixture::new("adjust_stock", &small_args());
            for _ in 0..n {
                let now = f.tick();
                let pending = f.pending(now);
                black_box(f.approval_pair(&pending, now));
            }
        }
        other => {
            panic!(
                "unknown case {other:?}: policy, capture, owned, clone, classify, token or approval"
            )
        }
    }
    println!("{case}: {n} iterations");
}
