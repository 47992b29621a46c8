//! Streamable HTTP for a guarded MCP server, hardened: who is asking (a bearer-token resource
//! server), which pages may call, how many sessions. It decides nothing about writes: the
//! principal it establishes is what `mcp-write-guard-rmcp`'s `WriteGuard` binds approvals to.
//!
//! rmcp's [`StreamableHttpService`](rmcp::transport::streamable_http_server::StreamableHttpService)
//! serves MCP over HTTP; these pieces go around it:
//!
//! - [`BearerAuth`]: an OAuth 2.1 resource server. Requests without a valid JWT get 401 and the
//!   RFC 9728 metadata URL; valid ones carry an [`AuthenticatedSubject`](mcp_write_guard_rmcp::AuthenticatedSubject),
//!   which [`FromAuthenticatedSubject`](mcp_write_guard_rmcp::FromAuthenticatedSubject) turns into the principal
//!   (issuer + subject) and [`WriteGuardBuilder::write_scope`](mcp_write_guard_rmcp::WriteGuardBuilder::write_scope)
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
//! | loopback only, no auth | [`LocalMachine`](mcp_write_guard_rmcp::LocalMachine) | every client on the machine, as one person (`local`) |
//! | bearer auth | [`FromAuthenticatedSubject`](mcp_write_guard_rmcp::FromAuthenticatedSubject) | each verified subject, as itself |
//! | neither | [`PerConnection`](mcp_write_guard_rmcp::PerConnection) | sessions of the older protocol era only; 2026-07-28 requests are refused |
//!
//! A runnable server with auth: `examples/http_auth.rs`
//! (`cargo run -p mcp-write-guard-http --example http_auth`).

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
/// use mcp_write_guard_http::exact_origin;
/// assert_eq!(exact_origin("https://app.example").as_deref(), Some("https://app.example:443"));
/// assert_eq!(exact_origin("http://localhost:5173").as_deref(), Some("http://localhost:5173"));
/// assert_eq!(exact_origin("https://app.example/"), None);
/// assert_eq!(exact_origin("app.example"), None);
/// ```
pub fn exact_origin(origin: &str) -> Option<String> {
    let (scheme, authority) = origin.split_once("://")?;
    let default_port = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let port = plain_authority(authority)?;
    if port.is_some() {
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
    let path_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '/');
    plain_authority(authority).is_some()
        && path.chars().all(path_ok)
        && !path.contains("//")
        && !path
            .split('/')
            .any(|segment| segment == "." || segment == "..")
}

/// `host[:port]` with the host a DNS name (letters, digits, inner `-`, the last label not a
/// number), a dotted decimal IPv4 address or a bracketed IPv6 address, and the port 1 to 65535
/// without leading zeros. `Some(port)` when it is one, `None` when it is not: a spelling that URL
/// parsers would read differently (an IPv4 address out of range, `1.2.3`, `0x7f.1`, user info,
/// an empty label) is refused rather than guessed.
fn plain_authority(authority: &str) -> Option<Option<u16>> {
    let (host_ok, port) = match authority.strip_prefix('[') {
        Some(bracketed) => {
            let (v6, after) = bracketed.split_once(']')?;
            (v6.parse::<std::net::Ipv6Addr>().is_ok(), after)
        }
        None => {
            let (host, port) = authority.split_at(authority.find(':').unwrap_or(authority.len()));
            let labels_ok = !host.is_empty()
                && host.split('.').all(|label| {
                    !label.is_empty()
                        && !label.starts_with('-')
                        && !label.ends_with('-')
                        && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                });
            // A host whose last label is a number (decimal, or hex after `0x`) is an IPv4
            // address to URL parsers and resolvers (`0x7f.1` is 127.0.0.1), and only the dotted
            // decimal form is accepted.
            let last = host.rsplit('.').next().unwrap_or_default();
            let hex = last
                .strip_prefix("0x")
                .or_else(|| last.strip_prefix("0X"))
                .is_some_and(|h| h.chars().all(|c| c.is_ascii_hexdigit()));
            let numeric = hex || last.chars().all(|c| c.is_ascii_digit());
            let ipv4_ok = !numeric || host.parse::<std::net::Ipv4Addr>().is_ok();
            (labels_ok && ipv4_ok, port)
        }
    };
    if !host_ok {
        return None;
    }
    match port {
        "" => Some(None),
        port => {
            let digits = port.strip_prefix(':')?;
            let n = digits.parse::<u16>().ok().filter(|n| *n != 0)?;
            (!digits.starts_with('0') && !digits.starts_with('+')).then_some(Some(n))
        }
    }
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
            "https://999.999.999.999/mcp",
            "https://1.2.3/mcp",
            "https://h:+1/mcp",
            // Hosts that end in a number are IPv4 addresses to WHATWG URL parsers and to
            // `inet_aton`: `0x7f.1` and `0x7f000001` are 127.0.0.1.
            "http://0x7f.1:8080/mcp",
            "http://0x7f000001/mcp",
            "http://a.1/mcp",
            "http://h.0x/mcp",
        ] {
            assert!(!is_plain_endpoint_url(bad), "{bad}");
        }
    }

    #[test]
    fn exact_origins() {
        for (origin, exact) in [
            ("https://app.example", "https://app.example:443"),
            ("http://localhost:5173", "http://localhost:5173"),
            ("http://[::1]", "http://[::1]:80"),
            ("http://[::1]:5173", "http://[::1]:5173"),
            ("https://10.0.0.1:8443", "https://10.0.0.1:8443"),
        ] {
            assert_eq!(exact_origin(origin).as_deref(), Some(exact), "{origin}");
        }
        for bad in [
            "https://[",
            "https://:",
            "http://::1",
            "https://a..b",
            "https://-",
            "https://h:+1",
            "https://h:0",
            "https://u@h",
            "https://app.example/",
            "https://300.1.1.1",
            "app.example",
            "ws://h",
            "http://0x7f.0.0.1:5173",
            "http://0X7F000001",
        ] {
            assert_eq!(exact_origin(bad), None, "{bad}");
        }
    }
}
