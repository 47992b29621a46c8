//! Helpers shared by the integration tests: run the built `mcp-audit` binary.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::process::Stdio;

use serde_json::Value;

/// The built `mcp-audit` binary.
pub(crate) const AUDIT: &str = env!("CARGO_BIN_EXE_mcp-audit");
/// The built fixture server.
pub(crate) const FIXTURE: &str = env!("CARGO_BIN_EXE_audit-fixture");

/// What a run of `mcp-audit` gave.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    /// The stdout as JSON.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }
}

/// Runs `mcp-audit` with `args` and the extra environment `env` on top of this process's.
pub(crate) async fn audit<I, S>(args: I, env: &[(&str, &str)]) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = tokio::process::Command::new(AUDIT);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().await.expect("mcp-audit runs");
    Run {
        code: out
            .status
            .code()
            .expect("mcp-audit exited, not killed by a signal"),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// `mcp-audit --json stdio ... -- audit-fixture MODE` with extra flags before `--`.
pub(crate) async fn audit_fixture(mode: &str, flags: &[&str], env: &[(&str, &str)]) -> Run {
    let mut args: Vec<&str> = vec!["stdio", "--json"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", FIXTURE, mode]);
    audit(args, env).await
}

/// The names in a JSON array of strings.
pub(crate) fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|n| n.as_str().expect("a string").to_owned())
        .collect()
}

/// The surface counts `(total, readOnly, destructive, openWorld, unannotated, partiallyAnnotated)`.
pub(crate) fn counts(report: &Value) -> (u64, u64, u64, u64, usize, usize) {
    let s = &report["surface"];
    (
        s["total"].as_u64().unwrap(),
        s["readOnly"].as_u64().unwrap(),
        s["destructive"].as_u64().unwrap(),
        s["openWorld"].as_u64().unwrap(),
        s["unannotated"].as_array().unwrap().len(),
        s["partiallyAnnotated"].as_array().unwrap().len(),
    )
}
