#![doc = include_str!("../README.md")]

mod args;
mod config;
mod error;
mod http;
mod log;
mod serve;
mod stdio;

pub use args::{ENVIRONMENT_HELP, ServeArgs, store_prefix_help};
pub use config::{AuthSettings, NotifySettings, ServeConfig, StoreBackend};
pub use error::Error;
pub use http::{
    HTTP_PATH, HttpOptions, http_router, http_router_with, serve_http, serve_http_with,
};
pub use log::init_logging;
pub use serve::{Prepared, Service, Started, serve};
pub use stdio::serve_stdio;
