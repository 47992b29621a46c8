//! What the guard asks of a tool on this call: a dry run, or a compare-and-apply.
//!
//! For a tool that opted in to previews ([`crate::WriteGuardBuilder::preview`]) the guard calls
//! the tool twice per approved write, and says which call is which out of band, in the
//! request's extensions (never on the wire, so the model cannot set it; an argument such as
//! `dryRun: true` proves nothing):
//!
//! 1. [`WriteStep::Preview`], before asking the person: compute the change without making it
//!    and return it (its `structuredContent`, else its text, is the preview value). The person
//!    is shown it. A preview with `isError: true` (a business rule said no) is returned to the
//!    model as it is and nobody is asked.
//! 2. [`WriteStep::Apply`], after the person approved: inside the one transaction that applies,
//!    recompute the preview, hand it to [`ApprovedPreview::check`], and commit only if it says
//!    the data is unchanged; otherwise roll back. There is no separate re-run call: a check and
//!    an apply in two calls is a race that another writer can win.
//!
//! ```
//! use mcp_write_guard_rmcp::{WriteStep, write_step_in};
//! use rmcp::model::Extensions;
//! use serde_json::json;
//!
//! // A tool's body, with its transaction reduced to a counter.
//! fn add(extensions: &Extensions, counter: &mut i64, n: i64) -> Result<serde_json::Value, String> {
//!     // Begin the transaction; read; check the business rules; compute the change.
//!     let change = json!({"before": *counter, "after": *counter + n});
//!     match write_step_in(extensions) {
//!         WriteStep::Preview => {}                       // roll back
//!         WriteStep::Apply(approved) => {
//!             approved.check(&change).map_err(|stale| stale.to_string())?; // roll back on Err
//!             *counter += n;                             // commit
//!         }
//!         WriteStep::Direct => *counter += n,            // no guard asked: commit
//!     }
//!     Ok(change)
//! }
//!
//! let mut counter = 3;
//! assert_eq!(add(&Extensions::new(), &mut counter, 1), Ok(json!({"before": 3, "after": 4})));
//! assert_eq!(counter, 4);
//! ```
//!
//! # What the preview pins
//!
//! The preview is the contract: the apply commits only if its recomputed preview equals the
//! approved one in canonical JSON (key order and `1` vs `1.0` do not matter; anything else
//! does). So whatever a tool puts in its preview must still hold at the apply, and a tool
//! chooses what its preview pins:
//! - the absolute state the person read (`{"before": 3, "after": 4}`): the write lands only on
//!   exactly that state; any other write to the same row in between makes it stale, so under
//!   many concurrent writers to one row most approvals go stale;
//! - or only what must hold (`{"delta": 1, "stockStaysAtLeast": 0}`): the write lands on
//!   whatever state is current, as long as the pinned facts still hold.
//!
//! Either way the prompt must never claim more than the preview pins: a prompt that shows
//! "stock 3 -> 4" needs a preview that contains 3 and 4. Previews must be deterministic
//! (no timestamps or freshly generated ids), or every apply is stale.
//!
//! # What the guard checks afterwards
//!
//! The guard reads what [`ApprovedPreview::check`] recorded once the apply returns:
//! - it said *stale* and the tool returned an error: the person reads "the data changed since
//!   you approved; nothing was saved" and the audit outcome is `stale`;
//! - it said *stale* but the tool returned success: the tool broke its contract (it must roll
//!   back on a stale check), so the guard answers with an error that does not claim success
//!   or "nothing saved", records `apply-failed` and logs an error;
//! - it said *unchanged*: the tool's result is the answer (`applied`, or `apply-failed` for an
//!   error result);
//! - the tool never called it but returned success: the guard cannot vouch for what was
//!   written, so it answers with an error and records `apply-failed` ("the tool did not compare
//!   the approved preview"), and logs an error naming the tool. This catches a tool that opted
//!   in to previews and forgot the compare, on its first approved write in any test.
//!
//! A tool that did not opt in to previews sees [`WriteStep::Direct`] on every call: the person
//! approves its exact arguments (the prompt lists them), but nothing pins the state the write
//! lands on.
//!
//! The mistake the guard cannot prevent: a tool that opted in but writes on
//! [`WriteStep::Preview`] (it never looked at the step). Its preview lands before anyone is
//! asked, so a declined change is saved anyway, and an approved one is written twice and answered
//! with "cannot vouch" (the apply did not compare). In tests, build the guard with
//! [`crate::WriteGuardBuilder::check_previews_are_dry`]: every preview runs twice and a change
//! between the two refuses the call before anyone is asked (`crates/adapter-rmcp/tests/
//! dry_previews.rs` shows the symptom and the check).

use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::{
    model::Extensions,
    service::{RequestContext, RoleServer},
};
use serde_json::Value;

/// The step the guard asks of a tool on this call. Read it with [`write_step`].
///
/// Not `#[non_exhaustive]`: a tool matches it exhaustively, so a new kind of step is a compile
/// error in the tool rather than a silent apply.
#[derive(Debug, Clone)]
pub enum WriteStep {
    /// A dry run before asking the person: compute the change, make nothing, return the change.
    Preview,
    /// The person approved: recompute the preview in the transaction that applies, pass it to
    /// [`ApprovedPreview::check`], commit only if it is unchanged.
    Apply(ApprovedPreview),
    /// No guard step: the tool was called without a guard, or it did not opt in to previews.
    /// Apply as usual.
    Direct,
}

/// The step the guard asks of the tool on this call.
pub fn write_step(context: &RequestContext<RoleServer>) -> WriteStep {
    write_step_in(&context.extensions)
}

/// [`write_step`] for tools that take rmcp's `Extensions` extractor instead of the whole
/// request context.
pub fn write_step_in(extensions: &Extensions) -> WriteStep {
    if let Some(approved) = extensions.get::<ApprovedPreview>() {
        return WriteStep::Apply(approved.clone());
    }
    if extensions.get::<PreviewMarker>().is_some() {
        return WriteStep::Preview;
    }
    WriteStep::Direct
}

/// The marker of a dry run in a request's extensions.
#[derive(Debug, Clone, Copy)]
struct PreviewMarker;

/// The preview the person approved, handed to the apply call. Cloning shares the record of the
/// comparison with the guard.
#[derive(Debug, Clone)]
pub struct ApprovedPreview {
    value: Arc<Value>,
    compared: Arc<Mutex<Option<Comparison>>>,
}

/// What [`ApprovedPreview::check`] found, as the guard reads it after the apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Comparison {
    /// The recomputed preview equals the approved one.
    Unchanged,
    /// It differs, or the tool found that the approved change no longer applies.
    Stale,
}

impl ApprovedPreview {
    /// The approved preview value, as the person was shown it.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// Compares `fresh`, the preview recomputed inside the transaction that applies, with the
    /// approved one (canonical JSON). `Ok(())`: commit. `Err(Stale)`: roll back and return any
    /// error; the guard tells the person that the data changed and nothing was saved.
    ///
    /// # Errors
    /// [`Stale`] when the two differ or either has no canonical form (fail closed).
    pub fn check(&self, fresh: &Value) -> Result<(), Stale> {
        let found = if mcp_write_guard_core::previews_match(&self.value, fresh) {
            Comparison::Unchanged
        } else {
            Comparison::Stale
        };
        match self.record(found) {
            Comparison::Unchanged => Ok(()),
            Comparison::Stale => Err(Stale),
        }
    }

    /// Records that the approved change no longer applies although the tool could not compute
    /// a fresh preview to compare (a business rule that held when the person was asked fails
    /// now: the data changed). Roll back and return any error.
    pub fn stale(&self) -> Stale {
        let _ = self.record(Comparison::Stale);
        Stale
    }

    /// Records `found` and returns what now stands: once stale, stale (a later check cannot
    /// undo what the tool was told).
    fn record(&self, found: Comparison) -> Comparison {
        let mut compared = self.compared.lock();
        let standing = match *compared {
            Some(Comparison::Stale) => Comparison::Stale,
            Some(Comparison::Unchanged) | None => found,
        };
        *compared = Some(standing);
        standing
    }

    pub(crate) fn new(value: Value) -> Self {
        Self {
            value: Arc::new(value),
            compared: Arc::default(),
        }
    }

    /// What the tool's check found, if it made one.
    pub(crate) fn comparison(&self) -> Option<Comparison> {
        *self.compared.lock()
    }
}

/// The data changed since the person approved: roll back, save nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the data changed since the change was approved; nothing was saved")]
#[non_exhaustive]
pub struct Stale;

pub(crate) fn mark_preview(extensions: &mut Extensions) {
    extensions.insert(PreviewMarker);
}

pub(crate) fn attach_approved(extensions: &mut Extensions, approved: &ApprovedPreview) {
    extensions.remove::<PreviewMarker>();
    extensions.insert(approved.clone());
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_step_is_direct_unless_the_guard_says_otherwise() {
        let mut extensions = Extensions::new();
        assert!(matches!(write_step_in(&extensions), WriteStep::Direct));
        mark_preview(&mut extensions);
        assert!(matches!(write_step_in(&extensions), WriteStep::Preview));
        let approved = ApprovedPreview::new(json!({"before": 3, "after": 4}));
        attach_approved(&mut extensions, &approved);
        let WriteStep::Apply(seen) = write_step_in(&extensions) else {
            panic!("not an apply");
        };
        assert_eq!(seen.value(), &json!({"before": 3, "after": 4}));
    }

    #[test]
    fn the_check_is_canonical_and_recorded_for_the_guard() {
        let approved = ApprovedPreview::new(json!({"before": 3, "after": 4}));
        let tool_side = approved.clone();
        assert_eq!(approved.comparison(), None);
        assert_eq!(tool_side.check(&json!({"after": 4.0, "before": 3})), Ok(()));
        assert_eq!(approved.comparison(), Some(Comparison::Unchanged));
        assert_eq!(
            tool_side.check(&json!({"before": 4, "after": 5})),
            Err(Stale)
        );
        assert_eq!(approved.comparison(), Some(Comparison::Stale));
        // A later matching check does not undo a stale one.
        assert_eq!(
            tool_side.check(&json!({"before": 3, "after": 4})),
            Err(Stale)
        );
        assert_eq!(approved.comparison(), Some(Comparison::Stale));
    }

    #[test]
    fn a_rule_that_fails_at_the_apply_is_stale() {
        let approved = ApprovedPreview::new(json!({"before": 3, "after": 0}));
        assert_eq!(approved.stale(), Stale);
        assert_eq!(approved.comparison(), Some(Comparison::Stale));
    }
}
