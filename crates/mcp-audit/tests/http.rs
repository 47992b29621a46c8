//! Audits over streamable HTTP: a fixture server served in-process on 127.0.0.1.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use common::{audit, counts, names, temp_file};
use mcp_write_guard_audit::fixture::{FixtureMode, FixtureServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

/// Serves `mode` at `http://127.0.0.1:PORT/mcp`; when `key` is set, requests without
/// `X-Audit-Key: key` get 401.
async fn serve(mode: FixtureMode, key: Option<&'static str>) -> SocketAddr {
    serve_with(mode, key, StreamableHttpServerConfig::default()).await
}

/// [`serve`] with a server configuration of its own.
async fn serve_with(
    mode: FixtureMode,
    key: Option<&'static str>,
    config: StreamableHttpServerConfig,
) -> SocketAddr {
    let server = FixtureServer::new(mode, []).unwrap();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let mut app = axum::Router::new().nest_service("/mcp", service);
    if let Some(key) = key {
        app = app.layer(middleware::from_fn(
            move |req: Request, next: Next| async move {
                let ok = req
                    .headers()
                    .get("x-audit-key")
                    .is_some_and(|v| v.as_bytes() == key.as_bytes());
                if ok {
                    next.run(req).await
                } else {
                    Response::builder()
                        .status(StatusCode::UNAUTHORIZED)
                        .body(axum::body::Body::empty())
                        .unwrap()
                }
            },
        ));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_annotated_server_over_http() {
    let addr = serve(FixtureMode::Annotated, None).await;
    let url = format!("http://{addr}/mcp");
    let run = audit(["http", &url, "--json"], &[]).await;
    let r = run.report(0);
    assert_eq!(counts(&r), (4, 2, 1, 1, 0, 0));
    assert_eq!(names(&r["surface"]["additiveWrites"]), ["add_item"]);
    assert_eq!(names(&r["surface"]["openWorldTools"]), ["fetch_url"]);
    assert_eq!(
        r["target"],
        serde_json::json!({"transport": "http", "url": url})
    );
    assert_eq!(r["server"]["name"], "audit-fixture");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_and_stdio_measure_the_same_surface() {
    let addr = serve(FixtureMode::Partial, None).await;
    let url = format!("http://{addr}/mcp");
    let over_http = audit(["http", &url, "--json"], &[]).await.json();
    let over_stdio = common::audit_fixture("partial", &[], &[]).await.json();
    assert_eq!(over_http["surface"], over_stdio["surface"]);
    assert_eq!(over_http["toolsListBytes"], over_stdio["toolsListBytes"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_sse_answers_are_read_alike() {
    let sse = serve(FixtureMode::Partial, None).await;
    let json = serve_with(
        FixtureMode::Partial,
        None,
        StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true),
    )
    .await;
    let over_sse = audit(["http", &format!("http://{sse}/mcp"), "--json"], &[]).await;
    let over_json = audit(["http", &format!("http://{json}/mcp"), "--json"], &[]).await;
    let (over_sse, over_json) = (over_sse.json(), over_json.report(0));
    assert_eq!(over_json["surface"], over_sse["surface"]);
    assert_eq!(over_json["toolsListBytes"], over_sse["toolsListBytes"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_over_http() {
    let addr = serve(FixtureMode::Paged, None).await;
    let run = audit(["http", &format!("http://{addr}/mcp"), "--json"], &[]).await;
    assert_eq!(counts(&run.report(0)), (4, 2, 1, 1, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_are_sent() {
    let addr = serve(FixtureMode::Unannotated, Some("s3cret")).await;
    let url = format!("http://{addr}/mcp");

    let refused = audit(["http", &url, "--json"], &[]).await;
    refused.assert_cannot_audit("could not audit");

    let run = audit(
        ["http", &url, "--json", "--header", "X-Audit-Key: s3cret"],
        &[],
    )
    .await;
    assert_eq!(counts(&run.report(0)), (3, 0, 3, 3, 3, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_endpoint_cannot_audit() {
    // Bind then drop a listener: the port is very likely closed.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let run = audit(
        ["http", &format!("http://{addr}/mcp"), "--timeout", "10"],
        &[],
    )
    .await;
    run.assert_cannot_audit("could not audit");
}

/// Serves `mode` over https at `https://127.0.0.1:PORT/mcp` (see [`common::tls_front`]).
/// Returns the URL and the certificate (PEM).
async fn serve_tls(mode: FixtureMode) -> (String, String) {
    let (addr, pem) = common::tls_front(serve(mode, None).await).await;
    (format!("https://{addr}/mcp"), pem)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_a_trusted_ca_file_audits() {
    let (url, pem) = serve_tls(FixtureMode::Annotated).await;
    let (_dir, ca) = temp_file("ca.pem");
    std::fs::write(&ca, &pem).unwrap();
    let run = audit(
        ["http", &url, "--json", "--ca-file", ca.to_str().unwrap()],
        &[],
    )
    .await;
    let r = run.report(0);
    assert_eq!(counts(&r), (4, 2, 1, 1, 0, 0));
    assert_eq!(
        r["target"],
        serde_json::json!({"transport": "http", "url": url})
    );
    // The same surface, byte for byte, as over plain http.
    let plain = serve(FixtureMode::Annotated, None).await;
    let over_http = audit(["http", &format!("http://{plain}/mcp"), "--json"], &[]).await;
    assert_eq!(r["toolsListBytes"], over_http.json()["toolsListBytes"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_an_untrusted_certificate_cannot_audit() {
    let (url, _pem) = serve_tls(FixtureMode::Annotated).await;
    // Not in the public web roots.
    let run = audit(["http", &url, "--timeout", "10"], &[]).await;
    run.assert_cannot_audit("could not audit");

    // Another self-signed certificate as the only trusted one.
    let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let (dir, ca) = temp_file("other.pem");
    std::fs::write(&ca, other.cert.pem()).unwrap();
    let run = audit(
        [
            "http",
            &url,
            "--timeout",
            "10",
            "--ca-file",
            ca.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");

    // A CA file without a certificate is refused before any connection.
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let run = audit(["http", &url, "--ca-file", empty.to_str().unwrap()], &[]).await;
    run.assert_cannot_audit("no PEM certificate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2026_07_28_era_over_http() {
    let addr = serve(FixtureMode::Annotated, None).await;
    let url = format!("http://{addr}/mcp");
    let run = audit(["http", &url, "--json", "--protocol", "2026-07-28"], &[]).await;
    let r = run.report(0);
    assert_eq!(r["server"]["protocolVersion"], "2026-07-28");
    assert_eq!(counts(&r), (4, 2, 1, 1, 0, 0));
    let legacy = audit(["http", &url, "--json"], &[]).await.json();
    assert_eq!(legacy["server"]["protocolVersion"], "2025-11-25");
    assert_eq!(r["surface"], legacy["surface"]);
    assert_eq!(r["toolsListBytes"], legacy["toolsListBytes"]);
}

#[tokio::test]
async fn bad_arguments_are_refused_clearly() {
    let scheme = audit(["http", "ftp://127.0.0.1:1/mcp"], &[]).await;
    scheme.assert_cannot_audit("use http or https");

    let header = audit(
        ["http", "http://127.0.0.1:1/mcp", "--header", "no colon"],
        &[],
    )
    .await;
    header.assert_cannot_audit("expected 'Name: value'");

    let url = audit(["http", "not a url"], &[]).await;
    assert_eq!(url.code, 2, "{url:?}");
}
