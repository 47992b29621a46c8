//! The read of `read_overhead`, run a fixed number of times for an instruction count under
//! valgrind's callgrind (repeatable whatever else the machine is doing).
//!
//! ```sh
//! cargo bench -p mcp-write-guard-rmcp --bench read_instructions --no-run
//! BIN=$(ls -t target/release/deps/read_instructions-* | grep -v '\.d$' | head -1)
//! for case in bare guard trusted canned_bare canned_enveloped; do for n in 1000 2000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.read.$case.$n "$BIN" $case $n
//! done; done
//! ```
//!
//! The instructions of one read are `(Ir(2000) - Ir(1000)) / 1000`: start-up and the
//! connection cancel out. Client and server run in one process on one thread (a current-thread
//! runtime, so no worker parks or steals), over the same in-memory duplex as `read_overhead`;
//! the count is the whole round trip, client side included, like criterion's time.
//!
//! Two more cases measure what the envelope's bytes alone cost, with no guard at all: a server
//! that answers every call with a copy of one fixed result, that of the bare read
//! (`canned_bare`) or that of the guarded read, envelope and text twin included
//! (`canned_enveloped`). Their ratio is the least a wrapped read can cost, whatever the guard
//! does, as long as it sends the envelope.
#![allow(clippy::panic, clippy::print_stdout)]

use rmcp::model::CallToolRequestParams;

#[path = "common/canned.rs"]
mod canned;
#[allow(dead_code, unreachable_pub)]
#[path = "../tests/all/common/fixture.rs"]
mod fixture;
#[path = "common/setup.rs"]
mod setup;

use canned::canned;
use setup::{Client, connect, guarded};

async fn reads(client: &Client, n: u64) {
    for _ in 0..n {
        let result = client
            .call_tool(CallToolRequestParams::new("get_counter"))
            .await;
        if let Err(error) = result {
            panic!("read failed: {error}");
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`; run a short default then.
    let (case, n) = match args.as_slice() {
        [case, n] => (
            case.clone(),
            n.parse::<u64>()
                .unwrap_or_else(|_| panic!("not a count: {n}")),
        ),
        _ => ("guard".to_owned(), 100),
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(error) => panic!("no runtime: {error}"),
    };
    rt.block_on(async {
        match case.as_str() {
            "bare" => reads(&connect(fixture::Fixture::default()).await, n).await,
            "guard" => reads(&connect(guarded(false)).await, n).await,
            "trusted" => reads(&connect(guarded(true)).await, n).await,
            "canned_bare" => {
                let server = canned(fixture::Fixture::default()).await;
                reads(&connect(server).await, n).await;
            }
            "canned_enveloped" => {
                let server = canned(guarded(false)).await;
                reads(&connect(server).await, n).await;
            }
            other => panic!(
                "unknown case {other:?} (bare, guard, trusted, canned_bare or canned_enveloped)"
            ),
        }
    });
    println!("{case}: {n} reads");
}
