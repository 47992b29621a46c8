//! The headless-browser harness ([`Browser`]) on a real page: a server-rendered form with a
//! before/after table and two submit buttons, as the approval page has.

use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::Html;
use axum::routing::get;
use parking_lot::Mutex;
use workspace_tests::{Browser, Failure};

const PAGE: &str = r#"<!doctype html>
<html><head><title>Change</title></head><body>
<h1>Approve this change?</h1>
<table class="change">
<tr><th>field</th><th>before</th><th>after</th></tr>
<tr><td>stock</td><td>3</td><td>23</td></tr>
</table>
<form method="post">
<button name="decision" value="approve">Approve</button>
<button name="decision" value="decline">Decline</button>
</form>
</body></html>"#;

/// Every POST body the page received, in order.
type Posts = Arc<Mutex<Vec<String>>>;

async fn decide(State(posts): State<Posts>, body: String) -> Html<String> {
    let answer = match body.as_str() {
        "decision=approve" => "Approved",
        "decision=decline" => "Declined",
        _ => "Unknown decision",
    };
    posts.lock().push(body);
    Html(format!(
        "<!doctype html><html><body><h1>{answer}</h1></body></html>"
    ))
}

#[tokio::test]
async fn clicks_post_the_form_and_wait_for_the_answer_page() -> Result<(), Failure> {
    let posts = Posts::default();
    let app = Router::new()
        .route("/approvals/1", get(|| async { Html(PAGE) }).post(decide))
        .with_state(Arc::clone(&posts));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/approvals/1", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });

    let browser = Browser::start().await?;
    browser.open(&url).await?;
    assert_eq!(browser.text("h1").await?, "Approve this change?");
    assert_eq!(
        browser.texts("table.change td").await?,
        ["stock", "3", "23"]
    );
    assert!(browser.source().await?.contains(r#"value="decline""#));
    let missing = browser
        .text("table.missing")
        .await
        .err()
        .map(|e| e.to_string());
    assert!(
        missing
            .as_deref()
            .is_some_and(|m| m.contains("`table.missing`") && m.contains(&url)),
        "{missing:?}"
    );
    assert!(posts.lock().is_empty());

    browser.click("button[value=approve]").await?;
    assert_eq!(*posts.lock(), ["decision=approve"]);
    assert_eq!(browser.text("h1").await?, "Approved");

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-selftest.png");
    if shot.exists() {
        std::fs::remove_file(&shot)?;
    }
    browser.screenshot(&shot).await?;
    assert!(std::fs::read(&shot)?.starts_with(b"\x89PNG\r\n\x1a\n"));

    browser.open(&url).await?;
    browser.click("button[value=decline]").await?;
    assert_eq!(*posts.lock(), ["decision=approve", "decision=decline"]);
    assert_eq!(browser.text("h1").await?, "Declined");

    browser.close().await
}
