//! mcp-write-guard-http's integration tests, in process: the bearer layer (JWKS from a file, a
//! URL or https; refreshed for a rotated key, never through a proxy for loopback), the tokens it
//! refuses, and sessions that close when idle.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod bearer;
mod identity;
