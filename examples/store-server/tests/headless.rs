//! A client that cannot ask its user (no elicitation capability: a headless agent, a scheduler)
//! against the built `store-server` over stdio with `--approval-page --notify-webhook URL
//! --notify-secret-file FILE`, writes on. A webhook receiver on loopback plays the person's
//! channel: it checks each delivery's signature and takes the approval page's link from the
//! body; the person opens the link in headless Chromium (workspace-tests' `Browser`) and presses
//! approve or decline (a few cases post the page's form over HTTP instead). Both protocol eras. What matters is read from the database file: the stock and the
//! `stock_movements` rows.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use std::path::Path;

use common::{Log, audit_fields, launch_stdio};
use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::Outcome;
use mcp_write_guard_rmcp::test_util::{ERAS, ScriptedClient};
use mcp_write_guard_webhook::verify_signature;
use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::net::TcpListener;
use workspace_tests::{Browser, Client, Failure, FileView, Movement, call, message};

const SKU: &str = "TLS-002";

/// The shared secret, as the operator writes it to the file (with a line break).
const SECRET: &[u8] = b"headless-test-secret-0f3c9a7e51d2b8460f3c9a7e51d2b846";

/// The change the tests ask for: stock 3 -> 2.
fn minus_one() -> Value {
    json!({"sku": SKU, "delta": -1, "reason": "damaged in transit"})
}

/// The same call with one argument changed: stock 3 -> 1.
fn minus_two() -> Value {
    json!({"sku": SKU, "delta": -2, "reason": "damaged in transit"})
}

fn movement(delta: i64) -> Movement {
    Movement {
        sku: SKU.to_owned(),
        delta,
        reason: "damaged in transit".to_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// The webhook receiver
// ---------------------------------------------------------------------------------------------

use common::{Delivery, Receiver};

/// The body of `delivery`, after its signature was checked with [`SECRET`].
trait Verified {
    fn verified(&self) -> Value;
    fn link(&self) -> String;
}

impl Verified for Delivery {
    fn verified(&self) -> Value {
        self.verified_with(SECRET)
    }

    /// The approval page's link, from a delivery whose signature checks.
    fn link(&self) -> String {
        let body = self.verified();
        assert_eq!(body["tool"], "adjust_stock", "{body}");
        let link = body["url"].as_str().expect("a url field").to_owned();
        assert!(
            link.starts_with("http://127.0.0.1:") && link.contains("/approvals/"),
            "{link}"
        );
        link
    }
}

// ---------------------------------------------------------------------------------------------
// The server and the person
// ---------------------------------------------------------------------------------------------

/// `store-server --approval-page --notify-webhook WEBHOOK --notify-secret-file F` over stdio,
/// writes on, with a client without elicitation connected in `era`.
struct Headless {
    client: Client,
    log: Log,
    db: FileView,
    http: reqwest::Client,
    _dir: TempDir,
}

impl Headless {
    async fn start(era: Era, webhook: &str) -> Result<Self, Failure> {
        Self::start_with(era, webhook, &[]).await
    }

    /// A webhook receiver, and the server (see [`Headless::start`]) notifying it.
    async fn with_receiver(era: Era) -> Result<(Receiver, Self), Failure> {
        let hooks = Receiver::start().await?;
        let h = Self::start(era, &hooks.url).await?;
        Ok((hooks, h))
    }

    /// The same, with `more` arguments for store-server.
    async fn start_with(era: Era, webhook: &str, more: &[&str]) -> Result<Self, Failure> {
        let dir = tempfile::tempdir()?;
        let secret_file = dir.path().join("webhook-secret");
        std::fs::write(&secret_file, [SECRET, b"\n"].concat())?;
        let mut args = vec![
            "--approval-page",
            "--notify-webhook",
            webhook,
            "--notify-secret-file",
            path_str(&secret_file),
        ];
        args.extend_from_slice(more);
        let user = ScriptedClient::without_elicitation();
        let (client, log) = launch_stdio(dir.path(), &args, Some("true"), &user, era).await?;
        Ok(Self {
            client,
            log,
            db: FileView::new(dir.path().join("store.db")),
            http: reqwest::Client::new(),
            _dir: dir,
        })
    }

    async fn adjust(&self, arguments: Value) -> Result<CallToolResult, Failure> {
        call(&self.client, "adjust_stock", arguments).await
    }

    /// The stock of [`SKU`] and every stock movement, from the file.
    fn saved(&self) -> (i64, Vec<Movement>) {
        (self.db.stock(SKU).unwrap(), self.db.movements().unwrap())
    }

    /// Opens `link` and presses `decision` in its form, as the person's browser would: the
    /// form's CSRF token read from the page, then a form post. Returns the answer page.
    async fn answer(&self, link: &str, decision: &str) -> Result<String, Failure> {
        let page = self.http.get(link).send().await?;
        assert_eq!(page.status(), 200, "{link}");
        let page = page.text().await?;
        assert!(page.contains("Approve this change?"), "{page}");
        let marker = r#"name="csrf" value=""#;
        let start = page.find(marker).expect("a csrf field") + marker.len();
        let csrf = &page[start..start + 64];
        let answered = self
            .http
            .post(link)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("decision={decision}&csrf={csrf}"))
            .send()
            .await?;
        assert_eq!(answered.status(), 200, "{link}");
        Ok(answered.text().await?)
    }

    /// The person opens `link` in `browser`, reads the change (stock `before` -> `after`) and
    /// presses `decision`; returns the heading of the page that answers.
    async fn answer_in(
        &self,
        browser: &Browser,
        link: &str,
        decision: &str,
        (before, after): (i64, i64),
    ) -> Result<String, Failure> {
        browser.open(link).await?;
        assert_eq!(browser.text("h1").await?, "Approve this change?", "{link}");
        let fields = browser.texts("table.change tbody th").await?;
        let cells = browser.texts("table.change tbody td").await?;
        assert!(fields.iter().any(|f| f == "stock"), "{fields:?}");
        let pair = [before.to_string(), after.to_string()];
        assert!(
            cells.windows(2).any(|w| w == pair),
            "the page shows stock {before} -> {after}: {fields:?} {cells:?}"
        );
        browser.click(&format!("button[value={decision}]")).await?;
        browser.text("h1").await
    }

    /// The audit outcomes logged so far (`asked` left out), for failure messages.
    fn outcomes(&self) -> Vec<String> {
        self.log.outcomes()
    }

    /// Calls `adjust_stock` with [`minus_one`] while nothing is open yet: asserts the answer is
    /// "a person was asked" and returns the link the first delivery to `hooks` carries.
    async fn ask_first(&self, hooks: &Receiver, era: Era) -> Result<String, Failure> {
        let first = self.adjust(minus_one()).await?;
        let link = hooks.deliveries()[0].link();
        assert_asked(&first, &link, era);
        Ok(link)
    }

    /// Asserts that `result` is not an error; the failure message carries its text and the
    /// outcomes logged so far.
    fn assert_written(&self, result: &CallToolResult, era: Era) {
        assert_ne!(
            result.is_error,
            Some(true),
            "{era:?}: {} / outcomes {:?}",
            message(result),
            self.outcomes()
        );
    }

    /// Asserts that `outcome` is logged exactly `n` times, counted now.
    fn assert_logged(&self, outcome: Outcome, n: usize, era: Era) {
        assert_eq!(self.log.count(outcome), n, "{era:?}: {:?}", self.outcomes());
    }

    /// Asserts that `outcome` is logged exactly `n` times, counted once there are `n` (see
    /// [`count_when`]).
    async fn assert_logged_when(&self, outcome: Outcome, n: usize, era: Era) {
        assert_eq!(
            count_when(&self.log, outcome, n).await,
            n,
            "{era:?}: {:?}",
            self.outcomes()
        );
    }
}

/// After `again` asked a question of its own: asserts there are two deliveries, the second
/// naming a page other than `first_link`, and `again` is the "a person was asked" answer.
/// Returns the prompt the second delivery carries.
fn second_question(hooks: &Receiver, first_link: &str, again: &CallToolResult, era: Era) -> String {
    let deliveries = hooks.deliveries();
    assert_eq!(deliveries.len(), 2, "{era:?}: a new question, a new notice");
    let second_link = deliveries[1].link();
    assert_ne!(second_link, first_link, "{era:?}: a page of its own");
    assert_asked(again, &second_link, era);
    deliveries[1].verified()["prompt"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// How many logged outcomes are `outcome`, once there are at least `n` (the log is read in the
/// background), or after a few seconds.
async fn count_when(log: &Log, outcome: Outcome, n: usize) -> usize {
    for _ in 0..100 {
        if log.count(outcome) >= n {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    log.count(outcome)
}

/// The records of a call asked by a notice (asked, notified, awaiting the answer) all name the
/// page as the channel and the one approval id the question has.
async fn assert_one_question_on_the_page(log: &Log, era: Era) {
    count_when(log, Outcome::AwaitingAnswer, 1).await;
    let field = |fields: &[(String, String)], key: &str| {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, value)| value.clone())
    };
    let of_the_call: Vec<_> = log
        .lines()
        .iter()
        .filter_map(|line| audit_fields(line))
        .filter(|fields| {
            let outcome = field(fields, "outcome");
            [Outcome::Asked, Outcome::Notified, Outcome::AwaitingAnswer]
                .iter()
                .any(|o| outcome.as_deref() == Some(o.as_str()))
        })
        .collect();
    assert_eq!(of_the_call.len(), 3, "{era:?}: {of_the_call:?}");
    let asked = field(&of_the_call[0], "approval_id");
    assert!(asked.is_some(), "{era:?}: {of_the_call:?}");
    for fields in &of_the_call {
        assert_eq!(
            field(fields, "channel").as_deref(),
            Some("page"),
            "{era:?}: {fields:?}"
        );
        assert_eq!(field(fields, "approval_id"), asked, "{era:?}: {fields:?}");
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}

/// The page's id: the last segment of its link (64 hex digits).
fn page_id(link: &str) -> &str {
    let id = link.rsplit('/').next().unwrap();
    assert!(
        id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{link}"
    );
    id
}

/// Asserts `result` is the "a person was asked, call again" answer and leaks no link.
fn assert_asked(result: &CallToolResult, link: &str, era: Era) {
    let text = message(result);
    assert_eq!(result.is_error, Some(true), "{era:?}: {text}");
    assert!(
        text.contains("a person was asked") && text.contains("Call this tool again"),
        "{era:?}: {text}"
    );
    assert!(text.contains("Nothing was saved"), "{era:?}: {text}");
    assert!(
        !text.contains(link),
        "{era:?}: the link reaches the model: {text}"
    );
    assert!(
        !text.contains(page_id(link)),
        "{era:?}: the page id reaches the model: {text}"
    );
    assert!(!text.contains("/approvals/"), "{era:?}: {text}");
}

// ---------------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------------

/// (a) The call is answered at once: a person was asked, nothing saved, call again; one signed
/// delivery carries the link, the model never sees it. Then (b) approve on the page: the retry
/// applies once; a further retry is a new question.
#[tokio::test]
async fn approved_on_the_page_the_same_call_again_applies_it_once() -> Result<(), Failure> {
    let browser = Browser::start().await?;
    for era in ERAS {
        let (hooks, h) = Headless::with_receiver(era).await?;

        // (a)
        let first = h.adjust(minus_one()).await?;
        let deliveries = hooks.deliveries();
        assert_eq!(deliveries.len(), 1, "{era:?}: exactly one delivery");
        let link = deliveries[0].link();
        assert_asked(&first, &link, era);
        assert_eq!(h.saved(), (3, vec![]), "{era:?}: nothing saved");
        assert_one_question_on_the_page(&h.log, era).await;
        let body = deliveries[0].verified();
        let prompt = body["prompt"].as_str().unwrap();
        assert!(prompt.contains("stock 3 -> 2"), "{era:?}: {prompt}");

        // A forged delivery does not check: another secret, or a body changed by one byte.
        let signature = deliveries[0].signature.as_deref().unwrap();
        assert!(!verify_signature(
            b"another secret",
            &deliveries[0].body,
            signature
        ));
        let mut altered = deliveries[0].body.clone();
        let last = altered.len() - 2;
        altered[last] ^= 1;
        assert!(!verify_signature(SECRET, &altered, signature));
        let logged = h.log.lines().join("\n");
        assert!(
            !logged.contains(std::str::from_utf8(SECRET).unwrap()),
            "{era:?}: the secret is logged"
        );

        // Still open: the retry saves nothing and asks nobody again.
        let early = h.adjust(minus_one()).await?;
        let early_text = message(&early);
        assert_eq!(early.is_error, Some(true), "{era:?}: {early_text}");
        assert!(
            early_text.contains("has not answered yet"),
            "{era:?}: {early_text} / outcomes {:?}",
            h.outcomes()
        );
        assert!(
            !early_text.contains(page_id(&link)),
            "{era:?}: {early_text}"
        );
        assert_eq!(hooks.deliveries().len(), 1, "{era:?}: no second notice");
        assert_eq!(h.saved(), (3, vec![]), "{era:?}");

        // (b) The person opens the link in a browser, reads the change and approves.
        let answered = h.answer_in(&browser, &link, "approve", (3, 2)).await?;
        assert_eq!(answered, "You approved this change", "{era:?}");
        assert_eq!(h.saved(), (3, vec![]), "{era:?}: the page applies nothing");

        let applied = h.adjust(minus_one()).await?;
        h.assert_written(&applied, era);
        assert_eq!(
            h.saved(),
            (2, vec![movement(-1)]),
            "{era:?}: the approved change, once"
        );
        h.assert_logged_when(Outcome::Applied, 1, era).await;

        // The approval is spent: the same call again is a new question (2 -> 1).
        let again = h.adjust(minus_one()).await?;
        let prompt = second_question(&hooks, &link, &again, era);
        assert!(prompt.contains("stock 2 -> 1"), "{era:?}: {prompt}");
        assert_eq!(
            h.saved(),
            (2, vec![movement(-1)]),
            "{era:?}: nothing more saved"
        );
        h.assert_logged_when(Outcome::Notified, 2, era).await;
        h.assert_logged(Outcome::Applied, 1, era);
        h.client.cancel().await?;
    }
    browser.close().await
}

/// (c) Declined on the page: the retry is refused and nothing is written.
#[tokio::test]
async fn declined_on_the_page_the_retry_is_refused() -> Result<(), Failure> {
    let browser = Browser::start().await?;
    for era in ERAS {
        let (hooks, h) = Headless::with_receiver(era).await?;
        let link = h.ask_first(&hooks, era).await?;

        let answered = h.answer_in(&browser, &link, "decline", (3, 2)).await?;
        assert_eq!(answered, "You declined this change", "{era:?}");
        let retry = h.adjust(minus_one()).await?;
        let text = message(&retry);
        assert_eq!(retry.is_error, Some(true), "{era:?}: {text}");
        assert!(
            text.to_lowercase().contains("nothing was saved"),
            "{era:?}: {text}"
        );
        assert!(
            !text.contains("has not answered yet"),
            "{era:?}: the answer counts: {text}"
        );
        assert_eq!(h.saved(), (3, vec![]), "{era:?}: nothing saved");
        h.assert_logged_when(Outcome::Declined, 1, era).await;
        h.assert_logged(Outcome::Applied, 0, era);
        assert_eq!(hooks.deliveries().len(), 1, "{era:?}");
        h.client.cancel().await?;
    }
    browser.close().await
}

/// (c') Approved on the page, but the clock ran out before the retry: the retry is refused and
/// nothing is written; the expired page takes no answer.
#[tokio::test]
async fn an_approval_whose_clock_ran_out_is_not_applied() -> Result<(), Failure> {
    // Long enough for the page to be opened and answered on a busy machine (a 4 s clock ran
    // out before the click under load), short enough to wait out.
    const TTL: std::time::Duration = std::time::Duration::from_secs(8);
    let browser = Browser::start().await?;
    for era in ERAS {
        let hooks = Receiver::start().await?;
        let ttl = TTL.as_secs().to_string();
        let h = Headless::start_with(era, &hooks.url, &["--approval-ttl", &ttl]).await?;
        let asked_at = tokio::time::Instant::now();
        let link = h.ask_first(&hooks, era).await?;
        let answered = h.answer_in(&browser, &link, "approve", (3, 2)).await?;
        assert_eq!(answered, "You approved this change", "{era:?}");

        tokio::time::sleep_until(asked_at + TTL + std::time::Duration::from_millis(500)).await;
        let late = h.adjust(minus_one()).await?;
        let text = message(&late);
        assert_eq!(late.is_error, Some(true), "{era:?}: {text}");
        assert_eq!(h.saved(), (3, vec![]), "{era:?}: nothing saved");
        h.assert_logged(Outcome::Applied, 0, era);
        // The first page is over: opened again, it shows no form.
        browser.open(&link).await?;
        assert_ne!(browser.text("h1").await?, "Approve this change?", "{era:?}");
        assert!(browser.texts("form").await?.is_empty(), "{era:?}");
        h.client.cancel().await?;
    }
    browser.close().await
}

/// (d) A retry with one argument changed is another question: it does not take the approval,
/// and the original retry still applies, once.
#[tokio::test]
async fn a_changed_argument_is_a_new_question() -> Result<(), Failure> {
    for era in ERAS {
        let (hooks, h) = Headless::with_receiver(era).await?;
        let link = h.ask_first(&hooks, era).await?;
        h.answer(&link, "approve").await?;

        let changed = h.adjust(minus_two()).await?;
        let prompt = second_question(&hooks, &link, &changed, era);
        assert!(prompt.contains("stock 3 -> 1"), "{era:?}: {prompt}");
        assert_eq!(
            h.saved(),
            (3, vec![]),
            "{era:?}: the approval of -1 does not apply -2"
        );

        let original = h.adjust(minus_one()).await?;
        h.assert_written(&original, era);
        assert_eq!(h.saved(), (2, vec![movement(-1)]), "{era:?}: once");
        assert_eq!(hooks.deliveries().len(), 2, "{era:?}");
        h.client.cancel().await?;
    }
    Ok(())
}

/// (e) The webhook cannot be reached: nobody was asked, the call says so, nothing is saved.
#[tokio::test]
async fn a_notifier_that_is_down_refuses_the_call() -> Result<(), Failure> {
    for era in ERAS {
        // A loopback port nobody listens on any more.
        let closed = TcpListener::bind("127.0.0.1:0").await?;
        let webhook = format!("http://{}/hook", closed.local_addr()?);
        drop(closed);
        let h = Headless::start(era, &webhook).await?;

        let result = h.adjust(minus_one()).await?;
        let text = message(&result);
        assert_eq!(result.is_error, Some(true), "{era:?}: {text}");
        assert!(text.contains("nobody could be reached"), "{era:?}: {text}");
        assert!(!text.contains("/approvals/"), "{era:?}: {text}");
        assert_eq!(h.saved(), (3, vec![]), "{era:?}: nothing saved");
        h.assert_logged_when(Outcome::NotifyFailed, 1, era).await;
        h.assert_logged(Outcome::Notified, 0, era);
        h.client.cancel().await?;
    }
    Ok(())
}

/// A still-open question, asked again by a 2026-07-28 client without elicitation, spoken to by
/// hand over streamable HTTP: what reaches the client is the "has not answered yet" result, not
/// an input request carrying the page's link; the page stays open for the person, and the
/// call made again after they approve applies once.
#[tokio::test]
async fn a_still_open_question_never_sends_the_link_to_the_client() -> Result<(), Failure> {
    let hooks = Receiver::start().await?;
    let dir = tempfile::tempdir()?;
    let secret_file = dir.path().join("webhook-secret");
    std::fs::write(&secret_file, SECRET)?;
    let args = [
        "--approval-page",
        "--notify-webhook",
        hooks.url.as_str(),
        "--notify-secret-file",
        path_str(&secret_file),
    ];
    let server = common::HttpChild::start(dir.path(), &args, Some("true")).await?;
    let db = FileView::new(dir.path().join("store.db"));
    let raw = workspace_tests::RawHttp::new(server.url.clone());
    // No elicitation capability at all.
    let headless = Value::Null;

    let first = raw
        .call_2026_asking(&[], &headless, "adjust_stock", &minus_one(), None)
        .await?;
    let link = hooks.deliveries()[0].link();
    assert!(!first.body.contains(page_id(&link)), "{}", first.body);
    let (is_error, text) = first.tool_result().expect("a complete result");
    assert!(is_error && text.contains("a person was asked"), "{text}");

    let early = raw
        .call_2026_asking(&[], &headless, "adjust_stock", &minus_one(), None)
        .await?;
    assert!(
        !early.body.contains(page_id(&link)),
        "the page's link reaches the client: {}",
        early.body
    );
    let (is_error, text) = early.tool_result().expect("a complete result");
    assert!(is_error && text.contains("has not answered yet"), "{text}");
    assert_eq!(hooks.deliveries().len(), 1, "no second notice");
    assert_eq!((db.stock(SKU)?, db.movements()?), (3, vec![]));

    let page = reqwest::get(&link).await?;
    assert_eq!(page.status(), 200, "the page is still open");
    let csrf = {
        let page = page.text().await?;
        let marker = r#"name="csrf" value=""#;
        let start = page.find(marker).expect("a csrf field") + marker.len();
        page[start..start + 64].to_owned()
    };
    let approved = reqwest::Client::new()
        .post(&link)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("decision=approve&csrf={csrf}"))
        .send()
        .await?;
    assert_eq!(approved.status(), 200);
    let applied = raw
        .call_2026_asking(&[], &headless, "adjust_stock", &minus_one(), None)
        .await?;
    let (is_error, text) = applied.tool_result().expect("a complete result");
    assert!(!is_error, "{text}");
    assert_eq!((db.stock(SKU)?, db.movements()?), (2, vec![movement(-1)]));
    Ok(())
}
