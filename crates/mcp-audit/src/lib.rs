//! `mcp-audit`: audit an MCP server's tool surface before you trust it.
//!
//! # What it decides, and what it does not
//!
//! It asks a server, before any of its tools runs, what it exposes and what each tool claims
//! about itself, and reads those claims with the MCP spec's defaults: a tool with no hints is a
//! destructive, open-world write. It never calls a tool. Every count and predicate (read-only,
//! destructive, open-world, unannotated, partially annotated, additive, token-gated) comes from
//! [`write_policy`]; this crate only connects, measures, compares and prints. It does not judge
//! whether a server is honest: annotations are claims, and a pin (`--pin`) only tells you when
//! they change.
//!
//! ```text
//! mcp-audit stdio [--env NAME]... [FLAGS] -- COMMAND [ARGS...]
//! mcp-audit http URL [--header 'Name: value']... [FLAGS]
//! mcp-audit metadata URL [--json] [--strict] [--timeout SECONDS]
//!
//! FLAGS: --json  --contract FILE  --write-contract FILE  --pin FILE  --strict  --timeout SECONDS
//! ```
//!
//! - `stdio` starts the server with an environment holding only `HOME`, `LOGNAME`, `PATH`,
//!   `SHELL`, `TERM`, `USER` (when set) and the variables named with `--env`: never the whole
//!   environment of the caller. The server's stderr goes to mcp-audit's stderr.
//! - `http` speaks streamable HTTP. Only `http://` URLs: this build carries no TLS stack and
//!   says so for an `https://` URL.
//! - Tools are listed across all pages.
//! - `--contract FILE` compares with a published-surface contract ([`write_policy::SurfaceContract`]);
//!   `--write-contract FILE` writes one from the live server. The tool-list size it pins is
//!   defined by [`tools_list_bytes`].
//! - `--pin FILE` fingerprints every tool (see the [`pin`](PinFile) format); the first run
//!   writes the file, later runs name each tool added, removed or changed and which part changed.
//! - `metadata` fetches the RFC 9728 protected resource metadata and flags what deserves a look
//!   ([`Finding`]).
//!
//! # Exit codes
//!
//! | code | meaning |
//! |---|---|
//! | 0 | audited; nothing the flags ask to fail on |
//! | 1 | audited, and the flags ask to fail on what was found: contract drift, a pin change, or with `--strict` unannotated / partially annotated tools (`stdio`, `http`) or any finding (`metadata`) |
//! | 2 | could not audit: bad arguments, the server could not be started or reached or did not answer in time, a file could not be read or written, a malformed contract, pin or metadata document |
//!
//! # Example
//!
//! ```
//! use mcp_audit::{surface_report, tools_list_bytes};
//! use rmcp::model::Tool;
//! use std::sync::Arc;
//!
//! let schema = serde_json::json!({"type": "object"}).as_object().cloned().unwrap();
//! // A tool that declares nothing: the spec defaults make it a destructive, open-world write.
//! let tools = [Tool::new("delete_everything", "Deletes everything.", Arc::new(schema))];
//! let report = surface_report(&tools);
//! assert_eq!((report.total, report.destructive, report.open_world), (1, 1, 1));
//! assert_eq!(report.unannotated, ["delete_everything"]);
//! assert!(tools_list_bytes(&tools).unwrap() > 0);
//! ```

mod audit;
mod cli;
mod connect;
mod error;
pub mod fixture;
mod metadata;
mod pin;
mod render;
mod surface;

pub use audit::{
    AuditReport, ContractCheck, DriftEntry, PinCheck, PinStatus, ServerIdentity, Target,
    audit_http, audit_stdio,
};
pub use cli::{AuditFlags, Cli, Command, EXIT_CODES_HELP, HttpArgs, MetadataArgs, StdioArgs};
pub use connect::{
    BASE_ENV, Listing, check_http_url, child_env, list_http, list_stdio, parse_header,
};
pub use error::AuditError;
pub use metadata::{
    Answer, Finding, MAX_DOCUMENT_BYTES, MetadataReport, ResourceMetadata, WELL_KNOWN, fetch,
    findings, well_known_urls,
};
pub use pin::{HintChange, PIN_VERSION, Part, PinChange, PinFile, ToolPin};
pub use render::{audit_text, metadata_text, warnings};
pub use surface::{annotations_of, surface_report, tools_list_bytes};

/// How a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExitStatus {
    /// 0: audited, nothing the flags ask to fail on.
    Clean,
    /// 1: audited, and something the flags ask to fail on was found.
    Findings,
    /// 2: could not audit.
    CouldNotAudit,
}

impl ExitStatus {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Self::Clean => 0,
            Self::Findings => 1,
            Self::CouldNotAudit => 2,
        }
    }
}

/// What a run prints and how it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunOutput {
    /// How it ends.
    pub status: ExitStatus,
    /// Text for stdout (the report).
    pub stdout: String,
    /// Text for stderr (why it could not audit).
    pub stderr: String,
}

fn json_text(value: &impl serde::Serialize) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// Runs the command line.
pub async fn run(cli: &Cli) -> RunOutput {
    let result = match &cli.command {
        Command::Stdio(args) => audit_stdio(args)
            .await
            .map(|r| audit_output(&r, args.flags.json)),
        Command::Http(args) => audit_http(args)
            .await
            .map(|r| audit_output(&r, args.flags.json)),
        Command::Metadata(args) => fetch(&args.url, std::time::Duration::from_secs(args.timeout))
            .await
            .map(|r| {
                let status = if args.strict && !r.findings.is_empty() {
                    ExitStatus::Findings
                } else {
                    ExitStatus::Clean
                };
                let stdout = if args.json {
                    json_text(&r)
                } else {
                    metadata_text(&r)
                };
                (status, stdout)
            }),
    };
    match result {
        Ok((status, stdout)) => RunOutput {
            status,
            stdout,
            stderr: String::new(),
        },
        Err(e) => RunOutput {
            status: ExitStatus::CouldNotAudit,
            stdout: String::new(),
            stderr: format!("mcp-audit: could not audit: {e}\n"),
        },
    }
}

fn audit_output(report: &AuditReport, json: bool) -> (ExitStatus, String) {
    let text = if json {
        json_text(report)
    } else {
        audit_text(report)
    };
    (report.status(), text)
}
