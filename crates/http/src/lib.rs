#![doc = include_str!("../README.md")]

mod auth;
mod sessions;

pub use auth::{
    AuthConfig, AuthError, BearerAuth, BearerRejection, DEFAULT_JWKS_REFRESH, DEFAULT_LEEWAY,
    DEFAULT_UNKNOWN_KID_REFETCH, JwksSource, METADATA_PATH,
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
    let url = plain_url(origin)?;
    // An origin is the scheme and the authority, spelled as the parser writes them (which
    // leaves a default port out): nothing after them, not even `/`.
    let written = url.as_str().strip_suffix('/')?;
    let port = url.port_or_known_default()?;
    if url.path() != "/" {
        return None;
    }
    if written == origin {
        return Some(match url.port() {
            Some(_) => origin.to_owned(),
            None => format!("{origin}:{port}"),
        });
    }
    (origin == format!("{written}:{port}")).then(|| origin.to_owned())
}

/// Whether `url` is usable as the public URL of an MCP endpoint: `http(s)://host[:port]/path`,
/// the host a DNS name, an IPv4 address or a bracketed IPv6 address, the port 1 to 65535, the
/// path of plain characters (letters, digits, `-._~/`, no `.` or `..` segments), no query, no
/// fragment, no user info, no quotes.
pub fn is_plain_endpoint_url(url: &str) -> bool {
    let Some(parsed) = plain_url(url) else {
        return false;
    };
    let path_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '/');
    // The serialised form is the input (a bare authority gets a `/` path).
    let same = parsed.as_str() == url
        || (parsed.path() == "/" && parsed.as_str().strip_suffix('/') == Some(url));
    same && parsed.path().chars().all(path_ok) && !parsed.path().contains("//")
}

/// `text` read as an `http` or `https` URL by the WHATWG URL parser (the `url` crate, the
/// parser browsers use), when it is a plain one: no user info, no query or fragment, a port
/// other than 0 written without leading zeros, and a host that is an IP address or a DNS name
/// whose labels are letters, digits and inner `-`. Spellings that parsers read differently
/// (`0x7f.1` is 127.0.0.1, `1.2.3` is 1.2.0.3, a path with `..`) do not survive the check
/// callers make that the serialised form is what was given.
fn plain_url(text: &str) -> Option<url::Url> {
    let url = url::Url::parse(text).ok()?;
    let plain = matches!(url.scheme(), "http" | "https")
        && url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none()
        && url.port() != Some(0);
    let host_ok = match url.host()? {
        url::Host::Domain(name) => name.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        }),
        url::Host::Ipv4(_) | url::Host::Ipv6(_) => true,
    };
    // The authority as written: the parser accepts `:0001` for port 1.
    let written_port = text
        .split_once("://")
        .map(|(_, rest)| rest.split('/').next().unwrap_or_default())
        .and_then(|authority| authority.rsplit_once(':'))
        .filter(|(_, port)| !port.ends_with(']'))
        .map(|(_, port)| port);
    let port_ok = written_port.is_none_or(|port| {
        !port.starts_with('0')
            && url
                .port_or_known_default()
                .is_some_and(|p| p.to_string() == port)
    });
    (plain && host_ok && port_ok).then_some(url)
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
            "https://MCP.example.com/mcp",
            "https://h/a%2fb",
            "https://h:443x/mcp",
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
            ("http://localhost:80", "http://localhost:80"),
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
            "https://APP.example",
            "https://app.example:0443",
            "http://[::1]:080",
        ] {
            assert_eq!(exact_origin(bad), None, "{bad}");
        }
    }
}
