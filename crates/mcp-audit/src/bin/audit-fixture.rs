//! `audit-fixture MODE`: a small MCP server over stdio that mcp-audit's tests audit.
//!
//! This is a test fixture, not part of the audit. MODE is one of `annotated`, `unannotated`,
//! `partial`, `rug-pull`, `needs-env`, `paged` (see `mcp_write_guard_audit::fixture::FixtureMode`).
//!
//! `audit-fixture replay FILE` answers `tools/list` with the recorded response in FILE, byte for
//! byte (see `mcp_write_guard_audit::fixture::replay`).

use std::process::ExitCode;

use mcp_write_guard_audit::fixture::{FixtureMode, FixtureServer};
use rmcp::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    if mode == "replay" {
        return replay(std::env::args_os().nth(2)).await;
    }
    let Some(mode) = FixtureMode::from_name(&mode) else {
        let names: Vec<&str> = FixtureMode::ALL.iter().map(|(n, _)| *n).collect();
        eprintln!(
            "usage: audit-fixture MODE  (MODE: {})\n       audit-fixture replay FILE",
            names.join(", ")
        );
        return ExitCode::from(2);
    };
    let env: Vec<(String, String)> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let server = match FixtureServer::new(mode, env.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("audit-fixture: {e}");
            return ExitCode::from(1);
        }
    };
    let running = match server.serve(rmcp::transport::stdio()).await {
        Ok(running) => running,
        Err(e) => {
            eprintln!("audit-fixture: {e}");
            return ExitCode::from(1);
        }
    };
    match running.waiting().await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("audit-fixture: {e}");
            ExitCode::from(1)
        }
    }
}

async fn replay(file: Option<std::ffi::OsString>) -> ExitCode {
    let Some(file) = file else {
        eprintln!("usage: audit-fixture replay FILE");
        return ExitCode::from(2);
    };
    let recorded = match std::fs::read(&file) {
        Ok(recorded) => recorded,
        Err(e) => {
            eprintln!("audit-fixture: {}: {e}", file.to_string_lossy());
            return ExitCode::from(2);
        }
    };
    let result = match mcp_write_guard_audit::fixture::recorded_result(&recorded) {
        Ok(result) => result,
        Err(e) => {
            eprintln!("audit-fixture: {}: {e}", file.to_string_lossy());
            return ExitCode::from(2);
        }
    };
    let input = tokio::io::BufReader::new(tokio::io::stdin());
    match mcp_write_guard_audit::fixture::replay(result, input, tokio::io::stdout()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("audit-fixture: {e}");
            ExitCode::from(1)
        }
    }
}
