//! Newtypes for the values the policy binds together, so that they cannot be swapped.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

/// A string that should hold one of this module's values does not.
///
/// The parsers here return it directly, and the crate's `Error` wraps it (`Error::Id`), so that
/// this module depends on no other module of the crate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// A string that should hold an opaque id (token, approval, round-trip state) does not.
    #[error("malformed {kind} id")]
    MalformedId {
        /// Which kind of id was expected.
        kind: &'static str,
    },
    /// A string that should hold a 64-digit lowercase hex argument digest does not.
    #[error("malformed argument digest")]
    MalformedDigest,
    /// A string that should hold a 64-digit lowercase hex tool definition digest does not.
    #[error("malformed tool definition digest")]
    MalformedDefinitionDigest,
}

macro_rules! string_newtype {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        ///
        /// The text is shared: a clone costs no allocation.
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Wraps a string.
            pub fn new(value: impl Into<String>) -> Self {
                Self(Arc::from(value.into()))
            }

            /// The wrapped string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self(Arc::from(value))
            }
        }

        /// Serialises as the string itself.
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        /// Reads what [`Serialize`] writes: a string.
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                String::deserialize(deserializer).map(Self::new)
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> Self {
                Self::new(value)
            }
        }
    };
}

string_newtype!(
    /// Who is asking: the identity the adapter resolved for the caller (a user id, an OAuth
    /// subject, or a fixed name for a local stdio session). Approvals, round-trip state and tokens
    /// are bound to it and refuse every other principal.
    Principal
);

string_newtype!(
    /// The name of a tool, exactly as the server advertises it.
    ToolName
);

macro_rules! sha256_digest {
    ($(#[$meta:meta])* $name:ident, $malformed:expr) => {
        $(#[$meta])*
        ///
        /// Displays and serialises as 64 lowercase hex digits.
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name([u8; 32]);

        impl $name {
            /// Wraps raw digest bytes.
            pub const fn from_bytes(bytes: [u8; 32]) -> Self {
                Self(bytes)
            }

            /// The raw digest bytes.
            pub const fn as_bytes(&self) -> &[u8; 32] {
                &self.0
            }

            /// The digest as 64 lowercase hex digits.
            pub fn to_hex(&self) -> String {
                hex::encode(self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.to_hex())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.to_hex())
            }
        }

        impl FromStr for $name {
            type Err = IdError;

            /// Parses exactly 64 lowercase hex digits.
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                parse_lower_hex(s).map(Self).ok_or($malformed)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.to_hex())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let s = String::deserialize(deserializer)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

sha256_digest!(
    /// The SHA-256 digest of a canonical argument object (see `canonical_json`).
    ArgsDigest,
    IdError::MalformedDigest
);

sha256_digest!(
    /// The SHA-256 digest of a tool's definition as the person approved it (see
    /// [`ToolDefinition`](crate::ToolDefinition)).
    DefinitionDigest,
    IdError::MalformedDefinitionDigest
);

/// Exactly 64 lowercase hex digits, as 32 bytes.
fn parse_lower_hex(s: &str) -> Option<[u8; 32]> {
    let bytes = s.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (slot, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let [hi, lo] = pair else {
            return None;
        };
        *slot = (lower_hex_value(*hi)? << 4) | lower_hex_value(*lo)?;
    }
    Some(out)
}

fn lower_hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Parses the one accepted textual form of an opaque id: a random (version 4) UUID written
/// hyphenated in lowercase, 36 characters. Every other spelling (braces, urn, upper case, simple
/// form) is malformed, so that each id has exactly one valid spelling.
fn parse_v4(s: &str, kind: &'static str) -> Result<Uuid, IdError> {
    let malformed = || IdError::MalformedId { kind };
    // At 36 characters `uuid` reads only the hyphenated form, in either case; the one spelling
    // is the lowercase one.
    if s.len() != 36 || s.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(malformed());
    }
    let uuid = Uuid::try_parse(s).map_err(|_| malformed())?;
    if uuid.get_version() != Some(uuid::Version::Random)
        || uuid.get_variant() != uuid::Variant::RFC4122
    {
        return Err(malformed());
    }
    Ok(uuid)
}

/// A fresh random version 4 UUID: 122 bits from `uuid`'s `fast-rng` generator (`rand`'s
/// thread-local ChaCha CSPRNG, seeded and reseeded from the operating system). A system call per
/// id cost more than everything else a token's issue and spend do together; a kept CSPRNG
/// replaces the batch pool this crate used to keep for it. Ids are also bound to their
/// principal, tool and arguments, and a shared store refuses a key it already holds.
fn random_v4() -> Uuid {
    Uuid::new_v4()
}

macro_rules! uuid_id {
    ($(#[$meta:meta])* $name:ident, $kind:literal) => {
        uuid_id!($(#[$meta])* $name, $kind, derive(Debug));
    };
    ($(#[$meta:meta])* $name:ident, $kind:literal, $(derive($($derive:ident),*))?) => {
        $(#[$meta])*
        ///
        /// Opaque: a random version 4 UUID (122 random bits from a CSPRNG seeded from the operating
        /// system), never derived from its inputs. Displays as the lowercase hyphenated form, which is also
        /// the only form [`FromStr`] accepts.
        #[derive($($($derive,)*)? Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Uuid);

        impl $name {
            /// A fresh random id.
            pub(crate) fn random() -> Self {
                Self(random_v4())
            }

            /// Calls `f` with the id's text, written on the stack.
            pub(crate) fn with_text<R>(&self, f: impl FnOnce(&str) -> R) -> R {
                let mut buf = [0_u8; uuid::fmt::Hyphenated::LENGTH];
                f(self.0.hyphenated().encode_lower(&mut buf))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }

        impl FromStr for $name {
            type Err = IdError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                parse_v4(s, $kind).map(Self)
            }
        }
    };
}

uuid_id!(
    /// The id of a confirmation token (its textual form is the [`ConfirmationToken`] value).
    /// `Debug` does not print it.
    TokenId,
    "token",
);

impl fmt::Debug for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenId(..)")
    }
}
uuid_id!(
    /// The id of a pending approval held in a `Store`.
    ApprovalId,
    "approval"
);

/// An approval id is not a secret (it names an approval in the audit trail; taking it from the
/// store also needs the principal, tool and arguments), so it serialises as its text.
/// [`TokenId`] does not: its text is the token.
impl Serialize for ApprovalId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Reads the text [`Serialize`] writes (and only the canonical form).
impl<'de> Deserialize<'de> for ApprovalId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
uuid_id!(
    /// The id of a round-trip state record: the `requestState` value handed to the client.
    StateId,
    "round-trip state"
);

/// The opaque confirmation token value handed to the user (and through them, the model).
///
/// It is a bearer value: whoever holds it may present it, but it only spends for the principal,
/// tool and exact arguments it was issued for. `Debug` does not print it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ConfirmationToken {
    id: TokenId,
    /// The text of `id`, kept so that it is written once.
    value: Arc<str>,
    expires_at: time::OffsetDateTime,
}

impl ConfirmationToken {
    /// The token `id`, whose text is `value`.
    pub(crate) fn new(id: TokenId, value: Arc<str>, expires_at: time::OffsetDateTime) -> Self {
        Self {
            id,
            value,
            expires_at,
        }
    }

    /// The token's id: what [`Approvals::spend_token`](crate::Approvals::spend_token) takes.
    pub fn id(&self) -> TokenId {
        self.id
    }

    /// The token text.
    pub fn as_str(&self) -> &str {
        &self.value
    }

    /// The token text, owned.
    pub fn into_string(self) -> String {
        self.value.as_ref().to_owned()
    }

    /// When the token stops being spendable (exclusive).
    pub fn expires_at(&self) -> time::OffsetDateTime {
        self.expires_at
    }
}

impl fmt::Display for ConfirmationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.value)
    }
}

impl fmt::Debug for ConfirmationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ConfirmationToken(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_hex_round_trips() {
        let d = ArgsDigest::from_bytes([0xab; 32]);
        assert_eq!(d.to_string(), "ab".repeat(32));
        assert_eq!(format!("{d:?}"), format!("ArgsDigest({})", "ab".repeat(32)));
        assert_eq!(d.to_string().parse::<ArgsDigest>().unwrap(), d);
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(json, format!("\"{}\"", "ab".repeat(32)));
        assert_eq!(serde_json::from_str::<ArgsDigest>(&json).unwrap(), d);
    }

    #[test]
    fn digest_parse_refuses_other_forms() {
        for bad in [
            "",
            "ab",
            &"AB".repeat(32),
            &"ab".repeat(33),
            &"zz".repeat(32),
        ] {
            assert_eq!(
                bad.parse::<ArgsDigest>(),
                Err(IdError::MalformedDigest),
                "{bad}"
            );
            assert_eq!(
                bad.parse::<DefinitionDigest>(),
                Err(IdError::MalformedDefinitionDigest),
                "{bad}"
            );
        }
    }

    #[test]
    fn definition_digest_hex_round_trips() {
        let d = DefinitionDigest::from_bytes([0x0f; 32]);
        assert_eq!(d.to_string(), "0f".repeat(32));
        assert_eq!(
            format!("{d:?}"),
            format!("DefinitionDigest({})", "0f".repeat(32))
        );
        assert_eq!(d.to_string().parse::<DefinitionDigest>().unwrap(), d);
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<DefinitionDigest>(&json).unwrap(), d);
    }

    #[test]
    fn ids_have_one_spelling() {
        let id = TokenId::random();
        let text = id.to_string();
        assert_eq!(text.parse::<TokenId>().unwrap(), id);
        let upper = text.to_uppercase();
        let simple = text.replace('-', "");
        let braced = format!("{{{text}}}");
        let urn = format!("urn:uuid:{text}");
        for bad in [upper.as_str(), &simple, &braced, &urn, "", "not a token"] {
            assert_eq!(
                bad.parse::<TokenId>(),
                Err(IdError::MalformedId { kind: "token" }),
                "{bad}"
            );
        }
        // A well-formed UUID that is not version 4 is not one of ours.
        assert!(
            "00000000-0000-1000-8000-000000000000"
                .parse::<StateId>()
                .is_err()
        );
        assert!(
            "00000000-0000-0000-0000-000000000000"
                .parse::<ApprovalId>()
                .is_err()
        );
    }

    #[test]
    fn ids_are_random() {
        let a = TokenId::random();
        let b = TokenId::random();
        assert_ne!(a, b);
    }

    #[test]
    fn token_debug_is_redacted() {
        let id = TokenId::random();
        let t = ConfirmationToken::new(
            id,
            Arc::from(id.to_string()),
            time::OffsetDateTime::UNIX_EPOCH,
        );
        assert_eq!(format!("{t:?}"), "ConfirmationToken(..)");
        assert_eq!(format!("{id:?}"), "TokenId(..)");
        assert_eq!(t.to_string(), t.as_str());
    }

    #[test]
    fn ids_are_distinct_version_4_and_read_back() {
        let ids: Vec<TokenId> = (0..200).map(|_| TokenId::random()).collect();
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
        for id in &ids {
            assert_eq!(id.0.get_version(), Some(uuid::Version::Random));
            assert_eq!(id.0.get_variant(), uuid::Variant::RFC4122);
            assert_eq!(id.with_text(str::to_owned), id.to_string());
            assert_eq!(id.to_string().parse::<TokenId>().unwrap(), *id);
        }
        // Other threads draw from generators of their own: still no repeats.
        let others: Vec<TokenId> =
            std::thread::spawn(move || (0..200).map(|_| TokenId::random()).collect())
                .join()
                .unwrap();
        assert!(others.iter().all(|id| !distinct.contains(id)));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// What `parse_v4` did before it parsed by hand: `uuid`'s parser, then the canonical
        /// text compared with the input.
        fn parse_v4_by_uuid(s: &str) -> bool {
            let Ok(uuid) = Uuid::try_parse(s) else {
                return false;
            };
            uuid.hyphenated().to_string() == s
                && uuid.get_version() == Some(uuid::Version::Random)
                && uuid.get_variant() == uuid::Variant::RFC4122
        }

        /// Texts near the one accepted form: a UUID of any version and variant, in any of its
        /// spellings, with one character changed.
        fn arb_text() -> impl Strategy<Value = String> {
            (
                any::<u128>(),
                any::<bool>(),
                0..4usize,
                any::<bool>(),
                prop::option::weighted(0.5, (0..40usize, any::<char>())),
            )
                .prop_map(|(bits, v4, form, upper, change)| {
                    let uuid = if v4 {
                        uuid::Builder::from_random_bytes(bits.to_le_bytes()).into_uuid()
                    } else {
                        Uuid::from_u128(bits)
                    };
                    let mut text = match form {
                        0 => uuid.hyphenated().to_string(),
                        1 => uuid.simple().to_string(),
                        2 => uuid.braced().to_string(),
                        _ => uuid.urn().to_string(),
                    };
                    if upper {
                        text = text.to_uppercase();
                    }
                    if let Some((at, c)) = change {
                        let mut chars: Vec<char> = text.chars().collect();
                        if let Some(slot) = chars.get_mut(at) {
                            *slot = c;
                        }
                        text = chars.into_iter().collect();
                    }
                    text
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2048))]

            #[test]
            fn parsing_accepts_what_uuids_parser_did(text in arb_text()) {
                prop_assert_eq!(parse_v4(&text, "token").is_ok(), parse_v4_by_uuid(&text), "{}", text);
            }

            #[test]
            fn every_v4_text_round_trips(bits in any::<u128>()) {
                let uuid = uuid::Builder::from_random_bytes(bits.to_le_bytes()).into_uuid();
                let text = uuid.hyphenated().to_string();
                prop_assert_eq!(parse_v4(&text, "token"), Ok(uuid));
            }
        }
    }
}
