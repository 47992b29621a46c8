//! `mcp-audit`: audit an MCP server's tool surface before you trust it.
//!
//! # What it decides, and what it does not
//!
//! It asks a server, before any of its tools runs, what it exposes and what each tool claims
//! about itself, and reads those claims with the MCP spec's defaults: a tool with no hints is a
//! destructive, open-world write. It never calls a tool. Every count and predicate (read-only,
//! destructive, open-world, unannotated, partially annotated, additive, token-gated) comes from
//! [`mcp_write_guard_policy`]; this crate only connects, measures, compares and prints. It does not judge
//! whether a server is honest: annotations are claims, and a pin (`--pin`) only tells you when
//! they change.
//!
//! ```text
//! mcp-audit stdio [--env NAME]... [FLAGS] -- COMMAND [ARGS...]
//! mcp-audit http URL [--header 'Name: value']... [--ca-file FILE] [FLAGS]
//! mcp-audit metadata URL [--ca-file FILE] [--json] [--strict] [--timeout SECONDS]
//! mcp-audit verify-log FILE... [--key-file KEY] [--json]
//! mcp-audit story APPROVAL_ID FILE... [--key-file KEY]
//!
//! FLAGS: --json  --contract FILE  --write-contract FILE  --pin FILE  --strict
//!        --protocol legacy|2026-07-28|auto  --timeout SECONDS
//! ```
//!
//! - `stdio` starts the server with an environment holding only `HOME`, `LOGNAME`, `PATH`,
//!   `SHELL`, `TERM`, `USER` (when set) and the variables named with `--env`: never the whole
//!   environment of the caller. The server's stderr goes to mcp-audit's stderr.
//! - `http` speaks streamable HTTP, over `http://` or `https://`. An https server must present
//!   a certificate that chains to the operating system's trust store (the public web roots), or
//!   with `--ca-file FILE` to a certificate in that PEM file (and then to nothing else).
//!   Redirects are not followed.
//! - `--protocol` picks the protocol era: `legacy` (default: the `initialize` handshake),
//!   `2026-07-28` (`server/discover`, no handshake) or `auto` (try 2026-07-28 first).
//! - Tools are listed across all pages, and read from the `tools/list` answers exactly as the
//!   server sent them ([`ToolsList`]): fields rmcp's `Tool` type does not know (such as
//!   `execution`) are kept, and each tool's `execution.taskSupport` is shown.
//! - `--contract FILE` compares with a published-surface contract ([`mcp_write_guard_policy::SurfaceContract`]);
//!   `--write-contract FILE` writes one from the live server. The tool-list size it pins is the
//!   number of bytes of the `tools` arrays as the server sent them ([`ToolsList::from_results`]).
//! - `--pin FILE` fingerprints every field of every tool (see the [`pin`](PinFile) format); the
//!   first run writes the file, later runs name each tool added, removed or changed, which
//!   fields changed, which hints, and a short diff of a changed `title` or `description`.
//! - `--strict` fails on unannotated and partially annotated tools, as mcp-write-guard-policy counts them:
//!   a read (`readOnlyHint: true`) needs `readOnlyHint` and `openWorldHint` stated, any other
//!   tool all four hints.
//! - `metadata` fetches the RFC 9728 protected resource metadata and flags what deserves a look
//!   ([`Finding`]).
//! - `verify-log` checks the chain of an audit file the guard's `JsonLinesSink` wrote
//!   (`store-server --audit-log FILE`; a rotated log's files oldest first, as one chain) and
//!   names the first record that was changed, removed, inserted, reordered or cut short
//!   ([`verify_log`]); `story` prints one approval's records in order ([`story`]).
//!
//! TLS is rustls through reqwest's `rustls` feature, whose crypto provider is aws-lc-rs: it is
//! the provider reqwest 0.13 installs itself, so no reqwest client anywhere in a build that
//! includes this crate can start without one.
//!
//! # Exit codes
//!
//! | code | meaning |
//! |---|---|
//! | 0 | audited; nothing the flags ask to fail on |
//! | 1 | audited, and the flags ask to fail on what was found: contract drift, a pin change, or with `--strict` unannotated / partially annotated tools (`stdio`, `http`) or any finding (`metadata`); a broken chain (`verify-log`) |
//! | 2 | could not audit: bad arguments, the server could not be started or reached or did not answer in time, a file could not be read or written, a malformed contract, pin or metadata document |
//!
//! # Example
//!
//! ```
//! use mcp_write_guard_audit::{ListedTool, surface_report};
//!
//! let tool = |v: serde_json::Value| ListedTool::new(v.as_object().cloned().unwrap());
//! let tools = [
//!     // A tool that declares nothing: the spec defaults make it a destructive, open-world write.
//!     tool(serde_json::json!({"name": "delete_everything", "inputSchema": {"type": "object"}})),
//!     // A read needs only readOnlyHint and openWorldHint; `execution` is kept as sent.
//!     tool(serde_json::json!({"name": "read_file", "inputSchema": {"type": "object"},
//!         "annotations": {"readOnlyHint": true, "openWorldHint": false},
//!         "execution": {"taskSupport": "forbidden"}})),
//! ];
//! let report = surface_report(&tools);
//! assert_eq!((report.total, report.read_only, report.destructive), (2, 1, 1));
//! assert_eq!(report.unannotated, ["delete_everything"]);
//! assert!(report.partially_annotated.is_empty());
//! assert_eq!(tools[1].task_support(), Some("forbidden"));
//! ```

mod audit;
mod capture;
mod cli;
mod connect;
mod error;
pub mod fixture;
mod metadata;
mod pin;
mod render;
mod surface;
mod verify_log;

pub use audit::{
    AuditReport, ContractCheck, DriftEntry, PinCheck, PinStatus, ServerIdentity, Target,
    TaskSupport, audit_http, audit_stdio,
};
pub use cli::{
    AuditFlags, Cli, Command, EXIT_CODES_HELP, HttpArgs, MetadataArgs, StdioArgs, StoryArgs,
    VerifyLogArgs,
};
pub use connect::{
    BASE_ENV, Listing, Protocol, check_http_url, child_env, http_client, list_http, list_stdio,
    parse_header,
};
pub use error::AuditError;
pub use metadata::{
    Answer, Finding, MAX_DOCUMENT_BYTES, MetadataReport, ResourceMetadata, WELL_KNOWN, fetch,
    findings, well_known_urls,
};
pub use pin::{HintChange, PIN_VERSION, PinChange, PinFile, TextChange, ToolPin, short_diff};
pub use render::{audit_text, metadata_text, warnings};
pub use surface::{ListedTool, ToolsList, surface_report};
pub use verify_log::{LogReport, log_text, story, verify_log, verify_log_keyed};

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
        Command::Metadata(args) => fetch(
            &args.url,
            args.ca_file.as_deref(),
            std::time::Duration::from_secs(args.timeout),
        )
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
        Command::VerifyLog(args) => key(args.key_file.as_deref())
            .and_then(|key| verify_log::verify_log_keyed(&args.files, key.as_deref()))
            .map(|report| {
                let status = if report.broken.is_some() {
                    ExitStatus::Findings
                } else {
                    ExitStatus::Clean
                };
                let stdout = if args.json {
                    json_text(&report)
                } else {
                    verify_log::log_text(&report)
                };
                (status, stdout)
            }),
        Command::Story(args) => key(args.key_file.as_deref())
            .and_then(|key| verify_log::story(&args.files, &args.approval, key.as_deref()))
            .map(|lines| {
                let mut stdout = lines.join("\n");
                stdout.push('\n');
                (ExitStatus::Clean, stdout)
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

/// The bytes of `--key-file`, if given.
fn key(file: Option<&std::path::Path>) -> Result<Option<Vec<u8>>, AuditError> {
    file.map(|path| {
        std::fs::read(path).map_err(|source| AuditError::ReadFile {
            path: path.to_owned(),
            source,
        })
    })
    .transpose()
}

fn audit_output(report: &AuditReport, json: bool) -> (ExitStatus, String) {
    let text = if json {
        json_text(report)
    } else {
        audit_text(report)
    };
    (report.status(), text)
}
