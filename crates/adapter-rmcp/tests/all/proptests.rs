//! Invariants over inputs: any answer that is not `accept` with `approve: true` writes nothing,
//! in either era; and what is applied is exactly what was approved.

use mcp_write_guard_core::{AnswerAction, Decision, DenyReason, answer::decide_answer};
use mcp_write_guard_rmcp::{INPUT_KEY, Outcome};
use proptest::prelude::*;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ElicitationAction, InputResponses};
use serde_json::{Value, json};

use crate::common::{Era, Harness, Reply};

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-zA-Z ]{0,8}".prop_map(Value::String),
        Just(json!("true")),
        Just(json!(1)),
        Just(json!([true])),
        Just(json!({"approve": true})),
    ]
}

/// Content the user (or a broken client) might send back.
fn content() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        leaf().prop_map(Some),
        leaf().prop_map(|v| Some(json!({"approve": v}))),
        (leaf(), "[a-z]{1,6}").prop_map(|(v, k)| Some(json!({k: v}))),
        (leaf(), leaf()).prop_map(|(a, b)| Some(json!({"approve": a, "reason": b}))),
    ]
}

fn approves(action: &str, content: &Option<Value>) -> bool {
    action == "accept"
        && content
            .as_ref()
            .and_then(|c| c.get("approve"))
            .is_some_and(|a| *a == json!(true))
}

/// The refusal mcp-write-guard-core's decision calls for: the outcome and the audit reason.
fn expected_refusal(action: &str, content: Option<&Value>) -> (Outcome, &'static str) {
    let Decision::Deny(reason) = decide_answer(&AnswerAction::from_wire(action), content) else {
        panic!("{action} {content:?} approves");
    };
    let outcome = match reason {
        DenyReason::Cancelled => Outcome::Cancelled,
        DenyReason::Expired => Outcome::Expired,
        _ => Outcome::Declined,
    };
    (outcome, reason.as_str())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Below 2026-07-28: whatever the elicitation handler answers, only accept + true writes.
    #[test]
    fn legacy_only_accept_and_true_writes(
        action in prop_oneof![Just("accept"), Just("decline"), Just("cancel")],
        content in content(),
    ) {
        runtime().block_on(async {
            let h = Harness::start(Era::Legacy).await;
            let before = h.state();
            let elicitation_action = match action {
                "accept" => ElicitationAction::Accept,
                "decline" => ElicitationAction::Decline,
                _ => ElicitationAction::Cancel,
            };
            h.script([Reply::Raw(elicitation_action, content.clone())]);
            let result = h.call("set_counter", json!({"value": 7})).await;
            if approves(action, &content) {
                assert_ne!(result.is_error, Some(true), "{result:?}");
                assert_eq!(h.state().counter, 7);
            } else {
                // On the wire `"content": null` and no content are the same `None`.
                let sent = content.as_ref().filter(|c| !c.is_null());
                let (outcome, reason) = expected_refusal(action, sent);
                h.assert_refused(&result, &before, outcome, Some(reason));
            }
        });
    }

    /// At 2026-07-28: whatever the retry carries as the answer (any action string, any
    /// content), only accept + true writes.
    #[test]
    fn rounds_only_accept_and_true_writes(
        action in prop_oneof![
            Just("accept".to_owned()),
            Just("decline".to_owned()),
            Just("cancel".to_owned()),
            "[a-zA-Z]{0,8}",
        ],
        content in content(),
    ) {
        runtime().block_on(async {
            let h = Harness::start(Era::InputRounds).await;
            let before = h.state();
            let args = json!({"value": 7});
            let params = CallToolRequestParams::new("set_counter")
                .with_arguments(args.as_object().cloned().unwrap());
            let CallToolResponse::InputRequired(input) =
                h.client.call_tool_once(params.clone()).await.unwrap()
            else {
                panic!("expected an input round");
            };
            let mut answer = json!({"action": action});
            if let Some(content) = &content {
                answer["content"] = content.clone();
            }
            let mut responses = InputResponses::new();
            responses.insert(INPUT_KEY.to_owned(), answer);
            let mut retry = params;
            retry.request_state = input.request_state;
            retry.input_responses = Some(responses);
            let CallToolResponse::Complete(result) = h.client.call_tool_once(retry).await.unwrap()
            else {
                panic!("expected a final result");
            };
            if approves(&action, &content) {
                assert_ne!(result.is_error, Some(true), "{result:?}");
                assert_eq!(h.state().counter, 7);
            } else {
                let (outcome, reason) = expected_refusal(&action, content.as_ref());
                h.assert_refused(&result, &before, outcome, Some(reason));
            }
        });
    }

    /// What the inner tool applies is exactly what the user was shown: any value, any extra
    /// arguments, in either era.
    #[test]
    fn the_applied_arguments_are_the_approved_ones(
        value in 0i64..1_000_000,
        name in "[a-z]{1,10}",
        legacy in any::<bool>(),
    ) {
        let era = if legacy { Era::Legacy } else { Era::InputRounds };
        runtime().block_on(async {
            let h = Harness::start(era).await;
            let result = h.approve_and_call("add_row", json!({"name": name, "value": value})).await;
            assert_ne!(result.is_error, Some(true), "{result:?}");
            let asked = h.asked();
            assert!(asked[0].contains(&format!("name: {name:?}")), "{}", asked[0]);
            assert!(asked[0].contains(&format!("value: {value}")), "{}", asked[0]);
            assert_eq!(h.state().rows.len(), 1);
            assert_eq!(h.state().rows.get(&name), Some(&value));
        });
    }
}
