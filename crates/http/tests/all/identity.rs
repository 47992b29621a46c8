//! Attacks on who is asking over streamable HTTP: tokens the bearer layer should refuse, and
//! header spellings around it.

use std::sync::Arc;

use axum::{Extension, Router, routing::get};
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey};
use mcp_write_guard_http::{AuthConfig, BearerAuth, BoundedSessions, JwksSource};
use mcp_write_guard_rmcp::AuthenticatedSubject;
use serde_json::{Value, json};

/// Request headers, as (name, value).
type Headers = Vec<(&'static str, String)>;

const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "api";
const KID: &str = "k1";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// An Ed25519 key from a random seed, and its public JWK under [`KID`].
fn key() -> (EncodingKey, Value) {
    crate::bearer::key(KID)
}

/// Signs the exact header and payload texts (so that they may hold what serde cannot write,
/// such as a claim twice).
fn sign_raw(key: &EncodingKey, header: &str, payload: &str) -> String {
    let message = format!("{}.{}", b64(header.as_bytes()), b64(payload.as_bytes()));
    let signature = jsonwebtoken::crypto::sign(message.as_bytes(), key, Algorithm::EdDSA).unwrap();
    format!("{message}.{signature}")
}

async fn layer() -> (BearerAuth, EncodingKey, tempfile::TempDir) {
    let (encoding, jwk) = key();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, json!({"keys": [jwk]}).to_string()).unwrap();
    let auth = BearerAuth::new(AuthConfig::new(
        ISSUER,
        AUDIENCE,
        JwksSource::File(path),
        "http://127.0.0.1:1/mcp",
    ))
    .await
    .unwrap();
    (auth, encoding, dir)
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

const HEADER: &str = r#"{"alg":"EdDSA","kid":"k1"}"#;

/// Tokens signed by the issuer's own key whose text a second parser could read differently
/// (a claim twice, an array where a string belongs, a `crit` extension nobody implements):
/// refused, never read as another principal.
#[tokio::test]
async fn signed_tokens_with_ambiguous_claims_are_refused() {
    let (auth, key, _dir) = layer().await;
    let exp = now() + 300;
    let past = now() - 3600;
    let good = format!(r#"{{"iss":"{ISSUER}","aud":"{AUDIENCE}","sub":"alice","exp":{exp}}}"#);
    let ok = auth.verify_token(&sign_raw(&key, HEADER, &good)).await;
    assert_eq!(ok.as_ref().map(AuthenticatedSubject::as_str), Ok("alice"));

    let cases = [
        (
            "duplicate sub",
            HEADER.to_owned(),
            format!(
                r#"{{"iss":"{ISSUER}","aud":"{AUDIENCE}","sub":"alice","sub":"bob","exp":{exp}}}"#
            ),
        ),
        (
            "duplicate exp, past last",
            HEADER.to_owned(),
            format!(
                r#"{{"iss":"{ISSUER}","aud":"{AUDIENCE}","sub":"alice","exp":{exp},"exp":{past}}}"#
            ),
        ),
        (
            "duplicate iss",
            HEADER.to_owned(),
            format!(
                r#"{{"iss":"https://evil","iss":"{ISSUER}","aud":"{AUDIENCE}","sub":"alice","exp":{exp}}}"#
            ),
        ),
        (
            "duplicate alg in header",
            r#"{"alg":"none","alg":"EdDSA","kid":"k1"}"#.to_owned(),
            good.clone(),
        ),
        (
            "crit names an unknown extension",
            r#"{"alg":"EdDSA","kid":"k1","crit":["exp-ext"],"exp-ext":1}"#.to_owned(),
            good.clone(),
        ),
        (
            "nbf a string",
            HEADER.to_owned(),
            format!(
                r#"{{"iss":"{ISSUER}","aud":"{AUDIENCE}","sub":"alice","exp":{exp},"nbf":"99999999999"}}"#
            ),
        ),
        (
            "exp a float far away",
            HEADER.to_owned(),
            format!(r#"{{"iss":"{ISSUER}","aud":"{AUDIENCE}","sub":"alice","exp":1e300}}"#),
        ),
        (
            "iss array",
            HEADER.to_owned(),
            format!(r#"{{"iss":["{ISSUER}"],"aud":"{AUDIENCE}","sub":"alice","exp":{exp}}}"#),
        ),
    ];
    for (case, header, payload) in cases {
        let verdict = auth.verify_token(&sign_raw(&key, &header, &payload)).await;
        assert!(verdict.is_err(), "{case}: {verdict:?}");
    }
}

/// `Authorization` spellings: the scheme in any case and extra spaces pass; a tab, two headers
/// or two tokens in one header are refused with the challenge; a session nobody owns is 404.
#[tokio::test]
async fn authorization_header_spellings() {
    let (auth, key, _dir) = layer().await;
    let exp = now() + 300;
    let good = format!(r#"{{"iss":"{ISSUER}","aud":"{AUDIENCE}","sub":"alice","exp":{exp}}}"#);
    let token = sign_raw(&key, HEADER, &good);
    let app = auth.protect(
        Router::new().route(
            "/mcp",
            get(
                |Extension(subject): Extension<AuthenticatedSubject>| async move {
                    subject.as_str().to_owned()
                },
            ),
        ),
        Arc::new(BoundedSessions::new(4)),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = reqwest::Client::new();
    let cases: Vec<(&str, u16, Headers)> = vec![
        (
            "plain",
            200,
            vec![("authorization", format!("Bearer {token}"))],
        ),
        (
            "lower",
            200,
            vec![("authorization", format!("bearer {token}"))],
        ),
        (
            "two spaces",
            200,
            vec![("authorization", format!("Bearer  {token}"))],
        ),
        (
            "tab",
            401,
            vec![("authorization", format!("Bearer\t{token}"))],
        ),
        (
            "two headers",
            401,
            vec![
                ("authorization", format!("Bearer {token}")),
                ("authorization", format!("Bearer {token}")),
            ],
        ),
        (
            "comma joined",
            401,
            vec![("authorization", format!("Bearer {token}, Bearer {token}"))],
        ),
        (
            "session nobody owns",
            404,
            vec![
                ("authorization", format!("Bearer {token}")),
                ("mcp-session-id", "x".to_owned()),
            ],
        ),
    ];
    for (case, expected, headers) in cases {
        let mut request = client.get(&url);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned());
        let body = response.text().await.unwrap();
        assert_eq!(status, expected, "{case}: {challenge:?} {body}");
        assert_eq!(status == 401, challenge.is_some(), "{case}: {challenge:?}");
        if status == 200 {
            assert_eq!(body, "alice", "{case}");
        }
    }
}

#[derive(Clone)]
struct Empty;
impl rmcp::ServerHandler for Empty {}

/// A session that closed when idle no longer counts against its owner, and its id is 404 for
/// its own owner afterwards.
#[tokio::test]
async fn an_idle_session_leaves_its_owner_and_is_not_honoured_afterwards() {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let (auth, key, _dir) = layer().await;
    let exp = now() + 300;
    let token = sign_raw(
        &key,
        HEADER,
        &format!(r#"{{"iss":"{ISSUER}","aud":"{AUDIENCE}","sub":"alice","exp":{exp}}}"#),
    );
    let sessions = Arc::new(
        BoundedSessions::with_idle(8, std::time::Duration::from_millis(300)).with_max_per_owner(1),
    );
    let service = StreamableHttpService::new(
        || Ok(Empty),
        Arc::clone(&sessions),
        StreamableHttpServerConfig::default(),
    );
    let app = auth.protect(
        Router::new().nest_service("/mcp", service),
        Arc::clone(&sessions),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let post = |session: Option<String>| {
        let url = url.clone();
        let token = token.clone();
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}});
            let mut request = reqwest::Client::new()
                .post(&url)
                .header("authorization", format!("Bearer {token}"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream");
            if let Some(session) = session {
                request = request
                    .header("mcp-session-id", session)
                    .header("mcp-protocol-version", "2025-06-18");
            }
            request.body(body.to_string()).send().await.unwrap()
        }
    };
    let first = post(None).await;
    assert_eq!(first.status(), 200);
    let id = first.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        post(None).await.status(),
        429,
        "the owner's one place is taken"
    );
    let mut freed = false;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        if sessions.held_by(r#"oauth:["https://issuer.test","alice"]"#) == 0 {
            freed = true;
            break;
        }
    }
    assert!(freed, "the idle session still counts against its owner");
    assert_eq!(post(Some(id)).await.status(), 404, "an expired session");
    assert_eq!(post(None).await.status(), 200);
}
