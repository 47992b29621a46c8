#![doc = include_str!("../README.md")]

pub mod admission;
pub mod answer;
mod approval;
mod approvals;
mod args;
mod binding;
mod bound;
pub mod canonical;
mod change;
mod clock;
pub mod danger;
pub mod definition;
mod error;
pub mod ids;
mod key;
pub mod page;
pub mod policy;
pub mod question;
mod record;
pub mod render;
pub mod round_trip;
mod secret;
pub mod store;
#[cfg(any(test, feature = "test-util"))]
pub mod store_conformance;
pub mod token;

#[cfg(test)]
mod test_support;

// The core vocabulary. Everything else is in the module of its concern.
pub use answer::{AnswerAction, Decision, DenyReason};
pub use approval::{Approved, PendingApproval, Verdict, previews_match};
pub use approvals::Approvals;
pub use args::CapturedArgs;
pub use binding::Binding;
pub use change::{Change, ChangeRow};
#[cfg(any(test, feature = "test-util"))]
pub use clock::ManualClock;
pub use clock::{Clock, SystemClock};
pub use definition::{ToolChanged, ToolDefinition};
pub use error::Error;
pub use ids::{ApprovalId, Principal, ToolName};
pub use policy::ApprovalPolicy;
pub use store::{MemoryStore, Store, StoreError};
