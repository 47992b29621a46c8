//! Streamable HTTP, hardened (feature `http`): who is asking, which pages may call, how many
//! sessions.
//!
//! rmcp's [`StreamableHttpService`](rmcp::transport::streamable_http_server::StreamableHttpService)
//! serves MCP over HTTP; these pieces go around it:
//!
//! - [`BearerAuth`]: an OAuth 2.1 resource server. Requests without a valid JWT get 401 and the
//!   RFC 9728 metadata URL; valid ones carry an [`AuthenticatedSubject`](crate::AuthenticatedSubject),
//!   which [`FromAuthenticatedSubject`](crate::FromAuthenticatedSubject) turns into the principal
//!   (issuer + subject) and [`WriteGuardBuilder::write_scope`](crate::WriteGuardBuilder::write_scope)
//!   checks for the write scope.
//! - [`LOOPBACK_ORIGINS`]: the browser origins a local server accepts; pass them, with any
//!   origin you list, to `StreamableHttpServerConfig::with_allowed_origins`, which answers every
//!   other `Origin` with 403 (requests without `Origin`, such as those of non-browser clients,
//!   pass).
//! - [`BoundedSessions`]: rmcp's session manager with a ceiling on live sessions and an idle
//!   timeout.
//!
//! Which principal a deployment gets:
//!
//! | set-up | resolver | who can write |
//! |---|---|---|
//! | loopback only, no auth | [`LocalMachine`](crate::LocalMachine) | every client on the machine, as one person (`local`) |
//! | bearer auth | [`FromAuthenticatedSubject`](crate::FromAuthenticatedSubject) | each verified subject, as itself |
//! | neither | [`PerConnection`](crate::PerConnection) | sessions of the older protocol era only; 2026-07-28 requests are refused |
//!
//! A runnable server with auth: `crates/adapter-rmcp/examples/http_auth.rs`.

mod auth;
mod sessions;

pub use auth::{
    AuthConfig, AuthError, BearerAuth, DEFAULT_JWKS_REFRESH, DEFAULT_LEEWAY,
    DEFAULT_UNKNOWN_KID_REFETCH, JwksSource, METADATA_PATH, TokenRejection,
};
pub use sessions::{
    BoundedSessions, Claim, DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SESSIONS_PER_OWNER,
    DEFAULT_SESSION_IDLE, SessionsError,
};

/// Browser origins on this machine, any port: what a loopback server accepts in `Origin`.
pub const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// `origin` (`https://app.example.com`, `http://localhost:5173`) as an exact entry for
/// `StreamableHttpServerConfig::with_allowed_origins`: the scheme's default port made explicit,
/// since rmcp lets an entry without a port match every port. `None` unless it is an origin: an
/// `http` or `https` scheme, a host, an optional port, nothing else.
///
/// ```
/// use adapter_rmcp::http::exact_origin;
/// assert_eq!(exact_origin("https://app.example").as_deref(), Some("https://app.example:443"));
/// assert_eq!(exact_origin("http://localhost:5173").as_deref(), Some("http://localhost:5173"));
/// assert_eq!(exact_origin("https://app.example/"), None);
/// assert_eq!(exact_origin("app.example"), None);
/// ```
pub fn exact_origin(origin: &str) -> Option<String> {
    let (scheme, rest) = origin.split_once("://")?;
    let default_port = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':');
    if rest.is_empty() || !rest.chars().all(ok) {
        return None;
    }
    let has_port = match rest.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && !port.contains(']') => {
            port.parse::<u16>().ok()?;
            true
        }
        _ => false,
    };
    if has_port {
        Some(origin.to_owned())
    } else {
        Some(format!("{origin}:{default_port}"))
    }
}

/// Whether `url` is usable as the public URL of an MCP endpoint: `http(s)://host[:port]/path`
/// with a path of plain characters (letters, digits, `-._~/`), no query, no fragment, no
/// user info, no quotes.
pub fn is_plain_endpoint_url(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    if scheme != "http" && scheme != "https" {
        return false;
    }
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':');
    let path_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '/');
    let port_ok = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0)
        }
        _ => true,
    };
    !authority.is_empty()
        && authority.chars().all(host_ok)
        && !authority.starts_with(':')
        && port_ok
        && path.chars().all(path_ok)
        && !path.contains("//")
}
