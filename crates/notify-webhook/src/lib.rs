#![doc = include_str!("../README.md")]
//!
//! # Modules
//!
//! The pure parts have their own files and tests: the body (`payload`), the signature
//! (`signature`), when to try again (`policy`); the HTTP delivery is `notifier`.
//!
//! # TLS
//!
//! `https` goes through reqwest's `rustls` feature: rustls with the aws-lc-rs provider and the
//! platform's certificate verifier. It is the feature set rmcp's `reqwest` feature and
//! mcp-write-guard-audit already bring, so the workspace gains no TLS stack. The client follows
//! no redirect, does no retry of its own (attempts are counted here), and honours the proxy
//! environment variables (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`).

mod error;
mod notifier;
mod payload;
mod policy;
mod signature;

pub use error::WebhookError;
pub use notifier::{DEFAULT_RETRIES, DEFAULT_TIMEOUT, MAX_RETRIES, WebhookNotifier};
pub use signature::{SIGNATURE_HEADER, verify_signature};
