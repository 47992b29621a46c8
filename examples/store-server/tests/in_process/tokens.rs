//! `cancel_order` is token-gated: `prepare_admin_action` asks the user and issues a one-time
//! token bound to the exact arguments; the cancellation then asks again. Every misuse is
//! refused and the order and its stock stay as they were.

use mcp_write_guard_core::token::TOKEN_REFUSAL_MESSAGE;
use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::test_util::{ERAS, Reply, ScriptedClient};
use mcp_write_guard_rmcp::{Outcome, PREPARE_ADMIN_ACTION};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use store_server::{CancelOrderArgs, Mode};
use workspace_tests::{
    Failure, Movement, Snapshot, call, cancel_args, cancel_order_token, enveloped_data, is_error,
    message, text,
};

use crate::store::{Store, connect};

const REASON: &str = "customer changed their mind";

/// An audit outcome with its reason.
type Decision = (Outcome, Option<String>);

/// Builds a `cancel_order` call from (first order, second order, token).
type Misuse = fn(i64, i64, &str) -> Value;

/// The last audit record's outcome and reason.
fn last_decision(store: &Store) -> Decision {
    let record = store.audit.last().expect("an audit record");
    (record.outcome, record.reason)
}

fn token_rejected(reason: &str) -> Decision {
    (Outcome::TokenRejected, Some(reason.to_owned()))
}

/// Asserts that `result` is the token refusal, that the file is as `before`, and that the last
/// audit record is `expected`; `what` names the case in failure messages.
fn assert_token_refused(
    store: &Store,
    result: &CallToolResult,
    before: &Snapshot,
    expected: Decision,
    what: &str,
) -> Result<(), Failure> {
    assert!(is_error(result), "{what}: {result:?}");
    assert_eq!(text(result), TOKEN_REFUSAL_MESSAGE, "{what}");
    assert_eq!(store.file().snapshot()?, *before, "{what}");
    assert_eq!(last_decision(store), expected, "{what}");
    Ok(())
}

#[tokio::test]
async fn two_approvals_cancel_the_order_and_put_the_stock_back() -> Result<(), Failure> {
    for era in ERAS {
        let (store, file, order) = Store::with_an_order_placed()?;
        assert_eq!(file.stock("TLS-002")?, 2);
        let (user, client) = store.person(era, [Reply::Approve, Reply::Approve]).await?;

        // First approval: the intent. Nothing changes yet.
        let token = cancel_order_token(&client, order, REASON).await?;
        assert_eq!(
            file.order_status(order)?.as_deref(),
            Some("pending"),
            "{era:?}"
        );
        assert_eq!(file.stock("TLS-002")?, 2);
        // The intent question is worded from the cancellation's preview: the order, the
        // customer, the lines, the total and the reason, after the sentence that says a token
        // is being prepared.
        let intent = user.asked()[0].clone();
        assert!(
            intent.starts_with(
                "Allow preparing an admin action? It issues a one-time confirmation token for \
                 tool cancel_order with exactly these arguments; the action itself will ask you \
                 again before it runs.\n"
            ),
            "{intent}"
        );
        assert!(
            intent.contains(r#"Cancel order 1 for customer 1 ("Harbor Street Garage")"#),
            "{intent}"
        );
        assert!(intent.contains(r#"1 x "TLS-002""#), "{intent}");
        assert!(intent.contains("total $109.99"), "{intent}");
        assert!(
            intent.contains(&format!("Reason given: \"{REASON}\"")),
            "{intent}"
        );

        // Second approval: the act, worded from the database.
        let result = call(&client, "cancel_order", cancel_args(order, REASON, &token)).await?;
        assert!(!is_error(&result), "{era:?}: {result:?}");
        assert_eq!(
            user.asked()[1],
            "Cancel order 1 for customer 1 (\"Harbor Street Garage\"): 1 x \"TLS-002\", total \
             $109.99. Stock goes back: \"TLS-002\" 2 -> 3. Reason given: \"customer changed their \
             mind\""
        );
        assert!(
            intent.ends_with(&format!("\n{}", user.asked()[1])),
            "the intent asks in the act's words: {intent}"
        );
        let data = enveloped_data(&result)?;
        assert_eq!(data["status"], "cancelled");
        assert_eq!(data["lines"][0]["newStock"], 3);

        assert_eq!(file.order_status(order)?.as_deref(), Some("cancelled"));
        assert_eq!(file.stock("TLS-002")?, 3);
        assert_eq!(
            file.movements()?,
            [
                Movement {
                    sku: "TLS-002".into(),
                    delta: -1,
                    reason: "order 1 created".into()
                },
                Movement {
                    sku: "TLS-002".into(),
                    delta: 1,
                    reason: format!("order 1 cancelled: {REASON}")
                },
            ]
        );
        assert_eq!(
            store.audit.decisions(),
            [
                Outcome::Approved,
                Outcome::TokenIssued,
                Outcome::Approved,
                Outcome::Applied
            ],
            "{era:?}"
        );

        // Single use: the same call again is refused and nothing moves.
        let before = file.snapshot()?;
        let again = call(&client, "cancel_order", cancel_args(order, REASON, &token)).await?;
        let case = format!("{era:?}");
        assert_token_refused(
            &store,
            &again,
            &before,
            token_rejected("already-spent"),
            &case,
        )?;
        assert_eq!(user.asked().len(), 2, "{era:?}: the replay asked nobody");
    }
    Ok(())
}

#[tokio::test]
async fn a_missing_or_malformed_token_is_refused_before_anyone_is_asked() -> Result<(), Failure> {
    let (store, _, order, before) = Store::with_an_order()?;
    let user = ScriptedClient::answering([Reply::Approve, Reply::Approve, Reply::Approve]);
    let client = store.connect(&user).await?;

    let attempts = [
        json!({"orderId": order, "reason": REASON}),
        json!({"orderId": order, "reason": REASON, "confirmationToken": null}),
        json!({"orderId": order, "reason": REASON, "confirmationToken": "let-me-in"}),
        json!({"orderId": order, "reason": REASON, "confirmationToken": 42}),
    ];
    for arguments in attempts {
        let result = call(&client, "cancel_order", arguments.clone()).await?;
        assert!(is_error(&result), "{arguments}");
        assert_eq!(text(&result), TOKEN_REFUSAL_MESSAGE, "{arguments}");
    }
    assert!(user.asked().is_empty());
    assert_eq!(store.file().snapshot()?, before);
    let reasons: Vec<_> = store
        .audit
        .records()
        .into_iter()
        .map(|r| (r.outcome, r.reason))
        .collect();
    assert_eq!(
        reasons,
        [
            token_rejected("missing"),
            token_rejected("malformed"),
            token_rejected("malformed"),
            token_rejected("malformed")
        ]
    );
    Ok(())
}

#[tokio::test]
async fn a_token_is_bound_to_its_exact_arguments_and_misuse_asks_nobody() -> Result<(), Failure> {
    let store = Store::new()?;
    let file = store.file();
    let first = store.order("TLS-002", 1)?;
    let second = store.order("TLS-002", 1)?;
    let before = file.snapshot()?;
    let forged = "0b7f1f8e-6a8e-4c1e-9d55-3f1f4d1a2b3c";
    // Each attempt below gets a fresh token for (first, REASON) and misuses it.
    let misuses: [(&str, Misuse, Decision); 4] = [
        (
            "other order",
            |_, second, token| cancel_args(second, REASON, token),
            token_rejected("other-arguments"),
        ),
        (
            "other reason",
            |first, _, token| cancel_args(first, "found a cheaper one", token),
            token_rejected("other-arguments"),
        ),
        (
            "extra argument",
            |first, _, token| json!({"orderId": first, "reason": REASON, "confirmationToken": token, "force": true}),
            token_rejected("other-arguments"),
        ),
        (
            "forged token",
            |first, _, _| cancel_args(first, REASON, "0b7f1f8e-6a8e-4c1e-9d55-3f1f4d1a2b3c"),
            token_rejected("unknown"),
        ),
    ];
    for (what, misuse, expected) in misuses {
        // One answer for the intent; a second one would only be used if the misuse got as far
        // as asking, which it must not.
        let user = ScriptedClient::answering([Reply::Approve, Reply::Approve]);
        let client = store.connect(&user).await?;
        let token = cancel_order_token(&client, first, REASON).await?;
        assert_ne!(token, forged);

        let result = call(&client, "cancel_order", misuse(first, second, &token)).await?;

        assert_token_refused(&store, &result, &before, expected, what)?;
        assert_eq!(user.asked().len(), 1, "{what}: only the intent was asked");
        assert!(
            !store.audit.decisions().contains(&Outcome::Applied),
            "{what}: {:?}",
            store.audit.decisions()
        );
    }
    // Neither order was touched.
    assert_eq!(file.order_status(first)?.as_deref(), Some("pending"));
    assert_eq!(file.order_status(second)?.as_deref(), Some("pending"));
    assert_eq!(file.stock("TLS-002")?, 1);
    Ok(())
}

#[tokio::test]
async fn a_token_cannot_be_spent_twice_even_when_the_first_use_did_not_apply() -> Result<(), Failure>
{
    let (store, file, order) = Store::with_an_order_placed()?;
    let behind = file.clone();
    let user = ScriptedClient::answering([
        Reply::Approve,
        // The user approves the cancellation, but the stock changes while they look: the guard
        // spends the token, and the cancellation, comparing inside its own transaction, finds
        // a different restock and rolls back.
        Reply::after(
            move || {
                behind
                    .set_stock_behind_the_servers_back("TLS-002", 7)
                    .unwrap()
            },
            Reply::Approve,
        ),
        Reply::Approve,
    ]);
    let client = store.connect(&user).await?;
    let token = cancel_order_token(&client, order, REASON).await?;

    let stale = call(&client, "cancel_order", cancel_args(order, REASON, &token)).await?;
    assert!(is_error(&stale));
    assert_eq!(text(&stale), mcp_write_guard_rmcp::STALE_MESSAGE);
    let before = file.snapshot()?;

    let replay = call(&client, "cancel_order", cancel_args(order, REASON, &token)).await?;

    assert_token_refused(
        &store,
        &replay,
        &before,
        token_rejected("already-spent"),
        "replay",
    )?;
    assert_eq!(user.asked().len(), 2, "the replay asked nobody");
    assert_eq!(user.unused_replies(), 1);
    assert_eq!(file.order_status(order)?.as_deref(), Some("pending"));
    assert_eq!(file.stock("TLS-002")?, 7);
    Ok(())
}

#[tokio::test]
async fn a_token_expires_after_five_minutes() -> Result<(), Failure> {
    let (store, file, order) = Store::with_an_order_placed()?;
    let user = ScriptedClient::answering([Reply::Approve, Reply::Approve]);
    let client = store.connect(&user).await?;
    let token = cancel_order_token(&client, order, REASON).await?;
    let before = file.snapshot()?;

    store.clock.advance(time::Duration::seconds(301));
    let result = call(&client, "cancel_order", cancel_args(order, REASON, &token)).await?;

    assert_token_refused(
        &store,
        &result,
        &before,
        token_rejected("expired"),
        "expired",
    )?;
    assert_eq!(user.asked().len(), 1, "only the intent was asked");
    Ok(())
}

#[tokio::test]
async fn a_token_is_bound_to_the_connection_that_asked_for_it() -> Result<(), Failure> {
    let (store, file, order) = Store::with_an_order_placed()?;
    // One guard (one approval store), two connections: two principals.
    let guard = store.guard(true);
    let alice = ScriptedClient::answering([Reply::Approve]);
    let mallory = ScriptedClient::answering([Reply::Approve]);
    let alice_client = connect(guard.clone(), &alice, Era::Legacy).await?;
    let mallory_client = connect(guard.clone(), &mallory, Era::Legacy).await?;
    let token = cancel_order_token(&alice_client, order, REASON).await?;
    let before = file.snapshot()?;

    let result = call(
        &mallory_client,
        "cancel_order",
        cancel_args(order, REASON, &token),
    )
    .await?;

    let expected = token_rejected("other-principal");
    assert_token_refused(&store, &result, &before, expected, "mallory")?;
    assert!(mallory.asked().is_empty());
    assert_eq!(alice.asked().len(), 1);
    Ok(())
}

#[tokio::test]
async fn declining_the_intent_issues_no_token() -> Result<(), Failure> {
    let (store, _, order, before) = Store::with_an_order()?;
    let user = ScriptedClient::answering([Reply::Decline]);
    let client = store.connect(&user).await?;

    let result = call(
        &client,
        PREPARE_ADMIN_ACTION,
        json!({"tool": "cancel_order", "arguments": {"orderId": order, "reason": REASON}}),
    )
    .await?;

    assert!(is_error(&result));
    assert!(!text(&result).contains("confirmationToken"));
    assert!(result.structured_content.is_none());
    assert_eq!(store.file().snapshot()?, before);
    assert_eq!(store.audit.decisions(), [Outcome::Declined]);
    Ok(())
}

#[tokio::test]
async fn an_order_that_is_not_pending_cannot_be_prepared_and_nobody_is_asked() -> Result<(), Failure>
{
    for era in ERAS {
        let store = Store::new()?;
        let order = store.order("TLS-002", 1)?;
        let cancelled = CancelOrderArgs {
            order_id: order,
            reason: REASON.into(),
            confirmation_token: None,
        };
        store.db.cancel_order(&cancelled, Mode::Apply)?;
        let before = store.file().snapshot()?;
        let (user, client) = store.person(era, [Reply::Approve]).await?;

        let result = call(
            &client,
            PREPARE_ADMIN_ACTION,
            json!({"tool": "cancel_order", "arguments": {"orderId": order, "reason": REASON}}),
        )
        .await?;

        assert!(is_error(&result), "{era:?}: {result:?}");
        // The store's own words, in the envelope, as a failed preview of cancel_order itself.
        assert_eq!(
            message(&result),
            format!(
                "order {order} is cancelled, only a pending order can be cancelled; nothing was \
                 changed"
            ),
            "{era:?}"
        );
        assert!(result.structured_content.is_none(), "{era:?}: no token");
        assert!(user.asked().is_empty(), "{era:?}: {:?}", user.asked());
        assert_eq!(store.file().snapshot()?, before, "{era:?}");
        assert_eq!(
            last_decision(&store),
            (Outcome::PreviewFailed, Some("preview failed".to_owned())),
            "{era:?}"
        );
        assert_eq!(store.audit.decisions(), [Outcome::PreviewFailed], "{era:?}");
    }
    Ok(())
}

#[tokio::test]
async fn only_token_gated_tools_can_be_prepared() -> Result<(), Failure> {
    let (store, _, before) = Store::with_snapshot()?;
    let (user, client) = store.person(Era::Legacy, [Reply::Approve]).await?;

    let result = call(
        &client,
        PREPARE_ADMIN_ACTION,
        json!({"tool": "adjust_stock", "arguments": {"sku": "TLS-002", "delta": -3, "reason": "x"}}),
    )
    .await?;

    assert!(is_error(&result));
    assert!(user.asked().is_empty());
    assert_eq!(store.file().snapshot()?, before);
    Ok(())
}
