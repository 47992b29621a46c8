//! A tool that opted in to previews but writes on `WriteStep::Preview` (it forgot to look at
//! the step): the mistake, its symptom, and the test aid that catches it.

use std::sync::{
    Arc,
    atomic::{AtomicI64, Ordering},
};

use mcp_write_guard_rmcp::{MemorySink, Outcome, WriteGuard, WriteStep, write_step};
use rmcp::{
    ErrorData, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    },
    service::{RequestContext, RoleServer},
};
use serde_json::json;

use crate::common::{
    Era, Reply, ScriptedClient, call_on, connect,
    fixture::{closed_write, object},
    text_of,
};

/// One counter and one write, `bump`: careful looks at the step, careless does not.
#[derive(Clone, Default)]
struct Bumper {
    counter: Arc<AtomicI64>,
    careless: bool,
}

fn bump_tool() -> Tool {
    Tool::new(
        "bump",
        "Add one to the counter",
        object(json!({"type": "object", "properties": {}})),
    )
    .with_annotations(closed_write(false))
}

impl ServerHandler for Bumper {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("bumper", "0.1.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![bump_tool()]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == "bump").then(bump_tool)
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let before = self.counter.load(Ordering::SeqCst);
        let change = json!({"before": before, "after": before + 1});
        if self.careless {
            // The mistake: writes whatever step the guard is at.
            self.counter.fetch_add(1, Ordering::SeqCst);
            return Ok(CallToolResult::structured(change).into());
        }
        match write_step(&context) {
            WriteStep::Preview => {}
            WriteStep::Apply(approved) => {
                if let Err(stale) = approved.check(&change) {
                    return Ok(
                        CallToolResult::error(vec![ContentBlock::text(stale.to_string())]).into(),
                    );
                }
                self.counter.fetch_add(1, Ordering::SeqCst);
            }
            WriteStep::Direct => {
                self.counter.fetch_add(1, Ordering::SeqCst);
            }
        }
        Ok(CallToolResult::structured(change).into())
    }
}

async fn bump(
    careless: bool,
    check: bool,
    answer: Reply,
) -> (i64, Vec<String>, Vec<Outcome>, String) {
    let server = Bumper {
        careless,
        ..Bumper::default()
    };
    let audit = MemorySink::new();
    let mut builder = WriteGuard::builder(server.clone())
        .writes_enabled(true)
        .preview("bump")
        .audit(Arc::new(audit.clone()));
    if check {
        builder = builder.check_previews_are_dry();
    }
    let client_handler = ScriptedClient::new();
    client_handler.script([answer]);
    let client = connect(builder.build(), Era::Legacy, client_handler.clone())
        .await
        .unwrap();
    let result = call_on(&client, "bump", json!({})).await.unwrap();
    client.cancel().await.unwrap();
    (
        server.counter.load(Ordering::SeqCst),
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
