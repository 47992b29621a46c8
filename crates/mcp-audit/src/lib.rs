#![doc = include_str!("../README.md")]

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
            .map(|r| report_output(&r, r.status(), args.flags.json, audit_text)),
        Command::Http(args) => audit_http(args)
            .await
            .map(|r| report_output(&r, r.status(), args.flags.json, audit_text)),
        Command::Metadata(args) => fetch(
            &args.url,
            args.ca_file.as_deref(),
            std::time::Duration::from_secs(args.timeout),
        )
        .await
        .map(|r| {
            let status = findings_if(args.strict && !r.findings.is_empty());
            report_output(&r, status, args.json, metadata_text)
        }),
        Command::VerifyLog(args) => key(args.key_file.as_deref())
            .and_then(|key| verify_log::verify_log_keyed(&args.files, key.as_deref()))
            .map(|report| {
                let status = findings_if(report.broken.is_some());
                report_output(&report, status, args.json, verify_log::log_text)
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

/// What a report prints, and how the run ends (`status`): the report as JSON when `json`, as
/// `text` renders it otherwise.
fn report_output<R: serde::Serialize>(
    report: &R,
    status: ExitStatus,
    json: bool,
    text: impl FnOnce(&R) -> String,
) -> (ExitStatus, String) {
    let stdout = if json {
        json_text(report)
    } else {
        text(report)
    };
    (status, stdout)
}

/// [`ExitStatus::Findings`] when something the flags ask to fail on was `found`, clean otherwise.
fn findings_if(found: bool) -> ExitStatus {
    if found {
        ExitStatus::Findings
    } else {
        ExitStatus::Clean
    }
}
