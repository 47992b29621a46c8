//! Who is asking.
//!
//! Approvals, `requestState` records and confirmation tokens are bound to a [`Principal`]: a token
//! issued to one principal never spends for another. A [`PrincipalResolver`] tells the adapter who
//! is behind a request; when it cannot tell (`None`), writes are refused and reads keep working.
//!
//! - [`PerConnection`] (the default): one principal per connection. Over rmcp's streamable-HTTP
//!   server it is one principal per `Mcp-Session-Id`; an HTTP request without a session id (the
//!   stateless mode) cannot be told apart from anybody else's and gets no principal.
//! - [`FromAuthenticatedSubject`]: for servers whose HTTP layer authenticates the caller and puts
//!   an [`AuthenticatedSubject`] into the request's extensions.

use std::fmt;

use approval_core::Principal;
use rmcp::{
    model::Extensions,
    service::{RequestContext, RoleServer},
};

/// The header rmcp's streamable-HTTP server uses for the session id.
const SESSION_HEADER: &str = "mcp-session-id";

/// Identifies one connection to the wrapped server: every [`crate::WriteGuard`] value carries
/// one, and every clone of a guard gets a fresh one (serve one clone per connection).
///
/// A random version 4 UUID, so that connection principals never collide across replicas that
/// share a store.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConnectionId(String);

impl ConnectionId {
    /// A fresh random connection id.
    pub fn random() -> Self {
        Self(uuid::Uuid::new_v4().hyphenated().to_string())
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a [`PrincipalResolver`] may look at.
#[derive(Debug, Clone, Copy)]
pub struct PrincipalRequest<'a> {
    extensions: &'a Extensions,
    connection: &'a ConnectionId,
}

impl<'a> PrincipalRequest<'a> {
    /// The request's extensions and the connection it arrived on.
    pub fn new(extensions: &'a Extensions, connection: &'a ConnectionId) -> Self {
        Self {
            extensions,
            connection,
        }
    }

    /// Built from rmcp's request context.
    pub fn from_context(
        context: &'a RequestContext<RoleServer>,
        connection: &'a ConnectionId,
    ) -> Self {
        Self::new(&context.extensions, connection)
    }

    /// The request's extensions (over streamable HTTP they hold the `http::request::Parts`).
    pub fn extensions(&self) -> &'a Extensions {
        self.extensions
    }

    /// The HTTP request parts, when the request arrived over rmcp's streamable-HTTP server.
    pub fn http_parts(&self) -> Option<&'a http::request::Parts> {
        self.extensions.get::<http::request::Parts>()
    }

    /// The connection the request arrived on.
    pub fn connection(&self) -> &'a ConnectionId {
        self.connection
    }
}

/// Tells the adapter who is asking. `None` means "cannot tell": writes are refused.
pub trait PrincipalResolver: Send + Sync + 'static {
    /// The principal behind this request, if known.
    fn resolve(&self, request: &PrincipalRequest<'_>) -> Option<Principal>;
}

impl<F> PrincipalResolver for F
where
    F: Fn(&PrincipalRequest<'_>) -> Option<Principal> + Send + Sync + 'static,
{
    fn resolve(&self, request: &PrincipalRequest<'_>) -> Option<Principal> {
        self(request)
    }
}

/// One principal per connection (per session over streamable HTTP).
///
/// - Over streamable HTTP: `session:<Mcp-Session-Id>`; no session id (stateless HTTP) gives
///   `None`, so writes are refused rather than shared between strangers. Use
///   [`FromAuthenticatedSubject`] for stateless HTTP.
/// - Otherwise (stdio, a socket, an in-memory pipe): `connection:<id>` of the guard that serves
///   the connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct PerConnection;

impl PrincipalResolver for PerConnection {
    fn resolve(&self, request: &PrincipalRequest<'_>) -> Option<Principal> {
        match request.http_parts() {
            Some(parts) => {
                let session = parts.headers.get(SESSION_HEADER)?.to_str().ok()?;
                if session.is_empty() {
                    return None;
                }
                Some(Principal::new(format!("session:{session}")))
            }
            None => Some(Principal::new(format!(
                "connection:{}",
                request.connection()
            ))),
        }
    }
}

/// The subject an authenticating HTTP layer established for a request (an OAuth `sub`, a user
/// id). Insert it into the HTTP request's extensions (for example from an axum middleware:
/// `request.extensions_mut().insert(AuthenticatedSubject::new(sub))`); rmcp carries those into
/// the request context, where [`FromAuthenticatedSubject`] finds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AuthenticatedSubject(String);

impl AuthenticatedSubject {
    /// Wraps the authenticated subject.
    pub fn new(subject: impl Into<String>) -> Self {
        Self(subject.into())
    }

    /// The subject text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The principal is the [`AuthenticatedSubject`] the HTTP layer put into the request
/// (`subject:<subject>`). A request without one gets no principal, so its writes are refused.
///
/// Looks in the HTTP request parts' extensions first, then in rmcp's request extensions.
#[derive(Debug, Clone, Copy, Default)]
pub struct FromAuthenticatedSubject;

impl PrincipalResolver for FromAuthenticatedSubject {
    fn resolve(&self, request: &PrincipalRequest<'_>) -> Option<Principal> {
        let subject = request
            .http_parts()
            .and_then(|parts| parts.extensions.get::<AuthenticatedSubject>())
            .or_else(|| request.extensions().get::<AuthenticatedSubject>())?;
        if subject.as_str().is_empty() {
            return None;
        }
        Some(Principal::new(format!("subject:{}", subject.as_str())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(session: Option<&str>, subject: Option<&str>) -> http::request::Parts {
        let mut builder = http::Request::builder().uri("/mcp");
        if let Some(session) = session {
            builder = builder.header("Mcp-Session-Id", session);
        }
        let (mut parts, ()) = builder.body(()).unwrap().into_parts();
        if let Some(subject) = subject {
            parts.extensions.insert(AuthenticatedSubject::new(subject));
        }
        parts
    }

    #[test]
    fn per_connection_uses_the_connection_without_http() {
        let connection = ConnectionId::random();
        let extensions = Extensions::new();
        let principal = PerConnection
            .resolve(&PrincipalRequest::new(&extensions, &connection))
            .unwrap();
        assert_eq!(principal.as_str(), format!("connection:{connection}"));
        let other = ConnectionId::random();
        let other_principal = PerConnection
            .resolve(&PrincipalRequest::new(&extensions, &other))
            .unwrap();
        assert_ne!(principal, other_principal);
    }

    #[test]
    fn per_connection_uses_the_http_session_and_refuses_without_one() {
        let connection = ConnectionId::random();
        let mut extensions = Extensions::new();
        extensions.insert(parts(Some("abc"), None));
        let principal = PerConnection.resolve(&PrincipalRequest::new(&extensions, &connection));
        assert_eq!(principal, Some(Principal::new("session:abc")));

        let mut stateless = Extensions::new();
        stateless.insert(parts(None, None));
        assert_eq!(
            PerConnection.resolve(&PrincipalRequest::new(&stateless, &connection)),
            None
        );
    }

    #[test]
    fn authenticated_subject_is_read_from_http_parts_or_extensions() {
        let connection = ConnectionId::random();
        let mut extensions = Extensions::new();
        extensions.insert(parts(Some("abc"), Some("alice")));
        assert_eq!(
            FromAuthenticatedSubject.resolve(&PrincipalRequest::new(&extensions, &connection)),
            Some(Principal::new("subject:alice"))
        );

        let mut direct = Extensions::new();
        direct.insert(AuthenticatedSubject::new("bob"));
        assert_eq!(
            FromAuthenticatedSubject.resolve(&PrincipalRequest::new(&direct, &connection)),
            Some(Principal::new("subject:bob"))
        );

        let mut anonymous = Extensions::new();
        anonymous.insert(parts(Some("abc"), None));
        assert_eq!(
            FromAuthenticatedSubject.resolve(&PrincipalRequest::new(&anonymous, &connection)),
            None
        );
        let empty = Extensions::new();
        assert_eq!(
            FromAuthenticatedSubject.resolve(&PrincipalRequest::new(&empty, &connection)),
            None
        );
    }

    #[test]
    fn closures_are_resolvers() {
        let fixed = |_: &PrincipalRequest<'_>| Some(Principal::new("ops"));
        let connection = ConnectionId::random();
        let extensions = Extensions::new();
        assert_eq!(
            fixed.resolve(&PrincipalRequest::new(&extensions, &connection)),
            Some(Principal::new("ops"))
        );
    }
}
