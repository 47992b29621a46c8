//! Audits of the reference server, `examples/store-server`, over stdio and streamable HTTP.
//!
//! This test has its own `main` (`harness = false`): started as
//! `store_server serve-store-stdio DB`, it is the store server over stdio, running
//! `store_server::run` exactly as the `store-server` binary does. That lets `mcp-audit stdio`
//! start the reference server without depending on another package's binary being built.
//! Otherwise it runs the cases below (a non-flag argument filters them by name).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stdout,
    missing_docs
)]

mod common;

use std::future::Future;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;

use common::{audit, counts, names, temp_file};
use serde_json::{Value, json};
use store_server::{
    AuthSettings, Config, Db, ServeConfig, StoreServer, guard_builder, http_router,
};

const SERVE_STDIO: &str = "serve-store-stdio";

type Case = fn() -> Pin<Box<dyn Future<Output = ()>>>;

const CASES: &[(&str, Case)] = &[
    ("stdio_counts_are_exact", || {
        Box::pin(stdio_counts_are_exact())
    }),
    ("http_counts_are_exact_and_match_stdio", || {
        Box::pin(http_counts_are_exact_and_match_stdio())
    }),
    ("a_contract_written_over_stdio_holds_over_http", || {
        Box::pin(a_contract_written_over_stdio_holds_over_http())
    }),
    ("the_text_report_of_the_reference_server", || {
        Box::pin(the_text_report_of_the_reference_server())
    }),
    ("the_metadata_of_the_reference_server_with_auth", || {
        Box::pin(the_metadata_of_the_reference_server_with_auth())
    }),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if args.first().map(String::as_str) == Some(SERVE_STDIO) {
        let db = args.get(1).expect("serve-store-stdio DB");
        return match runtime.block_on(store_server::run(Config::new(db))) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("store server: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if args.iter().any(|a| a == "--list") {
        for (name, _) in CASES {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let selected: Vec<&(&str, Case)> = CASES
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    println!("\nrunning {} tests", selected.len());
    let mut failed = Vec::new();
    for (name, case) in &selected {
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(case())));
        match outcome {
            Ok(()) => println!("test {name} ... ok"),
            Err(_) => {
                println!("test {name} ... FAILED");
                failed.push(*name);
            }
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed",
        if failed.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failed.len(),
        failed.len()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `mcp-audit [flags] stdio ... -- <this test> serve-store-stdio DB`.
async fn audit_store_stdio(flags: &[&str], db: &Path) -> common::Run {
    let me = std::env::current_exe().unwrap();
    let mut args: Vec<String> = vec!["stdio".into()];
    args.extend(flags.iter().map(|f| (*f).to_owned()));
    args.extend([
        "--".into(),
        me.to_str().unwrap().to_owned(),
        SERVE_STDIO.into(),
        db.to_str().unwrap().to_owned(),
    ]);
    audit(args, &[]).await
}

/// Serves the guarded store over streamable HTTP in this process; the endpoint URL.
async fn serve_store_http(db: &Path) -> String {
    let db = Arc::new(Db::open(db).unwrap());
    let guard = guard_builder(StoreServer::new(db)).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, http_router(guard)).await });
    format!("http://{addr}{}", store_server::HTTP_PATH)
}

/// The reference server's surface, from its source: six closed-world reads, `adjust_stock`
/// (destructive), `create_order` (additive), `cancel_order` (destructive, token-gated) and the
/// guard's `prepare_admin_action` (additive), every hint declared, nothing open-world.
fn assert_reference_surface(r: &Value) {
    assert_eq!(counts(r), (10, 6, 2, 0, 0, 0), "{r:#}");
    let s = &r["surface"];
    assert_eq!(
        names(&s["additiveWrites"]),
        ["create_order", "prepare_admin_action"]
    );
    assert_eq!(
        names(&s["destructiveTools"]),
        ["adjust_stock", "cancel_order"]
    );
    assert_eq!(names(&s["tokenGatedTools"]), ["cancel_order"]);
    assert_eq!(names(&s["openWorldTools"]), Vec::<String>::new());
    let mut reads: Vec<String> = s["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["class"] == "read")
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    reads.sort();
    assert_eq!(
        reads,
        [
            "get_order",
            "get_product",
            "list_orders",
            "list_products",
            "list_reviews",
            "list_stock_movements"
        ]
    );
    assert_eq!(r["server"]["name"], "store-server");
}

async fn stdio_counts_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let run = audit_store_stdio(&["--json"], &dir.path().join("store.db")).await;
    assert_reference_surface(&run.report(0));
}

async fn http_counts_are_exact_and_match_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let url = serve_store_http(&dir.path().join("http.db")).await;
    let over_http = audit(["http", &url, "--json"], &[]).await;
    let over_http = over_http.report(0);
    assert_reference_surface(&over_http);
    assert_eq!(
        over_http["target"],
        json!({"transport": "http", "url": url})
    );

    let over_stdio = audit_store_stdio(&["--json"], &dir.path().join("stdio.db"))
        .await
        .json();
    assert_eq!(over_http["surface"], over_stdio["surface"]);
    assert_eq!(over_http["toolsListBytes"], over_stdio["toolsListBytes"]);
}

async fn a_contract_written_over_stdio_holds_over_http() {
    let (dir, contract) = temp_file("contract.json");
    let c = contract.to_str().unwrap();
    let pin = dir.path().join("pin.json");
    let p = pin.to_str().unwrap();

    let write = audit_store_stdio(
        &["--json", "--write-contract", c, "--pin", p],
        &dir.path().join("stdio.db"),
    )
    .await;
    let bytes = write.report(0)["toolsListBytes"].as_u64().unwrap();
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&contract).unwrap()).unwrap();
    assert_eq!(
        written,
        json!({"toolCount": 10, "destructiveToolCount": 2, "openWorldToolCount": 0, "maxToolsListBytes": bytes})
    );

    let url = serve_store_http(&dir.path().join("http.db")).await;
    let check = audit(
        [
            "http",
            &url,
            "--json",
            "--contract",
            c,
            "--pin",
            p,
            "--strict",
        ],
        &[],
    )
    .await;
    let r = check.report(0);
    assert_eq!(r["contract"]["drift"], json!([]));
    assert_eq!(r["pin"]["status"], "unchanged");
}

async fn the_text_report_of_the_reference_server() {
    let dir = tempfile::tempdir().unwrap();
    let run = audit_store_stdio(&[], &dir.path().join("store.db")).await;
    assert_eq!(run.code, 0, "{run:?}");
    for line in [
        "Tools:                10",
        "Read-only:            6",
        "Destructive:          2",
        "Open-world:           0",
        "Unannotated:          0",
        "Partially annotated:  0",
        "Additive writes:      create_order, prepare_admin_action",
        "Destructive writes:   adjust_stock, cancel_order",
        "Open-world tools:     (none)",
        "Token-gated tools:    cancel_order",
        "  cancel_order [destructiveWrite, token-gated]",
        "  - 2 destructive writes (adjust_stock, cancel_order)",
    ] {
        assert!(
            run.stdout.contains(line),
            "{line:?} missing from:\n{}",
            run.stdout
        );
    }
}

/// Dogfood: `mcp-audit metadata` on the reference server started as `store-server --http ADDR
/// --auth-issuer … --auth-audience … --auth-jwks FILE --auth-write-scope store:write` would be.
async fn the_metadata_of_the_reference_server_with_auth() {
    let (dir, jwks) = temp_file("jwks.json");
    // RFC 8037's example Ed25519 public key: the metadata needs a usable key, not a token.
    let key = json!({"kty": "OKP", "crv": "Ed25519", "kid": "k1", "alg": "EdDSA", "use": "sig",
                     "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"});
    std::fs::write(&jwks, json!({"keys": [key]}).to_string()).unwrap();
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let auth = AuthSettings::new("https://auth.example", "store", jwks.to_str().unwrap())
        .with_write_scope("store:write");
    let config = Config::new(dir.path().join("auth.db"))
        .with_serve(ServeConfig::new().with_http(addr).with_auth(auth));
    tokio::spawn(store_server::run(config));
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let url = format!("http://{addr}{}", store_server::HTTP_PATH);

    let run = audit(["metadata", &url, "--json"], &[]).await;
    let r = run.report(0);
    assert_eq!(r["metadata"]["resource"], url, "{r:#}");
    assert_eq!(
        r["metadata"]["authorization_servers"],
        json!(["https://auth.example"])
    );
    assert_eq!(r["metadata"]["scopes_supported"], json!(["store:write"]));
    // Only what a one-scope server on its own host is: the issuer lives elsewhere, and one
    // scope cannot be granted in part. No mismatch between the resource and the endpoint.
    let findings: Vec<&str> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["finding"].as_str().unwrap())
        .collect();
    assert_eq!(
        findings,
        ["foreignAuthorizationServer", "singleScope"],
        "{r:#}"
    );
}
