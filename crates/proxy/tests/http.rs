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
use tokio::io::{AsyncBufReadExt as _, BufReader};
use workspace_tests::{call, connect_over, enveloped_data, is_error, serving_url};

type Failure = Box<dyn std::error::Error + Send + Sync>;

const PROXY: &str = env!("CARGO_BIN_EXE_mcp-write-guard-proxy");
const ISSUER: &str = "https://issuer.proxy.test";
const AUDIENCE: &str = "notes-proxy";
const WRITE_SCOPE: &str = "notes:write";

fn peer_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peer")
}

/// An Ed25519 signing key made from a random seed, and its JWKS.
struct SigningKey {
    key: jsonwebtoken::EncodingKey,
}

impl SigningKey {
    fn generate() -> Self {
        let mut seed = Vec::with_capacity(32);
        seed.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        seed.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        // PKCS#8 v1 wrapping of an Ed25519 private key: this header, then the 32-byte seed.
        let mut der = vec![
            0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
            0x04, 0x20,
        ];
        der.extend_from_slice(&seed);
        Self {
            key: jsonwebtoken::EncodingKey::from_ed_der(&der),
        }
    }

    fn write_jwks(&self, dir: &Path) -> PathBuf {
        let mut jwk =
            jsonwebtoken::jwk::Jwk::from_encoding_key(&self.key, jsonwebtoken::Algorithm::EdDSA)
                .unwrap();
        jwk.common.key_id = Some("k1".to_owned());
        let path = dir.join("jwks.json");
        std::fs::write(&path, json!({"keys": [jwk]}).to_string()).unwrap();
        path
    }

    fn token(&self, sub: &str, scope: &str) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let claims = json!({
            "iss": ISSUER, "aud": AUDIENCE, "sub": sub, "scope": scope,
            "iat": now, "nbf": now - 5, "exp": now + 600,
        });
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
        header.kid = Some("k1".to_owned());
        jsonwebtoken::encode(&header, &claims, &self.key).unwrap()
    }
}

/// The proxy serving `--http 127.0.0.1:0` with auth in front of the fixture; killed when
/// dropped.
struct Proxy {
    _child: tokio::process::Child,
    url: String,
}

async fn start(dir: &Path, key: &SigningKey, notes: &Path) -> Result<Proxy, Failure> {
    let jwks = key.write_jwks(dir);
    let mut child = tokio::process::Command::new(PROXY)
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
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut stderr = BufReader::new(child.stderr.take().ok_or("no stderr")?);
    let url = serving_url(&mut stderr).await?;
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
    let key = SigningKey::generate();
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
        let alice = client(&proxy, &key.token("alice", WRITE_SCOPE), &user, era).await;
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
        let reader = client(&proxy, &key.token("bob", "notes:read"), &reader_user, era).await;
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
