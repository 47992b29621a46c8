//! A store on a fresh SQLite file, guarded as the binary guards it, with a fake clock and an
//! in-memory audit sink, and clients that connect to it in process.

use std::{path::PathBuf, sync::Arc};

use mcp_write_guard_rmcp::{
    Era, MemorySink, Outcome, WriteGuard, WriteGuardBuilder,
    test_util::{ManualClock, Reply, ScriptedClient},
};
use rmcp::{ServiceExt, model::CallToolResult};
use serde_json::Value;
use store_server::{CreateOrderArgs, Db, Mode, OrderLineArgs, StoreServer, guard_builder};
use tempfile::TempDir;
use workspace_tests::{Client, Failure, FileView, Snapshot, call, connect_over};

/// A seeded store on a temporary file.
pub(crate) struct Store {
    /// Keeps the temporary directory alive.
    _dir: TempDir,
    /// The SQLite file.
    pub(crate) path: PathBuf,
    /// The server's database handle.
    pub(crate) db: Arc<Db>,
    /// The guard's clock; advance it instead of sleeping.
    pub(crate) clock: ManualClock,
    /// Every decision the guard recorded.
    pub(crate) audit: Arc<MemorySink>,
}

impl Store {
    /// A fresh store file, created and seeded by the server's own code.
    pub(crate) fn new() -> Result<Self, Failure> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("store.db");
        let db = Arc::new(Db::open(&path)?);
        Ok(Self {
            _dir: dir,
            path,
            db,
            clock: ManualClock::default(),
            audit: Arc::new(MemorySink::new()),
        })
    }

    /// A fresh store, an outside observer of its file, and the file as it was at the start.
    pub(crate) fn with_snapshot() -> Result<(Self, FileView, Snapshot), Failure> {
        let store = Self::new()?;
        let file = store.file();
        let before = file.snapshot()?;
        Ok((store, file, before))
    }

    /// A fresh store with one pending order placed (see [`Store::order`]), an outside observer of
    /// its file, and the order's id.
    pub(crate) fn with_an_order_placed() -> Result<(Self, FileView, i64), Failure> {
        let store = Self::new()?;
        let file = store.file();
        let order = store.order("TLS-002", 1)?;
        Ok((store, file, order))
    }

    /// [`Store::with_an_order_placed`], and the file as it was once the order was placed.
    pub(crate) fn with_an_order() -> Result<(Self, FileView, i64, Snapshot), Failure> {
        let (store, file, order) = Self::with_an_order_placed()?;
        let before = file.snapshot()?;
        Ok((store, file, order, before))
    }

    /// An outside observer of the file.
    pub(crate) fn file(&self) -> FileView {
        FileView::new(&self.path)
    }

    /// The guard the binary builds, with writes on or off, this store's clock and audit sink.
    pub(crate) fn guard(&self, writes_enabled: bool) -> WriteGuard<StoreServer> {
        self.guard_builder(writes_enabled).build()
    }

    /// [`Store::guard`] before `.build()`, for a test that changes one more thing.
    pub(crate) fn guard_builder(&self, writes_enabled: bool) -> WriteGuardBuilder<StoreServer> {
        guard_builder(StoreServer::new(Arc::clone(&self.db)))
            .writes_enabled(writes_enabled)
            .clock(Arc::new(self.clock.clone()))
            .audit(self.audit.clone())
    }

    /// A person who answers with `replies` (and declines any question after them), connected in
    /// `era` to a guard with writes enabled: the person and their client.
    pub(crate) async fn person(
        &self,
        era: Era,
        replies: impl IntoIterator<Item = Reply>,
    ) -> Result<(ScriptedClient, Client), Failure> {
        let user = ScriptedClient::answering(replies);
        let client = connect(self.guard(true), &user, era).await?;
        Ok((user, client))
    }

    /// Two people on connections of their own to this store (writes enabled), in `era`: the
    /// first, returned with their client, is asked only what a test scripts (or holds); the
    /// other approves one write.
    pub(crate) async fn with_another_person(
        &self,
        era: Era,
    ) -> Result<(ScriptedClient, Client, Client), Failure> {
        let (user, client) = self.person(era, []).await?;
        let (_, other) = self.person(era, [Reply::Approve]).await?;
        Ok((user, client, other))
    }

    /// A fresh store, and a person answering `replies` in `era` who has called `tool` with
    /// `args`: the store, the person, their client and the call's result.
    pub(crate) async fn called(
        era: Era,
        replies: impl IntoIterator<Item = Reply>,
        tool: &str,
        args: Value,
    ) -> Result<(Self, ScriptedClient, Client, CallToolResult), Failure> {
        let store = Self::new()?;
        let (user, client) = store.person(era, replies).await?;
        let result = call(&client, tool, args).await?;
        Ok((store, user, client, result))
    }

    /// Asserts that a stock change that was not made left the file as `before`: TLS-002 still
    /// at 3, no movement; and that the guard recorded exactly `decisions`. `what` names the case
    /// in a failure.
    pub(crate) fn assert_stock_untouched(
        &self,
        before: &Snapshot,
        decisions: &[Outcome],
        what: &str,
    ) -> Result<(), Failure> {
        let file = self.file();
        assert_eq!(file.stock("TLS-002")?, 3, "{what}");
        assert!(file.movements()?.is_empty(), "{what}");
        assert_eq!(file.snapshot()?, *before, "{what}");
        assert_eq!(self.audit.decisions(), decisions, "{what}");
        Ok(())
    }

    /// Places a pending order of customer 1 for `quantity` of `sku` directly in the database
    /// (no guard, no question); returns its id.
    pub(crate) fn order(&self, sku: &str, quantity: i64) -> Result<i64, Failure> {
        let request = CreateOrderArgs {
            customer_id: 1,
            lines: vec![OrderLineArgs {
                sku: sku.into(),
                quantity,
            }],
        };
        let placed = self.db.create_order(&request, Mode::Apply)?;
        placed.order_id.ok_or_else(|| "no order id".into())
    }

    /// Serves a guard with writes enabled and connects `user` to it in process (legacy era).
    pub(crate) async fn connect(&self, user: &ScriptedClient) -> Result<Client, Failure> {
        connect(self.guard(true), user, Era::Legacy).await
    }
}

/// Serves `guard` over an in-memory pipe and connects `user` to it speaking `era`.
pub(crate) async fn connect(
    guard: WriteGuard<StoreServer>,
    user: &ScriptedClient,
    era: Era,
) -> Result<Client, Failure> {
    let (server_io, client_io) = tokio::io::duplex(256 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = guard.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    connect_over(client_io, user, era).await
}
