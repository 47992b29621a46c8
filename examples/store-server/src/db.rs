//! The store's database: one function per operation, each a transaction that reads the rows a
//! rule needs, asks the rule ([`crate::rules`]), and writes the plan ([`crate::sql`]).
//!
//! Every write runs inside one immediate SQLite transaction, which holds the write lock from
//! its first statement, and the rules decide on the rows read inside it. [`Mode::Preview`] runs
//! exactly the same code and then rolls the transaction back, so a preview fails for exactly
//! the reasons the real write would; [`Mode::Apply`] commits. The real write never trusts an
//! earlier preview: it reads and checks everything again in its own transaction.
//!
//! [`Mode::ApplyIfUnchanged`] is the compare-and-apply that an approved write needs: the same
//! code again, then, still inside the transaction and before it commits, the change exactly as a
//! preview would report it now (the JSON the tool returns as its result) goes to a comparison
//! the caller supplies. It commits only if the comparison accepts it; otherwise it rolls back
//! and returns [`StoreError::Changed`]. Nothing can write between that comparison and the
//! commit.
//!
//! Time comes from the [`Clock`] the database was given ([`Db::with_clock`]), read once per
//! write and passed down as `now`; SQLite's own clock is never asked, so a test can fix the
//! time the stock movements record.

use std::path::Path;
use std::sync::Arc;

use mcp_write_guard_core::{Clock, SystemClock};
use parking_lot::Mutex;
use rusqlite::{Connection, Transaction, TransactionBehavior};
use serde_json::Value;
use time::OffsetDateTime;

use crate::error::{StorageError, StoreError};
use crate::rules::{self, RuleViolation};
use crate::sql;
use crate::wire::{
    AdjustStockArgs, CancelOrderArgs, CreateOrderArgs, Order, OrderCancellation, OrderPlacement,
    Product, Review, StockAdjustment, StockMovement,
};

/// Whether a write is only previewed (rolled back), applied (committed), or applied only if it is
/// still the change that was previewed (compare-and-apply).
#[derive(Clone, Copy)]
pub enum Mode<'a> {
    /// Run every check and every statement, then roll the transaction back.
    Preview,
    /// Run every check and every statement, then commit.
    Apply,
    /// Run every check and every statement; then, in the same transaction, pass the change
    /// exactly as a preview would report it now (the JSON of what [`Mode::Preview`] returns; for
    /// an order, without its id) to the function. `true`: commit. `false`: roll back and return
    /// [`StoreError::Changed`].
    ApplyIfUnchanged(&'a dyn Fn(&Value) -> bool),
}

impl std::fmt::Debug for Mode<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Preview => f.write_str("Preview"),
            Self::Apply => f.write_str("Apply"),
            Self::ApplyIfUnchanged(_) => f.write_str("ApplyIfUnchanged(..)"),
        }
    }
}

/// The store's database: one SQLite connection behind a mutex, and the clock writes read.
///
/// Every method takes the lock for the duration of one synchronous SQLite call and releases it
/// before returning; callers on an async runtime run them on a blocking thread, or in place where
/// one thread serves one client ([`DbCalls`](crate::DbCalls)).
pub struct Db {
    conn: Mutex<Connection>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").finish_non_exhaustive()
    }
}

impl Db {
    /// Opens the database at `path`, creating the file, the schema and the seed data when the
    /// file is missing or empty. Writes take their time from the system clock.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StorageError> {
        let mut conn = Connection::open(path)?;
        sql::init(&mut conn)?;
        Ok(Self {
            conn: Mutex::new(conn),
            clock: Arc::new(SystemClock),
        })
    }

    /// Writes take their time from `clock` (in tests, a `ManualClock`).
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Every product, by sku.
    pub fn list_products(&self) -> Result<Vec<Product>, StoreError> {
        Ok(sql::products(&self.conn.lock())?)
    }

    /// One product.
    pub fn get_product(&self, sku: &str) -> Result<Product, StoreError> {
        known_product(&self.conn.lock(), sku)
    }

    /// Every order, oldest first.
    pub fn list_orders(&self) -> Result<Vec<Order>, StoreError> {
        let conn = self.conn.lock();
        sql::order_ids(&conn)?
            .into_iter()
            .map(|id| known_order(&conn, id))
            .collect()
    }

    /// One order.
    pub fn get_order(&self, order_id: i64) -> Result<Order, StoreError> {
        known_order(&self.conn.lock(), order_id)
    }

    /// A product's stock movements, oldest first.
    pub fn list_stock_movements(&self, sku: &str) -> Result<Vec<StockMovement>, StoreError> {
        let conn = self.conn.lock();
        known_product(&conn, sku)?;
        Ok(sql::movements(&conn, sku)?)
    }

    /// A product's reviews, oldest first.
    pub fn list_reviews(&self, sku: &str) -> Result<Vec<Review>, StoreError> {
        let conn = self.conn.lock();
        known_product(&conn, sku)?;
        Ok(sql::reviews(&conn, sku)?)
    }

    /// Changes a product's stock by `delta` and records a stock movement.
    ///
    /// Rules: [`rules::check_adjustment`], then [`rules::plan_adjustment`] on the product's
    /// current row. What a compare-and-apply compares is the whole result, previous and new
    /// stock included.
    pub fn adjust_stock(
        &self,
        args: &AdjustStockArgs,
        mode: Mode<'_>,
    ) -> Result<StockAdjustment, StoreError> {
        let args = rules::check_adjustment(args)?;
        self.write(mode, to_json, |tx, now| {
            let product = known_product(tx, &args.sku)?;
            let change = rules::plan_adjustment(args, product)?;
            sql::move_stock(tx, &change.sku, change.delta, &change.reason, now)?;
            Ok(change)
        })
    }

    /// Creates a pending order and takes its lines out of stock.
    ///
    /// Rules: [`rules::check_order`], then [`rules::plan_order`] on the customer and the current
    /// rows of the ordered products. What a compare-and-apply compares is the result without
    /// its order id (a preview has none), every line's previous and new stock included; the
    /// applied result has the id.
    pub fn create_order(
        &self,
        args: &CreateOrderArgs,
        mode: Mode<'_>,
    ) -> Result<OrderPlacement, StoreError> {
        let args = rules::check_order(args)?;
        let as_previewed = |placement: &OrderPlacement| {
            serde_json::to_value(OrderPlacement {
                order_id: None,
                ..placement.clone()
            })
        };
        let mut placement = self.write(mode, as_previewed, |tx, now| {
            let customer = sql::customer_name(tx, args.customer_id)?
                .ok_or(RuleViolation::UnknownCustomer(args.customer_id))?;
            let products = sql::products_by_sku(tx, args.lines.iter().map(|l| l.sku.as_str()))?;
            let plan = rules::plan_order(args, customer, &products)?;
            let lines = plan.lines.iter().map(|l| (l.sku.as_str(), l.quantity));
            let order_id = sql::insert_order(tx, plan.customer_id, plan.total_cents, lines)?;
            let reason = format!("order {order_id} created");
            for line in &plan.lines {
                sql::move_stock(tx, &line.sku, -line.quantity, &reason, now)?;
            }
            Ok(OrderPlacement {
                order_id: Some(order_id),
                ..plan
            })
        })?;
        if matches!(mode, Mode::Preview) {
            // Nothing was created: the id the rolled-back insert got means nothing.
            placement.order_id = None;
        }
        Ok(placement)
    }

    /// Cancels a pending order and puts its lines back in stock.
    ///
    /// Rules: [`rules::check_cancellation`], then [`rules::plan_cancellation`] on the order and
    /// the current stock of its products. What a compare-and-apply compares is the whole result:
    /// the order's status before and after, and every line's previous and new stock.
    pub fn cancel_order(
        &self,
        args: &CancelOrderArgs,
        mode: Mode<'_>,
    ) -> Result<OrderCancellation, StoreError> {
        let args = rules::check_cancellation(args)?;
        self.write(mode, to_json, |tx, now| {
            let order = known_order(tx, args.order_id)?;
            let products = sql::products_by_sku(tx, order.lines.iter().map(|l| l.sku.as_str()))?;
            let stocks = products
                .into_iter()
                .map(|(sku, p)| (sku, p.stock))
                .collect();
            let plan = rules::plan_cancellation(args, order, &stocks)?;
            sql::set_order_status(tx, plan.order_id, plan.status)?;
            let reason = format!("order {} cancelled: {}", plan.order_id, plan.reason);
            for line in &plan.lines {
                sql::move_stock(tx, &line.sku, line.quantity, &reason, now)?;
            }
            Ok(plan)
        })
    }

    /// Reads the clock once, runs `f` in an immediate transaction with that `now`, then rolls
    /// back (preview), commits (apply), or compares `as_previewed` of its result and commits only
    /// if the comparison accepts it (compare-and-apply). An error from `f` drops the
    /// transaction, which rolls it back.
    fn write<T>(
        &self,
        mode: Mode<'_>,
        as_previewed: impl FnOnce(&T) -> Result<Value, serde_json::Error>,
        f: impl FnOnce(&Transaction<'_>, OffsetDateTime) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let now = self.clock.now();
        let mut conn = self.conn.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let out = f(&tx, now)?;
        match mode {
            Mode::Preview => tx.rollback()?,
            Mode::Apply => tx.commit()?,
            Mode::ApplyIfUnchanged(unchanged) => {
                // Still inside the transaction: nothing else can write until it ends.
                let fresh = as_previewed(&out).map_err(StorageError::from)?;
                if !unchanged(&fresh) {
                    tx.rollback()?;
                    return Err(StoreError::Changed);
                }
                tx.commit()?;
            }
        }
        Ok(out)
    }
}

/// The JSON a tool returns for `change`: what the person was shown, and what an apply compares.
fn to_json<T: serde::Serialize>(change: &T) -> Result<Value, serde_json::Error> {
    serde_json::to_value(change)
}

/// The product `sku`, or the rule's refusal naming it.
fn known_product(conn: &Connection, sku: &str) -> Result<Product, StoreError> {
    sql::product(conn, sku)?.ok_or_else(|| RuleViolation::UnknownSku(sku.to_owned()).into())
}

/// The order `order_id`, or the rule's refusal naming it.
fn known_order(conn: &Connection, order_id: i64) -> Result<Order, StoreError> {
    sql::order(conn, order_id)?.ok_or_else(|| RuleViolation::UnknownOrder(order_id).into())
}

#[cfg(test)]
mod tests {
    use mcp_write_guard_core::ManualClock;

    use super::*;
    use crate::rules::{MAX_ABS_DELTA, MAX_LINE_QUANTITY, MAX_ORDER_LINES, MAX_REASON_CHARS};
    use crate::sql::INJECTION_TEXT;
    use crate::wire::fixtures::{adjust, cancel, order};
    use crate::wire::{OrderLine, OrderLineArgs, OrderStatus};

    /// A seeded store on a temporary file whose writes read a clock standing at
    /// 2026-01-01T00:00:00Z.
    fn temp_db() -> (tempfile::TempDir, std::path::PathBuf, Db) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let db = Db::open(&path)
            .unwrap()
            .with_clock(Arc::new(ManualClock::default()));
        (dir, path, db)
    }

    /// Reads the file through a connection of its own, as an outside observer would.
    fn stock_in_file(path: &Path, sku: &str) -> i64 {
        let conn = Connection::open(path).unwrap();
        conn.query_row("SELECT stock FROM products WHERE sku = ?1", [sku], |r| {
            r.get(0)
        })
        .unwrap()
    }

    fn count_in_file(path: &Path, table: &str) -> i64 {
        let conn = Connection::open(path).unwrap();
        conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn new_file_is_created_and_seeded() {
        let (_dir, path, db) = temp_db();
        let products = db.list_products().unwrap();
        let summary: Vec<_> = products
            .iter()
            .map(|p| (p.sku.as_str(), p.stock, p.price.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                ("TLS-001", 12, "$49.99"),
                ("TLS-002", 3, "$109.99"),
                ("TLS-003", 40, "$24.99")
            ]
        );
        assert_eq!(count_in_file(&path, "customers"), 1);
        assert_eq!(count_in_file(&path, "stock_movements"), 0);
        assert_eq!(count_in_file(&path, "orders"), 0);
        let reviews = db.list_reviews("TLS-002").unwrap();
        assert!(reviews.iter().any(|r| r.body.contains(INJECTION_TEXT)));
    }

    #[test]
    fn reopening_keeps_the_data_and_does_not_seed_again() {
        let (_dir, path, db) = temp_db();
        db.adjust_stock(&adjust("TLS-001", -2, "counted"), Mode::Apply)
            .unwrap();
        drop(db);
        let db = Db::open(&path).unwrap();
        assert_eq!(db.get_product("TLS-001").unwrap().stock, 10);
        assert_eq!(count_in_file(&path, "products"), 3);
        assert_eq!(count_in_file(&path, "reviews"), 4);
    }

    #[test]
    fn unknown_schema_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.db");
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", 7)
            .unwrap();
        assert!(matches!(
            Db::open(&path),
            Err(StorageError::UnsupportedSchema {
                found: 7,
                expected: 1
            })
        ));
    }

    #[test]
    fn the_schema_has_the_documented_columns() {
        let (_dir, path, _db) = temp_db();
        let conn = Connection::open(&path).unwrap();
        let columns = |table: &str| -> Vec<String> {
            let mut stmt = conn
                .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
                .unwrap();
            stmt.query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(columns("products"), ["sku", "name", "price_cents", "stock"]);
        assert_eq!(
            columns("stock_movements"),
            ["id", "sku", "delta", "reason", "created_at"]
        );
        assert_eq!(columns("customers"), ["id", "name"]);
        assert_eq!(
            columns("orders"),
            ["id", "customer_id", "status", "total_cents"]
        );
        assert_eq!(columns("order_lines"), ["order_id", "sku", "quantity"]);
        assert_eq!(columns("reviews"), ["id", "sku", "author", "body"]);
        // The CHECK constraint backs the business rule up.
        let err = conn
            .execute("UPDATE products SET stock = -1 WHERE sku = 'TLS-001'", [])
            .unwrap_err();
        assert!(err.to_string().contains("CHECK"), "{err}");
    }

    #[test]
    fn the_file_is_in_wal_mode_and_every_commit_is_synced() {
        let (_dir, path, db) = temp_db();
        let outside = Connection::open(&path).unwrap();
        assert_eq!(sql::journal_mode(&outside).unwrap(), "wal");
        // FULL (2): in WAL mode, each commit syncs the WAL before it returns.
        assert_eq!(sql::synchronous(&db.conn.lock()).unwrap(), 2);
    }

    #[test]
    fn a_file_in_rollback_journal_mode_is_switched_to_wal_on_open() {
        let (_dir, path, db) = temp_db();
        db.adjust_stock(&adjust("TLS-001", -2, "counted"), Mode::Apply)
            .unwrap();
        drop(db);
        let outside = Connection::open(&path).unwrap();
        outside
            .pragma_update(None, "journal_mode", "DELETE")
            .unwrap();
        assert_eq!(sql::journal_mode(&outside).unwrap(), "delete");
        drop(outside);

        let db = Db::open(&path).unwrap();
        assert_eq!(sql::journal_mode(&db.conn.lock()).unwrap(), "wal");
        assert_eq!(db.get_product("TLS-001").unwrap().stock, 10);
    }

    /// The database file and its WAL, byte for byte.
    fn bytes_on_disk(path: &Path) -> (Vec<u8>, Vec<u8>) {
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        (std::fs::read(path).unwrap(), std::fs::read(wal).unwrap())
    }

    #[test]
    fn previews_and_refused_applies_write_nothing_to_disk_and_an_apply_is_seen_at_once() {
        let (_dir, path, db) = temp_db();
        let request = adjust("TLS-002", 1, "race");
        let before = bytes_on_disk(&path);

        let approved = adjust_preview(&db, &request);
        db.create_order(&order(1, &[("TLS-002", 1)]), Mode::Preview)
            .unwrap();
        let refuse = |_: &Value| false;
        let err = db
            .adjust_stock(&request, Mode::ApplyIfUnchanged(&refuse))
            .unwrap_err();
        assert!(matches!(err, StoreError::Changed), "{err}");
        assert!(bytes_on_disk(&path) == before, "nothing reached the disk");

        let unchanged = |fresh: &Value| *fresh == approved;
        db.adjust_stock(&request, Mode::ApplyIfUnchanged(&unchanged))
            .unwrap();
        // The commit went to the WAL, and another connection reads it as soon as the call
        // returns, while the server still holds the file open.
        let (file, wal) = bytes_on_disk(&path);
        assert!(wal.len() > before.1.len(), "the commit is in the WAL");
        assert!(file == before.0, "not yet checkpointed into the file");
        assert_eq!(stock_in_file(&path, "TLS-002"), 4);
        assert_eq!(count_in_file(&path, "stock_movements"), 1);
    }

    #[test]
    fn preview_reports_the_change_and_writes_nothing() {
        let (_dir, path, db) = temp_db();
        let preview = db
            .adjust_stock(&adjust("TLS-002", -2, "damaged in transit"), Mode::Preview)
            .unwrap();
        assert_eq!(preview.previous_stock, 3);
        assert_eq!(preview.new_stock, 1);
        assert_eq!(stock_in_file(&path, "TLS-002"), 3);
        assert_eq!(count_in_file(&path, "stock_movements"), 0);
        // The same preview again gives the same answer (nothing moved).
        let again = db
            .adjust_stock(&adjust("TLS-002", -2, "damaged in transit"), Mode::Preview)
            .unwrap();
        assert_eq!(preview, again);
    }

    #[test]
    fn apply_changes_stock_once_and_logs_one_movement() {
        let (_dir, path, db) = temp_db();
        let done = db
            .adjust_stock(&adjust("TLS-002", -2, "damaged in transit"), Mode::Apply)
            .unwrap();
        assert_eq!((done.previous_stock, done.new_stock), (3, 1));
        assert_eq!(stock_in_file(&path, "TLS-002"), 1);
        let movements = db.list_stock_movements("TLS-002").unwrap();
        assert_eq!(movements.len(), 1);
        assert_eq!(movements[0].delta, -2);
        assert_eq!(movements[0].reason, "damaged in transit");
        assert_eq!(movements[0].created_at, "2026-01-01T00:00:00.000Z");
        assert_eq!(count_in_file(&path, "stock_movements"), 1);
    }

    #[test]
    fn movements_record_the_time_of_the_injected_clock() {
        let (_dir, _path, db) = temp_db();
        let clock = ManualClock::default();
        let db = db.with_clock(Arc::new(clock.clone()));
        db.adjust_stock(&adjust("TLS-001", -1, "sold"), Mode::Apply)
            .unwrap();
        clock.advance(time::Duration::milliseconds(90_061_250));
        let id = db
            .create_order(&order(1, &[("TLS-001", 1)]), Mode::Apply)
            .unwrap()
            .order_id
            .unwrap();
        clock.advance(time::Duration::days(1));
        db.cancel_order(&cancel(id, "wrong size"), Mode::Apply)
            .unwrap();
        let times: Vec<_> = db
            .list_stock_movements("TLS-001")
            .unwrap()
            .into_iter()
            .map(|m| (m.delta, m.created_at))
            .collect();
        assert_eq!(
            times,
            [
                (-1, "2026-01-01T00:00:00.000Z".to_owned()),
                (-1, "2026-01-02T01:01:01.250Z".to_owned()),
                (1, "2026-01-03T01:01:01.250Z".to_owned()),
            ]
        );
    }

    #[test]
    fn adjustment_rules_refuse_in_preview_and_apply_alike() {
        let (_dir, path, db) = temp_db();
        let bad = [
            adjust("TLS-002", -4, "too many"),
            adjust("TLS-999", 1, "no such sku"),
            adjust("TLS-002", 0, "nothing"),
            adjust("TLS-002", 1, ""),
            adjust("TLS-002", 1, "   "),
            adjust("TLS-002", 1, &"x".repeat(MAX_REASON_CHARS + 1)),
            adjust("TLS-002", MAX_ABS_DELTA + 1, "too big"),
            adjust("TLS-002", i64::MIN, "overflow"),
        ];
        for request in &bad {
            for mode in [Mode::Preview, Mode::Apply] {
                let err = db.adjust_stock(request, mode).unwrap_err();
                assert!(matches!(err, StoreError::Rule(_)), "{request:?}: {err}");
            }
        }
        assert_eq!(stock_in_file(&path, "TLS-002"), 3);
        assert_eq!(count_in_file(&path, "stock_movements"), 0);
        let err = db
            .adjust_stock(&adjust("TLS-002", -4, "too many"), Mode::Apply)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "TLS-002 has 3 in stock; adjusting by -4 would make it negative"
        );
    }

    #[test]
    fn stock_can_go_to_exactly_zero() {
        let (_dir, path, db) = temp_db();
        let done = db
            .adjust_stock(&adjust("TLS-002", -3, "sold out"), Mode::Apply)
            .unwrap();
        assert_eq!(done.new_stock, 0);
        assert_eq!(stock_in_file(&path, "TLS-002"), 0);
    }

    #[test]
    fn order_preview_prices_the_order_and_writes_nothing() {
        let (_dir, path, db) = temp_db();
        let preview = db
            .create_order(&order(1, &[("TLS-002", 1)]), Mode::Preview)
            .unwrap();
        assert_eq!(preview.order_id, None);
        assert_eq!(preview.total, "$109.99");
        assert_eq!(preview.total_cents, 10999);
        assert_eq!(preview.customer_name, "Harbor Street Garage");
        assert_eq!(
            (preview.lines[0].previous_stock, preview.lines[0].new_stock),
            (3, 2)
        );
        assert_eq!(count_in_file(&path, "orders"), 0);
        assert_eq!(count_in_file(&path, "order_lines"), 0);
        assert_eq!(count_in_file(&path, "stock_movements"), 0);
        assert_eq!(stock_in_file(&path, "TLS-002"), 3);
    }

    #[test]
    fn order_apply_creates_a_pending_order_and_takes_stock() {
        let (_dir, path, db) = temp_db();
        let placed = db
            .create_order(&order(1, &[("TLS-002", 2), ("TLS-003", 4)]), Mode::Apply)
            .unwrap();
        let id = placed.order_id.unwrap();
        assert_eq!(placed.total_cents, 2 * 10999 + 4 * 2499);
        let stored = db.get_order(id).unwrap();
        assert_eq!(stored.status, OrderStatus::Pending);
        assert_eq!(stored.total_cents, placed.total_cents);
        assert_eq!(
            stored.lines,
            [
                OrderLine {
                    sku: "TLS-002".into(),
                    quantity: 2
                },
                OrderLine {
                    sku: "TLS-003".into(),
                    quantity: 4
                }
            ]
        );
        assert_eq!(stock_in_file(&path, "TLS-002"), 1);
        assert_eq!(stock_in_file(&path, "TLS-003"), 36);
        assert_eq!(count_in_file(&path, "stock_movements"), 2);
        assert_eq!(db.list_orders().unwrap(), [stored]);
    }

    #[test]
    fn order_rules_refuse_and_write_nothing() {
        let (_dir, path, db) = temp_db();
        let bad = [
            order(1, &[]),
            order(2, &[("TLS-002", 1)]),
            order(1, &[("TLS-999", 1)]),
            order(1, &[("TLS-002", 0)]),
            order(1, &[("TLS-002", -1)]),
            order(1, &[("TLS-002", 4)]),
            order(1, &[("TLS-001", 1), ("TLS-002", 4)]),
            order(1, &[("TLS-001", 1), ("TLS-001", 1)]),
            order(1, &[("TLS-001", MAX_LINE_QUANTITY + 1)]),
        ];
        for request in &bad {
            for mode in [Mode::Preview, Mode::Apply] {
                let err = db.create_order(request, mode).unwrap_err();
                assert!(matches!(err, StoreError::Rule(_)), "{request:?}: {err}");
            }
        }
        let too_many = CreateOrderArgs {
            customer_id: 1,
            lines: (0..=MAX_ORDER_LINES)
                .map(|_| OrderLineArgs {
                    sku: "TLS-003".into(),
                    quantity: 1,
                })
                .collect(),
        };
        assert!(matches!(
            db.create_order(&too_many, Mode::Apply),
            Err(StoreError::Rule(RuleViolation::TooManyLines { .. }))
        ));
        assert_eq!(count_in_file(&path, "orders"), 0);
        assert_eq!(count_in_file(&path, "order_lines"), 0);
        assert_eq!(count_in_file(&path, "stock_movements"), 0);
        assert_eq!(stock_in_file(&path, "TLS-001"), 12);
        assert_eq!(stock_in_file(&path, "TLS-002"), 3);
    }

    #[test]
    fn cancel_puts_stock_back_once() {
        let (_dir, path, db) = temp_db();
        let id = db
            .create_order(&order(1, &[("TLS-002", 1)]), Mode::Apply)
            .unwrap()
            .order_id
            .unwrap();
        assert_eq!(stock_in_file(&path, "TLS-002"), 2);

        let preview = db
            .cancel_order(&cancel(id, "customer changed their mind"), Mode::Preview)
            .unwrap();
        assert_eq!(
            (preview.lines[0].previous_stock, preview.lines[0].new_stock),
            (2, 3)
        );
        assert_eq!(db.get_order(id).unwrap().status, OrderStatus::Pending);
        assert_eq!(stock_in_file(&path, "TLS-002"), 2);

        let done = db
            .cancel_order(&cancel(id, "customer changed their mind"), Mode::Apply)
            .unwrap();
        assert_eq!(done, preview);
        assert_eq!(db.get_order(id).unwrap().status, OrderStatus::Cancelled);
        assert_eq!(stock_in_file(&path, "TLS-002"), 3);
        assert_eq!(count_in_file(&path, "stock_movements"), 2);

        // A second cancellation is refused in both modes and changes nothing.
        for mode in [Mode::Preview, Mode::Apply] {
            let err = db.cancel_order(&cancel(id, "again"), mode).unwrap_err();
            assert!(
                matches!(err, StoreError::Rule(RuleViolation::OrderNotPending { .. })),
                "{err}"
            );
        }
        assert_eq!(stock_in_file(&path, "TLS-002"), 3);
        assert_eq!(count_in_file(&path, "stock_movements"), 2);
    }

    #[test]
    fn cancel_rules_refuse() {
        let (_dir, path, db) = temp_db();
        assert!(matches!(
            db.cancel_order(&cancel(42, "gone"), Mode::Apply),
            Err(StoreError::Rule(RuleViolation::UnknownOrder(42)))
        ));
        let id = db
            .create_order(&order(1, &[("TLS-001", 1)]), Mode::Apply)
            .unwrap()
            .order_id
            .unwrap();
        assert!(matches!(
            db.cancel_order(&cancel(id, ""), Mode::Apply),
            Err(StoreError::Rule(RuleViolation::BadReason))
        ));
        assert_eq!(db.get_order(id).unwrap().status, OrderStatus::Pending);
        assert_eq!(stock_in_file(&path, "TLS-001"), 11);
    }

    #[test]
    fn reads_refuse_unknown_keys() {
        let (_dir, _path, db) = temp_db();
        assert!(matches!(
            db.get_product("nope"),
            Err(StoreError::Rule(RuleViolation::UnknownSku(_)))
        ));
        assert!(matches!(
            db.get_order(1),
            Err(StoreError::Rule(RuleViolation::UnknownOrder(1)))
        ));
        assert!(matches!(
            db.list_stock_movements("nope"),
            Err(StoreError::Rule(RuleViolation::UnknownSku(_)))
        ));
        assert!(matches!(
            db.list_reviews("nope"),
            Err(StoreError::Rule(RuleViolation::UnknownSku(_)))
        ));
    }

    /// The JSON a preview of `request` returns now: what the tool returns as its structured
    /// content, so what the guard shows and later compares.
    fn adjust_preview(db: &Db, request: &AdjustStockArgs) -> Value {
        serde_json::to_value(db.adjust_stock(request, Mode::Preview).unwrap()).unwrap()
    }

    #[test]
    fn a_compare_that_fails_rolls_back() {
        let (_dir, path, db) = temp_db();
        let request = adjust("TLS-002", 1, "race");
        let expected = adjust_preview(&db, &request);
        let before = snapshot(&path);
        let seen = std::cell::RefCell::new(Vec::new());
        let refuse = |fresh: &Value| {
            seen.borrow_mut().push(fresh.clone());
            false
        };

        let err = db
            .adjust_stock(&request, Mode::ApplyIfUnchanged(&refuse))
            .unwrap_err();

        assert!(matches!(err, StoreError::Changed), "{err}");
        // The comparison saw exactly what a preview returns, once.
        assert_eq!(seen.into_inner(), [expected]);
        assert_eq!(snapshot(&path), before);
        assert_eq!(stock_in_file(&path, "TLS-002"), 3);
        assert_eq!(count_in_file(&path, "stock_movements"), 0);
    }

    #[test]
    fn a_compare_that_passes_commits() {
        let (_dir, path, db) = temp_db();
        let request = adjust("TLS-002", 1, "race");
        let approved = adjust_preview(&db, &request);
        let unchanged = |fresh: &Value| *fresh == approved;

        let done = db
            .adjust_stock(&request, Mode::ApplyIfUnchanged(&unchanged))
            .unwrap();

        assert_eq!((done.previous_stock, done.new_stock), (3, 4));
        assert_eq!(serde_json::to_value(&done).unwrap(), approved);
        assert_eq!(stock_in_file(&path, "TLS-002"), 4);
        let movements = db.list_stock_movements("TLS-002").unwrap();
        assert_eq!(movements.len(), 1);
        assert_eq!(
            (movements[0].delta, movements[0].reason.as_str()),
            (1, "race")
        );
    }

    #[test]
    fn another_connection_writing_between_preview_and_apply_makes_it_stale() {
        let (_dir, path, db) = temp_db();
        let request = adjust("TLS-002", 1, "race");
        let approved = adjust_preview(&db, &request);
        // Another program on the same file, with its own connection, sells one.
        let other = Db::open(&path).unwrap();
        other
            .adjust_stock(&adjust("TLS-002", -1, "sold"), Mode::Apply)
            .unwrap();
        let after_the_sale = snapshot(&path);
        let unchanged = |fresh: &Value| *fresh == approved;

        let err = db
            .adjust_stock(&request, Mode::ApplyIfUnchanged(&unchanged))
            .unwrap_err();

        assert!(matches!(err, StoreError::Changed), "{err}");
        assert_eq!(snapshot(&path), after_the_sale);
        assert_eq!(stock_in_file(&path, "TLS-002"), 2);
        assert_eq!(count_in_file(&path, "stock_movements"), 1);
        // Without a comparison (no guard asked), the same write applies on the new stock.
        let direct = db.adjust_stock(&request, Mode::Apply).unwrap();
        assert_eq!((direct.previous_stock, direct.new_stock), (2, 3));
    }

    #[test]
    fn an_order_compares_without_its_id_and_is_placed_with_it() {
        let (_dir, path, db) = temp_db();
        let request = order(1, &[("TLS-002", 2)]);
        let approved =
            serde_json::to_value(db.create_order(&request, Mode::Preview).unwrap()).unwrap();
        assert_eq!(approved.get("orderId"), None, "a preview has no order id");
        let unchanged = |fresh: &Value| *fresh == approved;

        let placed = db
            .create_order(&request, Mode::ApplyIfUnchanged(&unchanged))
            .unwrap();

        let id = placed.order_id.unwrap();
        assert_eq!(db.get_order(id).unwrap().status, OrderStatus::Pending);
        assert_eq!(stock_in_file(&path, "TLS-002"), 1);

        // A second order previewed on stock 1, then the stock changes: not placed.
        let second = order(1, &[("TLS-002", 1)]);
        let approved =
            serde_json::to_value(db.create_order(&second, Mode::Preview).unwrap()).unwrap();
        Db::open(&path)
            .unwrap()
            .adjust_stock(&adjust("TLS-002", 5, "delivery"), Mode::Apply)
            .unwrap();
        let before = snapshot(&path);
        let unchanged = |fresh: &Value| *fresh == approved;
        let err = db
            .create_order(&second, Mode::ApplyIfUnchanged(&unchanged))
            .unwrap_err();
        assert!(matches!(err, StoreError::Changed), "{err}");
        assert_eq!(snapshot(&path), before);
        assert_eq!(count_in_file(&path, "orders"), 1);
    }

    #[test]
    fn a_cancellation_compares_its_status_and_its_restock() {
        let (_dir, path, db) = temp_db();
        let id = db
            .create_order(&order(1, &[("TLS-002", 1)]), Mode::Apply)
            .unwrap()
            .order_id
            .unwrap();
        let request = cancel(id, "customer changed their mind");
        let approved =
            serde_json::to_value(db.cancel_order(&request, Mode::Preview).unwrap()).unwrap();
        let unchanged = |fresh: &Value| *fresh == approved;

        // The stock the restock was shown on ("2 -> 3") moves: stale, the order stays pending.
        let other = Db::open(&path).unwrap();
        other
            .adjust_stock(&adjust("TLS-002", 1, "found one"), Mode::Apply)
            .unwrap();
        let before = snapshot(&path);
        let err = db
            .cancel_order(&request, Mode::ApplyIfUnchanged(&unchanged))
            .unwrap_err();
        assert!(matches!(err, StoreError::Changed), "{err}");
        assert_eq!(snapshot(&path), before);
        assert_eq!(db.get_order(id).unwrap().status, OrderStatus::Pending);

        // Cancelled elsewhere meanwhile: the rule itself fails now, and nothing is written.
        let approved =
            serde_json::to_value(db.cancel_order(&request, Mode::Preview).unwrap()).unwrap();
        other.cancel_order(&request, Mode::Apply).unwrap();
        let before = snapshot(&path);
        let unchanged = |fresh: &Value| *fresh == approved;
        let err = db
            .cancel_order(&request, Mode::ApplyIfUnchanged(&unchanged))
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Rule(RuleViolation::OrderNotPending { .. })),
            "{err}"
        );
        assert_eq!(snapshot(&path), before);
        assert_eq!(stock_in_file(&path, "TLS-002"), 4);
    }

    /// Every row of every table, as text: equal snapshots mean nothing was written.
    fn snapshot(path: &Path) -> Vec<String> {
        let conn = Connection::open(path).unwrap();
        let mut out = Vec::new();
        for table in workspace_tests::TABLES {
            let mut stmt = conn
                .prepare(&format!("SELECT * FROM {table} ORDER BY rowid"))
                .unwrap();
            let columns = stmt.column_count();
            let rows = stmt
                .query_map([], |row| {
                    let cells = (0..columns)
                        .map(|i| {
                            row.get::<_, rusqlite::types::Value>(i)
                                .map(|v| format!("{v:?}"))
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(format!("{table}: {}", cells.join(" | ")))
                })
                .unwrap();
            out.extend(rows.map(Result::unwrap));
        }
        out
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        const SKUS: [&str; 4] = ["TLS-001", "TLS-002", "TLS-003", "TLS-999"];

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            /// The preview decides exactly like the apply: same error or same outcome (the
            /// preview has no order id), and the preview writes nothing.
            #[test]
            fn order_preview_decides_like_the_apply(
                customer in 0i64..3,
                lines in proptest::collection::vec((0usize..4, -2i64..6), 0..5),
            ) {
                let (_dir, path, db) = temp_db();
                let lines: Vec<(&str, i64)> = lines.iter().map(|&(i, q)| (SKUS[i], q)).collect();
                let request = order(customer, &lines);
                let before = snapshot(&path);
                let preview = db.create_order(&request, Mode::Preview);
                prop_assert_eq!(snapshot(&path), before.clone());
                let applied = db.create_order(&request, Mode::Apply);
                match (preview, applied) {
                    (Ok(preview), Ok(mut applied)) => {
                        prop_assert!(applied.order_id.is_some());
                        applied.order_id = None;
                        prop_assert_eq!(preview, applied);
                        prop_assert_ne!(snapshot(&path), before);
                    }
                    (Err(preview), Err(applied)) => {
                        prop_assert_eq!(preview.to_string(), applied.to_string());
                        prop_assert_eq!(snapshot(&path), before);
                    }
                    (preview, applied) => {
                        prop_assert!(false, "preview {:?} but apply {:?}", preview, applied);
                    }
                }
            }

            /// The same for stock adjustments, with any sku, delta and reason.
            #[test]
            fn adjustment_preview_decides_like_the_apply(
                sku in 0usize..4,
                delta in prop_oneof![-50i64..50, any::<i64>()],
                reason in "[ a-z]{0,3}|.{0,210}",
            ) {
                let (_dir, path, db) = temp_db();
                let request = adjust(SKUS[sku], delta, &reason);
                let before = snapshot(&path);
                let preview = db.adjust_stock(&request, Mode::Preview);
                prop_assert_eq!(snapshot(&path), before.clone());
                let applied = db.adjust_stock(&request, Mode::Apply);
                match (preview, applied) {
                    (Ok(preview), Ok(applied)) => {
                        prop_assert_eq!(preview, applied);
                        prop_assert_ne!(snapshot(&path), before);
                    }
                    (Err(preview), Err(applied)) => {
                        prop_assert_eq!(preview.to_string(), applied.to_string());
                        prop_assert_eq!(snapshot(&path), before);
                    }
                    (preview, applied) => {
                        prop_assert!(false, "preview {:?} but apply {:?}", preview, applied);
                    }
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(48))]

            /// A compare-and-apply against the preview taken before another connection's write
            /// commits exactly when that write left the previewed product alone, and otherwise
            /// writes nothing at all.
            #[test]
            fn compare_and_apply_commits_only_on_the_state_it_showed(
                delta in -4i64..5,
                between in proptest::option::of((0usize..3, -4i64..5)),
            ) {
                let (_dir, path, db) = temp_db();
                let skus = ["TLS-001", "TLS-002", "TLS-003"];
                let request = adjust("TLS-002", delta, "prop");
                let Ok(preview) = db.adjust_stock(&request, Mode::Preview) else {
                    return Ok(()); // a refused preview asks nobody: nothing to apply
                };
                let approved = serde_json::to_value(&preview).unwrap();
                let other = Db::open(&path).unwrap();
                let touched = between.is_some_and(|(i, d)| {
                    other.adjust_stock(&adjust(skus[i], d, "between"), Mode::Apply).is_ok()
                        && skus[i] == "TLS-002"
                });
                let before = snapshot(&path);
                let unchanged = |fresh: &Value| *fresh == approved;

                let applied = db.adjust_stock(&request, Mode::ApplyIfUnchanged(&unchanged));

                if touched {
                    let err = applied.unwrap_err();
                    prop_assert!(
                        matches!(err, StoreError::Rule(_) | StoreError::Changed),
                        "{}",
                        err
                    );
                    prop_assert_eq!(snapshot(&path), before);
                } else {
                    prop_assert_eq!(applied.unwrap(), preview);
                    prop_assert_eq!(stock_in_file(&path, "TLS-002"), 3 + delta);
                }
            }

            /// Whatever sequence of adjustments arrives, the stock never goes below zero, every
            /// refused request leaves the file untouched, and the stock equals the seed plus the
            /// sum of the logged movements.
            #[test]
            fn stock_never_negative_and_matches_the_log(
                steps in proptest::collection::vec((0usize..3, -20i64..20, any::<bool>()), 1..20)
            ) {
                let (_dir, path, db) = temp_db();
                let skus = ["TLS-001", "TLS-002", "TLS-003"];
                let mut model = [12i64, 3, 40];
                for (i, delta, preview) in steps {
                    let mode = if preview { Mode::Preview } else { Mode::Apply };
                    let result = db.adjust_stock(&adjust(skus[i], delta, "prop"), mode);
                    let allowed = delta != 0 && model[i] + delta >= 0;
                    prop_assert_eq!(result.is_ok(), allowed);
                    if allowed && !preview {
                        model[i] += delta;
                    }
                    prop_assert_eq!(stock_in_file(&path, skus[i]), model[i]);
                }
                for (i, sku) in skus.iter().enumerate() {
                    let logged: i64 = db
                        .list_stock_movements(sku)
                        .unwrap()
                        .iter()
                        .map(|m| m.delta)
                        .sum();
                    prop_assert_eq!([12i64, 3, 40][i] + logged, model[i]);
                    prop_assert!(model[i] >= 0);
                }
            }
        }
    }
}
