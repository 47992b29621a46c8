//! [`ServeConfig`]: how a guard is to be served, and [`ServeConfig::check`], which refuses what
//! must not start. Nothing here opens a file or a socket.

use std::{net::SocketAddr, path::PathBuf};

use mcp_write_guard_http::{DEFAULT_MAX_SESSIONS, exact_origin, is_plain_endpoint_url};
use mcp_write_guard_webhook::WebhookNotifier;

use crate::Error;

/// Bearer-token settings (`--auth-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuthSettings {
    /// The required `iss`.
    pub issuer: String,
    /// The required `aud`.
    pub audience: String,
    /// A JWKS file, or an `https` URL.
    pub jwks: String,
    /// The scope writes need, if any.
    pub write_scope: Option<String>,
    /// A PEM file of the CA certificates trusted for an https JWKS URL, instead of the public
    /// web roots (an issuer behind a private CA).
    pub jwks_ca: Option<PathBuf>,
}

impl AuthSettings {
    /// Tokens from `issuer` for `audience`, verified with the keys at `jwks`.
    pub fn new(
        issuer: impl Into<String>,
        audience: impl Into<String>,
        jwks: impl Into<String>,
    ) -> Self {
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
            jwks: jwks.into(),
            write_scope: None,
            jwks_ca: None,
        }
    }

    /// Trust the CA certificates in the PEM file `path` for an https JWKS URL.
    #[must_use]
    pub fn with_jwks_ca(mut self, path: impl Into<PathBuf>) -> Self {
        self.jwks_ca = Some(path.into());
        self
    }

    /// Writes need `scope`.
    #[must_use]
    pub fn with_write_scope(mut self, scope: impl Into<String>) -> Self {
        self.write_scope = Some(scope.into());
        self
    }
}

/// How a guard is to be served: stdio or streamable HTTP, who is asking, where approvals live,
/// where a person is asked. Made by [`ServeArgs::config`](crate::ServeArgs::config) from the
/// command line, or built here; [`ServeConfig::check`] refuses what must not start.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServeConfig {
    /// Serve streamable HTTP on this address instead of stdio.
    pub http: Option<SocketAddr>,
    /// Bearer-token auth (HTTP only). Without it, HTTP must bind loopback and the machine is
    /// one principal.
    pub auth: Option<AuthSettings>,
    /// The URL clients use for the endpoint when it differs from `http://ADDR/mcp` (behind a
    /// proxy): the metadata's `resource`, and its host is an accepted `Host`.
    pub public_url: Option<String>,
    /// Browser origins accepted besides loopback ones.
    pub allow_origins: Vec<String>,
    /// The most live HTTP sessions.
    pub max_sessions: usize,
    /// Ask on the server's own approval page when the client supports URL-mode elicitation.
    pub approval_page: bool,
    /// Over stdio, where the page listens (default `127.0.0.1:0`: loopback, any free port).
    pub approval_page_addr: Option<SocketAddr>,
    /// A shorter approval clock than the default two minutes (tests).
    pub approval_ttl: Option<std::time::Duration>,
    /// How often a call waiting for the person sends `notifications/progress` (older protocol
    /// era); default [`mcp_write_guard_rmcp::DEFAULT_PROGRESS_EVERY`].
    pub progress_every: Option<std::time::Duration>,
    /// Where a question goes when the client cannot ask its user: a signed webhook
    /// (`--notify-webhook`, `--notify-secret-file`). Needs the approval page.
    pub notify: Option<NotifySettings>,
    /// Where approvals, round trips, pages and tokens live.
    pub store: StoreBackend,
    /// A file of its own for the audit records (`--audit-log`), chained so that
    /// `mcp-audit verify-log` shows any change; the records go to the log (stderr) too.
    pub audit_log: Option<PathBuf>,
    /// The key of the audit file's chain (`--audit-log-key-file`): each link an HMAC under it.
    pub audit_log_key: Option<PathBuf>,
}

/// The webhook that tells a person about a question when the client cannot ask its user
/// (`--notify-webhook URL --notify-secret-file FILE`): the guard opens the question on the
/// approval page and POSTs its link, signed with the secret, to the URL
/// ([`mcp_write_guard_webhook::WebhookNotifier`]).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NotifySettings {
    /// The URL each notice is POSTed to, written as it is sent. May carry a token in its path
    /// (Slack's incoming webhooks do): never logged.
    pub webhook: String,
    /// The file holding the signing secret (one trailing line break dropped).
    pub secret_file: PathBuf,
}

impl std::fmt::Debug for NotifySettings {
    /// Shows the webhook's host and port only: its path or query may carry a token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifySettings")
            .field(
                "webhook_host",
                &authority(&self.webhook).unwrap_or("(not a URL)"),
            )
            .field("secret_file", &self.secret_file)
            .finish()
    }
}

impl NotifySettings {
    /// Notices POSTed to `webhook`, signed with the secret in `secret_file`.
    pub fn new(webhook: impl Into<String>, secret_file: impl Into<PathBuf>) -> Self {
        Self {
            webhook: webhook.into(),
            secret_file: secret_file.into(),
        }
    }

    /// The notifier: the secret read from its file, the URL checked.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the flag: a secret file that cannot be read or is empty, a URL
    /// that is not `http`/`https` or not written as it is sent. The message never quotes the
    /// URL or the secret.
    pub fn notifier(&self) -> Result<WebhookNotifier, Error> {
        let secret = WebhookNotifier::secret_from_file(&self.secret_file)
            .map_err(|e| Error::Config(format!("--notify-secret-file: {e}")))?;
        WebhookNotifier::new(&self.webhook, secret)
            .map_err(|e| Error::Config(format!("--notify-webhook: {e}")))
    }
}

/// Where the guard keeps approvals, round-trip state, approval pages and confirmation tokens
/// (`--store`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreBackend {
    /// In this process's memory (`--store memory`, the default): one server, one process.
    Memory,
    /// On a Redis shared by every replica (`--store redis://HOST:PORT[/DB]`), under `prefix`
    /// (`--store-prefix`, or the default the server gives [`StoreBackend::parse`]).
    Redis {
        /// The Redis URL.
        url: String,
        /// The key prefix: the same for every replica of one server.
        prefix: String,
    },
}

impl StoreBackend {
    /// Reads `--store`: `memory`, or a `redis://` URL, its keys under `prefix`
    /// (`--store-prefix`) or else under `default_prefix`.
    ///
    /// The default prefix is the server's, not this crate's: each server keeps the one it has
    /// always used (`store-server` for the reference server), so that its replicas and its
    /// earlier versions find the same keys, and two different servers on one Redis do not share
    /// approvals unless told to.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for anything else, and for a prefix with `memory`. The message leaves
    /// out any password in `value`.
    pub fn parse(value: &str, prefix: Option<&str>, default_prefix: &str) -> Result<Self, Error> {
        if value == "memory" {
            if prefix.is_some() {
                return Err(Error::Config(
                    "--store-prefix applies to --store redis://... only".to_owned(),
                ));
            }
            return Ok(Self::Memory);
        }
        if value.starts_with("redis://") {
            return Ok(Self::Redis {
                url: value.to_owned(),
                prefix: prefix.unwrap_or(default_prefix).to_owned(),
            });
        }
        Err(Error::Config(format!(
            "--store {}: give `memory` or redis://HOST[:PORT][/DB]",
            without_password(value)
        )))
    }
}

/// `url` with any `user:password@` left out, for logs and messages.
pub(crate) fn without_password(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            format!("{scheme}://{host}{path}")
        }
        None => "(not a URL)".to_owned(),
    }
}

/// The host (with port, if any) of an `http(s)://` URL.
pub(crate) fn authority(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let host = rest.split(['/', '?', '#']).next()?;
    (!host.is_empty() && !host.contains('@')).then_some(host)
}

impl Default for ServeConfig {
    /// Stdio, approvals in memory, nothing else.
    fn default() -> Self {
        Self {
            http: None,
            auth: None,
            public_url: None,
            allow_origins: Vec::new(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            approval_page: false,
            approval_page_addr: None,
            approval_ttl: None,
            progress_every: None,
            notify: None,
            store: StoreBackend::Memory,
            audit_log: None,
            audit_log_key: None,
        }
    }
}

impl ServeConfig {
    /// Stdio, approvals in memory, nothing else (the [`Default`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps approvals, round trips, pages and tokens in `store` (default: memory).
    #[must_use]
    pub fn with_store(mut self, store: StoreBackend) -> Self {
        self.store = store;
        self
    }

    /// Also writes every audit record to `path`, one chained JSON line each
    /// ([`mcp_write_guard_rmcp::JsonLinesSink`]): on disk before the call is answered.
    #[must_use]
    pub fn with_audit_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.audit_log = Some(path.into());
        self
    }

    /// Links the audit file's chain by HMAC-SHA-256 under the bytes of `key_file`
    /// ([`mcp_write_guard_rmcp::JsonLinesSink::open_keyed`]); needs
    /// [`ServeConfig::with_audit_log`].
    #[must_use]
    pub fn with_audit_log_key(mut self, key_file: impl Into<PathBuf>) -> Self {
        self.audit_log_key = Some(key_file.into());
        self
    }

    /// Asks on the approval page where the client supports URL-mode elicitation: over HTTP on
    /// the same listener, over stdio on `addr` (default `127.0.0.1:0`).
    #[must_use]
    pub fn with_approval_page(mut self, addr: Option<SocketAddr>) -> Self {
        self.approval_page = true;
        self.approval_page_addr = addr;
        self
    }

    /// An approval clock of `ttl` instead of two minutes (at most two minutes).
    #[must_use]
    pub fn with_approval_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.approval_ttl = Some(ttl);
        self
    }

    /// Progress notifications every `every` while a call waits for the person (older protocol
    /// era), instead of every five seconds.
    #[must_use]
    pub fn with_progress_every(mut self, every: std::time::Duration) -> Self {
        self.progress_every = Some(every);
        self
    }

    /// Tells a person through `notify` when the client cannot ask its user (needs
    /// [`ServeConfig::with_approval_page`]).
    #[must_use]
    pub fn with_notify(mut self, notify: NotifySettings) -> Self {
        self.notify = Some(notify);
        self
    }

    /// Streamable HTTP on `addr` instead of stdio.
    #[must_use]
    pub fn with_http(mut self, addr: SocketAddr) -> Self {
        self.http = Some(addr);
        self
    }

    /// Bearer-token auth on the HTTP endpoint.
    #[must_use]
    pub fn with_auth(mut self, auth: AuthSettings) -> Self {
        self.auth = Some(auth);
        self
    }

    /// The endpoint's public URL (behind a proxy).
    #[must_use]
    pub fn with_public_url(mut self, url: impl Into<String>) -> Self {
        self.public_url = Some(url.into());
        self
    }

    /// Accepts requests from the browser origin `origin` (`https://app.example.com`).
    #[must_use]
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allow_origins.push(origin.into());
        self
    }

    /// At most `max` live HTTP sessions.
    #[must_use]
    pub fn with_max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max;
        self
    }

    /// Refuses what must not start: auth without HTTP, HTTP to other machines without auth,
    /// unusable origins or public URL, a webhook without the approval page it links to, an
    /// audit key without the audit file.
    ///
    /// # Errors
    ///
    /// [`Error::Config`], saying why and what to pass.
    pub fn check(&self) -> Result<(), Error> {
        if let Some(ttl) = self.approval_ttl
            && (ttl.is_zero() || ttl > std::time::Duration::from_secs(120))
        {
            return Err(Error::Config(
                "--approval-ttl must be between 1 and 120 seconds".to_owned(),
            ));
        }
        if let Some(every) = self.progress_every
            && (every < std::time::Duration::from_secs(1)
                || every > std::time::Duration::from_secs(120))
        {
            return Err(Error::Config(
                "--progress-every must be between 1 and 120 seconds (a call waits for the person \
                 at most the approval clock, 120 seconds)"
                    .to_owned(),
            ));
        }
        if self.audit_log_key.is_some() && self.audit_log.is_none() {
            return Err(Error::Config(
                "--audit-log-key-file needs --audit-log: it keys that file's chain".to_owned(),
            ));
        }
        if self.notify.is_some() && !self.approval_page {
            return Err(Error::Config(
                "--notify-webhook needs --approval-page: the notice sends the person the approval \
                 page's link"
                    .to_owned(),
            ));
        }
        if self.approval_page_addr.is_some() && (!self.approval_page || self.http.is_some()) {
            return Err(Error::Config(
                "--approval-page-addr applies to --approval-page over stdio only (over --http \
                 the page is served on the same listener)"
                    .to_owned(),
            ));
        }
        let Some(addr) = self.http else {
            if self.auth.is_some() || !self.allow_origins.is_empty() {
                return Err(Error::Config(
                    "--auth-* and --allow-origin apply to --http only".to_owned(),
                ));
            }
            if self.public_url.is_some() && !self.approval_page {
                return Err(Error::Config(
                    "--public-url over stdio names the approval page's host: it needs \
                     --approval-page"
                        .to_owned(),
                ));
            }
            return Ok(());
        };
        if self.auth.is_none() && !addr.ip().is_loopback() {
            return Err(Error::Config(format!(
                "refusing to serve {addr} without auth: without --auth-* every client is one \
                 local person, so the server listens on loopback only. Bind 127.0.0.1 or [::1] \
                 (and put a proxy in front), or pass --auth-issuer, --auth-audience and \
                 --auth-jwks so each caller proves who they are"
            )));
        }
        if self.auth.is_some() && !addr.ip().is_loopback() && self.public_url.is_none() {
            // Without it the metadata's `resource` and the 401 challenge name the bind address
            // (`http://0.0.0.0:PORT`), and rmcp's Host check admits loopback names only, so no
            // client on the network could use the server.
            return Err(Error::Config(format!(
                "serving {addr} with auth needs --public-url, the URL clients use for the \
                 endpoint (such as http://mcp.example.com:{}/mcp): the protected-resource \
                 metadata names it and its host is the Host header accepted",
                addr.port()
            )));
        }
        for origin in &self.allow_origins {
            if exact_origin(origin).is_none() {
                return Err(Error::Config(format!(
                    "--allow-origin {origin}: give an origin as a browser sends it, scheme, \
                     host and optional port, such as https://app.example.com"
                )));
            }
        }
        if let Some(url) = &self.public_url
            && !is_plain_endpoint_url(url)
        {
            return Err(Error::Config(format!(
                "--public-url {url}: give the URL clients use for the endpoint, such as \
                 https://mcp.example.com/mcp"
            )));
        }
        if self.max_sessions == 0 {
            return Err(Error::Config(
                "--max-sessions must be at least 1".to_owned(),
            ));
        }
        Ok(())
    }

    /// The tokio runtime to serve these settings on. Over stdio one client talks to one
    /// connection, strictly in turn: one thread serves it without handing each message between
    /// threads (blocking work goes to the blocking pool, unless the server chooses to run it in
    /// place, as the reference store-server does with its database calls here). Over
    /// HTTP, many clients at once: a thread per core.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the runtime cannot be built.
    pub fn runtime(&self) -> Result<tokio::runtime::Runtime, Error> {
        let runtime = if self.http.is_some() {
            tokio::runtime::Builder::new_multi_thread()
        } else {
            tokio::runtime::Builder::new_current_thread()
        }
        .enable_all()
        .build()?;
        Ok(runtime)
    }
}
