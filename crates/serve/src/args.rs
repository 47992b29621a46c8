//! [`ServeArgs`]: the serving flags, for a binary to flatten into its own command line.

use std::{net::SocketAddr, path::PathBuf};

use crate::{AuthSettings, Error, NotifySettings, ServeConfig, StoreBackend};

/// The environment, as `--help` prints it: give it to the binary's command as its
/// `after_help`.
pub const ENVIRONMENT_HELP: &str = "\
Environment:
  MCP_WRITES_ENABLED=true  turn writes on (only the exact value `true`); otherwise every write
                           is refused and nothing is saved. Even then each write needs the
                           user's approval in their client.
  RUST_LOG=debug           more log lines on stderr (default: info).";

/// The help of `--store-prefix` naming `default`, the prefix the binary gives
/// [`ServeArgs::config`]. A binary shows it with
/// `#[command(mut_arg("store_prefix", |arg| arg.help(store_prefix_help("my-server"))))]`
/// on the command that flattens [`ServeArgs`]; without it, the help says that the server sets
/// the default.
pub fn store_prefix_help(default: &str) -> String {
    format!(
        "The prefix of this server's Redis keys (default {default}): the same on every replica, \
         another for another server on the same Redis"
    )
}

/// The flags that say how to serve a guard: stdio by default, or streamable HTTP (`--http`)
/// with its bearer-token auth, origins, public URL and sessions; the approval page and the
/// webhook; the approval clock and progress; where approvals live (`--store`); the audit file.
///
/// A binary puts them beside its own flags with `#[command(flatten)]` and turns them into a
/// [`ServeConfig`] with [`ServeArgs::config`]. The relations between the flags that clap can
/// check (`--auth-audience` needs `--auth-issuer`, ...) are checked as the command line is
/// read; the others by [`ServeConfig::check`].
#[derive(Debug, Clone, clap::Args)]
// The fields' doc comments are the flags' help, printed as written: URLs stay bare.
#[allow(rustdoc::bare_urls)]
pub struct ServeArgs {
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
    /// redis://HOST[:PORT][/DB], shared by every replica (see "Running replicas" in docs/operations.md).
    #[arg(long, value_name = "URL", default_value = "memory")]
    store: String,
    /// The prefix of this server's Redis keys (default: the server's own): the same on every
    /// replica, another for another server on the same Redis.
    #[arg(long, value_name = "NAME")]
    store_prefix: Option<String>,
}

impl ServeArgs {
    /// The settings these flags ask for; `--store redis://...` without `--store-prefix` keeps
    /// its keys under `default_store_prefix` (see [`StoreBackend::parse`]).
    ///
    /// Only what clap cannot check is left to [`ServeConfig::check`], which
    /// [`ServeConfig::prepare`] runs before anything is served.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a `--store` that is neither `memory` nor a `redis://` URL, or a
    /// `--store-prefix` with `memory`.
    pub fn config(self, default_store_prefix: &str) -> Result<ServeConfig, Error> {
        let store = StoreBackend::parse(
            &self.store,
            self.store_prefix.as_deref(),
            default_store_prefix,
        )?;
        let mut config = ServeConfig::new().with_max_sessions(self.max_sessions);
        if let Some(addr) = self.http {
            config = config.with_http(addr);
        }
        if let (Some(issuer), Some(audience), Some(jwks)) =
            (self.auth_issuer, self.auth_audience, self.auth_jwks)
        {
            let mut auth = AuthSettings::new(issuer, audience, jwks);
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
            config = config.with_notify(NotifySettings::new(url, secret_file));
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use clap::Parser;

    use super::*;

    /// The default Redis key prefix of the binary in these tests.
    const DEFAULT_PREFIX: &str = "test-server";

    /// A binary with the serving flags and none of its own.
    #[derive(Debug, Parser)]
    #[command(name = "test-server")]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn parse(args: &[&str]) -> Result<ServeConfig, String> {
        let mut all = vec!["test-server"];
        all.extend_from_slice(args);
        let cli = Cli::try_parse_from(all).map_err(|e| e.to_string())?;
        cli.serve.config(DEFAULT_PREFIX).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_to_stdio_in_memory() {
        let config = parse(&[]).unwrap();
        assert_eq!(config, ServeConfig::new());
        assert_eq!(config.http, None);
        assert_eq!(config.store, StoreBackend::Memory);
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
        let shown = format!("{:?}", NotifySettings::new("https://h.example/t0ken", "s"));
        assert!(
            shown.contains("h.example") && !shown.contains("t0ken"),
            "{shown}"
        );
        assert_eq!(
            config.notify,
            Some(NotifySettings::new("http://127.0.0.1:9/hook", "secret"))
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
        let unchecked = ServeConfig::new()
            .with_notify(NotifySettings::new("http://127.0.0.1:9/hook", "secret"));
        let error = unchecked.check().unwrap_err().to_string();
        assert!(error.contains("--approval-page"), "{error}");
    }

    #[test]
    fn the_webhook_refuses_a_bad_secret_file_or_url_without_quoting_them() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "0123456789abcdef0123456789abcdef\n").unwrap();
        let notify = |url: &str, file: &std::path::Path| {
            NotifySettings::new(url, file)
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
    fn the_store_is_memory_or_redis_under_the_binarys_prefix_unless_told() {
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
                prefix: DEFAULT_PREFIX.to_owned(),
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
        assert!(!refused.contains("hunter2"), "{refused}");
        assert!(parse(&["--store", "memory", "--store-prefix", "x"]).is_err());
    }

    #[test]
    fn the_help_names_every_flag_and_the_store_prefix_default_where_told() {
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        for flag in [
            "--audit-log",
            "--audit-log-key-file",
            "--http",
            "--auth-issuer",
            "--auth-audience",
            "--auth-jwks",
            "--auth-write-scope",
            "--auth-jwks-ca",
            "--allow-origin",
            "--public-url",
            "--max-sessions",
            "--approval-page",
            "--approval-page-addr",
            "--notify-webhook",
            "--notify-secret-file",
            "--approval-ttl",
            "--progress-every",
            "--store",
            "--store-prefix",
        ] {
            assert!(help.contains(flag), "{flag}: {help}");
        }
        assert!(help.contains("(default: the server's own)"), "{help}");

        #[derive(Debug, Parser)]
        #[command(name = "shop")]
        #[command(mut_arg("store_prefix", |arg| arg.help(store_prefix_help("shop"))))]
        struct Shop {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let help = Shop::command().render_long_help().to_string();
        assert!(
            help.contains("The prefix of this server's Redis keys (default shop): the same"),
            "{help}"
        );
    }
}
