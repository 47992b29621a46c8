//! A question the client never answers (protocol < 2026-07-28): the guard's own timeout ends it
//! as an expired approval, with nothing written. Time is tokio's paused clock, advanced by the
//! runtime when everything waits; nothing sleeps.

use mcp_write_guard_core::ManualClock;
use mcp_write_guard_rmcp::{MemorySink, Outcome};
use rmcp::model::CallToolRequestParams;
use serde_json::json;

use crate::common::{
    Era, Fixture, Options, SilentClient, connect, guard, outcomes_and_reasons, start_time, text_of,
};

#[tokio::test(start_paused = true)]
async fn an_unanswered_question_times_out_as_expired_and_writes_nothing() {
    let fixture = Fixture::default();
    let audit = MemorySink::new();
    let clock = ManualClock::new(start_time());
    let guard = guard(fixture.clone(), &audit, &clock, &Options::default());
    let silent = SilentClient::new();
    let client = connect(guard, Era::Legacy, silent.clone()).await.unwrap();
    let before = fixture.snapshot();

    let params = CallToolRequestParams::new("set_counter")
        .with_arguments(json!({"value": 7}).as_object().cloned().unwrap());
    let result = client.call_tool(params).await.unwrap();

    assert_eq!(result.is_error, Some(true), "{result:?}");
    let text = text_of(&result);
    assert!(text.contains("not given in time"), "{text}");
    assert!(text.contains("nothing was saved"), "{text}");
    assert_eq!(silent.questions(), 1);
    let after = fixture.snapshot();
    assert_eq!(after.data(), before.data());
    assert_eq!(after.applies, 0);
    let records = outcomes_and_reasons(&audit);
    assert_eq!(
        records,
        vec![
            (Outcome::Asked, None),
            (Outcome::Expired, Some("expired".to_owned()))
        ]
    );
}
