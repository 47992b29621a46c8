#![doc = include_str!("../README.md")]

mod downstream;
mod server;
mod tools;
mod upstream;

pub use server::{ProxyOptions, ProxyServer};
pub use upstream::{DEFAULT_UPSTREAM_TIMEOUT, UpstreamError, UpstreamSpec};
