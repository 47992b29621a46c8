//! Streamable HTTP: [`http_router`] and [`serve_http`], with their [`HttpOptions`].

use std::sync::Arc;

use mcp_write_guard_http::{BearerAuth, BoundedSessions, DEFAULT_MAX_SESSIONS, LOOPBACK_ORIGINS};
use rmcp::{
    ServerHandler,
    transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService},
};
use tokio::net::TcpListener;

use crate::Error;

/// The path where the streamable HTTP endpoint is served.
pub const HTTP_PATH: &str = "/mcp";

/// How the streamable-HTTP endpoint is exposed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Accepted `Host` values (rmcp checks them, against DNS rebinding). Default: loopback.
    pub allowed_hosts: Vec<String>,
    /// Accepted browser `Origin`s; any other `Origin` gets 403, requests without one pass.
    /// Default: [`LOOPBACK_ORIGINS`].
    pub allowed_origins: Vec<String>,
    /// The most live sessions (older protocol era); idle ones close after five minutes. With
    /// auth, each session belongs to the subject that opened it, and one subject holds at most
    /// [`mcp_write_guard_http::DEFAULT_MAX_SESSIONS_PER_OWNER`].
    pub max_sessions: usize,
    /// Bearer-token auth in front of the endpoint, if any.
    pub auth: Option<BearerAuth>,
    /// The approval page's routes (`mcp_write_guard_page::router`), served beside the
    /// endpoint and outside the bearer-token auth (a browser sends no bearer token; the page's
    /// unguessable, single-use id is what admits the person).
    pub approval_page: Option<axum::Router>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            allowed_hosts: LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect(),
            allowed_origins: LOOPBACK_ORIGINS.iter().map(|o| (*o).to_owned()).collect(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            auth: None,
            approval_page: None,
        }
    }
}

/// `Host` values a loopback server accepts.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// An axum router serving `handler` over streamable HTTP at [`HTTP_PATH`], with the default
/// [`HttpOptions`]: loopback `Host` and `Origin` only, at most [`DEFAULT_MAX_SESSIONS`] sessions,
/// no auth.
///
/// Each MCP session gets its own clone of `handler` (for a
/// [`WriteGuard`](mcp_write_guard_rmcp::WriteGuard), its own connection); clones share what the
/// handler shares (for a guard, the inner server, the approval store and the audit sink).
pub fn http_router<S: ServerHandler + Clone>(handler: S) -> axum::Router {
    http_router_with(handler, &HttpOptions::default())
}

/// [`http_router`] with `options`.
pub fn http_router_with<S: ServerHandler + Clone>(
    handler: S,
    options: &HttpOptions,
) -> axum::Router {
    router_with(handler, options, http_config(options))
}

fn http_config(options: &HttpOptions) -> StreamableHttpServerConfig {
    StreamableHttpServerConfig::default()
        .with_allowed_hosts(options.allowed_hosts.clone())
        .with_allowed_origins(options.allowed_origins.clone())
}

fn router_with<S: ServerHandler + Clone>(
    handler: S,
    options: &HttpOptions,
    config: StreamableHttpServerConfig,
) -> axum::Router {
    let sessions = Arc::new(BoundedSessions::new(options.max_sessions));
    let service =
        StreamableHttpService::new(move || Ok(handler.clone()), Arc::clone(&sessions), config);
    let router = axum::Router::new().nest_service(HTTP_PATH, service);
    let router = match &options.auth {
        Some(auth) => auth.protect(router, sessions),
        None => router,
    };
    match &options.approval_page {
        Some(page) => router.merge(page.clone()),
        None => router,
    }
}

/// Serves `handler` over streamable HTTP on `listener` with the default [`HttpOptions`] until
/// `shutdown` completes; see [`serve_http_with`].
///
/// # Errors
///
/// [`Error::Io`] when the listener fails.
pub async fn serve_http<S: ServerHandler + Clone>(
    listener: TcpListener,
    handler: S,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    serve_http_with(listener, handler, &HttpOptions::default(), shutdown).await
}

/// Serves `handler` over streamable HTTP on `listener` until `shutdown` completes; then ends
/// every open MCP session (their event streams would otherwise keep the server alive) and
/// returns once the connections are closed.
///
/// # Errors
///
/// [`Error::Io`] when the listener fails.
pub async fn serve_http_with<S: ServerHandler + Clone>(
    listener: TcpListener,
    handler: S,
    options: &HttpOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let config = http_config(options);
    let sessions = config.cancellation_token.clone();
    let router = router_with(handler, options, config);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            sessions.cancel();
        })
        .await?;
    Ok(())
}
