//! The client side: start or reach a server, list every tool across all pages, disconnect.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, Tool};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};

use crate::error::AuditError;

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
    /// Every tool, across all pages, in the order listed.
    pub tools: Vec<Tool>,
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

/// Checks that `url` is an http URL this build can reach.
///
/// # Errors
///
/// [`AuditError::HttpsUnsupported`] for https, [`AuditError::BadUrl`] for anything else that is
/// not an http URL with a host.
pub fn check_http_url(url: &str) -> Result<reqwest::Url, AuditError> {
    let bad = |reason: &str| AuditError::BadUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let parsed = reqwest::Url::parse(url).map_err(|e| bad(&format!("not a URL: {e}")))?;
    match parsed.scheme() {
        "http" => {}
        "https" => return Err(AuditError::HttpsUnsupported(url.to_owned())),
        other => return Err(bad(&format!("unsupported scheme {other:?}: use http"))),
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    Ok(parsed)
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
    timeout: Duration,
) -> Result<Listing, AuditError> {
    let (program, args) = command.split_first().ok_or_else(|| AuditError::Spawn {
        command: String::new(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command given"),
    })?;
    let mut cmd = tokio::process::Command::new(program);
    // kill_on_drop: a server that is still running when the audit ends (a timeout) is killed
    // even if the runtime shuts down before the transport's own cleanup runs.
    cmd.args(args).env_clear().kill_on_drop(true);
    cmd.envs(env.iter().map(|(k, v)| (OsStr::new(k), v.as_os_str())));
    let shown = command
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let transport = TokioChildProcess::new(cmd).map_err(|source| AuditError::Spawn {
        command: shown,
        source,
    })?;
    with_timeout(timeout, async move {
        let client = client_config()
            .serve(transport)
            .await
            .map_err(|e| AuditError::Connect(e.to_string()))?;
        list(client).await
    })
    .await
}

/// Connects to the streamable HTTP endpoint `url`, sending `headers`, and lists its tools.
///
/// # Errors
///
/// [`AuditError::BadUrl`], [`AuditError::HttpsUnsupported`], [`AuditError::BadHeader`],
/// [`AuditError::Connect`], [`AuditError::ListTools`], [`AuditError::Timeout`].
pub async fn list_http(
    url: &str,
    headers: &[String],
    timeout: Duration,
) -> Result<Listing, AuditError> {
    check_http_url(url)?;
    let mut custom: HashMap<HeaderName, HeaderValue> = HashMap::new();
    for header in headers {
        let (name, value) = parse_header(header)?;
        custom.insert(name, value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    with_timeout(timeout, async move {
        let transport = StreamableHttpClientTransport::from_config(config);
        let client = client_config()
            .serve(transport)
            .await
            .map_err(|e| AuditError::Connect(e.to_string()))?;
        list(client).await
    })
    .await
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

async fn list(client: RunningService<RoleClient, ClientConfig>) -> Result<Listing, AuditError> {
    let info = client.peer_info();
    let listed = client.list_all_tools().await;
    // Closing is best effort: the listing is what matters, and a server that does not shut
    // down cleanly is stopped when its transport is dropped.
    let _closed = client.cancel().await;
    let tools = listed.map_err(|e| AuditError::ListTools(e.to_string()))?;
    Ok(Listing {
        server: info.as_ref().and_then(|i| i.server_info.clone()),
        protocol_version: info
            .as_ref()
            .map(|i| i.protocol_version.to_string())
            .unwrap_or_default(),
        tools,
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
    fn only_http_urls_are_accepted() {
        assert!(check_http_url("http://127.0.0.1:8080/mcp").is_ok());
        assert!(matches!(
            check_http_url("https://example.com/mcp"),
            Err(AuditError::HttpsUnsupported(_))
        ));
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
