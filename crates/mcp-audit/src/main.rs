//! `mcp-audit`: audit an MCP server's tool surface before you trust it.
//!
//! See the library documentation (`mcp_write_guard_audit`) for the commands and the exit codes:
//! 0 clean, 1 drift or findings the flags ask to fail on, 2 could not audit.

use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let cli = mcp_write_guard_audit::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "mcp-audit: could not audit: {e}");
            return ExitCode::from(mcp_write_guard_audit::ExitStatus::CouldNotAudit.code());
        }
    };
    let output = runtime.block_on(mcp_write_guard_audit::run(&cli));
    let _ = std::io::stdout().write_all(output.stdout.as_bytes());
    let _ = std::io::stderr().write_all(output.stderr.as_bytes());
    ExitCode::from(output.status.code())
}
