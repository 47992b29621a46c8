//! The client side: start or reach a server, list every tool across all pages, disconnect.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::RoleClient;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport};
use rmcp::{ClientLifecycleMode, ClientServiceExt as _};

use crate::capture::{LineTap, Recorder, TappedHttp};
use crate::error::AuditError;
use crate::surface::ListedTool;

/// The variables of the caller's environment that a stdio server always receives (when set).
/// Everything else must be named with `--env`.
pub const BASE_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// What the server said about itself and the tools it lists.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Listing {
    /// The server's implementation info, when it gave any.
    pub server: Option<Implementation>,
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// Every tool, across all pages, in the order listed, as the server sent it.
    pub tools: Vec<ListedTool>,
    /// The size of the tool list as sent (see [`crate::ToolsList::from_results`]).
    pub tools_list_bytes: usize,
}

/// Which protocol era the audit speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Protocol {
    /// The `initialize` handshake (protocol 2025-11-25 and earlier).
    #[default]
    #[value(name = "legacy")]
    Legacy,
    /// `server/discover` and per-request metadata (protocol 2026-07-28), no handshake.
    #[value(name = "2026-07-28")]
    V2026_07_28,
    /// Try `server/discover` first; fall back to `initialize` when the server is older.
    #[value(name = "auto")]
    Auto,
}

impl Protocol {
    fn lifecycle(self) -> ClientLifecycleMode {
        match self {
            Self::Legacy => ClientLifecycleMode::Initialize,
            Self::V2026_07_28 => ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
            Self::Auto => ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: None,
            },
        }
    }
}

/// The environment a stdio server is started with: [`BASE_ENV`] and each of `pass`, taken from
/// `lookup` (the caller's environment). A [`BASE_ENV`] variable that is not set is left out; a
/// variable named in `pass` that is not set is an error, as is a name that is not a name.
///
/// # Errors
///
/// [`AuditError::BadEnvName`], [`AuditError::EnvNotSet`].
pub fn child_env(
    pass: &[String],
    lookup: impl Fn(&str) -> Option<OsString>,
) -> Result<Vec<(String, OsString)>, AuditError> {
    let mut env: Vec<(String, OsString)> = Vec::new();
    for name in pass {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(AuditError::BadEnvName(name.clone()));
        }
        let value = lookup(name).ok_or_else(|| AuditError::EnvNotSet(name.clone()))?;
        env.push((name.clone(), value));
    }
    for name in BASE_ENV {
        if env.iter().any(|(n, _)| n == name) {
            continue;
        }
        if let Some(value) = lookup(name) {
            env.push((name.to_owned(), value));
        }
    }
    env.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(env)
}

/// Parses `--header 'Name: value'`.
///
/// # Errors
///
/// [`AuditError::BadHeader`] when there is no colon, or the name or value is not a valid HTTP
/// header name or value.
pub fn parse_header(header: &str) -> Result<(HeaderName, HeaderValue), AuditError> {
    let bad = |reason: &str| AuditError::BadHeader {
        header: header.to_owned(),
        reason: reason.to_owned(),
    };
    let (name, value) = header
        .split_once(':')
        .ok_or_else(|| bad("expected 'Name: value'"))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| bad("not a valid header name"))?;
    let value = HeaderValue::from_str(value.trim()).map_err(|_| bad("not a valid header value"))?;
    Ok((name, value))
}

/// Checks that `url` is an http or https URL with a host.
///
/// # Errors
///
/// [`AuditError::BadUrl`] for anything else.
pub fn check_http_url(url: &str) -> Result<reqwest::Url, AuditError> {
    let bad = |reason: &str| AuditError::BadUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let parsed = reqwest::Url::parse(url).map_err(|e| bad(&format!("not a URL: {e}")))?;
    match parsed.scheme() {
        "http" | "https" => {}
        other => {
            return Err(bad(&format!(
                "unsupported scheme {other:?}: use http or https"
            )));
        }
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    Ok(parsed)
}

/// The HTTP client for `http` and `metadata`: https servers are trusted through the public web
/// roots (the operating system's trust store), or, with `ca_file`, through the certificates in
/// that PEM file only. Redirects are not followed: the audit reports what the given URL answers.
///
/// # Errors
///
/// [`AuditError::ReadFile`] when `ca_file` cannot be read, [`AuditError::CaFile`] when it holds
/// no usable certificate, [`AuditError::Connect`] when the client cannot be built.
pub fn http_client(ca_file: Option<&Path>) -> Result<reqwest::Client, AuditError> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0);
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|source| AuditError::ReadFile {
            path: path.to_owned(),
            source,
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .ok()
            .filter(|certs| !certs.is_empty())
            .ok_or_else(|| AuditError::CaFile(path.to_owned()))?;
        builder = builder.tls_certs_only(certs);
    }
    builder
        .build()
        .map_err(|e| AuditError::Connect(format!("could not set up the HTTP client: {e}")))
}

/// Starts `command` with exactly `env` (see [`child_env`]) and lists its tools.
///
/// The server's stderr goes to this process's stderr. The server is stopped before returning.
///
/// # Errors
///
/// [`AuditError::Spawn`], [`AuditError::Connect`], [`AuditError::ListTools`],
/// [`AuditError::Timeout`].
pub async fn list_stdio(
    command: &[OsString],
    env: &[(String, OsString)],
    protocol: Protocol,
    timeout: Duration,
) -> Result<Listing, AuditError> {
    let shown = command
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let spawn_error = |source| AuditError::Spawn {
        command: shown.clone(),
        source,
    };
    let (program, args) = command.split_first().ok_or_else(|| {
        spawn_error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "no command given",
        ))
    })?;
    let mut cmd = tokio::process::Command::new(program);
    // kill_on_drop: a server that is still running when the audit ends (a timeout) is killed
    // even if the runtime shuts down before the transport's own cleanup runs.
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (OsStr::new(k), v.as_os_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(spawn_error)?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(spawn_error(std::io::Error::other("no stdio pipes")));
    };
    let recorder = Recorder::default();
    let transport = (
        LineTap::reading(stdout, recorder.clone()),
        LineTap::writing(stdin, recorder.clone()),
    );
    let listing = with_timeout(timeout, list(transport, protocol, recorder)).await;
    // The pipes are closed by now; a server that does not exit on its own is stopped.
    let _killed = child.kill().await;
    listing
}

/// Connects to the streamable HTTP endpoint `url` (http or https), sending `headers`, and lists
/// its tools. `ca_file`: see [`http_client`].
///
/// # Errors
///
/// [`AuditError::BadUrl`], [`AuditError::BadHeader`], [`AuditError::CaFile`],
/// [`AuditError::Connect`], [`AuditError::ListTools`], [`AuditError::Timeout`].
pub async fn list_http(
    url: &str,
    headers: &[String],
    ca_file: Option<&Path>,
    protocol: Protocol,
    timeout: Duration,
) -> Result<Listing, AuditError> {
    check_http_url(url)?;
    let mut custom: HashMap<HeaderName, HeaderValue> = HashMap::new();
    for header in headers {
        let (name, value) = parse_header(header)?;
        custom.insert(name, value);
    }
    let recorder = Recorder::default();
    let client = TappedHttp::new(http_client(ca_file)?, recorder.clone());
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    let transport = StreamableHttpClientTransport::with_client(client, config);
    with_timeout(timeout, list(transport, protocol, recorder)).await
}

/// How the audit introduces itself: as `mcp-audit`, asking for no capability (no sampling,
/// no elicitation, no roots), since it never calls a tool.
fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("mcp-audit", env!("CARGO_PKG_VERSION")),
    )
}

async fn with_timeout<T>(
    timeout: Duration,
    work: impl Future<Output = Result<T, AuditError>>,
) -> Result<T, AuditError> {
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| AuditError::Timeout(timeout))?
}

async fn list<T, E, A>(
    transport: T,
    protocol: Protocol,
    recorder: Recorder,
) -> Result<Listing, AuditError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let client = client_config()
        .serve_with_lifecycle(transport, protocol.lifecycle())
        .await
        .map_err(|e| AuditError::Connect(e.to_string()))?;
    let info = client.peer_info();
    let listed = client.list_all_tools().await;
    // Closing is best effort: the listing is what matters, and a server that does not shut
    // down cleanly is stopped when its transport is dropped.
    let _closed = client.cancel().await;
    let parsed = listed.map_err(|e| AuditError::ListTools(e.to_string()))?;
    let list = recorder.tools_list()?;
    if list.tools.len() != parsed.len() {
        return Err(AuditError::ListTools(format!(
            "{} tools were parsed but {} were received as sent",
            parsed.len(),
            list.tools.len()
        )));
    }
    Ok(Listing {
        server: info.as_ref().and_then(|i| i.server_info.clone()),
        protocol_version: info
            .as_ref()
            .map(|i| i.protocol_version.to_string())
            .unwrap_or_default(),
        tools: list.tools,
        tools_list_bytes: list.bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<OsString> {
        match name {
            "HOME" => Some("/home/a".into()),
            "PATH" => Some("/bin".into()),
            "SECRET" => Some("hunter2".into()),
            "TOKEN" => Some("t".into()),
            _ => None,
        }
    }

    #[test]
    fn the_child_gets_the_base_variables_that_are_set_and_nothing_else() {
        let env = child_env(&[], lookup).unwrap();
        let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["HOME", "PATH"]);
    }

    #[test]
    fn named_variables_are_passed_through() {
        let env = child_env(&["TOKEN".to_owned()], lookup).unwrap();
        let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["HOME", "PATH", "TOKEN"]);
        assert!(!names.contains(&"SECRET"));
    }

    #[test]
    fn naming_a_base_variable_twice_passes_it_once() {
        let env = child_env(&["HOME".to_owned()], lookup).unwrap();
        assert_eq!(env.iter().filter(|(n, _)| n == "HOME").count(), 1);
    }

    #[test]
    fn an_unset_or_malformed_name_is_refused() {
        assert!(matches!(
            child_env(&["MISSING".to_owned()], lookup),
            Err(AuditError::EnvNotSet(n)) if n == "MISSING"
        ));
        for bad in ["", "A=B", "A B", "A-B"] {
            assert!(
                matches!(
                    child_env(&[bad.to_owned()], lookup),
                    Err(AuditError::BadEnvName(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn headers_parse_as_name_colon_value() {
        let (name, value) = parse_header("Authorization: Bearer a:b").unwrap();
        assert_eq!(name.as_str(), "authorization");
        assert_eq!(value.to_str().unwrap(), "Bearer a:b");
        assert!(parse_header("no colon").is_err());
        assert!(parse_header("bad name: x").is_err());
        assert!(parse_header("X-A: line\nbreak").is_err());
    }

    #[test]
    fn only_http_and_https_urls_are_accepted() {
        assert!(check_http_url("http://127.0.0.1:8080/mcp").is_ok());
        assert!(check_http_url("https://example.com/mcp").is_ok());
        assert!(matches!(
            check_http_url("ftp://x/"),
            Err(AuditError::BadUrl { .. })
        ));
        assert!(matches!(
            check_http_url("not a url"),
            Err(AuditError::BadUrl { .. })
        ));
    }
}
