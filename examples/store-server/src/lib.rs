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
//! How it is served (stdio or streamable HTTP, bearer auth, the approval page, the webhook,
//! Redis, the audit file) belongs to crate `mcp-write-guard-serve`, shared with the other
//! binaries that serve a guard: [`run`] opens the database and hands the guard to it.
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

use std::{path::PathBuf, sync::Arc};

use mcp_write_guard_rmcp::{PromptInput, WriteGuard, WriteGuardBuilder, default_prompt};
use mcp_write_guard_serve::{Service, Started};

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
pub use server::{DbCalls, SERVER_NAME, StoreServer};
pub use sql::INJECTION_TEXT;
pub use wire::{
    AdjustStockArgs, CancelOrderArgs, CreateOrderArgs, MovementList, Order, OrderCancellation,
    OrderIdArgs, OrderLine, OrderLineArgs, OrderList, OrderPlacement, OrderStatus, PlacedLine,
    Product, ProductList, RestockedLine, Review, ReviewList, SkuArgs, StockAdjustment,
    StockMovement, format_cents,
};
// Serving (the settings, stdio, streamable HTTP) is shared with every binary that serves a guard.
pub use mcp_write_guard_serve::{
    AuthSettings, HTTP_PATH, NotifySettings, ServeConfig, StoreBackend, http_router, serve_http,
    serve_stdio,
};

/// The write tools; each supports previews and has its own prompt wording.
pub const WRITE_TOOLS: [&str; 3] = ["adjust_stock", "create_order", "cancel_order"];

/// Reads whose results are the store's own catalogue data and are not wrapped in the
/// untrusted-data envelope. Every other read is wrapped: orders and stock movements carry
/// free text a model wrote (reasons), reviews carry text strangers wrote.
pub const TRUSTED_READS: [&str; 2] = ["list_products", "get_product"];

/// Everything that can stop the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database could not be opened or initialised.
    #[error("database: {0}")]
    Storage(#[from] StorageError),
    /// The settings cannot be served as given, or serving failed (sockets, the standard
    /// streams, the MCP session).
    #[error(transparent)]
    Serve(#[from] mcp_write_guard_serve::Error),
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
typed text is not a command. Connect an MCP client instead, for example the MCP Inspector \
2.12.0 (Node.js 22.19 or newer; keep the version, an older Inspector cannot approve): \
npx -y @modelcontextprotocol/inspector@2.12.0 -e MCP_WRITES_ENABLED=true ./target/debug/store-server \
(or serve HTTP with --http 127.0.0.1:8080). End with Ctrl-D.";

/// The Redis key prefix of `--store redis://...` unless `--store-prefix` says otherwise.
pub const DEFAULT_STORE_PREFIX: &str = "store-server";

/// What the `store-server` binary was asked to do: the database, and how to serve it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// The SQLite file; created and seeded when missing.
    pub db: PathBuf,
    /// How the guarded store is served (default: stdio, approvals in memory).
    pub serve: ServeConfig,
}

impl Config {
    /// Stdio on `db`.
    pub fn new(db: impl Into<PathBuf>) -> Self {
        Self {
            db: db.into(),
            serve: ServeConfig::new(),
        }
    }

    /// Serves as `serve` says: HTTP, auth, the approval page, Redis, the audit file, ...
    #[must_use]
    pub fn with_serve(mut self, serve: ServeConfig) -> Self {
        self.serve = serve;
        self
    }

    /// Refuses what must not start ([`ServeConfig::check`]).
    ///
    /// # Errors
    ///
    /// [`Error::Serve`] with [`mcp_write_guard_serve::Error::Config`], saying why and what to
    /// pass.
    pub fn check(&self) -> Result<(), Error> {
        Ok(self.serve.check()?)
    }
}

/// Where the database calls run when `serve` is served on a runtime of `flavor`: one thread
/// serving one client in turn (stdio on a current-thread runtime, as `main` builds it), in
/// place; many clients (HTTP), or stdio on a runtime with several threads, on the blocking pool.
fn db_calls(serve: &ServeConfig, flavor: tokio::runtime::RuntimeFlavor) -> DbCalls {
    if serve.http.is_none() && flavor == tokio::runtime::RuntimeFlavor::CurrentThread {
        DbCalls::InPlace
    } else {
        DbCalls::BlockingPool
    }
}

/// Opens the database and serves the guarded store as `config` says, until the client
/// disconnects (stdio) or the process gets Ctrl-C (HTTP).
///
/// The settings are checked, and the webhook's secret read, before the database is opened.
/// Who is asking: over stdio, the connection; over HTTP without auth (loopback only), the local
/// machine, one principal (`local`); over HTTP with auth, each verified subject (issuer +
/// subject), and writes need the write scope when one is set
/// ([`mcp_write_guard_serve::Prepared::serve`]).
pub async fn run(config: Config) -> Result<(), Error> {
    let prepared = config.serve.prepare()?;
    let db = Arc::new(Db::open(&config.db)?);
    let log_start = |started: Started| {
        tracing::info!(
            db = %config.db.display(),
            writes_enabled = started.writes_enabled,
            principal = started.principal,
            "store-server starting"
        );
    };
    let service = Service::new(TERMINAL_HINT, &log_start);
    let flavor = tokio::runtime::Handle::current().runtime_flavor();
    let server = StoreServer::new(db).with_db_calls(db_calls(&config.serve, flavor));
    prepared.serve(guard_builder(server), &service).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use tokio::runtime::RuntimeFlavor::{CurrentThread, MultiThread};

    use super::*;

    /// In place only for stdio on one thread; HTTP's clients never wait for one another's
    /// database calls on a runtime thread, whatever the runtime.
    #[test]
    fn database_calls_run_in_place_only_for_stdio_on_one_thread() {
        let stdio = ServeConfig::default();
        let http = ServeConfig::default().with_http(([127, 0, 0, 1], 0).into());
        assert_eq!(db_calls(&stdio, CurrentThread), DbCalls::InPlace);
        assert_eq!(db_calls(&stdio, MultiThread), DbCalls::BlockingPool);
        assert_eq!(db_calls(&http, CurrentThread), DbCalls::BlockingPool);
        assert_eq!(db_calls(&http, MultiThread), DbCalls::BlockingPool);
    }
}
