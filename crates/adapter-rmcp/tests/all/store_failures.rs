//! The approval store fails: every write is refused with nothing written and one record, in both
//! protocol eras, whether the store is down from the start or goes down while the user is being
//! asked; reads keep working.

use std::sync::Arc;

use mcp_write_guard_core::Store;
use mcp_write_guard_rmcp::{Outcome, test_util::FailingStore};
use rstest_reuse::apply;
use serde_json::json;

use crate::common::{Era, Reply, both_eras, prepare_token_on, unwrapped};
use crate::wrapped::{Harness, Wrapped};

async fn start(era: Era) -> (Harness, Arc<FailingStore>) {
    let store = Arc::new(FailingStore::default());
    let dyn_store: Arc<dyn Store> = store.clone();
    let h = Harness::start(era, Wrapped::default(), |b| b.store(dyn_store)).await;
    h.server.fixture.state.lock().rows.insert("a".into(), 1);
    (h, store)
}

fn assert_store_failed(h: &Harness, reason: &str) {
    let last = h.audit.last().unwrap();
    assert_eq!(last.outcome, Outcome::StoreFailed);
    let recorded = last.reason.unwrap();
    assert!(recorded.contains(reason), "{recorded}");
}

#[apply(both_eras)]
async fn an_additive_write_is_refused_while_the_store_is_down(era: Era) {
    let (h, store) = start(era).await;
    store.set_down(true);
    let before = h.state();
    h.scripted.script([Reply::Approve]);
    let result = h.call("add_row", json!({"name": "b", "value": 2})).await;
    h.assert_refused(&result, &before, Outcome::StoreFailed);
    assert_store_failed(&h, "approval store unavailable: connection refused");
    assert_eq!(h.audit.outcomes(), vec![Outcome::StoreFailed]);
    assert!(h.scripted.asked().is_empty(), "nobody is asked");
    assert_eq!(h.state().applies, 0);
    // Reads keep working.
    let read = h.call("get_counter", json!({})).await;
    assert_eq!(unwrapped(&read), json!({"counter": 0}));
}

#[apply(both_eras)]
async fn a_token_gated_delete_is_refused_while_the_store_is_down(era: Era) {
    let (h, store) = start(era).await;
    let token = prepare_token_on(&h.client, &h.scripted, "delete_row", json!({"name": "a"})).await;
    store.set_down(true);
    h.audit.clear();
    let before = h.state();
    h.scripted.script([Reply::Approve]);
    let result = h
        .call(
            "delete_row",
            json!({"name": "a", "confirmationToken": token}),
        )
        .await;
    h.assert_refused(&result, &before, Outcome::StoreFailed);
    assert_store_failed(&h, "store");
    assert_eq!(h.audit.outcomes(), vec![Outcome::StoreFailed]);
    assert_eq!(h.scripted.asked().len(), 1, "only the intent was asked");
    assert_eq!(h.state().rows.get("a"), Some(&1));
    assert_eq!(h.state().applies, 0);
}

#[apply(both_eras)]
async fn prepare_admin_action_is_refused_while_the_store_is_down(era: Era) {
    let (h, store) = start(era).await;
    store.set_down(true);
    h.assert_preparing_refused_unasked(Outcome::StoreFailed)
        .await;
    assert_store_failed(&h, "approval store unavailable");
}

#[apply(both_eras)]
async fn a_store_that_fails_while_the_user_is_asked_writes_nothing(era: Era) {
    let (h, store) = start(era).await;
    let before = h.state();
    let down = Arc::clone(&store);
    h.scripted
        .script([Reply::after(move || down.set_down(true), Reply::Approve)]);
    let result = h.call("add_row", json!({"name": "b", "value": 2})).await;
    h.assert_refused(&result, &before, Outcome::StoreFailed);
    assert_store_failed(&h, "store");
    assert_eq!(
        h.audit.outcomes(),
        vec![Outcome::Asked, Outcome::StoreFailed]
    );
    assert_eq!(h.scripted.asked().len(), 1);
    assert_eq!(h.state().applies, 0);

    // Back up: the same write, asked anew, goes through once.
    store.set_down(false);
    h.scripted.script([Reply::Approve]);
    let result = h.call("add_row", json!({"name": "b", "value": 2})).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(h.state().rows.get("b"), Some(&2));
    assert_eq!(h.state().applies, 1);
}
