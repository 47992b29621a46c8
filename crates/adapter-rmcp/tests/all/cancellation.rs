//! A request the client cancels after the user approved: nothing is spent, issued or applied,
//! and one record says so.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use mcp_write_guard_rmcp::{AuditRecord, AuditSink, MemorySink, Outcome};
use serde_json::json;

use crate::common::{Era, Reply, prepare_token_on, text_of};
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
    let args = json!({"name": "a", "confirmationToken": token});
    let result = h.call("delete_row", args.clone()).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let text = text_of(&result);
    assert!(text.contains("cancelled"), "{text}");
    assert!(text.contains("nothing was saved"), "{text}");
    assert_eq!(h.state().data(), before.data());
    assert_eq!(h.state().applies, 0);
    assert_eq!(h.state().previews, before.previews + 1, "no re-run either");
    let outcomes: Vec<_> = records
        .records()
        .into_iter()
        .map(|r| (r.outcome, r.reason))
        .collect();
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
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert!(!h.state().rows.contains_key("a"));
    assert_eq!(h.state().applies, 1);
}
