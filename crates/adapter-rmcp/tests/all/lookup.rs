//! An inner server that does not answer `get_tool` and pages its tool list: the guard finds
//! each tool through `list_tools`, following the cursor to the last page, and classifies it
//! exactly as it would through `get_tool`.

use mcp_write_guard_core::token::TOKEN_REFUSAL_MESSAGE;
use mcp_write_guard_rmcp::Outcome;
use rstest_reuse::apply;
use serde_json::json;

use crate::common::{
    Connected, Era, Reply, TOKEN_FLOW_APPLIED, assert_deleted_once, both_eras, call_on,
    delete_with_token, fixture::Fixture, paged::Paged, prepare_token_on, text_of, unwrapped,
};

/// Two tools a page: `get_counter, list_rows | add_row, set_counter | delete_row`.
const PAGE_SIZE: usize = 2;

type Setup = Connected<Paged>;

impl Setup {
    async fn start(era: Era) -> Self {
        let fixture = Fixture::default();
        fixture.state.lock().rows.insert("a".into(), 1);
        let paged = Paged::new(fixture, PAGE_SIZE);
        assert_eq!(paged.pages(), 3);
        let s = Self::guarded(era, paged, |builder| builder.preview("set_counter")).await;
        assert!(
            rmcp::ServerHandler::get_tool(&s.guard, "delete_row").is_none(),
            "the inner server does not answer get_tool"
        );
        s
    }

    fn rows(&self) -> Vec<(String, i64)> {
        let state = self.server.fixture.snapshot();
        state.rows.into_iter().collect()
    }
}

#[apply(both_eras)]
async fn a_token_gated_tool_on_the_last_page_is_classified_as_a_write(era: Era) {
    let s = Setup::start(era).await;
    s.scripted.script([Reply::Approve]);
    let calls_before = s.server.list_calls();
    // `delete_row` claims to be read-only; found on page 3, it is classified by its schema as
    // token-gated, so without a token it is refused and nothing is deleted.
    let result = call_on(&s.client, "delete_row", json!({"name": "a"}))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert_eq!(text_of(&result), TOKEN_REFUSAL_MESSAGE);
    assert_eq!(s.rows(), vec![("a".to_owned(), 1)]);
    assert_eq!(s.server.fixture.snapshot().applies, 0);
    assert!(s.scripted.asked().is_empty());
    let last = s.audit.last().unwrap();
    assert_eq!(last.outcome, Outcome::TokenRejected);
    assert_eq!(last.reason.as_deref(), Some("missing"));
    assert!(
        s.server.list_calls() - calls_before >= s.server.pages(),
        "the guard read every page up to the tool"
    );
}

#[apply(both_eras)]
async fn prepare_admin_action_and_the_write_find_a_tool_on_the_last_page(era: Era) {
    let s = Setup::start(era).await;
    let token = prepare_token_on(&s.client, &s.scripted, "delete_row", json!({"name": "a"})).await;
    assert_eq!(
        s.audit.outcomes(),
        vec![Outcome::Asked, Outcome::Approved, Outcome::TokenIssued]
    );
    assert_eq!(
        s.rows(),
        vec![("a".to_owned(), 1)],
        "preparing deletes nothing"
    );

    s.scripted.script([Reply::Approve]);
    let result = call_on(&s.client, "delete_row", delete_with_token("a", &token))
        .await
        .unwrap();
    assert_deleted_once(&result, &s.server.fixture.snapshot(), "a");
    assert!(s.rows().is_empty());
    assert_eq!(s.scripted.asked().len(), 2);
    assert_eq!(s.audit.outcomes(), TOKEN_FLOW_APPLIED);

    // A tool on the last page that takes no token is still refused by prepare_admin_action.
    s.audit.clear();
    let result = s.prepare("set_counter", json!({"value": 1})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let last = s.audit.last().unwrap();
    assert_eq!(last.outcome, Outcome::BadArguments);
    assert_eq!(
        last.reason.as_deref(),
        Some("the tool \"set_counter\" does not take a confirmation token")
    );
}

#[apply(both_eras)]
async fn a_previewed_write_on_a_later_page_is_asked_and_applied(era: Era) {
    let s = Setup::start(era).await;
    s.scripted.script([Reply::Approve]);
    let result = call_on(&s.client, "set_counter", json!({"value": 7}))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let state = s.server.fixture.snapshot();
    assert_eq!(state.counter, 7);
    assert_eq!(
        state.previews, 1,
        "one preview: the apply compares in place"
    );
    assert_eq!(state.applies, 1);
    let asked = s.scripted.asked();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].contains("  (value): 0 -> 7"), "{}", asked[0]);
    assert_eq!(
        s.audit.outcomes(),
        vec![Outcome::Asked, Outcome::Approved, Outcome::Applied]
    );
}

#[apply(both_eras)]
async fn a_read_on_the_first_page_is_wrapped(era: Era) {
    let s = Setup::start(era).await;
    s.server.fixture.state.lock().counter = 4;
    let read = call_on(&s.client, "get_counter", json!({})).await.unwrap();
    assert_eq!(unwrapped(&read), json!({"counter": 4}));
    assert!(s.audit.records().is_empty(), "reads are not decisions");
}

#[apply(both_eras)]
async fn an_unknown_tool_is_looked_for_on_every_page(era: Era) {
    let s = Setup::start(era).await;
    let calls_before = s.server.list_calls();
    s.scripted.script([Reply::Approve]);
    assert!(call_on(&s.client, "no_such_tool", json!({})).await.is_err());
    assert_eq!(s.server.list_calls() - calls_before, s.server.pages());
    assert!(s.scripted.asked().is_empty());
    assert_eq!(s.server.fixture.snapshot().applies, 0);
}
