//! Which MCP tools are writes, which writes are destructive, whether writes are enabled, and what
//! a server's published tool surface is.
//!
//! # What this crate decides
//!
//! - **Effective annotations** ([`effective_annotations`]): a tool's annotation hints read with the
//!   MCP spec defaults (`readOnlyHint` false, `destructiveHint` true, `idempotentHint` false,
//!   `openWorldHint` true).
//! - **Classification** ([`classify`]): a tool is a write unless `readOnlyHint` is exactly `true`;
//!   a write is destructive unless `destructiveHint` is exactly `false`. A tool whose input schema
//!   declares a `confirmationToken` property is a destructive write whatever it claims, and
//!   [`advertised_annotations`] gives the annotations it must advertise instead.
//! - **The writes gate** ([`writes_enabled`]): only the exact value `true` of the writes
//!   environment variable (default [`DEFAULT_WRITES_ENV`]) enables writes.
//! - **The surface report** ([`SurfaceReport`]) and the **published-surface contract**
//!   ([`SurfaceContract`]) with a check that names every [`Drift`].
//!
//! These are the workspace's only definitions of these predicates: the adapter and the audit
//! tool call them rather than re-deriving them.
//!
//! # What it does not do
//!
//! No IO of any kind: it does not read the environment, files or the network, and knows nothing
//! of rmcp. Callers read the environment variable, the contract file and the tool list at the
//! edge and pass the values in. It does not trust annotations either: they are claims, read as
//! cautiously as the spec allows.
//!
//! # Example
//!
//! ```
//! use mcp_write_guard_policy::{
//!     classify, writes_enabled, Annotations, SurfaceContract, SurfaceReport, ToolClass, ToolFacts,
//! };
//!
//! let empty = serde_json::Map::new();
//! let gated = serde_json::json!({
//!     "type": "object",
//!     "properties": {"id": {"type": "string"}, "confirmationToken": {"type": "string"}}
//! });
//! let gated = gated.as_object().expect("an object");
//! let read = Annotations { read_only_hint: Some(true), ..Annotations::default() };
//! let add = Annotations { read_only_hint: Some(false), destructive_hint: Some(false), ..Annotations::default() };
//!
//! let tools = [
//!     ToolFacts::new("list_products", Some(&read), &empty),
//!     ToolFacts::new("add_product", Some(&add), &empty),
//!     // Claims to be a read, but asks for a confirmation token: a destructive write.
//!     ToolFacts::new("purge_orders", Some(&read), gated),
//! ];
//! let classes: Vec<ToolClass> = tools.iter().map(|t| classify(t).class).collect();
//! assert_eq!(classes, [ToolClass::Read, ToolClass::AdditiveWrite, ToolClass::DestructiveWrite]);
//!
//! // The gate is a pure function of the variable's value, read by the caller.
//! assert!(writes_enabled(Some("true")));
//! assert!(!writes_enabled(Some("yes")));
//!
//! // Pin the surface, then detect drift.
//! let report = SurfaceReport::from_tools(tools);
//! let contract = SurfaceContract::from_surface(&report, 1024);
//! assert!(contract.check(&report, 1024).is_empty());
//! let drift = contract.check(&report, 2048);
//! assert_eq!(drift[0].field(), "maxToolsListBytes");
//! ```

mod annotations;
mod classify;
mod contract;
mod error;
mod gate;
mod surface;

pub use annotations::{Annotations, EffectiveAnnotations, effective_annotations};
pub use classify::{
    CONFIRMATION_TOKEN_ARG, Classification, MAX_SCHEMA_COMPOSITION, ToolClass, ToolFacts,
    advertised_annotations, classify, declares_confirmation_token,
};
pub use contract::{Drift, SurfaceContract};
pub use error::Error;
pub use gate::{DEFAULT_WRITES_ENV, writes_enabled};
pub use surface::{SurfaceReport, ToolReport};
