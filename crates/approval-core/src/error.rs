//! The crate's error type: misuse and malformed input, never a denial.

use crate::canonical::ArgsError;
use crate::definition::DefinitionError;
use crate::ids::IdError;
use crate::store::StoreError;

/// Errors from this crate.
///
/// Denials are *not* errors: a refused answer is a [`Decision::Deny`](crate::Decision::Deny),
/// a refused token a [`TokenRejection`](crate::token::TokenRejection), a refused round trip a
/// [`RoundTripRejection`](crate::round_trip::RoundTripRejection). This enum covers values that could not be
/// parsed or built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A string that should hold an id or a digest does not.
    #[error(transparent)]
    Id(#[from] IdError),
    /// The arguments were refused.
    #[error(transparent)]
    Args(#[from] ArgsError),
    /// A tool definition has no digest.
    #[error(transparent)]
    Definition(#[from] DefinitionError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}
