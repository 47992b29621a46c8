//! Token-gated tools and `prepare_admin_action`, in both protocol eras: every way a token can
//! be wrong is refused with nothing written and one audit record naming the reason.

use mcp_write_guard_core::token::TOKEN_REFUSAL_MESSAGE;
use mcp_write_guard_rmcp::{Outcome, PREPARE_ADMIN_ACTION};
use rstest_reuse::apply;
use serde_json::{Value, json};

use crate::common::{
    Era, Harness, Reply, TOKEN_FLOW_APPLIED, assert_deleted_once, assert_row_deleted, both_eras,
    delete_with_token, prepare_token_on, text_of,
};

async fn with_rows(era: Era) -> Harness {
    let h = Harness::start(era).await;
    {
        let mut state = h.fixture.state.lock();
        state.rows.insert("a".into(), 1);
        state.rows.insert("b".into(), 2);
    }
    h
}

fn refusal_text_is_the_token_message(result: &rmcp::model::CallToolResult) {
    assert_eq!(text_of(result), TOKEN_REFUSAL_MESSAGE);
}

/// Calls `delete_row` with `arguments` (the person would approve): the call is refused as
/// `TokenRejected` for `reason`, with the token message, before anyone is asked and with nothing
/// changed (the audit holds just the refusal).
async fn delete_is_refused_unasked(h: &Harness, arguments: Value, reason: &str) {
    let before = h.state();
    let asked_before = h.asked().len();
    h.audit.clear();
    let result = h.approve_and_call("delete_row", arguments).await;
    h.assert_refused(&result, &before, Outcome::TokenRejected, Some(reason));
    refusal_text_is_the_token_message(&result);
    assert_eq!(
        h.asked().len(),
        asked_before,
        "refused before the user was asked"
    );
}

#[apply(both_eras)]
async fn the_full_admin_flow_asks_twice_and_deletes_once(era: Era) {
    let h = with_rows(era).await;
    let token = h.prepare_token("delete_row", json!({"name": "a"})).await;
    assert_eq!(
        h.outcomes(),
        vec![Outcome::Asked, Outcome::Approved, Outcome::TokenIssued]
    );
    let intent = &h.asked()[0];
    assert!(intent.contains("delete_row"), "{intent}");
    assert!(intent.contains("name: \"a\""), "{intent}");
    // delete_row has not opted in to previews here: the question shows no preview, none ran.
    assert!(!intent.contains("What changes:"), "{intent}");
    assert_eq!(h.state().previews, 0);
    assert_eq!(h.state().applies, 0, "preparing is not deleting");

    let result = h
        .approve_and_call("delete_row", delete_with_token("a", &token))
        .await;
    assert_deleted_once(&result, &h.state(), "a");
    assert_eq!(
        h.asked().len(),
        2,
        "two human approvals: the intent, then the act"
    );
    let act = &h.asked()[1];
    assert!(
        !act.contains(&token),
        "the prompt does not show the token: {act}"
    );
    assert_eq!(h.outcomes(), TOKEN_FLOW_APPLIED);
}

#[apply(both_eras)]
async fn a_missing_token_is_refused_without_asking(era: Era) {
    let h = with_rows(era).await;
    delete_is_refused_unasked(&h, json!({"name": "a"}), "missing").await;
    assert!(h.asked().is_empty());
}

#[apply(both_eras)]
async fn a_malformed_token_is_refused_without_asking(era: Era) {
    let h = with_rows(era).await;
    let malformed = json!({"name": "a", "confirmationToken": "please"});
    delete_is_refused_unasked(&h, malformed, "malformed").await;
    assert!(h.asked().is_empty());
}

#[apply(both_eras)]
async fn a_forged_token_is_refused_without_asking(era: Era) {
    let h = with_rows(era).await;
    // Well-formed, but never issued.
    let forged = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
    delete_is_refused_unasked(
        &h,
        json!({"name": "a", "confirmationToken": forged}),
        "unknown",
    )
    .await;
    assert!(
        h.asked().is_empty(),
        "a bad token is refused before the user is asked"
    );
}

#[apply(both_eras)]
async fn a_token_for_other_arguments_is_refused_without_asking(era: Era) {
    let h = with_rows(era).await;
    let token = h.prepare_token("delete_row", json!({"name": "a"})).await;
    delete_is_refused_unasked(&h, delete_with_token("b", &token), "other-arguments").await;
    assert!(h.state().rows.contains_key("b"));
}

#[apply(both_eras)]
async fn a_token_for_another_principal_is_refused_without_asking(era: Era) {
    let h = with_rows(era).await;
    let (other, other_scripted) = h.second_connection().await;
    let token = prepare_token_on(&other, &other_scripted, "delete_row", json!({"name": "a"})).await;
    delete_is_refused_unasked(&h, delete_with_token("a", &token), "other-principal").await;
    let records = h.audit.records();
    let issued_to = &records[0].principal;
    assert!(issued_to.is_some());
}

#[apply(both_eras)]
async fn a_token_at_300_seconds_is_refused_without_asking(era: Era) {
    let h = with_rows(era).await;
    let token = h.prepare_token("delete_row", json!({"name": "a"})).await;
    h.clock.advance(time::Duration::seconds(300));
    delete_is_refused_unasked(&h, delete_with_token("a", &token), "expired").await;

    // At 299 s a fresh token still works.
    let token = h.prepare_token("delete_row", json!({"name": "a"})).await;
    h.clock.advance(time::Duration::seconds(299));
    h.assert_token_deletes_row_a(&token).await;
}

#[apply(both_eras)]
async fn a_reused_token_is_refused_without_asking(era: Era) {
    let h = with_rows(era).await;
    let token = h.prepare_token("delete_row", json!({"name": "a"})).await;
    let args = delete_with_token("a", &token);
    let first = h.approve_and_call("delete_row", args.clone()).await;
    assert_ne!(first.is_error, Some(true), "{first:?}");
    // The row comes back; the spent token must not delete it again.
    h.fixture.state.lock().rows.insert("a".into(), 1);
    delete_is_refused_unasked(&h, args, "already-spent").await;
    assert!(h.state().rows.contains_key("a"));
}

/// Two identical calls with one token at once are one question (same principal, tool and
/// arguments): one applies and spends the token; the other is refused, either because the
/// approval was used (it shared the question) or because the token was spent.
#[apply(both_eras)]
async fn a_token_spent_twice_at_once_applies_once(era: Era) {
    let h = with_rows(era).await;
    let token = h.prepare_token("delete_row", json!({"name": "a"})).await;
    h.audit.clear();
    let args = delete_with_token("a", &token);
    h.script([Reply::Approve, Reply::Approve]);
    let (one, two) = tokio::join!(
        h.call("delete_row", args.clone()),
        h.call("delete_row", args.clone())
    );
    let errors = [&one, &two]
        .iter()
        .filter(|r| r.is_error == Some(true))
        .count();
    assert_eq!(errors, 1, "{one:?} {two:?}");
    assert_eq!(h.state().applies, 1, "the inner tool applied exactly once");
    let outcomes = h.outcomes();
    assert_eq!(
        outcomes.iter().filter(|o| **o == Outcome::Applied).count(),
        1
    );
    let refused: Vec<_> = h
        .audit
        .records()
        .into_iter()
        .filter(|r| matches!(r.outcome, Outcome::TokenRejected | Outcome::AlreadyUsed))
        .collect();
    assert_eq!(refused.len(), 1, "{outcomes:?}");
    if refused[0].outcome == Outcome::TokenRejected {
        assert_eq!(refused[0].reason.as_deref(), Some("already-spent"));
    }
}

#[apply(both_eras)]
async fn a_token_is_not_spent_when_the_user_declines(era: Era) {
    let h = with_rows(era).await;
    let token = h.prepare_token("delete_row", json!({"name": "a"})).await;
    let args = delete_with_token("a", &token);
    let before = h.state();
    h.audit.clear();
    h.script([Reply::Decline]);
    let declined = h.call("delete_row", args.clone()).await;
    h.assert_refused(&declined, &before, Outcome::Declined, Some("declined"));
    // The user changes their mind within five minutes: the same token still works once.
    let approved = h.approve_and_call("delete_row", args).await;
    assert_row_deleted(&approved, &h.state(), "a");
}

#[apply(both_eras)]
async fn prepare_admin_action_refuses_tools_without_tokens(era: Era) {
    let h = with_rows(era).await;
    let before = h.state();
    h.script([Reply::Approve]);
    // The arguments are read by serde into one struct that denies unknown fields.
    let unfit = |error: &str| {
        format!(
            "its arguments must be exactly `tool` (a tool's name) and `arguments` (an object), \
             and were not ({error})"
        )
    };
    for (args, reason) in [
        (
            json!({"tool": "set_counter", "arguments": {"value": 1}}),
            "the tool \"set_counter\" does not take a confirmation token".to_owned(),
        ),
        (
            json!({"tool": "no_such_tool", "arguments": {}}),
            "the tool \"no_such_tool\" does not take a confirmation token".to_owned(),
        ),
        (
            json!({"tool": "delete_row", "arguments": "a"}),
            unfit("invalid type: string \"a\", expected a map"),
        ),
        (
            json!({"tool": "delete_row"}),
            unfit("missing field `arguments`"),
        ),
        (
            json!({"tool": 7, "arguments": {"name": "a"}}),
            unfit("invalid type: integer `7`, expected a string"),
        ),
        (
            json!({"arguments": {"name": "a"}}),
            unfit("missing field `tool`"),
        ),
        (
            json!({"tool": "delete_row", "arguments": {"name": "a"}, "extra": true}),
            unfit("unknown field `extra`, expected `tool` or `arguments`"),
        ),
    ] {
        h.audit.clear();
        let result = h.call(PREPARE_ADMIN_ACTION, args.clone()).await;
        h.assert_refused(&result, &before, Outcome::BadArguments, Some(&reason));
        assert!(result.structured_content.is_none(), "{args}");
    }
    assert!(h.asked().is_empty());
}

#[apply(both_eras)]
async fn prepare_admin_action_declined_issues_nothing(era: Era) {
    let h = with_rows(era).await;
    h.assert_preparing_refused(Reply::Decline, Outcome::Declined, Some("declined"))
        .await;
}
