//! `store-server [--db PATH] [--audit-log FILE [--audit-log-key-file FILE]] [--http ADDR] [--auth-issuer URL --auth-audience AUD --auth-jwks
//! FILE_OR_URL [--auth-write-scope SCOPE] [--auth-jwks-ca PEM_FILE]] [--allow-origin URL]...
//! [--public-url URL] [--max-sessions N] [--approval-page [--approval-page-addr ADDR]
//! [--notify-webhook URL --notify-secret-file FILE]] [--approval-ttl SECS] [--progress-every SECS]
//! [--store memory|redis://HOST[:PORT][/DB] [--store-prefix NAME]]`: the
//! reference store over stdio (default) or streamable HTTP. Logs go to stderr; in stdio mode
//! stdout carries protocol messages only. Writes are refused unless `MCP_WRITES_ENABLED=true`.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use clap::Parser;
use tracing_subscriber::EnvFilter;

/// The environment, as `--help` prints it.
const ENVIRONMENT_HELP: &str = "\
Environment:
  MCP_WRITES_ENABLED=true  turn writes on (only the exact value `true`); otherwise every write
                           is refused and nothing is saved. Even then each write needs the
                           user's approval in their client.
  RUST_LOG=debug           more log lines on stderr (default: info).";

/// Reference inventory and order MCP server on SQLite; every write needs the user's approval.
///
/// Over HTTP without --auth-*, the server listens on loopback only and every client on this
/// machine is one person ("local"). With --auth-*, every request needs a bearer token (a JWT
/// from the issuer, for the audience, signed by a key in the JWKS) and each verified subject is
/// its own person.
#[derive(Debug, Parser)]
#[command(name = "store-server", version, after_help = ENVIRONMENT_HELP)]
struct Cli {
    /// SQLite database file, created and seeded when missing.
    #[arg(long, value_name = "PATH", default_value = "store.db")]
    db: PathBuf,
    /// Also write every audit record to FILE, one JSON line each, chained (each names the
    /// SHA-256 of the line before it) and synced to disk before the call is answered; check it
    /// with `mcp-audit verify-log FILE`. An existing file's chain is continued.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Link the audit file's chain by HMAC-SHA-256 under the bytes of KEY_FILE, so that someone
    /// who can rewrite the file but not read the key cannot forge it (`mcp-audit verify-log
    /// --key-file KEY_FILE`).
    #[arg(long, value_name = "KEY_FILE", requires = "audit_log")]
    audit_log_key_file: Option<PathBuf>,
    /// Serve streamable HTTP at http://ADDR/mcp (for example 127.0.0.1:8080) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Require bearer tokens issued by URL (the `iss` claim).
    #[arg(
        long,
        value_name = "URL",
        requires_all = ["auth_audience", "auth_jwks", "http"]
    )]
    auth_issuer: Option<String>,
    /// The audience tokens must be for (the `aud` claim).
    #[arg(long, value_name = "AUD", requires = "auth_issuer")]
    auth_audience: Option<String>,
    /// The issuer's signing keys: a JWKS file, or an https URL (fetched and cached).
    #[arg(long, value_name = "FILE_OR_URL", requires = "auth_issuer")]
    auth_jwks: Option<String>,
    /// The scope a token must grant for writes (reads need none).
    #[arg(long, value_name = "SCOPE", requires = "auth_issuer")]
    auth_write_scope: Option<String>,
    /// Trust the CA certificates in this PEM file, instead of the public web roots, for an
    /// https --auth-jwks URL (an issuer behind a private CA).
    #[arg(long, value_name = "PEM_FILE", requires = "auth_issuer")]
    auth_jwks_ca: Option<PathBuf>,
    /// Also accept requests from this browser origin (repeatable); loopback origins and
    /// requests without an Origin header are always accepted, every other origin gets 403.
    #[arg(long, value_name = "URL", requires = "http")]
    allow_origin: Vec<String>,
    /// The URL clients use for the endpoint, when a proxy serves it (https://mcp.example.com/mcp):
    /// the protected-resource metadata names it, and its host is an accepted Host header.
    #[arg(long, value_name = "URL", requires = "http")]
    public_url: Option<String>,
    /// The most live HTTP sessions (older protocol era); idle sessions close after 5 minutes.
    #[arg(long, value_name = "N", default_value_t = mcp_write_guard_http::DEFAULT_MAX_SESSIONS)]
    max_sessions: usize,
    /// Ask on this server's own approval page (http://.../approvals/ID) when the client supports
    /// URL-mode elicitation; clients with forms only keep the form. Over --http the page is
    /// served on the same listener; over stdio on --approval-page-addr.
    #[arg(long)]
    approval_page: bool,
    /// Over stdio, where the approval page listens (default 127.0.0.1:0: loopback, a free port;
    /// the address is logged to stderr).
    #[arg(long, value_name = "ADDR", requires = "approval_page")]
    approval_page_addr: Option<SocketAddr>,
    /// When a client cannot ask its user (no elicitation), open the question on the approval
    /// page and POST its link, signed, to URL (a receiver of yours, a Slack incoming webhook):
    /// the call is answered at once, nothing saved, and the same call made again after the
    /// person approved applies the change once. Needs --approval-page and --notify-secret-file.
    #[arg(
        long,
        value_name = "URL",
        requires_all = ["notify_secret_file", "approval_page"]
    )]
    notify_webhook: Option<String>,
    /// The file holding the webhook's shared secret (one trailing line break dropped): each
    /// body is signed with HMAC-SHA256 in the X-Signature-256 header.
    #[arg(long, value_name = "FILE", requires = "notify_webhook")]
    notify_secret_file: Option<PathBuf>,
    /// How long a person has to answer, in seconds (default and most: 120).
    #[arg(long, value_name = "SECS")]
    approval_ttl: Option<u64>,
    /// While a call waits for the person (older protocol era), send progress notifications this
    /// often, in seconds, so clients that reset their timeout on progress keep waiting
    /// (default 5, at most 120).
    #[arg(long, value_name = "SECS")]
    progress_every: Option<u64>,
    /// Where approvals, round trips and tokens live: `memory` (this process) or
    /// redis://HOST[:PORT][/DB], shared by every replica (see "Running replicas" in the README).
    #[arg(long, value_name = "URL", default_value = "memory")]
    store: String,
    /// The prefix of this server's Redis keys (default store-server): the same on every
    /// replica, another for another server on the same Redis.
    #[arg(long, value_name = "NAME")]
    store_prefix: Option<String>,
}

impl Cli {
    fn config(self) -> Result<store_server::Config, store_server::Error> {
        let store = store_server::StoreBackend::parse(&self.store, self.store_prefix.as_deref())?;
        let mut config = store_server::Config::new(self.db).with_max_sessions(self.max_sessions);
        if let Some(addr) = self.http {
            config = config.with_http(addr);
        }
        if let (Some(issuer), Some(audience), Some(jwks)) =
            (self.auth_issuer, self.auth_audience, self.auth_jwks)
        {
            let mut auth = store_server::AuthSettings::new(issuer, audience, jwks);
            if let Some(scope) = self.auth_write_scope {
                auth = auth.with_write_scope(scope);
            }
            if let Some(ca) = self.auth_jwks_ca {
                auth = auth.with_jwks_ca(ca);
            }
            config = config.with_auth(auth);
        }
        if let Some(url) = self.public_url {
            config = config.with_public_url(url);
        }
        for origin in self.allow_origin {
            config = config.allow_origin(origin);
        }
        if self.approval_page {
            config = config.with_approval_page(self.approval_page_addr);
        }
        if let (Some(url), Some(secret_file)) = (self.notify_webhook, self.notify_secret_file) {
            config = config.with_notify(store_server::NotifySettings::new(url, secret_file));
        }
        if let Some(secs) = self.approval_ttl {
            config = config.with_approval_ttl(std::time::Duration::from_secs(secs));
        }
        if let Some(secs) = self.progress_every {
            config = config.with_progress_every(std::time::Duration::from_secs(secs));
        }
        if let Some(path) = self.audit_log {
            config = config.with_audit_log(path);
        }
        if let Some(key_file) = self.audit_log_key_file {
            config = config.with_audit_log_key(key_file);
        }
        Ok(config.with_store(store))
    }
}

/// Fields written so that every event is one line whatever it carries: each value as its `Debug`
/// form (strings quoted and escaped), and any control character left in it (from a value
/// logged with `Display`, by this server or a library, such as a request id a client chose)
/// written as an escape (`\n`, `\u{1b}`). So no text a client sends can start a line of its
/// own, and a line that passes for an audit record can only come from the audit sink (README,
/// "Reading the audit records in the log").
fn one_line_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + 'static {
    use tracing_subscriber::field::MakeExt as _;
    tracing_subscriber::fmt::format::debug_fn(|writer, field, value| {
        let shown = format!("{value:?}");
        let shown: String = shown
            .chars()
            .flat_map(|c| {
                let escaped: Vec<char> = if c.is_control() {
                    c.escape_default().collect()
                } else {
                    vec![c]
                };
                escaped
            })
            .collect();
        if field.name() == "message" {
            write!(writer, "{shown}")
        } else {
            write!(writer, "{}={shown}", field.name())
        }
    })
    .delimited(" ")
}

/// Each event as `TIME LEVEL TARGET: MESSAGE FIELDS`, one line, without the span list (whose
/// fields would come before the target): the target is always the third token, so a reader
/// tells an audit record (`mcp_write_guard_rmcp::audit:`) from any other line by position.
struct OneLine;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for OneLine
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'w> tracing_subscriber::fmt::FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        use tracing_subscriber::fmt::time::FormatTime as _;
        tracing_subscriber::fmt::time::SystemTime.format_time(&mut writer)?;
        let meta = event.metadata();
        write!(writer, " {:>5} {}: ", meta.level(), meta.target())?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .event_format(OneLine)
        .fmt_fields(one_line_fields())
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let served = cli.config().and_then(|config| {
        // Over stdio one client talks to one connection, strictly in turn: one thread serves it
        // without handing each message between threads (SQLite still runs on the blocking
        // pool). Over HTTP, many clients at once: a thread per core.
        let runtime = if config.http.is_some() {
            tokio::runtime::Builder::new_multi_thread()
        } else {
            tokio::runtime::Builder::new_current_thread()
        }
        .enable_all()
        .build()?;
        runtime.block_on(store_server::run(config))
    });
    match served {
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
        assert_eq!(config.http, None);
        assert_eq!(config.auth, None);
        config.check().unwrap();
    }

    #[test]
    fn takes_an_audit_log_and_its_key_only_with_it() {
        let config = parse(&["--audit-log", "a.jsonl", "--audit-log-key-file", "k"]).unwrap();
        assert_eq!(config.audit_log, Some(PathBuf::from("a.jsonl")));
        assert_eq!(config.audit_log_key, Some(PathBuf::from("k")));
        assert!(parse(&["--audit-log-key-file", "k"]).is_err());
    }

    #[test]
    fn takes_db_and_http() {
        let config = parse(&["--db", "/tmp/x.db", "--http", "127.0.0.1:8080"]).unwrap();
        assert_eq!(config.db, PathBuf::from("/tmp/x.db"));
        assert_eq!(config.http, Some("127.0.0.1:8080".parse().unwrap()));
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
    fn the_approval_page_takes_its_own_address_over_stdio_only() {
        let config = parse(&["--approval-page"]).unwrap();
        assert!(config.approval_page);
        assert_eq!(config.approval_page_addr, None);
        config.check().unwrap();
        let config = parse(&["--approval-page", "--approval-page-addr", "127.0.0.1:9000"]).unwrap();
        assert_eq!(
            config.approval_page_addr,
            Some("127.0.0.1:9000".parse().unwrap())
        );
        config.check().unwrap();
        assert!(parse(&["--approval-page-addr", "127.0.0.1:9000"]).is_err());
        let over_http = parse(&[
            "--http",
            "127.0.0.1:8080",
            "--approval-page",
            "--approval-page-addr",
            "127.0.0.1:9000",
        ])
        .unwrap();
        assert!(
            over_http.check().is_err(),
            "over --http the page shares the listener"
        );
        parse(&["--http", "127.0.0.1:8080", "--approval-page"])
            .unwrap()
            .check()
            .unwrap();
    }

    #[test]
    fn the_approval_clock_may_only_be_shorter() {
        for secs in ["1", "120"] {
            parse(&["--approval-ttl", secs]).unwrap().check().unwrap();
        }
        for secs in ["0", "121"] {
            assert!(
                parse(&["--approval-ttl", secs]).unwrap().check().is_err(),
                "{secs}"
            );
        }
        assert!(parse(&["--approval-ttl", "-1"]).is_err());
    }

    #[test]
    fn progress_every_takes_seconds_within_the_clock() {
        assert_eq!(parse(&[]).unwrap().progress_every, None);
        for secs in ["1", "5", "120"] {
            let config = parse(&["--progress-every", secs]).unwrap();
            assert_eq!(
                config.progress_every,
                Some(std::time::Duration::from_secs(secs.parse().unwrap()))
            );
            config.check().unwrap();
        }
        for secs in ["0", "121"] {
            let error = parse(&["--progress-every", secs])
                .unwrap()
                .check()
                .unwrap_err()
                .to_string();
            assert!(error.contains("--progress-every"), "{secs}: {error}");
        }
        assert!(parse(&["--progress-every", "-1"]).is_err());
        assert!(parse(&["--progress-every", "1.5"]).is_err());
    }

    #[test]
    fn the_webhook_needs_its_secret_and_the_approval_page() {
        let both = [
            "--notify-webhook",
            "http://127.0.0.1:9/hook",
            "--notify-secret-file",
            "secret",
        ];
        let config = parse(&[&["--approval-page"][..], &both].concat()).unwrap();
        let shown = format!(
            "{:?}",
            store_server::NotifySettings::new("https://h.example/t0ken", "s")
        );
        assert!(
            shown.contains("h.example") && !shown.contains("t0ken"),
            "{shown}"
        );
        assert_eq!(
            config.notify,
            Some(store_server::NotifySettings::new(
                "http://127.0.0.1:9/hook",
                "secret"
            ))
        );
        config.check().unwrap();
        let over_http = parse(&[&["--http", "127.0.0.1:1", "--approval-page"][..], &both].concat());
        over_http.unwrap().check().unwrap();

        let without_page = parse(&both).unwrap_err();
        assert!(without_page.contains("--approval-page"), "{without_page}");
        let without_secret = parse(&[
            "--approval-page",
            "--notify-webhook",
            "http://127.0.0.1:9/hook",
        ])
        .unwrap_err();
        assert!(
            without_secret.contains("--notify-secret-file"),
            "{without_secret}"
        );
        let without_url =
            parse(&["--approval-page", "--notify-secret-file", "secret"]).unwrap_err();
        assert!(without_url.contains("--notify-webhook"), "{without_url}");

        // Built without the command line, the check says the same.
        let unchecked = store_server::Config::new("store.db").with_notify(
            store_server::NotifySettings::new("http://127.0.0.1:9/hook", "secret"),
        );
        let error = unchecked.check().unwrap_err().to_string();
        assert!(error.contains("--approval-page"), "{error}");
    }

    #[test]
    fn the_webhook_refuses_a_bad_secret_file_or_url_without_quoting_them() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "0123456789abcdef0123456789abcdef\n").unwrap();
        let notify = |url: &str, file: &std::path::Path| {
            store_server::NotifySettings::new(url, file)
                .notifier()
                .map_err(|e| e.to_string())
        };
        notify("http://127.0.0.1:9/hook", &secret).unwrap();

        let missing = notify("http://127.0.0.1:9/hook", &dir.path().join("nope")).unwrap_err();
        assert!(missing.starts_with("--notify-secret-file: "), "{missing}");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let empty = notify("http://127.0.0.1:9/hook", &empty).unwrap_err();
        assert!(empty.starts_with("--notify-secret-file: "), "{empty}");

        for url in [
            "ftp://127.0.0.1/hook",
            "HTTP://Hooks.Example/t0ken",
            "not a url",
        ] {
            let refused = notify(url, &secret).unwrap_err();
            assert!(
                refused.starts_with("--notify-webhook: "),
                "{url}: {refused}"
            );
            assert!(!refused.contains("t0ken"), "{refused}");
        }
    }

    #[test]
    fn refuses_a_bad_address() {
        assert!(parse(&["--http", "not-an-address"]).is_err());
    }

    #[test]
    fn refuses_to_serve_other_machines_without_auth() {
        let config = parse(&["--http", "0.0.0.0:8080"]).unwrap();
        let error = config.check().unwrap_err().to_string();
        assert!(error.contains("loopback"), "{error}");
        assert!(error.contains("--auth-issuer"), "{error}");
        let v6 = parse(&["--http", "[::]:8080"]).unwrap();
        assert!(v6.check().is_err());
        assert!(parse(&["--http", "[::1]:8080"]).unwrap().check().is_ok());
    }

    #[test]
    fn auth_needs_all_three_settings_and_http() {
        let auth = [
            "--http",
            "0.0.0.0:8080",
            "--auth-issuer",
            "https://issuer.example",
            "--auth-audience",
            "store",
            "--auth-jwks",
            "jwks.json",
            "--auth-write-scope",
            "store:write",
            "--public-url",
            "http://mcp.example:8080/mcp",
        ];
        let config = parse(&auth).unwrap();
        config.check().unwrap();
        let without_public_url = parse(&auth[..auth.len() - 2]).unwrap();
        let error = without_public_url.check().unwrap_err().to_string();
        assert!(error.contains("--public-url"), "{error}");
        let settings = config.auth.unwrap();
        assert_eq!(settings.issuer, "https://issuer.example");
        assert_eq!(settings.jwks_ca, None);
        assert_eq!(settings.write_scope.as_deref(), Some("store:write"));
        assert!(parse(&["--http", "127.0.0.1:1", "--auth-issuer", "https://i"]).is_err());
        assert!(parse(&["--auth-audience", "store"]).is_err());
        assert!(parse(&auth[2..]).is_err(), "auth without --http");
    }

    #[test]
    fn origins_must_be_origins() {
        let ok = parse(&[
            "--http",
            "127.0.0.1:1",
            "--allow-origin",
            "https://app.example",
        ]);
        let config = ok.unwrap();
        assert_eq!(config.allow_origins, ["https://app.example"]);
        config.check().unwrap();
        for bad in [
            "app.example",
            "https://app.example/",
            "https://a.example:x",
            "ftp://a",
        ] {
            let config = parse(&["--http", "127.0.0.1:1", "--allow-origin", bad]).unwrap();
            assert!(config.check().is_err(), "{bad}");
        }
        assert!(
            parse(&["--max-sessions", "0", "--http", "127.0.0.1:1"])
                .unwrap()
                .check()
                .is_err()
        );
    }

    #[test]
    fn the_store_is_memory_or_a_redis_url() {
        use store_server::StoreBackend;
        assert_eq!(parse(&[]).unwrap().store, StoreBackend::Memory);
        assert_eq!(
            parse(&["--store", "memory"]).unwrap().store,
            StoreBackend::Memory
        );
        assert_eq!(
            parse(&["--store", "redis://127.0.0.1:6379/2"])
                .unwrap()
                .store,
            StoreBackend::Redis {
                url: "redis://127.0.0.1:6379/2".to_owned(),
                prefix: store_server::DEFAULT_STORE_PREFIX.to_owned(),
            }
        );
        assert_eq!(
            parse(&["--store", "redis://h:1", "--store-prefix", "shop-eu"])
                .unwrap()
                .store,
            StoreBackend::Redis {
                url: "redis://h:1".to_owned(),
                prefix: "shop-eu".to_owned(),
            }
        );
        let refused = parse(&["--store", "postgres://user:hunter2@db/x"]).unwrap_err();
        assert!(refused.contains("redis://HOST"), "{refused}");
        assert!(
            !refused.contains("hunter2"),
            "the password is not repeated: {refused}"
        );
        assert!(parse(&["--store", "memory", "--store-prefix", "x"]).is_err());
    }
}
