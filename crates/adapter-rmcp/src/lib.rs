#![doc = include_str!("../README.md")]

mod audit;
mod builder;
mod config_check;
pub mod danger;
mod elicit;
mod error;
mod guard;
pub mod methods;
pub mod notify;
#[cfg(feature = "approval-page")]
pub mod page;
mod principal;
mod prompt;
mod step;
#[cfg(feature = "test-util")]
pub mod test_util;
mod tools;
mod write_path;

pub use audit::{Asked, AuditRecord, AuditSink, Channel, MemorySink, Outcome, TracingSink};
#[cfg(feature = "audit-jsonl")]
pub use audit::{CHAIN_START, JsonLinesSink};
pub use builder::{DEFAULT_PROGRESS_EVERY, WriteGuardBuilder};
pub use config_check::ConfigMistake;
pub use elicit::{Era, INPUT_KEY};
pub use error::Error;
pub use guard::WriteGuard;
/// The decisions (approvals, tokens, clock, store): `mcp-write-guard-core`, so that a server
/// needs this one dependency for what the builder takes ([`approval::Clock`],
/// [`approval::Store`], [`approval::canonical::ArgLimits`]).
pub use mcp_write_guard_core as approval;
/// The untrusted-data envelope: `mcp-write-guard-envelope`.
pub use mcp_write_guard_envelope as envelope;
/// Which tools are writes, and the published surface: `mcp-write-guard-policy`.
pub use mcp_write_guard_policy as policy;

pub use mcp_write_guard_core::render::{
    DEFAULT_MAX_RENDERED_CHARS, Rendered, render_key, render_value,
};
pub use principal::{
    AuthenticatedSubject, ConnectionId, FromAuthenticatedSubject, LOCAL_PRINCIPAL, LocalMachine,
    PerConnection, PrincipalRequest, PrincipalResolver,
};
pub use prompt::{PromptInput, default_prompt};
pub use step::{ApprovedPreview, Stale, WriteStep, write_step, write_step_in};
pub use tools::PREPARE_ADMIN_ACTION;
pub use write_path::{
    ALREADY_USED_MESSAGE, MAX_WAITING_PER_QUESTION, STALE_MESSAGE, STORE_UNAVAILABLE_MESSAGE,
};
