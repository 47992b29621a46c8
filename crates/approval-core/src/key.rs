//! The store's vocabulary: what a record is ([`RecordKind`]), where it lives ([`StoreKey`]) and
//! how storing it fails ([`StoreError`]). Below every module that stores something.

use std::fmt;
use std::sync::Arc;

use sha2::{Digest, Sha256};

/// What the id of a key named by a bearer value's digest starts with (see
/// [`StoreKey::of_secret`]).
const SECRET_PREFIX: &str = "sha256-";

/// What a stored record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordKind {
    /// A pending approval kept in the store (see [`Approvals::store_approval`](crate::Approvals::store_approval)).
    Approval,
    /// Round-trip state: the `requestState` of an input-required round trip.
    RoundTrip,
    /// A confirmation token.
    Token,
    /// An approval page: what it shows, and the person's answer until the guard reads it.
    Page,
    /// A question's index (under its binding) and its first answer (see
    /// [`Approvals::open_question`](crate::Approvals::open_question)).
    Question,
}

impl RecordKind {
    /// A stable short name, usable as a key prefix by backends.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approval => "approval",
            Self::RoundTrip => "round-trip",
            Self::Token => "token",
            Self::Page => "page",
            Self::Question => "question",
        }
    }
}

/// The key of a stored record: its kind and its opaque id. A token's or a page's id is the
/// SHA-256 of the bearer value, never the value; its `Debug` still hides it. `Display` and
/// [`StoreKey::id`] give the id, for backends that key records by it.
#[derive(Clone, PartialOrd, Ord)]
pub struct StoreKey {
    kind: RecordKind,
    /// Shared, so that the copy a store keeps in its expiry index costs no allocation.
    id: Arc<str>,
}

impl StoreKey {
    /// A key for a record of `kind` with the opaque `id`.
    pub fn new(kind: RecordKind, id: impl Into<String>) -> Self {
        Self {
            kind,
            id: Arc::from(id.into()),
        }
    }

    /// This key's kind, with `suffix` after its id.
    pub(crate) fn with_suffix(&self, suffix: &str) -> Self {
        let (id, suffix) = (self.id.as_bytes(), suffix.as_bytes());
        let mut buf = [0_u8; 96];
        let joined = buf.get_mut(..id.len() + suffix.len()).and_then(|joined| {
            let (head, tail) = joined.split_at_mut(id.len());
            head.copy_from_slice(id);
            tail.copy_from_slice(suffix);
            std::str::from_utf8(joined).ok()
        });
        match joined {
            Some(joined) => Self::from_str(self.kind, joined),
            None => Self::new(
                self.kind,
                [&*self.id, std::str::from_utf8(suffix).unwrap_or_default()].concat(),
            ),
        }
    }

    /// The key of a record kept under a bearer value (a confirmation token's text, an approval
    /// page's id): its id is `sha256-` and the value's SHA-256 in lowercase hex (a record kept
    /// beside it takes [`StoreKey::with_suffix`] of this key). No
    /// key name (what `KEYS`, `SCAN` and keyspace notifications show of a store) spends a token
    /// or answers a page; the value is still the only way to its key. The `sha256-` keeps a
    /// digest from being taken for a value: no page id or token is spelled that way, so a
    /// server that still keys records by the value itself (an older replica on the same store)
    /// finds nothing under a digest it is handed as an id.
    pub(crate) fn of_secret(kind: RecordKind, secret: &str) -> Self {
        let digest = hex::encode(Sha256::digest(secret.as_bytes()));
        Self::new(kind, [SECRET_PREFIX, &digest].concat())
    }

    /// A key for a record of `kind` with the opaque `id`, copied once.
    pub(crate) fn from_str(kind: RecordKind, id: &str) -> Self {
        Self {
            kind,
            id: Arc::from(id),
        }
    }

    /// The record kind.
    pub fn kind(&self) -> RecordKind {
        self.kind
    }

    /// The opaque id.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// Equal when kind and id are: a copy of the same key (the store's expiry index holds one) is
/// known equal without comparing the ids' text.
impl PartialEq for StoreKey {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && (Arc::ptr_eq(&self.id, &other.id) || self.id == other.id)
    }
}

impl Eq for StoreKey {}

/// As a derived `Hash` would: the kind, then the id's text (so equal keys hash alike however
/// their ids are held).
impl std::hash::Hash for StoreKey {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
        self.id.hash(state);
    }
}

impl fmt::Debug for StoreKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let id: &dyn fmt::Debug = match self.kind {
            RecordKind::Token | RecordKind::Page => &"<redacted>",
            _ => &self.id,
        };
        f.debug_struct("StoreKey")
            .field("kind", &self.kind)
            .field("id", id)
            .finish()
    }
}

impl fmt::Display for StoreKey {
    /// `kind:id`, for example `token:4f…`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.as_str(), self.id)
    }
}

/// A store failure. Every store failure is a denial for the write that needed the store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The backend could not be reached or failed.
    #[error("approval store unavailable: {0}")]
    Unavailable(String),
    /// The principal already has `cap` live entries.
    #[error(
        "too many pending approvals and tokens for this user (limit {cap}); finish or let some expire first"
    )]
    PrincipalCapReached {
        /// The per-principal cap.
        cap: usize,
    },
    /// The whole store holds `cap` live entries.
    #[error("the approval store is full (limit {cap} entries)")]
    Full {
        /// The store-wide cap.
        cap: usize,
    },
    /// A live entry with this key already exists (ids are random, so this means misuse).
    #[error("a record with this key already exists")]
    KeyExists,
    /// A stored record could not be read back.
    #[error("corrupt record in the approval store: {0}")]
    Corrupt(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_ids_of_tokens_and_pages_only() {
        for kind in [RecordKind::Token, RecordKind::Page] {
            let shown = format!("{:?}", StoreKey::new(kind, "bearer-secret"));
            assert!(!shown.contains("bearer-secret"), "{shown}");
            assert!(shown.contains("<redacted>"), "{shown}");
        }
        let approval = format!("{:?}", StoreKey::new(RecordKind::Approval, "a-1"));
        assert!(approval.contains("a-1"), "{approval}");
        assert_eq!(StoreKey::new(RecordKind::Token, "t").to_string(), "token:t");
    }

    #[test]
    fn a_secrets_key_is_its_sha256_in_hex_then_the_suffix() {
        let key = StoreKey::of_secret(RecordKind::Token, "abc");
        assert_eq!(
            key.id(),
            "sha256-ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(key.kind(), RecordKind::Token);
        let receipt = StoreKey::of_secret(RecordKind::Page, "abc").with_suffix(".receipt");
        assert_eq!(receipt.id(), format!("{}.receipt", key.id()));
        assert_eq!(
            format!("{receipt:?}"),
            format!("{:?}", StoreKey::new(RecordKind::Page, "x"))
        );
        assert_ne!(key, StoreKey::of_secret(RecordKind::Token, "abd"));
    }
}
