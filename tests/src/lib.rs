//! The end-to-end kit shared by the tests that drive the reference `store-server` (its own
//! `tests/`, the proxy's) and by the benches in `src/bin`.
//!
//! The person is played by mcp-write-guard-rmcp's
//! [`ScriptedClient`](mcp_write_guard_rmcp::test_util::ScriptedClient) ([`connect_over`] any
//! transport). What matters is checked on disk: [`FileView`] reads the SQLite file through a
//! connection of its own. [`RawHttp`] speaks streamable HTTP by hand; [`Browser`] opens the
//! pages a person sees in a headless chromium. The kit does not depend on `store-server`: it
//! knows the server by its binary and its file.

mod browser;
mod child;
pub mod cli;
mod client;
mod keys;
mod race;
mod raw;
mod results;
mod sqlite;
mod tokens;

pub use browser::Browser;
pub use child::{PYTHON_MCP, SERVING_AT, python_sdk, serving_url, spawn_serving};
pub use client::{Client, connect_over};
pub use keys::SigningKey;
pub use race::{
    COUNTER_SALE, HeldApprovals, RACE_PLUS_ONE_PROMPT, Round, Tally, approve_round, ask_once,
    counter_sale, hold_approvals, race_one_stock, race_plus_one, sell_one, tally,
};
pub use raw::{HttpReply, RawHttp, approve};
pub use results::{
    assert_refused, call, declined_adjustment_question, enveloped_data, is_error, message,
    structured, text,
};
pub use sqlite::{FileView, Movement, Snapshot, TABLES};
pub use tokens::{cancel_args, cancel_order_token};

/// The question the store asks for `adjust_stock` of TLS-002 (seeded at 3) by -2, "damaged in
/// transit".
pub const DAMAGED_TLS_002_QUESTION: &str =
    r#"Adjust "TLS-002" by -2: stock 3 -> 1. Reason given: "damaged in transit""#;

/// The store's six read tools: each declares itself read-only, not destructive, idempotent and
/// closed-world.
pub const READ_TOOLS: [&str; 6] = [
    "list_products",
    "get_product",
    "list_orders",
    "get_order",
    "list_stock_movements",
    "list_reviews",
];

/// What a helper returns when something unexpected happens; tests `?` or unwrap it.
pub type Failure = Box<dyn std::error::Error + Send + Sync>;
