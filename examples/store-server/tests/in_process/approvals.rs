//! Approved writes through the real store: the exact questions, the results, and the rows on
//! disk.

use mcp_write_guard_rmcp::test_util::{ERAS, Reply, ScriptedClient};
use mcp_write_guard_rmcp::{Era, Outcome};
use serde_json::json;
use workspace_tests::{Failure, Movement, call, enveloped_data, is_error, structured, text};

use crate::store::Store;

#[tokio::test]
async fn create_order_asks_with_the_priced_order_and_lands_once() -> Result<(), Failure> {
    for era in ERAS {
        let (store, user, _client, result) = Store::called(
            era,
            [Reply::Approve],
            "create_order",
            json!({"customerId": 1, "lines": [{"sku": "TLS-002", "quantity": 1}]}),
        )
        .await?;
        let file = store.file();

        assert!(!is_error(&result), "{era:?}: {result:?}");
        assert_eq!(
            user.asked(),
            [r#"Create a pending order for customer 1: 1 x "TLS-002", total $109.99"#]
        );
        let data = enveloped_data(&result)?;
        assert_eq!(data["orderId"], 1);
        assert_eq!(data["status"], "pending");
        assert_eq!(data["total"], "$109.99");
        assert_eq!(data["totalCents"], 10999);
        assert_eq!(data["lines"][0]["previousStock"], 3);
        assert_eq!(data["lines"][0]["newStock"], 2);

        assert_eq!(file.order_status(1)?.as_deref(), Some("pending"));
        assert_eq!(file.count("orders")?, 1);
        assert_eq!(file.count("order_lines")?, 1);
        assert_eq!(file.stock("TLS-002")?, 2);
        assert_eq!(
            file.movements()?,
            [Movement {
                sku: "TLS-002".into(),
                delta: -1,
                reason: "order 1 created".into()
            }]
        );
        assert_eq!(
            store.audit.decisions(),
            [Outcome::Approved, Outcome::Applied]
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_multi_line_order_is_worded_line_by_line() -> Result<(), Failure> {
    let store = Store::new()?;
    let user = ScriptedClient::answering([Reply::Decline]);
    let client = store.connect(&user).await?;
    let before = store.file().snapshot()?;

    let result = call(
        &client,
        "create_order",
        json!({"customerId": 1, "lines": [
            {"sku": "TLS-001", "quantity": 2},
            {"sku": "TLS-003", "quantity": 4}
        ]}),
    )
    .await?;

    assert!(is_error(&result));
    assert_eq!(
        user.asked(),
        [r#"Create a pending order for customer 1: 2 x "TLS-001", 4 x "TLS-003", total $199.94"#]
    );
    assert_eq!(store.file().snapshot()?, before);
    Ok(())
}

#[tokio::test]
async fn a_stock_increase_is_worded_with_its_sign() -> Result<(), Failure> {
    let (store, user, _client, result) = Store::called(
        Era::Legacy,
        [Reply::Approve],
        "adjust_stock",
        json!({"sku": "TLS-001", "delta": 5, "reason": "delivery from supplier"}),
    )
    .await?;

    assert!(!is_error(&result));
    assert_eq!(
        user.asked(),
        [r#"Adjust "TLS-001" by +5: stock 12 -> 17. Reason given: "delivery from supplier""#]
    );
    assert_eq!(store.file().stock("TLS-001")?, 17);
    Ok(())
}

#[tokio::test]
async fn the_result_carries_before_and_after_as_structured_content_and_as_text()
-> Result<(), Failure> {
    let (_store, _user, _client, result) = Store::called(
        Era::Legacy,
        [Reply::Approve],
        "adjust_stock",
        json!({"sku": "TLS-002", "delta": -2, "reason": "damaged in transit"}),
    )
    .await?;

    let data = enveloped_data(&result)?;
    assert_eq!(
        data,
        &json!({
            "sku": "TLS-002",
            "name": "Digital torque wrench",
            "delta": -2,
            "reason": "damaged in transit",
            "previousStock": 3,
            "newStock": 1
        })
    );
    // The text twin is the same envelope, after the notice.
    let text = text(&result);
    assert!(
        text.starts_with(mcp_write_guard_envelope::NOTICE_PREFIX),
        "{text}"
    );
    assert_eq!(
        mcp_write_guard_envelope::parse_text(&text).as_ref(),
        Some(structured(&result)?)
    );
    assert_eq!(
        mcp_write_guard_envelope::source(structured(&result)?),
        Some("store-server/adjust_stock")
    );
    Ok(())
}

#[tokio::test]
async fn every_call_needs_its_own_approval() -> Result<(), Failure> {
    // The model repeats an approved call: the user is asked again, and a "no" the second time
    // means the stock moved once.
    let store = Store::new()?;
    let file = store.file();
    let user = ScriptedClient::answering([Reply::Approve, Reply::Decline]);
    let client = store.connect(&user).await?;
    let arguments = json!({"sku": "TLS-003", "delta": -10, "reason": "sold at the counter"});

    let first = call(&client, "adjust_stock", arguments.clone()).await?;
    let second = call(&client, "adjust_stock", arguments).await?;

    assert!(!is_error(&first));
    assert!(is_error(&second));
    assert_eq!(
        user.asked(),
        [
            r#"Adjust "TLS-003" by -10: stock 40 -> 30. Reason given: "sold at the counter""#,
            r#"Adjust "TLS-003" by -10: stock 30 -> 20. Reason given: "sold at the counter""#
        ]
    );
    assert_eq!(file.stock("TLS-003")?, 30);
    assert_eq!(file.movements()?.len(), 1);
    assert_eq!(
        store.audit.decisions(),
        [Outcome::Approved, Outcome::Applied, Outcome::Declined]
    );
    Ok(())
}
