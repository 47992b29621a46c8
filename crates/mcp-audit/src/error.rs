//! The crate's error type: every reason an audit could not be done (exit code 2).

use std::path::PathBuf;
use std::time::Duration;

/// Why an audit could not be done. Every variant ends the run with exit code 2
/// ([`crate::ExitStatus::CouldNotAudit`]); drift and findings are values, not errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// `--env` named something that is not a variable name.
    #[error("--env {0:?}: expected a variable name (letters, digits, `_`), not NAME=VALUE")]
    BadEnvName(String),
    /// `--env` named a variable that the caller's environment does not hold.
    #[error("--env {0}: {0} is not set in this environment, so it cannot be passed to the server")]
    EnvNotSet(String),
    /// `--header` is not `Name: value`.
    #[error("--header {header:?}: {reason}")]
    BadHeader {
        /// The argument as given.
        header: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The URL does not parse, or its scheme is not http or https.
    #[error("{url:?}: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `--ca-file` holds no PEM certificate.
    #[error("--ca-file {0}: no PEM certificate (-----BEGIN CERTIFICATE-----) found in it")]
    CaFile(PathBuf),
    /// The server process could not be started.
    #[error("could not start the server {command:?}: {source}")]
    Spawn {
        /// The command as given.
        command: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// The MCP handshake failed.
    #[error("could not connect to the server: {0}")]
    Connect(String),
    /// Listing the tools failed.
    #[error("could not list the server's tools: {0}")]
    ListTools(String),
    /// The server did not answer in time.
    #[error("the server did not answer within {0:?} (see --timeout)")]
    Timeout(Duration),
    /// A file could not be read.
    #[error("could not read {path}: {source}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("could not write {path}: {source}")]
    WriteFile {
        /// The file.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A contract file is malformed.
    #[error("{path}: {source}")]
    Contract {
        /// The file.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: mcp_write_guard_policy::Error,
    },
    /// A pin file is malformed.
    #[error("{path}: invalid pin file: {reason}")]
    Pin {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A tool cannot be fingerprinted (for example a number the canonical form refuses).
    #[error("cannot fingerprint tool {tool:?}: {reason}")]
    Fingerprint {
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// The server lists the same tool name more than once, so a pin cannot tell them apart.
    #[error("cannot pin the surface: the server lists the tool {0:?} more than once")]
    DuplicateTool(String),
    /// The tool list could not be serialised to measure it.
    #[error("could not serialise the tool list: {0}")]
    Serialize(#[source] serde_json::Error),
    /// An audit file's chain is broken, so no story is told from it.
    #[error("the audit log's chain is broken ({0}); run verify-log")]
    BrokenLog(String),
    /// Fetching the protected resource metadata failed.
    #[error("{0}")]
    Metadata(String),
}
