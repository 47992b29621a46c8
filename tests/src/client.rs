//! The client the end-to-end tests play the person with: mcp-write-guard-rmcp's
//! [`ScriptedClient`], connected over any transport in either protocol era.

use mcp_write_guard_rmcp::{
    Era,
    test_util::{self, ScriptedClient},
};
use rmcp::{
    service::{RoleClient, RunningService},
    transport::IntoTransport,
};

use crate::Failure;

/// A connected client that plays the person.
pub type Client = RunningService<RoleClient, ScriptedClient>;

/// Connects `user` over any client transport (an in-memory pipe, a child process, streamable
/// HTTP) speaking `era`, and checks that the server agreed to that era
/// ([`test_util::connect_over`]).
pub async fn connect_over<T, E, A>(
    transport: T,
    user: &ScriptedClient,
    era: Era,
) -> Result<Client, Failure>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    test_util::connect_over(transport, era, user.clone()).await
}
