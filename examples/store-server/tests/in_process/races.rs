//! Compare-and-apply through the real store, in process, in both protocol eras: approvals
//! collected on one state and applied at once land exactly once, and a write that lands between
//! a question and its apply makes the approval stale with nothing of it saved.

use mcp_write_guard_rmcp::test_util::{ERAS, ScriptedClient};
use mcp_write_guard_rmcp::{Era, Outcome};
use serde_json::{Value, json};
use workspace_tests::{
    Client, Failure, FileView, RACE_PLUS_ONE_PROMPT, counter_sale, enveloped_data, hold_approvals,
    is_error, race_one_stock, race_plus_one, sell_one, tally,
};

use crate::store::Store;

/// How many approvals the model collects before it sends the applies.
const N: usize = 10;

fn plus_one() -> Value {
    race_plus_one()
}

fn count(outcomes: &[Outcome], outcome: Outcome) -> usize {
    outcomes.iter().filter(|o| **o == outcome).count()
}

/// A fresh store, an outside observer of its file, and two people on it in `era` (see
/// [`Store::with_another_person`]): the person whose approvals a test holds with their client,
/// and the other person's client, which writes in between.
async fn two_people(
    era: Era,
) -> Result<(Store, FileView, ScriptedClient, Client, Client), Failure> {
    let store = Store::new()?;
    let file = store.file();
    let (user, client, other) = store.with_another_person(era).await?;
    Ok((store, file, user, client, other))
}

#[tokio::test]
async fn ten_approvals_shown_on_one_stock_apply_exactly_once() -> Result<(), Failure> {
    for era in ERAS {
        let store = Store::new()?;
        let file = store.file();
        let (user, client) = store.person(era, []).await?;

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
    for era in ERAS {
        let (store, file, user, client, other) = two_people(era).await?;

        let held = hold_approvals(&client, &user, era, "adjust_stock", &[plus_one()]).await?;
        assert_eq!(held.prompts(), [RACE_PLUS_ONE_PROMPT], "{era:?}");
        // Meanwhile another person approves a sale of the same product on their connection.
        sell_one(&other, "TLS-002").await?;
        assert_eq!(file.stock("TLS-002")?, 2, "{era:?}");

        let results = held.apply_all().await?;

        let tally = tally(&results)?;
        assert!(tally.applied.is_empty(), "{era:?}: {tally:?}");
        assert_eq!(tally.stale, 1, "{era:?}: {tally:?}");
        // Nothing of the stale approval was saved: only the sale moved the stock.
        assert_eq!(file.stock("TLS-002")?, 2, "{era:?}");
        assert_eq!(file.movements()?, [counter_sale("TLS-002")], "{era:?}");
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
    for era in ERAS {
        let (store, file, user, client, other) = two_people(era).await?;
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
        sell_one(&other, "TLS-002").await?;
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
    for era in ERAS {
        let (store, file, user, client, other) = two_people(era).await?;

        let held = hold_approvals(&client, &user, era, "adjust_stock", &[plus_one()]).await?;
        sell_one(&other, "TLS-001").await?;

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
