//! `mcp-write-guard-proxy [OPTIONS] -- COMMAND [ARGS...]` or `mcp-write-guard-proxy [OPTIONS]
//! --upstream-url URL`: the guard in front of any MCP server. See the README. Every serving flag
//! (`--http`, `--auth-*`, `--approval-page`, `--store`, `--audit-log`, ...) is
//! [`mcp_write_guard_serve::ServeArgs`], shared with the reference server.

use std::{ffi::OsString, path::PathBuf, process::ExitCode, time::Duration};

use clap::Parser;
use mcp_write_guard_audit::PinFile;
use mcp_write_guard_proxy::{ProxyOptions, ProxyServer, UpstreamSpec};
use mcp_write_guard_rmcp::WriteGuard;
use mcp_write_guard_serve::{ENVIRONMENT_HELP, ServeArgs, Service, Started, store_prefix_help};

/// The Redis key prefix of `--store redis://...` unless `--store-prefix` says otherwise.
const DEFAULT_STORE_PREFIX: &str = "mcp-write-guard-proxy";

/// What the proxy says on stderr when a person, not a client, is at the other end of stdin.
const TERMINAL_HINT: &str = "mcp-write-guard-proxy speaks MCP (JSON-RPC) on stdin and stdout; \
typed text is not a command. Start it from an MCP client's configuration instead (see the \
README), or serve HTTP with --http 127.0.0.1:8080. End with Ctrl-D.";

/// Puts the write guard in front of any MCP server: every write needs a person's approval of
/// its exact arguments, untrusted output is wrapped, and a pinned tool surface is enforced.
#[derive(Debug, Parser)]
#[command(name = "mcp-write-guard-proxy", version, after_help = ENVIRONMENT_HELP)]
#[command(mut_arg("store_prefix", |arg| arg.help(store_prefix_help(DEFAULT_STORE_PREFIX))))]
struct Cli {
    /// Connect to a streamable-HTTP upstream at URL instead of starting COMMAND.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    upstream_url: Option<String>,
    /// Send the bearer token in FILE (one trailing line break dropped) to the --upstream-url.
    #[arg(long, value_name = "FILE", requires = "upstream_url")]
    upstream_bearer_file: Option<PathBuf>,
    /// mcp-audit's pin file (`mcp-audit --pin FILE ...`): refuse to start when the upstream's
    /// tools differ from it, and refuse calls to a tool that changes later.
    #[arg(long, value_name = "FILE")]
    pin: Option<PathBuf>,
    /// A read whose output is the upstream's own trusted data, returned without the
    /// untrusted-data envelope (repeatable).
    #[arg(long, value_name = "TOOL")]
    trust_read: Vec<String>,
    /// Cancel a request the upstream has not answered after SECS seconds (default 300).
    #[arg(long, value_name = "SECS")]
    upstream_timeout: Option<u64>,
    /// The upstream server's command and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
    #[command(flatten)]
    serve: ServeArgs,
}

fn upstream(cli: &Cli) -> Result<UpstreamSpec, String> {
    if let Some(url) = &cli.upstream_url {
        let bearer = match &cli.upstream_bearer_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("--upstream-bearer-file {}: {e}", path.display()))?;
                let token = text.strip_suffix('\n').unwrap_or(&text);
                let token = token.strip_suffix('\r').unwrap_or(token);
                if token.is_empty() {
                    return Err(format!(
                        "--upstream-bearer-file {}: the file is empty",
                        path.display()
                    ));
                }
                Some(token.to_owned())
            }
            None => None,
        };
        return Ok(UpstreamSpec::Http {
            url: url.clone(),
            bearer,
        });
    }
    let mut command = cli.command.iter();
    let Some(program) = command.next() else {
        return Err(
            "name the upstream server: mcp-write-guard-proxy [OPTIONS] -- COMMAND [ARGS...], or \
             --upstream-url URL"
                .to_owned(),
        );
    };
    Ok(UpstreamSpec::Command {
        program: program.clone(),
        args: command.cloned().collect(),
    })
}

fn options(cli: &Cli) -> Result<ProxyOptions, String> {
    let mut options = ProxyOptions::default();
    if let Some(path) = &cli.pin {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("--pin {}: {e}", path.display()))?;
        let pin =
            PinFile::from_json(&text).map_err(|e| format!("--pin {}: {e}", path.display()))?;
        options = options.with_pin(pin);
    }
    if let Some(secs) = cli.upstream_timeout {
        if secs == 0 {
            return Err("--upstream-timeout must be at least 1 second".to_owned());
        }
        options = options.with_timeout(Duration::from_secs(secs));
    }
    Ok(options)
}

async fn run(cli: Cli, serve: &mcp_write_guard_serve::ServeConfig) -> Result<(), String> {
    let prepared = serve.prepare().map_err(|e| e.to_string())?;
    let spec = upstream(&cli)?;
    let options = options(&cli)?;
    let proxy = ProxyServer::connect(spec, options)
        .await
        .map_err(|e| e.to_string())?;
    let refuses = proxy.clone();
    let mut builder = WriteGuard::builder(proxy.clone())
        .server_name(proxy.upstream_name())
        .refuse_calls_when(move |tool| refuses.refuses(tool));
    for tool in &cli.trust_read {
        builder = builder.trust_read(tool);
    }
    let upstream = proxy.upstream_name().to_owned();
    let log_start = move |started: Started| {
        tracing::info!(
            upstream,
            writes_enabled = started.writes_enabled,
            principal = started.principal,
            "mcp-write-guard-proxy starting"
        );
    };
    let service = Service::new(TERMINAL_HINT, &log_start);
    prepared
        .serve(builder, &service)
        .await
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(err) = mcp_write_guard_serve::init_logging() {
        eprintln!("mcp-write-guard-proxy: {err}");
        return ExitCode::FAILURE;
    }
    let serve = cli.serve.clone().config(DEFAULT_STORE_PREFIX);
    let served = serve.map_err(|e| e.to_string()).and_then(|serve| {
        let runtime = serve.runtime().map_err(|e| e.to_string())?;
        runtime.block_on(run(cli, &serve))
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err}");
            ExitCode::FAILURE
        }
    }
}
