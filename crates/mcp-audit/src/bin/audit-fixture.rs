//! `audit-fixture MODE`: a small MCP server over stdio that mcp-audit's tests audit.
//!
//! This is a test fixture, not part of the audit. MODE is one of `annotated`, `unannotated`,
//! `partial`, `rug-pull`, `needs-env`, `paged` (see `mcp_audit::fixture::FixtureMode`).

use std::process::ExitCode;

use mcp_audit::fixture::{FixtureMode, FixtureServer};
use rmcp::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let Some(mode) = FixtureMode::from_name(&mode) else {
        let names: Vec<&str> = FixtureMode::ALL.iter().map(|(n, _)| *n).collect();
        eprintln!("usage: audit-fixture MODE  (MODE: {})", names.join(", "));
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
