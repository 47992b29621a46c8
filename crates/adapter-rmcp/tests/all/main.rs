//! The adapter's integration tests, one module per behaviour, built as one binary so that the
//! suite links once. Shared servers and harnesses are in `common` and `wrapped`; the scripted
//! clients, the in-memory connect and the failing store are the crate's own test kit
//! (`mcp_write_guard_rmcp::test_util`, feature `test-util`).
//!
//! proptest keeps the shrunk failures of module `m` in `tests/proptest-regressions/m.txt`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;
mod wrapped;

mod admin_prompt;
mod attack_prompt;
mod audit_trail;
mod cancellation;
mod compare_apply;
mod composed_token;
mod dry_previews;
mod get_tool;
mod inner_errors;
mod late_answers;
mod listing;
mod lookup;
mod page;
mod prompt_render;
mod proptests;
mod race;
mod round_trip;
mod stateless_http;
mod store_failures;
mod surface;
mod tasks;
mod timeouts;
mod tokens;
mod tool_definition;
mod write_path;
