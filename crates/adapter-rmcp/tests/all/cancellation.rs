//! A request the client cancels after the user approved: nothing is spent, issued or applied,
//! and one record says so.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use mcp_write_guard_rmcp::{AuditRecord, AuditSink, MemorySink, Outcome};
use serde_json::json;

use crate::common::{
    Era, Reply, assert_row_deleted, delete_with_token, outcomes_and_reasons, prepare_token_on,
    text_of,
};
use crate::wrapped::{Harness, Knobs, Wrapped};

/// Records like a [`MemorySink`] and, once armed, cancels the request whose preview ran last
/// when the user's approval is recorded: the cancellation arrives between the approval and the
/// apply.
struct CancelOnApproval {
    records: MemorySink,
    knobs: Arc<Knobs>,
    armed: AtomicBool,
}

impl AuditSink for CancelOnApproval {
    fn record(&self, record: &AuditRecord) {
        self.records.record(record);
        if record.outcome == Outcome::Approved && self.armed.load(Ordering::SeqCst) {
            self.knobs.cancel_last_previewed_request();
        }
    }
}

/// Below 2026-07-28 the question and the apply belong to one request, whose preview ran before
/// asking: the sink cancels it the moment the approval is recorded, before the token is spent.
#[tokio::test]
async fn cancelled_after_approval_spends_no_token_and_deletes_nothing() {
    let server = Wrapped::default();
    let records = MemorySink::new();
    let sink = Arc::new(CancelOnApproval {
        records: records.clone(),
        knobs: Arc::clone(&server.knobs),
        armed: AtomicBool::new(false),
    });
    let audit: Arc<dyn AuditSink> = sink.clone();
    let h = Harness::start(Era::Legacy, server, |b| {
        b.preview("delete_row").audit(audit)
    })
    .await;
    h.server.fixture.state.lock().rows.insert("a".into(), 1);
    let token = prepare_token_on(&h.client, &h.scripted, "delete_row", json!({"name": "a"})).await;
    records.clear();
    sink.armed.store(true, Ordering::SeqCst);

    let before = h.state();
    h.scripted.script([Reply::Approve]);
    let args = delete_with_token("a", &token);
    let result = h.call("delete_row", args.clone()).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let text = text_of(&result);
    assert!(text.contains("cancelled"), "{text}");
    assert!(text.contains("nothing was saved"), "{text}");
    assert_eq!(h.state().data(), before.data());
    assert_eq!(h.state().applies, 0);
    assert_eq!(h.state().previews, before.previews + 1, "no re-run either");
    let outcomes = outcomes_and_reasons(&records);
    assert_eq!(
        outcomes,
        vec![
            (Outcome::Asked, None),
            (Outcome::Approved, None),
            (
                Outcome::RequestCancelled,
                Some("the request was cancelled after approval".to_owned())
            ),
        ]
    );

    // The token was not spent: the same call, approved and not cancelled, deletes the row.
    sink.armed.store(false, Ordering::SeqCst);
    h.scripted.script([Reply::Approve]);
    let result = h.call("delete_row", args).await;
    assert_row_deleted(&result, &h.state(), "a");
    assert_eq!(h.state().applies, 1);
}

/// A read tool that never answers on its own, and says when its call was dropped.
#[derive(Clone, Default)]
struct Hanging {
    dropped: Arc<tokio::sync::Notify>,
}

/// Notifies when the call's future is dropped.
struct OnDrop(Arc<tokio::sync::Notify>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

impl rmcp::ServerHandler for Hanging {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .build(),
        )
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        (name == "slow_read").then(|| {
            rmcp::model::Tool::new("slow_read", "A read that never ends", Arc::default())
                .with_annotations(rmcp::model::ToolAnnotations::new().read_only(true))
        })
    }

    async fn call_tool(
        &self,
        _request: rmcp::model::CallToolRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        // Ignores its cancellation token, as many handlers do.
        let _on_drop = OnDrop(Arc::clone(&self.dropped));
        std::future::pending().await
    }
}

/// A read the client cancelled is dropped by the guard, even when the inner handler ignores
/// its cancellation: nobody reads its answer, and a transport that bounds the requests in
/// flight has already freed its place (so a client cancelling call after call cannot pile up
/// work).
#[tokio::test]
async fn a_cancelled_read_is_dropped_even_if_the_inner_handler_ignores_it() {
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
    let inner = Hanging::default();
    let dropped = Arc::clone(&inner.dropped);
    let guard = mcp_write_guard_rmcp::WriteGuard::builder(inner).build();
    let client = mcp_write_guard_rmcp::test_util::connect(
        guard,
        mcp_write_guard_rmcp::Era::Legacy,
        crate::common::SilentClient::default(),
    )
    .await
    .unwrap();
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new(
                "slow_read",
            ))),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let was_dropped = dropped.notified();
    // The call is running (not dropped) until it is cancelled.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    handle
        .cancel(Some("the user gave up".into()))
        .await
        .unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(5), was_dropped)
        .await
        .expect("the inner call is dropped once the request is cancelled");
}
