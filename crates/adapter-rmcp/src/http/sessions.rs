//! [`BoundedSessions`]: rmcp's in-memory session manager with a ceiling on live sessions.
//!
//! Over streamable HTTP in the protocol era before 2026-07-28, every session is a connection and,
//! for [`crate::PerConnection`], its own principal, with its own cap of open approvals. Without a
//! ceiling a client could open sessions without end (each a new principal) and fill the shared
//! approval store. With one, at most `max_sessions × per-principal cap` approvals are open through
//! sessions at any time. Idle sessions close after rmcp's keep-alive (five minutes unless set in
//! the [`SessionConfig`]).

use std::{sync::Arc, time::Duration};

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
    creating: tokio::sync::Mutex<()>,
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
            creating: tokio::sync::Mutex::new(()),
        }
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
