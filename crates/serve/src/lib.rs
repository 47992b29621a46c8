#![doc = include_str!("../README.md")]

mod args;
mod config;
mod error;
mod http;
mod log;
mod serve;
mod stdio;

// The workspace README's and docs/ pages' Rust snippets, compiled (and run, unless `no_run`) as
// this crate's doctests: it depends on every piece they use. Only under `cargo test`, so the
// packaged crate never reads files outside its folder.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
mod workspace_readme {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guarding.md")]
mod docs_guarding {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/http-and-identity.md")]
mod docs_http_and_identity {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/approval-page.md")]
mod docs_approval_page {}

pub use args::{ENVIRONMENT_HELP, ServeArgs, store_prefix_help};
pub use config::{AuthSettings, NotifySettings, ServeConfig, StoreBackend};
pub use error::Error;
pub use http::{
    HTTP_PATH, HttpOptions, http_router, http_router_with, serve_http, serve_http_with,
};
pub use log::{init_logging, run_logged};
pub use serve::{Prepared, Service, Started, serve};
pub use stdio::serve_stdio;
