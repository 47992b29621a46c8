//! A tool that opted in to previews but writes on `WriteStep::Preview` (it forgot to look at
//! the step): the mistake, its symptom, and the test aid that catches it.

use std::sync::Arc;

use mcp_write_guard_rmcp::{MemorySink, Outcome, WriteGuard};
use serde_json::json;

use crate::common::{Era, Reply, ScriptedClient, call_on, connect, counter::Counter, text_of};

/// One write of one to the counter server's counter (see `common/counter.rs`), previewed, in
/// the legacy era, the person answering `answer`: by `heedless_add`, which forgets to look at
/// the step, when `careless`, else by `add_to_counter`, which looks; with the guard's
/// `check_previews_are_dry` when `check`. Returns the counter, the questions, the decisions and
/// the result's text.
async fn bump(
    careless: bool,
    check: bool,
    answer: Reply,
) -> (i64, Vec<String>, Vec<Outcome>, String) {
    let tool = if careless {
        "heedless_add"
    } else {
        "add_to_counter"
    };
    let server = Counter::default();
    let audit = MemorySink::new();
    let mut builder = WriteGuard::builder(server.clone())
        .writes_enabled(true)
        .preview(tool)
        .audit(Arc::new(audit.clone()));
    if check {
        builder = builder.check_previews_are_dry();
    }
    let client_handler = ScriptedClient::new();
    client_handler.script([answer]);
    let client = connect(builder.build(), Era::Legacy, client_handler.clone())
        .await
        .unwrap();
    let result = call_on(&client, tool, json!({"delta": 1})).await.unwrap();
    client.cancel().await.unwrap();
    (
        server.snapshot().counter,
        client_handler.asked(),
        audit.decisions(),
        text_of(&result),
    )
}

#[tokio::test]
async fn the_symptom_a_declined_change_lands_anyway_and_the_guard_cannot_vouch() {
    // Declined: the person said no, and the counter moved all the same (the preview wrote).
    let (counter, asked, outcomes, _) = bump(true, false, Reply::Decline).await;
    assert_eq!(counter, 1);
    assert_eq!(asked.len(), 1);
    assert_eq!(outcomes, [Outcome::Declined]);
    // Approved: written twice (preview and apply), and the guard says it cannot vouch for the
    // apply, which did not compare.
    let (counter, _, outcomes, text) = bump(true, false, Reply::Approve).await;
    assert_eq!(counter, 2);
    assert_eq!(
        outcomes,
        [Outcome::Approved, Outcome::ApplyFailed],
        "{text}"
    );
}

#[tokio::test]
async fn the_check_refuses_before_anyone_is_asked() {
    let (counter, asked, outcomes, text) = bump(true, true, Reply::Approve).await;
    assert!(asked.is_empty(), "{asked:?}");
    assert_eq!(outcomes, [Outcome::PreviewFailed]);
    assert!(text.contains("could not be previewed"), "{text}");
    // Found, not undone: both previews wrote.
    assert_eq!(counter, 2);

    // A careful tool passes the check: asked once, applied once.
    let (counter, asked, outcomes, _) = bump(false, true, Reply::Approve).await;
    assert_eq!(asked.len(), 1);
    assert_eq!(outcomes, [Outcome::Approved, Outcome::Applied]);
    assert_eq!(counter, 1);
}
