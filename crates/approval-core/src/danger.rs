//! Ways to weaken the policy on purpose. Nothing here is needed on the safe path; each item is a
//! named, documented opt-in, so that a reader of the calling code sees the risk at the call.

use crate::approval::{Approved, PendingApproval};

/// Turns `pending` into an [`Approved`] **without asking anyone**.
///
/// # Danger
///
/// Nobody was asked. The person never saw the preview, never said yes, and the approval clock is
/// not consulted: the resulting [`Approved`] carries the question's arguments and preview exactly
/// as if the person had approved them, so the apply (and the audit trail that records it) cannot
/// tell the difference from this value alone. Record at the call site that this write was not
/// approved.
///
/// It exists for one purpose: the adapter's named opt-in that lets clients **without
/// elicitation** write (by default such clients are refused, because there is no one to ask).
/// With it, a prompt-injected model can make every write it likes, with arguments of its own
/// choosing. Do not use it for anything else, and do not turn that option on unless every caller
/// of the server is trusted to write without a person's approval.
pub fn approve_without_asking(pending: PendingApproval) -> Approved {
    Approved::new(pending)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::ArgLimits;
    use crate::{ApprovalPolicy, CapturedArgs, Principal, ToolName};
    use serde_json::json;
    use time::{Duration, OffsetDateTime};

    #[test]
    fn the_bypass_approves_the_question_as_asked_without_a_clock() {
        let t0 = OffsetDateTime::UNIX_EPOCH;
        let args = CapturedArgs::capture_value(&json!({"n": 1}), &ArgLimits::default()).unwrap();
        let pending = PendingApproval::new(
            Principal::new("local"),
            ToolName::new("t"),
            crate::test_support::definition(),
            args.clone(),
            json!({"after": 1}),
            t0 - Duration::seconds(500),
            &ApprovalPolicy::default(),
        );
        let id = pending.id();
        let approved = approve_without_asking(pending);
        assert_eq!(approved.id(), id);
        assert_eq!(approved.args(), &args);
        assert_eq!(approved.preview(), &json!({"after": 1}));
    }
}
