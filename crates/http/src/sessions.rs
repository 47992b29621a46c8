//! [`BoundedSessions`]: rmcp's in-memory session manager with a ceiling on live sessions, and
//! the owner of each session when an authenticating layer names one.
//!
//! Over streamable HTTP in the protocol era before 2026-07-28, every session is a connection and,
//! for [`mcp_write_guard_rmcp::PerConnection`], its own principal, with its own cap of open approvals. Without a
//! ceiling a client could open sessions without end (each a new principal) and fill the shared
//! approval store. With one, at most `max_sessions × per-principal cap` approvals are open through
//! sessions at any time. Idle sessions close after rmcp's keep-alive (five minutes unless set in
//! the [`SessionConfig`]).
//!
//! Behind [`crate::BearerAuth`], a session also belongs to the subject whose token opened
//! it: every later request on it (calls, the answer to an approval question, the event stream,
//! `DELETE`) must carry a token for the same subject, and one subject holds at most
//! `max_per_owner` sessions. Without that, a session id is a bearer credential of its own: a
//! second user who learns it could answer the first user's approval questions in their session.

use std::{collections::HashMap, sync::Arc, time::Duration};

use futures_core::Stream;
use rmcp::{
    model::{ClientJsonRpcMessage, ServerJsonRpcMessage},
    transport::streamable_http_server::{
        RestoreOutcome, SessionId, SessionManager,
        session::{
            EventStore, ServerSseMessage,
            local::{LocalSessionManager, LocalSessionManagerError, SessionConfig},
        },
    },
};

/// The default ceiling on live sessions.
pub const DEFAULT_MAX_SESSIONS: usize = 256;

/// How long an idle session lives by default.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(5 * 60);

/// The default ceiling on live sessions one owner (an authenticated subject) holds.
pub const DEFAULT_MAX_SESSIONS_PER_OWNER: usize = 16;

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionsError {
    /// The ceiling on live sessions was reached; rmcp answers the `initialize` with an error.
    #[error("the server has {0} sessions open, its limit; try again later")]
    Full(usize),
    /// The owner holds the most sessions allowed; the authenticating layer answers 429.
    #[error("the owner holds {0} sessions, the most allowed")]
    OwnerFull(usize),
    /// rmcp's session manager failed.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// rmcp's [`LocalSessionManager`], refusing new sessions while `max_sessions` are live.
///
/// ```
/// use std::sync::Arc;
/// use mcp_write_guard_http::BoundedSessions;
///
/// let sessions = Arc::new(BoundedSessions::new(64));
/// assert_eq!(sessions.max_sessions(), 64);
/// // StreamableHttpService::new(move || Ok(guard.clone()), sessions, config)
/// ```
#[derive(Debug)]
pub struct BoundedSessions {
    inner: LocalSessionManager,
    max_sessions: usize,
    max_per_owner: usize,
    creating: tokio::sync::Mutex<()>,
    /// Session id → the owner's principal text, for sessions opened behind an authenticating
    /// layer. Removed when the session closes.
    owners: parking_lot::Mutex<HashMap<String, String>>,
}

tokio::task_local! {
    /// The owner of the request being served, set by the authenticating layer around the MCP
    /// service, so that a session is created already owned (or refused).
    static OWNER: Owner;
}

/// The owner a request's new session would get, and whether its ceiling refused one.
#[derive(Debug)]
pub(crate) struct Owner {
    principal: String,
    refused: std::cell::Cell<bool>,
}

/// Runs `serve` (a request through the MCP service) on behalf of `principal`: a session it
/// creates belongs to `principal` from its first moment. `true` when the owner's ceiling refused
/// a new session.
pub(crate) async fn as_owner<F: std::future::Future>(
    principal: String,
    serve: F,
) -> (F::Output, bool) {
    let owner = Owner {
        principal,
        refused: std::cell::Cell::new(false),
    };
    OWNER
        .scope(owner, async move {
            let output = serve.await;
            let refused = OWNER.with(|o| o.refused.get());
            (output, refused)
        })
        .await
}

impl BoundedSessions {
    /// At most `max_sessions` live sessions, each closed after [`DEFAULT_SESSION_IDLE`] idle.
    pub fn new(max_sessions: usize) -> Self {
        Self::with_idle(max_sessions, DEFAULT_SESSION_IDLE)
    }

    /// At most `max_sessions` live sessions, each closed after `idle` without traffic.
    pub fn with_idle(max_sessions: usize, idle: Duration) -> Self {
        let mut inner = LocalSessionManager::default();
        let mut config = SessionConfig::default();
        config.keep_alive = Some(idle);
        inner.session_config = config;
        Self {
            inner,
            max_sessions,
            max_per_owner: DEFAULT_MAX_SESSIONS_PER_OWNER,
            creating: tokio::sync::Mutex::new(()),
            owners: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    /// At most `max` live sessions per owner (default [`DEFAULT_MAX_SESSIONS_PER_OWNER`]).
    #[must_use]
    pub fn with_max_per_owner(mut self, max: usize) -> Self {
        self.max_per_owner = max;
        self
    }

    /// How many live sessions `owner` holds.
    pub fn held_by(&self, owner: &str) -> usize {
        self.owners
            .lock()
            .values()
            .filter(|o| o.as_str() == owner)
            .count()
    }

    /// The owner of session `id`, if it was created on behalf of one.
    pub fn owner(&self, id: &str) -> Option<String> {
        self.owners.lock().get(id).cloned()
    }

    /// The ceiling.
    pub fn max_sessions(&self) -> usize {
        self.max_sessions
    }

    /// How many sessions are live now.
    pub async fn live(&self) -> usize {
        self.inner.sessions.read().await.len()
    }
}

/// Spells the [`SessionManager`] methods that only pass the call on to the inner
/// `LocalSessionManager`, its error converted: `METHOD(ARGS) -> OUTPUT;`, where an `OUTPUT` of
/// `stream` is the SSE stream the trait returns.
macro_rules! pass_on {
    () => {};
    ($method:ident($($arg:ident: $ty:ty),*) -> stream; $($rest:tt)*) => {
        pass_on! {
            $method($($arg: $ty),*) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static;
            $($rest)*
        }
    };
    ($method:ident($($arg:ident: $ty:ty),*) -> $output:ty; $($rest:tt)*) => {
        async fn $method(&self, $($arg: $ty),*) -> Result<$output, Self::Error> {
            Ok(self.inner.$method($($arg),*).await?)
        }
        pass_on! { $($rest)* }
    };
}

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // One creation at a time, so two cannot both pass the counts.
        let _creating = self.creating.lock().await;
        let owner = OWNER.try_with(|o| o.principal.clone()).ok();
        if let Some(owner) = &owner
            && self.held_by(owner) >= self.max_per_owner
        {
            let _ = OWNER.try_with(|o| o.refused.set(true));
            tracing::warn!(
                max_per_owner = self.max_per_owner,
                "a new MCP session was refused: its owner holds the most sessions allowed"
            );
            return Err(SessionsError::OwnerFull(self.max_per_owner));
        }
        if self.live().await >= self.max_sessions {
            tracing::warn!(
                max_sessions = self.max_sessions,
                "a new MCP session was refused: the server has its maximum open"
            );
            return Err(SessionsError::Full(self.max_sessions));
        }
        let (id, transport) = self.inner.create_session().await?;
        if let Some(owner) = owner {
            // Owned from its first moment: no request can see the session unowned.
            self.owners.lock().insert(id.to_string(), owner);
        }
        Ok((id, transport))
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.owners.lock().remove(&**id);
        Ok(self.inner.close_session(id).await?)
    }

    pass_on! {
        initialize_session(id: &SessionId, message: ClientJsonRpcMessage) -> ServerJsonRpcMessage;
        has_session(id: &SessionId) -> bool;
        create_stream(id: &SessionId, message: ClientJsonRpcMessage) -> stream;
        accept_message(id: &SessionId, message: ClientJsonRpcMessage) -> ();
        create_standalone_stream(id: &SessionId) -> stream;
        resume(id: &SessionId, last_event_id: String) -> stream;
        restore_session(id: SessionId) -> RestoreOutcome<Self::Transport>;
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session `owner` creates: not refused, and theirs from the start. Its id and transport.
    async fn created_as(
        sessions: &BoundedSessions,
        owner: &str,
    ) -> (SessionId, <BoundedSessions as SessionManager>::Transport) {
        let (created, refused) = as_owner(owner.into(), sessions.create_session()).await;
        let (id, transport) = created.unwrap();
        assert!(!refused);
        assert_eq!(sessions.owner(&id).as_deref(), Some(owner));
        (id, transport)
    }

    #[tokio::test]
    async fn a_session_is_owned_from_creation_and_an_owner_at_its_ceiling_takes_no_slot() {
        let sessions = BoundedSessions::new(3).with_max_per_owner(2);
        let mut kept = Vec::new();
        for _ in 0..2 {
            let (_, transport) = created_as(&sessions, "alice").await;
            kept.push(transport);
        }
        let (created, refused) = as_owner("alice".into(), sessions.create_session()).await;
        assert!(matches!(created, Err(SessionsError::OwnerFull(2))));
        assert!(refused);
        assert_eq!(sessions.live().await, 2, "the refused one took no place");

        let (id, transport) = created_as(&sessions, "bob").await;
        kept.push(transport);
        let (created, _) = as_owner("carol".into(), sessions.create_session()).await;
        assert!(matches!(created, Err(SessionsError::Full(3))));

        sessions.close_session(&id).await.unwrap();
        assert_eq!(sessions.owner(&id), None);
        assert_eq!(sessions.held_by("bob"), 0);
        // Without an authenticating layer there is no owner, only the global ceiling.
        let (id, _transport) = sessions.create_session().await.unwrap();
        assert_eq!(sessions.owner(&id), None);
    }
}
