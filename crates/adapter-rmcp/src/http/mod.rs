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
    BoundedSessions, DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SESSIONS_PER_OWNER, DEFAULT_SESSION_IDLE,
    SessionsError,
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

/// Whether `url` is usable as the public URL of an MCP endpoint: `http(s)://host[:port]/path`,
/// the host a DNS name, an IPv4 address or a bracketed IPv6 address, the port 1 to 65535, the
/// path of plain characters (letters, digits, `-._~/`, no `.` or `..` segments), no query, no
/// fragment, no user info, no quotes.
pub fn is_plain_endpoint_url(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    if scheme != "http" && scheme != "https" {
        return false;
    }
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((v6, after)) if v6.parse::<std::net::Ipv6Addr>().is_ok() => (None, after),
            _ => return false,
        },
        None => {
            let (host, port) = authority.split_at(authority.find(':').unwrap_or(authority.len()));
            (Some(host), port)
        }
    };
    let port_ok = match port {
        "" => true,
        port => port
            .strip_prefix(':')
            .is_some_and(|p| !p.starts_with('0') && p.parse::<u16>().is_ok_and(|n| n != 0)),
    };
    let name_ok = host.is_none_or(|host| {
        !host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty()
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            })
    });
    let path_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '/');
    port_ok
        && name_ok
        && path.chars().all(path_ok)
        && !path.contains("//")
        && !path
            .split('/')
            .any(|segment| segment == "." || segment == "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_endpoint_urls() {
        for good in [
            "https://mcp.example.com/mcp",
            "http://127.0.0.1:8080/mcp",
            "http://[::1]:8080/mcp",
            "https://mcp.example.com",
            "https://a-b.example/v1/mcp",
        ] {
            assert!(is_plain_endpoint_url(good), "{good}");
        }
        for bad in [
            "http://[::1/mcp",
            "https://[/mcp",
            "https://]]]:1/mcp",
            "https://a:1:2/mcp",
            "https://h:0001",
            "https://h:0/mcp",
            "https://h:65536/mcp",
            "https://h/a/../../b",
            "https://h/./b",
            "https://h/*x",
            "https://h/{",
            "https://h/\"",
            "https:// /mcp",
            "https://u@h/mcp",
            "https://h/mcp?x=1",
            "https://h./mcp",
            "https://-h/mcp",
            "ftp://h/mcp",
            "mcp.example",
        ] {
            assert!(!is_plain_endpoint_url(bad), "{bad}");
        }
    }
}
