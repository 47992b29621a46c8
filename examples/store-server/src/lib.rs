//! A reference inventory and order MCP server on SQLite, guarded by `adapter-rmcp`.
//!
//! This crate is what a team's own server looks like once it uses the guard: a plain rmcp
//! server ([`StoreServer`]) whose write tools do what the guard asks of them
//! ([`adapter_rmcp::WriteStep`]: a dry run, or a compare-and-apply), wrapped in
//! [`adapter_rmcp::WriteGuard`] by [`guard_builder`].
//!
//! # What it decides, and what it does not
//!
//! It decides the store's business rules (stock never negative, enough stock for every order
//! line, only a pending order can be cancelled) and checks them in one SQLite transaction per
//! write, which a preview rolls back and an apply commits ([`Db`], [`Mode`]). An approved apply
//! is a compare-and-apply ([`Mode::ApplyIfUnchanged`]): inside the transaction that applies, it
//! recomputes the preview and commits only if it equals the one the person approved, else it
//! rolls back and the guard answers that the data changed and nothing was saved. It decides the
//! words of each approval question ([`for_preview`]). It does **not** decide whether a write may
//! happen: the guard does (writes enabled, the user's approval, confirmation tokens, the
//! untrusted-data envelope).
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
//! them. See the `adapter_rmcp::WriteStep` docs.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use rmcp::ServerHandler;
//! use serde_json::Value;
//! use store_server::{Db, DbError, Mode, StockAdjustmentRequest, StoreServer, guard_builder};
//!
//! let dir = tempfile::tempdir()?;
//! let db = Arc::new(Db::open(dir.path().join("store.db"))?); // created and seeded
//!
//! // A preview checks every rule and writes nothing.
//! let request = StockAdjustmentRequest {
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
//! let found_one = StockAdjustmentRequest { delta: 1, reason: "found one".into(), ..request.clone() };
//! db.adjust_stock(&found_one, Mode::Apply)?;
//! let unchanged = |fresh: &Value| *fresh == approved;
//! let stale = db.adjust_stock(&request, Mode::ApplyIfUnchanged(&unchanged));
//! assert!(matches!(stale, Err(DbError::Changed)));
//! assert_eq!(db.get_product("TLS-002")?.stock, 4);
//!
//! // What the binary serves: the server inside the guard (here with writes off).
//! let guard = guard_builder(StoreServer::new(db)).writes_enabled(false).build();
//! assert!(guard.get_tool("prepare_admin_action").is_some());
//! // Serve it: store_server::serve_stdio(guard).await
//! # Ok(()) }
//! ```

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use adapter_rmcp::{PromptInput, WriteGuard, WriteGuardBuilder, default_prompt};
use rmcp::{
    ServerHandler, ServiceExt,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use tokio::net::TcpListener;

mod db;
mod prompts;
mod server;

pub use db::{
    CancellationRequest, Db, DbError, INJECTION_TEXT, MAX_ABS_DELTA, MAX_LINE_QUANTITY,
    MAX_ORDER_LINES, MAX_REASON_CHARS, Mode, Order, OrderCancellation, OrderLine, OrderLineRequest,
    OrderPlacement, OrderRequest, PlacedLine, Product, RestockedLine, Review, StockAdjustment,
    StockAdjustmentRequest, StockMovement, format_cents,
};
pub use prompts::for_preview;
pub use server::{
    AdjustStockArgs, CancelOrderArgs, CreateOrderArgs, MovementList, OrderIdArgs, OrderLineArgs,
    OrderList, ProductList, ReviewList, SERVER_NAME, SkuArgs, StoreServer,
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
    Db(#[from] DbError),
    /// A socket or the standard streams failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The MCP session could not start or ended with an error.
    #[error("mcp: {0}")]
    Mcp(String),
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

/// Serves `handler` on this process's stdin and stdout until the client disconnects.
pub async fn serve_stdio<S: ServerHandler>(handler: S) -> Result<(), Error> {
    let running = handler
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| Error::Mcp(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| Error::Mcp(e.to_string()))?;
    Ok(())
}

/// An axum router serving `handler` over streamable HTTP at [`HTTP_PATH`].
///
/// Each MCP session gets its own clone of `handler` (for a [`WriteGuard`], its own principal);
/// clones share the database and the approval store. Only loopback `Host` headers are accepted
/// (rmcp's default, against DNS rebinding).
pub fn http_router<S: ServerHandler + Clone>(handler: S) -> axum::Router {
    router_with(handler, StreamableHttpServerConfig::default())
}

fn router_with<S: ServerHandler + Clone>(
    handler: S,
    config: StreamableHttpServerConfig,
) -> axum::Router {
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    axum::Router::new().nest_service(HTTP_PATH, service)
}

/// Serves `handler` over streamable HTTP on `listener` until `shutdown` completes; then ends
/// every open MCP session (their event streams would otherwise keep the server alive) and
/// returns once the connections are closed.
pub async fn serve_http<S: ServerHandler + Clone>(
    listener: TcpListener,
    handler: S,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let config = StreamableHttpServerConfig::default();
    let sessions = config.cancellation_token.clone();
    axum::serve(listener, router_with(handler, config))
        .with_graceful_shutdown(async move {
            shutdown.await;
            sessions.cancel();
        })
        .await?;
    Ok(())
}

/// What the `store-server` binary was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// The SQLite file; created and seeded when missing.
    pub db: PathBuf,
    /// Serve streamable HTTP on this address instead of stdio.
    pub http: Option<SocketAddr>,
}

impl Config {
    /// Stdio on `db`.
    pub fn new(db: impl Into<PathBuf>) -> Self {
        Self {
            db: db.into(),
            http: None,
        }
    }

    /// Streamable HTTP on `addr` instead of stdio.
    pub fn with_http(mut self, addr: SocketAddr) -> Self {
        self.http = Some(addr);
        self
    }
}

/// Opens the database and serves the guarded store as `config` says, until the client
/// disconnects (stdio) or the process gets Ctrl-C (HTTP).
pub async fn run(config: Config) -> Result<(), Error> {
    let db = Arc::new(Db::open(&config.db)?);
    let guard = guard_builder(StoreServer::new(db)).build();
    tracing::info!(
        db = %config.db.display(),
        writes_enabled = guard.writes_enabled(),
        "store-server starting"
    );
    match config.http {
        None => serve_stdio(guard).await,
        Some(addr) => {
            let listener = TcpListener::bind(addr).await?;
            tracing::info!(
                "serving streamable HTTP at http://{}{HTTP_PATH}",
                listener.local_addr()?
            );
            serve_http(listener, guard, async {
                // If the signal handler cannot be installed, keep serving until killed.
                if tokio::signal::ctrl_c().await.is_err() {
                    std::future::pending::<()>().await;
                }
            })
            .await
        }
    }
}
