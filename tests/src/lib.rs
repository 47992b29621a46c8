//! Shared helpers for the workspace end-to-end tests in `tests/tests/`.
//!
//! The tests start the real `store-server` (its database layer, its rmcp server and the guard
//! exactly as the binary builds them) and drive it with a client that plays the user
//! ([`ScriptedUser`]). What matters is checked on disk: [`FileView`] reads the SQLite file
//! through a connection of its own. [`Browser`] opens the pages a person sees in a headless
//! chromium.

mod browser;
pub mod cli;
mod fixture;
mod race;
mod raw;
mod results;
mod sqlite;
mod user;

pub use browser::Browser;
pub use fixture::{Client, Era, Store, connect, connect_over};
pub use race::{
    HeldApprovals, Round, Tally, approve_round, ask_once, hold_approvals, race_one_stock,
    race_plus_one, tally,
};
pub use raw::{RawHttp, Reply, approve};
pub use results::{call, enveloped_data, is_error, message, structured, text};
pub use sqlite::{FileView, Movement, Snapshot, TABLES};
pub use user::{Answer, Asked, Gate, ScriptedUser, SideEffect};

/// What a helper returns when something unexpected happens; tests `?` or unwrap it.
pub type Failure = Box<dyn std::error::Error + Send + Sync>;
