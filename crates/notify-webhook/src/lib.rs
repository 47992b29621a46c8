#![doc = include_str!("../README.md")]

mod error;
mod notifier;
mod payload;
mod policy;
mod signature;

pub use error::WebhookError;
pub use notifier::{DEFAULT_RETRIES, DEFAULT_TIMEOUT, MAX_RETRIES, WebhookNotifier};
pub use signature::{SIGNATURE_HEADER, verify_signature};
