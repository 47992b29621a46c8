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
    path::Path,
    process::{Command as StdCommand, Stdio},
};

use common::{EXE, HttpChild, launch_stdio};
use serde_json::{Value, json};
use workspace_tests::{
    Answer, Client, Era, Failure, FileView, ScriptedUser, call, enveloped_data, is_error,
    structured, text,
};

/// Starts `store-server` in `dir` with `args`, `MCP_WRITES_ENABLED` set to `writes` (or unset),
/// and connects `user` to it (legacy era).
async fn launch(
    dir: &Path,
    args: &[&str],
    writes: Option<&str>,
    user: &ScriptedUser,
) -> Result<Client, Failure> {
    Ok(launch_stdio(dir, args, writes, user, Era::Legacy).await?.0)
}

fn adjust() -> Value {
    json!({"sku": "TLS-002", "delta": -2, "reason": "damaged in transit"})
}

#[tokio::test]
async fn by_default_it_creates_store_db_in_the_working_directory() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let user = ScriptedUser::answering([]);
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
    let user = ScriptedUser::answering([Answer::Decline, Answer::Approve]);
    let client = launch(
        dir.path(),
        &["--db", db.to_str().unwrap()],
        Some("true"),
        &user,
    )
    .await?;

    let declined = call(&client, "adjust_stock", adjust()).await?;
    assert!(is_error(&declined), "{declined:?}");
    assert_eq!(file.stock("TLS-002")?, 3);
    assert!(file.movements()?.is_empty());

    let approved = call(&client, "adjust_stock", adjust()).await?;
    assert!(!is_error(&approved), "{}", text(&approved));
    assert_eq!(enveloped_data(&approved)?["previousStock"], 3);
    assert_eq!(enveloped_data(&approved)?["newStock"], 1);
    assert_eq!(file.stock("TLS-002")?, 1);
    assert_eq!(file.movements()?.len(), 1);

    assert_eq!(
        user.messages(),
        [
            r#"Adjust "TLS-002" by -2 ("damaged in transit"): stock 3 -> 1"#,
            r#"Adjust "TLS-002" by -2 ("damaged in transit"): stock 3 -> 1"#
        ]
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
        let user = ScriptedUser::answering([Answer::Approve]);
        let client = launch(dir.path(), &[], writes, &user).await?;
        let file = FileView::new(dir.path().join("store.db"));
        let before = file.snapshot()?;

        let result = call(&client, "adjust_stock", adjust()).await?;

        assert!(is_error(&result), "{writes:?}");
        assert!(
            text(&result).contains("turned off"),
            "{writes:?}: {}",
            text(&result)
        );
        assert!(user.asked().is_empty(), "{writes:?}");
        assert_eq!(file.snapshot()?, before, "{writes:?}");
        client.cancel().await?;
    }
    Ok(())
}

/// In stdio mode every line on stdout is a JSON-RPC message: logs go to stderr.
#[test]
fn stdout_carries_protocol_messages_only() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let mut child = StdCommand::new(EXE)
        .current_dir(dir.path())
        .env("MCP_WRITES_ENABLED", "true")
        .env("RUST_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "get_product", "arguments": {"sku": "TLS-002"}}}),
        // No elicitation capability: refused, and the refusal is logged (to stderr).
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
               "params": {"name": "adjust_stock", "arguments": adjust()}}),
    ];
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

    let user = ScriptedUser::answering([Answer::Decline, Answer::Approve]);
    let client = server.connect(&user, Era::Legacy).await?;
    let file = FileView::new(dir.path().join("store.db"));

    let declined = call(&client, "adjust_stock", adjust()).await?;
    assert!(is_error(&declined));
    assert_eq!(file.stock("TLS-002")?, 3);
    assert!(file.movements()?.is_empty());
    let approved = call(&client, "adjust_stock", adjust()).await?;
    assert!(!is_error(&approved), "{}", text(&approved));
    assert_eq!(file.stock("TLS-002")?, 1);
    assert_eq!(file.movements()?.len(), 1);

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
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    ];
    let text: String = requests.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&input, text)?;
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
