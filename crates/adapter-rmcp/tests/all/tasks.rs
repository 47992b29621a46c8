//! Task-augmented calls (the tasks extension, SEP-2663): a write the inner server could answer
//! with a task is refused before anyone is asked; reads pass through; a request that cannot
//! become a task writes as usual.

use std::sync::{Arc, atomic::Ordering};

use adapter_rmcp::{MemorySink, Outcome, PREPARE_ADMIN_ACTION, WriteGuard};
use approval_core::ManualClock;
use rmcp::{
    ClientHandler, ErrorData, RoleClient,
    model::*,
    service::{RequestContext, RunningService},
};
use serde_json::{Value, json};

use crate::common::{Era, Reply, ScriptedClient, connect, start_time, text_of, unwrapped};
use crate::wrapped::Wrapped;

/// A scripted client that also declares the tasks extension.
#[derive(Clone)]
struct TaskClient(ScriptedClient);

impl ClientHandler for TaskClient {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.0.create_elicitation(request, context).await
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = self.0.get_info();
        info.capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
        info
    }
}

struct Setup {
    client: RunningService<RoleClient, TaskClient>,
    scripted: ScriptedClient,
    server: Wrapped,
    audit: MemorySink,
}

async fn setup(era: Era, server_tasks: bool) -> Setup {
    let server = Wrapped::default();
    server.knobs.tasks.store(server_tasks, Ordering::SeqCst);
    server.fixture.state.lock().rows.insert("a".into(), 1);
    let audit = MemorySink::new();
    let guard = WriteGuard::builder(server.clone())
        .writes_enabled(true)
        .preview("set_counter")
        .audit(Arc::new(audit.clone()))
        .clock(Arc::new(ManualClock::new(start_time())))
        .build();
    let scripted = ScriptedClient::new();
    let client = connect(guard, era, TaskClient(scripted.clone()))
        .await
        .unwrap();
    Setup {
        client,
        scripted,
        server,
        audit,
    }
}

async fn call(setup: &Setup, tool: &str, args: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().unwrap());
    setup.client.call_tool(params).await.unwrap()
}

both_eras!(
    a_write_that_may_become_a_task_is_refused_before_asking,
    without_server_tasks_the_same_client_writes_as_usual,
);

async fn a_write_that_may_become_a_task_is_refused_before_asking(era: Era) {
    let s = setup(era, true).await;
    s.scripted
        .script([Reply::Approve, Reply::Approve, Reply::Approve]);
    let before = s.server.fixture.snapshot();
    for (tool, args) in [
        ("set_counter", json!({"value": 7})),
        ("add_row", json!({"name": "b", "value": 2})),
        (
            PREPARE_ADMIN_ACTION,
            json!({"tool": "delete_row", "arguments": {"name": "a"}}),
        ),
    ] {
        s.audit.clear();
        let result = call(&s, tool, args).await;
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
    let read = call(&s, "get_counter", json!({})).await;
    assert_eq!(unwrapped(&read), json!({"counter": 0}));
    assert!(s.audit.records().is_empty());
}

async fn without_server_tasks_the_same_client_writes_as_usual(era: Era) {
    let s = setup(era, false).await;
    s.scripted.script([Reply::Approve]);
    let result = call(&s, "set_counter", json!({"value": 7})).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(s.server.fixture.snapshot().counter, 7);
    assert_eq!(
        s.audit.outcomes(),
        vec![Outcome::Asked, Outcome::Approved, Outcome::Applied]
    );
}
