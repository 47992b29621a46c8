//! `mcp-audit metadata`: an MCP endpoint's OAuth protected resource metadata (RFC 9728).
//!
//! The document is looked for first at the well-known location with the endpoint's path
//! (`{scheme}://{host}/.well-known/oauth-protected-resource{path}`), then at the root form
//! (`{scheme}://{host}/.well-known/oauth-protected-resource`), as the MCP authorization spec
//! asks of clients. Redirects are not followed. The checks ([`findings`]) are pure; only
//! [`fetch`] does IO.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use reqwest::Url;
use serde::{Deserialize, Serialize};

use crate::connect::{check_http_url, http_client};
use crate::error::AuditError;

/// The RFC 9728 well-known path segment.
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The largest metadata document read, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// The fields of a protected resource metadata document that the audit shows. Other fields are
/// ignored; `resource` is required (RFC 9728 section 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ResourceMetadata {
    /// The protected resource's identifier.
    pub resource: String,
    /// Issuer identifiers of the authorization servers.
    #[serde(default)]
    pub authorization_servers: Option<Vec<String>>,
    /// Scopes the resource uses.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// Human-readable name.
    #[serde(default)]
    pub resource_name: Option<String>,
}

impl ResourceMetadata {
    /// Parses a metadata document.
    ///
    /// # Errors
    ///
    /// A message saying why the document is malformed (not JSON, not an object, `resource`
    /// missing, a field of the wrong type).
    pub fn from_json(body: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(body).map_err(|e| e.to_string())
    }
}

/// Something about the metadata that deserves a look.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "finding")]
#[non_exhaustive]
pub enum Finding {
    /// `resource` is not identical (as a string) to the endpoint URL.
    ResourceMismatch {
        /// The document's `resource`.
        resource: String,
        /// The endpoint URL as given.
        endpoint: String,
    },
    /// An authorization server is on another host than the endpoint.
    ForeignAuthorizationServer {
        /// The authorization server.
        server: String,
        /// Its host.
        host: String,
    },
    /// An authorization server is not a URL with a host.
    InvalidAuthorizationServer {
        /// The value as given.
        server: String,
    },
    /// No authorization server is listed.
    NoAuthorizationServers,
    /// Exactly one scope is supported: no partial grant to negotiate.
    SingleScope {
        /// The scope.
        scope: String,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ResourceMismatch { resource, endpoint } => write!(
                f,
                "resource {resource:?} is not identical to the endpoint URL {endpoint:?}: tokens \
                 for one may be accepted by the other"
            ),
            Self::ForeignAuthorizationServer { server, host } => write!(
                f,
                "authorization server {server:?} is on another host ({host}) than the endpoint"
            ),
            Self::InvalidAuthorizationServer { server } => {
                write!(
                    f,
                    "authorization server {server:?} is not a URL with a host"
                )
            }
            Self::NoAuthorizationServers => {
                write!(
                    f,
                    "no authorization server is listed (authorization_servers is empty or absent)"
                )
            }
            Self::SingleScope { scope } => write!(
                f,
                "a single scope ({scope:?}): a client cannot ask for less than everything"
            ),
        }
    }
}

/// The well-known URLs to try for `endpoint`, in order: the path form, then the root form
/// (only the root form when the endpoint has no path).
pub fn well_known_urls(endpoint: &Url) -> Vec<Url> {
    let mut root = endpoint.clone();
    root.set_path(WELL_KNOWN);
    root.set_query(None);
    root.set_fragment(None);
    let path = endpoint.path().trim_end_matches('/');
    if path.is_empty() && endpoint.query().is_none() {
        return vec![root];
    }
    let mut with_path = root.clone();
    with_path.set_path(&format!("{WELL_KNOWN}{}", endpoint.path()));
    with_path.set_query(endpoint.query());
    vec![with_path, root]
}

/// The findings for a document fetched for `endpoint` (the URL as the user gave it).
pub fn findings(endpoint: &str, metadata: &ResourceMetadata) -> Vec<Finding> {
    let mut found = Vec::new();
    if metadata.resource != endpoint {
        found.push(Finding::ResourceMismatch {
            resource: metadata.resource.clone(),
            endpoint: endpoint.to_owned(),
        });
    }
    let endpoint_host = Url::parse(endpoint)
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase));
    let servers = metadata
        .authorization_servers
        .as_deref()
        .unwrap_or_default();
    if servers.is_empty() {
        found.push(Finding::NoAuthorizationServers);
    }
    for server in servers {
        let host = Url::parse(server)
            .ok()
            .and_then(|u| u.host_str().map(str::to_ascii_lowercase));
        match host {
            None => found.push(Finding::InvalidAuthorizationServer {
                server: server.clone(),
            }),
            Some(host) if Some(&host) != endpoint_host.as_ref() => {
                found.push(Finding::ForeignAuthorizationServer {
                    server: server.clone(),
                    host,
                });
            }
            Some(_) => {}
        }
    }
    if let Some([scope]) = metadata.scopes_supported.as_deref() {
        found.push(Finding::SingleScope {
            scope: scope.clone(),
        });
    }
    found
}

/// What a request answered: a status code, or a network error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// The URL asked.
    pub url: String,
    /// The HTTP status, when there was an answer.
    pub status: Option<u16>,
    /// The network error, when there was none.
    pub error: Option<String>,
}

/// The outcome of `mcp-audit metadata`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct MetadataReport {
    /// The endpoint as given.
    pub endpoint: String,
    /// Every well-known URL asked, in order, with its answer.
    pub attempts: Vec<Answer>,
    /// Where the document was found.
    pub document_url: String,
    /// The document.
    pub metadata: ResourceMetadata,
    /// The findings.
    pub findings: Vec<Finding>,
    /// What a plain GET on the endpoint answered.
    pub plain_get: Answer,
    /// Whether that answer was 405 Method Not Allowed.
    pub plain_get_is_405: bool,
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

async fn read_body(mut response: reqwest::Response, url: &Url) -> Result<Vec<u8>, AuditError> {
    let mut body = Vec::new();
    loop {
        let chunk = response.chunk().await.map_err(|e| {
            AuditError::Metadata(format!("could not read {url}: {}", error_chain(&e)))
        })?;
        let Some(chunk) = chunk else {
            return Ok(body);
        };
        if body.len().saturating_add(chunk.len()) > MAX_DOCUMENT_BYTES {
            return Err(AuditError::Metadata(format!(
                "{url}: the metadata document is larger than {MAX_DOCUMENT_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
}

/// Fetches and checks the metadata for `endpoint`.
///
/// # Errors
///
/// [`AuditError::BadUrl`] for a URL that is not http or https, [`AuditError::ReadFile`] /
/// [`AuditError::CaFile`] for an unusable `ca_file` (see [`http_client`]),
/// [`AuditError::Metadata`] for a network error, no document at either location, or a
/// malformed document.
pub async fn fetch(
    endpoint: &str,
    ca_file: Option<&Path>,
    timeout: Duration,
) -> Result<MetadataReport, AuditError> {
    let url = check_http_url(endpoint)?;
    let client = http_client(ca_file)?;
    let mut attempts = Vec::new();
    let mut found = None;
    for candidate in well_known_urls(&url) {
        let response = client
            .get(candidate.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| {
                AuditError::Metadata(format!("could not fetch {candidate}: {}", error_chain(&e)))
            })?;
        let status = response.status();
        attempts.push(Answer {
            url: candidate.to_string(),
            status: Some(status.as_u16()),
            error: None,
        });
        if status.is_success() {
            let body = read_body(response, &candidate).await?;
            let metadata = ResourceMetadata::from_json(&body).map_err(|e| {
                AuditError::Metadata(format!(
                    "{candidate}: malformed protected resource metadata: {e}"
                ))
            })?;
            found = Some((candidate, metadata));
            break;
        }
    }
    let Some((document_url, metadata)) = found else {
        let asked: Vec<String> = attempts
            .iter()
            .map(|a| format!("{} answered {}", a.url, a.status.unwrap_or_default()))
            .collect();
        return Err(AuditError::Metadata(format!(
            "no protected resource metadata found: {}",
            asked.join("; ")
        )));
    };
    let plain_get = match client.get(url.clone()).timeout(timeout).send().await {
        Ok(response) => Answer {
            url: url.to_string(),
            status: Some(response.status().as_u16()),
            error: None,
        },
        Err(e) => Answer {
            url: url.to_string(),
            status: None,
            error: Some(error_chain(&e)),
        },
    };
    Ok(MetadataReport {
        endpoint: endpoint.to_owned(),
        attempts,
        document_url: document_url.to_string(),
        findings: findings(endpoint, &metadata),
        metadata,
        plain_get_is_405: plain_get.status == Some(405),
        plain_get,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(endpoint: &str) -> Vec<String> {
        well_known_urls(&Url::parse(endpoint).unwrap())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn the_path_form_comes_first_then_the_root_form() {
        assert_eq!(
            urls("http://127.0.0.1:8080/mcp"),
            [
                "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp",
                "http://127.0.0.1:8080/.well-known/oauth-protected-resource",
            ]
        );
        assert_eq!(
            urls("http://h/a/b?x=1"),
            [
                "http://h/.well-known/oauth-protected-resource/a/b?x=1",
                "http://h/.well-known/oauth-protected-resource",
            ]
        );
    }

    #[test]
    fn an_endpoint_without_a_path_has_only_the_root_form() {
        assert_eq!(
            urls("http://h:1"),
            ["http://h:1/.well-known/oauth-protected-resource"]
        );
        assert_eq!(
            urls("http://h:1/"),
            ["http://h:1/.well-known/oauth-protected-resource"]
        );
    }

    fn doc(resource: &str, servers: &[&str], scopes: Option<&[&str]>) -> ResourceMetadata {
        ResourceMetadata {
            resource: resource.to_owned(),
            authorization_servers: Some(servers.iter().map(|s| (*s).to_owned()).collect()),
            scopes_supported: scopes.map(|s| s.iter().map(|s| (*s).to_owned()).collect()),
            resource_name: None,
        }
    }

    #[test]
    fn a_good_document_has_no_findings() {
        let d = doc("http://h:1/mcp", &["http://h:2/"], Some(&["read", "write"]));
        assert_eq!(findings("http://h:1/mcp", &d), []);
    }

    #[test]
    fn each_finding_is_flagged() {
        let d = doc(
            "http://h:1/other",
            &["http://auth.example/", "nope"],
            Some(&["all"]),
        );
        assert_eq!(
            findings("http://h:1/mcp", &d),
            [
                Finding::ResourceMismatch {
                    resource: "http://h:1/other".into(),
                    endpoint: "http://h:1/mcp".into()
                },
                Finding::ForeignAuthorizationServer {
                    server: "http://auth.example/".into(),
                    host: "auth.example".into()
                },
                Finding::InvalidAuthorizationServer {
                    server: "nope".into()
                },
                Finding::SingleScope {
                    scope: "all".into()
                },
            ]
        );
        assert_eq!(
            findings("http://h:1/mcp", &doc("http://h:1/mcp", &[], None)),
            [Finding::NoAuthorizationServers]
        );
    }

    #[test]
    fn identical_means_identical() {
        let d = doc("http://h:1/mcp/", &["http://h/"], None);
        assert_eq!(findings("http://h:1/mcp", &d).len(), 1);
    }

    #[test]
    fn malformed_documents_are_errors() {
        assert!(ResourceMetadata::from_json(b"{").is_err());
        assert!(ResourceMetadata::from_json(b"[]").is_err());
        assert!(ResourceMetadata::from_json(br#"{"authorization_servers": []}"#).is_err());
        assert!(
            ResourceMetadata::from_json(br#"{"resource": "x", "scopes_supported": "a"}"#).is_err()
        );
        let ok = ResourceMetadata::from_json(br#"{"resource": "x", "extra": 1}"#).unwrap();
        assert_eq!(ok.resource, "x");
    }
}
