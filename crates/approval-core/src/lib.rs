//! Argument-bound approvals, the 2-minute approval clock and the 5-minute single-use admin
//! confirmation token.
//!
//! # What this crate decides, and what it does not
//!
//! It decides: the canonical form and digest of tool arguments ([`canonical_json`],
//! [`CapturedArgs`]) and of a tool's definition ([`ToolDefinition`]); whether the tool is still
//! the one the person approved ([`check_definition`]); whether the user's answer approves
//! ([`decide_answer`]: only `accept` with `approve` equal to the boolean `true`); whether an
//! approval is still live (the approval clock, [`PendingApproval`]); whether a confirmation token
//! may be spent ([`spend_token`]); whether a round-trip `requestState` is genuine, current and
//! unused ([`take_round_trip`]); and in which order the gates of a write refuse ([`admit`]).
//!
//! It does not read a clock (every function takes `now`; the caller owns a [`Clock`]), does no
//! IO, knows nothing of MCP transports, and does not talk to the user. Storage is behind the
//! async, fallible [`Store`] trait; [`MemoryStore`] is the in-process implementation.
//!
//! Fail closed: a denial is a value ([`Decision::Deny`], [`TokenRejection`],
//! [`RoundTripRejection`]), and a store error always becomes one.
//!
//! # Lifecycle of an approval
//!
//! 1. **Capture** the call's arguments once: [`CapturedArgs::capture`] checks the
//!    [`ArgLimits`] (1 MiB, depth 64), canonicalises and digests them. Every later step uses this
//!    value, never the arguments of a later call.
//! 2. **Ask**: run the tool's preview with the captured arguments, then open a
//!    [`PendingApproval`] at `now`. Its clock runs for [`ApprovalPolicy::approval_ttl`] (120 s):
//!    it is live while `now < asked_at + 120 s`, so an answer at 119 s counts and one at exactly
//!    120 s is [`DenyReason::Expired`].
//!    For the input-required round trip, store it with [`open_round_trip`] and hand the returned
//!    [`StateId`] to the client as `requestState`; on the retry, [`take_round_trip`] gives it back
//!    once, only to the same principal, tool and arguments, only while the clock runs.
//!    To ask on the server's own approval page instead, [`open_page`] first: the page (a
//!    256-bit single-use id, a CSRF token bound to it) lives as long as the clock;
//!    [`answer_page`] takes the person's answer once, [`page_outcome`] hands it to the guard.
//! 3. **Decide**: [`PendingApproval::decide`] consumes the pending approval and turns the answer
//!    into a [`Verdict`]. Only [`Verdict::Approved`] may continue: the [`Approved`] it carries
//!    (private fields, not `Clone`, made only by `decide` or, loudly, by
//!    [`danger::approve_without_asking`]) is what the apply takes, and it applies
//!    [`Approved::args`], the arguments captured when the user was asked.
//! 4. **Apply**, if the tool is still the one the person approved: the pending approval binds
//!    the digest of the tool's definition when they were asked ([`ToolDefinition`]), and just
//!    before the apply [`Approved::check_definition`] compares it with the definition read again
//!    (a tool that is gone or changed is [`ToolChanged`]: apply nothing). Then as a
//!    compare-and-apply: recompute the preview inside the transaction that applies and commit
//!    only if [`previews_match`] the approved [`Approved::preview`].
//!
//! # Lifecycle of a confirmation token
//!
//! 1. **Issue** (after the user approved the intent): [`issue_token`] binds a fresh random
//!    token to the principal, the tool, the tool's definition ([`ToolDefinition`]) and
//!    [`CapturedArgs::token_digest`] (the arguments without `confirmationToken`). It is live while `now < issued_at + 300 s`
//!    ([`ApprovalPolicy::token_ttl`]): at 299 s it spends, at exactly 300 s it does not.
//! 2. **Check** when the destructive call arrives, before anyone is asked: [`check_token`] (or
//!    [`check_token_from_args`]) refuses a token that could not spend, and spends nothing.
//! 3. **Spend** after the user approved the act: [`spend_token`] (or
//!    [`spend_token_from_args`]) succeeds once, atomically. Any attempt that finds the live token uses it up, including one with
//!    another principal, tool, definition or arguments (fail closed). Every failure has its own
//!    [`TokenRejection`] for the audit trail, and all render the same text.
//! 4. **Forget**: a token counts towards its principal's cap
//!    ([`ApprovalPolicy::per_principal_cap`]) only while it is live: until it is spent or for
//!    exactly its lifetime (300 s), as an unanswered approval or round trip does for its 120 s.
//!    The store keeps a tombstone and a receipt, which count towards no cap, for one more
//!    lifetime, so a later attempt is recorded as already spent or expired; then it forgets.
//!
//! # Example
//!
//! ```
//! use mcp_write_guard_core::*;
//! use serde_json::json;
//! use time::Duration;
//! # // The in-memory store's futures are ready at once; poll them without an executor.
//! # fn block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     futures_util::FutureExt::now_or_never(f).expect("memory store futures are ready")
//! # }
//!
//! let policy = ApprovalPolicy::default();
//! let store = MemoryStore::for_policy(&policy);
//! let t0 = SystemClock.now(); // the adapter reads its clock; this crate only gets values
//! let at = |s: i64| t0 + Duration::seconds(s);
//! let alice = Principal::new("alice");
//! let tool = ToolName::new("delete_order");
//! // The tool as the server defines it when the person is asked.
//! let schema = json!({"type": "object", "properties": {"orderId": {"type": "integer"}}});
//! let asked = ToolDefinition::new("delete_order", schema.as_object().unwrap())
//!     .with_description(Some("Delete one order."));
//! let definition = asked.digest()?;
//!
//! // Approval: capture once, ask, decide.
//! let raw = json!({"orderId": 42});
//! let args = CapturedArgs::capture(raw.as_object(), &policy.limits)?;
//! let pending = PendingApproval::new(
//!     alice.clone(), tool.clone(), definition, args.clone(),
//!     json!({"order": 42, "status": "open"}), t0, &policy,
//! );
//! let answer = json!({"approve": true});
//! assert_eq!(
//!     pending.clone().decide(&AnswerAction::Accept, Some(&answer), at(120)), // exactly 120 s
//!     Verdict::Denied(DenyReason::Expired)
//! );
//! let approved = match pending.decide(&AnswerAction::Accept, Some(&answer), at(119)) {
//!     Verdict::Approved(approved) => approved,
//!     Verdict::Denied(reason) => unreachable!("refuse and record {reason}; nothing is applied"),
//! };
//! assert_eq!(approved.args().arguments(), raw.as_object().unwrap()); // apply exactly these
//! // Just before the apply, the tool as the server defines it now must be the one approved.
//! assert_eq!(approved.check_definition(Some(&asked)), Ok(()));
//! let rewritten = asked.with_description(Some("Delete every order."));
//! assert!(approved.check_definition(Some(&rewritten)).is_err()); // refuse, apply nothing
//! assert!(previews_match(approved.preview(), &json!({"status": "open", "order": 42.0})));
//!
//! // Token: issue, then spend once with the same arguments plus the token.
//! let token = block_on(issue_token(&store, &alice, &tool, definition, &args, at(0), &policy))?;
//! let call = json!({"orderId": 42, "confirmationToken": token.as_str()});
//! let call_args = CapturedArgs::capture(call.as_object(), &policy.limits)?;
//! let spend = |at| block_on(spend_token_from_args(&store, &alice, &tool, definition, &call_args, at));
//! assert_eq!(spend(at(299)), Ok(()));
//! let again = spend(at(299));
//! assert_eq!(again, Err(TokenRejection::AlreadySpent));
//! // The text is the same for every reason; the reason goes to the audit trail.
//! assert_eq!(again.unwrap_err().to_string(), TokenRejection::Unknown.to_string());
//! # Ok::<(), Error>(())
//! ```
//!
//! Tests drive time with `ManualClock` (public behind the `test-util` feature) instead of
//! sleeping.

mod admission;
mod answer;
mod approval;
mod args;
mod bound;
mod canonical;
mod change;
mod clock;
pub mod danger;
mod definition;
mod error;
mod ids;
mod page;
mod policy;
mod question;
mod render;
mod round_trip;
mod store;
#[cfg(any(test, feature = "test-util"))]
pub mod store_conformance;
mod token;

#[cfg(test)]
mod test_support;

pub use admission::{Admission, AdmissionFacts, Gate, TokenGate, admit};
pub use answer::{APPROVE_FIELD, AnswerAction, Decision, DenyReason, decide_answer};
pub use approval::{Approved, PREVIEW_LIMITS, PendingApproval, Verdict, previews_match};
pub use args::{CONFIRMATION_TOKEN_ARG, CapturedArgs};
pub use canonical::{
    ArgLimits, ArgsError, DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, MAX_SERIALIZED_DEPTH,
    canonical_json,
};
pub use change::{Change, ChangeRow};
#[cfg(any(test, feature = "test-util"))]
pub use clock::ManualClock;
pub use clock::{Clock, SystemClock};
pub use definition::{
    DEFINITION_LIMITS, DefinitionError, ToolChanged, ToolDefinition, check_definition,
};
pub use error::Error;
pub use ids::{
    ApprovalId, ArgsDigest, ConfirmationToken, DefinitionDigest, IdError, Principal, StateId,
    TokenId, ToolName,
};
pub use page::{
    CsrfToken, OpenPage, PageAnswered, PageChoice, PageId, PageOutcome, PagePerson, PageRefusal,
    PageSubject, PageView, answer_page, open_page, page_outcome, show_page, withdraw_page,
};
pub use policy::{
    ApprovalPolicy, DEFAULT_APPROVAL_TTL, DEFAULT_PER_PRINCIPAL_CAP, DEFAULT_TOKEN_TTL,
};
pub use question::{
    AnswerChannel, GivenAnswer, Opened, Question, QuestionStatus, answer_question, close_question,
    find_question, open_question, question_status, refresh_question,
};
pub use render::{DEFAULT_MAX_RENDERED_CHARS, Rendered, render_key, render_value};
pub use round_trip::{
    ROUND_TRIP_REFUSAL_MESSAGE, RoundTripRejection, open_question_round_trip, open_round_trip,
    peek_approval, store_approval, take_approval, take_round_trip,
};
pub use store::{
    BoxFuture, DEFAULT_MAX_ENTRIES, MemoryStore, RecordKind, Store, StoreError, StoreKey,
};
pub use token::{
    TOKEN_REFUSAL_MESSAGE, TokenRejection, check_token, check_token_from_args, issue_token,
    spend_token, spend_token_from_args,
};
