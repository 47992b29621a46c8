//! `store-server [--db PATH] [--audit-log FILE [--audit-log-key-file FILE]] [--http ADDR] [--auth-issuer URL --auth-audience AUD --auth-jwks
//! FILE_OR_URL [--auth-write-scope SCOPE] [--auth-jwks-ca PEM_FILE]] [--allow-origin URL]...
//! [--public-url URL] [--max-sessions N] [--approval-page [--approval-page-addr ADDR]
//! [--notify-webhook URL --notify-secret-file FILE]] [--approval-ttl SECS] [--progress-every SECS]
//! [--store memory|redis://HOST[:PORT][/DB] [--store-prefix NAME]]`: the
//! reference store over stdio (default) or streamable HTTP. Logs go to stderr; in stdio mode
//! stdout carries protocol messages only. Writes are refused unless `MCP_WRITES_ENABLED=true`.
//!
//! Every flag but `--db` is [`mcp_write_guard_serve::ServeArgs`], shared with the other binaries
//! that serve a guard.

use std::{path::PathBuf, process::ExitCode};

use clap::Parser;
use mcp_write_guard_serve::{ENVIRONMENT_HELP, ServeArgs, store_prefix_help};

/// Reference inventory and order MCP server on SQLite; every write needs the user's approval.
///
/// Over HTTP without --auth-*, the server listens on loopback only and every client on this
/// machine is one person ("local"). With --auth-*, every request needs a bearer token (a JWT
/// from the issuer, for the audience, signed by a key in the JWKS) and each verified subject is
/// its own person.
#[derive(Debug, Parser)]
#[command(name = "store-server", version, after_help = ENVIRONMENT_HELP)]
#[command(mut_arg("store_prefix", |arg| {
    arg.help(store_prefix_help(store_server::DEFAULT_STORE_PREFIX))
}))]
struct Cli {
    /// SQLite database file, created and seeded when missing.
    #[arg(long, value_name = "PATH", default_value = "store.db")]
    db: PathBuf,
    #[command(flatten)]
    serve: ServeArgs,
}

impl Cli {
    fn config(self) -> Result<store_server::Config, store_server::Error> {
        let serve = self.serve.config(store_server::DEFAULT_STORE_PREFIX)?;
        Ok(store_server::Config::new(self.db).with_serve(serve))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    mcp_write_guard_serve::run_logged("store-server", || {
        let config = cli.config()?;
        let runtime = config.serve.runtime()?;
        runtime.block_on(store_server::run(config))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<store_server::Config, String> {
        let mut all = vec!["store-server"];
        all.extend_from_slice(args);
        let cli = Cli::try_parse_from(all).map_err(|e| e.to_string())?;
        cli.config().map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_to_stdio_on_store_db() {
        let config = parse(&[]).unwrap();
        assert_eq!(config.db, PathBuf::from("store.db"));
        assert_eq!(config.serve.http, None);
        assert_eq!(config.serve.auth, None);
        config.check().unwrap();
    }

    #[test]
    fn takes_db_and_http() {
        let config = parse(&["--db", "/tmp/x.db", "--http", "127.0.0.1:8080"]).unwrap();
        assert_eq!(config.db, PathBuf::from("/tmp/x.db"));
        assert_eq!(config.serve.http, Some("127.0.0.1:8080".parse().unwrap()));
        config.check().unwrap();
    }

    #[test]
    fn help_names_the_writes_switch() {
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("MCP_WRITES_ENABLED=true"), "{help}");
        assert!(help.contains("--auth-issuer"), "{help}");
        for flag in [
            "--notify-webhook",
            "--notify-secret-file",
            "--progress-every",
        ] {
            assert!(help.contains(flag), "{flag}: {help}");
        }
    }

    #[test]
    fn help_names_the_store_prefix_default() {
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        assert!(
            help.contains(
                "The prefix of this server's Redis keys (default store-server): the same on every"
            ),
            "{help}"
        );
    }

    #[test]
    fn redis_keys_go_under_the_store_servers_prefix() {
        // What --store and --store-prefix take is ServeArgs' (mcp-write-guard-serve tests it);
        // the prefix they default to is this binary's.
        let store = parse(&["--store", "redis://h:1"]).unwrap().serve.store;
        assert!(
            matches!(
                &store,
                store_server::StoreBackend::Redis { prefix, .. }
                    if prefix == store_server::DEFAULT_STORE_PREFIX
            ),
            "{store:?}"
        );
    }
}
