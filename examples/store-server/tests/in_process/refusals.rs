//! Every way the guard says no, through the real store: each refusal is a tool error, and the
//! database file is exactly what it was before.

use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::test_util::{ERAS, Reply, ScriptedClient};
use mcp_write_guard_rmcp::{Outcome, STALE_MESSAGE};
use rmcp::model::ElicitationAction;
use serde_json::{Value, json};
use workspace_tests::{
    DAMAGED_TLS_002_QUESTION, Failure, assert_refused, call, is_error, message, structured, text,
};

use crate::store::{Store, connect};

fn adjust_tls_002() -> Value {
    json!({"sku": "TLS-002", "delta": -2, "reason": "damaged in transit"})
}

/// Random, well-formed, never issued.
const FORGED_TOKEN: &str = "0b7f1f8e-6a8e-4c1e-9d55-3f1f4d1a2b3c";

#[tokio::test]
async fn writes_disabled_refuses_every_write_without_asking() -> Result<(), Failure> {
    let (store, file, before) = Store::with_snapshot()?;
    let user = ScriptedClient::answering([Reply::Approve, Reply::Approve, Reply::Approve]);
    let client = connect(store.guard(false), &user, Era::Legacy).await?;

    let writes = [
        ("adjust_stock", adjust_tls_002()),
        (
            "create_order",
            json!({"customerId": 1, "lines": [{"sku": "TLS-002", "quantity": 1}]}),
        ),
        (
            "cancel_order",
            json!({"orderId": 1, "reason": "duplicate", "confirmationToken": FORGED_TOKEN}),
        ),
        (
            "prepare_admin_action",
            json!({"tool": "cancel_order", "arguments": {"orderId": 1, "reason": "duplicate"}}),
        ),
    ];
    for (tool, arguments) in writes {
        let result = call(&client, tool, arguments).await?;
        assert_refused(&result, "nothing was saved", tool);
    }
    assert!(user.asked().is_empty());
    assert_eq!(user.unused_replies(), 3);
    assert_eq!(file.snapshot()?, before);
    assert_eq!(store.audit.decisions(), [Outcome::RefusedDisabled; 4]);

    // Reads keep working.
    let products = call(&client, "list_products", json!({})).await?;
    assert!(!is_error(&products));
    assert_eq!(structured(&products)?["products"][1]["stock"], 3);
    Ok(())
}

#[tokio::test]
async fn a_client_that_cannot_ask_its_user_cannot_write() -> Result<(), Failure> {
    for era in ERAS {
        let (store, file, before) = Store::with_snapshot()?;
        let client = connect(
            store.guard(true),
            &ScriptedClient::without_elicitation(),
            era,
        )
        .await?;

        let result = call(&client, "adjust_stock", adjust_tls_002()).await?;

        assert_refused(&result, "cannot ask", &format!("{era:?}"));
        assert_eq!(file.snapshot()?, before, "{era:?}");
        assert_eq!(store.audit.decisions(), [Outcome::RefusedNoElicitation]);
    }
    Ok(())
}

#[tokio::test]
async fn every_answer_but_accept_with_approve_true_writes_nothing() -> Result<(), Failure> {
    let cases: Vec<(fn() -> Reply, Outcome)> = vec![
        (|| Reply::Decline, Outcome::Declined),
        (|| Reply::Cancel, Outcome::Cancelled),
        (
            || Reply::Accept(json!({"approve": false})),
            Outcome::Declined,
        ),
        (|| Reply::Accept(json!({})), Outcome::Declined),
        (
            || Reply::Accept(json!({"approve": "yes"})),
            Outcome::Declined,
        ),
        (
            || Reply::Raw(ElicitationAction::Accept, None),
            Outcome::Declined,
        ),
    ];
    for era in ERAS {
        for (answer, outcome) in &cases {
            let (store, _, before) = Store::with_snapshot()?;
            let (user, client) = store.person(era, [answer()]).await?;

            let result = call(&client, "adjust_stock", adjust_tls_002()).await?;

            assert_refused(
                &result,
                "nothing was saved",
                &format!("{era:?} {outcome:?}"),
            );
            assert_eq!(user.asked().len(), 1, "{era:?} {outcome:?}");
            store.assert_stock_untouched(&before, &[*outcome], &format!("{era:?} {outcome:?}"))?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_client_that_fails_to_ask_writes_nothing() -> Result<(), Failure> {
    // Legacy: the elicitation request fails; the guard refuses.
    let (store, _, before) = Store::with_snapshot()?;
    let (_user, client) = store.person(Era::Legacy, [Reply::Fail]).await?;
    let result = call(&client, "adjust_stock", adjust_tls_002()).await?;
    assert!(is_error(&result), "{result:?}");
    assert_eq!(store.file().snapshot()?, before);
    assert_eq!(store.audit.decisions(), [Outcome::AskFailed]);

    // Input rounds: the client cannot produce an answer, so it never retries; the approval is
    // left open and nothing is written.
    let (store, _, before) = Store::with_snapshot()?;
    let (_user, client) = store.person(Era::InputRounds, [Reply::Fail]).await?;
    assert!(
        call(&client, "adjust_stock", adjust_tls_002())
            .await
            .is_err()
    );
    assert_eq!(store.file().snapshot()?, before);
    assert!(!store.audit.decisions().contains(&Outcome::Applied));
    Ok(())
}

#[tokio::test]
async fn an_answer_after_two_minutes_writes_nothing() -> Result<(), Failure> {
    for era in ERAS {
        let (store, file, before) = Store::with_snapshot()?;
        let late = Reply::late(&store.clock, time::Duration::seconds(121), Reply::Approve);
        let (_, client) = store.person(era, [late]).await?;

        let result = call(&client, "adjust_stock", adjust_tls_002()).await?;

        assert_refused(&result, "not given in time", &format!("{era:?}"));
        assert_eq!(file.snapshot()?, before, "{era:?}");
        assert_eq!(store.audit.decisions(), [Outcome::Expired], "{era:?}");
    }
    Ok(())
}

#[tokio::test]
async fn an_answer_just_inside_two_minutes_still_counts() -> Result<(), Failure> {
    for era in ERAS {
        let store = Store::new()?;
        let in_time = Reply::late(&store.clock, time::Duration::seconds(119), Reply::Approve);
        let (_, client) = store.person(era, [in_time]).await?;

        let result = call(&client, "adjust_stock", adjust_tls_002()).await?;

        assert!(!is_error(&result), "{era:?}: {result:?}");
        assert_eq!(store.file().stock("TLS-002")?, 1, "{era:?}");
        assert_eq!(store.file().movements()?.len(), 1, "{era:?}");
    }
    Ok(())
}

#[tokio::test]
async fn a_preview_that_breaks_a_business_rule_asks_nobody() -> Result<(), Failure> {
    let cases = [
        (
            "adjust_stock",
            json!({"sku": "TLS-002", "delta": -5, "reason": "damaged in transit"}),
            "TLS-002 has 3 in stock; adjusting by -5 would make it negative; nothing was changed",
        ),
        (
            "adjust_stock",
            json!({"sku": "TLS-999", "delta": 1, "reason": "found one"}),
            "unknown sku \"TLS-999\"",
        ),
        (
            "adjust_stock",
            json!({"sku": "TLS-002", "delta": 0, "reason": "nothing"}),
            "delta must be a non-zero whole number",
        ),
        (
            "adjust_stock",
            json!({"sku": "TLS-002", "delta": "two", "reason": "typo"}),
            "invalid type: string \"two\"",
        ),
        (
            "adjust_stock",
            json!({"sku": "TLS-002", "delta": -2, "reason": "x", "confirm": true}),
            "unknown field `confirm`",
        ),
        (
            "create_order",
            json!({"customerId": 2, "lines": [{"sku": "TLS-002", "quantity": 1}]}),
            "unknown customer 2",
        ),
        (
            "create_order",
            json!({"customerId": 1, "lines": []}),
            "an order needs at least one line",
        ),
        (
            "create_order",
            json!({"customerId": 1, "lines": [{"sku": "TLS-002", "quantity": -1}]}),
            "quantity for TLS-002 must be between 1 and 10000, got -1",
        ),
        (
            "create_order",
            json!({"customerId": 1, "lines": [{"sku": "TLS-002", "quantity": 4}]}),
            "TLS-002 has 3 in stock, the order asks for 4",
        ),
        (
            "create_order",
            json!({"customerId": "one", "lines": [{"sku": "TLS-002", "quantity": 1}]}),
            "invalid type: string \"one\"",
        ),
    ];
    for era in ERAS {
        let (store, file, before) = Store::with_snapshot()?;
        let (user, client) = store.person(era, []).await?;
        for (tool, arguments, expected) in &cases {
            let result = call(&client, tool, arguments.clone()).await?;
            assert!(is_error(&result), "{era:?} {tool} {arguments}: {result:?}");
            // The store's own words, inside the envelope every write result gets.
            assert!(
                message(&result).contains(expected),
                "{era:?} {tool} {arguments}: {}",
                message(&result)
            );
            assert!(text(&result).starts_with(mcp_write_guard_envelope::NOTICE_PREFIX));
        }
        assert!(user.asked().is_empty(), "{era:?}: {:?}", user.asked());
        assert_eq!(file.snapshot()?, before, "{era:?}");
        assert_eq!(
            store.audit.decisions(),
            vec![Outcome::PreviewFailed; cases.len()],
            "{era:?}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn data_that_changed_while_the_user_looked_is_not_overwritten() -> Result<(), Failure> {
    for era in ERAS {
        let store = Store::new()?;
        let file = store.file();
        let behind = file.clone();
        // While the question is open, a warehouse scanner counts TLS-002 and sets it to 5.
        let answer = Reply::after(
            move || {
                behind
                    .set_stock_behind_the_servers_back("TLS-002", 5)
                    .unwrap()
            },
            Reply::Approve,
        );
        let (user, client) = store.person(era, [answer]).await?;

        let result = call(&client, "adjust_stock", adjust_tls_002()).await?;

        assert!(is_error(&result), "{era:?}: {result:?}");
        assert_eq!(text(&result), STALE_MESSAGE);
        // The user approved "3 -> 1"; the stock is now 5 and stays 5.
        assert_eq!(user.asked(), [DAMAGED_TLS_002_QUESTION]);
        assert_eq!(file.stock("TLS-002")?, 5, "{era:?}");
        assert!(file.movements()?.is_empty(), "{era:?}");
        assert_eq!(
            store.audit.decisions(),
            [Outcome::Approved, Outcome::Stale],
            "{era:?}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn arguments_the_guard_cannot_capture_are_refused() -> Result<(), Failure> {
    let (store, _, before) = Store::with_snapshot()?;
    let (user, client) = store.person(Era::Legacy, [Reply::Approve]).await?;
    let mut deep = json!("damaged");
    for _ in 0..100 {
        deep = json!([deep]);
    }
    let result = call(
        &client,
        "adjust_stock",
        json!({"sku": "TLS-002", "delta": -2, "reason": deep}),
    )
    .await?;
    assert!(is_error(&result), "{result:?}");
    assert!(user.asked().is_empty());
    assert_eq!(store.file().snapshot()?, before);
    assert_eq!(store.audit.decisions(), [Outcome::BadArguments]);
    Ok(())
}
