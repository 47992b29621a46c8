//! Reads through the guard: what is wrapped as untrusted data, the review that tries to give
//! the model orders, and the tool surface the store advertises.

use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::test_util::ScriptedClient;
use mcp_write_guard_rmcp::{ConfigMistake, PREPARE_ADMIN_ACTION};
use serde_json::{Value, json};
use store_server::INJECTION_TEXT;
use workspace_tests::{Failure, READ_TOOLS, call, enveloped_data, is_error, structured, text};

use crate::store::{Store, connect};

#[tokio::test]
async fn the_injection_in_a_review_stays_inside_data() -> Result<(), Failure> {
    let (store, _, before) = Store::with_snapshot()?;
    let (user, client) = store.person(Era::Legacy, []).await?;

    let result = call(&client, "list_reviews", json!({"sku": "TLS-002"})).await?;

    assert!(!is_error(&result));
    let wrapped = structured(&result)?.clone();
    let meta = &wrapped[mcp_write_guard_envelope::ENVELOPE_KEY];
    assert_eq!(meta["classification"], "untrusted");
    assert_eq!(meta["source"], "store-server/list_reviews");
    assert_eq!(meta["warning"], mcp_write_guard_envelope::WARNING);
    assert_eq!(
        wrapped.as_object().unwrap().keys().collect::<Vec<_>>(),
        [mcp_write_guard_envelope::ENVELOPE_KEY, "data"]
    );
    // The review is there, word for word, but only inside `data`.
    let data = enveloped_data(&result)?;
    let bodies: Vec<&str> = data["reviews"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["body"].as_str().unwrap())
        .collect();
    assert!(
        bodies.iter().any(|b| b.contains(INJECTION_TEXT)),
        "{bodies:?}"
    );
    let mut outside = wrapped.clone();
    outside.as_object_mut().unwrap().remove("data");
    assert!(!outside.to_string().contains(INJECTION_TEXT));
    // The text the model reads opens with the notice, and is the same envelope.
    let text = text(&result);
    assert!(
        text.starts_with(mcp_write_guard_envelope::NOTICE_PREFIX),
        "{text}"
    );
    assert_eq!(mcp_write_guard_envelope::parse_text(&text), Some(wrapped));
    assert_eq!(text.matches(INJECTION_TEXT).count(), 1);
    // Reading wrote nothing and asked nobody.
    assert!(user.asked().is_empty());
    assert_eq!(store.file().snapshot()?, before);
    Ok(())
}

#[tokio::test]
async fn catalogue_reads_are_trusted_and_the_rest_are_wrapped() -> Result<(), Failure> {
    let store = Store::new()?;
    store.order("TLS-003", 2)?;
    let before = store.file().snapshot()?;
    let client = store.connect(&ScriptedClient::answering([])).await?;

    let products = call(&client, "list_products", json!({})).await?;
    assert_eq!(structured(&products)?["products"][2]["stock"], 38);
    let product = call(&client, "get_product", json!({"sku": "TLS-002"})).await?;
    assert_eq!(
        structured(&product)?,
        &json!({"sku": "TLS-002", "name": "Digital torque wrench", "price": "$109.99",
                "priceCents": 10999, "stock": 3})
    );

    let orders = call(&client, "list_orders", json!({})).await?;
    assert_eq!(
        enveloped_data(&orders)?["orders"][0]["customerName"],
        "Harbor Street Garage"
    );
    let order = call(&client, "get_order", json!({"orderId": 1})).await?;
    assert_eq!(
        enveloped_data(&order)?,
        &json!({"orderId": 1, "customerId": 1, "customerName": "Harbor Street Garage",
                "status": "pending", "lines": [{"sku": "TLS-003", "quantity": 2}],
                "total": "$49.98", "totalCents": 4998})
    );
    let movements = call(&client, "list_stock_movements", json!({"sku": "TLS-003"})).await?;
    let data = enveloped_data(&movements)?;
    assert_eq!(data["movements"][0]["delta"], -2);
    assert_eq!(data["movements"][0]["reason"], "order 1 created");

    // A read of something that does not exist is a clear tool error.
    let missing = call(&client, "get_order", json!({"orderId": 42})).await?;
    assert!(is_error(&missing));
    assert!(workspace_tests::message(&missing).contains("unknown order 42"));

    assert_eq!(store.file().snapshot()?, before);
    assert!(store.audit.records().is_empty(), "reads are not decisions");
    Ok(())
}

#[tokio::test]
async fn the_advertised_surface_is_what_the_issue_promises() -> Result<(), Failure> {
    let store = Store::new()?;
    let client = store.connect(&ScriptedClient::answering([])).await?;
    let tools = client.list_all_tools().await?;
    let by_name = |name: &str| -> Value {
        let tool = tools
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no {name}"));
        serde_json::to_value(tool).unwrap()
    };

    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "adjust_stock",
            "cancel_order",
            "create_order",
            "get_order",
            "get_product",
            "list_orders",
            "list_products",
            "list_reviews",
            "list_stock_movements",
            PREPARE_ADMIN_ACTION,
        ]
    );
    for read in READ_TOOLS {
        assert_eq!(
            by_name(read)["annotations"],
            json!({"readOnlyHint": true, "destructiveHint": false,
                   "idempotentHint": true, "openWorldHint": false}),
            "{read}"
        );
    }
    let hints = |name: &str| {
        let a = by_name(name)["annotations"].clone();
        (a["readOnlyHint"].clone(), a["destructiveHint"].clone())
    };
    assert_eq!(hints("adjust_stock"), (json!(false), json!(true)));
    assert_eq!(hints("create_order"), (json!(false), json!(false)));
    assert_eq!(hints("cancel_order"), (json!(false), json!(true)));

    let properties = |name: &str| -> Vec<String> {
        let mut keys: Vec<String> = by_name(name)["inputSchema"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(properties("adjust_stock"), ["delta", "reason", "sku"]);
    assert_eq!(properties("create_order"), ["customerId", "lines"]);
    assert_eq!(
        properties("cancel_order"),
        ["confirmationToken", "orderId", "reason"]
    );
    assert_eq!(properties("get_order"), ["orderId"]);
    let line = &by_name("create_order")["inputSchema"];
    assert!(line.to_string().contains("\"quantity\""), "{line}");
    // No tool lets the model approve its own change.
    for tool in &tools {
        let schema = serde_json::to_string(&tool.input_schema)?;
        assert!(!schema.contains("\"confirm\""), "{}: {schema}", tool.name);
        assert!(!schema.contains("dryRun"), "{}: {schema}", tool.name);
    }
    // Wrapped tools advertise the wrapped output schema; trusted ones their own.
    for name in ["adjust_stock", "list_reviews", "list_orders"] {
        let required = &by_name(name)["outputSchema"]["required"];
        assert_eq!(
            required,
            &json!([mcp_write_guard_envelope::ENVELOPE_KEY, "data"]),
            "{name}"
        );
    }
    assert!(by_name("list_products")["outputSchema"]["properties"]["products"].is_object());
    Ok(())
}

/// The reference server's guard configuration names only tools it has, of the right kind; a
/// misspelt or misplaced setting is reported when the guard first reads the tool list (and not
/// before), so a team's test can assert there is none.
#[tokio::test]
async fn builder_settings_that_match_no_tool_are_reported() -> Result<(), Failure> {
    let store = Store::new()?;
    let guard = store.guard(true);
    assert_eq!(guard.config_mistakes(), None, "nothing read yet");
    let client = connect(guard.clone(), &ScriptedClient::answering([]), Era::Legacy).await?;
    client.list_all_tools().await?;
    assert_eq!(guard.config_mistakes(), Some(&[][..]));
    client.cancel().await?;

    let mistaken = store
        .guard_builder(true)
        .preview("adjust_stocks")
        .prompt("list_products", |_| "Read the products?".to_owned())
        .trust_read("create_order")
        .build();
    let client = connect(
        mistaken.clone(),
        &ScriptedClient::answering([]),
        Era::InputRounds,
    )
    .await?;
    client.list_all_tools().await?;
    assert_eq!(
        mistaken.config_mistakes(),
        Some(
            &[
                ConfigMistake::PreviewForUnknownTool("adjust_stocks".into()),
                ConfigMistake::PromptForRead("list_products".into()),
                ConfigMistake::TrustedReadIsWrite("create_order".into()),
            ][..]
        )
    );
    client.cancel().await?;
    Ok(())
}
