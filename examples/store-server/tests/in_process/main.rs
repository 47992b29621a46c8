//! The store's end-to-end tests in process: the server's database layer, its rmcp server and
//! the guard exactly as the binary builds them ([`store::Store`]), driven by
//! mcp-write-guard-rmcp's `ScriptedClient` playing the person; what matters is checked on disk
//! (`workspace_tests::FileView`). One test binary, a module per subject.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod store;

mod answers;
mod approvals;
mod audit_file;
mod decisive;
mod http;
mod prompts;
mod races;
mod reads;
mod refusals;
mod tokens;
