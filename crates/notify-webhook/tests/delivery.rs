//! Deliveries to receivers on 127.0.0.1: what arrives, retries, bounds, refusals.

// The helpers below are test code too: a panic there is a failed test.
#![allow(clippy::unwrap_used)]

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{Router, body::Bytes, extract::State, http::HeaderMap, http::StatusCode, http::Uri};
use mcp_write_guard_core::ManualClock;
use mcp_write_guard_rmcp::notify::{Notice, Notifier, NotifyError};
use mcp_write_guard_webhook::{WebhookNotifier, verify_signature};
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::{net::TcpListener, sync::Mutex};

const SECRET: &[u8] = b"a test secret that is long enough";
/// A path and a query that stand for tokens: they must not reach the failure reasons.
const PATH_AND_QUERY: &str = "/hooks/pathtoken?auth=querytoken";
/// A bound far above any of these tests' schedules, for slow machines.
const GENEROUS: Duration = Duration::from_secs(10);

fn notice() -> Notice {
    mcp_write_guard_rmcp::test_util::notice("https://approve.example/p/0b7f3a52?k=opaque")
}

/// One request as the receiver saw it.
#[derive(Debug, Clone)]
struct Received {
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

/// A receiver that answers the statuses in `script` in turn (the last one from then on) and
/// records every request.
struct Receiver {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    async fn start(script: Vec<StatusCode>) -> Self {
        let received = Arc::new(Mutex::new(Vec::new()));
        let state = (Arc::new(script), received.clone());
        let app = Router::new().fallback(record).with_state(state);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, received }
    }

    fn url(&self) -> String {
        format!("http://{}{PATH_AND_QUERY}", self.addr)
    }

    async fn received(&self) -> Vec<Received> {
        self.received.lock().await.clone()
    }
}

type ReceiverState = (Arc<Vec<StatusCode>>, Arc<Mutex<Vec<Received>>>);

async fn record(
    State((script, received)): State<ReceiverState>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let mut received = received.lock().await;
    let n = received.len();
    received.push(Received { uri, headers, body });
    script
        .get(n)
        .or(script.last())
        .copied()
        .unwrap_or(StatusCode::OK)
}

fn assert_reason_hides_tokens(reason: &str) {
    for hidden in ["pathtoken", "querytoken", "hooks", "a test secret"] {
        assert!(!reason.contains(hidden), "{reason}");
    }
}

/// Asserts that the failure's reason says each of `says`, and hides the tokens.
fn assert_reason(error: &NotifyError, says: &[&str]) {
    for said in says {
        assert!(error.reason().contains(said), "{error}");
    }
    assert_reason_hides_tokens(error.reason());
}

#[tokio::test]
async fn a_delivery_arrives_once_signed_with_the_right_headers_and_body() {
    let receiver = Receiver::start(vec![StatusCode::OK]).await;
    let sent_at = OffsetDateTime::from_unix_timestamp(1_767_225_600).unwrap();
    let notifier = WebhookNotifier::new(&receiver.url(), SECRET)
        .unwrap()
        .clock(ManualClock::new(sent_at));
    assert_eq!(notifier.channel(), "webhook");

    notifier.notify(&notice()).await.unwrap();

    let received = receiver.received().await;
    assert_eq!(received.len(), 1, "{received:?}");
    let Received { uri, headers, body } = &received[0];
    assert_eq!(uri.to_string(), PATH_AND_QUERY);
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(
        headers["user-agent"],
        concat!("mcp-write-guard-webhook/", env!("CARGO_PKG_VERSION"))
    );
    let signature = headers["x-signature-256"].to_str().unwrap();
    assert!(verify_signature(SECRET, body, signature));

    let value: Value = serde_json::from_slice(body).unwrap();
    assert_eq!(
        value,
        json!({
            "approvalId": "0b7f3a52-2c1e-4f4e-9a51-3c6d2e8f9a10",
            "server": "inventory",
            "tool": "adjust_stock",
            "prompt": "Adjust \"TLS-002\": stock 3 -> 1?",
            "url": "https://approve.example/p/0b7f3a52?k=opaque",
            "expiresAt": "2026-01-01T00:02:00Z",
            "sentAt": "2026-01-01T00:00:00Z",
            "text": "Adjust \"TLS-002\": stock 3 -&gt; 1?\n\n\
                     Approve or decline: https://approve.example/p/0b7f3a52?k=opaque\n\
                     The question expires at 2026-01-01T00:02:00Z.",
        })
    );

    // What a receiver must refuse.
    let mut changed = body.to_vec();
    changed[10] ^= 0x01;
    assert!(
        !verify_signature(SECRET, &changed, signature),
        "one byte changed"
    );
    assert!(
        !verify_signature(b"another secret", body, signature),
        "wrong secret"
    );
    let digits = signature.strip_prefix("sha256=").unwrap();
    assert!(
        !verify_signature(SECRET, body, &format!("sha256={}", digits.to_uppercase())),
        "uppercase hex"
    );
    assert!(!verify_signature(SECRET, body, digits), "no sha256= prefix");
}

#[tokio::test]
async fn two_server_errors_then_delivered() {
    let receiver = Receiver::start(vec![
        StatusCode::INTERNAL_SERVER_ERROR,
        StatusCode::INTERNAL_SERVER_ERROR,
        StatusCode::OK,
    ])
    .await;
    let notifier = WebhookNotifier::new(&receiver.url(), SECRET).unwrap();

    notifier.notify(&notice()).await.unwrap();

    let received = receiver.received().await;
    assert_eq!(received.len(), 3);
    // Every attempt sends the same signed bytes.
    assert!(received.iter().all(|r| r.body == received[0].body));
    assert!(
        received
            .iter()
            .all(|r| r.headers["x-signature-256"] == received[0].headers["x-signature-256"])
    );
}

#[tokio::test]
async fn server_errors_past_the_retries_fail() {
    let receiver = Receiver::start(vec![StatusCode::SERVICE_UNAVAILABLE]).await;
    let notifier = WebhookNotifier::new(&receiver.url(), SECRET)
        .unwrap()
        .retries(1);

    let error = notifier.notify(&notice()).await.unwrap_err();

    assert_eq!(receiver.received().await.len(), 2);
    assert_reason(&error, &["after 2 attempts", "503"]);
}

#[tokio::test]
async fn a_client_error_is_final_after_one_attempt() {
    let receiver = Receiver::start(vec![StatusCode::BAD_REQUEST, StatusCode::OK]).await;
    let notifier = WebhookNotifier::new(&receiver.url(), SECRET).unwrap();

    let error = notifier.notify(&notice()).await.unwrap_err();

    assert_eq!(receiver.received().await.len(), 1);
    assert_reason(&error, &["400", "attempt 1 of 3"]);
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    let receiver = Receiver::start(vec![StatusCode::TEMPORARY_REDIRECT]).await;
    let notifier = WebhookNotifier::new(&receiver.url(), SECRET).unwrap();

    let error = notifier.notify(&notice()).await.unwrap_err();

    assert_eq!(receiver.received().await.len(), 1);
    assert!(error.reason().contains("not followed"), "{error}");
}

#[tokio::test]
async fn a_receiver_that_never_answers_fails_within_the_bound() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            held.push(socket); // read nothing, answer nothing, keep it open
        }
    });
    let notifier = WebhookNotifier::new(&format!("http://{addr}{PATH_AND_QUERY}"), SECRET)
        .unwrap()
        .timeout(Duration::from_millis(200));
    assert_eq!(notifier.max_delivery_time(), Duration::from_millis(1_200));

    let start = Instant::now();
    let error = notifier.notify(&notice()).await.unwrap_err();
    let took = start.elapsed();

    assert!(took < GENEROUS, "{took:?}");
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
    assert_reason(&error, &["no answer within 200ms"]);
}

#[tokio::test]
async fn nothing_listening_fails() {
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let notifier = WebhookNotifier::new(&format!("http://{addr}{PATH_AND_QUERY}"), SECRET)
        .unwrap()
        .timeout(Duration::from_millis(500));

    let start = Instant::now();
    let error = notifier.notify(&notice()).await.unwrap_err();

    assert!(start.elapsed() < GENEROUS);
    assert_reason(
        &error,
        &["after 3 attempts", "could not connect", &addr.to_string()],
    );
}

#[test]
fn debug_does_not_show_the_secret() {
    let notifier =
        WebhookNotifier::new(&format!("http://127.0.0.1:9{PATH_AND_QUERY}"), SECRET).unwrap();
    let shown = format!("{notifier:?}");
    assert!(!shown.contains("a test secret"), "{shown}");
    assert_reason_hides_tokens(&shown);
    let alternate = format!("{notifier:#?}");
    assert_reason_hides_tokens(&alternate);
}
