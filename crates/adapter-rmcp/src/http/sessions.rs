//! [`BoundedSessions`]: rmcp's in-memory session manager with a ceiling on live sessions, and
//! the owner of each session when an authenticating layer names one.
//!
//! Over streamable HTTP in the protocol era before 2026-07-28, every session is a connection and,
//! for [`crate::PerConnection`], its own principal, with its own cap of open approvals. Without a
//! ceiling a client could open sessions without end (each a new principal) and fill the shared
//! approval store. With one, at most `max_sessions × per-principal cap` approvals are open through
//! sessions at any time. Idle sessions close after rmcp's keep-alive (five minutes unless set in
//! the [`SessionConfig`]).
//!
//! Behind [`crate::http::BearerAuth`], a session also belongs to the subject whose token opened
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
    /// rmcp's session manager failed.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// rmcp's [`LocalSessionManager`], refusing new sessions while `max_sessions` are live.
///
/// ```
/// use std::sync::Arc;
/// use adapter_rmcp::http::BoundedSessions;
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

/// What [`BoundedSessions::claim`] decided about a new session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The session now belongs to the owner.
    Owned,
    /// The owner already holds the most sessions allowed; the new one was closed.
    TooMany,
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

    /// Gives the just-created session `id` to `owner`, unless the owner already holds the most
    /// sessions allowed: then the session is closed and [`Claim::TooMany`] returned.
    pub async fn claim(&self, id: &str, owner: &str) -> Claim {
        let too_many = {
            let mut owners = self.owners.lock();
            let held = owners.values().filter(|o| o.as_str() == owner).count();
            if held >= self.max_per_owner {
                true
            } else {
                owners.insert(id.to_owned(), owner.to_owned());
                false
            }
        };
        if too_many {
            let _ = self.close_session(&SessionId::from(id.to_owned())).await;
            tracing::warn!(
                max_per_owner = self.max_per_owner,
                "a new MCP session was refused: its owner holds the most sessions allowed"
            );
            return Claim::TooMany;
        }
        Claim::Owned
    }

    /// The owner of session `id`, if one claimed it.
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

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // One creation at a time, so two cannot both pass the count.
        let _creating = self.creating.lock().await;
        if self.live().await >= self.max_sessions {
            tracing::warn!(
                max_sessions = self.max_sessions,
                "a new MCP session was refused: the server has its maximum open"
            );
            return Err(SessionsError::Full(self.max_sessions));
        }
        Ok(self.inner.create_session().await?)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.owners.lock().remove(&**id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        Ok(self.inner.restore_session(id).await?)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}
