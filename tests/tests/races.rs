//! Compare-and-apply through the real store, in process, in both protocol eras: approvals
//! collected on one state and applied at once land exactly once, and a write that lands between
//! a question and its apply makes the approval stale with nothing of it saved.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use mcp_write_guard_rmcp::Outcome;
use serde_json::{Value, json};
use workspace_tests::{
    Answer, Era, Failure, Movement, ScriptedUser, Store, call, connect, enveloped_data,
    hold_approvals, is_error, race_one_stock, race_plus_one, tally,
};

/// How many approvals the model collects before it sends the applies.
const N: usize = 10;

fn plus_one() -> Value {
    race_plus_one()
}

fn count(outcomes: &[Outcome], outcome: Outcome) -> usize {
    outcomes.iter().filter(|o| **o == outcome).count()
}

#[tokio::test]
async fn ten_approvals_shown_on_one_stock_apply_exactly_once() -> Result<(), Failure> {
    for era in Era::ALL {
        let store = Store::new()?;
        let file = store.file();
        let user = ScriptedUser::answering([]);
        let client = connect(store.guard(true), &user, era).await?;

        race_one_stock(&client, &user, era, &file, N).await?;

        let outcomes = store.audit.decisions();
        assert_eq!(count(&outcomes, Outcome::Approved), N, "{era:?}");
        assert_eq!(count(&outcomes, Outcome::Applied), 1, "{era:?}");
        assert_eq!(count(&outcomes, Outcome::Stale), N - 1, "{era:?}");
        assert_eq!(outcomes.len(), 2 * N, "{era:?}: {outcomes:?}");
        client.cancel().await?;
    }
    Ok(())
}

#[tokio::test]
async fn another_connections_write_between_ask_and_apply_makes_it_stale() -> Result<(), Failure> {
    for era in Era::ALL {
        let store = Store::new()?;
        let file = store.file();
        let user = ScriptedUser::answering([]);
        let client = connect(store.guard(true), &user, era).await?;
        let other_user = ScriptedUser::answering([Answer::Approve]);
        let other = connect(store.guard(true), &other_user, era).await?;

        let held = hold_approvals(&client, &user, era, "adjust_stock", &[plus_one()]).await?;
        assert_eq!(
            held.prompts(),
            [r#"Adjust "TLS-002" by +1: stock 3 -> 4. Reason given: "race""#],
            "{era:?}"
        );
        // Meanwhile another person approves a sale of the same product on their connection.
        let sale = call(
            &other,
            "adjust_stock",
            json!({"sku": "TLS-002", "delta": -1, "reason": "sold at the counter"}),
        )
        .await?;
        assert!(!is_error(&sale), "{era:?}: {sale:?}");
        assert_eq!(file.stock("TLS-002")?, 2, "{era:?}");

        let results = held.apply_all().await?;

        let tally = tally(&results)?;
        assert!(tally.applied.is_empty(), "{era:?}: {tally:?}");
        assert_eq!(tally.stale, 1, "{era:?}: {tally:?}");
        // Nothing of the stale approval was saved: only the sale moved the stock.
        assert_eq!(file.stock("TLS-002")?, 2, "{era:?}");
        assert_eq!(
            file.movements()?,
            [Movement {
                sku: "TLS-002".into(),
                delta: -1,
                reason: "sold at the counter".into()
            }],
            "{era:?}"
        );
        assert_eq!(
            store.audit.decisions(),
            [
                Outcome::Approved,
                Outcome::Applied,
                Outcome::Approved,
                Outcome::Stale
            ],
            "{era:?}"
        );
        client.cancel().await?;
        other.cancel().await?;
    }
    Ok(())
}

#[tokio::test]
async fn an_order_priced_on_a_stock_that_changed_is_not_placed() -> Result<(), Failure> {
    for era in Era::ALL {
        let store = Store::new()?;
        let file = store.file();
        let user = ScriptedUser::answering([]);
        let client = connect(store.guard(true), &user, era).await?;
        let other_user = ScriptedUser::answering([Answer::Approve]);
        let other = connect(store.guard(true), &other_user, era).await?;
        let order = json!({"customerId": 1, "lines": [{"sku": "TLS-002", "quantity": 2}]});

        let held = hold_approvals(
            &client,
            &user,
            era,
            "create_order",
            std::slice::from_ref(&order),
        )
        .await?;
        assert_eq!(
            held.prompts(),
            [r#"Create a pending order for customer 1: 2 x "TLS-002", total $219.98"#],
            "{era:?}"
        );
        let sale = call(
            &other,
            "adjust_stock",
            json!({"sku": "TLS-002", "delta": -1, "reason": "sold at the counter"}),
        )
        .await?;
        assert!(!is_error(&sale), "{era:?}: {sale:?}");
        let before = file.snapshot()?;

        let tally = tally(&held.apply_all().await?)?;

        assert_eq!(tally.stale, 1, "{era:?}: {tally:?}");
        assert!(tally.applied.is_empty(), "{era:?}: {tally:?}");
        assert_eq!(file.snapshot()?, before, "{era:?}");
        assert_eq!(file.count("orders")?, 0, "{era:?}");
        assert_eq!(file.stock("TLS-002")?, 2, "{era:?}");
        assert_eq!(store.audit.last().unwrap().outcome, Outcome::Stale);
        client.cancel().await?;
        other.cancel().await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_write_to_another_product_in_between_does_not_make_it_stale() -> Result<(), Failure> {
    for era in Era::ALL {
        let store = Store::new()?;
        let file = store.file();
        let user = ScriptedUser::answering([]);
        let client = connect(store.guard(true), &user, era).await?;
        let other_user = ScriptedUser::answering([Answer::Approve]);
        let other = connect(store.guard(true), &other_user, era).await?;

        let held = hold_approvals(&client, &user, era, "adjust_stock", &[plus_one()]).await?;
        let elsewhere = call(
            &other,
            "adjust_stock",
            json!({"sku": "TLS-001", "delta": -1, "reason": "sold at the counter"}),
        )
        .await?;
        assert!(!is_error(&elsewhere), "{era:?}: {elsewhere:?}");

        let results = held.apply_all().await?;

        assert_eq!(results.len(), 1);
        assert!(!is_error(&results[0]), "{era:?}: {:?}", results[0]);
        assert_eq!(enveloped_data(&results[0])?["newStock"], 4, "{era:?}");
        assert_eq!(file.stock("TLS-002")?, 4, "{era:?}");
        assert_eq!(file.stock("TLS-001")?, 11, "{era:?}");
        assert_eq!(file.movements()?.len(), 2, "{era:?}");
        assert_eq!(
            store.audit.decisions(),
            [
                Outcome::Approved,
                Outcome::Applied,
                Outcome::Approved,
                Outcome::Applied
            ],
            "{era:?}"
        );
        client.cancel().await?;
        other.cancel().await?;
    }
    Ok(())
}
