//! The crate's error type.

/// Errors from this crate. Policy decisions are values, not errors; only reading a malformed
/// input file fails.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A surface contract file is not valid JSON of the expected shape.
    #[error("invalid surface contract: {0}")]
    InvalidContract(#[source] serde_json::Error),
}
