//! A reference inventory and order MCP server on SQLite, guarded by `mcp-write-guard-rmcp`.
//!
//! This crate is what a team's own server looks like once it uses the guard: a plain rmcp
//! server ([`StoreServer`]) whose write tools do what the guard asks of them
//! ([`mcp_write_guard_rmcp::WriteStep`]: a dry run, or a compare-and-apply), wrapped in
//! [`mcp_write_guard_rmcp::WriteGuard`] by [`guard_builder`].
//!
//! # What it decides, and what it does not
//!
//! It decides the store's business rules (stock never negative, enough stock for every order
//! line, only a pending order can be cancelled, totals that never wrap) and checks them in one
//! SQLite transaction per write, which a preview rolls back and an apply commits ([`Db`],
//! [`Mode`]). An approved apply is a compare-and-apply ([`Mode::ApplyIfUnchanged`]): inside the
//! transaction that applies, it recomputes the preview and commits only if it equals the one the
//! person approved, else it rolls back and the guard answers that the data changed and nothing
//! was saved. It decides the words of each approval question ([`for_preview`]). It does **not**
//! decide whether a write may happen: the guard does (writes enabled, the user's approval,
//! confirmation tokens, the untrusted-data envelope).
//!
//! # How it is built (copy this shape)
//!
//! | module | holds | knows nothing of |
//! |---|---|---|
//! | `wire` | one struct per tool's arguments ([`AdjustStockArgs`], ...), used by rmcp and by the database layer alike, the results ([`StockAdjustment`], ...) and [`OrderStatus`]; the doc comments are the schema's descriptions | SQL, rules |
//! | `rules` | the business rules as pure functions: [`check_adjustment`] (the request alone) and [`plan_adjustment`] (the request against the rows read), [`RuleViolation`] | SQL, IO, clocks |
//! | `sql` | the schema, the seed data, one function per statement | rules |
//! | `db` | [`Db`]: per write, one transaction that reads through `sql`, asks `rules`, writes the plan, and ends as [`Mode`] says; the [`Clock`](mcp_write_guard_core::Clock) it reads `now` from | rmcp |
//! | `error` | [`StoreError`]: a rule said no ([`StoreError::Rule`]), the data changed ([`StoreError::Changed`]), or storage failed ([`StoreError::Storage`], which fails closed) | |
//! | `server` | [`StoreServer`]: the rmcp tools, each matching the guard's [`mcp_write_guard_rmcp::WriteStep`] | SQL, rules |
//! | `prompts` | the question the person reads, from the preview | SQL |
//!
//! - Reads: `list_products`, `get_product`, `list_orders`, `get_order`,
//!   `list_stock_movements`, `list_reviews`.
//! - Writes, each previewed in a rolled-back SQLite transaction and applied only after the user
//!   approves the exact change, on exactly the state the preview showed: `adjust_stock`,
//!   `create_order`, and `cancel_order`, which also needs a confirmation token from
//!   `prepare_admin_action`.
//! - Writes are refused unless `MCP_WRITES_ENABLED=true`.
//!
//! # What the previews pin
//!
//! The previews pin the absolute before and after that the person reads, not only the change:
//! `adjust_stock` its `previousStock` and `newStock` (the question says "stock 3 -> 4"),
//! `create_order` the priced lines with each line's previous and new stock, `cancel_order` the
//! order's status before and after and each line's restock, previous and new stock. The
//! question claims those numbers, so the compare must hold them: a person who approved
//! "3 -> 4" approved a write onto stock 3, and an apply onto any other stock is not what they
//! saw. That is what stops a model from collecting several approvals of one `+1`, each shown
//! "3 -> 4", and sending the approved applies at once: exactly one lands, the others are stale
//! and save nothing.
//!
//! The price is paid by honest concurrent writers to one product: every write to a sku between
//! a question and its apply makes that approval stale, so nothing of it is saved and the person
//! has to be asked again. Measured over streamable HTTP with 8 clients each sending 20 approved
//! `+1`s to one sku at the same time, most of the approvals came back stale; every one that
//! applied landed on the stock its question showed, and the final stock was exactly the seed
//! plus the applied ones, one movement each. A tool that wants a write to land on whatever
//! state is current would pin less in its preview (only the change and the facts that must
//! hold) and must then not show absolute numbers in its question; this store chose to show
//! them. See the `mcp_write_guard_rmcp::WriteStep` docs.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use rmcp::ServerHandler;
//! use serde_json::Value;
//! use store_server::{AdjustStockArgs, Db, Mode, StoreError, StoreServer, guard_builder};
//!
//! let dir = tempfile::tempdir()?;
//! let db = Arc::new(Db::open(dir.path().join("store.db"))?); // created and seeded
//!
//! // A preview checks every rule and writes nothing.
//! let request = AdjustStockArgs {
//!     sku: "TLS-002".into(),
//!     delta: -2,
//!     reason: "damaged in transit".into(),
//! };
//! let preview = db.adjust_stock(&request, Mode::Preview)?;
//! assert_eq!((preview.previous_stock, preview.new_stock), (3, 1));
//! assert_eq!(db.get_product("TLS-002")?.stock, 3);
//!
//! // The person approves "stock 3 -> 1"; meanwhile someone else adds one. The approved apply
//! // compares inside its transaction, finds "4 -> 2", and writes nothing.
//! let approved = serde_json::to_value(&preview)?;
//! let found_one = AdjustStockArgs { delta: 1, reason: "found one".into(), ..request.clone() };
//! db.adjust_stock(&found_one, Mode::Apply)?;
//! let unchanged = |fresh: &Value| *fresh == approved;
//! let stale = db.adjust_stock(&request, Mode::ApplyIfUnchanged(&unchanged));
//! assert!(matches!(stale, Err(StoreError::Changed)));
//! assert_eq!(db.get_product("TLS-002")?.stock, 4);
//!
//! // What the binary serves: the server inside the guard (here with writes off).
//! let guard = guard_builder(StoreServer::new(db)).writes_enabled(false).build();
//! assert!(guard.get_tool("prepare_admin_action").is_some());
//! // Serve it: store_server::serve_stdio(guard).await
//! # Ok(()) }
//! ```

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use mcp_write_guard_http::{
    AuthConfig, BearerAuth, BoundedSessions, DEFAULT_MAX_SESSIONS, JwksSource, LOOPBACK_ORIGINS,
    exact_origin, is_plain_endpoint_url,
};
use mcp_write_guard_redis::RedisStore;
use mcp_write_guard_rmcp::{
    FromAuthenticatedSubject, JsonLinesSink, LocalMachine, PromptInput, TracingSink, WriteGuard,
    WriteGuardBuilder, default_prompt,
    page::{ApprovalPage, PAGE_PATH},
};
use mcp_write_guard_webhook::WebhookNotifier;
use rmcp::{
    ServerHandler, ServiceExt,
    transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService},
};
use tokio::net::TcpListener;

mod db;
mod error;
mod prompts;
mod rules;
mod server;
mod sql;
mod wire;

pub use db::{Db, Mode};
pub use error::{StorageError, StoreError};
pub use prompts::for_preview;
pub use rules::{
    Checked, MAX_ABS_DELTA, MAX_LINE_QUANTITY, MAX_ORDER_LINES, MAX_REASON_CHARS, RuleViolation,
    check_adjustment, check_cancellation, check_order, check_reason, line_total, order_total,
    plan_adjustment, plan_cancellation, plan_order, stock_after,
};
pub use server::{SERVER_NAME, StoreServer};
pub use sql::INJECTION_TEXT;
pub use wire::{
    AdjustStockArgs, CancelOrderArgs, CreateOrderArgs, MovementList, Order, OrderCancellation,
    OrderIdArgs, OrderLine, OrderLineArgs, OrderList, OrderPlacement, OrderStatus, PlacedLine,
    Product, ProductList, RestockedLine, Review, ReviewList, SkuArgs, StockAdjustment,
    StockMovement, format_cents,
};

/// The write tools; each supports previews and has its own prompt wording.
pub const WRITE_TOOLS: [&str; 3] = ["adjust_stock", "create_order", "cancel_order"];

/// Reads whose results are the store's own catalogue data and are not wrapped in the
/// untrusted-data envelope. Every other read is wrapped: orders and stock movements carry
/// free text a model wrote (reasons), reviews carry text strangers wrote.
pub const TRUSTED_READS: [&str; 2] = ["list_products", "get_product"];

/// The path under `/mcp` where the streamable HTTP endpoint is served.
pub const HTTP_PATH: &str = "/mcp";

/// Everything that can stop the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database could not be opened or initialised.
    #[error("database: {0}")]
    Storage(#[from] StorageError),
    /// A socket or the standard streams failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// Stdin or stdout could not be set up to be served.
    #[error("{0}")]
    Stdio(String),
    /// The MCP session could not start or ended with an error.
    #[error("mcp: {0}")]
    Mcp(String),
    /// The settings cannot be served as given.
    #[error("{0}")]
    Config(String),
}

/// The guard around `server`, configured as this store needs it: previews and prompt wording for
/// the three write tools, the catalogue reads trusted, the server's name in the envelope, writes
/// enabled by `MCP_WRITES_ENABLED`.
///
/// The caller may change anything before `.build()`: tests, for example, set
/// `.writes_enabled(true)` and a fake clock.
pub fn guard_builder(server: StoreServer) -> WriteGuardBuilder<StoreServer> {
    let mut builder = WriteGuard::builder(server).server_name(SERVER_NAME);
    for tool in WRITE_TOOLS {
        builder = builder.preview(tool).prompt(tool, prompt);
    }
    for tool in TRUSTED_READS {
        builder = builder.trust_read(tool);
    }
    builder
}

/// The store's wording from the preview; the guard's generic wording if the preview is missing
/// or has an unexpected shape.
fn prompt(input: &PromptInput<'_>) -> String {
    for_preview(input).unwrap_or_else(|| default_prompt(input))
}

/// What the binary says on stderr when a person, not a client, is at the other end of stdin.
pub const TERMINAL_HINT: &str = "store-server speaks MCP (JSON-RPC) on stdin and stdout; \
typed text is not a command. Connect an MCP client instead, for example the MCP Inspector: \
npx @modelcontextprotocol/inspector -e MCP_WRITES_ENABLED=true ./target/debug/store-server \
(or serve HTTP with --http 127.0.0.1:8080). End with Ctrl-D.";

/// Serves `handler` on this process's stdin and stdout until the client disconnects. Input that
/// ends before `initialize` (nobody connected, or Ctrl-D at a terminal) is a clean end.
///
/// The lines go through [`JsonLines`](mcp_write_guard_stdio::JsonLines): a line that is not
/// JSON, is longer than [`mcp_write_guard_stdio::DEFAULT_MAX_LINE_BYTES`] or is not a message
/// rmcp can read is answered with its JSON-RPC error (`-32700`, `-32600`, `-32602`) and the
/// server reads on; nothing a client sends ends the session but the end of its input.
///
/// Each end is served the way its kind of file allows ([`mcp_write_guard_stdio::stdio`]): a
/// pipe or a socket on the event loop, a terminal, a file or `/dev/null` on a blocking thread.
pub async fn serve_stdio<S: ServerHandler>(handler: S) -> Result<(), Error> {
    let transport = mcp_write_guard_stdio::stdio().map_err(|e| Error::Stdio(e.to_string()))?;
    serve_on(handler, transport).await
}

async fn serve_on<S, T, E, A>(handler: S, transport: T) -> Result<(), Error>
where
    S: ServerHandler,
    T: rmcp::transport::IntoTransport<rmcp::RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = match handler.serve(transport).await {
        Ok(running) => running,
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
            tracing::info!("input ended before a client initialized; nothing was served");
            return Ok(());
        }
        Err(e) => return Err(Error::Mcp(e.to_string())),
    };
    running
        .waiting()
        .await
        .map_err(|e| Error::Mcp(e.to_string()))?;
    Ok(())
}

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
/// Each MCP session gets its own clone of `handler` (for a [`WriteGuard`], its own connection);
/// clones share the database and the approval store.
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

/// Bearer-token settings of the `store-server` binary (`--auth-*`).
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

/// What the `store-server` binary was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// The SQLite file; created and seeded when missing.
    pub db: PathBuf,
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
    /// (`--store-prefix`, default [`DEFAULT_STORE_PREFIX`]).
    Redis {
        /// The Redis URL.
        url: String,
        /// The key prefix: the same for every replica of one server.
        prefix: String,
    },
}

/// The Redis key prefix of `--store redis://...` unless `--store-prefix` says otherwise.
pub const DEFAULT_STORE_PREFIX: &str = "store-server";

impl StoreBackend {
    /// Reads `--store`: `memory`, or a `redis://` URL (keys under `prefix`).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for anything else.
    pub fn parse(value: &str, prefix: Option<&str>) -> Result<Self, Error> {
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
                prefix: prefix.unwrap_or(DEFAULT_STORE_PREFIX).to_owned(),
            });
        }
        Err(Error::Config(format!(
            "--store {}: give `memory` or redis://HOST[:PORT][/DB]",
            without_password(value)
        )))
    }
}

/// `url` with any `user:password@` left out, for logs and messages.
fn without_password(url: &str) -> String {
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

impl Config {
    /// Stdio on `db`.
    pub fn new(db: impl Into<PathBuf>) -> Self {
        Self {
            db: db.into(),
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

    /// Keeps approvals, round trips, pages and tokens in `store` (default: memory).
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
    /// ([`mcp_write_guard_rmcp::JsonLinesSink::open_keyed`]); needs [`Config::with_audit_log`].
    #[must_use]
    pub fn with_audit_log_key(mut self, key_file: impl Into<PathBuf>) -> Self {
        self.audit_log_key = Some(key_file.into());
        self
    }

    /// Asks on the approval page where the client supports URL-mode elicitation: over HTTP on
    /// the same listener, over stdio on `addr` (default `127.0.0.1:0`).
    pub fn with_approval_page(mut self, addr: Option<SocketAddr>) -> Self {
        self.approval_page = true;
        self.approval_page_addr = addr;
        self
    }

    /// An approval clock of `ttl` instead of two minutes (at most two minutes).
    pub fn with_approval_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.approval_ttl = Some(ttl);
        self
    }

    /// Progress notifications every `every` while a call waits for the person (older protocol
    /// era), instead of every five seconds.
    pub fn with_progress_every(mut self, every: std::time::Duration) -> Self {
        self.progress_every = Some(every);
        self
    }

    /// Tells a person through `notify` when the client cannot ask its user (needs
    /// [`Config::with_approval_page`]).
    pub fn with_notify(mut self, notify: NotifySettings) -> Self {
        self.notify = Some(notify);
        self
    }

    /// Streamable HTTP on `addr` instead of stdio.
    pub fn with_http(mut self, addr: SocketAddr) -> Self {
        self.http = Some(addr);
        self
    }

    /// Bearer-token auth on the HTTP endpoint.
    pub fn with_auth(mut self, auth: AuthSettings) -> Self {
        self.auth = Some(auth);
        self
    }

    /// The endpoint's public URL (behind a proxy).
    pub fn with_public_url(mut self, url: impl Into<String>) -> Self {
        self.public_url = Some(url.into());
        self
    }

    /// Accepts requests from the browser origin `origin` (`https://app.example.com`).
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allow_origins.push(origin.into());
        self
    }

    /// At most `max` live HTTP sessions.
    pub fn with_max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max;
        self
    }

    /// Refuses what must not start: auth without HTTP, HTTP to other machines without auth,
    /// unusable origins or public URL, a webhook without the approval page it links to.
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
}

/// The host (with port, if any) of an `http(s)://` URL.
fn authority(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let host = rest.split(['/', '?', '#']).next()?;
    (!host.is_empty() && !host.contains('@')).then_some(host)
}

/// Opens the database and serves the guarded store as `config` says, until the client
/// disconnects (stdio) or the process gets Ctrl-C (HTTP).
///
/// Who is asking: over stdio, the connection; over HTTP without auth (loopback only), the local
/// machine, one principal (`local`); over HTTP with auth, each verified subject (issuer +
/// subject), and writes need the write scope when one is set.
pub async fn run(config: Config) -> Result<(), Error> {
    config.check()?;
    // Before anything listens: a secret that cannot be read stops the start.
    let notifier = config
        .notify
        .as_ref()
        .map(NotifySettings::notifier)
        .transpose()?;
    let db = Arc::new(Db::open(&config.db)?);
    let mut builder = guard_builder(StoreServer::new(db));
    if let Some(path) = &config.audit_log {
        let file =
            JsonLinesSink::open(path).map_err(|e| Error::Config(format!("--audit-log: {e}")))?;
        builder = builder.audit(Arc::new((TracingSink, file)));
    }
    if let Some(every) = config.progress_every {
        builder = builder.progress_every(every);
    }
    if let Some(notifier) = notifier {
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
        log_start(&config, &guard, "connection");
        if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            tracing::warn!("{TERMINAL_HINT}");
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
            let jwks = JwksSource::parse(&auth.jwks).map_err(|e| Error::Config(e.to_string()))?;
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
    log_start(&config, &guard, principal);
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

fn approval_page(base: &str) -> Result<ApprovalPage, Error> {
    ApprovalPage::new(base).map_err(|e| Error::Config(e.to_string()))
}

fn log_start<S>(config: &Config, guard: &WriteGuard<S>, principal: &str) {
    tracing::info!(
        db = %config.db.display(),
        writes_enabled = guard.writes_enabled(),
        principal,
        "store-server starting"
    );
}
