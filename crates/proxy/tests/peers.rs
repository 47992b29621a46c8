//! The proxy driven by the official clients in front of real servers (the scripts in
//! `tests/peer` and `tests/python`, each asserting on the files the servers write):
//!
//! - the TypeScript SDK client in front of `@modelcontextprotocol/server-filesystem` and
//!   `server-memory` from npm (`drive.mjs`);
//! - the Python SDK in front of server-filesystem (`drive.py`);
//! - the TypeScript SDK client in front of the fixture upstream (`drive-fixture.mjs`): pins, a
//!   definition that changes, the upstream's own question, an upstream that dies or hangs;
//! - the TypeScript SDK client in front of `passthrough-upstream.mjs` (`drive-passthrough.mjs`):
//!   prompts, completion, resources, log levels and messages, progress, and the upstream's own
//!   sampling and roots requests, both ways.
//!
//! The npm packages come from the committed lock file (`npm ci`, run here when they are
//! missing); the Python SDK from a venv under the target directory.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
};

use clap::Parser as _;

type Failure = Box<dyn std::error::Error + Send + Sync>;

const PROXY: &str = env!("CARGO_BIN_EXE_mcp-write-guard-proxy");

fn peer_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peer")
}

/// `npm ci` in `tests/peer` unless its packages are there.
fn npm_packages() -> Result<(), Failure> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = peer_dir();
    if dir.join("node_modules/@modelcontextprotocol/sdk").exists()
        && dir
            .join("node_modules/@modelcontextprotocol/server-filesystem")
            .exists()
    {
        return Ok(());
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .status()
        .map_err(|e| format!("npm ci (are Node.js and npm installed?): {e}"))?;
    if !status.success() {
        return Err("npm ci in crates/proxy/tests/peer failed (npm registry reachable?)".into());
    }
    Ok(())
}

/// Runs a driver script; its output when it says every case passed, else an error with all it
/// printed.
fn drive(program: &Path, args: &[&std::ffi::OsStr], passed: &str) -> Result<String, Failure> {
    let output = Command::new(program)
        .args(args)
        .env_remove("MCP_WRITES_ENABLED")
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() || !stdout.contains(passed) {
        return Err(format!(
            "{} exited {}, expected \"{passed}\":\n{stdout}\n{stderr}",
            program.display(),
            output.status
        )
        .into());
    }
    Ok(stdout)
}

fn node() -> PathBuf {
    PathBuf::from("node")
}

#[test]
fn the_typescript_sdk_client_writes_through_the_proxy_only_what_the_person_approved() {
    npm_packages().unwrap();
    let script = peer_dir().join("drive.mjs");
    let out = drive(
        &node(),
        &[
            script.as_os_str(),
            "--proxy".as_ref(),
            PROXY.as_ref(),
            "--case".as_ref(),
            "all".as_ref(),
        ],
        "5 passed, 0 failed",
    )
    .unwrap();
    for case in [
        "ok fs-write-decline (elicitations: 1)",
        "ok fs-write-approve (elicitations: 1)",
        "ok fs-read-wrapped (elicitations: 0)",
    ] {
        assert!(out.contains(case), "{case}: {out}");
    }
}

/// A venv with the official Python SDK under the target directory, shared with the other
/// packages' tests ([`workspace_tests::python_sdk`]).
fn python() -> Result<PathBuf, Failure> {
    workspace_tests::python_sdk(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

#[test]
fn the_python_sdk_writes_through_the_proxy_only_what_the_person_approved() {
    npm_packages().unwrap();
    let python = python().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/drive.py");
    drive(
        &python,
        &[
            script.as_os_str(),
            "--proxy".as_ref(),
            PROXY.as_ref(),
            "--case".as_ref(),
            "all".as_ref(),
        ],
        "3 passed, 0 failed",
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_fixture_upstream_pins_changes_questions_and_failures() {
    npm_packages().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The pin of the unchanged fixture, made by mcp-audit's own code (`mcp-audit stdio --pin`).
    let pin = dir.path().join("pin.json");
    let fixture = peer_dir().join("fixture-upstream.mjs");
    let cli = mcp_write_guard_audit::Cli::try_parse_from([
        "mcp-audit".as_ref(),
        "stdio".as_ref(),
        "--pin".as_ref(),
        pin.as_os_str(),
        "--".as_ref(),
        "node".as_ref(),
        fixture.as_os_str(),
    ])
    .unwrap();
    let pinned = mcp_write_guard_audit::run(&cli).await;
    assert_eq!(pinned.status.code(), 0, "{}", pinned.stderr);
    assert!(pin.exists());
    let script = peer_dir().join("drive-fixture.mjs");
    let out = tokio::task::spawn_blocking(move || {
        drive(
            &node(),
            &[
                script.as_os_str(),
                "--proxy".as_ref(),
                PROXY.as_ref(),
                "--pin-from".as_ref(),
                pin.as_os_str(),
                "--case".as_ref(),
                "all".as_ref(),
            ],
            "8 passed, 0 failed",
        )
    })
    .await
    .unwrap()
    .unwrap();
    assert!(out.contains("ok definition-changes-while-asked"), "{out}");
}

#[test]
fn prompts_completion_resources_logging_progress_sampling_and_roots_pass_through() {
    npm_packages().unwrap();
    let script = peer_dir().join("drive-passthrough.mjs");
    drive(
        &node(),
        &[script.as_os_str(), "--proxy".as_ref(), PROXY.as_ref()],
        "4 passed, 0 failed",
    )
    .unwrap();
}
