//! When the inner server fails: its error text stays in the audit record and never reaches the
//! model outside the envelope, and a tool list that cannot be read is a refusal with a record,
//! not a protocol error.

use std::sync::atomic::Ordering;

use mcp_write_guard_rmcp::{INPUT_KEY, Outcome, PREPARE_ADMIN_ACTION};
use rmcp::model::{CallToolResponse, CallToolResult, InputResponses};
use rstest_reuse::apply;
use serde_json::{Value, json};

use crate::common::{Era, Reply, both_eras, params, text_of};
use crate::wrapped::{Harness, INNER_TEXT, Wrapped};

#[apply(both_eras)]
async fn a_preview_protocol_error_stays_in_the_audit_record(era: Era) {
    let h = Harness::start(era, Wrapped::default(), |b| b).await;
    let before = h.state();
    h.scripted.script([Reply::Approve]);
    // The fixture's preview fails with a protocol error naming the argument.
    let result = h.call("set_counter", json!({"value": "seven"})).await;
    h.assert_refused(&result, &before, Outcome::PreviewFailed);
    let text = text_of(&result);
    assert!(!text.contains("must be an integer"), "{text}");
    assert!(text.contains("could not be previewed"), "{text}");
    let reason = h.audit.last().unwrap().reason.unwrap();
    assert!(reason.contains("value must be an integer"), "{reason}");
    assert!(h.scripted.asked().is_empty());
}

#[apply(both_eras)]
async fn an_apply_protocol_error_stays_in_the_audit_record(era: Era) {
    let server = Wrapped::default();
    server.knobs.apply_error.store(true, Ordering::SeqCst);
    let h = Harness::start(era, server, |b| b).await;
    let before = h.state();
    h.scripted.script([Reply::Approve]);
    let result = h.call("add_row", json!({"name": "a", "value": 1})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let text = text_of(&result);
    assert!(!text.contains(INNER_TEXT), "{text}");
    assert!(text.contains("reported an error while applying"), "{text}");
    assert!(text.contains("Check the current state"), "{text}");
    assert_eq!(h.state().data(), before.data());
    assert_eq!(h.server.knobs.failed_applies.load(Ordering::SeqCst), 1);
    assert_eq!(
        h.audit.outcomes(),
        vec![Outcome::Asked, Outcome::Approved, Outcome::ApplyFailed]
    );
    assert_eq!(h.audit.last().unwrap().reason.as_deref(), Some(INNER_TEXT));
}

#[apply(both_eras)]
async fn prepare_admin_action_with_an_unreadable_tool_list_is_a_refusal(era: Era) {
    let server = Wrapped::default();
    server.knobs.hide_get_tool.store(true, Ordering::SeqCst);
    server.knobs.fail_list_tools.store(true, Ordering::SeqCst);
    let h = Harness::start(era, server, |b| b).await;
    h.server.fixture.state.lock().rows.insert("a".into(), 1);
    h.assert_preparing_refused_unasked(Outcome::LookupFailed)
        .await;
    let reason = h.audit.last().unwrap().reason.unwrap();
    assert!(reason.contains(INNER_TEXT), "{reason}");
}

fn answer(action: &str, content: Value) -> InputResponses {
    let mut responses = InputResponses::new();
    responses.insert(
        INPUT_KEY.to_owned(),
        json!({"action": action, "content": content}),
    );
    responses
}

/// Opens a 2026-07-28 round for `prepare_admin_action`, breaks the inner tool list, and retries
/// with `responses`.
async fn retry_with_broken_tool_list(responses: InputResponses) -> (Harness, CallToolResult) {
    let server = Wrapped::default();
    server.knobs.hide_get_tool.store(true, Ordering::SeqCst);
    let h = Harness::start(Era::InputRounds, server, |b| b).await;
    h.server.fixture.state.lock().rows.insert("a".into(), 1);
    let args = json!({"tool": "delete_row", "arguments": {"name": "a"}});
    let state = match h
        .client
        .call_tool_once(params(PREPARE_ADMIN_ACTION, &args))
        .await
        .unwrap()
    {
        CallToolResponse::InputRequired(input) => input.request_state.unwrap(),
        other => panic!("expected an input round, got {other:?}"),
    };
    h.server.knobs.fail_list_tools.store(true, Ordering::SeqCst);
    let mut retry = params(PREPARE_ADMIN_ACTION, &args);
    retry.request_state = Some(state);
    retry.input_responses = Some(responses);
    let result = match h.client.call_tool_once(retry).await.unwrap() {
        CallToolResponse::Complete(result) => result,
        other => panic!("expected a final result, got {other:?}"),
    };
    (h, result)
}

#[tokio::test]
async fn an_approved_retry_whose_tool_list_fails_is_a_refusal_with_a_record() {
    let (h, result) = retry_with_broken_tool_list(answer("accept", json!({"approve": true}))).await;
    let before = h.state();
    h.assert_refused(&result, &before, Outcome::LookupFailed);
    assert!(result.structured_content.is_none(), "no token: {result:?}");
    // The person approved the intent; the target could not be checked, so no token.
    assert_eq!(
        h.audit.outcomes(),
        vec![Outcome::Asked, Outcome::Approved, Outcome::LookupFailed]
    );
    assert_eq!(h.state().rows.get("a"), Some(&1));
}

#[tokio::test]
async fn a_declined_retry_is_recorded_as_declined_before_the_tool_is_looked_up() {
    let (h, result) = retry_with_broken_tool_list(answer("decline", Value::Null)).await;
    let before = h.state();
    h.assert_refused(&result, &before, Outcome::Declined);
    assert_eq!(h.audit.outcomes(), vec![Outcome::Asked, Outcome::Declined]);
    assert_eq!(h.audit.last().unwrap().reason.as_deref(), Some("declined"));
}
