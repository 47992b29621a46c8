//! The approval page in a real browser: the built `store-server` with `--approval-page`, a client
//! that declares URL-mode elicitation only, and a headless chromium (Debian's `chromium` and
//! `chromium-driver`) playing the person who opens the link. Both protocol eras, over stdio (the
//! page on a listener of its own) and over streamable HTTP (the page on the same listener). What
//! matters is read from the database file: the stock and the `stock_movements` rows.
//!
//! One test function drives every case in turn, so one browser serves them all.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use std::{path::Path, process::Stdio, sync::Arc};

use common::{HttpChild, command};
use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::test_util::{self, PageClient, PageQuestion};
use rmcp::{
    RoleClient,
    model::{CallToolRequestParams, CallToolResult, ElicitationAction},
    service::RunningService,
    transport::{StreamableHttpClientTransport, TokioChildProcess},
};
use serde_json::json;
use tokio::task::JoinHandle;
use workspace_tests::{Browser, Failure, FileView};

type PageSession = Arc<RunningService<RoleClient, PageClient>>;

const SKU: &str = "TLS-002";

/// `store-server --approval-page ARGS` over stdio in `dir`, writes on, with a URL-only client
/// connected in `era`.
async fn launch(dir: &Path, args: &[&str], era: Era) -> Result<(PageSession, PageClient), Failure> {
    let mut all = vec!["--approval-page"];
    all.extend_from_slice(args);
    let (transport, _stderr) = TokioChildProcess::builder(command(dir, &all, Some("true")))
        .stderr(Stdio::null())
        .spawn()?;
    let person = PageClient::new();
    Ok((connect(transport, &person, era).await?, person))
}

async fn connect<T, E, A>(
    transport: T,
    person: &PageClient,
    era: Era,
) -> Result<PageSession, Failure>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let client = test_util::connect_over(transport, era, person.clone()).await?;
    Ok(Arc::new(client))
}

/// `adjust_stock` on a task of its own: the client waits for the test's reply to the question.
fn adjust(client: &PageSession, delta: i64) -> JoinHandle<CallToolResult> {
    let client = Arc::clone(client);
    tokio::spawn(async move {
        let args = json!({"sku": SKU, "delta": delta, "reason": "recount <b>shelf 4</b>"});
        let params = CallToolRequestParams::new("adjust_stock")
            .with_arguments(args.as_object().cloned().unwrap());
        client.call_tool(params).await.unwrap()
    })
}

async fn question(person: &PageClient) -> PageQuestion {
    let question = person.next_question().await.unwrap();
    assert!(question.url.contains("/approvals/"), "{}", question.url);
    question
}

/// Stock of [`SKU`] and the number of stock movements, from the file.
fn saved(db: &FileView) -> (i64, usize) {
    (db.stock(SKU).unwrap(), db.movements().unwrap().len())
}

/// The change table as the person reads it: rows of (field, before, after).
async fn change_table(browser: &Browser) -> Result<Vec<Vec<String>>, Failure> {
    let fields = browser.texts("table.change tbody th").await?;
    let cells = browser.texts("table.change tbody td").await?;
    let mut rows = Vec::new();
    let mut cells = cells.into_iter();
    for field in fields {
        let before = cells.next().unwrap_or_default();
        // A row without a before/after pair has one cell across both columns.
        let row = if field == "stock" {
            vec![field, before, cells.next().unwrap_or_default()]
        } else {
            vec![field, before]
        };
        rows.push(row);
    }
    Ok(rows)
}

#[tokio::test]
async fn a_person_answers_on_the_approval_page_in_a_real_browser() -> Result<(), Failure> {
    let browser = Browser::start().await?;
    for era in [Era::Legacy, Era::InputRounds] {
        approve_shows_the_change_and_applies_exactly_it(&browser, era).await?;
        decline_saves_nothing(&browser, era).await?;
        an_expired_page_says_so_and_saves_nothing(&browser, era).await?;
        posts_without_the_pages_token_are_refused(era).await?;
        over_http_the_page_is_on_the_same_listener(&browser, era).await?;
    }
    browser.close().await
}

async fn approve_shows_the_change_and_applies_exactly_it(
    browser: &Browser,
    era: Era,
) -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let (client, person) = launch(dir.path(), &[], era).await?;
    let db = FileView::new(dir.path().join("store.db"));
    let call = adjust(&client, -2);
    let question = question(&person).await;
    assert!(
        question.url.starts_with("http://127.0.0.1:"),
        "{}",
        question.url
    );

    browser.open(&question.url).await?;
    assert_eq!(browser.text("h1").await?, "Approve this change?");
    let table = change_table(browser).await?;
    assert!(
        table.contains(&vec!["stock".to_owned(), "3".to_owned(), "1".to_owned()]),
        "{era:?}: {table:?}"
    );
    let arguments = browser.texts("table.arguments td").await?;
    assert!(
        arguments.contains(&"\"recount <b>shelf 4</b>\"".to_owned()),
        "the reason shows as text: {arguments:?}"
    );
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("approval-page-{era:?}.png"));
    browser.screenshot(&shot).await?;
    assert_eq!(
        saved(&db),
        (3, 0),
        "{era:?}: nothing saved before the answer"
    );

    browser.click("button[value=approve]").await?;
    assert_eq!(browser.text("h1").await?, "You approved this change");
    let url = question.url.clone();
    question.reply(ElicitationAction::Accept);
    let result = call.await?;
    assert_ne!(result.is_error, Some(true), "{era:?}: {result:?}");
    assert_eq!(saved(&db), (1, 1), "{era:?}: exactly the change shown");
    let movement = &db.movements()?[0];
    assert_eq!((movement.sku.as_str(), movement.delta), (SKU, -2));

    // The decided URL again: a plain page says so, and nothing changes.
    browser.open(&url).await?;
    assert_eq!(browser.text("h1").await?, "Already answered");
    assert!(
        browser.texts("form").await?.is_empty(),
        "no form on a decided page"
    );
    assert_eq!(saved(&db), (1, 1));
    Ok(())
}

async fn decline_saves_nothing(browser: &Browser, era: Era) -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let (client, person) = launch(dir.path(), &[], era).await?;
    let db = FileView::new(dir.path().join("store.db"));
    let call = adjust(&client, -2);
    let question = question(&person).await;
    browser.open(&question.url).await?;
    browser.click("button[value=decline]").await?;
    assert_eq!(browser.text("h1").await?, "You declined this change");
    question.reply(ElicitationAction::Accept);
    let result = call.await?;
    assert_eq!(result.is_error, Some(true), "{era:?}: {result:?}");
    assert_eq!(saved(&db), (3, 0), "{era:?}: nothing saved");
    Ok(())
}

async fn an_expired_page_says_so_and_saves_nothing(
    browser: &Browser,
    era: Era,
) -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    // A three-second approval clock (long enough for the page to open on a busy machine), so
    // that it runs out in the test.
    let (client, person) = launch(dir.path(), &["--approval-ttl", "3"], era).await?;
    let db = FileView::new(dir.path().join("store.db"));
    let call = adjust(&client, -2);
    let question = question(&person).await;
    browser.open(&question.url).await?;
    assert_eq!(browser.text("h1").await?, "Approve this change?");
    tokio::time::sleep(std::time::Duration::from_millis(3_200)).await;
    browser.click("button[value=approve]").await?;
    assert_eq!(browser.text("h1").await?, "Expired");
    let url = question.url.clone();
    question.reply(ElicitationAction::Accept);
    let result = call.await?;
    assert_eq!(result.is_error, Some(true), "{era:?}: {result:?}");
    assert_eq!(saved(&db), (3, 0), "{era:?}: nothing saved");
    browser.open(&url).await?;
    assert_eq!(browser.text("h1").await?, "Expired");
    Ok(())
}

/// A POST that did not come from the page's own form: without the CSRF token, or with another.
async fn posts_without_the_pages_token_are_refused(era: Era) -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let (client, person) = launch(dir.path(), &[], era).await?;
    let db = FileView::new(dir.path().join("store.db"));
    let call = adjust(&client, -2);
    let question = question(&person).await;
    let http = reqwest::Client::new();
    for body in [
        "decision=approve".to_owned(),
        format!("decision=approve&csrf={}", "0".repeat(64)),
    ] {
        let response = http
            .post(&question.url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.clone())
            .send()
            .await?;
        assert_eq!(response.status(), 403, "{era:?}: {body}");
        assert_eq!(saved(&db), (3, 0), "{era:?}: {body}");
    }
    // The page is still open: the refused posts changed nothing.
    let page = http.get(&question.url).send().await?;
    assert_eq!(page.status(), 200);
    assert!(page.text().await?.contains("Approve this change?"));
    question.reply(ElicitationAction::Decline);
    assert_eq!(call.await?.is_error, Some(true));
    assert_eq!(saved(&db), (3, 0), "{era:?}");
    Ok(())
}

async fn over_http_the_page_is_on_the_same_listener(
    browser: &Browser,
    era: Era,
) -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let server = HttpChild::start(dir.path(), &["--approval-page"], Some("true")).await?;
    let person = PageClient::new();
    let transport = StreamableHttpClientTransport::from_uri(server.url.clone());
    let client = connect(transport, &person, era).await?;
    let db = FileView::new(dir.path().join("store.db"));
    let call = adjust(&client, 4);
    let question = question(&person).await;
    let origin = server.url.trim_end_matches("/mcp");
    assert!(
        question.url.starts_with(&format!("{origin}/approvals/")),
        "{}",
        question.url
    );
    browser.open(&question.url).await?;
    let table = change_table(browser).await?;
    assert!(
        table.contains(&vec!["stock".to_owned(), "3".to_owned(), "7".to_owned()]),
        "{era:?}: {table:?}"
    );
    browser.click("button[value=approve]").await?;
    question.reply(ElicitationAction::Accept);
    let result = call.await?;
    assert_ne!(result.is_error, Some(true), "{era:?}: {result:?}");
    assert_eq!(saved(&db), (7, 1), "{era:?}");
    Ok(())
}
