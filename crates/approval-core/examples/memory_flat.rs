//! The resident memory of a process whose memory store sees a million tokens and a million
//! approvals issued and left to expire (half of each used at once), twice, as the unit tests in
//! `src/store.rs` (`memory_flat`) count entries: VmRSS from `/proc/self/status` (Linux) before,
//! at the peak and after the last record's retention, when the next store call has purged.
//!
//! ```sh
//! cargo run --release -p mcp-write-guard-core --example memory_flat
//! ```

#![allow(
    clippy::print_stdout,
    clippy::panic,
    clippy::unwrap_used,
    clippy::indexing_slicing,
    missing_docs
)]

#[path = "../benches/fixtures/mod.rs"]
mod fixtures;

use fixtures::ready;
use mcp_write_guard_core::{
    ApprovalPolicy, Approvals, Binding, CapturedArgs, MemoryStore, PendingApproval, Principal,
    Store, ToolName, ids::DefinitionDigest, token::parse_token,
};
use serde_json::json;
use time::{Duration, OffsetDateTime};

/// The definition of the tool the records are for (the adapter digests the real one).
const DEFINITION: DefinitionDigest = DefinitionDigest::from_bytes([7; 32]);

const RECORDS: usize = 1_000_000;
const PRINCIPALS: usize = 1_000;

/// The resident set size in KiB, from `/proc/self/status`.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn report(what: &str, store: &MemoryStore, rss: u64) {
    println!(
        "{what:<34} VmRSS {:>7} KiB   entries {:>6}",
        rss,
        store.len()
    );
}

/// Makes [`RECORDS`] records with `one`, moving the clock `now` on by `step` before each, and
/// samples the peak RSS every 10,000.
fn million(
    now: &mut OffsetDateTime,
    step: Duration,
    peak: &mut u64,
    mut one: impl FnMut(usize, OffsetDateTime),
) {
    for i in 0..RECORDS {
        *now += step;
        one(i, *now);
        if i % 10_000 == 0 {
            *peak = (*peak).max(rss_kib());
        }
    }
}

fn main() {
    let policy = ApprovalPolicy::default();
    let store = MemoryStore::for_policy(&policy);
    let principals: Vec<Principal> = (0..PRINCIPALS)
        .map(|i| Principal::new(format!("user-{i}@example.com")))
        .collect();
    let tool = ToolName::new("cancel_order");
    let args: Vec<CapturedArgs> = (0..7)
        .map(|i| {
            let value = json!({"orderId": format!("ORD-{i}"), "reason": "customer request"});
            CapturedArgs::capture_value(&value, &policy.limits).unwrap()
        })
        .collect();
    let mut now = OffsetDateTime::UNIX_EPOCH + Duration::seconds(1_767_225_600);
    report("before", &store, rss_kib());
    // Twice: what the first round leaves with the allocator, the second reuses; a leak would
    // show as a higher second peak.
    let rounds: u32 = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(2);
    for round in 1..=rounds {
        let mut peak = rss_kib();
        // Tokens 20 ms apart: 600 s of retention holds about 60,000 entries.
        million(&mut now, Duration::milliseconds(20), &mut peak, |i, now| {
            let (p, a) = (&principals[i % PRINCIPALS], &args[i % 7]);
            let token = ready(Approvals::new(&store).issue_token(
                Binding::new(p, &tool, a),
                DEFINITION,
                &policy,
                now,
            ))
            .unwrap();
            if i % 2 == 0 {
                ready(Approvals::new(&store).spend_token(
                    &token.id(),
                    Binding::new(p, &tool, a),
                    DEFINITION,
                    now,
                ))
                .unwrap();
            }
        });
        report(
            &format!("round {round}: 1,000,000 tokens"),
            &store,
            rss_kib(),
        );
        // Approvals 10 ms apart: 240 s of retention holds about 48,000 entries.
        million(&mut now, Duration::milliseconds(10), &mut peak, |i, now| {
            let (p, a) = (&principals[i % PRINCIPALS], &args[i % 7]);
            let pending = PendingApproval::new(
                p.clone(),
                tool.clone(),
                DEFINITION,
                a.clone(),
                json!(i),
                now,
                &policy,
            );
            let id = ready(Approvals::new(&store).store_approval(&pending, now)).unwrap();
            if i % 2 == 0 {
                ready(Approvals::new(&store).take_approval(id, Binding::new(p, &tool, a), now))
                    .unwrap();
            }
        });
        report(
            &format!("round {round}: 1,000,000 approvals"),
            &store,
            rss_kib(),
        );
        println!(
            "{:<34} VmRSS {:>7} KiB",
            format!("round {round}: peak (sampled)"),
            peak.max(rss_kib())
        );
        // Past every retention, the next store call (here a forged token's spend) purges.
        now += Duration::seconds(601);
        let forged = parse_token("00000000-0000-4000-8000-000000000000").unwrap();
        let refused = ready(Approvals::new(&store).spend_token(
            &forged,
            Binding::new(&principals[0], &tool, &args[0]),
            DEFINITION,
            now,
        ));
        assert!(refused.is_err());
        report(
            &format!("round {round}: expired, next call"),
            &store,
            rss_kib(),
        );
        assert!(store.is_empty());
    }
    let purged = ready(store.purge_expired(now)).unwrap();
    report(
        &format!("purge_expired ({purged} removed)"),
        &store,
        rss_kib(),
    );
    assert!(store.is_empty());
}
