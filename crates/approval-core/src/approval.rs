//! A pending approval and the 2-minute approval clock.

use serde_json::Value;
use time::OffsetDateTime;

use crate::answer::{AnswerAction, Decision, DenyReason, decide_answer};
use crate::args::CapturedArgs;
use crate::canonical::{ArgLimits, canonical_json};
use crate::definition::{
    DefinitionError, ToolChanged, ToolDefinition, check_definition, check_definition_digest,
};
use crate::ids::{ApprovalId, ArgsDigest, DefinitionDigest, Principal, ToolName};
use crate::policy::ApprovalPolicy;
use crate::record::{self, LiveRecord};
use crate::secret::PageId;

/// A question put to the user: who asked, which tool (and its definition as the guard saw it),
/// the arguments captured for it, the preview the user was shown, and when they were asked.
///
/// The approval clock: an approval is **live while `now < expires_at`**, where
/// `expires_at = asked_at + approval_ttl` (default 120 s). An answer at 119.999 s counts; an
/// answer at exactly 120 s or later is [`DenyReason::Expired`].
///
/// Every field is private and read-only: once the user has been asked, nothing about the question
/// can change. [`decide`](Self::decide) consumes it; only the [`Approved`] it may return reaches
/// the apply, and that applies [`args`](Approved::args), the arguments captured when the user was
/// asked, never arguments from a later call.
///
/// ```compile_fail
/// # use mcp_write_guard_core::*;
/// # fn edit(mut pending: PendingApproval, other: CapturedArgs) {
/// pending.args = other; // private: the arguments cannot be swapped after the question
/// # }
/// ```
///
/// Nor can it be copied, so a question is decided once:
///
/// ```compile_fail
/// # use mcp_write_guard_core::*;
/// # fn twice(pending: PendingApproval) {
/// let copy = pending.clone(); // not `Clone`
/// # }
/// ```
#[derive(Debug, PartialEq)]
// Not `Clone`: a question is decided once. The unit tests decide copies of one question.
#[cfg_attr(test, derive(Clone))]
pub struct PendingApproval {
    id: ApprovalId,
    principal: Principal,
    tool: ToolName,
    /// The tool's definition when the person was asked.
    definition: DefinitionDigest,
    args: CapturedArgs,
    preview: Value,
    asked_at: OffsetDateTime,
    expires_at: OffsetDateTime,
    /// The approval page that asks about it, if the person is asked on a page.
    page: Option<PageId>,
}

impl PendingApproval {
    /// Opens an approval at `now` with the approval lifetime of `policy`, for `principal` to
    /// call `tool`, whose definition as the question is put has the digest `definition` (see
    /// [`ToolDefinition`]), with `args`; `preview` is what the person is shown.
    pub fn new(
        principal: Principal,
        tool: ToolName,
        definition: DefinitionDigest,
        args: CapturedArgs,
        preview: Value,
        now: OffsetDateTime,
        policy: &ApprovalPolicy,
    ) -> Self {
        Self {
            id: ApprovalId::random(),
            principal,
            tool,
            definition,
            args,
            preview,
            asked_at: now,
            expires_at: expiry(now, policy.approval_ttl),
            page: None,
        }
    }

    /// The approval a stored record holds, as [`Approvals::store_approval`] and the round trips
    /// wrote it; `None` when the record holds none or any part of it does not read back.
    ///
    /// [`Approvals::store_approval`]: crate::Approvals::store_approval
    pub(crate) fn restore(live: LiveRecord) -> Option<Self> {
        let stored = *live.approval?;
        let page = match stored.page {
            Some(page) => Some(page.parse().ok()?),
            None => None,
        };
        Some(Self {
            id: stored.id.parse().ok()?,
            args: CapturedArgs::restore(stored.arguments, live.digest).ok()?,
            principal: live.principal,
            tool: live.tool,
            definition: live.definition,
            preview: stored.preview,
            asked_at: record::from_ns(live.issued_at_ns).ok()?,
            expires_at: record::from_ns(live.expires_at_ns).ok()?,
            page,
        })
    }

    /// The same approval, asked about on `page` (see [`Approvals::open_page`](crate::Approvals::open_page)).
    pub(crate) fn on_page(mut self, page: PageId) -> Self {
        self.page = Some(page);
        self
    }

    /// The answer arrived at `now`. Consumes the pending approval: the result is
    /// [`Verdict::Approved`] only if the clock is still running (`now < expires_at`) **and**
    /// [`decide_answer`] approves. An answer at or after the end of the clock is
    /// [`DenyReason::Expired`] whatever it says.
    ///
    /// ```compile_fail
    /// # use mcp_write_guard_core::*;
    /// # fn twice(pending: PendingApproval, now: time::OffsetDateTime) {
    /// let _first = pending.decide(&AnswerAction::Decline, None, now);
    /// let _again = pending.decide(&AnswerAction::Accept, None, now); // moved: decided once
    /// # }
    /// ```
    pub fn decide(
        self,
        action: &AnswerAction,
        content: Option<&Value>,
        now: OffsetDateTime,
    ) -> Verdict {
        if !self.is_live(now) {
            return Verdict::Denied(DenyReason::Expired);
        }
        match decide_answer(action, content) {
            Decision::Approve => Verdict::Approved(Approved::new(self)),
            Decision::Deny(reason) => Verdict::Denied(reason),
        }
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

    /// A random id for this approval (for the audit trail and the store).
    pub fn id(&self) -> ApprovalId {
        self.id
    }

    /// Who asked.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The tool to run.
    pub fn tool(&self) -> &ToolName {
        &self.tool
    }

    /// The digest of the tool's definition when the person was asked.
    pub fn definition(&self) -> DefinitionDigest {
        self.definition
    }

    /// The arguments captured for the call: the ones that will be applied.
    pub fn args(&self) -> &CapturedArgs {
        &self.args
    }

    /// The preview the user was shown.
    pub fn preview(&self) -> &Value {
        &self.preview
    }

    /// When the user was asked.
    pub fn asked_at(&self) -> OffsetDateTime {
        self.asked_at
    }

    /// The end of the approval clock (exclusive).
    pub fn expires_at(&self) -> OffsetDateTime {
        self.expires_at
    }

    /// The approval page the person answers on, when they are asked on a page (see
    /// [`Approvals::open_page`](crate::Approvals::open_page)); `None` when the answer comes through the client.
    pub fn page(&self) -> Option<&PageId> {
        self.page.as_ref()
    }
}

/// What [`PendingApproval::decide`] made of the answer. Match it exhaustively: only
/// [`Verdict::Approved`] carries what the apply needs.
#[must_use = "a verdict that is not looked at is a write that may go ahead unapproved"]
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// The user approved this exact change, in time.
    Approved(Approved),
    /// Anything else, with the reason for the audit trail.
    Denied(DenyReason),
}

impl Verdict {
    /// The plain [`Decision`] this verdict stands for (for the audit trail and for tests).
    pub fn decision(&self) -> Decision {
        match self {
            Self::Approved(_) => Decision::Approve,
            Self::Denied(reason) => Decision::Deny(*reason),
        }
    }
}

/// A pending approval that the user approved in time: the only value that may reach the apply.
///
/// Its fields are private and it has no public constructor: it is made by
/// [`PendingApproval::decide`] (the user said yes before the clock ran out) or, loudly, by
/// [`danger::approve_without_asking`](crate::danger::approve_without_asking). It is not `Clone`:
/// one approval, one apply.
///
/// ```compile_fail
/// # use mcp_write_guard_core::*;
/// # fn copy(approved: Approved) -> (Approved, Approved) {
/// (approved.clone(), approved) // one approval, one apply
/// # }
/// ```
#[derive(Debug, PartialEq)]
pub struct Approved {
    /// Boxed so that a [`Verdict`] stays small whichever way it went.
    pending: Box<PendingApproval>,
}

impl Approved {
    /// Only [`PendingApproval::decide`] and [`crate::danger`] call this.
    pub(crate) fn new(pending: PendingApproval) -> Self {
        Self {
            pending: Box::new(pending),
        }
    }

    /// The id of the approval (for the audit trail).
    pub fn id(&self) -> ApprovalId {
        self.pending.id
    }

    /// Who asked.
    pub fn principal(&self) -> &Principal {
        &self.pending.principal
    }

    /// The tool to run.
    pub fn tool(&self) -> &ToolName {
        &self.pending.tool
    }

    /// The digest of the tool's definition when the person was asked: the definition they
    /// approved a call of.
    pub fn definition(&self) -> DefinitionDigest {
        self.pending.definition
    }

    /// Whether `current`, the tool's definition read again just before the apply (`None`: the
    /// server no longer offers the tool), is still the one the person approved
    /// ([`check_definition`]). Anything else is [`ToolChanged`]: apply nothing.
    ///
    /// # Errors
    /// [`ToolChanged`]: the tool is gone, its definition differs, or it has no digest.
    pub fn check_definition(
        &self,
        current: Option<&ToolDefinition<'_>>,
    ) -> Result<(), ToolChanged> {
        check_definition(self.pending.definition, current)
    }

    /// [`Self::check_definition`] for a caller that holds the current definition's digest
    /// already ([`check_definition_digest`]).
    ///
    /// # Errors
    /// [`ToolChanged`]: the tool is gone, its definition differs, or it has no digest.
    pub fn check_definition_digest(
        &self,
        current: Option<Result<DefinitionDigest, DefinitionError>>,
    ) -> Result<(), ToolChanged> {
        check_definition_digest(self.pending.definition, current)
    }

    /// The arguments captured when the user was asked: apply exactly these.
    pub fn args(&self) -> &CapturedArgs {
        &self.pending.args
    }

    /// The preview the user approved; the apply compares a fresh one with it
    /// ([`previews_match`]).
    pub fn preview(&self) -> &Value {
        &self.pending.preview
    }

    /// When the user was asked.
    pub fn asked_at(&self) -> OffsetDateTime {
        self.pending.asked_at
    }

    /// The end of the approval clock the answer came within (exclusive).
    pub fn expires_at(&self) -> OffsetDateTime {
        self.pending.expires_at
    }

    /// The digest of the captured arguments.
    pub fn args_digest(&self) -> ArgsDigest {
        self.pending.args.digest()
    }
}

/// Whether `fresh`, a preview recomputed at the apply, equals `approved`, the preview the person
/// approved: if not, the data changed since the person looked and nothing may be applied.
///
/// Compared in the canonical form ([`canonical_json`]) under [`PREVIEW_LIMITS`], so key order and
/// the spelling of a number (`1` or `1.0`) do not matter and any other difference does. A preview
/// without a canonical form (deeper than [`PREVIEW_LIMITS`], or holding a number the form cannot
/// represent) never matches: fail closed.
///
/// ```
/// use mcp_write_guard_core::previews_match;
/// use serde_json::json;
///
/// let approved = json!({"before": 5, "after": 25});
/// assert!(previews_match(&approved, &json!({"after": 25.0, "before": 5})));
/// assert!(!previews_match(&approved, &json!({"before": 6, "after": 26})));
/// ```
pub fn previews_match(approved: &Value, fresh: &Value) -> bool {
    match (
        canonical_json(approved, &PREVIEW_LIMITS),
        canonical_json(fresh, &PREVIEW_LIMITS),
    ) {
        (Ok(approved), Ok(fresh)) => approved == fresh,
        (Err(_), _) | (_, Err(_)) => false,
    }
}

/// The limits [`previews_match`] reads previews with. Previews come from the tool, not the model,
/// so they are more generous than [`ArgLimits::default`]: 16 MiB, depth 256.
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

    use crate::test_support::adjust_stock as pending;

    fn yes() -> Value {
        json!({"approve": true})
    }

    #[test]
    fn previews_are_read_up_to_sixteen_mebibytes_and_depth_256() {
        assert_eq!(PREVIEW_LIMITS, ArgLimits::new(16_777_216, 256));
        // Two previews of 2 MiB each, well past the arguments' 1 MiB, still compare.
        let big = json!({"rows": "r".repeat(2 * 1024 * 1024)});
        assert!(previews_match(&big, &big.clone()));
        // Past 16 MiB there is no canonical form: never a match, not even with itself.
        let huge = json!({"rows": "r".repeat(16 * 1024 * 1024)});
        assert!(!previews_match(&huge, &huge.clone()));
        // Depth 256 compares (the object itself is one level); 257 does not.
        let nest = |depth: usize| {
            let mut v = json!(1);
            for _ in 1..depth {
                v = json!([v]);
            }
            json!({"v": v})
        };
        assert!(previews_match(&nest(256), &nest(256)));
        assert!(!previews_match(&nest(257), &nest(257)));
    }

    /// The decision `p` would make of `action` and `content` at `now`, deciding a copy.
    fn decision(
        p: &PendingApproval,
        action: AnswerAction,
        content: Option<Value>,
        now: OffsetDateTime,
    ) -> Decision {
        p.clone().decide(&action, content.as_ref(), now).decision()
    }

    #[test]
    fn approval_clock_edges_at_119_and_120_seconds() {
        let t0 = OffsetDateTime::UNIX_EPOCH + Duration::days(20_000);
        let p = pending(t0, &ApprovalPolicy::default());
        assert_eq!(p.expires_at() - p.asked_at(), Duration::seconds(120));
        let at = |s: i64| t0 + Duration::seconds(s);
        let accept = |now| decision(&p, AnswerAction::Accept, Some(yes()), now);
        assert_eq!(accept(t0), Decision::Approve);
        assert_eq!(accept(at(119)), Decision::Approve);
        assert_eq!(
            accept(at(120) - Duration::nanoseconds(1)),
            Decision::Approve
        );
        assert_eq!(accept(at(120)), Decision::Deny(DenyReason::Expired));
        assert_eq!(accept(at(121)), Decision::Deny(DenyReason::Expired));
        // A late decline is recorded as expired too: nothing it says matters any more.
        assert_eq!(
            decision(&p, AnswerAction::Decline, None, at(120)),
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
    fn an_approval_carries_exactly_what_the_user_was_asked_about() {
        let t0 = OffsetDateTime::UNIX_EPOCH;
        let p = pending(t0, &ApprovalPolicy::default());
        let (id, digest, args) = (p.id(), p.args_digest(), p.args().clone());
        let approved = match p.decide(&AnswerAction::Accept, Some(&yes()), t0) {
            Verdict::Approved(approved) => approved,
            Verdict::Denied(reason) => panic!("denied: {reason}"),
        };
        assert_eq!(approved.id(), id);
        assert_eq!(approved.principal(), &Principal::new("alice"));
        assert_eq!(approved.tool(), &ToolName::new("adjust_stock"));
        assert_eq!(approved.args(), &args);
        assert_eq!(approved.args_digest(), digest);
        assert_eq!(approved.preview(), &json!({"before": 5, "after": 25}));
        assert_eq!(approved.asked_at(), t0);
        assert_eq!(approved.expires_at(), t0 + Duration::seconds(120));
    }

    #[test]
    fn every_denial_is_a_verdict_with_its_reason() {
        let t0 = OffsetDateTime::UNIX_EPOCH;
        let p = pending(t0, &ApprovalPolicy::default());
        let cases = [
            (AnswerAction::Decline, None, DenyReason::Declined),
            (AnswerAction::Cancel, None, DenyReason::Cancelled),
            (AnswerAction::Accept, None, DenyReason::NoContent),
            (
                AnswerAction::Accept,
                Some(json!({"approve": false})),
                DenyReason::ApproveFalse,
            ),
            (
                AnswerAction::Other("ok".into()),
                Some(yes()),
                DenyReason::UnknownAction,
            ),
        ];
        for (action, content, want) in cases {
            assert_eq!(
                p.clone().decide(&action, content.as_ref(), t0),
                Verdict::Denied(want)
            );
        }
    }

    #[test]
    fn approval_ttl_is_configurable() {
        let t0 = OffsetDateTime::UNIX_EPOCH;
        let policy = ApprovalPolicy::default().with_approval_ttl(Duration::seconds(10));
        let p = pending(t0, &policy);
        let ok = decision(
            &p,
            AnswerAction::Accept,
            Some(yes()),
            t0 + Duration::seconds(9),
        );
        assert_eq!(ok, Decision::Approve);
        let late = decision(
            &p,
            AnswerAction::Accept,
            Some(yes()),
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
                Verdict::Denied(DenyReason::Expired),
                "{ttl}"
            );
        }
    }

    #[test]
    fn a_live_approval_still_needs_accept_and_true() {
        let t0 = OffsetDateTime::UNIX_EPOCH;
        let p = pending(t0, &ApprovalPolicy::default());
        assert_eq!(
            decision(
                &p,
                AnswerAction::Accept,
                Some(json!({"approve": "true"})),
                t0
            ),
            Decision::Deny(DenyReason::ApproveNotBoolean)
        );
        assert_eq!(
            decision(&p, AnswerAction::Cancel, None, t0),
            Decision::Deny(DenyReason::Cancelled)
        );
    }

    #[test]
    fn previews_match_only_when_their_canonical_forms_do() {
        let approved = json!({"before": 5, "after": 25});
        assert!(previews_match(
            &approved,
            &json!({"before": 5, "after": 25})
        ));
        assert!(
            previews_match(&approved, &json!({"after": 25, "before": 5})),
            "key order"
        );
        assert!(
            previews_match(&approved, &json!({"before": 5.0, "after": 25})),
            "1 and 1.0"
        );
        assert!(!previews_match(
            &approved,
            &json!({"before": 6, "after": 26})
        ));
        assert!(!previews_match(&approved, &json!({"before": 5})));
        assert!(!previews_match(
            &approved,
            &json!({"before": 5, "after": 25, "note": null})
        ));
        assert!(!previews_match(&approved, &Value::Null));
    }

    #[test]
    fn a_preview_without_a_canonical_form_never_matches() {
        let mut deep = json!(0);
        for _ in 0..300 {
            deep = json!([deep]);
        }
        assert!(
            !previews_match(&deep, &deep),
            "too deep to compare: fail closed"
        );
        // 2^53 + 1 has no exact double.
        let unrepresentable: Value = serde_json::from_str("9007199254740993").unwrap();
        assert!(!previews_match(&unrepresentable, &unrepresentable));
        assert!(!previews_match(&json!(1), &unrepresentable));
        assert!(!previews_match(&unrepresentable, &json!(1)));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        use crate::test_support::{reversed_text, small_json, small_leaf};

        fn leaf() -> impl Strategy<Value = Value> {
            small_leaf("[a-z]{0,6}")
        }

        fn preview() -> impl Strategy<Value = Value> {
            small_json("[a-z]{0,6}")
        }

        /// `v` with every integer written as a float (`1` as `1.0`).
        fn as_floats(v: &Value) -> Value {
            match v {
                Value::Number(n) => match n.as_i64() {
                    Some(i) => json!(i as f64),
                    None => v.clone(),
                },
                Value::Array(items) => Value::Array(items.iter().map(as_floats).collect()),
                Value::Object(map) => {
                    Value::Object(map.iter().map(|(k, v)| (k.clone(), as_floats(v))).collect())
                }
                Value::Null | Value::Bool(_) | Value::String(_) => v.clone(),
            }
        }

        fn count_leaves(v: &Value) -> usize {
            match v {
                Value::Array(items) => items.iter().map(count_leaves).sum(),
                Value::Object(map) => map.values().map(count_leaves).sum(),
                Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => 1,
            }
        }

        /// Replaces leaf number `*k` (depth first) of `v` with `with`; `*k` counts down past it.
        fn replace_leaf(v: &mut Value, k: &mut usize, with: &Value) {
            match v {
                Value::Array(items) => items.iter_mut().for_each(|x| replace_leaf(x, k, with)),
                Value::Object(map) => map.values_mut().for_each(|x| replace_leaf(x, k, with)),
                Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
                    if *k == 0 {
                        *v = with.clone();
                    }
                    *k = k.wrapping_sub(1);
                }
            }
        }

        /// Whether two leaves are the same value (numbers compared as numbers).
        fn same_leaf(a: &Value, b: &Value) -> bool {
            match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) => x == y,
                (None, _) | (_, None) => a == b,
            }
        }

        proptest! {
            #[test]
            fn previews_match_exactly_when_they_are_equal(a in preview(), b in preview()) {
                prop_assert!(previews_match(&a, &a));
                prop_assert_eq!(previews_match(&a, &b), a == b);
                prop_assert_eq!(previews_match(&b, &a), a == b);
            }

            #[test]
            fn key_order_and_number_spelling_never_matter(a in preview()) {
                let reordered: Value = serde_json::from_str(&reversed_text(&a)).unwrap();
                prop_assert!(previews_match(&a, &reordered));
                prop_assert!(previews_match(&a, &as_floats(&a)));
                prop_assert!(previews_match(&as_floats(&a), &reordered));
            }

            #[test]
            fn any_changed_leaf_always_matters(a in preview(), which in any::<usize>(), new in leaf()) {
                let leaves = count_leaves(&a);
                prop_assume!(leaves > 0);
                let k = which % leaves;
                let mut old_leaf = None;
                find_leaf(&a, &mut k.clone(), &mut old_leaf);
                prop_assume!(!same_leaf(&old_leaf.unwrap(), &new));
                let mut changed = a.clone();
                replace_leaf(&mut changed, &mut k.clone(), &new);
                prop_assert!(!previews_match(&a, &changed), "{} vs {}", a, changed);
                prop_assert!(!previews_match(&changed, &a));
                prop_assert!(!previews_match(&as_floats(&a), &changed));
            }
        }

        /// Leaf number `*k` (depth first) of `v`, in the order [`replace_leaf`] counts.
        fn find_leaf(v: &Value, k: &mut usize, found: &mut Option<Value>) {
            match v {
                Value::Array(items) => items.iter().for_each(|x| find_leaf(x, k, found)),
                Value::Object(map) => map.values().for_each(|x| find_leaf(x, k, found)),
                Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
                    if *k == 0 {
                        *found = Some(v.clone());
                    }
                    *k = k.wrapping_sub(1);
                }
            }
        }
    }
}
