//! `mcp-audit metadata` against local HTTP fixtures on 127.0.0.1.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use std::net::SocketAddr;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use common::{audit, temp_file};
use serde_json::json;

const PATH_FORM: &str = "/.well-known/oauth-protected-resource/mcp";
const ROOT_FORM: &str = "/.well-known/oauth-protected-resource";

fn json_body(body: String) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], body)
}

/// Serves `route` at `path` with the document `make(addr)`, and `/mcp` answering GET with 405.
async fn serve(
    path: &'static str,
    make: impl Fn(SocketAddr) -> String + Send + 'static,
) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let body = make(addr);
    let app = Router::new()
        .route(path, get(move || async move { json_body(body.clone()) }))
        .route(
            "/mcp",
            get(|| async { StatusCode::METHOD_NOT_ALLOWED })
                .post(|| async { StatusCode::UNAUTHORIZED }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

fn good(addr: SocketAddr) -> String {
    json!({
        "resource": format!("http://{addr}/mcp"),
        "authorization_servers": [format!("http://{}:9/", addr.ip())],
        "scopes_supported": ["inventory:read", "inventory:write"],
        "resource_name": "Store",
        "bearer_methods_supported": ["header"]
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_over_https_from_a_trusted_ca_file() {
    let plain = serve(PATH_FORM, good).await;
    let (addr, pem) = common::tls_front(plain).await;
    let url = format!("https://{addr}/mcp");
    let (_dir, ca) = temp_file("ca.pem");
    std::fs::write(&ca, pem).unwrap();
    let run = audit(
        [
            "metadata",
            &url,
            "--json",
            "--ca-file",
            ca.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    let r = run.report(0);
    assert_eq!(r["documentUrl"], format!("https://{addr}{PATH_FORM}"));
    assert_eq!(r["plainGet"]["status"], 405);
    // The document names the plain http endpoint, not this one.
    assert_eq!(
        r["findings"],
        json!([{"finding": "resourceMismatch", "resource": format!("http://{plain}/mcp"), "endpoint": url}])
    );

    let untrusted = audit(["metadata", &url, "--timeout", "10"], &[]).await;
    untrusted.assert_cannot_audit("could not fetch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_document() {
    let addr = serve(PATH_FORM, good).await;
    let url = format!("http://{addr}/mcp");
    let run = audit(["metadata", &url, "--json", "--strict"], &[]).await;
    let r = run.report(0);
    assert_eq!(r["documentUrl"], format!("http://{addr}{PATH_FORM}"));
    assert_eq!(r["metadata"]["resource"], url);
    assert_eq!(r["metadata"]["resource_name"], "Store");
    assert_eq!(
        r["metadata"]["scopes_supported"],
        json!(["inventory:read", "inventory:write"])
    );
    assert_eq!(r["findings"], json!([]));
    assert_eq!(r["plainGetIs405"], true);
    assert_eq!(r["plainGet"]["status"], 405);

    let text = audit(["metadata", &url], &[]).await;
    assert_eq!(text.code, 0, "{text:?}");
    for line in [
        format!("resource:               {url}"),
        "scopes_supported:       inventory:read, inventory:write".to_owned(),
        "resource_name:          Store".to_owned(),
        "Plain GET on endpoint:  answers 405 (405: yes)".to_owned(),
        "Findings: none".to_owned(),
    ] {
        assert!(text.stdout.contains(&line), "{line}\n{}", text.stdout);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_form_is_tried_second() {
    let addr = serve(ROOT_FORM, good).await;
    let run = audit(["metadata", &format!("http://{addr}/mcp"), "--json"], &[]).await;
    let r = run.report(0);
    assert_eq!(r["documentUrl"], format!("http://{addr}{ROOT_FORM}"));
    assert_eq!(r["attempts"][0]["status"], 404);
    assert_eq!(r["attempts"][1]["status"], 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mismatched_resource_is_flagged() {
    let addr = serve(PATH_FORM, |addr| {
        json!({
            "resource": format!("http://{addr}/other"),
            "authorization_servers": [format!("http://{}:9/", addr.ip())],
            "scopes_supported": ["a", "b"]
        })
        .to_string()
    })
    .await;
    let url = format!("http://{addr}/mcp");
    let run = audit(["metadata", &url, "--json"], &[]).await;
    assert_eq!(
        run.code, 0,
        "without --strict a finding is reported, not failed: {run:?}"
    );
    assert_eq!(
        run.json()["findings"],
        json!([{"finding": "resourceMismatch", "resource": format!("http://{addr}/other"), "endpoint": url}])
    );
    let strict = audit(["metadata", &url, "--strict"], &[]).await;
    assert_eq!(strict.code, 1, "{strict:?}");
    assert!(
        strict
            .stdout
            .contains("is not identical to the endpoint URL"),
        "{}",
        strict.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_authorization_server_and_a_single_scope_are_flagged() {
    let addr = serve(PATH_FORM, |addr| {
        json!({
            "resource": format!("http://{addr}/mcp"),
            "authorization_servers": ["https://login.example.net/tenant"],
            "scopes_supported": ["everything"]
        })
        .to_string()
    })
    .await;
    let run = audit(
        [
            "metadata",
            &format!("http://{addr}/mcp"),
            "--json",
            "--strict",
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        run.json()["findings"],
        json!([
            {"finding": "foreignAuthorizationServer", "server": "https://login.example.net/tenant", "host": "login.example.net"},
            {"finding": "singleScope", "scope": "everything"}
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_document_cannot_audit() {
    let addr = serve("/elsewhere", good).await;
    let run = audit(["metadata", &format!("http://{addr}/mcp")], &[]).await;
    run.assert_cannot_audit("no protected resource metadata found");
    assert!(
        run.stderr.contains(&format!("{PATH_FORM} answered 404")),
        "{run:?}"
    );
    assert!(
        run.stderr.contains(&format!("{ROOT_FORM} answered 404")),
        "{run:?}"
    );
    assert!(run.stdout.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_documents_cannot_audit() {
    for body in [
        "{\"resource\": ".to_owned(),
        "[1, 2]".to_owned(),
        json!({"authorization_servers": ["http://127.0.0.1/"]}).to_string(),
        json!({"resource": "http://x/mcp", "scopes_supported": "all"}).to_string(),
    ] {
        let addr = serve(PATH_FORM, move |_| body.clone()).await;
        let run = audit(["metadata", &format!("http://{addr}/mcp")], &[]).await;
        run.assert_cannot_audit("malformed protected resource metadata");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_errors_and_other_schemes_cannot_audit() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let run = audit(["metadata", &format!("http://{addr}/mcp")], &[]).await;
    run.assert_cannot_audit("could not fetch");

    // https is spoken: an unreachable https endpoint fails like an http one.
    let https = audit(["metadata", &format!("https://{addr}/mcp")], &[]).await;
    https.assert_cannot_audit("could not fetch");

    let ftp = audit(["metadata", "ftp://127.0.0.1:1/mcp"], &[]).await;
    ftp.assert_cannot_audit("use http or https");
}
