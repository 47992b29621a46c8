//! [`serve`]: a guard served as a [`ServeConfig`] says, with the pieces every binary needs
//! (audit file, notifier, approval clock, Redis, approval page, principal, bearer auth,
//! Ctrl-C); [`Service`] is what differs between binaries.

use std::{net::SocketAddr, path::Path, sync::Arc};

use mcp_write_guard_http::{AuthConfig, BearerAuth, JwksSource, exact_origin};
use mcp_write_guard_redis::RedisStore;
use mcp_write_guard_rmcp::{
    FromAuthenticatedSubject, JsonLinesSink, LocalMachine, TracingSink, WriteGuardBuilder,
    page::{ApprovalPage, PAGE_PATH},
};
use mcp_write_guard_webhook::WebhookNotifier;
use rmcp::ServerHandler;
use tokio::net::TcpListener;

use crate::{
    Error, HTTP_PATH, HttpOptions, ServeConfig, StoreBackend,
    config::{authority, without_password},
    serve_http_with, serve_stdio,
};

/// What differs between the binaries that serve a guard: what to tell a person who started it
/// at a terminal, and its start line.
#[derive(Clone, Copy)]
pub struct Service<'a> {
    terminal_hint: &'a str,
    log_start: &'a (dyn Fn(Started) + Send + Sync),
}

impl std::fmt::Debug for Service<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("terminal_hint", &self.terminal_hint)
            .finish_non_exhaustive()
    }
}

impl<'a> Service<'a> {
    /// A binary that logs `terminal_hint` as a warning when stdin is a terminal over stdio (a
    /// person, not a client, at the other end: name the binary and how to connect a client),
    /// and logs its start line with `log_start`, once the guard is built and just before it is
    /// served (with the binary's own fields, such as the reference server's database).
    pub fn new(terminal_hint: &'a str, log_start: &'a (dyn Fn(Started) + Send + Sync)) -> Self {
        Self {
            terminal_hint,
            log_start,
        }
    }
}

/// What a binary's start line reports (see [`Service::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Started {
    /// Whether writes are enabled: the guard read `MCP_WRITES_ENABLED` when it was built.
    pub writes_enabled: bool,
    /// Who is asking: `connection` over stdio, `local` over HTTP without auth (every client on
    /// the machine is one person), `bearer token (issuer + subject)` with auth.
    pub principal: &'static str,
}

/// Settings that passed [`ServeConfig::check`], with what had to be read before anything is
/// opened (the webhook's secret, the audit chain's key). Made by [`ServeConfig::prepare`];
/// served by [`Prepared::serve`].
pub struct Prepared<'a> {
    config: &'a ServeConfig,
    notifier: Option<WebhookNotifier>,
    /// The bytes of `--audit-log-key-file`, if given.
    audit_log_key: Option<Vec<u8>>,
}

impl std::fmt::Debug for Prepared<'_> {
    /// Never the audit key: only whether there is one.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("config", &self.config)
            .field("notifier", &self.notifier)
            .field("audit_log_keyed", &self.audit_log_key.is_some())
            .finish()
    }
}

impl ServeConfig {
    /// Checks the settings ([`ServeConfig::check`]) and reads the webhook's secret and the
    /// audit chain's key, so that a binary can refuse to start before it opens anything of its
    /// own (a database). Serve the result with [`Prepared::serve`].
    ///
    /// # Errors
    ///
    /// [`Error::Config`]: settings that must not start, a webhook secret or URL that cannot be
    /// used ([`NotifySettings::notifier`](crate::NotifySettings::notifier)), or an audit key
    /// file that cannot be read or is empty.
    pub fn prepare(&self) -> Result<Prepared<'_>, Error> {
        self.check()?;
        // Before anything listens: a secret that cannot be read stops the start.
        let notifier = self
            .notify
            .as_ref()
            .map(crate::NotifySettings::notifier)
            .transpose()?;
        let audit_log_key = self
            .audit_log_key
            .as_deref()
            .map(read_audit_key)
            .transpose()?;
        Ok(Prepared {
            config: self,
            notifier,
            audit_log_key,
        })
    }
}

/// Serves the guard `builder` builds as `config` says, until the client disconnects (stdio) or
/// the process gets Ctrl-C (HTTP): [`ServeConfig::prepare`], then [`Prepared::serve`].
///
/// # Errors
///
/// As [`ServeConfig::prepare`] and [`Prepared::serve`].
pub async fn serve<S: ServerHandler>(
    config: &ServeConfig,
    builder: WriteGuardBuilder<S>,
    service: &Service<'_>,
) -> Result<(), Error> {
    config.prepare()?.serve(builder, service).await
}

impl Prepared<'_> {
    /// Completes `builder` as the settings say and serves the guard until the client
    /// disconnects (stdio) or the process gets Ctrl-C (HTTP).
    ///
    /// What it adds to `builder`: the audit file beside the log ([`TracingSink`] and
    /// [`JsonLinesSink`]), the progress interval, the notifier, the approval clock, the Redis
    /// store (pinged once: when Redis does not answer, the server starts and every write is
    /// refused until it does), the approval page (over stdio on a listener of its own, over
    /// HTTP on the same listener), and who is asking: over stdio, the connection; over HTTP
    /// without auth (loopback only), the local machine, one principal (`local`,
    /// [`LocalMachine`]); over HTTP with auth, each verified subject (issuer + subject,
    /// [`FromAuthenticatedSubject`]), and writes need the write scope when one is set.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an audit file, an approval page URL, a Redis URL, a JWKS or a CA
    /// file that cannot be used; [`Error::Io`] for a listener; what [`serve_stdio`] and
    /// [`serve_http_with`] return.
    pub async fn serve<S: ServerHandler>(
        self,
        mut builder: WriteGuardBuilder<S>,
        service: &Service<'_>,
    ) -> Result<(), Error> {
        let config = self.config;
        if let Some(path) = &config.audit_log {
            let file = match &self.audit_log_key {
                Some(key) => JsonLinesSink::open_keyed(path, key),
                None => JsonLinesSink::open(path),
            }
            .map_err(|e| Error::Config(format!("--audit-log: {e}")))?;
            builder = builder.audit(Arc::new((TracingSink, file)));
        }
        if let Some(every) = config.progress_every {
            builder = builder.progress_every(every);
        }
        if let Some(notifier) = self.notifier {
            // Debug shows the scheme, host and port only: never the secret, nor the URL's path.
            tracing::info!(
                ?notifier,
                "clients that cannot ask their user: questions go to the approval page, its link \
                 to the webhook"
            );
            builder = builder.notifier(notifier);
        }
        if let Some(ttl) = config.approval_ttl {
            builder = builder.approval_ttl(
                time::Duration::try_from(ttl)
                    .map_err(|e| Error::Config(format!("--approval-ttl: {e}")))?,
            );
        }
        if let StoreBackend::Redis { url, prefix } = &config.store {
            let store = RedisStore::builder(url)
                .prefix(prefix)
                .connect_lazy()
                .map_err(|e| Error::Config(format!("--store {}: {e}", without_password(url))))?;
            let shown = without_password(url);
            match store.ping().await {
                Ok(()) => tracing::info!(redis = %shown, prefix, "approvals kept in Redis"),
                Err(e) => tracing::warn!(
                    redis = %shown,
                    "Redis does not answer ({e}): every write is refused until it does"
                ),
            }
            builder = builder.store(Arc::new(store));
        }
        let Some(addr) = config.http else {
            // Over stdio the page needs a listener of its own: loopback unless told otherwise.
            let mut page_listener = None;
            if config.approval_page {
                let addr = config
                    .approval_page_addr
                    .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)));
                if !addr.ip().is_loopback() {
                    tracing::warn!(%addr, "the approval page listens beyond this machine");
                }
                let listener = TcpListener::bind(addr).await?;
                // The URL the person opens: the listener's own, or the public one a proxy serves.
                let base = match &config.public_url {
                    Some(url) => url.trim_end_matches('/').to_owned(),
                    None => format!("http://{}", listener.local_addr()?),
                };
                builder = builder.approval_page(approval_page(&base)?);
                tracing::info!("approval page listening at {base}{PAGE_PATH}");
                page_listener = Some(listener);
            }
            let guard = builder.build();
            if let (Some(listener), Some(host)) = (page_listener, guard.approval_page_host()) {
                let router = mcp_write_guard_page::router(host);
                tokio::spawn(async move {
                    if let Err(e) = axum::serve(listener, router).await {
                        tracing::error!("approval page: {e}");
                    }
                });
            }
            (service.log_start)(Started {
                writes_enabled: guard.writes_enabled(),
                principal: "connection",
            });
            if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                tracing::warn!("{}", service.terminal_hint);
            }
            return serve_stdio(guard).await;
        };
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let resource = config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{local}{HTTP_PATH}"));
        let mut options = HttpOptions {
            max_sessions: config.max_sessions,
            ..HttpOptions::default()
        };
        options
            .allowed_origins
            .extend(config.allow_origins.iter().filter_map(|o| exact_origin(o)));
        if let Some(url) = &config.public_url
            && let Some(host) = authority(url)
        {
            options.allowed_hosts.push(host.to_owned());
        }
        if config.approval_page {
            // On the same listener; behind a proxy, at the public URL's origin.
            let base = match (
                &config.public_url,
                &config.public_url.as_deref().and_then(authority),
            ) {
                (Some(url), Some(host)) => {
                    let scheme = if url.starts_with("https://") {
                        "https"
                    } else {
                        "http"
                    };
                    format!("{scheme}://{host}")
                }
                _ => format!("http://{local}"),
            };
            builder = builder.approval_page(approval_page(&base)?);
            tracing::info!("approval page served at {base}{PAGE_PATH}");
        }
        let principal = match &config.auth {
            None => {
                builder = builder.principal(Arc::new(LocalMachine));
                "local"
            }
            Some(auth) => {
                let jwks =
                    JwksSource::parse(&auth.jwks).map_err(|e| Error::Config(e.to_string()))?;
                let mut settings =
                    AuthConfig::new(&auth.issuer, &auth.audience, jwks, resource.clone());
                builder = builder.principal(Arc::new(FromAuthenticatedSubject));
                if let Some(scope) = &auth.write_scope {
                    settings = settings.with_write_scope(scope);
                    builder = builder.write_scope(scope);
                }
                if let Some(path) = &auth.jwks_ca {
                    let pem = std::fs::read(path).map_err(|e| {
                        Error::Config(format!("--auth-jwks-ca {}: {e}", path.display()))
                    })?;
                    settings = settings.with_jwks_roots(pem);
                }
                options.auth = Some(
                    BearerAuth::new(settings)
                        .await
                        .map_err(|e| Error::Config(e.to_string()))?,
                );
                "bearer token (issuer + subject)"
            }
        };
        let guard = builder.build();
        options.approval_page = guard.approval_page_host().map(mcp_write_guard_page::router);
        (service.log_start)(Started {
            writes_enabled: guard.writes_enabled(),
            principal,
        });
        if config.auth.is_some() {
            tracing::info!(%resource, "bearer tokens required; protected-resource metadata served");
        }
        tracing::info!("serving streamable HTTP at http://{local}{HTTP_PATH}");
        serve_http_with(listener, guard, &options, async {
            // If the signal handler cannot be installed, keep serving until killed.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
        .await
    }
}

/// The bytes of the audit chain's key file, all of them, as `mcp-audit verify-log --key-file`
/// reads them.
fn read_audit_key(path: &Path) -> Result<Vec<u8>, Error> {
    let key = std::fs::read(path)
        .map_err(|e| Error::Config(format!("--audit-log-key-file {}: {e}", path.display())))?;
    if key.is_empty() {
        return Err(Error::Config(format!(
            "--audit-log-key-file {}: the file is empty",
            path.display()
        )));
    }
    Ok(key)
}

fn approval_page(base: &str) -> Result<ApprovalPage, Error> {
    ApprovalPage::new(base).map_err(|e| Error::Config(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audit_key_is_read_before_anything_is_opened_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        let key = dir.path().join("audit.key");
        let config = ServeConfig::new()
            .with_audit_log(&log)
            .with_audit_log_key(&key);

        let missing = config.prepare().unwrap_err().to_string();
        assert!(missing.starts_with("--audit-log-key-file "), "{missing}");
        std::fs::write(&key, b"").unwrap();
        let empty = config.prepare().unwrap_err().to_string();
        assert!(empty.ends_with("the file is empty"), "{empty}");

        std::fs::write(&key, b"s3cret key bytes").unwrap();
        let prepared = config.prepare().unwrap();
        assert_eq!(
            prepared.audit_log_key.as_deref(),
            Some(&b"s3cret key bytes"[..])
        );
        let shown = format!("{prepared:?}");
        assert!(shown.contains("audit_log_keyed: true"), "{shown}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(!log.exists(), "the audit file is opened when served");

        let without_log = ServeConfig::new().with_audit_log_key(&key);
        let error = without_log.check().unwrap_err().to_string();
        assert!(
            error.starts_with("--audit-log-key-file needs --audit-log"),
            "{error}"
        );
    }
}
