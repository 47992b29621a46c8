//! Helpers shared by the integration tests: run the built `mcp-audit` binary.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;

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
    /// Asserts that the run exited with `code`; the stdout as JSON (see [`Run::json`]).
    pub(crate) fn report(&self, code: i32) -> Value {
        assert_eq!(self.code, code, "{self:?}");
        self.json()
    }

    /// Asserts that the run could not audit (exit code 2) and that its stderr says `says`.
    pub(crate) fn assert_cannot_audit(&self, says: &str) {
        assert_eq!(self.code, 2, "{self:?}");
        assert!(self.stderr.contains(says), "{self:?}");
    }

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

/// A new temporary directory (removed when dropped) and the path of `name` in it; the file is
/// not created.
pub(crate) fn temp_file(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    (dir, path)
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

/// An https front for the plain server at `plain`: a fresh self-signed certificate for
/// 127.0.0.1, TLS ended here and the bytes passed on. Returns its address and the certificate
/// (PEM). A client that does not trust the certificate gets no further than the handshake.
pub(crate) async fn tls_front(plain: SocketAddr) -> (SocketAddr, String) {
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
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let Ok(mut upstream) = tokio::net::TcpStream::connect(plain).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
            });
        }
    });
    (addr, pem)
}
