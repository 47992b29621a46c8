//! One audit run: read the input files, list the tools, build the report, compare, write.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_write_guard_policy::{SurfaceContract, SurfaceReport};
use serde::Serialize;

use crate::ExitStatus;
use crate::cli::{AuditFlags, HttpArgs, StdioArgs};
use crate::connect::{self, Listing};
use crate::error::AuditError;
use crate::pin::{PinChange, PinFile};
use crate::surface::surface_report;

/// What was audited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "transport")]
#[non_exhaustive]
pub enum Target {
    /// A server started over stdio.
    Stdio {
        /// The command line.
        command: Vec<String>,
        /// The variables passed with `--env` (names only).
        env: Vec<String>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint.
        url: String,
    },
}

/// The server's identity, as it reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerIdentity {
    /// Implementation name (empty when the server gave none).
    pub name: String,
    /// Implementation version.
    pub version: String,
    /// The negotiated protocol version.
    pub protocol_version: String,
}

/// One contract drift, as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DriftEntry {
    /// The contract field that drifted.
    pub field: &'static str,
    /// What differs.
    pub message: String,
}

/// The result of `--contract`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContractCheck {
    /// The contract file.
    pub file: PathBuf,
    /// Every drift; empty when the surface matches.
    pub drift: Vec<DriftEntry>,
}

/// What `--pin` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PinStatus {
    /// There was no pin file: it was written.
    Created,
    /// The surface matches the pin.
    Unchanged,
    /// The surface differs from the pin (the file is left as it was).
    Changed,
}

/// The result of `--pin`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinCheck {
    /// The pin file.
    pub file: PathBuf,
    /// What happened.
    pub status: PinStatus,
    /// Every change since the pin.
    pub changes: Vec<PinChange>,
}

/// A tool's declared `execution.taskSupport`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSupport {
    /// The tool.
    pub tool: String,
    /// The value as declared: `forbidden`, `optional` or `required` (others are shown as sent).
    pub task_support: String,
}

/// Everything one audit found; `--json` prints it as is.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AuditReport {
    /// What was audited.
    pub target: Target,
    /// Who answered.
    pub server: ServerIdentity,
    /// The tool list's size in bytes, as sent (see [`ToolsList::from_results`]).
    ///
    /// [`ToolsList::from_results`]: crate::ToolsList::from_results
    pub tools_list_bytes: usize,
    /// mcp-write-guard-policy's surface report.
    pub surface: SurfaceReport,
    /// Every tool that declares `execution.taskSupport`, in list order.
    pub task_support: Vec<TaskSupport>,
    /// The `--contract` comparison.
    pub contract: Option<ContractCheck>,
    /// Where `--write-contract` wrote the contract.
    pub written_contract: Option<PathBuf>,
    /// The `--pin` comparison.
    pub pin: Option<PinCheck>,
    /// Whether `--strict` was on.
    pub strict: bool,
    /// The exit code this report leads to.
    pub exit_code: u8,
}

impl AuditReport {
    /// The exit status: findings when a contract drifted, the pin changed, or (strict) a tool
    /// is unannotated or partially annotated.
    pub fn status(&self) -> ExitStatus {
        let drift = self.contract.as_ref().is_some_and(|c| !c.drift.is_empty());
        let changed = self.pin.as_ref().is_some_and(|p| !p.changes.is_empty());
        let loose = self.strict
            && !(self.surface.unannotated.is_empty()
                && self.surface.partially_annotated.is_empty());
        if drift || changed || loose {
            ExitStatus::Findings
        } else {
            ExitStatus::Clean
        }
    }
}

fn read_file(path: &Path) -> Result<Option<String>, AuditError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(AuditError::ReadFile {
            path: path.to_owned(),
            source,
        }),
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), AuditError> {
    std::fs::write(path, text).map_err(|source| AuditError::WriteFile {
        path: path.to_owned(),
        source,
    })
}

/// The input files, read and checked before the server is contacted.
struct Inputs {
    contract: Option<(PathBuf, SurfaceContract)>,
    pin: Option<(PathBuf, Option<PinFile>)>,
}

fn read_inputs(flags: &AuditFlags) -> Result<Inputs, AuditError> {
    let contract = match &flags.contract {
        None => None,
        Some(path) => {
            let text = read_file(path)?.ok_or_else(|| AuditError::ReadFile {
                path: path.clone(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
            })?;
            let contract =
                SurfaceContract::from_json(&text).map_err(|source| AuditError::Contract {
                    path: path.clone(),
                    source,
                })?;
            Some((path.clone(), contract))
        }
    };
    let pin = match &flags.pin {
        None => None,
        Some(path) => {
            let pinned = read_file(path)?
                .map(|text| {
                    PinFile::from_json(&text).map_err(|reason| AuditError::Pin {
                        path: path.clone(),
                        reason,
                    })
                })
                .transpose()?;
            Some((path.clone(), pinned))
        }
    };
    Ok(Inputs { contract, pin })
}

fn build_report(
    target: Target,
    listing: &Listing,
    flags: &AuditFlags,
    inputs: Inputs,
) -> Result<AuditReport, AuditError> {
    let surface = surface_report(&listing.tools);
    let bytes = listing.tools_list_bytes;
    let task_support = listing
        .tools
        .iter()
        .filter_map(|t| {
            t.task_support().map(|v| TaskSupport {
                tool: t.name().to_owned(),
                task_support: v.to_owned(),
            })
        })
        .collect();
    let contract = inputs.contract.map(|(file, contract)| ContractCheck {
        file,
        drift: contract
            .check(&surface, bytes)
            .iter()
            .map(|d| DriftEntry {
                field: d.field(),
                message: d.to_string(),
            })
            .collect(),
    });
    let pin = match inputs.pin {
        None => None,
        Some((file, pinned)) => {
            let current = PinFile::of(&listing.tools)?;
            Some(match pinned {
                None => {
                    write_file(&file, &current.to_json_pretty())?;
                    PinCheck {
                        file,
                        status: PinStatus::Created,
                        changes: Vec::new(),
                    }
                }
                Some(pinned) => {
                    let changes = pinned.changes(&current);
                    PinCheck {
                        file,
                        status: if changes.is_empty() {
                            PinStatus::Unchanged
                        } else {
                            PinStatus::Changed
                        },
                        changes,
                    }
                }
            })
        }
    };
    let written_contract = match &flags.write_contract {
        None => None,
        Some(path) => {
            let mut text = SurfaceContract::from_surface(&surface, bytes).to_json_pretty();
            text.push('\n');
            write_file(path, &text)?;
            Some(path.clone())
        }
    };
    let server = ServerIdentity {
        name: listing
            .server
            .as_ref()
            .map(|s| s.name.clone())
            .unwrap_or_default(),
        version: listing
            .server
            .as_ref()
            .map(|s| s.version.clone())
            .unwrap_or_default(),
        protocol_version: listing.protocol_version.clone(),
    };
    let mut report = AuditReport {
        target,
        server,
        tools_list_bytes: bytes,
        surface,
        task_support,
        contract,
        written_contract,
        pin,
        strict: flags.strict,
        exit_code: 0,
    };
    report.exit_code = report.status().code();
    Ok(report)
}

/// `mcp-audit stdio`: audits a server started with a cleared environment.
///
/// # Errors
///
/// Any [`AuditError`]: the audit could not be done.
pub async fn audit_stdio(args: &StdioArgs) -> Result<AuditReport, AuditError> {
    let env = connect::child_env(&args.env, |name| std::env::var_os(name))?;
    let inputs = read_inputs(&args.flags)?;
    let listing = connect::list_stdio(
        &args.command,
        &env,
        args.flags.protocol,
        Duration::from_secs(args.flags.timeout),
    )
    .await?;
    let target = Target::Stdio {
        command: args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        env: args.env.clone(),
    };
    build_report(target, &listing, &args.flags, inputs)
}

/// `mcp-audit http`: audits a streamable HTTP endpoint.
///
/// # Errors
///
/// Any [`AuditError`]: the audit could not be done.
pub async fn audit_http(args: &HttpArgs) -> Result<AuditReport, AuditError> {
    connect::check_http_url(&args.url)?;
    for header in &args.headers {
        connect::parse_header(header)?;
    }
    let inputs = read_inputs(&args.flags)?;
    let listing = connect::list_http(
        &args.url,
        &args.headers,
        args.ca_file.as_deref(),
        args.flags.protocol,
        Duration::from_secs(args.flags.timeout),
    )
    .await?;
    let target = Target::Http {
        url: args.url.clone(),
    };
    build_report(target, &listing, &args.flags, inputs)
}
