//! Wraps any rmcp [`ServerHandler`](rmcp::ServerHandler) so that every write needs a person's
//! approval of that exact change, enforced by the server.
//!
//! # What this crate decides
//!
//! Nothing of its own. It wires the policy crates into rmcp:
//! [`mcp_write_guard_policy`] decides which tools are writes and whether writes are enabled,
//! [`mcp_write_guard_core`] decides what an approval, an answer, a token and a round trip are worth, and
//! [`mcp_write_guard_envelope`] decides which results are wrapped as untrusted data. The [`WriteGuard`] forwards
//! every `ServerHandler` method to the inner server, rewrites what `tools/list` advertises, and
//! runs each `tools/call` through the write path:
//!
//! 1. Classify the tool. A read goes to the inner server, then into the envelope (unless the
//!    read is [trusted](WriteGuardBuilder::trust_read)).
//! 2. Who is asking, writes enabled, the arguments captured once (not an object, too large or
//!    too deep: refuse; every later step uses exactly these), in the order of mcp-write-guard-core's
//!    [`admit`](mcp_write_guard_core::admit). A request that lets the inner
//!    server answer with a task (it declares the tasks extension and the inner server supports
//!    it) is refused too: a task would apply after the guard has finished with the call.
//! 3. The client cannot be asked (no form elicitation, and no URL mode where an approval page is
//!    configured): refuse, unless [`danger::AllowWritesWithoutElicitation`] is on.
//! 4. A token-gated tool (one whose input schema has `confirmationToken`) needs a token that
//!    would spend now for this principal, tool and these exact arguments; any other token is
//!    refused before anyone is asked. [`PREPARE_ADMIN_ACTION`] issues one after the user
//!    approves the intent.
//! 5. Run the tool's preview (dry run) with the captured arguments; the tool sees
//!    [`WriteStep::Preview`] in the request extensions, which the model cannot set. A preview
//!    that says no (`isError: true`) is returned in the envelope and nobody is asked. For
//!    [`PREPARE_ADMIN_ACTION`] it is the target tool's preview, with the target's arguments
//!    (without any `confirmationToken`), so the intent question shows what the action would
//!    change; a target preview that says no refuses it the same way, and no token is issued.
//! 6. Put the pending approval in the approval store and ask the user with the preview, on a
//!    2-minute clock: an `elicitation/create` form below protocol 2026-07-28 (the approval is
//!    taken back from the store, once, when the answer arrives), an `InputRequiredResult` with
//!    a server-bound single-use `requestState` from 2026-07-28 on. In both eras a store that
//!    is down, or a user with too many open approvals, is a refusal. Every argument and
//!    preview value reaches the question through one renderer ([`render_value`]): a value
//!    cannot add lines to it or reorder it. One [`Outcome::Asked`] record says what was shown.
//!    With an approval page (feature `approval-page`, see `page`) and a client that supports
//!    URL-mode elicitation, the question is a link to the server's own page instead, and the
//!    person's answer there is decided the same way.
//! 7. Only `accept` with `approve: true` continues: mcp-write-guard-core's decision consumes the
//!    pending approval and returns an [`mcp_write_guard_core::Approved`], the only value the apply
//!    takes.
//! 8. If the client cancelled the request meanwhile, refuse. Spend the token, then apply with
//!    the same captured arguments as a compare-and-apply: the tool sees
//!    [`WriteStep::Apply`] with the approved preview, recomputes the preview inside the
//!    transaction that applies and commits only if [`ApprovedPreview::check`] says unchanged
//!    (else "the data changed since you approved; nothing was saved"). There is no separate
//!    re-run call.
//! 9. Wrap the result, record the decision. Every record of the call carries the same
//!    approval id, so `asked` → `approved` → `applied` / `stale` can be joined (see
//!    [`AuditRecord`] for what is recorded and how to redact).
//!
//! Every refusal is a tool result with `isError: true` that says what happened, that nothing
//! was saved and what the user can do; the inner tool's apply is never called, and one
//! [`AuditRecord`] names the reason. Text from the inner server reaches the model only inside
//! the envelope: an inner error while previewing or applying is kept in the audit reason, and
//! the model reads the guard's own words.
//!
//! # What it does not do
//!
//! It cannot prove that a person, rather than the client, answered the question: an `accept`
//! comes from the client. It does not make a tool's preview honest: a tool that
//! [opts in](WriteGuardBuilder::preview) must compute the change without making it on
//! [`WriteStep::Preview`] and compare on [`WriteStep::Apply`] (the guard refuses to vouch for
//! an apply that did not compare). A tool that does not opt in gets [`WriteStep::Direct`]: the
//! person approves its exact arguments, but nothing pins the state the write lands on. It
//! does not support write tools that need their own input rounds or tasks. The name [`PREPARE_ADMIN_ACTION`] is reserved.
//!
//! # Transports and the page
//!
//! The guard is an rmcp `ServerHandler`: serve it on any transport. Crates of their own carry
//! the rest, so a server compiles only what it serves: `mcp-write-guard-stdio` (stdio and any
//! byte stream: bad frames answered, pipes and sockets on the event loop, backpressure),
//! `mcp-write-guard-http` (a bearer-token resource server whose verified subject becomes the
//! principal, bounded sessions, loopback origins) and `mcp-write-guard-page` (the approval
//! page's routes, reaching the guard through `page::PageHost`, feature `approval-page`).
//!
//! # Testing your server behind the guard
//!
//! The `test-util` feature adds `test_util`: a client that answers approval questions from a
//! script in both protocol eras, an in-memory connect, a store that can be switched down, and
//! mcp-write-guard-core's `ManualClock`. This crate's own tests use them.
//!
//! # Example
//!
//! ```
//! use mcp_write_guard_rmcp::{WriteGuard, WriteStep, write_step};
//! use rmcp::{
//!     ErrorData, ServerHandler, handler::server::{router::tool::ToolRouter, wrapper::Parameters},
//!     model::{CallToolResult, ContentBlock}, schemars, service::{RequestContext, RoleServer},
//!     tool, tool_handler, tool_router,
//! };
//! use std::sync::{Arc, atomic::{AtomicI64, Ordering}};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Add { n: i64 }
//!
//! #[derive(Clone)]
//! struct Counter { value: Arc<AtomicI64>, tool_router: ToolRouter<Self> }
//!
//! #[tool_router]
//! impl Counter {
//!     #[tool(description = "Read the counter", annotations(read_only_hint = true))]
//!     async fn get(&self) -> String { self.value.load(Ordering::SeqCst).to_string() }
//!
//!     #[tool(description = "Add to the counter",
//!            annotations(read_only_hint = false, destructive_hint = false, open_world_hint = false))]
//!     async fn add(&self, Parameters(Add { n }): Parameters<Add>, cx: RequestContext<RoleServer>)
//!         -> Result<CallToolResult, ErrorData> {
//!         // One transaction: read, compute the change, then preview / compare-and-apply.
//!         let before = self.value.load(Ordering::SeqCst);
//!         let change = serde_json::json!({"before": before, "after": before + n});
//!         match write_step(&cx) {
//!             WriteStep::Preview => {}
//!             WriteStep::Apply(approved) => {
//!                 if let Err(stale) = approved.check(&change) {
//!                     return Ok(CallToolResult::error(vec![ContentBlock::text(stale.to_string())]));
//!                 }
//!                 self.value.store(before + n, Ordering::SeqCst);
//!             }
//!             WriteStep::Direct => { self.value.store(before + n, Ordering::SeqCst); }
//!         }
//!         Ok(CallToolResult::structured(change))
//!     }
//! }
//!
//! #[tool_handler(router = self.tool_router)]
//! impl ServerHandler for Counter {}
//!
//! let counter = Counter { value: Arc::default(), tool_router: Counter::tool_router() };
//! // The whole integration: wrap, say which tools support previews, serve the guard instead.
//! let guard = WriteGuard::builder(counter).preview("add").trust_read("get").build();
//! // guard.serve(mcp_write_guard_stdio::stdio()?).await?.waiting().await?;
//!
//! let add = guard.get_tool("add").unwrap();
//! assert_eq!(add.annotations.unwrap().read_only_hint, Some(false));
//! ```

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

#[cfg(feature = "audit-jsonl")]
pub use audit::JsonLinesSink;
pub use audit::{Asked, AuditRecord, AuditSink, Channel, MemorySink, Outcome, TracingSink};
pub use builder::{DEFAULT_PROGRESS_EVERY, WriteGuardBuilder};
pub use config_check::ConfigMistake;
pub use elicit::{Era, INPUT_KEY};
pub use error::Error;
pub use guard::WriteGuard;
/// The decisions (approvals, tokens, clock, store): `mcp-write-guard-core`, so that a server
/// needs this one dependency for what the builder takes ([`approval::Clock`],
/// [`approval::Store`], [`approval::ArgLimits`]).
pub use mcp_write_guard_core as approval;
/// The untrusted-data envelope: `mcp-write-guard-envelope`.
pub use mcp_write_guard_envelope as envelope;
/// Which tools are writes, and the published surface: `mcp-write-guard-policy`.
pub use mcp_write_guard_policy as policy;

pub use mcp_write_guard_core::{DEFAULT_MAX_RENDERED_CHARS, Rendered, render_key, render_value};
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
