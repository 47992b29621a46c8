//! The `store-server` binary with `--auth-*`: every request to `/mcp` needs a bearer JWT from
//! the configured issuer, for the configured audience, signed by a key in the JWKS file; each
//! verified subject (issuer + `sub`) is its own person for approvals, `requestState` records,
//! confirmation tokens and the per-person cap of open approvals; writes need `store:write`.
//!
//! The keys are Ed25519 pairs made in the test from random seeds; the JWKS file holds the
//! public half of one of them. What is checked is state: the SQLite file (read through a
//! connection of its own) and the audit records the binary's default sink writes to its log
//! (stderr), not only the text a client reads.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use common::{
    AUDIENCE, HttpChild, ISSUER, Log, Record, WRITE_SCOPE, claims, fields, now, place_order,
    records, records_when,
};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use mcp_write_guard_core::{round_trip::ROUND_TRIP_REFUSAL_MESSAGE, token::TOKEN_REFUSAL_MESSAGE};
use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::test_util::{ERAS, Reply, ScriptedClient};
use mcp_write_guard_rmcp::{INPUT_KEY, Outcome, PREPARE_ADMIN_ACTION};
use rmcp::{
    model::{CallToolRequestParams, CallToolResponse, CallToolResult, InputResponses, JsonObject},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Value, json};
use store_server::Db;
use tempfile::TempDir;
use workspace_tests::{
    Client, Failure, FileView, HttpReply, Movement, RawHttp, SigningKey, call, cancel_args,
    cancel_order_token, connect_over, is_error, text,
};

const KID: &str = "test-key-1";
const READ_AND_WRITE: &str = "store:read store:write";

// ---------------------------------------------------------------------------------------------
// Keys and tokens
// ---------------------------------------------------------------------------------------------

/// `claims` with `key` set to `value` (or removed, for `Value::Null`).
fn with(mut claims: Value, key: &str, value: Value) -> Value {
    let object = claims.as_object_mut().unwrap();
    if value.is_null() {
        object.remove(key);
    } else {
        object.insert(key.to_owned(), value);
    }
    claims
}

/// Unpadded base64url, for the hand-built `alg: none` token.
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            let index = (n >> (18 - 6 * i)) & 63;
            out.push(char::from(ALPHABET[index as usize]));
        }
    }
    out
}

#[test]
fn the_base64url_helper_itself() {
    assert_eq!(base64url(b""), "");
    assert_eq!(base64url(b"f"), "Zg");
    assert_eq!(base64url(b"fo"), "Zm8");
    assert_eq!(base64url(b"foo"), "Zm9v");
    assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    assert_eq!(
        base64url(br#"{"alg":"none","typ":"JWT"}"#),
        "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0"
    );
}

// ---------------------------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------------------------

/// `store.db` in `dir`, created and seeded.
fn seeded_db(dir: &Path) -> Result<PathBuf, Failure> {
    let db = dir.join("store.db");
    drop(Db::open(&db)?);
    Ok(db)
}

/// The arguments that serve `db` in auth mode: tokens from [`ISSUER`] for [`AUDIENCE`], signed
/// by a key in the JWKS file `jwks` (no write scope, no address).
fn auth_args<'a>(db: &'a Path, jwks: &'a Path) -> [&'a str; 8] {
    [
        "--db",
        db.to_str().unwrap(),
        "--auth-issuer",
        ISSUER,
        "--auth-audience",
        AUDIENCE,
        "--auth-jwks",
        jwks.to_str().unwrap(),
    ]
}

/// The binary in auth mode on a fresh store, with writes enabled.
struct AuthServer {
    _dir: TempDir,
    db: PathBuf,
    key: SigningKey,
    server: HttpChild,
}

impl AuthServer {
    async fn start() -> Result<Self, Failure> {
        Self::start_with(|_| Ok(())).await
    }

    /// Starts it after `prepare` ran on the freshly created and seeded database file.
    async fn start_with(
        prepare: impl FnOnce(&Path) -> Result<(), Failure>,
    ) -> Result<Self, Failure> {
        let dir = tempfile::tempdir()?;
        let db = seeded_db(dir.path())?;
        prepare(&db)?;
        let key = SigningKey::generate(KID);
        let jwks = key.write_jwks(dir.path())?;
        let args = [
            &auth_args(&db, &jwks)[..],
            &["--auth-write-scope", WRITE_SCOPE],
        ]
        .concat();
        let server = HttpChild::start(dir.path(), &args, Some("true")).await?;
        Ok(Self {
            _dir: dir,
            db,
            key,
            server,
        })
    }

    fn file(&self) -> FileView {
        FileView::new(&self.db)
    }

    /// An rmcp client for `user` as `sub` (see [`AuthServer::connect`]), with a valid token
    /// granting [`READ_AND_WRITE`].
    async fn connect_as(
        &self,
        sub: &str,
        user: &ScriptedClient,
        era: Era,
    ) -> Result<Client, Failure> {
        self.connect(&self.token(sub, READ_AND_WRITE), user, era)
            .await
    }

    fn log(&self) -> &Log {
        &self.server.log
    }

    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    fn url(&self) -> &str {
        &self.server.url
    }

    /// `http://127.0.0.1:PORT`.
    fn base(&self) -> &str {
        self.url().strip_suffix("/mcp").unwrap()
    }

    /// A valid token for `sub` granting `scope`.
    fn token(&self, sub: &str, scope: &str) -> String {
        self.key.sign(&claims(sub, scope)).unwrap()
    }

    /// An rmcp client for `user`, speaking `era`, sending `token` on every request.
    async fn connect(
        &self,
        token: &str,
        user: &ScriptedClient,
        era: Era,
    ) -> Result<Client, Failure> {
        let config =
            StreamableHttpClientTransportConfig::with_uri(self.url().to_owned()).auth_header(token);
        connect_over(
            StreamableHttpClientTransport::from_config(config),
            user,
            era,
        )
        .await
    }

    fn raw(&self) -> Raw {
        Raw {
            http: RawHttp::new(self.url()),
            client: reqwest::Client::new(),
        }
    }
}

/// The principal the server names for `sub` of the test issuer.
fn principal(sub: &str) -> String {
    format!(r#"oauth:["{ISSUER}","{sub}"]"#)
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP
// ---------------------------------------------------------------------------------------------

/// The endpoint spoken to by hand ([`RawHttp`]), with a bearer token or without: for what an
/// rmcp client cannot send (no token, forged tokens, an invented `Mcp-Session-Id`).
struct Raw {
    http: RawHttp,
    client: reqwest::Client,
}

impl Raw {
    /// A 2026-07-28 `tools/call` with the `extra` headers (such as `authorization`, the whole
    /// header value), given up on after ten seconds.
    async fn call_with(
        &self,
        extra: &[(&str, &str)],
        tool: &str,
        arguments: &Value,
    ) -> Result<HttpReply, Failure> {
        let call = self.http.call_2026(extra, tool, arguments, None);
        tokio::time::timeout(Duration::from_secs(10), call).await?
    }

    /// A 2026-07-28 `tools/call` of `tool` with `arguments`, with a bearer `token` and `session`
    /// as `Mcp-Session-Id`, if given.
    async fn call_tool(
        &self,
        token: Option<&str>,
        session: Option<&str>,
        tool: &str,
        arguments: &Value,
    ) -> Result<HttpReply, Failure> {
        let authorization = token.map(|t| format!("Bearer {t}"));
        let mut extra = Vec::new();
        if let Some(authorization) = &authorization {
            extra.push(("authorization", authorization.as_str()));
        }
        if let Some(session) = session {
            extra.push(("mcp-session-id", session));
        }
        self.call_with(&extra, tool, arguments).await
    }

    /// GETs `url`, without a token.
    async fn get(&self, url: &str) -> Result<(u16, Option<String>, Value), Failure> {
        let response = self.client.get(url).send().await?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().map(str::to_owned))
            .transpose()?;
        let body = response.text().await?;
        Ok((status, content_type, serde_json::from_str(&body)?))
    }
}

// ---------------------------------------------------------------------------------------------
// The audit log
// ---------------------------------------------------------------------------------------------

#[test]
fn the_field_parser_itself() {
    let line = r#"2026-01-01T00:00:00Z  WARN mcp_write_guard_rmcp::audit: write refused time=2026 principal="oauth:[\"https://i\",\"a b\"]" tool=adjust_stock outcome=state-rejected reason="other-principal""#;
    let fields = fields(line);
    let get = |k: &str| {
        fields
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("principal"), Some(r#"oauth:["https://i","a b"]"#));
    assert_eq!(get("tool"), Some("adjust_stock"));
    assert_eq!(get("outcome"), Some("state-rejected"));
    assert_eq!(get("reason"), Some("other-principal"));
}

fn with_outcome(records: &[Record], outcome: Outcome) -> Vec<Record> {
    records
        .iter()
        .filter(|r| r.outcome == outcome.as_str())
        .cloned()
        .collect()
}

fn plus_one() -> Value {
    json!({"sku": "TLS-002", "delta": 1, "reason": "recount"})
}

fn arguments(value: &Value) -> JsonObject {
    value.as_object().unwrap().clone()
}

/// Sends `params` again as a 2026-07-28 retry: with `state` and the approving answer. Returns
/// the final result (an error if the server asks another round instead).
async fn retry_approved(
    client: &Client,
    params: &CallToolRequestParams,
    state: String,
) -> Result<CallToolResult, Failure> {
    let mut retry = params.clone();
    retry.request_state = Some(state);
    retry.input_responses = Some(approving());
    match client.peer().call_tool_once(retry).await? {
        CallToolResponse::Complete(result) => Ok(result),
        other => Err(format!("expected a final result, got {other:?}").into()),
    }
}

/// The movement [`plus_one`] saves.
fn recounted() -> Movement {
    Movement {
        sku: "TLS-002".into(),
        delta: 1,
        reason: "recount".into(),
    }
}

/// The approving answer to the guard's question, for a 2026-07-28 retry.
fn approving() -> InputResponses {
    let mut responses = InputResponses::new();
    responses.insert(
        INPUT_KEY.to_owned(),
        json!({"action": "accept", "content": {"approve": true}}),
    );
    responses
}

// ---------------------------------------------------------------------------------------------
// 1. Who may reach the endpoint
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn without_a_valid_token_every_request_is_401_and_nothing_reaches_the_guard()
-> Result<(), Failure> {
    let server = AuthServer::start().await?;
    let file = server.file();
    let before = file.snapshot()?;
    let raw = server.raw();
    let challenge = format!(
        r#"Bearer resource_metadata="{}/.well-known/oauth-protected-resource""#,
        server.base()
    );

    // No token at all: the bare challenge, exactly.
    let reply = raw
        .call_tool(None, None, "adjust_stock", &plus_one())
        .await?;
    assert_eq!(reply.status, 401, "{reply:?}");
    assert_eq!(
        reply.header("www-authenticate"),
        Some(challenge.as_str()),
        "{reply:?}"
    );
    // Another scheme is no bearer token either.
    let basic = raw
        .call_with(
            &[("authorization", "Basic YWxpY2U6c2VjcmV0")],
            "adjust_stock",
            &plus_one(),
        )
        .await?;
    assert_eq!(basic.status, 401, "{basic:?}");
    assert_eq!(basic.header("www-authenticate"), Some(challenge.as_str()));

    let good = claims("alice", READ_AND_WRITE);
    let now = now();
    let other_key = SigningKey::generate(KID);
    let hs256 = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &good,
        &EncodingKey::from_secret(b"a secret the issuer never had")?,
    )?;
    let alg_none = format!(
        "{}.{}.",
        base64url(br#"{"alg":"none","typ":"JWT"}"#),
        base64url(good.to_string().as_bytes())
    );
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "expired beyond the leeway",
            server.key.sign(&with(
                with(good.clone(), "exp", json!(now - 120)),
                "iat",
                json!(now - 900),
            ))?,
            "the token has expired",
        ),
        (
            "not valid yet beyond the leeway",
            server
                .key
                .sign(&with(good.clone(), "nbf", json!(now + 300)))?,
            "the token is not valid yet",
        ),
        (
            "another issuer",
            server
                .key
                .sign(&with(good.clone(), "iss", json!("https://evil.test")))?,
            "the token is from another issuer",
        ),
        (
            "another audience",
            server
                .key
                .sign(&with(good.clone(), "aud", json!("another-api")))?,
            "the token is for another audience",
        ),
        (
            "signed by another key under the same kid",
            other_key.sign(&good)?,
            "the token's signature does not verify",
        ),
        // Its description is checked in a_refused_token_is_described_by_its_documented_reason.
        ("alg none", alg_none, ""),
        (
            "HS256",
            hs256,
            "the token's signing algorithm is not accepted",
        ),
        ("not a JWT", "not-a-jwt".to_owned(), ""),
    ];
    for (case, token, description) in &cases {
        let (header, body) = invalid_token(&raw, case, token).await?;
        assert!(
            header.starts_with(&format!("{challenge}, ")),
            "{case}: {header}"
        );
        assert_eq!(body["error"], "invalid_token", "{case}: {body}");
        if !description.is_empty() {
            assert!(
                header.contains(&format!(r#"error_description="{description}""#)),
                "{case}: {header}"
            );
            assert_eq!(body["error_description"], *description, "{case}: {body}");
        }
    }
    // A valid token passes (so the 401s above are the token checks', not the request's): a
    // read, which the guard does not audit.
    let read = raw
        .call_tool(
            Some(&server.token("alice", READ_AND_WRITE)),
            None,
            "get_product",
            &json!({"sku": "TLS-002"}),
        )
        .await?;
    assert_eq!(read.status, 200, "{read:?}");
    let (read_error, read_text) = read.tool_result().ok_or("no tool result")?;
    assert!(!read_error, "{read_text}");
    assert!(read_text.contains("TLS-002"), "{read_text}");

    // Nothing saved; no audit record at all: no refused request reached the guard. The auth
    // layer logged each refused token (not the missing ones).
    assert_eq!(file.snapshot()?, before);
    file.assert_tls_002_unadjusted()?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(records(server.log()), []);
    let refused_logged = server
        .log()
        .lines()
        .iter()
        .filter(|line| line.contains("bearer token refused"))
        .count();
    assert_eq!(refused_logged, cases.len());
    Ok(())
}

/// Sends a write with `token` and asserts it is refused as an invalid token: 401, and a
/// challenge with `error="invalid_token"`. The challenge and the JSON body.
async fn invalid_token(raw: &Raw, case: &str, token: &str) -> Result<(String, Value), Failure> {
    let reply = raw
        .call_tool(Some(token), None, "adjust_stock", &plus_one())
        .await?;
    assert_eq!(reply.status, 401, "{case}: {reply:?}");
    let header = reply
        .header("www-authenticate")
        .unwrap_or_default()
        .to_owned();
    assert!(
        header.contains(r#"error="invalid_token""#),
        "{case}: {header}"
    );
    Ok((header, serde_json::from_str(&reply.body)?))
}

/// The 401's `error_description` (and the logged reason) says why, as `BearerRejection`
/// documents it: a missing `exp`, `iss`, `aud` or `sub` is "lacks a required claim"
/// (`BearerRejection::Claims`), and `alg: none` is "signing algorithm is not accepted"
/// (`BearerRejection::Algorithm`: "an algorithm other than the asymmetric ones (`none` and
/// `HS*` included)").
#[tokio::test]
async fn a_refused_token_is_described_by_its_documented_reason() -> Result<(), Failure> {
    let server = AuthServer::start().await?;
    let file = server.file();
    let before = file.snapshot()?;
    let raw = server.raw();
    let good = claims("alice", READ_AND_WRITE);
    let lacking = "the token lacks a required claim";
    // Each token but the last is well formed and properly signed, with one claim missing.
    let mut cases: Vec<(String, String, &str)> = ["sub", "iss", "aud", "exp"]
        .into_iter()
        .map(|claim| {
            let token = server
                .key
                .sign(&with(good.clone(), claim, Value::Null))
                .unwrap();
            (format!("no {claim}"), token, lacking)
        })
        .collect();
    cases.push((
        "alg none".to_owned(),
        format!(
            "{}.{}.",
            base64url(br#"{"alg":"none","typ":"JWT"}"#),
            base64url(good.to_string().as_bytes())
        ),
        "the token's signing algorithm is not accepted",
    ));
    let mut described = Vec::new();
    let mut expected = Vec::new();
    for (case, token, description) in &cases {
        let (_, body) = invalid_token(&raw, case, token).await?;
        described.push((
            case.clone(),
            body["error_description"].as_str().unwrap_or("").to_owned(),
        ));
        expected.push((case.clone(), (*description).to_owned()));
    }
    assert_eq!(file.snapshot()?, before);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(records(server.log()), []);
    assert_eq!(described, expected);
    Ok(())
}

#[tokio::test]
async fn the_protected_resource_metadata_is_served_at_both_paths() -> Result<(), Failure> {
    let server = AuthServer::start().await?;
    let raw = server.raw();
    let expected = json!({
        "resource": server.url(),
        "authorization_servers": [ISSUER],
        "scopes_supported": [WRITE_SCOPE],
        "bearer_methods_supported": ["header"],
    });
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let (status, content_type, document) = raw.get(&format!("{}{path}", server.base())).await?;
        assert_eq!(status, 200, "{path}");
        assert!(
            content_type
                .as_deref()
                .is_some_and(|c| c.starts_with("application/json")),
            "{path}: {content_type:?}"
        );
        assert_eq!(document["resource"], server.url(), "{path}: {document}");
        assert_eq!(document["authorization_servers"], json!([ISSUER]), "{path}");
        let scopes = document["scopes_supported"].as_array().unwrap();
        assert!(scopes.contains(&json!(WRITE_SCOPE)), "{path}: {document}");
        assert_eq!(document["bearer_methods_supported"], json!(["header"]));
        assert_eq!(document, expected, "{path}: nothing else is claimed");
    }
    // The challenge names the first of them.
    let reply = raw
        .call_tool(None, None, "list_products", &json!({}))
        .await?;
    let challenge = reply
        .header("www-authenticate")
        .unwrap_or_default()
        .to_owned();
    let named = challenge
        .strip_prefix("Bearer resource_metadata=\"")
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or_default();
    assert_eq!(
        named,
        format!("{}/.well-known/oauth-protected-resource", server.base())
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 2. Each subject is its own person
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_request_state_opened_for_alice_is_refused_for_bob_and_used_up() -> Result<(), Failure> {
    let server = AuthServer::start().await?;
    let file = server.file();
    let before = file.snapshot()?;
    let alice_user = ScriptedClient::answering([Reply::Approve]);
    let bob_user = ScriptedClient::answering([Reply::Approve]);
    let alice = server
        .connect_as("alice", &alice_user, Era::InputRounds)
        .await?;
    let bob = server
        .connect_as("bob", &bob_user, Era::InputRounds)
        .await?;

    let params = CallToolRequestParams::new("adjust_stock").with_arguments(arguments(&plus_one()));
    let state = match alice.peer().call_tool_once(params.clone()).await? {
        CallToolResponse::InputRequired(input) => input.request_state.ok_or("no state")?,
        other => return Err(format!("expected an input round, got {other:?}").into()),
    };

    // Bob retries with Alice's state and an approval of his own.
    let result = retry_approved(&bob, &params, state.clone()).await?;
    assert!(is_error(&result), "{result:?}");
    assert_eq!(text(&result), ROUND_TRIP_REFUSAL_MESSAGE);
    assert_eq!(file.snapshot()?, before);

    // What the code does: any attempt that finds the state uses it up (fail closed), so Alice's
    // own approved retry is refused too, as a replay. Nothing is saved either way.
    let result = retry_approved(&alice, &params, state).await?;
    assert!(is_error(&result), "{result:?}");
    assert_eq!(text(&result), ROUND_TRIP_REFUSAL_MESSAGE);
    assert_eq!(file.snapshot()?, before);
    assert!(alice_user.asked().is_empty());
    assert!(bob_user.asked().is_empty());

    let logged = records_when(server.log(), 3).await;
    assert_eq!(
        logged,
        [
            Record {
                outcome: "asked".into(),
                principal: Some(principal("alice")),
                tool: Some("adjust_stock".into()),
                reason: None,
            },
            Record {
                outcome: "state-rejected".into(),
                principal: Some(principal("bob")),
                tool: Some("adjust_stock".into()),
                reason: Some("other-principal".into()),
            },
            Record {
                outcome: "state-rejected".into(),
                principal: Some(principal("alice")),
                tool: Some("adjust_stock".into()),
                reason: Some("replayed".into()),
            },
        ]
    );

    // Alice asks anew and approves: her change lands, once.
    let result = call(&alice, "adjust_stock", plus_one()).await?;
    assert!(!is_error(&result), "{result:?}");
    assert_eq!(alice_user.asked().len(), 1);
    assert_eq!(file.stock("TLS-002")?, 4);
    assert_eq!(file.movements()?, [recounted()]);
    alice.cancel().await?;
    bob.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn a_confirmation_token_issued_to_alice_does_not_spend_for_bob() -> Result<(), Failure> {
    for era in ERAS {
        let mut order = 0;
        let server = AuthServer::start_with(|db| {
            order = place_order(db)?;
            Ok(())
        })
        .await?;
        let file = server.file();
        assert_eq!(file.order_status(order)?.as_deref(), Some("pending"));
        assert_eq!(file.stock("TLS-001")?, 10);
        let alice_user = ScriptedClient::answering([Reply::Approve, Reply::Approve]);
        let bob_user = ScriptedClient::answering([Reply::Approve]);
        let alice = server.connect_as("alice", &alice_user, era).await?;
        let bob = server.connect_as("bob", &bob_user, era).await?;
        let reason = "duplicate order";

        let token = cancel_order_token(&alice, order, reason).await?;
        assert_eq!(alice_user.asked().len(), 1, "{era:?}");
        let before = file.snapshot()?;

        let stolen = call(&bob, "cancel_order", cancel_args(order, reason, &token)).await?;

        assert!(is_error(&stolen), "{era:?}: {stolen:?}");
        assert_eq!(text(&stolen), TOKEN_REFUSAL_MESSAGE, "{era:?}");
        assert!(bob_user.asked().is_empty(), "{era:?}: nobody asked Bob");
        assert_eq!(file.snapshot()?, before, "{era:?}");
        assert_eq!(file.order_status(order)?.as_deref(), Some("pending"));
        assert_eq!(file.stock("TLS-001")?, 10, "{era:?}");
        let logged = records_when(server.log(), 4).await;
        let rejected = with_outcome(&logged, Outcome::TokenRejected);
        assert_eq!(
            rejected,
            [Record {
                outcome: "token-rejected".into(),
                principal: Some(principal("bob")),
                tool: Some("cancel_order".into()),
                reason: Some("other-principal".into()),
            }],
            "{era:?}: {logged:?}"
        );
        assert_eq!(
            with_outcome(&logged, Outcome::TokenIssued).len(),
            1,
            "{era:?}"
        );

        // Checking the token spent nothing: Alice can still use it, once.
        let cancelled = call(&alice, "cancel_order", cancel_args(order, reason, &token)).await?;
        assert!(!is_error(&cancelled), "{era:?}: {}", text(&cancelled));
        assert_eq!(file.order_status(order)?.as_deref(), Some("cancelled"));
        assert_eq!(file.stock("TLS-001")?, 12, "{era:?}");
        alice.cancel().await?;
        bob.cancel().await?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 3. Scopes
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn without_the_write_scope_reads_work_and_writes_are_refused_unasked() -> Result<(), Failure>
{
    for era in ERAS {
        let server = AuthServer::start().await?;
        let file = server.file();
        let before = file.snapshot()?;
        // One token with only the read scope, one with no scope claim at all.
        let read_only = server.token("reader", "store:read");
        let no_scope = server
            .key
            .sign(&with(claims("reader", ""), "scope", Value::Null))?;
        for token in [read_only, no_scope] {
            let user = ScriptedClient::answering([Reply::Approve, Reply::Approve]);
            let client = server.connect(&token, &user, era).await?;

            let products = call(&client, "list_products", json!({})).await?;
            assert!(!is_error(&products), "{era:?}: {products:?}");
            assert!(text(&products).contains("TLS-002"), "{era:?}");
            let reviews = call(&client, "list_reviews", json!({"sku": "TLS-002"})).await?;
            assert!(!is_error(&reviews), "{era:?}: {reviews:?}");

            for (tool, args) in [
                ("adjust_stock", plus_one()),
                (
                    PREPARE_ADMIN_ACTION,
                    json!({"tool": "cancel_order", "arguments": {"orderId": 1, "reason": "x"}}),
                ),
                (
                    "create_order",
                    json!({"customerId": 1, "lines": [{"sku": "TLS-003", "quantity": 1}]}),
                ),
            ] {
                let refused = call(&client, tool, args).await?;
                assert!(is_error(&refused), "{era:?} {tool}: {refused:?}");
                let message = text(&refused);
                assert!(
                    message.contains("`store:write`"),
                    "{era:?} {tool}: {message}"
                );
                assert!(message.contains("nothing was saved"), "{era:?}: {message}");
            }
            assert!(user.asked().is_empty(), "{era:?}: {:?}", user.asked());
            assert_eq!(user.unused_replies(), 2, "{era:?}");
            client.cancel().await?;
        }

        assert_eq!(file.snapshot()?, before, "{era:?}");
        let logged = records_when(server.log(), 6).await;
        assert_eq!(logged.len(), 6, "{era:?}: {logged:?}");
        for record in &logged {
            assert_eq!(record.outcome, "refused-scope", "{era:?}: {logged:?}");
            assert_eq!(record.principal, Some(principal("reader")), "{era:?}");
            assert_eq!(
                record.reason.as_deref(),
                Some("missing scope store:write"),
                "{era:?}"
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 4. The per-person cap of open approvals
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn one_person_holding_64_round_trips_does_not_block_another_and_invented_sessions_are_404()
-> Result<(), Failure> {
    const CAP: usize = mcp_write_guard_core::policy::DEFAULT_PER_PRINCIPAL_CAP;
    const EXTRA: usize = 3;
    let server = AuthServer::start().await?;
    let file = server.file();
    let before = file.snapshot()?;
    let raw = server.raw();
    let alice = server.token("alice", READ_AND_WRITE);

    // A session id she made up is no session of hers: 404, before anything reaches the guard.
    for i in 0..3 {
        let session = format!("invented-{i}-{}", uuid::Uuid::new_v4());
        let reply = raw
            .call_tool(Some(&alice), Some(&session), "adjust_stock", &plus_one())
            .await?;
        assert_eq!(reply.status, 404, "{reply:?}");
    }

    // Alice opens round trips and never answers them: her token is who she is.
    let mut states = Vec::new();
    for i in 0..CAP {
        let reply = raw
            .call_tool(Some(&alice), None, "adjust_stock", &plus_one())
            .await?;
        assert_eq!(reply.status, 200, "round trip {i}: {reply:?}");
        let state = reply
            .request_state()
            .ok_or_else(|| format!("round trip {i}: no input round: {reply:?}"))?;
        states.push(state);
    }
    states.sort();
    states.dedup();
    assert_eq!(states.len(), CAP, "each round trip has its own state");

    // The next ones are refused with the cap message.
    for i in 0..EXTRA {
        let reply = raw
            .call_tool(Some(&alice), None, "adjust_stock", &plus_one())
            .await?;
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.request_state(), None, "extra {i}: {reply:?}");
        let (is_error, message) = reply.tool_result().ok_or("no tool result")?;
        assert!(is_error, "extra {i}: {message}");
        assert!(
            message
                .starts_with("Too many approvals are waiting for this user, so nothing was saved."),
            "extra {i}: {message}"
        );
    }
    // And without one, from an rmcp client: the same person, the same cap.
    let alice_user = ScriptedClient::answering([]);
    let alice_client = server
        .connect(&alice, &alice_user, Era::InputRounds)
        .await?;
    let params = CallToolRequestParams::new("adjust_stock").with_arguments(arguments(&plus_one()));
    match alice_client.peer().call_tool_once(params.clone()).await? {
        CallToolResponse::Complete(result) => {
            assert!(is_error(&result), "{result:?}");
            assert!(text(&result).starts_with("Too many approvals are waiting for this user"));
        }
        other => return Err(format!("expected a refusal, got {other:?}").into()),
    }

    // Meanwhile Bob is asked as usual.
    let bob_user = ScriptedClient::answering([]);
    let bob = server
        .connect_as("bob", &bob_user, Era::InputRounds)
        .await?;
    match bob.peer().call_tool_once(params).await? {
        CallToolResponse::InputRequired(input) => {
            assert!(input.request_state.is_some(), "{input:?}");
            assert!(
                input
                    .input_requests
                    .as_ref()
                    .is_some_and(|r| r.contains_key(INPUT_KEY)),
                "{input:?}"
            );
        }
        other => return Err(format!("expected an input round for Bob, got {other:?}").into()),
    }

    assert_eq!(file.snapshot()?, before);
    // Alice's CAP round trips are one question (one person, one change), put CAP times: one
    // `asked`, and each time it was put again held a place in her cap.
    let logged = records_when(server.log(), 1 + EXTRA + 2).await;
    let asked = with_outcome(&logged, Outcome::Asked);
    let refused = with_outcome(&logged, Outcome::StoreFailed);
    let by = |records: &[Record], sub: &str| {
        records
            .iter()
            .filter(|r| r.principal.as_deref() == Some(principal(sub).as_str()))
            .count()
    };
    assert_eq!(asked.len(), 2, "{logged:?}");
    assert_eq!(by(&asked, "alice"), 1);
    assert_eq!(by(&asked, "bob"), 1);
    assert_eq!(refused.len(), EXTRA + 1, "{logged:?}");
    assert_eq!(by(&refused, "alice"), EXTRA + 1);
    assert!(
        refused
            .iter()
            .all(|r| r.reason.as_deref().is_some_and(|why| why.contains("64"))),
        "{refused:?}"
    );
    assert_eq!(logged.len(), 1 + EXTRA + 2, "nothing else: {logged:?}");
    alice_client.cancel().await?;
    bob.cancel().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 5. The happy path
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn an_approved_write_with_a_valid_token_lands_once_under_the_oauth_principal()
-> Result<(), Failure> {
    for era in ERAS {
        let server = AuthServer::start().await?;
        let file = server.file();
        let user = ScriptedClient::answering([Reply::Approve]);
        let client = server.connect_as("alice", &user, era).await?;

        let result = call(&client, "adjust_stock", plus_one()).await?;

        assert!(!is_error(&result), "{era:?}: {result:?}");
        assert_eq!(
            user.asked(),
            [r#"Adjust "TLS-002" by +1: stock 3 -> 4. Reason given: "recount""#],
            "{era:?}"
        );
        assert_eq!(file.stock("TLS-002")?, 4, "{era:?}");
        assert_eq!(file.movements()?, [recounted()], "{era:?}");
        let logged = records_when(server.log(), 3).await;
        let outcomes: Vec<_> = logged.iter().map(|r| r.outcome.as_str()).collect();
        assert_eq!(outcomes, ["asked", "approved", "applied"], "{era:?}");
        for record in &logged {
            assert_eq!(
                record.principal.as_deref(),
                Some(r#"oauth:["https://issuer.test","alice"]"#),
                "{era:?}: {logged:?}"
            );
        }
        client.cancel().await?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 5. A session belongs to the subject that opened it
// ---------------------------------------------------------------------------------------------

/// Opens a legacy session with `token`; its id.
async fn open_session(raw: &RawHttp, token: &str) -> Result<String, Failure> {
    raw.open_session(&[("authorization", &format!("Bearer {token}"))])
        .await
}

/// Sends a legacy `tools/call` in `session` and reads its event stream until the server asks
/// the question; the stream (still open) and the question's request id.
async fn ask_in_session(
    url: &str,
    token: &str,
    session: &str,
) -> Result<(reqwest::Response, Value), Failure> {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "adjust_stock", "arguments": plus_one()}});
    let mut response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .body(body.to_string())
        .send()
        .await?;
    assert_eq!(response.status(), 200);
    let mut seen = String::new();
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk())
            .await??
            .ok_or("the stream ended before the question")?;
        seen.push_str(&String::from_utf8_lossy(&chunk));
        let question = seen
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|message| message["method"] == "elicitation/create");
        if let Some(question) = question {
            return Ok((response, question["id"].clone()));
        }
    }
}

async fn answer_in_session(
    raw: &RawHttp,
    token: &str,
    session: &str,
    id: &Value,
) -> Result<HttpReply, Failure> {
    let answer = json!({"jsonrpc": "2.0", "id": id,
                        "result": {"action": "accept", "content": {"approve": true}}});
    raw.post(
        &[
            ("authorization", &format!("Bearer {token}")),
            ("mcp-session-id", session),
            ("mcp-protocol-version", "2025-06-18"),
        ],
        &answer,
    )
    .await
}

/// Bob, who learned Alice's session id, cannot answer the question asked in her session, nor
/// close it: with his token her session is unknown (404). Her own answer then lands, once.
#[tokio::test]
async fn another_subject_cannot_answer_or_close_a_session_it_did_not_open() -> Result<(), Failure> {
    let server = AuthServer::start().await?;
    let file = server.file();
    let raw = RawHttp::new(server.url());
    let alice = server.token("alice", READ_AND_WRITE);
    let bob = server.token("bob", READ_AND_WRITE);
    let session = open_session(&raw, &alice).await?;
    let stock = file.stock("TLS-002")?;

    let (mut stream, question) = ask_in_session(server.url(), &alice, &session).await?;
    let forged = answer_in_session(&raw, &bob, &session, &question).await?;
    assert_eq!(forged.status, 404, "{forged:?}");
    let closed = reqwest::Client::new()
        .delete(server.url())
        .header("authorization", format!("Bearer {bob}"))
        .header("mcp-session-id", &session)
        .send()
        .await?;
    assert_eq!(closed.status(), 404);
    let bobs_call = raw
        .list_tools_legacy(&[("authorization", &format!("Bearer {bob}"))], &session)
        .await?;
    assert_eq!(bobs_call.status, 404, "{bobs_call:?}");
    assert_eq!(
        file.stock("TLS-002")?,
        stock,
        "Bob's answer approved nothing"
    );
    assert!(
        with_outcome(&records(server.log()), Outcome::Approved).is_empty(),
        "{:?}",
        records(server.log())
    );

    // Alice's own answer: approved and applied once.
    let answered = answer_in_session(&raw, &alice, &session, &question).await?;
    assert_eq!(answered.status, 202, "{answered:?}");
    let mut rest = String::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(10), stream.chunk()).await?? {
        rest.push_str(&String::from_utf8_lossy(&chunk));
        if rest.contains("\"id\":7") {
            break;
        }
    }
    assert_eq!(file.stock("TLS-002")?, stock + 1);
    let logged = records_when(server.log(), 3).await;
    let decided: Vec<_> = logged
        .iter()
        .filter(|r| r.outcome != Outcome::Asked.as_str())
        .map(|r| (r.outcome.clone(), r.principal.clone()))
        .collect();
    let alice = Some(principal("alice"));
    assert_eq!(
        decided,
        [
            (Outcome::Approved.as_str().to_owned(), alice.clone()),
            (Outcome::Applied.as_str().to_owned(), alice)
        ],
        "{logged:?}"
    );
    Ok(())
}

/// One subject holds at most 16 sessions: the next `initialize` gets 429 and the session it
/// would have opened is closed; another subject can still open one.
#[tokio::test]
async fn one_subject_cannot_take_every_session() -> Result<(), Failure> {
    const PER_OWNER: usize = mcp_write_guard_http::DEFAULT_MAX_SESSIONS_PER_OWNER;
    let server = AuthServer::start().await?;
    let raw = RawHttp::new(server.url());
    let alice = format!("Bearer {}", server.token("alice", READ_AND_WRITE));
    for i in 0..PER_OWNER {
        let init = raw.initialize(&[("authorization", &alice)]).await?;
        assert_eq!(init.status, 200, "session {i}: {init:?}");
    }
    let refused = raw.initialize(&[("authorization", &alice)]).await?;
    assert_eq!(refused.status, 429, "{refused:?}");
    let bob = format!("Bearer {}", server.token("bob", "store:read"));
    let init = raw.initialize(&[("authorization", &bob)]).await?;
    assert_eq!(init.status, 200, "{init:?}");
    Ok(())
}

/// The official Python SDK with a bearer token, in both eras: asked, and the approved write
/// lands under the token's subject; without a token it cannot even connect.
#[tokio::test]
async fn the_python_sdk_writes_with_a_token_in_both_eras() -> Result<(), Failure> {
    let server = AuthServer::start().await?;
    let file = server.file();
    let header = format!(
        "Authorization: Bearer {}",
        server.token("carol", READ_AND_WRITE)
    );
    let mut stock = file.stock("TLS-002")?;
    for era in ["legacy", "2026-07-28"] {
        let approved =
            common::python_adjust(server.url(), era, "approve", era, &[header.as_str()]).await?;
        assert!(!approved.is_error, "{era}: {approved:?}");
        assert_eq!(approved.elicitations, 1, "{era}");
        stock -= 1;
        assert_eq!(file.stock("TLS-002")?, stock, "{era}");
    }
    let anonymous = common::python_adjust(server.url(), "2026-07-28", "approve", "x", &[]).await;
    assert!(anonymous.is_err(), "{anonymous:?}");
    assert_eq!(file.stock("TLS-002")?, stock);
    let logged = records_when(server.log(), 6).await;
    let applied = with_outcome(&logged, Outcome::Applied);
    assert_eq!(applied.len(), 2, "{logged:?}");
    assert!(
        applied
            .iter()
            .all(|r| r.principal.as_deref() == Some(principal("carol").as_str())),
        "{applied:?}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 5. Bound beyond loopback
// ---------------------------------------------------------------------------------------------

/// `--http 0.0.0.0:PORT` with `--auth-*` and no `--public-url` (README set-up 2 without its last
/// flag). Served like that, the 401 challenge and the metadata's `resource` would name
/// `http://0.0.0.0:PORT`, an address no client can use, and rmcp's `Host` check, which admits
/// loopback names only, would answer every client on the network 403. So the server refuses to
/// start, says which flag is missing, and never serves.
#[tokio::test]
async fn bound_to_every_interface_with_auth_and_no_public_url_the_server_refuses_to_start()
-> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let db = seeded_db(dir.path())?;
    let jwks = SigningKey::generate(KID).write_jwks(dir.path())?;
    let args = [&["--http", "0.0.0.0:0"][..], &auth_args(&db, &jwks)].concat();
    let run = common::command(dir.path(), &args, Some("true"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(30), run)
        .await
        .map_err(|_| "the server started serving instead of refusing")??;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("--public-url"), "{stderr}");
    assert!(!stderr.contains("serving streamable HTTP"), "{stderr}");
    Ok(())
}
