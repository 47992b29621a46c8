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
    /// What the person and the untrusted-data envelope call the upstream (default: the
    /// command's file name, or the URL's host; never the name the upstream gives itself).
    #[arg(long, value_name = "NAME")]
    server_name: Option<String>,
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
    if cli.upstream_bearer_file.is_some() && cli.upstream_url.is_none() {
        return Err("--upstream-bearer-file applies to --upstream-url only".to_owned());
    }
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
    let mut options = options(&cli)?;
    if serve.http.is_none() {
        options = options.with_single_client();
    }
    if let Some(name) = &cli.server_name {
        options = options.with_name(name);
    }
    let proxy = ProxyServer::connect(spec, options)
        .await
        .map_err(|e| e.to_string())?;
    let refuses = proxy.clone();
    let mut builder = WriteGuard::builder(proxy.clone())
        .server_name(proxy.name())
        .refuse_calls_when(move |tool| refuses.refuses(tool));
    for tool in &cli.trust_read {
        builder = builder.trust_read(tool);
    }
    let upstream = proxy.upstream_name().to_owned();
    let name = proxy.name().to_owned();
    let log_start = move |started: Started| {
        tracing::info!(
            upstream,
            name,
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
    mcp_write_guard_serve::run_logged("mcp-write-guard-proxy", || {
        let serve = cli
            .serve
            .clone()
            .config(DEFAULT_STORE_PREFIX)
            .map_err(|e| e.to_string())?;
        let runtime = serve.runtime().map_err(|e| e.to_string())?;
        runtime.block_on(run(cli, &serve))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, String> {
        let mut all = vec!["mcp-write-guard-proxy"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map_err(|e| e.to_string())
    }

    #[test]
    fn the_upstream_is_the_command_after_the_double_dash() {
        let cli = parse(&["--trust-read", "read_graph", "--", "npx", "-y", "server"]).unwrap();
        assert_eq!(
            upstream(&cli).unwrap(),
            UpstreamSpec::Command {
                program: "npx".into(),
                args: vec!["-y".into(), "server".into()],
            }
        );
        assert_eq!(cli.trust_read, ["read_graph"]);
        let none = upstream(&parse(&[]).unwrap()).unwrap_err();
        assert!(none.contains("-- COMMAND"), "{none}");
    }

    #[test]
    fn an_http_upstream_takes_its_token_from_a_file_and_no_command() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "s3cret\n").unwrap();
        let file = token.to_str().unwrap();
        let cli = parse(&[
            "--upstream-url",
            "https://mcp.example/mcp",
            "--upstream-bearer-file",
            file,
        ])
        .unwrap();
        assert_eq!(
            upstream(&cli).unwrap(),
            UpstreamSpec::Http {
                url: "https://mcp.example/mcp".into(),
                bearer: Some("s3cret".into()),
            }
        );
        let spec = upstream(&cli).unwrap();
        assert!(!spec.shown().contains("s3cret"));
        assert!(!format!("{spec:?}").contains("s3cret"), "{spec:?}");
        std::fs::write(&token, "\n").unwrap();
        let empty = upstream(
            &parse(&[
                "--upstream-url",
                "https://m/mcp",
                "--upstream-bearer-file",
                file,
            ])
            .unwrap(),
        );
        assert!(empty.unwrap_err().contains("empty"));
        assert!(parse(&["--upstream-url", "https://m/mcp", "--", "npx"]).is_err());
        let stray = parse(&["--upstream-bearer-file", file, "--", "npx"]).unwrap();
        assert!(upstream(&stray).unwrap_err().contains("--upstream-url"));
    }

    #[test]
    fn a_pin_must_be_a_pin_file_and_the_timeout_at_least_a_second() {
        let dir = tempfile::tempdir().unwrap();
        let pin = dir.path().join("pin.json");
        std::fs::write(&pin, "{\"version\": 1, \"tools\": {}}").unwrap();
        let cli = parse(&["--pin", pin.to_str().unwrap(), "--", "x"]).unwrap();
        let refused = options(&cli).unwrap_err();
        assert!(refused.starts_with("--pin "), "{refused}");
        let missing = parse(&["--pin", "/nonexistent/pin.json", "--", "x"]).unwrap();
        assert!(options(&missing).is_err());
        let zero = parse(&["--upstream-timeout", "0", "--", "x"]).unwrap();
        assert!(options(&zero).unwrap_err().contains("at least 1 second"));
        let five = parse(&["--upstream-timeout", "5", "--", "x"]).unwrap();
        assert_eq!(options(&five).unwrap().timeout, Duration::from_secs(5));
    }

    #[test]
    fn the_serving_flags_are_the_reference_servers() {
        use clap::CommandFactory as _;
        let help = Cli::command().render_long_help().to_string();
        for flag in [
            "MCP_WRITES_ENABLED=true",
            "--http",
            "--auth-issuer",
            "--approval-page",
            "--store",
            "--audit-log",
            "--pin",
            "--trust-read",
            "--upstream-url",
        ] {
            assert!(help.contains(flag), "{flag}: {help}");
        }
        assert!(help.contains(DEFAULT_STORE_PREFIX), "{help}");
        let cli = parse(&["--http", "0.0.0.0:8080", "--", "x"]).unwrap();
        let refused = cli
            .serve
            .config(DEFAULT_STORE_PREFIX)
            .unwrap()
            .check()
            .unwrap_err();
        assert!(refused.to_string().contains("loopback"), "{refused}");
    }
}
