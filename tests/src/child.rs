//! Peers the end-to-end tests start as child processes: a serving binary's URL read from its
//! log, and the official Python SDK in a venv.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
};

use tokio::{
    io::{AsyncBufReadExt, AsyncRead, BufReader},
    process::{Child, ChildStderr, Command},
};

use crate::Failure;

/// What a binary that serves streamable HTTP logs before its URL (store-server, the proxy).
pub const SERVING_AT: &str = "serving streamable HTTP at ";

/// Reads `log` (a child's stderr) until the line that says where it serves
/// ([`SERVING_AT`]) and returns that URL; an error if the log ends first.
pub async fn serving_url<R: AsyncRead + Unpin>(log: &mut BufReader<R>) -> Result<String, Failure> {
    let mut line = String::new();
    loop {
        line.clear();
        if log.read_line(&mut line).await? == 0 {
            return Err("the server exited before serving".into());
        }
        if let Some(at) = line.find(SERVING_AT) {
            let rest = line.get(at + SERVING_AT.len()..).unwrap_or_default();
            return Ok(rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned());
        }
    }
}

/// Spawns `command` with stdin closed and stderr piped, killed when dropped, and waits until it
/// says where it serves ([`serving_url`]): the child, the rest of its stderr, and the URL.
pub async fn spawn_serving(
    command: &mut Command,
) -> Result<(Child, BufReader<ChildStderr>, String), Failure> {
    let mut child = command
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut stderr = BufReader::new(child.stderr.take().ok_or("no stderr")?);
    let url = serving_url(&mut stderr).await?;
    Ok((child, stderr, url))
}

/// The official Python SDK version the tests drive.
pub const PYTHON_MCP: &str = "mcp==2.3.0";

/// A venv with the official Python SDK ([`PYTHON_MCP`]) in `tmp` (a test's
/// `CARGO_TARGET_TMPDIR`, shared by every package's tests): made on first use (`python3 -m
/// venv`, then `pip install`) in a folder of this process's own and renamed into place when
/// complete, so test processes running at once never share a half-made one; reused afterwards.
/// Returns the venv's `python`.
pub fn python_sdk(tmp: &Path) -> Result<PathBuf, Failure> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let venv = tmp.join("python-mcp-2.3.0");
    let python = venv.join("bin").join("python");
    if venv.join(".installed").exists() {
        return Ok(python);
    }
    let building = venv.with_extension(format!("building-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    let made = std::process::Command::new("python3")
        .args(["-m", "venv"])
        .arg(&building)
        .status()
        .map_err(|e| format!("python3 -m venv (is Python 3 installed?): {e}"))?;
    if !made.success() {
        return Err(format!("python3 -m venv {} failed", building.display()).into());
    }
    let installed = std::process::Command::new(building.join("bin").join("python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg(PYTHON_MCP)
        .status()?;
    if !installed.success() {
        return Err(format!("pip install {PYTHON_MCP} failed (PyPI reachable?)").into());
    }
    std::fs::write(building.join(".installed"), PYTHON_MCP)?;
    if std::fs::rename(&building, &venv).is_err() {
        // Another process finished first (or left a broken folder behind).
        let _ = std::fs::remove_dir_all(&building);
        if !venv.join(".installed").exists() {
            return Err(format!("could not put the venv at {}", venv.display()).into());
        }
    }
    Ok(python)
}
