//! What can go wrong in the store, split by who has to act on it.
//!
//! - [`StoreError::Rule`]: a business rule said no ([`RuleViolation`]). The message goes to the
//!   model and the person as it is: what was wrong and what to do instead.
//! - [`StoreError::Changed`]: an approved compare-and-apply found that the change is no longer
//!   the one the person approved. The guard turns it into "the data changed since you
//!   approved; nothing was saved".
//! - [`StoreError::Storage`]: the store itself failed ([`StorageError`]). It fails closed:
//!   nothing is written, the details go to the log, and the model only reads that the database
//!   failed.

use crate::rules::RuleViolation;

/// Why a store operation did not happen. Nothing was written in any case.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A business rule said no.
    #[error(transparent)]
    Rule(#[from] RuleViolation),
    /// A compare-and-apply found that the change is no longer the one that was previewed (the
    /// data changed in between).
    #[error("the data changed since this change was previewed")]
    Changed,
    /// The store itself failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        Self::Storage(StorageError::Sqlite(err))
    }
}

/// The store itself failed: the request may be fine, but it could not be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// SQLite reported an error (including a row that does not read back, such as an unknown
    /// order status).
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The database file has a schema this program does not know.
    #[error("database schema version {found} is not supported (expected {expected})")]
    UnsupportedSchema {
        /// The version in the file.
        found: i64,
        /// The version this program writes.
        expected: i64,
    },
    /// The change could not be turned into JSON to compare it with the approved one.
    #[error("could not encode the change to compare it: {0}")]
    Encode(#[from] serde_json::Error),
    /// The blocking task running a database call failed.
    #[error("database task failed: {0}")]
    TaskFailed(String),
}
