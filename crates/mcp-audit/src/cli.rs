//! The command line, parsed with clap.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::connect::Protocol;

/// The exit codes, as `--help` prints them.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  audited, nothing that the flags ask to fail on
  1  audited, and something the flags ask to fail on was found: drift from --contract,
     a tool added, removed or changed since --pin, or (with --strict) unannotated or
     partially annotated tools / metadata findings
  2  could not audit: bad arguments, the server could not be started or reached, it did
     not answer in time, a file could not be read or written, or a document was malformed";

/// Audits an MCP server's tool surface before you trust it: what it exposes and what each tool
/// claims about itself, read with the MCP spec's defaults (a tool without hints is a
/// destructive, open-world write).
#[derive(Debug, Parser)]
#[command(name = "mcp-audit", version, after_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// What to audit.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a server over stdio and audit its tools.
    ///
    /// The server gets an environment holding only HOME, LOGNAME, PATH, SHELL, TERM and USER
    /// (when set here) and the variables named with --env; nothing else of this environment.
    #[command(after_help = EXIT_CODES_HELP)]
    Stdio(StdioArgs),
    /// Connect to a server over streamable HTTP (http or https) and audit its tools.
    #[command(after_help = EXIT_CODES_HELP)]
    Http(HttpArgs),
    /// Fetch and check an MCP endpoint's OAuth protected resource metadata (RFC 9728).
    #[command(after_help = EXIT_CODES_HELP)]
    Metadata(MetadataArgs),
    /// Check the chain of an audit file the guard wrote (store-server --audit-log): exit 0 when
    /// intact, 1 naming the first record that was changed, removed, inserted, reordered or cut.
    ///
    /// Give a rotated log's files oldest first; they are checked as one chain. The last hash is
    /// printed: keep it elsewhere to tell this file from a rewritten one.
    #[command(name = "verify-log", after_help = EXIT_CODES_HELP)]
    VerifyLog(VerifyLogArgs),
    /// Print the records of one approval from audit files, in order: asked (with the question),
    /// answered (how), applied, stale or refused, every value quoted. A file whose chain is
    /// broken tells no story (exit 2): run verify-log to see where.
    #[command(after_help = EXIT_CODES_HELP)]
    Story(StoryArgs),
}

/// `mcp-audit verify-log`.
#[derive(Debug, Clone, Args)]
pub struct VerifyLogArgs {
    /// The audit files, oldest first.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// The chain's key, for a file written with one (store-server --audit-log-key-file): the
    /// file's bytes are the key.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `mcp-audit story`.
#[derive(Debug, Clone, Args)]
pub struct StoryArgs {
    /// The approval id (the `approval_id` of the records).
    #[arg(value_name = "APPROVAL_ID")]
    pub approval: String,
    /// The audit files, oldest first.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// The chain's key, for a file written with one.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
}

/// Flags shared by `stdio` and `http`.
#[derive(Debug, Clone, Args)]
pub struct AuditFlags {
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Compare the surface with this published-surface contract; exit 1 naming each drift.
    #[arg(long, value_name = "FILE", conflicts_with = "write_contract")]
    pub contract: Option<PathBuf>,
    /// Write a published-surface contract that pins the live server's surface to FILE. Its
    /// maxToolsListBytes is the byte length of the tools arrays exactly as the server sent them
    /// (all pages; every field of every tool, unknown ones included).
    #[arg(long, value_name = "FILE")]
    pub write_contract: Option<PathBuf>,
    /// Fingerprint every field of every tool. The first run writes FILE; later runs exit 1
    /// naming each tool added, removed or changed, which fields and hints changed, and a short
    /// diff of a changed title or description. Delete FILE to pin afresh.
    #[arg(long, value_name = "FILE")]
    pub pin: Option<PathBuf>,
    /// Also exit 1 when a tool is unannotated or partially annotated (a read needs readOnlyHint
    /// and openWorldHint; any other tool all four hints).
    #[arg(long)]
    pub strict: bool,
    /// The protocol era to speak.
    #[arg(long, value_name = "ERA", value_enum, default_value_t = Protocol::Legacy)]
    pub protocol: Protocol,
    /// Give up (exit 2) when connecting and listing take longer than this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub timeout: u64,
}

/// `mcp-audit stdio`.
#[derive(Debug, Clone, Args)]
pub struct StdioArgs {
    /// Pass this variable of the current environment to the server (repeatable).
    #[arg(long = "env", value_name = "NAME")]
    pub env: Vec<String>,
    /// Shared flags.
    #[command(flatten)]
    pub flags: AuditFlags,
    /// The server command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// `mcp-audit http`.
#[derive(Debug, Clone, Args)]
pub struct HttpArgs {
    /// The MCP endpoint: an http:// or https:// URL.
    pub url: String,
    /// Send this header with every request, written 'Name: value' (repeatable).
    #[arg(long = "header", value_name = "'Name: value'")]
    pub headers: Vec<String>,
    /// Trust https servers whose certificate chains to a certificate in this PEM file, and no
    /// other (default: the operating system's trust store, the public web roots).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Shared flags.
    #[command(flatten)]
    pub flags: AuditFlags,
}

/// `mcp-audit metadata`.
#[derive(Debug, Clone, Args)]
pub struct MetadataArgs {
    /// The MCP endpoint: an http:// or https:// URL.
    pub url: String,
    /// Trust https servers whose certificate chains to a certificate in this PEM file, and no
    /// other (default: the operating system's trust store, the public web roots).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Print the result as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when any finding is flagged.
    #[arg(long)]
    pub strict: bool,
    /// Give up (exit 2) when a request takes longer than this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub timeout: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn stdio_takes_the_command_after_double_dash() {
        let cli = Cli::try_parse_from([
            "mcp-audit",
            "stdio",
            "--env",
            "TOKEN",
            "--json",
            "--",
            "server",
            "--flag",
        ])
        .unwrap();
        let Command::Stdio(args) = cli.command else {
            panic!("not stdio")
        };
        assert_eq!(args.env, ["TOKEN"]);
        assert!(args.flags.json);
        assert_eq!(
            args.command,
            [OsString::from("server"), OsString::from("--flag")]
        );
    }

    #[test]
    fn stdio_needs_a_command() {
        assert!(Cli::try_parse_from(["mcp-audit", "stdio"]).is_err());
    }

    #[test]
    fn contract_and_write_contract_conflict() {
        assert!(
            Cli::try_parse_from([
                "mcp-audit",
                "http",
                "http://127.0.0.1:1/mcp",
                "--contract",
                "a",
                "--write-contract",
                "b",
            ])
            .is_err()
        );
    }

    #[test]
    fn help_documents_the_exit_codes() {
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("Exit codes:"), "{help}");
        assert!(help.contains("2  could not audit"), "{help}");
    }
}
