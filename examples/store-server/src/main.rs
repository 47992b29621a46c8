//! `store-server [--db PATH] [--http ADDR]`: the reference store over stdio (default) or
//! streamable HTTP. Logs go to stderr; in stdio mode stdout carries protocol messages only.
//! Writes are refused unless `MCP_WRITES_ENABLED=true`.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use clap::Parser;
use tracing_subscriber::EnvFilter;

/// Reference inventory and order MCP server on SQLite; every write needs the user's approval.
#[derive(Debug, Parser)]
#[command(name = "store-server", version)]
struct Cli {
    /// SQLite database file, created and seeded when missing.
    #[arg(long, value_name = "PATH", default_value = "store.db")]
    db: PathBuf,
    /// Serve streamable HTTP at http://ADDR/mcp (for example 127.0.0.1:8080) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let mut config = store_server::Config::new(cli.db);
    if let Some(addr) = cli.http {
        config = config.with_http(addr);
    }
    match store_server::run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_to_stdio_on_store_db() {
        let cli = Cli::try_parse_from(["store-server"]).unwrap();
        assert_eq!(cli.db, PathBuf::from("store.db"));
        assert_eq!(cli.http, None);
    }

    #[test]
    fn takes_db_and_http() {
        let cli = Cli::try_parse_from([
            "store-server",
            "--db",
            "/tmp/x.db",
            "--http",
            "127.0.0.1:8080",
        ])
        .unwrap();
        assert_eq!(cli.db, PathBuf::from("/tmp/x.db"));
        assert_eq!(cli.http, Some("127.0.0.1:8080".parse().unwrap()));
    }

    #[test]
    fn refuses_a_bad_address() {
        assert!(Cli::try_parse_from(["store-server", "--http", "not-an-address"]).is_err());
    }
}
