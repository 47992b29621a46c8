//! Who is asking.
//!
//! Approvals, `requestState` records and confirmation tokens are bound to a [`Principal`]: a token
//! issued to one principal never spends for another. A [`PrincipalResolver`] tells the adapter who
//! is behind a request; when it cannot tell (`None`), writes are refused and reads keep working.
//! A principal must come from something the client cannot choose: the connection itself, or a
//! verified credential. No resolver here reads a header the client writes.
//!
//! | resolver | principal | for |
//! |---|---|---|
//! | [`PerConnection`] (default) | `connection:<id>`, one per connection | stdio, sockets, legacy streamable-HTTP sessions |
//! | [`LocalMachine`] | `local`, one for every client | a server bound to loopback only |
//! | [`FromAuthenticatedSubject`] | `oauth:["<iss>","<sub>"]` or `subject:<sub>` | HTTP behind an authenticating layer, such as `mcp_write_guard_http::BearerAuth` |
//!
//! Over streamable HTTP, [`PerConnection`] gives a principal only to a request that arrived in a
//! session rmcp's session manager issued and still holds (the older protocol era). A stateless
//! request (every 2026-07-28 request, which has no session) gets none, whatever `Mcp-Session-Id`
//! header it carries: rmcp does not check that header on the stateless path. Those requests need
//! [`FromAuthenticatedSubject`] behind a verified credential, or [`LocalMachine`] on a
//! loopback-only server.

use std::fmt;

use mcp_write_guard_core::Principal;
use rmcp::{
    model::Extensions,
    service::{RequestContext, RoleServer},
};

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
    handshake: bool,
}

impl<'a> PrincipalRequest<'a> {
    /// The request's extensions and the connection it arrived on, which did not begin with an
    /// `initialize` handshake (see [`Self::with_handshake`]).
    pub fn new(extensions: &'a Extensions, connection: &'a ConnectionId) -> Self {
        Self {
            extensions,
            connection,
            handshake: false,
        }
    }

    /// Whether the connection began with rmcp's `initialize` handshake on the guard value that
    /// serves it. The guard sets this itself; see [`Self::began_with_handshake`].
    #[must_use]
    pub fn with_handshake(mut self, handshake: bool) -> Self {
        self.handshake = handshake;
        self
    }

    /// Built from rmcp's request context.
    pub fn from_context(
        context: &'a RequestContext<RoleServer>,
        connection: &'a ConnectionId,
    ) -> Self {
        Self::new(&context.extensions, connection)
    }

    /// Whether the connection this request arrived on began with an `initialize` handshake
    /// that the guard value serving it answered.
    ///
    /// Over rmcp's streamable-HTTP server this is what tells a session from a stateless
    /// request: rmcp serves each session with its own guard value (the service factory clones
    /// the guard), which answers the session's `initialize` and then only requests whose
    /// `Mcp-Session-Id` rmcp found in its session manager; it serves each stateless request
    /// (every 2026-07-28 request) on a fresh clone that answered no handshake.
    pub fn began_with_handshake(&self) -> bool {
        self.handshake
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

    /// Whether the caller's verified credential grants `scope`. Asked only when the guard was
    /// built with [`crate::WriteGuardBuilder::write_scope`]; the default, `false`, refuses every
    /// write on such a guard, so a resolver that knows nothing of scopes fails closed.
    fn grants(&self, request: &PrincipalRequest<'_>, scope: &str) -> bool {
        let _ = (request, scope);
        false
    }
}

impl<F> PrincipalResolver for F
where
    F: Fn(&PrincipalRequest<'_>) -> Option<Principal> + Send + Sync + 'static,
{
    fn resolve(&self, request: &PrincipalRequest<'_>) -> Option<Principal> {
        self(request)
    }
}

/// One principal per connection: `connection:<id>` of the guard value that serves it.
///
/// - Stdio, a socket, an in-memory pipe: the connection is the transport itself.
/// - Streamable HTTP: only a request that arrived in a session gets a principal, the session's
///   own (see [`PrincipalRequest::began_with_handshake`]): a session rmcp's session manager
///   issued and still holds, in the protocol era before 2026-07-28. A stateless request gets
///   `None`, so its writes are refused rather than bound to a value the client chose: every
///   2026-07-28 request is stateless, and its `Mcp-Session-Id` header, which rmcp does not
///   check there, is ignored. Use [`FromAuthenticatedSubject`] behind a verified credential,
///   or [`LocalMachine`] on a loopback-only server, to let 2026-07-28 HTTP clients write.
#[derive(Debug, Clone, Copy, Default)]
pub struct PerConnection;

impl PrincipalResolver for PerConnection {
    fn resolve(&self, request: &PrincipalRequest<'_>) -> Option<Principal> {
        if request.http_parts().is_some() && !request.began_with_handshake() {
            return None;
        }
        Some(Principal::new(format!(
            "connection:{}",
            request.connection()
        )))
    }
}

/// Every request is the one principal `local`: the local machine is one person.
///
/// Only for a server that listens on loopback alone (stdio, or streamable HTTP bound to
/// `127.0.0.1` or `::1`), where every client is a program of the machine's user; then
/// 2026-07-28 HTTP clients, which have no session, can write after approval. Approvals,
/// `requestState` records and tokens are shared by all of them, and so is one per-principal
/// cap of open approvals. Never use it on a server other machines can reach.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalMachine;

/// The principal [`LocalMachine`] gives every request.
pub const LOCAL_PRINCIPAL: &str = "local";

impl PrincipalResolver for LocalMachine {
    fn resolve(&self, _request: &PrincipalRequest<'_>) -> Option<Principal> {
        Some(Principal::new(LOCAL_PRINCIPAL))
    }
}

/// The subject an authenticating HTTP layer established for a request, after checking the
/// credential: an OAuth token's issuer and `sub`, or a user id, with the scopes it grants.
///
/// Insert it into the HTTP request's extensions (`mcp_write_guard_http::BearerAuth` does;
/// by hand: `request.extensions_mut().insert(AuthenticatedSubject::new(sub))`); rmcp carries
/// those into the request context, where [`FromAuthenticatedSubject`] finds it. Never build one
/// from a value the client sent without verifying it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AuthenticatedSubject {
    issuer: Option<String>,
    subject: String,
    scopes: Vec<String>,
}

impl AuthenticatedSubject {
    /// A verified subject with no issuer and no scopes.
    pub fn new(subject: impl Into<String>) -> Self {
        Self {
            issuer: None,
            subject: subject.into(),
            scopes: Vec::new(),
        }
    }

    /// The issuer that vouched for the subject (an OAuth `iss`): the principal is then issuer
    /// plus subject, so equal `sub`s from two issuers are two people.
    #[must_use]
    pub fn with_issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    /// The scopes the credential grants.
    #[must_use]
    pub fn with_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The subject text.
    pub fn as_str(&self) -> &str {
        &self.subject
    }

    /// The issuer, if one was given.
    pub fn issuer(&self) -> Option<&str> {
        self.issuer.as_deref()
    }

    /// The scopes the credential grants.
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// Whether the credential grants `scope` (exact match).
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    /// The principal: `oauth:["<issuer>","<subject>"]` (a JSON array, so no issuer and
    /// subject pair can be spelled as another) with an issuer, `subject:<subject>` without.
    /// `None` for an empty subject or issuer.
    pub fn principal(&self) -> Option<Principal> {
        if self.subject.is_empty() {
            return None;
        }
        match &self.issuer {
            Some(issuer) if issuer.is_empty() => None,
            Some(issuer) => {
                let pair = serde_json::to_string(&[issuer, &self.subject]).ok()?;
                Some(Principal::new(format!("oauth:{pair}")))
            }
            None => Some(Principal::new(format!("subject:{}", self.subject))),
        }
    }
}

/// The principal is the [`AuthenticatedSubject`] the HTTP layer put into the request (see
/// [`AuthenticatedSubject::principal`]); it grants the subject's scopes. A request without one
/// gets no principal, so its writes are refused.
///
/// Looks in the HTTP request parts' extensions first, then in rmcp's request extensions.
#[derive(Debug, Clone, Copy, Default)]
pub struct FromAuthenticatedSubject;

impl FromAuthenticatedSubject {
    fn subject<'a>(request: &PrincipalRequest<'a>) -> Option<&'a AuthenticatedSubject> {
        request
            .http_parts()
            .and_then(|parts| parts.extensions.get::<AuthenticatedSubject>())
            .or_else(|| request.extensions().get::<AuthenticatedSubject>())
    }
}

impl PrincipalResolver for FromAuthenticatedSubject {
    fn resolve(&self, request: &PrincipalRequest<'_>) -> Option<Principal> {
        Self::subject(request)?.principal()
    }

    fn grants(&self, request: &PrincipalRequest<'_>, scope: &str) -> bool {
        Self::subject(request).is_some_and(|subject| subject.has_scope(scope))
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
    fn per_connection_over_http_needs_a_session_and_never_reads_the_header() {
        let connection = ConnectionId::random();
        let mut extensions = Extensions::new();
        extensions.insert(parts(Some("made-up-by-client"), None));
        // A stateless request (no handshake on this guard value): no principal, header or not.
        let stateless = PrincipalRequest::new(&extensions, &connection);
        assert_eq!(PerConnection.resolve(&stateless), None);
        let mut bare = Extensions::new();
        bare.insert(parts(None, None));
        assert_eq!(
            PerConnection.resolve(&PrincipalRequest::new(&bare, &connection)),
            None
        );
        // A request in a session: the session's own guard value, whatever the header says.
        let in_session = stateless.with_handshake(true);
        assert_eq!(
            PerConnection.resolve(&in_session),
            Some(Principal::new(format!("connection:{connection}")))
        );
        assert!(!PerConnection.grants(&in_session, "write"));
    }

    #[test]
    fn local_machine_is_one_principal_for_everyone() {
        let one = ConnectionId::random();
        let two = ConnectionId::random();
        let mut http = Extensions::new();
        http.insert(parts(Some("whatever"), None));
        let plain = Extensions::new();
        let a = LocalMachine.resolve(&PrincipalRequest::new(&http, &one));
        let b = LocalMachine.resolve(&PrincipalRequest::new(&plain, &two));
        assert_eq!(a, Some(Principal::new(LOCAL_PRINCIPAL)));
        assert_eq!(a, b);
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
        let mut blank = Extensions::new();
        blank.insert(AuthenticatedSubject::new(""));
        assert_eq!(
            FromAuthenticatedSubject.resolve(&PrincipalRequest::new(&blank, &connection)),
            None
        );
    }

    #[test]
    fn issuer_and_subject_make_one_unambiguous_principal() {
        let a = AuthenticatedSubject::new("b\",\"c").with_issuer("a");
        let b = AuthenticatedSubject::new("c").with_issuer("a\",\"b");
        assert_ne!(a.principal(), b.principal());
        assert_eq!(
            AuthenticatedSubject::new("alice")
                .with_issuer("https://issuer.example")
                .principal(),
            Some(Principal::new(
                r#"oauth:["https://issuer.example","alice"]"#
            ))
        );
        // The same sub from two issuers is two people; without an issuer it is a third.
        let one = AuthenticatedSubject::new("alice").with_issuer("https://one.example");
        let two = AuthenticatedSubject::new("alice").with_issuer("https://two.example");
        assert_ne!(one.principal(), two.principal());
        assert_ne!(
            one.principal(),
            AuthenticatedSubject::new("alice").principal()
        );
        assert_eq!(
            AuthenticatedSubject::new("alice")
                .with_issuer("")
                .principal(),
            None
        );
    }

    #[test]
    fn scopes_are_granted_only_by_the_subject_exactly() {
        let connection = ConnectionId::random();
        let mut extensions = Extensions::new();
        extensions
            .insert(AuthenticatedSubject::new("alice").with_scopes(["store:read", "store:write"]));
        let request = PrincipalRequest::new(&extensions, &connection);
        assert!(FromAuthenticatedSubject.grants(&request, "store:write"));
        assert!(!FromAuthenticatedSubject.grants(&request, "store:wri"));
        assert!(!FromAuthenticatedSubject.grants(&request, "store:write "));
        assert!(!LocalMachine.grants(&request, "store:write"));
        let none = Extensions::new();
        assert!(
            !FromAuthenticatedSubject
                .grants(&PrincipalRequest::new(&none, &connection), "store:read")
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
