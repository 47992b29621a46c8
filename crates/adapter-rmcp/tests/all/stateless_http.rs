//! Over streamable HTTP (rmcp's service, no auth in front), a stateless 2026-07-28 write names
//! nobody: each is refused, and the operator is told why once.

use std::sync::Arc;

use axum::Router;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use serde_json::{Value, json};

async fn initialize(url: &str) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    post(url, &[], &body).await
}

/// A guard over the fixture behind rmcp's streamable HTTP service (the default principal:
/// per connection, so a stateless request names nobody); its URL.
async fn serve_guard(writes: bool) -> String {
    let guard = mcp_write_guard_rmcp::WriteGuard::builder(crate::common::Fixture::default())
        .writes_enabled(writes)
        .audit(Arc::new(mcp_write_guard_rmcp::MemorySink::new()))
        .build();
    let service = StreamableHttpService::new(
        move || Ok(guard.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = Router::new().nest_service("/mcp", service);
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

const STATELESS_WARNING: &str = "a write over streamable HTTP was refused";

/// Stateless 2026-07-28 writes name nobody: each is refused, and the operator is told why
/// once; a write in a session, whose principal is known, is not warned about.
#[tokio::test]
async fn refused_stateless_writes_are_explained_to_the_operator_once() {
    let captured = crate::common::logs::Captured::default();
    let _default = tracing::subscriber::set_default(captured.subscriber());
    let logged = || captured.text().matches(STATELESS_WARNING).count();

    // In a session, with writes off: refused for that, and the principal is known.
    let url = serve_guard(false).await;
    let init = initialize(&url).await;
    assert_eq!(init.status(), 200);
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let in_session = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(&url, &in_session, &initialized).await.status(), 202);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "add_row", "arguments": {"name": "a", "value": 1}}});
    let reply = post(&url, &in_session, &call).await.text().await.unwrap();
    assert!(reply.contains("\"isError\":true"), "{reply}");
    assert_eq!(logged(), 0);

    let url = serve_guard(true).await;
    for id in 1..=3 {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "add_row", "arguments": {"name": "a", "value": 1},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        }}});
        let headers = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "add_row"),
        ];
        let reply = post(&url, &headers, &body).await.text().await.unwrap();
        assert!(reply.contains("\"isError\":true"), "{reply}");
    }
    assert_eq!(logged(), 1);
}
