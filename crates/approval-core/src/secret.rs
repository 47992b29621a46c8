//! The approval page's secrets: its id ([`PageId`], the URL's secret) and the CSRF token its
//! form carries ([`CsrfToken`]). 256 random bits each, never derived from anything.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::ids::IdError;
use crate::key::StoreError;

/// The number of random bytes in a [`PageId`] and a [`CsrfToken`] (256 bits).
const SECRET_BYTES: usize = 32;

/// A 256-bit random value from the operating system, shown as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Secret([u8; SECRET_BYTES]);

impl Secret {
    fn random() -> Result<Self, StoreError> {
        let mut bytes = [0_u8; SECRET_BYTES];
        getrandom::fill(&mut bytes)
            .map_err(|e| StoreError::Unavailable(format!("no random bytes: {e}")))?;
        Ok(Self(bytes))
    }

    fn parse(text: &str, kind: &'static str) -> Result<Self, IdError> {
        // Lowercase only, so each secret has one spelling; in constant time (base16ct), as
        // the CSRF token is then compared.
        let mut bytes = [0_u8; SECRET_BYTES];
        match base16ct::lower::decode(text, &mut bytes) {
            Ok(decoded) if decoded.len() == SECRET_BYTES => Ok(Self(bytes)),
            _ => Err(IdError::MalformedId { kind }),
        }
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = [0_u8; 2 * SECRET_BYTES];
        let text = base16ct::lower::encode_str(&self.0, &mut text).map_err(|_| fmt::Error)?;
        f.write_str(text)
    }
}

/// The id of an approval page: the secret part of its URL (`/approvals/<id>`).
///
/// 256 random bits from the operating system, never derived from anything; shown as 64
/// lowercase hex digits, the only form [`FromStr`] accepts. `Debug` does not print it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, derive_more::Display, derive_more::Debug)]
#[debug("PageId(..)")]
pub struct PageId(Secret);

impl PageId {
    /// A fresh page id: 256 bits from the operating system.
    pub(crate) fn random() -> Result<Self, StoreError> {
        Secret::random().map(Self)
    }
}

impl FromStr for PageId {
    type Err = IdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Secret::parse(s, "approval page").map(Self)
    }
}

/// The token a page's form carries, bound to that page: a `POST` without the page's own token
/// is refused and changes nothing. 256 random bits; compared in constant time. `Debug` does not
/// print it.
#[derive(Clone, Copy, PartialEq, Eq, derive_more::Display, derive_more::Debug)]
#[debug("CsrfToken(..)")]
pub struct CsrfToken(Secret);

impl CsrfToken {
    /// A fresh token: 256 bits from the operating system.
    pub(crate) fn random() -> Result<Self, StoreError> {
        Secret::random().map(Self)
    }

    /// A token of fixed bytes, for the store's contract tests.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn fixed() -> Self {
        Self(Secret([0x5a; SECRET_BYTES]))
    }

    /// Whether `presented` is this token (constant time in the token's value).
    pub fn matches(&self, presented: &str) -> bool {
        Secret::parse(presented, "csrf token")
            .is_ok_and(|other| bool::from(self.0.0.ct_eq(&other.0)))
    }
}

impl Serialize for CsrfToken {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CsrfToken {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Secret::parse(&text, "csrf token")
            .map(Self)
            .map_err(serde::de::Error::custom)
    }
}
