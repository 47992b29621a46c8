//! Turning the user's answer into a decision. Only `accept` with `approve: true` approves.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The name of the boolean field the approval form asks for.
pub const APPROVE_FIELD: &str = "approve";

/// The action of the user's answer to an elicitation. The adapter maps its protocol type into
/// this (see [`AnswerAction::from_wire`] for the wire names).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AnswerAction {
    /// The user submitted the form.
    Accept,
    /// The user explicitly declined.
    Decline,
    /// The user dismissed the question without choosing.
    Cancel,
    /// Anything else: an action this crate does not know. Always a denial.
    Other(String),
}

impl AnswerAction {
    /// Maps the wire name: exactly `"accept"`, `"decline"` or `"cancel"` (case-sensitive);
    /// anything else is [`AnswerAction::Other`].
    pub fn from_wire(action: &str) -> Self {
        match action {
            "accept" => Self::Accept,
            "decline" => Self::Decline,
            "cancel" => Self::Cancel,
            other => Self::Other(other.to_owned()),
        }
    }
}

/// How a person answered a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerChannel {
    /// The client's form: `elicitation/create` below 2026-07-28, the retry's input responses
    /// from 2026-07-28 on.
    Form,
    /// The server's own approval page (reached through URL-mode elicitation or a link a
    /// notifier sent).
    Page,
}

impl AnswerChannel {
    /// A stable name for the audit trail (`form`, `page`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Form => "form",
            Self::Page => "page",
        }
    }
}

/// The outcome of a decision point. A denial is a value, so it cannot be `?`-ed past.
#[must_use = "a decision that is not looked at is a write that may go ahead unapproved"]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The user approved this exact change.
    Approve,
    /// Anything else, with the reason for the audit trail.
    Deny(DenyReason),
}

impl Decision {
    /// Whether this is [`Decision::Approve`].
    pub fn is_approved(self) -> bool {
        match self {
            Self::Approve => true,
            Self::Deny(_) => false,
        }
    }

    /// The denial reason, if denied.
    pub fn deny_reason(self) -> Option<DenyReason> {
        match self {
            Self::Approve => None,
            Self::Deny(reason) => Some(reason),
        }
    }
}

/// Why an answer (or an approval) was denied. Each kind is distinct so the audit trail can tell
/// them apart; [`DenyReason::as_str`] gives a stable name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
/// Not `#[non_exhaustive]`: a new kind of denial must be a compile error wherever denials
/// are turned into outcomes.
pub enum DenyReason {
    /// The user declined.
    Declined,
    /// The user cancelled (dismissed) the question.
    Cancelled,
    /// `accept` without any content.
    NoContent,
    /// `accept` whose content is not a JSON object.
    ContentNotObject,
    /// `accept` whose content has `approve: false`.
    ApproveFalse,
    /// `accept` whose content has an `approve` that is not a boolean (`"true"`, `1`, `null`, …).
    ApproveNotBoolean,
    /// `accept` whose content has no `approve` field.
    ApproveMissing,
    /// An action this crate does not know.
    UnknownAction,
    /// The answer came at or after the end of the approval clock.
    Expired,
}

impl DenyReason {
    /// A stable, kebab-case name for the audit trail.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Declined => "declined",
            Self::Cancelled => "cancelled",
            Self::NoContent => "no-content",
            Self::ContentNotObject => "content-not-object",
            Self::ApproveFalse => "approve-false",
            Self::ApproveNotBoolean => "approve-not-boolean",
            Self::ApproveMissing => "approve-missing",
            Self::UnknownAction => "unknown-action",
            Self::Expired => "expired",
        }
    }
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Decides the user's answer. Approves only for [`AnswerAction::Accept`] with content that is an
/// object whose `approve` member is the JSON boolean `true`. Everything else denies, with its own
/// reason. Extra fields in the content are ignored.
///
/// ```
/// use mcp_write_guard_core::answer::decide_answer;
/// use mcp_write_guard_core::{AnswerAction, Decision, DenyReason};
/// use serde_json::json;
///
/// assert_eq!(decide_answer(&AnswerAction::Accept, Some(&json!({"approve": true}))), Decision::Approve);
/// assert_eq!(
///     decide_answer(&AnswerAction::Accept, Some(&json!({"approve": "true"}))),
///     Decision::Deny(DenyReason::ApproveNotBoolean)
/// );
/// ```
pub fn decide_answer(action: &AnswerAction, content: Option<&Value>) -> Decision {
    match action {
        AnswerAction::Decline => Decision::Deny(DenyReason::Declined),
        AnswerAction::Cancel => Decision::Deny(DenyReason::Cancelled),
        AnswerAction::Other(_) => Decision::Deny(DenyReason::UnknownAction),
        AnswerAction::Accept => match content {
            None => Decision::Deny(DenyReason::NoContent),
            Some(Value::Object(map)) => match map.get(APPROVE_FIELD) {
                Some(Value::Bool(true)) => Decision::Approve,
                Some(Value::Bool(false)) => Decision::Deny(DenyReason::ApproveFalse),
                Some(_) => Decision::Deny(DenyReason::ApproveNotBoolean),
                None => Decision::Deny(DenyReason::ApproveMissing),
            },
            Some(_) => Decision::Deny(DenyReason::ContentNotObject),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Map, json};

    #[test]
    fn table() {
        use AnswerAction::*;
        use DenyReason::*;
        let t = json!({"approve": true});
        let cases: Vec<(AnswerAction, Option<Value>, Decision)> = vec![
            (Accept, Some(t.clone()), Decision::Approve),
            (
                Accept,
                Some(json!({"approve": true, "note": "x"})),
                Decision::Approve,
            ),
            (Decline, Some(t.clone()), Decision::Deny(Declined)),
            (Decline, None, Decision::Deny(Declined)),
            (Cancel, Some(t.clone()), Decision::Deny(Cancelled)),
            (Cancel, None, Decision::Deny(Cancelled)),
            (Accept, None, Decision::Deny(NoContent)),
            (
                Accept,
                Some(json!({"approve": false})),
                Decision::Deny(ApproveFalse),
            ),
            (
                Accept,
                Some(json!({"approve": "true"})),
                Decision::Deny(ApproveNotBoolean),
            ),
            (
                Accept,
                Some(json!({"approve": 1})),
                Decision::Deny(ApproveNotBoolean),
            ),
            (
                Accept,
                Some(json!({"approve": null})),
                Decision::Deny(ApproveNotBoolean),
            ),
            (
                Accept,
                Some(json!({"approve": [true]})),
                Decision::Deny(ApproveNotBoolean),
            ),
            (
                Accept,
                Some(json!({"approve": {"approve": true}})),
                Decision::Deny(ApproveNotBoolean),
            ),
            (Accept, Some(json!({})), Decision::Deny(ApproveMissing)),
            (
                Accept,
                Some(json!({"Approve": true})),
                Decision::Deny(ApproveMissing),
            ),
            (Accept, Some(json!(true)), Decision::Deny(ContentNotObject)),
            (
                Accept,
                Some(json!([{"approve": true}])),
                Decision::Deny(ContentNotObject),
            ),
            (
                Other("accept ".into()),
                Some(t.clone()),
                Decision::Deny(UnknownAction),
            ),
            (
                Other("ACCEPT".into()),
                Some(t.clone()),
                Decision::Deny(UnknownAction),
            ),
            (Other(String::new()), Some(t), Decision::Deny(UnknownAction)),
        ];
        for (action, content, want) in cases {
            assert_eq!(
                decide_answer(&action, content.as_ref()),
                want,
                "{action:?} {content:?}"
            );
        }
    }

    #[test]
    fn wire_names_are_exact() {
        assert_eq!(AnswerAction::from_wire("accept"), AnswerAction::Accept);
        assert_eq!(AnswerAction::from_wire("decline"), AnswerAction::Decline);
        assert_eq!(AnswerAction::from_wire("cancel"), AnswerAction::Cancel);
        assert_eq!(
            AnswerAction::from_wire("Accept"),
            AnswerAction::Other("Accept".into())
        );
    }

    #[test]
    fn reason_names_are_distinct() {
        use DenyReason::*;
        let all = [
            Declined,
            Cancelled,
            NoContent,
            ContentNotObject,
            ApproveFalse,
            ApproveNotBoolean,
            ApproveMissing,
            UnknownAction,
            Expired,
        ];
        crate::test_support::assert_names_distinct(&all, DenyReason::as_str);
    }

    /// The names are the audit trail's vocabulary: pinned, and what `Display` writes.
    #[test]
    fn reason_names_are_pinned_and_displayed() {
        use DenyReason::*;
        for (reason, name) in [
            (Declined, "declined"),
            (Cancelled, "cancelled"),
            (NoContent, "no-content"),
            (ContentNotObject, "content-not-object"),
            (ApproveFalse, "approve-false"),
            (ApproveNotBoolean, "approve-not-boolean"),
            (ApproveMissing, "approve-missing"),
            (UnknownAction, "unknown-action"),
            (Expired, "expired"),
        ] {
            assert_eq!(reason.as_str(), name);
            assert_eq!(reason.to_string(), name);
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            "[a-z]{0,6}".prop_map(Value::String),
            Just(json!("true")),
            Just(json!(1)),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{0,3}|approve", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn arb_action() -> impl Strategy<Value = AnswerAction> {
        prop_oneof![
            Just(AnswerAction::Accept),
            Just(AnswerAction::Decline),
            Just(AnswerAction::Cancel),
            ".{0,8}".prop_map(|s| AnswerAction::from_wire(&s)),
        ]
    }

    /// Answer content: any JSON, and (as often) an object whose `approve` is `true` or a near
    /// miss, beside other members, so that approving answers are common enough to be tested.
    fn arb_content() -> impl Strategy<Value = Value> {
        let approve = prop_oneof![
            5 => Just(Value::Bool(true)),
            1 => Just(Value::Bool(false)),
            1 => Just(json!("true")),
            1 => Just(json!(1)),
            1 => Just(json!([true])),
            1 => arb_json(),
        ];
        prop_oneof![
            1 => arb_json(),
            3 => (approve, prop::collection::btree_map("[a-z]{1,3}", arb_json(), 0..3)).prop_map(
                |(approve, others)| {
                    let mut content: Map<String, Value> = others.into_iter().collect();
                    content.insert("approve".to_owned(), approve);
                    Value::Object(content)
                }
            ),
        ]
    }

    #[test]
    fn is_approved_and_deny_reason_tell_the_decisions_apart() {
        assert!(Decision::Approve.is_approved());
        assert_eq!(Decision::Approve.deny_reason(), None);
        let deny = Decision::Deny(DenyReason::Declined);
        assert!(!deny.is_approved());
        assert_eq!(deny.deny_reason(), Some(DenyReason::Declined));
    }

    proptest! {
        /// Every answer other than accept with `approve: true` denies.
        #[test]
        fn only_accept_with_true_approves(action in arb_action(), content in prop::option::of(arb_content())) {
            let approves = action == AnswerAction::Accept
                && content
                    .as_ref()
                    .and_then(|c| c.as_object())
                    .and_then(|m| m.get("approve"))
                    == Some(&Value::Bool(true));
            let decision = decide_answer(&action, content.as_ref());
            prop_assert_eq!(decision.is_approved(), approves);
            prop_assert_eq!(decision.deny_reason().is_none(), approves);
        }

        /// Accept with an object whose `approve` is anything but `true` denies.
        #[test]
        fn any_other_approve_value_denies(value in arb_json(), extra in arb_json()) {
            prop_assume!(value != Value::Bool(true));
            let content = json!({"approve": value, "extra": extra});
            prop_assert!(!decide_answer(&AnswerAction::Accept, Some(&content)).is_approved());
        }
    }
}
