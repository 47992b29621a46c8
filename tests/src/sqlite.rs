//! Reads the store's SQLite file through a connection of its own, as an outside observer:
//! what these functions return is what is on disk, not what the server says.

use std::{collections::BTreeMap, path::Path};

use rusqlite::{Connection, OpenFlags, OptionalExtension, types::Value as SqlValue};

use crate::Failure;

/// Every table the store writes to, for whole-database snapshots.
pub const TABLES: [&str; 6] = [
    "products",
    "stock_movements",
    "customers",
    "orders",
    "order_lines",
    "reviews",
];

/// One row of `stock_movements`, without its id and timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Movement {
    /// The product.
    pub sku: String,
    /// The change.
    pub delta: i64,
    /// Why.
    pub reason: String,
}

/// Every row of every table, as text, in a stable order.
pub type Snapshot = BTreeMap<&'static str, Vec<Vec<String>>>;

/// An observer of one database file.
#[derive(Debug, Clone)]
pub struct FileView {
    path: std::path::PathBuf,
}

impl FileView {
    /// Watches the file at `path`.
    pub fn new(path: impl AsRef<Path>) -> Self {
        Self {
            path: path.as_ref().to_owned(),
        }
    }

    fn open(&self) -> Result<Connection, Failure> {
        let conn = Connection::open_with_flags(&self.path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(conn)
    }

    /// Asserts that TLS-002 (seeded at 3) was not adjusted: its stock is 3 on disk and no stock
    /// movement is recorded.
    pub fn assert_tls_002_unadjusted(&self) -> Result<(), Failure> {
        assert_eq!(self.stock("TLS-002")?, 3);
        assert!(self.movements()?.is_empty());
        Ok(())
    }

    /// Asserts that one adjustment of TLS-002 by -2 landed: its stock is 1 on disk and exactly
    /// one stock movement is recorded.
    pub fn assert_tls_002_adjusted_once(&self) -> Result<(), Failure> {
        assert_eq!(self.stock("TLS-002")?, 1);
        assert_eq!(self.movements()?.len(), 1);
        Ok(())
    }

    /// The stock of `sku` on disk.
    pub fn stock(&self, sku: &str) -> Result<i64, Failure> {
        Ok(self
            .open()?
            .query_row("SELECT stock FROM products WHERE sku = ?1", [sku], |r| {
                r.get(0)
            })?)
    }

    /// Every stock movement on disk, oldest first.
    pub fn movements(&self) -> Result<Vec<Movement>, Failure> {
        let conn = self.open()?;
        let mut stmt =
            conn.prepare("SELECT sku, delta, reason FROM stock_movements ORDER BY id")?;
        let rows = stmt.query_map([], |r| {
            Ok(Movement {
                sku: r.get(0)?,
                delta: r.get(1)?,
                reason: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The status of order `id` on disk, `None` when there is no such order.
    pub fn order_status(&self, id: i64) -> Result<Option<String>, Failure> {
        Ok(self
            .open()?
            .query_row("SELECT status FROM orders WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()?)
    }

    /// How many rows `table` has on disk.
    pub fn count(&self, table: &str) -> Result<i64, Failure> {
        if !TABLES.contains(&table) {
            return Err(format!("unknown table {table}").into());
        }
        Ok(self
            .open()?
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))?)
    }

    /// Every row of every table, to compare before and after something that must not write.
    pub fn snapshot(&self) -> Result<Snapshot, Failure> {
        let conn = self.open()?;
        let mut out = Snapshot::new();
        for table in TABLES {
            let mut stmt = conn.prepare(&format!("SELECT * FROM {table} ORDER BY rowid"))?;
            let columns = stmt.column_count();
            let rows = stmt.query_map([], |row| {
                (0..columns)
                    .map(|i| {
                        Ok(match row.get::<_, SqlValue>(i)? {
                            SqlValue::Null => "NULL".to_owned(),
                            SqlValue::Integer(n) => n.to_string(),
                            SqlValue::Real(x) => x.to_string(),
                            SqlValue::Text(s) => s,
                            SqlValue::Blob(b) => format!("{b:?}"),
                        })
                    })
                    .collect::<Result<Vec<_>, rusqlite::Error>>()
            })?;
            out.insert(table, rows.collect::<Result<_, _>>()?);
        }
        Ok(out)
    }

    /// Changes the stock of `sku` behind the server's back (another process, a warehouse
    /// scanner), without a movement row.
    pub fn set_stock_behind_the_servers_back(&self, sku: &str, stock: i64) -> Result<(), Failure> {
        let conn = Connection::open(&self.path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        let changed = conn.execute(
            "UPDATE products SET stock = ?2 WHERE sku = ?1",
            rusqlite::params![sku, stock],
        )?;
        if changed != 1 {
            return Err(format!("no product {sku}").into());
        }
        Ok(())
    }
}
