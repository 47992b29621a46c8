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
pub use sessions::{BoundedSessions, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE, SessionsError};

/// Browser origins on this machine, any port: what a loopback server accepts in `Origin`.
pub const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];
