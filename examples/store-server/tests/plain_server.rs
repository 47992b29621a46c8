//! The store's rmcp server on its own, without the guard: what it declares, and that it
//! applies writes directly when nobody marks a call as a preview (which is why the binary only
//! ever serves it inside the guard).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::sync::Arc;

use mcp_write_guard_rmcp::{
    Era,
    test_util::{ScriptedClient, connect},
};
use rmcp::ServerHandler;
use serde_json::json;
use store_server::{Db, SERVER_NAME, StoreServer};
use workspace_tests::{
    Client, Failure, FileView, READ_TOOLS, call, is_error, message, structured, text,
};

async fn plain(db: Arc<Db>, user: &ScriptedClient) -> Result<Client, Failure> {
    Ok(connect(StoreServer::new(db), Era::Legacy, user.clone()).await?)
}

#[tokio::test]
async fn the_server_declares_its_own_annotations() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let server = StoreServer::new(Arc::new(Db::open(dir.path().join("s.db"))?));
    let info = server.get_info();
    assert_eq!(info.server_info.name, SERVER_NAME);
    assert!(info.instructions.unwrap().contains("approve"));

    let annotations = |name: &str| {
        let tool = server.get_tool(name).unwrap_or_else(|| panic!("no {name}"));
        serde_json::to_value(tool.annotations.unwrap()).unwrap()
    };
    for read in READ_TOOLS {
        assert_eq!(
            annotations(read),
            json!({"readOnlyHint": true, "destructiveHint": false,
                   "idempotentHint": true, "openWorldHint": false}),
            "{read}"
        );
    }
    assert_eq!(annotations("adjust_stock")["destructiveHint"], true);
    assert_eq!(annotations("create_order")["destructiveHint"], false);
    assert_eq!(annotations("create_order")["readOnlyHint"], false);
    assert_eq!(annotations("cancel_order")["destructiveHint"], true);
    assert!(
        server.get_tool("prepare_admin_action").is_none(),
        "the guard adds it"
    );
    Ok(())
}

#[tokio::test]
async fn without_the_guard_a_write_applies_at_once() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("s.db");
    let user = ScriptedClient::answering([]);
    let client = plain(Arc::new(Db::open(&path)?), &user).await?;

    let result = call(
        &client,
        "adjust_stock",
        json!({"sku": "TLS-002", "delta": -2, "reason": "damaged in transit"}),
    )
    .await?;

    assert!(!is_error(&result), "{}", text(&result));
    // Unwrapped: the plain server's structured content and its JSON text twin.
    assert_eq!(structured(&result)?["newStock"], 1);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text(&result))?,
        structured(&result)?.clone()
    );
    assert!(user.asked().is_empty());
    assert_eq!(FileView::new(&path).stock("TLS-002")?, 1);
    Ok(())
}

#[tokio::test]
async fn bad_input_is_a_tool_error_that_writes_nothing() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("s.db");
    let file = FileView::new(&path);
    let client = plain(Arc::new(Db::open(&path)?), &ScriptedClient::answering([])).await?;
    let before = file.snapshot()?;

    let cases = [
        (
            "adjust_stock",
            json!({"sku": "TLS-002", "delta": "-2", "reason": "x"}),
            "invalid type",
        ),
        (
            "adjust_stock",
            json!({"sku": "TLS-002", "reason": "x"}),
            "missing field `delta`",
        ),
        (
            "adjust_stock",
            json!({"sku": "TLS-002", "delta": -9, "reason": "x"}),
            "would make it negative",
        ),
        (
            "create_order",
            json!({"customerId": 7, "lines": [{"sku": "TLS-001", "quantity": 1}]}),
            "unknown customer 7",
        ),
        (
            "create_order",
            json!({"customerId": 1, "lines": []}),
            "at least one line",
        ),
        (
            "create_order",
            json!({"customerId": 1, "lines": [{"sku": "TLS-001", "quantity": 0}]}),
            "between 1 and",
        ),
        (
            "create_order",
            json!({"customerId": 1, "lines": [{"sku": "NOPE", "quantity": 1}]}),
            "unknown sku",
        ),
        (
            "cancel_order",
            json!({"orderId": 5, "reason": "x"}),
            "unknown order 5",
        ),
        ("get_product", json!({"sku": 12}), "invalid type"),
    ];
    for (tool, arguments, expected) in cases {
        let result = call(&client, tool, arguments.clone()).await?;
        assert!(is_error(&result), "{tool} {arguments}");
        assert!(
            message(&result).contains(expected),
            "{tool} {arguments}: {}",
            message(&result)
        );
    }
    assert_eq!(file.snapshot()?, before);
    Ok(())
}
