//! [`serve_stdio`]: one client on this process's stdin and stdout.

use rmcp::{ServerHandler, ServiceExt as _};

use crate::Error;

/// Serves `handler` on this process's stdin and stdout until the client disconnects. Input that
/// ends before `initialize` (nobody connected, or Ctrl-D at a terminal) is a clean end.
///
/// The lines go through [`JsonLines`](mcp_write_guard_stdio::JsonLines): a line that is not
/// JSON, is longer than [`mcp_write_guard_stdio::DEFAULT_MAX_LINE_BYTES`] or is not a message
/// rmcp can read is answered with its JSON-RPC error (`-32700`, `-32600`, `-32602`) and the
/// server reads on; nothing a client sends ends the session but the end of its input.
///
/// Each end is served the way its kind of file allows ([`mcp_write_guard_stdio::stdio`]): a
/// pipe or a socket on the event loop, a terminal, a file or `/dev/null` on a blocking thread.
///
/// # Errors
///
/// [`Error::Stdio`] when stdin or stdout cannot be served, [`Error::Mcp`] when the session
/// cannot start or ends with an error.
pub async fn serve_stdio<S: ServerHandler>(handler: S) -> Result<(), Error> {
    let transport = mcp_write_guard_stdio::stdio().map_err(|e| Error::Stdio(e.to_string()))?;
    serve_on(handler, transport).await
}

async fn serve_on<S, T, E, A>(handler: S, transport: T) -> Result<(), Error>
where
    S: ServerHandler,
    T: rmcp::transport::IntoTransport<rmcp::RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = match handler.serve(transport).await {
        Ok(running) => running,
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
            tracing::info!("input ended before a client initialized; nothing was served");
            return Ok(());
        }
        Err(e) => return Err(Error::Mcp(e.to_string())),
    };
    running
        .waiting()
        .await
        .map_err(|e| Error::Mcp(e.to_string()))?;
    Ok(())
}
