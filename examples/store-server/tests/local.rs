//! The binary over streamable HTTP without auth: loopback only, the machine is one person
//! (`local`), browser origins checked, sessions bounded. Driven from outside: the official
//! Python SDK, raw HTTP, and the SQLite file and the audit log as the proof.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use std::path::{Path, PathBuf};

use common::{HttpChild, command, python_adjust};
use mcp_write_guard_rmcp::Outcome;
use serde_json::json;
use tempfile::TempDir;
use workspace_tests::{Failure, FileView, Movement, RawHttp, Snapshot};

async fn start(dir: &Path, extra: &[&str]) -> Result<(HttpChild, PathBuf), Failure> {
    let db = dir.join("store.db");
    let mut args = vec!["--db", db.to_str().unwrap()];
    args.extend_from_slice(extra);
    Ok((HttpChild::start(dir, &args, Some("true")).await?, db))
}

/// The binary [`start`]ed with `extra` in a fresh directory, with writes enabled: an outside
/// view of its file, the file as it was before any call, and raw HTTP to its endpoint.
struct Served {
    /// Keeps the directory alive.
    _dir: TempDir,
    server: HttpChild,
    file: FileView,
    before: Snapshot,
    raw: RawHttp,
}

async fn served(extra: &[&str]) -> Result<Served, Failure> {
    let dir = tempfile::tempdir()?;
    let (server, db) = start(dir.path(), extra).await?;
    let file = FileView::new(&db);
    let before = file.snapshot()?;
    let raw = RawHttp::new(&server.url);
    Ok(Served {
        _dir: dir,
        server,
        file,
        before,
        raw,
    })
}

#[tokio::test]
async fn the_python_sdk_writes_after_approval_in_both_eras_and_a_decline_writes_nothing()
-> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let audit_log = dir.path().join("audit.jsonl");
    let (server, db) = start(dir.path(), &["--audit-log", audit_log.to_str().unwrap()]).await?;
    let file = FileView::new(&db);
    let mut stock = file.stock("TLS-002")?;
    let mut movements = Vec::new();
    let mut decisions = 0;
    for era in ["legacy", "2026-07-28"] {
        let declined = python_adjust(&server.url, era, "decline", "declined", &[]).await?;
        assert!(declined.is_error, "{era}: {declined:?}");
        assert_eq!(declined.elicitations, 1, "{era}: {declined:?}");
        assert!(
            declined.text.contains("did not approve"),
            "{era}: {declined:?}"
        );
        assert_eq!(file.stock("TLS-002")?, stock, "{era}");
        assert_eq!(file.movements()?, movements, "{era}");

        let reason = format!("python {era}");
        let approved = python_adjust(&server.url, era, "approve", &reason, &[]).await?;
        assert!(!approved.is_error, "{era}: {approved:?}");
        assert_eq!(approved.elicitations, 1, "{era}: {approved:?}");
        stock -= 1;
        movements.push(Movement {
            sku: "TLS-002".into(),
            delta: -1,
            reason,
        });
        assert_eq!(file.stock("TLS-002")?, stock, "{era}");
        assert_eq!(file.movements()?, movements, "{era}");
        decisions += 3; // declined; approved, applied
    }
    let outcomes = server.log.outcomes_when(decisions).await;
    let declined = Outcome::Declined.as_str();
    let approved = Outcome::Approved.as_str();
    let applied = Outcome::Applied.as_str();
    assert_eq!(
        outcomes,
        [declined, approved, applied, declined, approved, applied],
        "{outcomes:?}"
    );
    let audit: Vec<_> = server
        .log
        .lines()
        .into_iter()
        .filter(|l| l.contains("mcp_write_guard_rmcp::audit"))
        .collect();
    assert!(
        audit.iter().all(|l| l.contains("principal=\"local\"")),
        "{audit:#?}"
    );
    // --audit-log: the same records in a file of their own, numbered in order, each on disk
    // before its call was answered.
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&audit_log)?
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let in_file: Vec<&str> = records
        .iter()
        .map(|r| r["outcome"].as_str().unwrap_or_default())
        .filter(|o| *o != Outcome::Asked.as_str())
        .collect();
    assert_eq!(in_file, outcomes, "{records:#?}");
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record["seq"], i + 1, "{record}");
        assert_eq!(record["principal"], "local", "{record}");
    }
    Ok(())
}

#[tokio::test]
async fn without_auth_it_refuses_to_listen_beyond_loopback() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("store.db");
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let output = command(
            dir.path(),
            &["--db", db.to_str().unwrap(), "--http", addr],
            Some("true"),
        )
        .output()
        .await?;
        assert!(!output.status.success(), "{addr}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("loopback"), "{stderr}");
        assert!(stderr.contains("--auth-issuer"), "{stderr}");
        assert!(!db.exists(), "nothing is opened before the check");
    }
    Ok(())
}

#[tokio::test]
async fn foreign_browser_origins_get_403_and_listed_ones_are_served() -> Result<(), Failure> {
    let s = served(&["--allow-origin", "https://app.example"]).await?;
    let arguments = json!({"sku": "TLS-002", "delta": 1, "reason": "from a web page"});

    for origin in [
        "http://evil.example",
        "https://app.example.evil",
        "http://app.example",
        "https://app.example:8443",
        "null",
    ] {
        let init = s.raw.initialize(&[("origin", origin)]).await?;
        assert_eq!(init.status, 403, "{origin}: {init:?}");
        let call = s
            .raw
            .call_2026(&[("origin", origin)], "adjust_stock", &arguments, None)
            .await?;
        assert_eq!(call.status, 403, "{origin}: {call:?}");
    }
    assert_eq!(s.file.snapshot()?, s.before);
    assert!(
        s.server.log.outcomes().is_empty(),
        "{:?}",
        s.server.log.outcomes()
    );

    for origin in [
        None,
        Some("https://app.example"),
        Some("http://localhost:5173"),
        Some("http://127.0.0.1:3000"),
    ] {
        let headers: Vec<(&str, &str)> = origin.iter().map(|o| ("origin", *o)).collect();
        let init = s.raw.initialize(&headers).await?;
        assert_eq!(init.status, 200, "{origin:?}: {init:?}");
        let call = s
            .raw
            .call_2026(&headers, "adjust_stock", &arguments, None)
            .await?;
        assert!(call.request_state().is_some(), "{origin:?}: {call:?}");
    }
    Ok(())
}

/// rmcp reads a request whose params do not fit its method as a custom request of that name:
/// the guard answers it `-32602` with its id, in a session and in a 2026-07-28 call alike; it
/// reaches neither the store nor the audit trail, and the session serves on.
#[tokio::test]
async fn over_http_params_that_do_not_fit_are_invalid_params_and_save_nothing()
-> Result<(), Failure> {
    let s = served(&[]).await?;
    let session = s.raw.open_session(&[]).await?;
    let in_session = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let arguments = json!({"sku": "TLS-002", "delta": 1, "reason": "misfit"});
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw-http", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    });
    let era_2026 = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "adjust_stock"),
    ];
    let cases = [
        (
            &in_session[..],
            "tools/call",
            json!({"name": "adjust_stock", "arguments": [1]}),
        ),
        (
            &in_session[..],
            "tools/call",
            json!({"name": "adjust_stock", "arguments": arguments, "requestState": 123}),
        ),
        (
            &in_session[..],
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {"elicitation": true},
                   "clientInfo": {"name": "raw-http", "version": "1"}}),
        ),
        (
            &era_2026[..],
            "tools/call",
            json!({"name": "adjust_stock", "arguments": arguments, "requestState": 123,
                   "inputResponses": {}, "_meta": meta}),
        ),
        (
            &era_2026[..],
            "tools/call",
            json!({"name": "adjust_stock", "arguments": [1], "_meta": meta}),
        ),
    ];
    for (i, (headers, method, params)) in cases.iter().enumerate() {
        let id = 100 + i;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let reply = s.raw.post(headers, &body).await?;
        assert_eq!(reply.status, 200, "{params} -> {reply:?}");
        let message = reply.message().ok_or("no message")?;
        assert_eq!(message["id"], json!(id), "{params} -> {message}");
        assert_eq!(
            message["error"]["code"],
            json!(-32602),
            "{params} -> {message}"
        );
        let text = message["error"]["message"].as_str().unwrap_or_default();
        assert!(
            text.starts_with(&format!("Invalid params for {method}")),
            "{text}"
        );
    }
    // The same call without an id is a notification nobody answers: dropped, not run.
    let notification = json!({"jsonrpc": "2.0", "method": "tools/call",
                              "params": {"name": "adjust_stock", "arguments": arguments}});
    let reply = s.raw.post(&in_session, &notification).await?;
    assert_eq!(reply.status, 202, "{reply:?}");
    // The session serves on: a read in it is answered.
    let read = json!({"jsonrpc": "2.0", "id": 200, "method": "tools/call",
                      "params": {"name": "get_product", "arguments": {"sku": "TLS-002"}}});
    let reply = s.raw.post(&in_session, &read).await?;
    let (is_error, text) = reply.tool_result().ok_or("no result")?;
    assert!(!is_error, "{text}");
    assert!(text.contains("TLS-002"), "{text}");
    assert_eq!(s.file.snapshot()?, s.before);
    assert!(
        s.server.log.outcomes().is_empty(),
        "{:?}",
        s.server.log.outcomes()
    );
    Ok(())
}

#[tokio::test]
async fn an_invented_legacy_session_is_not_found_and_saves_nothing() -> Result<(), Failure> {
    let s = served(&[]).await?;
    let arguments = json!({"sku": "TLS-002", "delta": 1, "reason": "invented"});
    let reply = s
        .raw
        .call_legacy("made-up-by-client", "adjust_stock", &arguments)
        .await?;
    assert_eq!(reply.status, 404, "{reply:?}");
    assert_eq!(s.file.snapshot()?, s.before);
    assert!(s.server.log.outcomes().is_empty());
    Ok(())
}

#[tokio::test]
async fn sessions_are_bounded_and_a_closed_one_frees_its_place() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let (server, _db) = start(dir.path(), &["--max-sessions", "2"]).await?;
    let raw = RawHttp::new(&server.url);
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let init = raw.initialize(&[]).await?;
        assert_eq!(init.status, 200, "{init:?}");
        sessions.push(
            init.headers
                .get("mcp-session-id")
                .ok_or("no session")?
                .to_str()?
                .to_owned(),
        );
    }
    let third = raw.initialize(&[]).await?;
    assert_ne!(third.status, 200, "{third:?}");
    assert!(third.headers.get("mcp-session-id").is_none());
    assert!(
        server
            .log
            .lines()
            .iter()
            .any(|l| l.contains("has its maximum open")),
        "{:#?}",
        server.log.lines()
    );

    let closed = reqwest::Client::new()
        .delete(&server.url)
        .header("mcp-session-id", &sessions[0])
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await?;
    assert!(closed.status().is_success(), "{closed:?}");
    let mut reopened = None;
    for _ in 0..50 {
        let init = raw.initialize(&[]).await?;
        if init.status == 200 {
            reopened = Some(init);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        reopened.is_some(),
        "the closed session's place was not freed"
    );
    Ok(())
}

/// The machine is one principal, so a client inventing a new `Mcp-Session-Id` for every call
/// still holds at most 64 open approvals (the per-principal cap); the rest are refused before
/// anyone is asked, and nothing is saved.
#[tokio::test]
async fn rotating_session_ids_cannot_hold_more_than_the_cap() -> Result<(), Failure> {
    const CAP: usize = 64;
    let s = served(&[]).await?;
    let arguments = json!({"sku": "TLS-002", "delta": 1, "reason": "flood"});
    let mut opened = 0;
    let mut refused = Vec::new();
    for i in 0..CAP + 6 {
        let session = format!("rotating-{i}");
        let reply = s
            .raw
            .call_2026(
                &[("mcp-session-id", &session)],
                "adjust_stock",
                &arguments,
                None,
            )
            .await?;
        match reply.request_state() {
            Some(_) => opened += 1,
            None => refused.push(reply.tool_result().ok_or("no result")?),
        }
    }
    assert_eq!(opened, CAP);
    assert_eq!(refused.len(), 6);
    for (is_error, text) in &refused {
        assert!(is_error, "{text}");
        assert!(text.contains("Too many approvals are waiting"), "{text}");
    }
    assert_eq!(s.file.snapshot()?, s.before);
    let outcomes = s.server.log.outcomes_when(6).await;
    assert_eq!(
        outcomes,
        vec![Outcome::StoreFailed.as_str(); 6],
        "{outcomes:?}"
    );
    Ok(())
}
