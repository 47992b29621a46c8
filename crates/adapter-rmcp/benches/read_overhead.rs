//! What a read costs through the guard: the same `get_counter` call on the bare fixture server
//! and on the fixture wrapped in a `WriteGuard`, each over an in-memory duplex transport.
//!
//! One more case measures an inner server that does not answer `get_tool` (the same tools,
//! served by `list_tools` only, in one page): the guard then reads the inner tool list on
//! every `tools/call`, reads included.
//!
//! Two more cases answer with a copy of a fixed result and no guard at all (see
//! `common/canned.rs`): the bare read's result (`canned_bare`) and the guarded read's, its
//! envelope and text twin included (`canned_enveloped`). Their ratio is what the envelope's
//! bytes alone cost; a wrapped read cannot cost less than that.
//!
//! Criterion reports every case; at the end the bench also prints the ratio of the means from
//! a plain timing loop (`guard / bare`).
// A bench is a harness like a test: a failed setup should stop it loudly.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::{
    hint::black_box,
    time::{Duration, Instant},
};

use criterion::Criterion;
use mcp_write_guard_rmcp::{MemorySink, WriteGuard};
use rmcp::model::CallToolRequestParams;
use std::sync::Arc;

#[path = "common/canned.rs"]
mod canned;
#[allow(dead_code, unreachable_pub)]
#[path = "../tests/all/common/fixture.rs"]
mod fixture;
#[allow(dead_code, unreachable_pub)]
#[path = "../tests/all/common/paged.rs"]
mod paged;
#[path = "common/setup.rs"]
mod setup;

use setup::{Client, connect, guarded};

async fn read(client: &Client) {
    let result = client
        .call_tool(CallToolRequestParams::new("get_counter"))
        .await;
    match result {
        Ok(result) => {
            black_box(result);
        }
        Err(error) => panic!("read failed: {error}"),
    }
}

/// A guard around an inner server without `get_tool` that lists all its tools in one page.
fn guarded_without_get_tool() -> WriteGuard<paged::Paged> {
    WriteGuard::builder(paged::Paged::new(fixture::Fixture::default(), ONE_PAGE))
        .writes_enabled(true)
        .audit(Arc::new(MemorySink::new()))
        .build()
}

/// Every tool in one page.
const ONE_PAGE: usize = 1024;

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(error) => panic!("no runtime: {error}"),
    }
}

fn read_overhead(c: &mut Criterion) {
    let rt = runtime();
    let bare = rt.block_on(connect(fixture::Fixture::default()));
    let guard = rt.block_on(connect(guarded(false)));
    let trusted = rt.block_on(connect(guarded(true)));
    let listed = rt.block_on(connect(guarded_without_get_tool()));
    let canned_bare =
        rt.block_on(async { connect(canned::canned(fixture::Fixture::default()).await).await });
    let canned_enveloped =
        rt.block_on(async { connect(canned::canned(guarded(false)).await).await });
    let mut group = c.benchmark_group("read_overhead");
    group.bench_function("bare", |b| b.to_async(&rt).iter(|| read(&bare)));
    group.bench_function("guard", |b| b.to_async(&rt).iter(|| read(&guard)));
    group.bench_function("guard_trusted_read", |b| {
        b.to_async(&rt).iter(|| read(&trusted))
    });
    group.bench_function("guard_without_get_tool", |b| {
        b.to_async(&rt).iter(|| read(&listed))
    });
    group.bench_function("canned_bare", |b| {
        b.to_async(&rt).iter(|| read(&canned_bare))
    });
    group.bench_function("canned_enveloped", |b| {
        b.to_async(&rt).iter(|| read(&canned_enveloped))
    });
    group.finish();
}

/// Mean time per read over `n` sequential calls.
fn mean(rt: &tokio::runtime::Runtime, client: &Client, n: u32) -> Duration {
    rt.block_on(async {
        for _ in 0..100 {
            read(client).await;
        }
        let start = Instant::now();
        for _ in 0..n {
            read(client).await;
        }
        start.elapsed() / n
    })
}

fn report_ratio() {
    let rt = runtime();
    let clients = [
        rt.block_on(connect(fixture::Fixture::default())),
        rt.block_on(connect(guarded(false))),
        rt.block_on(connect(guarded(true))),
        rt.block_on(connect(guarded_without_get_tool())),
        rt.block_on(async { connect(canned::canned(fixture::Fixture::default()).await).await }),
        rt.block_on(async { connect(canned::canned(guarded(false)).await).await }),
    ];
    let n = 3000;
    // Interleave to spread any drift over all of them.
    let mut totals = [Duration::ZERO; 6];
    for _ in 0..3 {
        for (total, client) in totals.iter_mut().zip(&clients) {
            *total += mean(&rt, client, n);
        }
    }
    let [bare, guard, trusted, listed, canned_bare, canned_enveloped] = totals;
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    eprintln!(
        "read_overhead: bare {:?}/call, guard {:?}/call, guard (trusted read) {:?}/call, \
         guard (inner server without get_tool) {:?}/call, canned bare {:?}/call, \
         canned enveloped {:?}/call; ratio guard/bare = {:.3}, trusted/bare = {:.3}, \
         without-get_tool/bare = {:.3}, canned enveloped/canned bare = {:.3}",
        bare / 3,
        guard / 3,
        trusted / 3,
        listed / 3,
        canned_bare / 3,
        canned_enveloped / 3,
        ratio(guard, bare),
        ratio(trusted, bare),
        ratio(listed, bare),
        ratio(canned_enveloped, canned_bare),
    );
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    read_overhead(&mut criterion);
    criterion.final_summary();
    report_ratio();
}
