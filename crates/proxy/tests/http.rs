//! The proxy serving streamable HTTP with bearer-token auth, in front of the fixture upstream,
//! driven by rmcp clients in both protocol eras: a request without a token gets 401; with a
//! token, a write is asked and applied once; a token without the write scope writes nothing.
//! Each case asserts on the fixture's notes file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::{SystemTime, UNIX_EPOCH},
};

use axum::response::IntoResponse as _;
use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::test_util::{ERAS, Reply, ScriptedClient};
use rmcp::transport::{
    StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;
use workspace_tests::{SigningKey, call, connect_over, enveloped_data, is_error, spawn_serving};

type Failure = Box<dyn std::error::Error + Send + Sync>;

const PROXY: &str = env!("CARGO_BIN_EXE_mcp-write-guard-proxy");
const ISSUER: &str = "https://issuer.proxy.test";
const AUDIENCE: &str = "notes-proxy";
const WRITE_SCOPE: &str = "notes:write";

fn peer_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peer")
}

/// A token for `sub` granting `scope`, signed by `key`, valid for ten minutes.
fn token(key: &SigningKey, sub: &str, scope: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": sub, "scope": scope,
        "iat": now, "nbf": now - 5, "exp": now + 600,
    });
    key.sign(&claims).unwrap()
}

/// The proxy serving `--http 127.0.0.1:0` with auth in front of the fixture; killed when
/// dropped.
struct Proxy {
    _child: tokio::process::Child,
    url: String,
}

async fn start(dir: &Path, key: &SigningKey, notes: &Path) -> Result<Proxy, Failure> {
    let jwks = key.write_jwks(dir).unwrap();
    let mut command = tokio::process::Command::new(PROXY);
    command
        .args(["--http", "127.0.0.1:0", "--auth-issuer", ISSUER])
        .args([
            "--auth-audience",
            AUDIENCE,
            "--auth-write-scope",
            WRITE_SCOPE,
        ])
        .arg("--auth-jwks")
        .arg(&jwks)
        .arg("--")
        .arg("node")
        .arg(peer_dir().join("fixture-upstream.mjs"))
        .arg("--notes")
        .arg(notes)
        .env("MCP_WRITES_ENABLED", "true")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null());
    let (child, mut stderr, url) = spawn_serving(&mut command).await?;
    tokio::spawn(async move {
        let mut line = String::new();
        while stderr.read_line(&mut line).await.is_ok_and(|n| n > 0) {
            line.clear();
        }
    });
    Ok(Proxy { _child: child, url })
}

async fn client(
    proxy: &Proxy,
    token: &str,
    user: &ScriptedClient,
    era: Era,
) -> workspace_tests::Client {
    let config =
        StreamableHttpClientTransportConfig::with_uri(proxy.url.clone()).auth_header(token);
    connect_over(
        StreamableHttpClientTransport::from_config(config),
        user,
        era,
    )
    .await
    .unwrap()
}

fn notes(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn over_http_with_bearer_tokens_each_era_writes_only_what_was_approved() {
    let dir = tempfile::tempdir().unwrap();
    let key = SigningKey::generate("k1");
    let notes_file = dir.path().join("notes.txt");
    // The peer packages (the SDK the fixture is written with), as the other tests install them.
    assert!(
        peer_dir()
            .join("node_modules/@modelcontextprotocol/sdk")
            .exists()
            || std::process::Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--prefix"])
                .arg(peer_dir())
                .status()
                .is_ok_and(|s| s.success()),
        "npm ci in crates/proxy/tests/peer"
    );
    let proxy = start(dir.path(), &key, &notes_file).await.unwrap();

    // No token: 401 with the metadata's address, and nothing reaches the upstream.
    let refused = reqwest::Client::new()
        .post(&proxy.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert!(
        refused
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("resource_metadata=")),
        "{:?}",
        refused.headers()
    );

    let mut expected = String::new();
    for era in ERAS {
        let user = ScriptedClient::answering([Reply::Approve]);
        let alice = client(&proxy, &token(&key, "alice", WRITE_SCOPE), &user, era).await;
        let line = format!("from {}", era.as_str());
        let result = call(&alice, "append_note", json!({ "text": line }))
            .await
            .unwrap();
        assert!(!is_error(&result), "{era:?}: {result:?}");
        assert_eq!(user.asked().len(), 1, "{era:?}: asked once");
        assert!(user.asked()[0].contains(&line), "{:?}", user.asked());
        expected.push_str(&line);
        expected.push('\n');
        assert_eq!(notes(&notes_file), expected, "{era:?}: applied once");
        // The read comes back in the envelope.
        let read = call(&alice, "read_notes", json!({})).await.unwrap();
        let data: &Value = enveloped_data(&read).unwrap();
        assert!(data.to_string().contains(&line), "{data}");

        // A token without the write scope: refused before anyone is asked, nothing written.
        let reader_user = ScriptedClient::answering([Reply::Approve]);
        let reader = client(&proxy, &token(&key, "bob", "notes:read"), &reader_user, era).await;
        let denied = call(&reader, "append_note", json!({ "text": "bob" }))
            .await
            .unwrap();
        assert!(is_error(&denied), "{era:?}: {denied:?}");
        assert!(reader_user.asked().is_empty(), "{era:?}: nobody asked");
        assert_eq!(notes(&notes_file), expected, "{era:?}: nothing written");
    }
}

/// The proxy over stdio in front of a streamable-HTTP upstream (`--upstream-url`) that needs a
/// bearer token (`--upstream-bearer-file`): the reference store's plain server, unguarded, whose
/// `adjust_stock` writes at once. Through the proxy it is asked and applied once; a declined
/// call leaves the stock as it was; without the right token the proxy does not start.
#[tokio::test(flavor = "multi_thread")]
async fn an_http_upstream_behind_a_bearer_token_is_guarded_like_a_command() {
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(store_server::Db::open(dir.path().join("store.db")).unwrap());
    let router = store_server::http_router(store_server::StoreServer::new(Arc::clone(&db))).layer(
        axum::middleware::from_fn(
            |request: axum::extract::Request, next: axum::middleware::Next| async move {
                let bearer = request
                    .headers()
                    .get("authorization")
                    .and_then(|v| v.to_str().ok());
                if bearer == Some("Bearer s3cret-upstream") {
                    next.run(request).await
                } else {
                    axum::http::StatusCode::UNAUTHORIZED.into_response()
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });

    let token = dir.path().join("token");
    let proxy = |token_text: &str| {
        std::fs::write(&token, token_text).unwrap();
        let mut command = tokio::process::Command::new(PROXY);
        command
            .args(["--upstream-url", &url, "--upstream-bearer-file"])
            .arg(&token)
            .env("MCP_WRITES_ENABLED", "true")
            .stderr(Stdio::null());
        rmcp::transport::TokioChildProcess::new(command).unwrap()
    };

    let wrong = ScriptedClient::answering([]);
    assert!(
        connect_over(proxy("not-the-token\n"), &wrong, Era::Legacy)
            .await
            .is_err(),
        "a refused token stops the proxy before it serves"
    );

    let before = db.get_product("TLS-002").unwrap().stock;
    let user = ScriptedClient::answering([Reply::Decline, Reply::Approve]);
    let client = connect_over(proxy("s3cret-upstream\n"), &user, Era::Legacy)
        .await
        .unwrap();
    let adjust = json!({"sku": "TLS-002", "delta": 2, "reason": "found two"});
    let declined = call(&client, "adjust_stock", adjust.clone()).await.unwrap();
    assert!(is_error(&declined), "{declined:?}");
    assert_eq!(db.get_product("TLS-002").unwrap().stock, before);
    let applied = call(&client, "adjust_stock", adjust).await.unwrap();
    assert!(!is_error(&applied), "{applied:?}");
    assert_eq!(user.asked().len(), 2);
    assert!(user.asked()[1].contains("found two"), "{:?}", user.asked());
    assert_eq!(
        db.get_product("TLS-002").unwrap().stock,
        before + 2,
        "applied once"
    );
}
