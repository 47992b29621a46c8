//! One model of what changes: for each of the store's writes (`adjust_stock`, `create_order`,
//! `cancel_order`), the form's default question and the approval page show the same change rows,
//! the rows of mcp-write-guard-core's `Change` of the preview: same field, same before, same
//! after, in the same order.
//!
//! The store's guard as the binary builds it ([`store_server::guard_builder`]), with the guard's
//! default question instead of the store's one-line wordings, and an approval page on loopback.
//! The form is read as a client receives it (`elicitation/create`); the page as a browser gets
//! it (an HTTP GET of the link sent to a URL-mode client). Every question is declined, so
//! nothing is written.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::sync::Arc;

use mcp_write_guard_rmcp::{
    Era, PREPARE_ADMIN_ACTION, WriteGuard, default_prompt,
    page::ApprovalPage,
    test_util::{PageClient, Reply, ScriptedClient, connect},
};
use rmcp::model::{CallToolRequestParams, ElicitationAction};
use serde_json::{Value, json};
use store_server::{
    CreateOrderArgs, Db, Mode, OrderLineArgs, StoreServer, WRITE_TOOLS, guard_builder,
};

/// The store's guard with the default question for its writes, its page served on loopback.
async fn guard(db: Arc<Db>) -> WriteGuard<StoreServer> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mut builder = guard_builder(StoreServer::new(db))
        .writes_enabled(true)
        .approval_page(ApprovalPage::new(&base).unwrap());
    for tool in WRITE_TOOLS {
        builder = builder.prompt(tool, default_prompt);
    }
    let guard = builder.build();
    let router = mcp_write_guard_page::router(guard.approval_page_host().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    guard
}

fn params(tool: &str, arguments: &Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_owned())
        .with_arguments(arguments.as_object().unwrap().clone())
}

/// The question a form client is asked for `tool(arguments)`, declined.
async fn form_question(guard: &WriteGuard<StoreServer>, tool: &str, arguments: &Value) -> String {
    let person = ScriptedClient::new();
    person.script([Reply::Decline]);
    let client = connect(guard.clone(), Era::Legacy, person.clone())
        .await
        .unwrap();
    let result = client.call_tool(params(tool, arguments)).await.unwrap();
    assert_eq!(result.is_error, Some(true), "declined: {result:?}");
    let asked = person.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    asked.into_iter().next().unwrap()
}

/// The approval page's HTML a URL-mode client is sent to for `tool(arguments)`, declined.
async fn page_html(guard: &WriteGuard<StoreServer>, tool: &str, arguments: &Value) -> String {
    let person = PageClient::new();
    let client = Arc::new(
        connect(guard.clone(), Era::Legacy, person.clone())
            .await
            .unwrap(),
    );
    let call = {
        let client = Arc::clone(&client);
        let params = params(tool, arguments);
        tokio::spawn(async move { client.call_tool(params).await.unwrap() })
    };
    let question = person.next_question().await.unwrap();
    let response = reqwest::get(&question.url).await.unwrap();
    assert_eq!(response.status(), 200);
    let html = response.text().await.unwrap();
    question.reply(ElicitationAction::Decline);
    assert_eq!(call.await.unwrap().is_error, Some(true), "declined");
    html
}

/// The rows under `What changes:` in a default question, as `field: before -> after` or
/// `field: value`.
fn form_rows(question: &str) -> Vec<String> {
    question
        .lines()
        .skip_while(|line| *line != "What changes:")
        .skip(1)
        .map_while(|line| line.strip_prefix("  "))
        .map(str::to_owned)
        .collect()
}

/// The rows of the page's change table, read from its HTML as the same one-line text: the
/// field, then the before and after cells (`field: before -> after`), or the one cell across
/// both (`field: value`).
fn page_rows(html: &str) -> Vec<String> {
    let table = html
        .split_once(r#"<table class="change">"#)
        .unwrap()
        .1
        .split_once("</table>")
        .unwrap()
        .0;
    let body = table.split_once("<tbody>").unwrap().1;
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            let cells: Vec<String> = row
                .split("</t")
                .filter_map(|cell| cell.rsplit_once('>').map(|(_, text)| unescape(text)))
                .collect();
            match cells.as_slice() {
                [field, before, after, ..] if row.contains(r#"class="before""#) => {
                    format!("{field}: {before} -> {after}")
                }
                [field, value, ..] => format!("{field}: {value}"),
                _ => panic!("a change row without cells: {row}"),
            }
        })
        .collect()
}

/// The text of an HTML text node as maud escapes it.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Asks about `tool(arguments)` in a form and on the page: both show the same rows, which hold
/// every one of `expected`.
async fn same_change(
    guard: &WriteGuard<StoreServer>,
    tool: &str,
    arguments: Value,
    expected: &[&str],
) {
    let question = form_question(guard, tool, &arguments).await;
    let html = page_html(guard, tool, &arguments).await;
    let (form, page) = (form_rows(&question), page_rows(&html));
    assert!(!form.is_empty(), "{question}");
    assert_eq!(
        form, page,
        "{tool}: the form\n{question}\nand the page\n{html}"
    );
    for row in expected {
        assert!(
            form.iter().any(|r| r == row),
            "{tool}: no {row:?} in {form:?}"
        );
    }
}

#[tokio::test]
async fn the_form_and_the_page_show_the_same_change_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path().join("store.db")).unwrap());
    let order = CreateOrderArgs {
        customer_id: 1,
        lines: vec![OrderLineArgs {
            sku: "TLS-002".into(),
            quantity: 1,
        }],
    };
    let order_id = db
        .create_order(&order, Mode::Apply)
        .unwrap()
        .order_id
        .unwrap();
    let guard = guard(Arc::clone(&db)).await;

    same_change(
        &guard,
        "adjust_stock",
        json!({"sku": "TLS-002", "delta": -1, "reason": "recount <b>shelf\n4</b>"}),
        &[
            "stock: 2 -> 1",
            r#"reason: "recount <b>shelf\n4</b>""#,
            "delta: -1",
        ],
    )
    .await;
    same_change(
        &guard,
        "create_order",
        json!({"customerId": 1, "lines": [{"sku": "TLS-002", "quantity": 2}]}),
        &[
            "lines[0].stock: 2 -> 0",
            "lines[0].quantity: 2",
            r#"status: "pending""#,
        ],
    )
    .await;
    // cancel_order is destructive: the person is first asked to prepare it, about the
    // cancellation's own preview.
    same_change(
        &guard,
        PREPARE_ADMIN_ACTION,
        json!({"tool": "cancel_order",
               "arguments": {"orderId": order_id, "reason": "wrong size"}}),
        &[
            r#"status: "pending" -> "cancelled""#,
            "lines[0].stock: 2 -> 3",
            r#"reason: "wrong size""#,
        ],
    )
    .await;
    // Nothing was written.
    assert_eq!(db.get_product("TLS-002").unwrap().stock, 2);
}
