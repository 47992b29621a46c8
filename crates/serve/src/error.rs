//! [`Error`]: everything that can stop a server from starting or end it.

/// Everything that can stop the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A socket or the standard streams failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// Stdin or stdout could not be set up to be served.
    #[error("{0}")]
    Stdio(String),
    /// The MCP session could not start or ended with an error.
    #[error("mcp: {0}")]
    Mcp(String),
    /// The settings cannot be served as given.
    #[error("{0}")]
    Config(String),
}
