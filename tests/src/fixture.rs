//! A store on a fresh SQLite file, guarded as the binary guards it, with a fake clock and an
//! in-memory audit sink, and clients that connect to it in process.

use std::{path::PathBuf, sync::Arc};

use mcp_write_guard_core::ManualClock;
use mcp_write_guard_rmcp::{MemorySink, WriteGuard, WriteGuardBuilder};
use rmcp::{
    ClientLifecycleMode, ClientServiceExt, ServiceExt,
    model::ProtocolVersion,
    service::{RoleClient, RunningService},
    transport::IntoTransport,
};
use store_server::{Db, StoreServer, guard_builder};
use tempfile::TempDir;

use crate::{Failure, sqlite::FileView, user::ScriptedUser};

/// A connected client that plays the user.
pub type Client = RunningService<RoleClient, ScriptedUser>;

/// Which protocol era the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize` handshake; the server asks with `elicitation/create`.
    Legacy,
    /// 2026-07-28: `server/discover`; the server asks through an input round.
    Rounds,
}

impl Era {
    /// Both eras, for tests that must hold in each.
    pub const ALL: [Era; 2] = [Era::Legacy, Era::Rounds];

    /// The era's name on a command line and in reports: `legacy` or `2026-07-28`.
    pub fn name(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Rounds => "2026-07-28",
        }
    }

    /// The era named `name` ([`Era::name`]).
    pub fn from_name(name: &str) -> Option<Era> {
        Era::ALL.into_iter().find(|era| era.name() == name)
    }
}

/// A seeded store on a temporary file.
pub struct Store {
    /// Keeps the temporary directory alive.
    _dir: TempDir,
    /// The SQLite file.
    pub path: PathBuf,
    /// The server's database handle.
    pub db: Arc<Db>,
    /// The guard's clock; advance it instead of sleeping.
    pub clock: ManualClock,
    /// Every decision the guard recorded.
    pub audit: Arc<MemorySink>,
}

impl Store {
    /// A fresh store file, created and seeded by the server's own code.
    pub fn new() -> Result<Self, Failure> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("store.db");
        let db = Arc::new(Db::open(&path)?);
        Ok(Self {
            _dir: dir,
            path,
            db,
            clock: ManualClock::default(),
            audit: Arc::new(MemorySink::new()),
        })
    }

    /// An outside observer of the file.
    pub fn file(&self) -> FileView {
        FileView::new(&self.path)
    }

    /// The guard the binary builds, with writes on or off, this store's clock and audit sink.
    pub fn guard(&self, writes_enabled: bool) -> WriteGuard<StoreServer> {
        self.guard_builder(writes_enabled).build()
    }

    /// [`Store::guard`] before `.build()`, for a test that changes one more thing.
    pub fn guard_builder(&self, writes_enabled: bool) -> WriteGuardBuilder<StoreServer> {
        guard_builder(StoreServer::new(Arc::clone(&self.db)))
            .writes_enabled(writes_enabled)
            .clock(Arc::new(self.clock.clone()))
            .audit(self.audit.clone())
    }

    /// Serves a guard with writes enabled and connects `user` to it in process (legacy era).
    pub async fn connect(&self, user: &ScriptedUser) -> Result<Client, Failure> {
        connect(self.guard(true), user, Era::Legacy).await
    }
}

/// Serves `guard` over an in-memory pipe and connects `user` to it speaking `era`.
pub async fn connect(
    guard: WriteGuard<StoreServer>,
    user: &ScriptedUser,
    era: Era,
) -> Result<Client, Failure> {
    let (server_io, client_io) = tokio::io::duplex(256 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = guard.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    connect_over(client_io, user, era).await
}

/// Connects `user` over any client transport (an in-memory pipe, a child process, streamable
/// HTTP) speaking `era`, and checks that the server agreed to that era.
pub async fn connect_over<T, E, A>(
    transport: T,
    user: &ScriptedUser,
    era: Era,
) -> Result<Client, Failure>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let expected = match era {
        Era::Legacy => ProtocolVersion::LATEST_WITH_INITIALIZE,
        Era::Rounds => ProtocolVersion::V_2026_07_28,
    };
    let client = match era {
        Era::Legacy => user.clone().serve(transport).await?,
        Era::Rounds => {
            user.clone()
                .serve_with_lifecycle(
                    transport,
                    ClientLifecycleMode::Discover {
                        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                    },
                )
                .await?
        }
    };
    let negotiated = client.peer_info().map(|info| info.protocol_version.clone());
    if negotiated.as_ref() != Some(&expected) {
        return Err(format!("{era:?}: negotiated {negotiated:?}, expected {expected:?}").into());
    }
    Ok(client)
}
