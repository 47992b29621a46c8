//! `approved-writes`: approved writes per second through the reference server.
//!
//! It spawns the already built `store-server` over stdio on a fresh SQLite file, with
//! `MCP_WRITES_ENABLED=true`, connects a real rmcp client whose user approves every question at
//! once, and times N sequential `adjust_stock` calls, each with its full elicitation round trip:
//! `elicitation/create` in the legacy era, an input-required result and a retry carrying the
//! answer from 2026-07-28 on. Then it times N `get_product` reads on the same connection as a
//! baseline. Every write must succeed and the stock must rise by exactly the number of writes
//! made (warm-up included); otherwise it exits with status 1.
//!
//! ```sh
//! cargo build --release -p store-server -p workspace-tests
//! cargo run --release -p workspace-tests --bin approved-writes -- --writes 1000 --runs 3
//! ```
//!
//! Options: `--writes N` (default 1000), `--reads M` (default N; 0 skips them, for an
//! instruction count of the writes alone), `--warmup W` (default 50), `--runs R` (default 1, each
//! on a new server and a new file), `--era legacy|2026-07-28` (default both), `--server PATH`
//! (default: `store-server` next to this executable, so `target/release/store-server` for a
//! release build), `--dir DIR` (where the temporary database is made; default the system's
//! temporary directory; `/dev/shm` takes the disk's flushes out of the figure).
//!
//! `--seed DIR` also drives the seed design (`../shared/peers/ts-store` of an outside checkout,
//! not in this repository; copied to `DIR` with its dependencies installed: `npm ci`) with the
//! same client, in the legacy era only (its SDK has no 2026-07-28), right after the reference
//! server in every run, and prints the ratio of the two. Its writes carry `"confirm": true`,
//! which its design needs. `--node PATH` names the Node.js to run it with (default `node`).
//!
//! Every write's time is split where the question reaches the user: "call to question" is the
//! `tools/call` arriving, the checks, the preview and the question on its way (in 2026-07-28,
//! the input-required result and rmcp's retry up to its handler); "answer to result" is the
//! answer on its way, the compare-and-apply, the commit and the enveloped result.

#![allow(
    clippy::print_stdout,
    reason = "a command-line bench prints its figures"
)]

use std::{
    ffi::OsString,
    fs::File,
    path::{Path, PathBuf},
    process::ExitCode,
    time::{Duration, Instant},
};

use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::test_util::{ERAS, Reply, ScriptedClient, era_named};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use workspace_tests::{
    Client, Failure, call,
    cli::{default_server, flag_values, log_tail, options_or_exit, parse_count},
    connect_over, is_error, message,
};

const USAGE: &str = "usage: approved-writes [--writes N] [--reads M] [--warmup W] [--runs R] \
                     [--era legacy|2026-07-28] [--server PATH] [--dir DIR] [--seed DIR] \
                     [--node PATH]";

/// The product every write adjusts.
const SKU: &str = "TLS-002";

/// What to measure.
#[derive(Debug)]
struct Options {
    writes: u32,
    reads: u32,
    warmup: u32,
    runs: u32,
    eras: Vec<Era>,
    server: PathBuf,
    dir: PathBuf,
    seed: Option<PathBuf>,
    node: PathBuf,
}

/// A server to drive.
#[derive(Debug, Clone, Copy)]
enum Target<'a> {
    /// The reference server's executable.
    Reference(&'a Path),
    /// The seed design's directory (`server.mjs` with its `node_modules`), run by `node`.
    Seed { dir: &'a Path, node: &'a Path },
}

impl Target<'_> {
    fn name(self) -> &'static str {
        match self {
            Target::Reference(_) => "store-server",
            Target::Seed { .. } => "seed (ts-store)",
        }
    }

    /// The arguments of every write.
    fn write_arguments(self) -> Value {
        match self {
            Target::Reference(_) => json!({"sku": SKU, "delta": 1, "reason": "bench"}),
            Target::Seed { .. } => {
                json!({"sku": SKU, "delta": 1, "reason": "bench", "confirm": true})
            }
        }
    }
}

/// The figures of one run.
#[derive(Debug, Clone, Copy)]
struct Figures {
    writes: Duration,
    reads: Duration,
    /// Summed over the timed writes: from sending the call to the question reaching the user.
    to_question: Duration,
    /// Summed over the timed writes: from the question reaching the user (who answers at
    /// once) to the result.
    from_answer: Duration,
}

fn parse_era(value: &str) -> Result<Era, String> {
    era_named(value).ok_or_else(|| format!("unknown era {value:?} (legacy or 2026-07-28)"))
}

fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Options, String> {
    let mut writes = 1000;
    let mut reads = None;
    let mut warmup = 50;
    let mut runs = 1;
    let mut eras = Vec::new();
    let mut server = None;
    let mut dir = std::env::temp_dir();
    let mut seed = None;
    let mut node = PathBuf::from("node");
    for pair in flag_values(args, USAGE) {
        let (flag, value) = pair?;
        let text = value.to_string_lossy();
        match flag.as_str() {
            "--writes" => writes = parse_count(&flag, &text, 1)?,
            "--reads" => reads = Some(parse_count(&flag, &text, 0)?),
            "--warmup" => warmup = parse_count(&flag, &text, 0)?,
            "--runs" => runs = parse_count(&flag, &text, 1)?,
            "--era" => eras.push(parse_era(&text)?),
            "--server" => server = Some(PathBuf::from(value)),
            "--dir" => dir = PathBuf::from(value),
            "--seed" => seed = Some(PathBuf::from(value)),
            "--node" => node = PathBuf::from(value),
            other => return Err(format!("unknown option {other:?}\n{USAGE}")),
        }
    }
    if writes.checked_add(warmup).is_none() {
        return Err("--writes and --warmup add up to too many writes".to_owned());
    }
    if eras.is_empty() {
        eras = ERAS.to_vec();
    }
    let server = match server {
        Some(path) => path,
        None => default_server()?,
    };
    Ok(Options {
        writes,
        reads: reads.unwrap_or(writes),
        warmup,
        runs,
        eras,
        server,
        dir,
        seed,
        node,
    })
}

/// One approved write, split where the question reached the user; an error if the server
/// refused it or never asked.
async fn write(
    client: &Client,
    user: &ScriptedClient,
    arguments: &Value,
    n: u32,
) -> Result<(Duration, Duration), Failure> {
    let sent = Instant::now();
    let result = call(client, "adjust_stock", arguments.clone()).await?;
    let done = Instant::now();
    if is_error(&result) {
        return Err(format!("write {n} was refused: {}", message(&result)).into());
    }
    match user.last_asked_at() {
        Some(asked) if asked >= sent => Ok((asked - sent, done - asked)),
        _ => Err(format!("write {n} applied without asking the user").into()),
    }
}

/// The stock of [`SKU`], read with `get_product` (a trusted read: not enveloped today, but an
/// envelope is taken off if there is one).
async fn stock(client: &Client) -> Result<i64, Failure> {
    let result = call(client, "get_product", json!({"sku": SKU})).await?;
    if is_error(&result) {
        return Err(format!("get_product failed: {}", message(&result)).into());
    }
    let content = result
        .structured_content
        .as_ref()
        .ok_or("get_product returned no structured content")?;
    let product = mcp_write_guard_envelope::unwrap(content).unwrap_or(content);
    product
        .get("stock")
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("no stock in {product}").into())
}

/// Warm-up, timed writes, timed reads and the checks, on a connected client.
async fn measure(
    client: &Client,
    user: &ScriptedClient,
    target: Target<'_>,
    options: &Options,
) -> Result<Figures, Failure> {
    let arguments = target.write_arguments();
    let before = stock(client).await?;
    for n in 0..options.warmup {
        write(client, user, &arguments, n).await?;
    }
    let mut to_question = Duration::ZERO;
    let mut from_answer = Duration::ZERO;
    let start = Instant::now();
    for n in 0..options.writes {
        let (asking, applying) = write(client, user, &arguments, options.warmup + n).await?;
        to_question += asking;
        from_answer += applying;
    }
    let writes = start.elapsed();

    let start = Instant::now();
    for _ in 0..options.reads {
        stock(client).await?;
    }
    let reads = start.elapsed();

    let made = i64::from(options.warmup) + i64::from(options.writes);
    let after = stock(client).await?;
    if after - before != made {
        return Err(format!("stock went from {before} to {after}, expected +{made}").into());
    }
    let asked = user.asked().len();
    if i64::try_from(asked).ok() != Some(made) || user.unused_replies() != 0 {
        return Err(format!("the user was asked {asked} times for {made} writes").into());
    }
    Ok(Figures {
        writes,
        reads,
        to_question,
        from_answer,
    })
}

/// One run: a new server on a new file.
async fn run(options: &Options, target: Target<'_>, era: Era) -> Result<Figures, Failure> {
    let dir = tempfile::tempdir_in(&options.dir)?;
    let log_path = dir.path().join("server.log");
    let (program, script) = match target {
        Target::Reference(server) => (server, None),
        Target::Seed { dir, node } => (node, Some(dir.join("server.mjs"))),
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(script)
        .arg("--db")
        .arg(dir.path().join("store.db"))
        .env("MCP_WRITES_ENABLED", "true")
        // The server's own default, pinned so that a RUST_LOG in the caller's shell does not
        // change what is measured.
        .env("RUST_LOG", "info")
        .kill_on_drop(true);
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(File::create(&log_path)?)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.display()))?;

    let made = options.warmup + options.writes;
    let user = ScriptedClient::answering((0..made).map(|_| Reply::Approve));
    let outcome = match connect_over(transport, &user, era).await {
        Ok(client) => {
            let figures = measure(&client, &user, target, options).await;
            let closed = client.cancel().await;
            match (figures, closed) {
                (Ok(figures), Ok(_)) => Ok(figures),
                (Ok(_), Err(e)) => Err(format!("closing the connection: {e}").into()),
                (Err(e), _) => Err(e),
            }
        }
        Err(e) => Err(e),
    };
    outcome.map_err(|e| format!("{e}\nserver log (last lines):\n{}", log_tail(&log_path)).into())
}

/// `count` events in `elapsed`, per second.
fn per_second(count: u32, elapsed: Duration) -> f64 {
    f64::from(count) / elapsed.as_secs_f64()
}

/// `total` over `count` events, in microseconds each.
fn micros_per(total: Duration, count: u32) -> f64 {
    total.as_secs_f64() * 1e6 / f64::from(count)
}

/// The middle value (the upper of the two middle ones for an even count).
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = match options_or_exit(parse, |options: &Options| &options.server) {
        Ok(options) => options,
        Err(code) => return code,
    };
    if let Some(seed) = &options.seed
        && !seed.join("server.mjs").is_file()
    {
        eprintln!(
            "no seed design at {}: copy ../shared/peers/ts-store there and run npm ci in it",
            seed.display()
        );
        return ExitCode::from(2);
    }
    println!(
        "server: {}, database in {} (writes {}, reads {}, warm-up {}, runs {})",
        options.server.display(),
        options.dir.display(),
        options.writes,
        options.reads,
        options.warmup,
        options.runs
    );
    for &era in &options.eras {
        let name = era.as_str();
        let mut targets = vec![Target::Reference(&options.server)];
        if let (Some(dir), Era::Legacy) = (&options.seed, era) {
            targets.push(Target::Seed {
                dir,
                node: &options.node,
            });
        }
        // Per target: its write rates and read rates, one of each per run.
        let mut rates: Vec<(Target<'_>, Vec<f64>, Vec<f64>)> = targets
            .into_iter()
            .map(|target| (target, Vec::new(), Vec::new()))
            .collect();
        for _ in 0..options.runs {
            for (target, write_rates, read_rates) in &mut rates {
                let target = *target;
                let figures = match run(&options, target, era).await {
                    Ok(figures) => figures,
                    Err(e) => {
                        eprintln!("era {name}, {}: {e}", target.name());
                        return ExitCode::FAILURE;
                    }
                };
                let writes = per_second(options.writes, figures.writes);
                println!(
                    "{}: approved writes: {} in {:.3} s = {writes:.1}/s (era {name}); per write: \
                     call to question {:.0} µs, answer to result {:.0} µs",
                    target.name(),
                    options.writes,
                    figures.writes.as_secs_f64(),
                    micros_per(figures.to_question, options.writes),
                    micros_per(figures.from_answer, options.writes),
                );
                write_rates.push(writes);
                if options.reads > 0 {
                    let reads = per_second(options.reads, figures.reads);
                    println!(
                        "{}: reads: {} in {:.3} s = {reads:.1}/s (era {name})",
                        target.name(),
                        options.reads,
                        figures.reads.as_secs_f64()
                    );
                    read_rates.push(reads);
                }
            }
            if let [(_, ours, _), (_, seed, _)] = &rates[..]
                && let (Some(ours), Some(seed)) = (ours.last(), seed.last())
            {
                println!(
                    "ratio store-server / seed (era {name}): approved writes {:.2}",
                    ours / seed
                );
            }
        }
        if options.runs > 1 {
            for (target, write_rates, read_rates) in rates {
                if let Some(writes) = median(write_rates) {
                    println!(
                        "{}: median of {} runs (era {name}): approved writes {writes:.1}/s",
                        target.name(),
                        options.runs
                    );
                }
                if let Some(reads) = median(read_rates) {
                    println!(
                        "{}: median of {} runs (era {name}): reads {reads:.1}/s",
                        target.name(),
                        options.runs
                    );
                }
            }
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use workspace_tests::cli::os_args;

    #[test]
    fn defaults_to_a_thousand_writes_in_both_eras() {
        let options = parse(os_args(&[])).unwrap();
        assert_eq!(
            (options.writes, options.reads, options.warmup, options.runs),
            (1000, 1000, 50, 1)
        );
        assert_eq!(options.eras, ERAS);
        assert!(options.server.ends_with("store-server"));
    }

    #[test]
    fn takes_every_option() {
        let options = parse(os_args(&[
            "--writes",
            "200",
            "--reads",
            "0",
            "--warmup",
            "0",
            "--runs",
            "3",
            "--era",
            "2026-07-28",
            "--server",
            "/x/store-server",
            "--dir",
            "/dev/shm",
            "--seed",
            "/x/ts-store",
            "--node",
            "/usr/bin/node",
        ]))
        .unwrap();
        assert_eq!(
            (options.writes, options.reads, options.warmup, options.runs),
            (200, 0, 0, 3)
        );
        assert_eq!(options.eras, [Era::InputRounds]);
        assert_eq!(options.server, PathBuf::from("/x/store-server"));
        assert_eq!(options.dir, PathBuf::from("/dev/shm"));
        assert_eq!(options.seed, Some(PathBuf::from("/x/ts-store")));
        assert_eq!(options.node, PathBuf::from("/usr/bin/node"));
    }

    #[test]
    fn refuses_bad_values() {
        for bad in [
            &["--writes", "0"][..],
            &["--writes", "many"],
            &["--era", "2025-11-25"],
            &["--runs"],
            &["--fast", "1"],
            &["--writes", "4294967295", "--warmup", "1"],
        ] {
            assert!(parse(os_args(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_median_of_three_is_the_middle_one() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(Vec::new()), None);
    }
}
