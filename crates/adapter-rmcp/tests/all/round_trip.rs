//! The 2026-07-28 input round, driven by hand: the `requestState` is server-bound, single-use
//! and expiring, and whatever the client sends back is checked against it.

use mcp_write_guard_core::round_trip::ROUND_TRIP_REFUSAL_MESSAGE;
use mcp_write_guard_rmcp::{INPUT_KEY, Outcome};
use proptest::prelude::*;
use rmcp::model::{CallToolResponse, CallToolResult, InputResponses};
use serde_json::{Value, json};

use crate::common::{Client, Era, Harness, params, text_of};

/// Input responses that carry `answer` under `key`.
fn responses_under(key: &str, answer: Value) -> InputResponses {
    let mut responses = InputResponses::new();
    responses.insert(key.to_owned(), answer);
    responses
}

/// The client's "accept, approve: true" under the guard's input key.
fn approve_responses() -> InputResponses {
    responses_under(
        INPUT_KEY,
        json!({"action": "accept", "content": {"approve": true}}),
    )
}

/// A retry with `state` that answers "accept, approve: true" (see [`retry`]).
async fn approved_retry(client: &Client, tool: &str, args: &Value, state: &str) -> CallToolResult {
    retry(client, tool, args, state, Some(approve_responses())).await
}

/// First round by hand: returns the `requestState` the server handed out.
async fn first_round(client: &Client, tool: &str, args: &Value) -> String {
    match client.call_tool_once(params(tool, args)).await.unwrap() {
        CallToolResponse::InputRequired(input) => {
            let requests = input.input_requests.unwrap();
            assert!(requests.contains_key(INPUT_KEY), "{requests:?}");
            input.request_state.unwrap()
        }
        other => panic!("expected an input round, got {other:?}"),
    }
}

/// A 2026-07-28 harness whose first `set_counter {"value": 7}` round was sent by hand: the
/// harness, those arguments and the `requestState` it was handed.
async fn round_started() -> (Harness, Value, String) {
    let h = Harness::start(Era::InputRounds).await;
    let args = json!({"value": 7});
    let state = first_round(&h.client, "set_counter", &args).await;
    (h, args, state)
}

async fn retry(
    client: &Client,
    tool: &str,
    args: &Value,
    state: &str,
    responses: Option<InputResponses>,
) -> CallToolResult {
    let mut retry = params(tool, args);
    retry.request_state = Some(state.to_owned());
    retry.input_responses = responses;
    match client.call_tool_once(retry).await.unwrap() {
        CallToolResponse::Complete(result) => result,
        other => panic!("expected a final result, got {other:?}"),
    }
}

#[tokio::test]
async fn a_hand_driven_round_applies_once_and_its_state_cannot_be_replayed() {
    let (h, args, state) = round_started().await;
    assert_eq!(h.state().applies, 0);
    let done = approved_retry(&h.client, "set_counter", &args, &state).await;
    assert_ne!(done.is_error, Some(true), "{done:?}");
    assert_eq!(h.state().counter, 7);

    // Replaying the same retry is refused and changes nothing.
    h.fixture.state.lock().counter = 1;
    let before = h.state();
    let replay = approved_retry(&h.client, "set_counter", &args, &state).await;
    h.assert_refused(&replay, &before, Outcome::StateRejected, Some("replayed"));
    assert_eq!(text_of(&replay), ROUND_TRIP_REFUSAL_MESSAGE);
}

#[tokio::test]
async fn a_forged_state_is_refused() {
    let h = Harness::start(Era::InputRounds).await;
    let args = json!({"value": 7});
    let before = h.state();
    for (forged, reason) in [
        // Well-formed, never handed out.
        ("7c9e6679-7425-40de-944b-e07fc1f90ae7", "unknown"),
        ("not-a-state", "malformed"),
        ("", "malformed"),
        ("{\"approved\": true}", "malformed"),
        // A UUID, but not a version 4 one.
        ("7c9e6679-7425-10de-944b-e07fc1f90ae7", "malformed"),
    ] {
        h.audit.clear();
        let result = approved_retry(&h.client, "set_counter", &args, forged).await;
        h.assert_refused(&result, &before, Outcome::StateRejected, Some(reason));
        assert_eq!(text_of(&result), ROUND_TRIP_REFUSAL_MESSAGE);
    }
    assert_eq!(
        h.state().previews,
        0,
        "a forged retry does not even preview"
    );
}

#[tokio::test]
async fn an_altered_state_is_refused() {
    let (h, args, state) = round_started().await;
    let before = h.state();
    let mut altered = state.clone().into_bytes();
    let last = altered.len() - 1;
    altered[last] = if altered[last] == b'0' { b'1' } else { b'0' };
    let altered = String::from_utf8(altered).unwrap();
    let result = approved_retry(&h.client, "set_counter", &args, &altered).await;
    assert_ne!(altered, state);
    h.assert_refused(&result, &before, Outcome::StateRejected, Some("unknown"));
    assert_eq!(text_of(&result), ROUND_TRIP_REFUSAL_MESSAGE);
}

#[tokio::test]
async fn a_state_is_bound_to_its_principal_and_tool() {
    let h = Harness::start(Era::InputRounds).await;
    h.fixture.state.lock().rows.insert("a".into(), 1);
    let args = json!({"value": 7});
    let state = first_round(&h.client, "set_counter", &args).await;
    let before = h.state();

    // Another connection presents it.
    let (other, _) = h.second_connection().await;
    let result = approved_retry(&other, "set_counter", &args, &state).await;
    h.assert_refused(
        &result,
        &before,
        Outcome::StateRejected,
        Some("other-principal"),
    );

    // Another tool presents it.
    let state = first_round(&h.client, "set_counter", &args).await;
    h.audit.clear();
    let add = json!({"name": "b", "value": 2});
    let result = approved_retry(&h.client, "add_row", &add, &state).await;
    h.assert_refused(&result, &before, Outcome::StateRejected, Some("other-tool"));
}

#[tokio::test]
async fn a_retry_without_an_answer_is_refused() {
    let h = Harness::start(Era::InputRounds).await;
    let args = json!({"value": 7});
    let before = h.state();

    let state = first_round(&h.client, "set_counter", &args).await;
    let result = retry(&h.client, "set_counter", &args, &state, None).await;
    h.assert_refused(
        &result,
        &before,
        Outcome::AskFailed,
        Some("the answer could not be read: no input responses"),
    );

    for (responses, reason) in [
        // An error in place of the elicitation result (a client whose dialog failed).
        (
            responses_under(
                INPUT_KEY,
                json!({"code": -32603, "message": "the approval dialog crashed"}),
            ),
            "the answer could not be read: no action",
        ),
        // An answer under some other key.
        (
            responses_under(
                "something-else",
                json!({"action": "accept", "content": {"approve": true}}),
            ),
            "the answer could not be read: no answer to the approval question",
        ),
    ] {
        let state = first_round(&h.client, "set_counter", &args).await;
        h.audit.clear();
        let result = retry(&h.client, "set_counter", &args, &state, Some(responses)).await;
        h.assert_refused(&result, &before, Outcome::AskFailed, Some(reason));
    }
}

#[tokio::test]
async fn an_expired_state_is_refused_like_a_late_answer() {
    let (h, args, state) = round_started().await;
    let before = h.state();
    h.clock.advance(time::Duration::seconds(121));
    let result = approved_retry(&h.client, "set_counter", &args, &state).await;
    h.assert_refused(&result, &before, Outcome::Expired, Some("expired"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever the client changes in the arguments between the question and the retry, the
    /// change it is applied is the one the user saw, or nothing.
    #[test]
    fn arguments_changed_on_the_retry_are_never_applied(
        original in -1_000i64..1_000,
        changed in prop_oneof![
            (-1_000i64..1_000).prop_map(|v| json!({"value": v})),
            any::<bool>().prop_map(|b| json!({"value": 5, "dryRun": b})),
            "[a-z]{1,8}".prop_map(|k| json!({"value": 5, k: 1})),
            Just(json!({})),
        ],
    ) {
        let original = original.abs();
        let args = json!({"value": original});
        prop_assume!(changed != args);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let h = Harness::start(Era::InputRounds).await;
            let state = first_round(&h.client, "set_counter", &args).await;
            let before = h.state();
            let result = approved_retry(&h.client, "set_counter", &changed, &state).await;
            h.assert_refused(&result, &before, Outcome::StateRejected, Some("other-arguments"));

            // The untouched retry of a fresh round applies exactly the original value.
            let state = first_round(&h.client, "set_counter", &args).await;
            let done = approved_retry(&h.client, "set_counter", &args, &state).await;
            assert_ne!(done.is_error, Some(true), "{done:?}");
            assert_eq!(h.state().counter, original);
        });
    }
}
