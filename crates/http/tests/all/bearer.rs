//! Feature `http`, in process: the bearer layer fetching its JWKS from a URL (cached, refetched
//! for a rotated key, never for every invented `kid`), and sessions that close when idle.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{Router, extract::State, routing::get};
use jsonwebtoken::{Algorithm, EncodingKey, Header, jwk::Jwk};
use mcp_write_guard_http::{AuthConfig, BearerAuth, BearerRejection, BoundedSessions, JwksSource};
use parking_lot::Mutex;
use rmcp::{
    ServerHandler,
    transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService},
};
use serde_json::{Value, json};

const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "api";

/// An Ed25519 key from a random seed, and its public JWK under `kid`.
pub(crate) fn key(kid: &str) -> (EncodingKey, Value) {
    let mut der = vec![
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    der.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    der.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    let encoding = EncodingKey::from_ed_der(&der);
    let mut jwk = Jwk::from_encoding_key(&encoding, Algorithm::EdDSA).unwrap();
    jwk.common.key_id = Some(kid.to_owned());
    (encoding, serde_json::to_value(jwk).unwrap())
}

fn token(key: &EncodingKey, kid: &str, sub: &str) -> String {
    let now = jsonwebtoken::get_current_timestamp();
    let claims = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": now + 300,
                        "scope": "notes:read notes:write"});
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, &claims, key).unwrap()
}

/// A JWKS endpoint whose document the test can change, counting its fetches.
#[derive(Clone, Default)]
struct KeyServer {
    document: Arc<Mutex<Value>>,
    fetches: Arc<AtomicUsize>,
}

impl KeyServer {
    /// How many times the document was fetched so far.
    fn fetched(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

async fn serve_keys(keys: KeyServer) -> String {
    async fn jwks(State(keys): State<KeyServer>) -> axum::Json<Value> {
        keys.fetches.fetch_add(1, Ordering::SeqCst);
        axum::Json(keys.document.lock().clone())
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/jwks.json", get(jwks))
        .with_state(keys);
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test]
async fn a_jwks_url_is_fetched_once_and_again_only_for_a_rotated_key() {
    let (first, first_jwk) = key("k1");
    let keys = KeyServer::default();
    *keys.document.lock() = json!({"keys": [first_jwk.clone()]});
    let url = serve_keys(keys.clone()).await;
    let mut config = AuthConfig::new(
        ISSUER,
        AUDIENCE,
        JwksSource::parse(&url).unwrap(),
        "http://127.0.0.1:1/mcp",
    );
    config.unknown_kid_refetch = Duration::from_secs(1);
    let auth = BearerAuth::new(config).await.unwrap();
    assert_eq!(keys.fetched(), 1, "fetched when built");

    for _ in 0..3 {
        let subject = auth
            .verify_token(&token(&first, "k1", "alice"))
            .await
            .unwrap();
        assert_eq!(subject.as_str(), "alice");
        assert_eq!(subject.issuer(), Some(ISSUER));
        assert!(subject.has_scope("notes:write"));
    }
    assert_eq!(keys.fetched(), 1, "served from the cache");

    // The issuer rotates: a token names k2, which the cache does not hold.
    let (second, second_jwk) = key("k2");
    *keys.document.lock() = json!({"keys": [first_jwk, second_jwk]});
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let subject = auth
        .verify_token(&token(&second, "k2", "bob"))
        .await
        .unwrap();
    assert_eq!(subject.as_str(), "bob");
    assert_eq!(keys.fetched(), 2, "one fetch for the new kid");

    // Invented kids: refused; right after a fetch none fetches, and once the interval passed
    // twenty of them fetch once.
    let (stranger, _) = key("k3");
    let invented = token(&stranger, "invented", "mallory");
    assert_eq!(
        auth.verify_token(&invented).await.unwrap_err(),
        BearerRejection::Signature
    );
    assert_eq!(keys.fetched(), 2, "within the interval");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for i in 0..20 {
        let forged = token(&stranger, &format!("invented-{i}"), "mallory");
        assert_eq!(
            auth.verify_token(&forged).await.unwrap_err(),
            BearerRejection::Signature
        );
    }
    assert_eq!(keys.fetched(), 3, "one fetch for twenty");
    // A key the JWKS does not hold, under a kid it does: refused without a fetch.
    let wrong = token(&stranger, "k1", "mallory");
    assert_eq!(
        auth.verify_token(&wrong).await.unwrap_err(),
        BearerRejection::Signature
    );
    assert_eq!(keys.fetched(), 3);
}

#[tokio::test]
async fn an_unreachable_or_empty_jwks_stops_the_layer_from_being_built() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/jwks.json", listener.local_addr().unwrap())
    };
    let config = |jwks: &str| {
        AuthConfig::new(
            ISSUER,
            AUDIENCE,
            JwksSource::parse(jwks).unwrap(),
            "http://h/mcp",
        )
    };
    let error = BearerAuth::new(config(&closed)).await.unwrap_err();
    assert!(error.to_string().contains(&closed), "{error}");

    let keys = KeyServer::default();
    *keys.document.lock() = json!({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]});
    let url = serve_keys(keys).await;
    let error = BearerAuth::new(config(&url)).await.unwrap_err();
    assert!(
        error.to_string().contains("no usable signature key"),
        "{error}"
    );

    assert!(JwksSource::parse("http://keys.example/jwks.json").is_err());
}

#[derive(Clone)]
struct Empty;
impl ServerHandler for Empty {}

async fn initialize(url: &str) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_idle_session_closes_and_frees_its_place() {
    let sessions = Arc::new(BoundedSessions::with_idle(1, Duration::from_millis(300)));
    let service = StreamableHttpService::new(
        || Ok(Empty),
        Arc::clone(&sessions),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = Router::new().nest_service("/mcp", service);
    tokio::spawn(async move { axum::serve(listener, app).await });

    assert_eq!(initialize(&url).await.status(), 200);
    assert_eq!(sessions.live().await, 1);
    assert_ne!(
        initialize(&url).await.status(),
        200,
        "the one place is taken"
    );
    let mut freed = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if sessions.live().await == 0 {
            freed = true;
            break;
        }
    }
    assert!(freed, "the idle session did not close");
    assert_eq!(initialize(&url).await.status(), 200);
}

/// Serves `document` over https with a fresh self-signed certificate for 127.0.0.1; the URL,
/// the certificate (PEM) and the fetch count.
async fn serve_keys_over_tls(document: Value) -> (String, String, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls;

    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    let pem = certified.cert.pem();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![certified.cert.der().clone()], key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/jwks.json", listener.local_addr().unwrap());
    let fetches = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&fetches);
    let body = document.to_string();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let Ok(mut tls) = acceptor.accept(stream).await else {
                continue; // a client that did not trust the certificate
            };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            counted.fetch_add(1, Ordering::SeqCst);
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tls.write_all(response.as_bytes()).await;
            let _ = tls.shutdown().await;
        }
    });
    (url, pem, fetches)
}

#[tokio::test]
async fn a_jwks_over_https_is_fetched_from_a_trusted_server_only() {
    let (key, jwk) = key("k1");
    let (url, ca, fetches) = serve_keys_over_tls(json!({"keys": [jwk]})).await;
    let config = || {
        AuthConfig::new(
            ISSUER,
            AUDIENCE,
            JwksSource::parse(&url).unwrap(),
            "https://mcp.example/mcp",
        )
    };

    // The public web roots do not vouch for a self-signed certificate: no keys, no layer.
    let error = BearerAuth::new(config()).await.unwrap_err();
    assert!(error.to_string().contains(&url), "{error}");
    assert_eq!(fetches.load(Ordering::SeqCst), 0);

    // Trusting its CA: fetched once over TLS, and tokens verify.
    let auth = BearerAuth::new(config().with_jwks_roots(ca.as_bytes()))
        .await
        .unwrap();
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
    let subject = auth
        .verify_token(&token(&key, "k1", "alice"))
        .await
        .unwrap();
    assert_eq!(subject.as_str(), "alice");

    let error = BearerAuth::new(config().with_jwks_roots("not a certificate"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("no PEM certificate"), "{error}");
}

/// Run with the proxy variables set by
/// [`a_plain_http_jwks_on_loopback_never_goes_through_a_proxy`]: builds the layer from a JWKS on
/// loopback.
#[tokio::test]
#[ignore = "run by a_plain_http_jwks_on_loopback_never_goes_through_a_proxy"]
async fn loopback_jwks_with_proxy_variables_set() {
    assert!(
        std::env::var_os("HTTP_PROXY").is_some(),
        "run by its parent test"
    );
    let (_, jwk) = key("k1");
    let keys = KeyServer::default();
    *keys.document.lock() = json!({"keys": [jwk]});
    let url = serve_keys(keys.clone()).await;
    let config = AuthConfig::new(
        ISSUER,
        AUDIENCE,
        JwksSource::parse(&url).unwrap(),
        "http://127.0.0.1:1/mcp",
    );
    BearerAuth::new(config).await.unwrap();
    assert_eq!(keys.fetched(), 1);
}

#[test]
fn a_plain_http_jwks_on_loopback_never_goes_through_a_proxy() {
    // Keys fetched over plain http are only safe when they never leave the machine; a proxy
    // named in the environment would carry them (and could swap them).
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    proxy.set_nonblocking(true).unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "bearer::loopback_jwks_with_proxy_variables_set",
            "--ignored",
            "--test-threads=1",
        ])
        .env("HTTP_PROXY", &proxy_url)
        .env("http_proxy", &proxy_url)
        .env("ALL_PROXY", &proxy_url)
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .output()
        .unwrap();
    assert!(
        proxy.accept().is_err(),
        "the JWKS request went to the proxy"
    );
    assert!(
        child.status.success(),
        "the layer was not built from the loopback JWKS: {}{}",
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr)
    );
}
