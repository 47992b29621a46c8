//! The `store-server` binary as an MCP client launches it: a child process speaking over
//! stdin and stdout (or streamable HTTP with `--http`), its database a file the test reads
//! directly.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command as StdCommand, Stdio},
};

use common::{EXE, HttpChild, launch_stdio};
use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::test_util::{Reply, ScriptedClient};
use serde_json::{Value, json};
use workspace_tests::{
    Client, DAMAGED_TLS_002_QUESTION, Failure, FileView, assert_refused, call, enveloped_data,
    is_error, structured, text,
};

/// Starts `store-server` in `dir` with `args`, `MCP_WRITES_ENABLED` set to `writes` (or unset),
/// and connects `user` to it (legacy era).
async fn launch(
    dir: &Path,
    args: &[&str],
    writes: Option<&str>,
    user: &ScriptedClient,
) -> Result<Client, Failure> {
    Ok(launch_stdio(dir, args, writes, user, Era::Legacy).await?.0)
}

fn adjust() -> Value {
    json!({"sku": "TLS-002", "delta": -2, "reason": "damaged in transit"})
}

#[tokio::test]
async fn by_default_it_creates_store_db_in_the_working_directory() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let user = ScriptedClient::answering([]);
    let client = launch(dir.path(), &[], Some("true"), &user).await?;

    let products = call(&client, "list_products", json!({})).await?;

    let stocks: Vec<(String, i64)> = structured(&products)?["products"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["sku"].as_str().unwrap().to_owned(),
                p["stock"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        stocks,
        [
            ("TLS-001".to_owned(), 12),
            ("TLS-002".to_owned(), 3),
            ("TLS-003".to_owned(), 40)
        ]
    );
    let file = FileView::new(dir.path().join("store.db"));
    assert_eq!(file.stock("TLS-002")?, 3);
    assert_eq!(file.count("customers")?, 1);
    client.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn the_decisive_case_as_a_child_process() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("shop.db");
    let file = FileView::new(&db);
    let user = ScriptedClient::answering([Reply::Decline, Reply::Approve]);
    let client = launch(
        dir.path(),
        &["--db", db.to_str().unwrap()],
        Some("true"),
        &user,
    )
    .await?;

    let declined = call(&client, "adjust_stock", adjust()).await?;
    assert!(is_error(&declined), "{declined:?}");
    file.assert_tls_002_unadjusted()?;

    let approved = call(&client, "adjust_stock", adjust()).await?;
    assert!(!is_error(&approved), "{}", text(&approved));
    assert_eq!(enveloped_data(&approved)?["previousStock"], 3);
    assert_eq!(enveloped_data(&approved)?["newStock"], 1);
    file.assert_tls_002_adjusted_once()?;

    assert_eq!(
        user.asked(),
        [DAMAGED_TLS_002_QUESTION, DAMAGED_TLS_002_QUESTION]
    );
    assert!(!dir.path().join("store.db").exists(), "--db is honoured");
    client.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn only_the_exact_value_true_enables_writes() -> Result<(), Failure> {
    for writes in [
        None,
        Some(""),
        Some("false"),
        Some("TRUE"),
        Some("1"),
        Some("true "),
    ] {
        let dir = tempfile::tempdir()?;
        let user = ScriptedClient::answering([Reply::Approve]);
        let client = launch(dir.path(), &[], writes, &user).await?;
        let file = FileView::new(dir.path().join("store.db"));
        let before = file.snapshot()?;

        let result = call(&client, "adjust_stock", adjust()).await?;

        assert_refused(&result, "turned off", &format!("{writes:?}"));
        assert!(user.asked().is_empty(), "{writes:?}");
        assert_eq!(file.snapshot()?, before, "{writes:?}");
        client.cancel().await?;
    }
    Ok(())
}

/// The binary in `dir`, its environment the test's own, its stdin, stdout and stderr as given.
fn with_ends(
    dir: &Path,
    stdin: impl Into<Stdio>,
    stdout: impl Into<Stdio>,
    stderr: Stdio,
) -> StdCommand {
    let mut command = StdCommand::new(EXE);
    command
        .current_dir(dir)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr);
    command
}

/// The binary in `dir` with writes on, logging at debug level, its three streams piped.
fn verbose(dir: &Path) -> StdCommand {
    let mut command = with_ends(dir, Stdio::piped(), Stdio::piped(), Stdio::piped());
    command
        .env("MCP_WRITES_ENABLED", "true")
        .env("RUST_LOG", "debug");
    command
}

/// Starts the binary (see [`verbose`]) in `dir` with `--audit-log DIR/audit.jsonl` and `more`
/// arguments, and sends the handshake. Returns the child, its stdin and the audit file's path.
fn start_with_audit_log(
    dir: &Path,
    more: &[&str],
) -> Result<(std::process::Child, std::process::ChildStdin, PathBuf), Failure> {
    let audit_log = dir.join("audit.jsonl");
    let mut child = verbose(dir)
        .args(["--audit-log", audit_log.to_str().unwrap()])
        .args(more)
        .spawn()?;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(handshake().as_bytes())?;
    Ok((child, stdin, audit_log))
}

/// Reads `child`'s stdout until the answer to request `last_id`, then closes its input (`stdin`)
/// and waits for it to end; asserts that it ended successfully and returns its stderr.
fn end_after_answer(
    child: &mut std::process::Child,
    stdin: std::process::ChildStdin,
    last_id: u64,
) -> Result<String, Failure> {
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let line = stdout.next().ok_or("stdout closed early")??;
        if serde_json::from_str::<Value>(&line)?["id"] == last_id {
            break;
        }
    }
    drop(stdin);
    let status = child.wait()?;
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr)?;
    assert!(status.success(), "{status:?}\n{stderr}");
    Ok(stderr)
}

/// In stdio mode every line on stdout is a JSON-RPC message: logs go to stderr.
#[test]
fn stdout_carries_protocol_messages_only() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let mut child = verbose(dir.path()).spawn()?;
    let mut requests = handshake_messages().to_vec();
    requests.extend([
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "get_product", "arguments": {"sku": "TLS-002"}}}),
        // No elicitation capability: refused, and the refusal is logged (to stderr).
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
               "params": {"name": "adjust_stock", "arguments": adjust()}}),
    ]);
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut stdin = child.stdin.take().unwrap();
    let mut responses = Vec::new();
    for request in &requests {
        writeln!(stdin, "{request}")?;
        stdin.flush()?;
        if request.get("id").is_some() {
            let line = lines.next().ok_or("stdout closed early")??;
            responses.push(serde_json::from_str::<Value>(&line)?);
        }
    }
    drop(stdin);
    // After the client hangs up, nothing else but protocol (here: nothing) reaches stdout.
    let rest: Vec<String> = lines.collect::<Result<_, _>>()?;
    let status = child.wait()?;
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr)?;

    for rest_line in &rest {
        let message: Value = serde_json::from_str(rest_line)?;
        assert_eq!(message["jsonrpc"], "2.0", "{rest_line}");
    }
    let ids: Vec<i64> = responses
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    assert!(responses.iter().all(|r| r["jsonrpc"] == "2.0"));
    assert_eq!(responses[2]["result"]["structuredContent"]["stock"], 3);
    assert_eq!(responses[3]["result"]["isError"], true);
    assert!(status.success(), "{status:?}\n{stderr}");
    // The logs went somewhere: stderr.
    assert!(stderr.contains("store-server starting"), "{stderr}");
    assert!(stderr.contains("refused-no-elicitation"), "{stderr}");
    assert_eq!(
        FileView::new(dir.path().join("store.db")).stock("TLS-002")?,
        3
    );
    Ok(())
}

/// `--http ADDR` serves the same guarded store at `/mcp`; Ctrl-C ends open sessions and exits.
#[cfg(unix)]
#[tokio::test]
async fn with_http_it_serves_the_guarded_store_and_stops_on_ctrl_c() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    // The server logs the address it bound (port 0 picks a free one).
    let mut server = HttpChild::start(dir.path(), &[], Some("true")).await?;
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
    assert!(server.url.ends_with("/mcp"), "{}", server.url);

    let user = ScriptedClient::answering([Reply::Decline, Reply::Approve]);
    let client = server.connect(&user, Era::Legacy).await?;
    let file = FileView::new(dir.path().join("store.db"));

    let declined = call(&client, "adjust_stock", adjust()).await?;
    assert!(is_error(&declined));
    file.assert_tls_002_unadjusted()?;
    let approved = call(&client, "adjust_stock", adjust()).await?;
    assert!(!is_error(&approved), "{}", text(&approved));
    file.assert_tls_002_adjusted_once()?;

    // Ctrl-C with the session still open: the server ends it and exits cleanly.
    let pid = server.child.id().ok_or("no pid")?.to_string();
    let signal = StdCommand::new("kill").args(["-INT", &pid]).status()?;
    assert!(signal.success());
    let status = server.child.wait().await?;
    assert!(status.success(), "{status:?}");
    let stdout = {
        let mut out = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut server.child.stdout.take().unwrap(), &mut out)
            .await?;
        out
    };
    assert!(
        stdout.is_empty(),
        "HTTP mode writes nothing to stdout: {stdout}"
    );
    drop(client);
    Ok(())
}

/// Started with nothing on stdin (or Ctrl-D at a terminal before any client spoke), the server
/// ends cleanly: exit 0, a line saying why, stdout empty.
#[test]
fn input_that_ends_before_initialize_is_a_clean_end() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let output = StdCommand::new(EXE)
        .current_dir(dir.path())
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("input ended before a client initialized"),
        "{stderr}"
    );
    assert!(!stderr.contains("ERROR"), "{stderr}");
    assert!(output.stdout.is_empty());
    Ok(())
}

/// Stdin and stdout that are files, not pipes (so not served through the event loop), are
/// served all the same, through tokio's blocking stdin and stdout.
#[test]
fn stdin_and_stdout_that_are_files_are_served_too() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let input = dir.path().join("requests.jsonl");
    std::fs::write(&input, format!("{}{}", handshake(), ping(2)))?;
    let output = dir.path().join("responses.jsonl");
    let status = StdCommand::new(EXE)
        .current_dir(dir.path())
        .env("RUST_LOG", "info")
        .stdin(std::fs::File::open(&input)?)
        .stdout(std::fs::File::create(&output)?)
        .stderr(Stdio::null())
        .status()?;
    assert!(status.success(), "{status:?}");
    let responses: Vec<Value> = std::fs::read_to_string(&output)?
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    assert_eq!(responses[0]["id"], 1, "{responses:?}");
    assert_eq!(responses[0]["result"]["serverInfo"]["name"], "store-server");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Each end of stdio as it comes: pipes, sockets, files, /dev/null, and idle pauses
// ---------------------------------------------------------------------------------------------

/// `initialize` and `initialized`, as a client sends them first.
fn handshake_messages() -> [Value; 2] {
    [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
}

/// [`handshake_messages`] as the lines a client writes.
fn handshake() -> String {
    let [initialize, initialized] = handshake_messages();
    format!("{initialize}\n{initialized}\n")
}

/// A ping with `id`.
fn ping(id: u64) -> String {
    format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
    )
}

/// How long the client says nothing between the handshake and its ping: long enough that the
/// server finds its input empty and has to wait.
const IDLE: std::time::Duration = std::time::Duration::from_millis(1000);

/// Starts the binary with stdin a pipe and stdout `stdout`; sends the handshake, says nothing
/// for [`IDLE`], sends a ping, closes its input. Returns the exit status and stderr.
fn idle_client_on_a_pipe(
    dir: &Path,
    stdout: Stdio,
) -> Result<(std::process::ExitStatus, String), Failure> {
    let mut child = with_ends(dir, Stdio::piped(), stdout, Stdio::piped())
        .env("RUST_LOG", "mcp_write_guard_stdio=debug,info")
        .spawn()?;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(handshake().as_bytes())?;
    stdin.flush()?;
    std::thread::sleep(IDLE);
    stdin.write_all(ping(2).as_bytes())?;
    drop(stdin);
    let output = child.wait_with_output()?;
    Ok((
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}

/// The answers in `text` (one JSON-RPC message a line), by id.
fn answered_ids(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|message| message["id"].clone())
        .collect()
}

fn assert_no_read_failure(stderr: &str) {
    assert!(
        !stderr.contains("failed") && !stderr.contains("ERROR"),
        "the server gave up on its input: {stderr}"
    );
}

/// Asserts that the server ended with `status` successfully, did not give up on its input, and
/// logged that it served its two ends as `ends` (such as `stdin="pipe" stdout="socket"`).
fn assert_served_cleanly(status: std::process::ExitStatus, stderr: &str, ends: &str) {
    assert!(status.success(), "{status:?}: {stderr}");
    assert_no_read_failure(stderr);
    assert!(stderr.contains(ends), "{stderr}");
}

/// Stdin a pipe, stdout a file: after an idle pause the ping is still answered (stdin, a pipe,
/// waits on the event loop; stdout, a file, is written on a blocking thread).
#[test]
fn a_pipe_in_and_a_file_out_survive_an_idle_pause() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let out = dir.path().join("responses.jsonl");
    let (status, stderr) = idle_client_on_a_pipe(dir.path(), std::fs::File::create(&out)?.into())?;
    assert_served_cleanly(status, &stderr, r#"stdin="pipe" stdout="blocking""#);
    assert_eq!(
        answered_ids(&std::fs::read_to_string(&out)?),
        [json!(1), json!(2)]
    );
    Ok(())
}

/// Stdin a pipe, stdout `/dev/null`: the session runs to the end of its input.
#[test]
fn a_pipe_in_and_dev_null_out_survive_an_idle_pause() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let (status, stderr) = idle_client_on_a_pipe(dir.path(), Stdio::null())?;
    assert_served_cleanly(status, &stderr, r#"stdin="pipe" stdout="blocking""#);
    Ok(())
}

/// Stdin a pipe, stdout a unix socket: both on the event loop.
#[cfg(unix)]
#[test]
fn a_pipe_in_and_a_socket_out_survive_an_idle_pause() -> Result<(), Failure> {
    use std::os::{fd::OwnedFd, unix::net::UnixStream};
    let dir = tempfile::tempdir()?;
    let (ours, theirs) = UnixStream::pair()?;
    ours.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut &ours, &mut text);
        text
    });
    let (status, stderr) = idle_client_on_a_pipe(dir.path(), OwnedFd::from(theirs).into())?;
    assert_served_cleanly(status, &stderr, r#"stdin="pipe" stdout="socket""#);
    assert_eq!(answered_ids(&reader.join().unwrap()), [json!(1), json!(2)]);
    Ok(())
}

/// Stdin and stdout unix socketpairs, as Node's `child_process` (so the official TypeScript SDK
/// and the Inspector) starts a server: served on the event loop, through an idle pause, with a
/// tool call as well as pings.
#[cfg(unix)]
#[test]
fn socketpairs_as_node_gives_them_are_served_on_the_event_loop() -> Result<(), Failure> {
    use std::os::{fd::OwnedFd, unix::net::UnixStream};
    let dir = tempfile::tempdir()?;
    let (mut to_server, server_in) = UnixStream::pair()?;
    let (from_server, server_out) = UnixStream::pair()?;
    from_server.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    let child = with_ends(
        dir.path(),
        OwnedFd::from(server_in),
        OwnedFd::from(server_out),
        Stdio::piped(),
    )
    .env("RUST_LOG", "mcp_write_guard_stdio=debug,info")
    .spawn()?;
    let mut lines = BufReader::new(from_server).lines();
    let mut next = || -> Result<Value, Failure> {
        let line = lines.next().ok_or("the server closed stdout")??;
        Ok(serde_json::from_str(&line)?)
    };
    to_server.write_all(handshake().as_bytes())?;
    assert_eq!(next()?["id"], 1);
    std::thread::sleep(IDLE);
    to_server.write_all(ping(2).as_bytes())?;
    assert_eq!(next()?["id"], 2);
    let read = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "get_product", "arguments": {"sku": "TLS-002"}}});
    to_server.write_all(format!("{read}\n").as_bytes())?;
    let answer = next()?;
    assert_eq!(answer["id"], 3, "{answer}");
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    std::thread::sleep(IDLE);
    to_server.write_all(ping(4).as_bytes())?;
    assert_eq!(next()?["id"], 4);
    to_server.shutdown(std::net::Shutdown::Write)?;
    let output = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_served_cleanly(output.status, &stderr, r#"stdin="socket" stdout="socket""#);
    Ok(())
}

/// The server's resident memory, in bytes (Linux: `VmRSS` of `/proc/PID/status`).
#[cfg(target_os = "linux")]
fn resident_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// How long the client below floods the server.
const FLOOD: std::time::Duration = std::time::Duration::from_secs(15);

/// The most the server may hold while flooded: a few times what it holds at rest (about 10 MiB
/// here). Without a bound on the answers waiting to be written it grew past 2 GiB in 15 s.
const RSS_BOUND: u64 = 64 * 1024 * 1024;

/// Floods the binary for `duration` with the lines `line(n)` makes (after the handshake),
/// never reading its stdout, and asserts that it stayed alive, answered, read something and
/// stayed under [`RSS_BOUND`] resident bytes throughout.
#[cfg(target_os = "linux")]
fn assert_flat_under_flood(
    duration: std::time::Duration,
    line: impl Fn(u64) -> String + Send + 'static,
) -> Result<(), Failure> {
    use std::io::Read;
    let dir = tempfile::tempdir()?;
    let mut child = with_ends(dir.path(), Stdio::piped(), Stdio::piped(), Stdio::null()).spawn()?;
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let writer = std::thread::spawn(move || {
        let mut sent = 0_u64;
        if stdin.write_all(handshake().as_bytes()).is_err() {
            return sent;
        }
        for id in 2_u64.. {
            if stdin.write_all(line(id).as_bytes()).is_err() {
                break;
            }
            sent += 1;
        }
        sent
    });
    let started = std::time::Instant::now();
    let mut peak = 0;
    let mut samples = 0;
    while started.elapsed() < duration {
        if let Some(rss) = resident_bytes(pid) {
            peak = peak.max(rss);
            samples += 1;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(samples > 5, "the server's memory was not read");
    let alive = child.try_wait()?.is_none();
    // What the server did answer sits in the pipe: the handshake's answer first.
    let mut first = [0_u8; 512];
    let n = stdout.read(&mut first)?;
    let first = String::from_utf8_lossy(&first[..n]).into_owned();
    child.kill()?;
    child.wait()?;
    let sent = writer.join().unwrap();
    assert!(alive, "the server ended while flooded");
    assert!(
        first.contains(r#""id":1"#),
        "the server never answered: {first}"
    );
    assert!(sent > 0, "the server read nothing");
    assert!(
        peak < RSS_BOUND,
        "the server grew to {peak} bytes while {sent} lines were written"
    );
    Ok(())
}

/// A client that writes `tools/call` lines as fast as it can and never reads its stdout: the
/// server stops reading once its answers back up ([`mcp_write_guard_stdio::DEFAULT_MAX_UNWRITTEN`]
/// of them), so the client's writes block and the server's memory stays flat.
#[cfg(target_os = "linux")]
#[test]
fn a_client_that_never_reads_cannot_grow_the_server() -> Result<(), Failure> {
    assert_flat_under_flood(FLOOD, |id| {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "get_product", "arguments": {"sku": "TLS-002"}}});
        format!("{call}\n")
    })
}

/// Answers that repeat what the client sent (a ping's id of 2 MiB) are bounded in bytes too
/// ([`mcp_write_guard_stdio::DEFAULT_MAX_UNWRITTEN_BYTES`]): 64 of them would be 128 MiB.
#[cfg(target_os = "linux")]
#[test]
fn large_answers_the_client_never_reads_are_bounded_in_bytes() -> Result<(), Failure> {
    let big = "x".repeat(2 * 1024 * 1024);
    assert_flat_under_flood(std::time::Duration::from_secs(6), move |id| {
        format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": format!("{id}-{big}"), "method": "ping"})
        )
    })
}

/// Whether the open file behind `fd` is non-blocking.
#[cfg(unix)]
fn non_blocking(fd: impl std::os::fd::AsFd) -> bool {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL).unwrap());
    flags.contains(OFlag::O_NONBLOCK)
}

/// A wrapper (`sh -c`, `npx`, `docker run -i`) may go on using the pipes after the server ends:
/// the server puts each end's flags back as it found them.
#[cfg(unix)]
#[test]
fn the_pipes_are_left_as_they_were_found() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let (stdin_read, mut stdin_write) = std::io::pipe()?;
    let (stdout_read, stdout_write) = std::io::pipe()?;
    assert!(!non_blocking(&stdin_read) && !non_blocking(&stdout_write));
    let child = with_ends(
        dir.path(),
        stdin_read.try_clone()?,
        stdout_write.try_clone()?,
        Stdio::piped(),
    )
    .spawn()?;
    stdin_write.write_all(handshake().as_bytes())?;
    stdin_write.write_all(ping(2).as_bytes())?;
    drop(stdin_write);
    let output = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let mut answers = String::new();
    drop(stdout_write);
    std::io::Read::read_to_string(&mut &stdout_read, &mut answers)?;
    assert_eq!(answered_ids(&answers), [json!(1), json!(2)]);
    assert!(
        !non_blocking(&stdin_read),
        "stdin's pipe was left non-blocking"
    );
    assert!(
        !non_blocking(&stdout_read),
        "stdout's pipe was left non-blocking"
    );
    Ok(())
}

/// Stdin and stdout the read end of one pipe (stdout cannot be written): the server refuses to
/// start, names stdout, and leaves stdin's pipe as it was (nothing is changed before both ends
/// were looked at).
#[cfg(unix)]
#[test]
fn an_end_that_cannot_be_served_changes_neither() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let (read, write) = std::io::pipe()?;
    let output = with_ends(
        dir.path(),
        read.try_clone()?,
        read.try_clone()?,
        Stdio::piped(),
    )
    .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("stdout"), "{stderr}");
    assert!(!non_blocking(&read), "stdin's pipe was changed");
    drop(write);
    Ok(())
}

/// A client that sends requests (more answers than the pipe holds, fewer than the 64 that stop
/// the server reading), closes its input and never reads: the server ends anyway (it waits a few
/// seconds for the last answers to be written, not for ever). With 64 answers waiting the server
/// stops reading and does not see the end of the input: it waits for the client to read or to
/// close its end of stdout, as a client that exits does.
#[test]
fn input_closed_and_answers_never_read_the_server_still_ends() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let mut child = with_ends(dir.path(), Stdio::piped(), Stdio::piped(), Stdio::null()).spawn()?;
    let mut stdin = child.stdin.take().unwrap();
    let _unread = child.stdout.take().unwrap();
    stdin.write_all(handshake().as_bytes())?;
    for id in 2..42 {
        let list = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
        stdin.write_all(format!("{list}\n").as_bytes())?;
    }
    drop(stdin);
    let closed = std::time::Instant::now();
    let ended = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if closed.elapsed() > std::time::Duration::from_secs(20) {
            child.kill()?;
            child.wait()?;
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        ended.is_some(),
        "the server still ran 20 s after its input closed"
    );
    Ok(())
}

/// Text a client chooses (a tool's name, a method, request ids) that imitates an audit record,
/// with quotes, a line break and an ANSI escape, reaches the log only escaped on the line of
/// the event that carries it: the documented reader (`common::audit_fields`) finds no record,
/// no line starts with the client's text, and the audit file holds nothing.
#[test]
fn client_text_that_imitates_audit_records_is_never_read_as_one() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let fake = "IMITATION outcome=\"applied\" tool=\"adjust_stock\"\n2026-01-01T00:00:00.000000Z  \
                INFO mcp_write_guard_rmcp::audit: write decision outcome=\"applied\" \
                tool=\"adjust_stock\"\u{1b}[2K";
    let (mut child, mut stdin, audit_log) = start_with_audit_log(dir.path(), &[])?;
    let lines = [
        json!({"jsonrpc": "2.0", "id": fake, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": fake, "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": fake, "params": {}}),
        json!({"jsonrpc": "2.0", "method": fake}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": fake, "reason": fake}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}),
    ];
    for line in &lines {
        writeln!(stdin, "{line}")?;
    }
    stdin.flush()?;
    // The last ping's answer: everything before it was read and handled.
    let stderr = end_after_answer(&mut child, stdin, 4)?;

    // The client's text reached the log (escaped), so the reader had something to be fooled by.
    assert!(stderr.contains("IMITATION"), "{stderr}");
    assert!(stderr.contains(r#"outcome=\"applied\""#), "{stderr}");
    for line in stderr.lines() {
        assert!(
            !line.starts_with("IMITATION") && !line.contains('\u{1b}'),
            "{line}"
        );
        assert!(
            !line.starts_with("2026-01-01T00:00:00.000000Z"),
            "a line of the client's: {line}"
        );
        assert_eq!(common::audit_fields(line), None, "read as a record: {line}");
    }
    assert_eq!(
        std::fs::read_to_string(&audit_log)?,
        "",
        "no write, no record"
    );
    Ok(())
}

/// `--audit-log-key-file`: the audit file's chain is linked by HMAC-SHA-256 under the key file's
/// bytes, so `mcp-audit verify-log --key-file` finds it whole, and read without the key (or with
/// another) it breaks at its second record.
#[test]
fn the_audit_file_is_chained_under_the_key_file() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let key_file = dir.path().join("audit.key");
    let key = b"a key only the auditors hold\n";
    std::fs::write(&key_file, key)?;
    let (mut child, mut stdin, audit_log) = start_with_audit_log(
        dir.path(),
        &["--audit-log-key-file", key_file.to_str().unwrap()],
    )?;
    // A client that cannot ask its user: each write is refused, and each refusal is a record.
    for id in [2, 3] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "adjust_stock", "arguments": adjust()}});
        writeln!(stdin, "{call}")?;
    }
    stdin.flush()?;
    end_after_answer(&mut child, stdin, 3)?;

    let files = [audit_log];
    let keyed = mcp_write_guard_audit::verify_log_keyed(&files, Some(key))?;
    assert_eq!(keyed.records, 2, "{keyed:?}");
    assert_eq!(keyed.broken, None, "{keyed:?}");
    for other in [None, Some(&b"another key"[..])] {
        let report = mcp_write_guard_audit::verify_log_keyed(&files, other)?;
        assert!(report.broken.is_some(), "{other:?}: {report:?}");
    }
    Ok(())
}

/// The documented reader takes the target by its position, the third token: a line of another
/// target that quotes the audit target and an outcome is not a record.
#[test]
fn the_documented_reader_reads_the_target_by_position() {
    let record = r#"2026-12-02T10:00:00.000000Z  INFO mcp_write_guard_rmcp::audit: write decision time="2026-12-02T10:00:00Z" principal="local" tool="adjust_stock" outcome="applied""#;
    let fields = common::audit_fields(record).unwrap();
    assert!(fields.contains(&("outcome".to_owned(), "applied".to_owned())));
    for other in [
        r#"2026-12-02T10:00:00.000000Z  WARN rmcp::service: response error id=mcp_write_guard_rmcp::audit: outcome="applied""#,
        r#"2026-12-02T10:00:00.000000Z  INFO mcp_write_guard_rmcp::audit: cannot write audit record seq=3"#,
        r#"mcp_write_guard_rmcp::audit: write decision outcome="applied""#,
    ] {
        assert_eq!(common::audit_fields(other), None, "{other}");
    }
}
