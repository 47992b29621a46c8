//! Task-augmented calls (the tasks extension, SEP-2663): a write the inner server could answer
//! with a task is refused before anyone is asked; reads pass through; a request that cannot
//! become a task writes as usual.

use std::sync::atomic::Ordering;

use mcp_write_guard_rmcp::Outcome;
use rmcp::model::TASKS_EXTENSION_ID;
use rstest_reuse::apply;
use serde_json::json;

use crate::common::{
    Era, Reply, ScriptedClient, a_write_of_each_kind, both_eras, text_of, unwrapped,
};
use crate::wrapped::{Harness, Wrapped};

/// The wrapped fixture (with the tasks extension if `server_tasks`) behind a guard, and a
/// scripted client that declares the tasks extension.
async fn setup(era: Era, server_tasks: bool) -> Harness {
    let server = Wrapped::default();
    server.knobs.tasks.store(server_tasks, Ordering::SeqCst);
    server.fixture.state.lock().rows.insert("a".into(), 1);
    let scripted = ScriptedClient::new().with_extension(TASKS_EXTENSION_ID);
    Harness::guarded_for(era, server, scripted, |builder| {
        builder.preview("set_counter")
    })
    .await
}

#[apply(both_eras)]
async fn a_write_that_may_become_a_task_is_refused_before_asking(era: Era) {
    let s = setup(era, true).await;
    s.scripted
        .script([Reply::Approve, Reply::Approve, Reply::Approve]);
    let before = s.server.fixture.snapshot();
    for (tool, args) in a_write_of_each_kind() {
        s.audit.clear();
        let result = s.call(tool, args).await;
        assert_eq!(result.is_error, Some(true), "{tool}: {result:?}");
        let text = text_of(&result);
        assert!(text.contains("background tasks"), "{text}");
        assert!(text.contains("nothing was saved"), "{text}");
        let records = s.audit.records();
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0].outcome, Outcome::RefusedTask);
        assert_eq!(
            records[0].reason.as_deref(),
            Some("the request allows a task result")
        );
        assert_eq!(records[0].tool, tool);
    }
    let after = s.server.fixture.snapshot();
    assert_eq!(after.data(), before.data());
    assert_eq!(after.applies, 0);
    assert_eq!(after.previews, 0, "not even previewed");
    assert!(s.scripted.asked().is_empty(), "nobody was asked");

    // Reads pass through, wrapped, unrecorded.
    s.audit.clear();
    let read = s.call("get_counter", json!({})).await;
    assert_eq!(unwrapped(&read), json!({"counter": 0}));
    assert!(s.audit.records().is_empty());
}

#[apply(both_eras)]
async fn without_server_tasks_the_same_client_writes_as_usual(era: Era) {
    let s = setup(era, false).await;
    s.scripted.script([Reply::Approve]);
    let result = s.call("set_counter", json!({"value": 7})).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(s.server.fixture.snapshot().counter, 7);
    assert_eq!(
        s.audit.outcomes(),
        vec![Outcome::Asked, Outcome::Approved, Outcome::Applied]
    );
}
