//! `load`: many clients at once making approved writes over streamable HTTP, checked on disk.
//!
//! For each protocol era it makes a fresh SQLite file, spawns the already built `store-server`
//! with `--http 127.0.0.1:PORT` (a free loopback port) and `MCP_WRITES_ENABLED=true`, connects C
//! rmcp streamable-HTTP clients (in the legacy era each its own session), each playing its own
//! user ([`ScriptedClient`]), and lets them all run at once: every client makes N `adjust_stock`
//! calls, each with its full approval round trip (`elicitation/create` in the legacy era, an
//! input-required result and a retry carrying the answer from 2026-07-28 on), and R reads in
//! between. Every K-th question a client is asked is declined (its second such answer is a
//! cancel instead). Then it kills the server (SIGKILL: what was reported as applied must be on
//! disk without a clean shutdown) and checks the file through a read-only connection of its own
//! ([`FileView`]). Any mismatch is printed and the exit status is 1.
//!
//! ```sh
//! cargo build --release -p store-server -p workspace-tests
//! target/release/load --clients 64 --writes 100
//! ```
//!
//! Options: `--clients C` (default 8), `--writes N` per client (default 25), `--reads R` per
//! client (default N), `--era legacy|2026-07-28|both` (default both), `--decline-every K`
//! (default 5; 0 approves every question), `--shared-every M` (default 4; 0 never writes a shared
//! product), `--server PATH` (default: `store-server` next to this executable), `--dir DIR`
//! (where the temporary database is made; default the system's temporary directory),
//! `--max-sessions N` (passed on to the server; its default is 256, and each legacy-era client
//! holds one session).
//!
//! # What the clients write
//!
//! The file is created and seeded by the server binary itself and then
//! gets two products per client (`LOAD-<client>-0` and `-1`, stock 20) before the server starts.
//! Only that client writes them, so none of its writes to them can go stale, and it knows their
//! stock at every moment: every read checks it. Their deltas vary per write (1 to 9, both
//! signs; a removal that would take the stock below zero is made an addition). Every M-th
//! write instead adds 1 to 5 to one of the seed's three products, which every client writes:
//! the server's compare-and-apply makes many of those approvals stale (refused, nothing saved),
//! the more so the more clients. Once per client (its middle write) it asks to remove one more
//! than an own product holds: the store's rule refuses that at the preview, before anyone is
//! asked.
//!
//! In the server's local set-up (loopback, no auth) every client is the same principal
//! (`local`), which holds at most 64 open approvals (questions asked and not yet answered, round
//! trips not yet finished). Each client has at most one open at a time, so up to 64 clients
//! never reach the cap; above that a write may be refused for it before anyone is asked,
//! counted as "refused (approval cap)" and checked like the others. (At 100 clients × 20 writes
//! none was: most of a write's time is spent queueing for the server, not with a question
//! open.)
//!
//! # What is checked
//!
//! While running, per write: the outcome read from the result (applied, declined, cancelled,
//! stale, refused for negative stock) matches the answer the user gave, the user was asked
//! exactly once (never for the negative one), an applied result reports the request's sku,
//! delta and reason, and the question the user approved showed exactly the previous and new
//! stock that the result reports. Per read: the client's own products have the stock its
//! applied writes made, and their movement logs list exactly its applied writes.
//!
//! On disk, after the server is gone: the `stock_movements` rows added equal the applied
//! writes, each applied write has exactly one row (the schema has nothing that names an
//! approval, so a row is tied to its write by the reason, unique per write: `load client C
//! write W`) with its sku and delta; no declined, cancelled, stale or refused write left a row;
//! replaying the rows in id order from the seed, each applied write landed on the stock it
//! reported as previous (and so its question showed); every product's stock equals its seed
//! stock plus the sum of its applied deltas; approvals given equal applied plus stale writes;
//! no product was added or removed and the other tables are unchanged.
//!
//! # What is printed
//!
//! Per era: the writes by outcome, the throughput (applied writes per second, and all calls,
//! writes and reads, per second, over the time from the first call to the last result, the
//! clients being connected beforehand) and the write latency (p50 and p99, of every write and
//! of the applied ones: a call's whole time, the round trip to the user included, who answers
//! at once). In the 2026-07-28 era a write that asks is two HTTP requests.

#![allow(
    clippy::print_stdout,
    reason = "a command-line bench prints its figures"
)]

use std::{
    collections::BTreeMap,
    ffi::OsString,
    fs::File,
    path::{Path, PathBuf},
    process::{ExitCode, Stdio},
    time::{Duration, Instant},
};

use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::STALE_MESSAGE;
use mcp_write_guard_rmcp::test_util::{ERAS, Reply, ScriptedClient, era_named};
use rmcp::{model::CallToolResult, transport::StreamableHttpClientTransport};
use serde_json::{Value, json};
use tokio::task::JoinSet;
use workspace_tests::{
    Client, Failure, FileView, Snapshot, call,
    cli::{default_server, flag_values, log_tail, options_or_exit, parse_count},
    connect_over, enveloped_data, is_error, message, text,
};

const USAGE: &str = "usage: load [--clients C] [--writes N] [--reads R] \
                     [--era legacy|2026-07-28|both] [--decline-every K] [--shared-every M] \
                     [--server PATH] [--dir DIR] [--max-sessions N]";

/// The seed's products, which every client writes now and then.
const SHARED_SKUS: [&str; 3] = ["TLS-001", "TLS-002", "TLS-003"];

/// Products added per client, written by that client only.
const OWN_PRODUCTS: u32 = 2;

/// The stock each added product starts with.
const OWN_STOCK: i64 = 20;

/// How long the server may take to start serving.
const START_WITHIN: Duration = Duration::from_secs(30);

/// What to run.
#[derive(Debug, Clone)]
struct Options {
    clients: u32,
    writes: u32,
    reads: u32,
    eras: Vec<Era>,
    decline_every: u32,
    shared_every: u32,
    server: PathBuf,
    dir: PathBuf,
    max_sessions: Option<u32>,
}

fn parse_eras(value: &str) -> Result<Vec<Era>, String> {
    match (value, era_named(value)) {
        ("both", _) => Ok(ERAS.to_vec()),
        (_, Some(era)) => Ok(vec![era]),
        (other, None) => Err(format!(
            "unknown era {other:?} (legacy, 2026-07-28 or both)"
        )),
    }
}

fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Options, String> {
    let mut clients = 8;
    let mut writes = 25;
    let mut reads = None;
    let mut eras = ERAS.to_vec();
    let mut decline_every = 5;
    let mut shared_every = 4;
    let mut server = None;
    let mut dir = std::env::temp_dir();
    let mut max_sessions = None;
    for pair in flag_values(args, USAGE) {
        let (flag, value) = pair?;
        let text = value.to_string_lossy();
        match flag.as_str() {
            "--clients" => clients = parse_count(&flag, &text, 1)?,
            "--writes" => writes = parse_count(&flag, &text, 1)?,
            "--reads" => reads = Some(parse_count(&flag, &text, 0)?),
            "--era" => eras = parse_eras(&text)?,
            "--decline-every" => decline_every = parse_count(&flag, &text, 0)?,
            "--shared-every" => shared_every = parse_count(&flag, &text, 0)?,
            "--server" => server = Some(PathBuf::from(value)),
            "--dir" => dir = PathBuf::from(value),
            "--max-sessions" => max_sessions = Some(parse_count(&flag, &text, 1)?),
            other => return Err(format!("unknown option {other:?}\n{USAGE}")),
        }
    }
    let server = match server {
        Some(path) => path,
        None => default_server()?,
    };
    Ok(Options {
        clients,
        writes,
        reads: reads.unwrap_or(writes),
        eras,
        decline_every,
        shared_every,
        server,
        dir,
        max_sessions,
    })
}

/// The answer a user gives to the `q`-th question it is asked (from 1): every `k`-th is not an
/// approval, and the second of those is a cancel, the others declines.
fn answer_for(q: u32, k: u32) -> Given {
    if k == 0 || !q.is_multiple_of(k) {
        Given::Approve
    } else if q / k == 2 {
        Given::Cancel
    } else {
        Given::Decline
    }
}

/// The answer given to a write's question, if it was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Given {
    Approve,
    Decline,
    Cancel,
    NotAsked,
}

impl Given {
    fn answer(self) -> Option<Reply> {
        match self {
            Given::Approve => Some(Reply::Approve),
            Given::Decline => Some(Reply::Decline),
            Given::Cancel => Some(Reply::Cancel),
            Given::NotAsked => None,
        }
    }
}

/// What a write's result said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Saved: the stock before and after, as the result reports them.
    Applied {
        previous: i64,
        new: i64,
    },
    Declined,
    Cancelled,
    /// Approved, but the product changed between the question and the apply.
    Stale,
    /// The store's rule: the stock would go negative.
    NegativeStock,
    /// Too many approvals open for the principal.
    ApprovalCap,
    /// Anything else (a problem is recorded with it).
    Unexpected,
}

/// One `adjust_stock` call.
#[derive(Debug, Clone)]
struct WriteRecord {
    sku: String,
    delta: i64,
    reason: String,
    given: Given,
    outcome: Outcome,
    latency: Duration,
}

/// What one client did.
#[derive(Debug, Default)]
struct ClientRun {
    writes: Vec<WriteRecord>,
    reads: u32,
    /// Every mismatch seen while running.
    problems: Vec<String>,
}

/// One client's own products and their stock as its applied writes made it.
struct Own {
    skus: Vec<String>,
    stock: Vec<i64>,
    /// The reasons of the applied writes to each, in order.
    applied: Vec<Vec<String>>,
}

impl Own {
    /// Client `client`'s own products, each at its starting stock, nothing applied yet.
    fn new(client: u32) -> Self {
        Self {
            skus: (0..OWN_PRODUCTS).map(|k| own_sku(client, k)).collect(),
            stock: vec![OWN_STOCK; OWN_PRODUCTS as usize],
            applied: vec![Vec::new(); OWN_PRODUCTS as usize],
        }
    }
}

fn own_sku(client: u32, k: u32) -> String {
    format!("LOAD-{client}-{k}")
}

/// One write as planned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Planned {
    sku: String,
    delta: i64,
    /// Which of the client's own products (`None`: a shared one).
    own: Option<usize>,
    /// Asks to remove more than the stock: the store must refuse it without asking.
    negative: bool,
}

/// Write `w` of `client`, given the stock of its own products now.
fn plan_write(options: &Options, client: u32, w: u32, own: &Own) -> Planned {
    let k = usize::try_from(w % OWN_PRODUCTS).unwrap_or(0);
    let stock = own.stock.get(k).copied().unwrap_or(0);
    let sku = own_sku(client, w % OWN_PRODUCTS);
    if w == options.writes / 2 {
        return Planned {
            sku,
            delta: -(stock + 1),
            own: Some(k),
            negative: true,
        };
    }
    let turn = client.wrapping_add(w);
    if options.shared_every > 0 && (w + 1).is_multiple_of(options.shared_every) {
        let shared = SHARED_SKUS
            .get(usize::try_from(turn % 3).unwrap_or(0))
            .copied()
            .unwrap_or("TLS-001");
        return Planned {
            sku: shared.to_owned(),
            delta: i64::from(1 + turn % 5),
            own: None,
            negative: false,
        };
    }
    let size = i64::from(1 + client.wrapping_mul(5).wrapping_add(w.wrapping_mul(7)) % 9);
    let delta = if turn % 2 == 1 && stock >= size {
        -size
    } else {
        size
    };
    Planned {
        sku,
        delta,
        own: Some(k),
        negative: false,
    }
}

/// The content of a read's result, with an envelope taken off if there is one.
fn read_content(result: &CallToolResult) -> Result<&Value, Failure> {
    if is_error(result) {
        return Err(format!("read failed: {}", message(result)).into());
    }
    let content = result
        .structured_content
        .as_ref()
        .ok_or("a read returned no structured content")?;
    Ok(mcp_write_guard_envelope::unwrap(content).unwrap_or(content))
}

/// Read number `r` of a client: one of its own products, that product's movements, or every
/// product; what it reads of its own products must be what its applied writes made.
async fn read(
    client: &Client,
    r: u32,
    own: &Own,
    problems: &mut Vec<String>,
) -> Result<(), Failure> {
    let k = usize::try_from(r / 3 % OWN_PRODUCTS).unwrap_or(0);
    let (Some(sku), Some(stock), Some(applied)) =
        (own.skus.get(k), own.stock.get(k), own.applied.get(k))
    else {
        return Err("no own product".into());
    };
    match r % 3 {
        0 => {
            let result = call(client, "get_product", json!({"sku": sku})).await?;
            let found = read_content(&result)?.get("stock").and_then(Value::as_i64);
            if found != Some(*stock) {
                problems.push(format!(
                    "get_product {sku}: stock {found:?}, expected {stock}"
                ));
            }
        }
        1 => {
            let result = call(client, "list_stock_movements", json!({"sku": sku})).await?;
            let reasons: Vec<&str> = read_content(&result)?
                .get("movements")
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .filter_map(|m| m.get("reason").and_then(Value::as_str))
                        .collect()
                })
                .unwrap_or_default();
            if reasons != *applied {
                problems.push(format!(
                    "list_stock_movements {sku}: {reasons:?}, expected {applied:?}"
                ));
            }
        }
        _ => {
            let result = call(client, "list_products", json!({})).await?;
            let found = read_content(&result)?
                .get("products")
                .and_then(Value::as_array)
                .and_then(|list| {
                    list.iter()
                        .find(|p| p.get("sku").and_then(Value::as_str) == Some(sku.as_str()))
                })
                .and_then(|p| p.get("stock"))
                .and_then(Value::as_i64);
            if found != Some(*stock) {
                problems.push(format!(
                    "list_products {sku}: stock {found:?}, expected {stock}"
                ));
            }
        }
    }
    Ok(())
}

/// Sorts one write's result, checking it against the request and the answer given.
fn outcome_of(
    result: &CallToolResult,
    sku: &str,
    delta: i64,
    reason: &str,
    problems: &mut Vec<String>,
) -> Outcome {
    if !is_error(result) {
        let data = match enveloped_data(result) {
            Ok(data) => data,
            Err(e) => {
                problems.push(format!(
                    "{reason}: applied without a well-formed envelope: {e}"
                ));
                return Outcome::Unexpected;
            }
        };
        let previous = data.get("previousStock").and_then(Value::as_i64);
        let new = data.get("newStock").and_then(Value::as_i64);
        let same = data.get("sku").and_then(Value::as_str) == Some(sku)
            && data.get("delta").and_then(Value::as_i64) == Some(delta)
            && data.get("reason").and_then(Value::as_str) == Some(reason);
        return match (previous, new) {
            (Some(previous), Some(new)) if same && new == previous + delta => {
                Outcome::Applied { previous, new }
            }
            _ => {
                problems.push(format!(
                    "{reason}: applied as {data}, asked {sku} {delta:+}"
                ));
                Outcome::Unexpected
            }
        };
    }
    let said = message(result);
    if text(result) == STALE_MESSAGE {
        Outcome::Stale
    } else if said == "The user did not approve this change, so nothing was saved." {
        Outcome::Declined
    } else if said == "The user cancelled the approval, so nothing was saved." {
        Outcome::Cancelled
    } else if said.contains("would make it negative; nothing was changed") {
        Outcome::NegativeStock
    } else if said.starts_with("Too many approvals are waiting for this user") {
        Outcome::ApprovalCap
    } else {
        problems.push(format!("{reason}: unexpected result: {said}"));
        Outcome::Unexpected
    }
}

/// Whether `outcome` is what `given` (and the plan) allow.
fn consistent(outcome: Outcome, given: Given, negative: bool, shared: bool) -> bool {
    match outcome {
        Outcome::Applied { .. } => given == Given::Approve && !negative,
        Outcome::Declined => given == Given::Decline,
        Outcome::Cancelled => given == Given::Cancel,
        // Only a product another client writes can change under an approval.
        Outcome::Stale => given == Given::Approve && shared,
        Outcome::NegativeStock => negative && given == Given::NotAsked,
        Outcome::ApprovalCap => given == Given::NotAsked && !negative,
        Outcome::Unexpected => false,
    }
}

/// One client's whole run: N writes with R reads spread between them.
async fn drive(
    client: &Client,
    user: &ScriptedClient,
    options: &Options,
    index: u32,
) -> Result<ClientRun, Failure> {
    let mut run = ClientRun::default();
    let mut own = Own::new(index);
    let mut reads_done: u64 = 0;
    for w in 0..options.writes {
        let Planned {
            sku,
            delta,
            own: mine,
            negative,
        } = plan_write(options, index, w, &own);
        let reason = format!("load client {index} write {w}");
        let asked_before = user.asked().len();
        // The answer for the next question this user is asked. One scripted for a write that
        // was then refused before asking is still unused, and is the right one for the next.
        let next = answer_for(
            u32::try_from(asked_before)
                .unwrap_or(u32::MAX)
                .saturating_add(1),
            options.decline_every,
        );
        if !negative && user.unused_replies() == 0 {
            user.script(next.answer());
        }
        let sent = Instant::now();
        let result = call(
            client,
            "adjust_stock",
            json!({"sku": sku, "delta": delta, "reason": reason}),
        )
        .await?;
        let latency = sent.elapsed();
        let asked = user.asked();
        let given = match asked.len() - asked_before {
            0 => Given::NotAsked,
            1 => next,
            n => {
                run.problems
                    .push(format!("{reason}: the user was asked {n} times"));
                next
            }
        };
        let outcome = outcome_of(&result, &sku, delta, &reason, &mut run.problems);
        if !consistent(outcome, given, negative, mine.is_none()) {
            run.problems.push(format!(
                "{reason} ({sku} {delta:+}): outcome {outcome:?} after answer {given:?}{}",
                if negative {
                    " (planned to go negative)"
                } else {
                    ""
                }
            ));
        }
        if let Outcome::Applied { previous, new } = outcome {
            let shown = format!(
                "Adjust \"{sku}\" by {delta:+}: stock {previous} -> {new}. Reason given: \"{reason}\""
            );
            let question = asked.last().map(String::as_str);
            if question != Some(shown.as_str()) {
                run.problems.push(format!(
                    "{reason}: applied {previous} -> {new}, but the user approved {question:?}"
                ));
            }
            if let Some(k) = mine
                && let (Some(stock), Some(log)) = (own.stock.get_mut(k), own.applied.get_mut(k))
            {
                if previous != *stock {
                    run.problems.push(format!(
                        "{reason}: applied on stock {previous} of {sku}, which was {stock}"
                    ));
                }
                *stock = new;
                log.push(reason.clone());
            }
        }
        run.writes.push(WriteRecord {
            sku,
            delta,
            reason,
            given,
            outcome,
            latency,
        });
        // Reads after write w: R spread evenly over the N writes.
        let reads_due = u64::from(options.reads) * u64::from(w + 1) / u64::from(options.writes);
        while reads_done < reads_due {
            read(client, run.reads, &own, &mut run.problems).await?;
            run.reads += 1;
            reads_done += 1;
        }
    }
    Ok(run)
}

/// The server process; killed when dropped, if not before.
struct Server {
    child: tokio::process::Child,
    url: String,
}

/// A loopback port nobody listens on right now.
fn free_port() -> Result<u16, Failure> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Spawns the server on `db` and waits until it logs that it serves; another port if the one
/// picked was taken meanwhile.
async fn start_server(options: &Options, db: &Path, log: &Path) -> Result<Server, Failure> {
    let mut last = String::new();
    for _ in 0..3 {
        let port = free_port()?;
        let mut command = tokio::process::Command::new(&options.server);
        command
            .arg("--db")
            .arg(db)
            .arg("--http")
            .arg(format!("127.0.0.1:{port}"));
        if let Some(n) = options.max_sessions {
            command.arg("--max-sessions").arg(n.to_string());
        }
        command
            .env("MCP_WRITES_ENABLED", "true")
            // The server's own default, pinned so that a RUST_LOG in the caller's shell does
            // not change what is measured.
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(log)?)
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", options.server.display()))?;
        let url = format!(
            "http://127.0.0.1:{port}{}",
            mcp_write_guard_serve::HTTP_PATH
        );
        let serving = format!("serving streamable HTTP at {url}");
        let deadline = Instant::now() + START_WITHIN;
        loop {
            if std::fs::read_to_string(log)
                .unwrap_or_default()
                .contains(&serving)
            {
                return Ok(Server { child, url });
            }
            if let Some(status) = child.try_wait()? {
                last = format!(
                    "the server exited ({status}) before serving:\n{}",
                    log_tail(log)
                );
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill().await;
                return Err(format!(
                    "the server did not serve within {START_WITHIN:?}:\n{}",
                    log_tail(log)
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Err(last.into())
}

/// A fresh store file, created and seeded by the server itself (started over stdio with
/// nothing to read, it opens the file and ends), with each client's products; returns every
/// product's stock.
fn make_store(server: &Path, path: &Path, clients: u32) -> Result<BTreeMap<String, i64>, Failure> {
    let seeded = std::process::Command::new(server)
        .arg("--db")
        .arg(path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()?;
    if !seeded.success() || !path.is_file() {
        return Err(format!(
            "{} did not create {}: {seeded}",
            server.display(),
            path.display()
        )
        .into());
    }
    let mut conn = rusqlite::Connection::open(path)?;
    let tx = conn.transaction()?;
    for client in 0..clients {
        for k in 0..OWN_PRODUCTS {
            tx.execute(
                "INSERT INTO products (sku, name, price_cents, stock) VALUES (?1, ?2, 100, ?3)",
                rusqlite::params![own_sku(client, k), "Load test item", OWN_STOCK],
            )?;
        }
    }
    tx.commit()?;
    drop(conn);
    let file = FileView::new(path);
    let mut seed = BTreeMap::new();
    for sku in SHARED_SKUS {
        seed.insert(sku.to_owned(), file.stock(sku)?);
    }
    for client in 0..clients {
        for k in 0..OWN_PRODUCTS {
            let sku = own_sku(client, k);
            let stock = file.stock(&sku)?;
            seed.insert(sku, stock);
        }
    }
    Ok(seed)
}

/// Every table but the two the writes change, as text.
fn other_tables(file: &FileView) -> Result<Snapshot, Failure> {
    let mut tables = file.snapshot()?;
    tables.remove("products");
    tables.remove("stock_movements");
    Ok(tables)
}

/// The checks on disk; every mismatch found.
fn check_disk(
    file: &FileView,
    seed: &BTreeMap<String, i64>,
    writes: &[WriteRecord],
    others_before: &Snapshot,
) -> Result<Vec<String>, Failure> {
    let mut problems = Vec::new();
    let applied = writes
        .iter()
        .filter(|w| matches!(w.outcome, Outcome::Applied { .. }))
        .count();
    let movements = file.movements()?;
    if movements.len() != applied {
        problems.push(format!(
            "{} stock movements on disk, {applied} applied writes",
            movements.len()
        ));
    }
    let by_reason: BTreeMap<&str, &WriteRecord> =
        writes.iter().map(|w| (w.reason.as_str(), w)).collect();
    let mut rows_per_write: BTreeMap<&str, usize> = BTreeMap::new();
    let mut running = seed.clone();
    for movement in &movements {
        let Some(write) = by_reason.get(movement.reason.as_str()) else {
            problems.push(format!("a movement no write made: {movement:?}"));
            continue;
        };
        *rows_per_write.entry(write.reason.as_str()).or_default() += 1;
        if movement.sku != write.sku || movement.delta != write.delta {
            problems.push(format!("{movement:?} for {write:?}"));
        }
        let Some(stock) = running.get_mut(&movement.sku) else {
            problems.push(format!("a movement of an unknown product: {movement:?}"));
            continue;
        };
        match write.outcome {
            Outcome::Applied { previous, new } => {
                if *stock != previous || *stock + movement.delta != new {
                    problems.push(format!(
                        "{}: landed on stock {stock}, the result said {previous} -> {new}",
                        write.reason
                    ));
                }
            }
            other => problems.push(format!("{}: {other:?} but left {movement:?}", write.reason)),
        }
        *stock += movement.delta;
    }
    for (reason, rows) in &rows_per_write {
        if *rows > 1 {
            problems.push(format!("{reason}: {rows} movements for one approval"));
        }
    }
    for write in writes {
        if matches!(write.outcome, Outcome::Applied { .. })
            && !rows_per_write.contains_key(write.reason.as_str())
        {
            problems.push(format!(
                "{}: applied, but no movement on disk",
                write.reason
            ));
        }
    }
    let products = file.count("products")?;
    if usize::try_from(products).ok() != Some(seed.len()) {
        problems.push(format!(
            "{products} products on disk, {} seeded",
            seed.len()
        ));
    }
    for (sku, start) in seed {
        let sum: i64 = writes
            .iter()
            .filter(|w| w.sku == *sku && matches!(w.outcome, Outcome::Applied { .. }))
            .map(|w| w.delta)
            .sum();
        let found = file.stock(sku)?;
        if found != start + sum {
            problems.push(format!(
                "{sku}: stock {found} on disk, seed {start} + applied {sum:+} = {}",
                start + sum
            ));
        }
        if running.get(sku) != Some(&found) {
            problems.push(format!(
                "{sku}: stock {found} on disk, its movements add up to {:?}",
                running.get(sku)
            ));
        }
    }
    let count = |given: Given| writes.iter().filter(|w| w.given == given).count();
    let had = |outcome: Outcome| writes.iter().filter(|w| w.outcome == outcome).count();
    if count(Given::Approve) != applied + had(Outcome::Stale) {
        problems.push(format!(
            "{} approvals given, {applied} applied and {} stale",
            count(Given::Approve),
            had(Outcome::Stale)
        ));
    }
    if count(Given::Decline) != had(Outcome::Declined)
        || count(Given::Cancel) != had(Outcome::Cancelled)
    {
        problems.push(format!(
            "{} declines and {} cancels given, {} declined and {} cancelled",
            count(Given::Decline),
            count(Given::Cancel),
            had(Outcome::Declined),
            had(Outcome::Cancelled)
        ));
    }
    if other_tables(file)? != *others_before {
        problems.push("customers, orders, order_lines or reviews changed".to_owned());
    }
    Ok(problems)
}

/// The figures and findings of one era.
struct EraReport {
    writes: Vec<WriteRecord>,
    reads: u32,
    elapsed: Duration,
    problems: Vec<String>,
}

/// One era: a new file, a new server, C clients at once, then the checks on disk.
async fn run_era(options: &Options, era: Era) -> Result<EraReport, Failure> {
    let dir = tempfile::tempdir_in(&options.dir)?;
    let db = dir.path().join("store.db");
    let log = dir.path().join("server.log");
    let seed = make_store(&options.server, &db, options.clients)?;
    let file = FileView::new(&db);
    if !file.movements()?.is_empty() {
        return Err("the fresh file already has stock movements".into());
    }
    let others_before = other_tables(&file)?;

    let mut server = start_server(options, &db, &log).await?;
    let outcome = drive_all(options, era, &server.url).await;
    // Killed, not asked to stop: what was reported applied must be on disk regardless.
    server.child.kill().await?;
    let (writes, reads, elapsed, mut problems) =
        outcome.map_err(|e| format!("{e}\nserver log (last lines):\n{}", log_tail(&log)))?;
    problems.extend(check_disk(&file, &seed, &writes, &others_before)?);
    Ok(EraReport {
        writes,
        reads,
        elapsed,
        problems,
    })
}

type Driven = (Vec<WriteRecord>, u32, Duration, Vec<String>);

/// Connects every client, runs them all at once, closes them.
async fn drive_all(options: &Options, era: Era, url: &str) -> Result<Driven, Failure> {
    let mut clients = Vec::new();
    for index in 0..options.clients {
        let user = ScriptedClient::answering([]);
        let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
        let client = connect_over(transport, &user, era)
            .await
            .map_err(|e| format!("client {index}: {e}"))?;
        clients.push((index, client, user));
    }
    let options = std::sync::Arc::new(options.clone());
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for (index, client, user) in clients {
        let options = std::sync::Arc::clone(&options);
        tasks.spawn(async move {
            let run = drive(&client, &user, &options, index).await;
            (index, client, run)
        });
    }
    let mut finished = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        finished.push(joined?);
    }
    let elapsed = start.elapsed();
    finished.sort_by_key(|(index, _, _)| *index);
    let (mut writes, mut reads, mut problems) = (Vec::new(), 0, Vec::new());
    for (index, client, run) in finished {
        let run = run.map_err(|e| format!("client {index}: {e}"))?;
        writes.extend(run.writes);
        reads += run.reads;
        problems.extend(run.problems);
        client
            .cancel()
            .await
            .map_err(|e| format!("client {index}: closing the connection: {e}"))?;
    }
    Ok((writes, reads, elapsed, problems))
}

/// The nearest-rank `p`-th percentile, in milliseconds.
fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.clamp(1, sorted.len()) - 1)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
}

fn latencies(writes: &[WriteRecord], applied_only: bool) -> Vec<Duration> {
    let mut list: Vec<Duration> = writes
        .iter()
        .filter(|w| !applied_only || matches!(w.outcome, Outcome::Applied { .. }))
        .map(|w| w.latency)
        .collect();
    list.sort();
    list
}

fn print_report(name: &str, report: &EraReport) {
    let writes = &report.writes;
    let had = |wanted: fn(&Outcome) -> bool| writes.iter().filter(|w| wanted(&w.outcome)).count();
    let applied = had(|o| matches!(o, Outcome::Applied { .. }));
    let seconds = report.elapsed.as_secs_f64();
    let calls = writes.len() + report.reads as usize;
    println!(
        "era {name}: {} writes and {} reads in {seconds:.3} s",
        writes.len(),
        report.reads
    );
    println!(
        "  writes: applied {applied}, declined {}, cancelled {}, stale {}, refused (negative \
         stock) {}, refused (approval cap) {}, unexpected {}",
        had(|o| *o == Outcome::Declined),
        had(|o| *o == Outcome::Cancelled),
        had(|o| *o == Outcome::Stale),
        had(|o| *o == Outcome::NegativeStock),
        had(|o| *o == Outcome::ApprovalCap),
        had(|o| *o == Outcome::Unexpected),
    );
    println!(
        "  throughput: {:.1} approved writes applied/s, {:.1} calls/s (writes and reads)",
        applied as f64 / seconds,
        calls as f64 / seconds
    );
    let all = latencies(writes, false);
    let landed = latencies(writes, true);
    println!(
        "  write latency: p50 {:.2} ms, p99 {:.2} ms (all {}); applied: p50 {:.2} ms, p99 {:.2} \
         ms ({})",
        percentile_ms(&all, 50.0),
        percentile_ms(&all, 99.0),
        all.len(),
        percentile_ms(&landed, 50.0),
        percentile_ms(&landed, 99.0),
        landed.len()
    );
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = match options_or_exit(parse, |options: &Options| &options.server) {
        Ok(options) => options,
        Err(code) => return code,
    };
    println!(
        "load: {} clients x {} writes and {} reads each; {}; {}; server {}",
        options.clients,
        options.writes,
        options.reads,
        every(
            options.decline_every,
            "question declined (the second of them cancelled)",
            "question approved"
        ),
        every(
            options.shared_every,
            "write to a shared product",
            "write to the client's own products"
        ),
        options.server.display()
    );
    let mut failed = false;
    for &era in &options.eras {
        let name = era.as_str();
        match run_era(&options, era).await {
            Ok(report) => {
                print_report(name, &report);
                if report.problems.is_empty() {
                    println!("  checks on disk after the server was killed: all passed");
                } else {
                    failed = true;
                    for problem in &report.problems {
                        println!("  MISMATCH: {problem}");
                    }
                }
            }
            Err(e) => {
                eprintln!("era {name}: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// "every 5th question declined"; for 0, "every question approved" (`otherwise`).
fn every(n: u32, what: &str, otherwise: &str) -> String {
    let nth = match (n, n % 10, n % 100) {
        (0, _, _) => return format!("every {otherwise}"),
        (1, _, _) => return format!("every {what}"),
        (_, 1, h) if h != 11 => format!("{n}st"),
        (_, 2, h) if h != 12 => format!("{n}nd"),
        (_, 3, h) if h != 13 => format!("{n}rd"),
        _ => format!("{n}th"),
    };
    format!("every {nth} {what}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use workspace_tests::cli::os_args;

    #[test]
    fn defaults_to_eight_clients_of_twenty_five_writes_in_both_eras() {
        let options = parse(os_args(&[])).unwrap();
        assert_eq!(
            (options.clients, options.writes, options.reads),
            (8, 25, 25)
        );
        assert_eq!((options.decline_every, options.shared_every), (5, 4));
        assert_eq!(options.eras, ERAS);
        assert_eq!(options.max_sessions, None);
        assert!(options.server.ends_with("store-server"));
    }

    #[test]
    fn takes_every_option() {
        let options = parse(os_args(&[
            "--clients",
            "64",
            "--writes",
            "100",
            "--reads",
            "0",
            "--era",
            "2026-07-28",
            "--decline-every",
            "0",
            "--shared-every",
            "3",
            "--server",
            "/x/store-server",
            "--dir",
            "/dev/shm",
            "--max-sessions",
            "300",
        ]))
        .unwrap();
        assert_eq!(
            (options.clients, options.writes, options.reads),
            (64, 100, 0)
        );
        assert_eq!((options.decline_every, options.shared_every), (0, 3));
        assert_eq!(options.eras, [Era::InputRounds]);
        assert_eq!(options.server, PathBuf::from("/x/store-server"));
        assert_eq!(options.dir, PathBuf::from("/dev/shm"));
        assert_eq!(options.max_sessions, Some(300));
        assert_eq!(parse(os_args(&["--era", "both"])).unwrap().eras, ERAS);
        assert_eq!(
            parse(os_args(&["--era", "legacy"])).unwrap().eras,
            [Era::Legacy]
        );
    }

    #[test]
    fn refuses_bad_values() {
        for bad in [
            &["--clients", "0"][..],
            &["--writes", "0"],
            &["--writes", "many"],
            &["--era", "2025-11-25"],
            &["--max-sessions", "0"],
            &["--reads"],
            &["--fast", "1"],
        ] {
            assert!(parse(os_args(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_fifth_question_is_refused_and_the_second_of_those_cancelled() {
        let answers: Vec<Given> = (1..=15).map(|q| answer_for(q, 5)).collect();
        let refused: Vec<(usize, Given)> = answers
            .iter()
            .enumerate()
            .filter(|(_, g)| **g != Given::Approve)
            .map(|(i, g)| (i + 1, *g))
            .collect();
        assert_eq!(
            refused,
            [
                (5, Given::Decline),
                (10, Given::Cancel),
                (15, Given::Decline)
            ]
        );
        assert!((1..100).all(|q| answer_for(q, 0) == Given::Approve));
    }

    #[test]
    fn own_products_never_go_negative_by_plan() {
        let options = parse(os_args(&["--writes", "200"])).unwrap();
        for client in 0..20 {
            let mut own = Own::new(client);
            let mut signs = (false, false);
            for w in 0..options.writes {
                let Planned {
                    sku,
                    delta,
                    own: mine,
                    negative,
                } = plan_write(&options, client, w, &own);
                assert_ne!(delta, 0);
                let Some(k) = mine else {
                    assert!(SHARED_SKUS.contains(&sku.as_str()) && delta > 0);
                    assert!(!negative);
                    continue;
                };
                assert_eq!(sku, own_sku(client, u32::try_from(k).unwrap()));
                let stock = own.stock.get_mut(k).unwrap();
                assert_eq!(*stock + delta < 0, negative, "{sku} {stock} {delta}");
                if !negative {
                    *stock += delta;
                    signs = (signs.0 || delta < 0, signs.1 || delta > 0);
                }
            }
            assert_eq!(signs, (true, true), "client {client}: both signs");
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let list: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&list, 50.0), 50.0);
        assert_eq!(percentile_ms(&list, 99.0), 99.0);
        assert_eq!(percentile_ms(&list[..1], 99.0), 1.0);
        assert!(percentile_ms(&[], 50.0).is_nan());
    }

    #[test]
    fn ordinals_read_as_words() {
        assert_eq!(every(5, "x", "y"), "every 5th x");
        assert_eq!(every(22, "x", "y"), "every 22nd x");
        assert_eq!(every(11, "x", "y"), "every 11th x");
        assert_eq!(every(1, "x", "y"), "every x");
        assert_eq!(every(0, "x", "y"), "every y");
    }
}
