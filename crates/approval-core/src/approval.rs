//! A pending approval and the 2-minute approval clock.

use serde_json::Value;
use time::OffsetDateTime;

use crate::answer::{AnswerAction, Decision, DenyReason, decide_answer};
use crate::args::CapturedArgs;
use crate::canonical::{ArgLimits, canonical_json};
use crate::ids::{ApprovalId, ArgsDigest, Principal, ToolName};
use crate::policy::ApprovalPolicy;

/// A question put to the user: who asked, which tool, the arguments captured for it, the preview
/// the user was shown, and when they were asked.
///
/// The approval clock: an approval is **live while `now < expires_at`**, where
/// `expires_at = asked_at + approval_ttl` (default 120 s). An answer at 119.999 s counts; an
/// answer at exactly 120 s or later is [`DenyReason::Expired`].
///
/// Applying uses [`args`](Self::args), the arguments captured when the user was asked, never
/// arguments from a later call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PendingApproval {
    /// A random id for this approval (for the audit trail and the store).
    pub id: ApprovalId,
    /// Who asked.
    pub principal: Principal,
    /// The tool to run.
    pub tool: ToolName,
    /// The arguments captured for the call; the ones that will be applied.
    pub args: CapturedArgs,
    /// The preview the user was shown.
    pub preview: Value,
    /// When the user was asked.
    pub asked_at: OffsetDateTime,
    /// The end of the approval clock (exclusive).
    pub expires_at: OffsetDateTime,
}

impl PendingApproval {
    /// Opens an approval at `now` with the approval lifetime of `policy`.
    pub fn new(
        principal: Principal,
        tool: ToolName,
        args: CapturedArgs,
        preview: Value,
        now: OffsetDateTime,
        policy: &ApprovalPolicy,
    ) -> Self {
        Self {
            id: ApprovalId::random(),
            principal,
            tool,
            args,
            preview,
            asked_at: now,
            expires_at: expiry(now, policy.approval_ttl),
        }
    }

    pub(crate) fn from_parts(
        id: ApprovalId,
        principal: Principal,
        tool: ToolName,
        args: CapturedArgs,
        preview: Value,
        asked_at: OffsetDateTime,
        expires_at: OffsetDateTime,
    ) -> Self {
        Self {
            id,
            principal,
            tool,
            args,
            preview,
            asked_at,
            expires_at,
        }
    }

    /// The answer arrived at `now`. Approves only if the clock is still running
    /// (`now < expires_at`) **and** [`decide_answer`] approves. An answer at or after the end of
    /// the clock is [`DenyReason::Expired`] whatever it says.
    pub fn decide(
        &self,
        action: &AnswerAction,
        content: Option<&Value>,
        now: OffsetDateTime,
    ) -> Decision {
        if !self.is_live(now) {
            return Decision::Deny(DenyReason::Expired);
        }
        decide_answer(action, content)
    }

    /// Whether the approval clock is still running at `now` (`now < expires_at`).
    pub fn is_live(&self, now: OffsetDateTime) -> bool {
        now < self.expires_at
    }

    /// How long is left at `now`, or `None` if the clock has run out. Use it as the timeout for
    /// the question to the user.
    pub fn time_left(&self, now: OffsetDateTime) -> Option<std::time::Duration> {
        if !self.is_live(now) {
            return None;
        }
        std::time::Duration::try_from(self.expires_at - now).ok()
    }

    /// The digest of the captured arguments.
    pub fn args_digest(&self) -> ArgsDigest {
        self.args.digest()
    }

    /// Whether `fresh`, the preview run again just before applying, differs from the preview
    /// the user approved: if so, the data changed since the user looked and nothing may be
    /// applied.
    ///
    /// The two are compared in the canonical form ([`canonical_json`]), so key order and the
    /// spelling of a number (`1` or `1.0`) do not matter and any other difference does. A
    /// preview that has no canonical form (deeper than [`PREVIEW_LIMITS`] or holding a number
    /// the form cannot represent) is always stale: fail closed.
    pub fn is_stale(&self, fresh: &Value) -> bool {
        !previews_match(&self.preview, fresh)
    }
}

/// Whether `fresh`, a preview recomputed at the apply, equals `approved`, the preview the person
/// approved. Compared in the canonical form ([`canonical_json`]) under [`PREVIEW_LIMITS`], so
/// key order and the spelling of a number (`1` or `1.0`) do not matter and any other difference
/// does. A preview without a canonical form never matches: fail closed.
pub fn previews_match(approved: &Value, fresh: &Value) -> bool {
    match (
        canonical_json(approved, &PREVIEW_LIMITS),
        canonical_json(fresh, &PREVIEW_LIMITS),
    ) {
        (Ok(approved), Ok(fresh)) => approved == fresh,
        (Err(_), _) | (_, Err(_)) => false,
    }
}

/// The limits [`PendingApproval::is_stale`] reads previews with. Previews come from the tool, not
/// the model, so they are more generous than [`ArgLimits::default`]: 16 MiB, depth 256.
pub const PREVIEW_LIMITS: ArgLimits = ArgLimits::new(16 * 1024 * 1024, 256);

/// `now + ttl`, or `now` (already expired) if that overflows: fail closed.
pub(crate) fn expiry(now: OffsetDateTime, ttl: time::Duration) -> OffsetDateTime {
    now.checked_add(ttl).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::ArgLimits;
    use serde_json::json;
    use time::Duration;

    fn pending(now: OffsetDateTime, policy: &ApprovalPolicy) -> PendingApproval {
        let args =
            CapturedArgs::capture_value(&json!({"sku": "A-1", "delta": 20}), &ArgLimits::default())
                .unwrap();
        PendingApproval::new(
            Principal::new("alice"),
            ToolName::new("adjust_stock"),
            args,
            json!({"before": 5, "after": 25}),
            now,
            policy,
        )
    }

    fn yes() -> Value {
        json!({"approve": true})
    }

    #[test]
    fn approval_clock_edges_at_119_and_120_seconds() {
        let t0 = OffsetDateTime::UNIX_EPOCH + Duration::days(20_000);
        let p = pending(t0, &ApprovalPolicy::default());
        assert_eq!(p.expires_at - p.asked_at, Duration::seconds(120));
        let at = |s: i64| t0 + Duration::seconds(s);
        assert_eq!(
            p.decide(&AnswerAction::Accept, Some(&yes()), t0),
            Decision::Approve
        );
        assert_eq!(
            p.decide(&AnswerAction::Accept, Some(&yes()), at(119)),
            Decision::Approve
        );
        assert_eq!(
            p.decide(
                &AnswerAction::Accept,
                Some(&yes()),
                at(120) - Duration::nanoseconds(1)
            ),
            Decision::Approve
        );
        assert_eq!(
            p.decide(&AnswerAction::Accept, Some(&yes()), at(120)),
            Decision::Deny(DenyReason::Expired)
        );
        assert_eq!(
            p.decide(&AnswerAction::Accept, Some(&yes()), at(121)),
            Decision::Deny(DenyReason::Expired)
        );
        // A late decline is recorded as expired too: nothing it says matters any more.
        assert_eq!(
            p.decide(&AnswerAction::Decline, None, at(120)),
            Decision::Deny(DenyReason::Expired)
        );
        assert_eq!(
            p.time_left(at(119)),
            Some(std::time::Duration::from_secs(1))
        );
        assert_eq!(p.time_left(at(120)), None);
        assert!(p.is_live(at(119)) && !p.is_live(at(120)));
    }

    #[test]
    fn approval_ttl_is_configurable() {
        let t0 = OffsetDateTime::UNIX_EPOCH;
        let policy = ApprovalPolicy::default().with_approval_ttl(Duration::seconds(10));
        let p = pending(t0, &policy);
        let ok = p.decide(
            &AnswerAction::Accept,
            Some(&yes()),
            t0 + Duration::seconds(9),
        );
        assert_eq!(ok, Decision::Approve);
        let late = p.decide(
            &AnswerAction::Accept,
            Some(&yes()),
            t0 + Duration::seconds(10),
        );
        assert_eq!(late, Decision::Deny(DenyReason::Expired));
    }

    #[test]
    fn zero_negative_or_overflowing_ttl_expires_at_once() {
        let t0 = OffsetDateTime::UNIX_EPOCH;
        for ttl in [Duration::ZERO, Duration::seconds(-5), Duration::MAX] {
            let p = pending(t0, &ApprovalPolicy::default().with_approval_ttl(ttl));
            assert_eq!(
                p.decide(&AnswerAction::Accept, Some(&yes()), t0),
                Decision::Deny(DenyReason::Expired),
                "{ttl}"
            );
        }
    }

    #[test]
    fn a_live_approval_still_needs_accept_and_true() {
        let t0 = OffsetDateTime::UNIX_EPOCH;
        let p = pending(t0, &ApprovalPolicy::default());
        assert_eq!(
            p.decide(&AnswerAction::Accept, Some(&json!({"approve": "true"})), t0),
            Decision::Deny(DenyReason::ApproveNotBoolean)
        );
        assert_eq!(
            p.decide(&AnswerAction::Cancel, None, t0),
            Decision::Deny(DenyReason::Cancelled)
        );
    }

    #[test]
    fn a_preview_is_stale_only_when_its_canonical_form_changed() {
        let p = pending(OffsetDateTime::UNIX_EPOCH, &ApprovalPolicy::default());
        assert!(!p.is_stale(&json!({"before": 5, "after": 25})));
        assert!(!p.is_stale(&json!({"after": 25, "before": 5})), "key order");
        assert!(
            !p.is_stale(&json!({"before": 5.0, "after": 25})),
            "1 and 1.0"
        );
        assert!(p.is_stale(&json!({"before": 6, "after": 26})));
        assert!(p.is_stale(&json!({"before": 5})));
        assert!(p.is_stale(&json!({"before": 5, "after": 25, "note": null})));
        assert!(p.is_stale(&Value::Null));
    }

    #[test]
    fn a_preview_without_a_canonical_form_is_stale() {
        let mut p = pending(OffsetDateTime::UNIX_EPOCH, &ApprovalPolicy::default());
        let mut deep = json!(0);
        for _ in 0..300 {
            deep = json!([deep]);
        }
        p.preview = deep.clone();
        assert!(p.is_stale(&deep), "too deep to compare: fail closed");
        // 2^53 + 1 has no exact double.
        let unrepresentable: Value = serde_json::from_str("9007199254740993").unwrap();
        p.preview = unrepresentable.clone();
        assert!(p.is_stale(&unrepresentable));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn leaf() -> impl Strategy<Value = Value> {
            prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i32>().prop_map(|n| json!(n)),
                "[a-z]{0,6}".prop_map(Value::String),
            ]
        }

        fn preview() -> impl Strategy<Value = Value> {
            leaf().prop_recursive(3, 24, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::btree_map("[a-c]{1,2}", inner, 0..4)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #[test]
            fn stale_exactly_when_the_previews_differ(a in preview(), b in preview()) {
                let mut p = pending(OffsetDateTime::UNIX_EPOCH, &ApprovalPolicy::default());
                p.preview = a.clone();
                prop_assert!(!p.is_stale(&a));
                prop_assert_eq!(p.is_stale(&b), a != b);
            }
        }
    }
}
