//! `answer`: the person's answer, as an elicitation result and as 2026-07-28 `inputResponses`.

use mcp_write_guard_core::{
    AnswerAction, ApprovalPolicy, CapturedArgs, Decision, DenyReason, PendingApproval, Principal,
    ToolName, Verdict, answer::decide_answer, ids::DefinitionDigest,
};
use serde_json::{Value, json};

use crate::support::{fail, t0};

/// The definition of the tool the approval is for.
const DEFINITION: DefinitionDigest = DefinitionDigest::from_bytes([7; 32]);

/// The key of the guard's question in `inputRequests` / `inputResponses`
/// (`mcp_write_guard_rmcp::INPUT_KEY`, not a dependency here: the adapter brings rmcp).
pub(crate) const INPUT_KEY: &str = "mcp-write-guard/approve";

/// Parses `data` as JSON and reads it as every shape an answer arrives in: an elicitation
/// result (`{"action": .., "content": ..}`), the `inputResponses` of a retry (the result under
/// `mcp-write-guard/approve`), and the retry's params (`{"inputResponses": {..}}`). Each is
/// read the way the adapter reads it (no string `action`: no answer) and decided by
/// mcp-write-guard-core's [`decide_answer`] and [`PendingApproval::decide`].
///
/// Properties: approved exactly when the action is the string `"accept"` and the content is an
/// object whose `approve` is the JSON boolean `true` (written here independently, as text);
/// every denial has the reason its shape calls for; [`AnswerAction::from_wire`] maps exactly the
/// three wire names; a pending approval decided inside its 120 s clock gives the same verdict,
/// and the approval carries the captured arguments; decided at or after 120 s it is expired
/// whatever the answer.
pub fn check_answer(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    // How long after the question the answer came: 0..240 s, from the input's length.
    let after = u64::try_from(data.len() % 240).unwrap_or(0);
    check_result(&value, after);
    if let Some(result) = value.get(INPUT_KEY) {
        check_result(result, after);
    }
    if let Some(result) = value.get("inputResponses").and_then(|r| r.get(INPUT_KEY)) {
        check_result(result, after);
    }
}

/// One elicitation result in its JSON form.
fn check_result(result: &Value, after: u64) {
    // The adapter refuses an answer without a string action before anything is decided.
    let Some(action) = result.get("action").and_then(Value::as_str) else {
        return;
    };
    let content = result.get("content");
    let wire = AnswerAction::from_wire(action);
    assert_wire_name(action, &wire);
    let decision = decide_answer(&wire, content);
    assert_decision(action, content, decision);

    let policy = ApprovalPolicy::default();
    let Ok(args) = CapturedArgs::capture_value(&json!({"id": 1}), &policy.limits) else {
        fail(format_args!("answer: fixed arguments refused"));
    };
    let asked = t0();
    let pending = PendingApproval::new(
        Principal::new("fuzz"),
        ToolName::new("write"),
        DEFINITION,
        args.clone(),
        json!({"before": 0, "after": 1}),
        asked,
        &policy,
    );
    let now = asked + std::time::Duration::from_secs(after);
    let live = after < 120;
    match pending.decide(&wire, content, now) {
        Verdict::Approved(approved) => {
            assert!(
                live && decision == Decision::Approve,
                "answer: the pending approval approved what decide_answer did not, or late"
            );
            assert_eq!(
                approved.args(),
                &args,
                "answer: the approval carries other arguments"
            );
        }
        Verdict::Denied(reason) => {
            let expected = if live {
                decision.deny_reason()
            } else {
                Some(DenyReason::Expired)
            };
            assert_eq!(
                Some(reason),
                expected,
                "answer: the pending approval denied for another reason at {after} s"
            );
        }
    }
}

/// Whether the answer approves, written from the rule, not from the code: the action is the
/// text `accept`, and the content is an object whose `approve` member is written `true`.
pub(crate) fn approves(action: &str, content: Option<&Value>) -> bool {
    let approve_text = content
        .filter(|c| c.is_object())
        .and_then(|c| c.get("approve"))
        .map(Value::to_string);
    action.as_bytes() == b"accept" && approve_text.as_deref() == Some("true")
}

/// The denial each shape of answer calls for (`None`: it approves).
pub(crate) fn expected_reason(action: &str, content: Option<&Value>) -> Option<DenyReason> {
    match action {
        "decline" => Some(DenyReason::Declined),
        "cancel" => Some(DenyReason::Cancelled),
        "accept" => match content {
            None => Some(DenyReason::NoContent),
            Some(Value::Object(map)) => match map.get("approve") {
                None => Some(DenyReason::ApproveMissing),
                Some(Value::Bool(true)) => None,
                Some(Value::Bool(false)) => Some(DenyReason::ApproveFalse),
                Some(_) => Some(DenyReason::ApproveNotBoolean),
            },
            Some(_) => Some(DenyReason::ContentNotObject),
        },
        _ => Some(DenyReason::UnknownAction),
    }
}

pub(crate) fn assert_decision(action: &str, content: Option<&Value>, decision: Decision) {
    let approved = approves(action, content);
    assert_eq!(
        decision.is_approved(),
        approved,
        "answer: action {action:?} with content {content:?} gave {decision:?}"
    );
    assert_eq!(
        decision.deny_reason(),
        expected_reason(action, content),
        "answer: action {action:?} with content {content:?} denied for the wrong reason"
    );
    assert_eq!(
        decision.deny_reason().is_none(),
        approved,
        "answer: a decision that is neither approved nor denied"
    );
}

pub(crate) fn assert_wire_name(action: &str, wire: &AnswerAction) {
    let expected = match action {
        "accept" => AnswerAction::Accept,
        "decline" => AnswerAction::Decline,
        "cancel" => AnswerAction::Cancel,
        other => AnswerAction::Other(other.to_owned()),
    };
    assert_eq!(
        wire, &expected,
        "answer: the wire name {action:?} maps to {wire:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_for_ordinary_answers() {
        check_answer(br#"{"action": "accept", "content": {"approve": true}}"#);
        check_answer(br#"{"action": "accept", "content": {"approve": "true"}}"#);
        check_answer(br#"{"mcp-write-guard/approve": {"action": "decline"}}"#);
        check_answer(
            br#"{"inputResponses": {"mcp-write-guard/approve": {"action": "accept", "content": {"approve": true, "x": 1}}}}"#,
        );
    }

    #[test]
    fn the_rule() {
        assert!(approves("accept", Some(&json!({"approve": true}))));
        assert!(!approves("accept", Some(&json!({"approve": "true"}))));
        assert!(!approves("accept", Some(&json!([{"approve": true}]))));
        assert!(!approves("Accept", Some(&json!({"approve": true}))));
        assert!(!approves("accept", None));
    }

    #[test]
    #[should_panic(expected = "gave Approve")]
    fn approving_a_string_true_fails() {
        assert_decision(
            "accept",
            Some(&json!({"approve": "true"})),
            Decision::Approve,
        );
    }

    #[test]
    #[should_panic(expected = "gave Deny")]
    fn denying_an_approval_fails() {
        assert_decision(
            "accept",
            Some(&json!({"approve": true})),
            Decision::Deny(DenyReason::ApproveFalse),
        );
    }

    #[test]
    #[should_panic(expected = "denied for the wrong reason")]
    fn the_wrong_reason_fails() {
        assert_decision("decline", None, Decision::Deny(DenyReason::Cancelled));
    }

    #[test]
    #[should_panic(expected = "maps to")]
    fn a_loose_wire_name_fails() {
        assert_wire_name("ACCEPT", &AnswerAction::Accept);
    }
}
