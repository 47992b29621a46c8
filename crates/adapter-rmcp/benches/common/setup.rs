//! What the read benches share: a client connected to any server, and the guard around the
//! fixture whose read they time.

use std::sync::Arc;

use mcp_write_guard_rmcp::{Era, MemorySink, WriteGuard, test_util};
use rmcp::{RoleClient, ServerHandler, service::RunningService};

use crate::fixture::Fixture;

/// A client that declares nothing.
pub(crate) type Client = RunningService<RoleClient, ()>;

/// A client connected to `server` over an in-memory duplex, in the legacy era.
pub(crate) async fn connect<S: ServerHandler>(server: S) -> Client {
    match test_util::connect(server, Era::Legacy, ()).await {
        Ok(client) => client,
        Err(error) => panic!("cannot connect: {error}"),
    }
}

/// A guard around the fixture with writes enabled and a memory audit sink; with `trusted`,
/// `get_counter` is a trusted read (classification only, no envelope).
pub(crate) fn guarded(trusted: bool) -> WriteGuard<Fixture> {
    let builder = WriteGuard::builder(Fixture::default())
        .writes_enabled(true)
        .audit(Arc::new(MemorySink::new()));
    let builder = if trusted {
        builder.trust_read("get_counter")
    } else {
        builder
    };
    builder.build()
}
