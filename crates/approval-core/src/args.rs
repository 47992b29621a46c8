//! Arguments captured once: checked, canonicalised, digested.

use serde_json::{Map, Value};

use crate::canonical::{ArgLimits, ArgsError, digest_object};
use crate::ids::ArgsDigest;

/// The name of the argument that carries a confirmation token. It is left out of the digest a
/// token is bound to (a token cannot be bound to arguments that contain itself).
pub const CONFIRMATION_TOKEN_ARG: &str = "confirmationToken";

/// Tool arguments captured once, at the start of a call: checked against [`ArgLimits`],
/// canonicalised and digested.
///
/// Everything downstream (the preview, the question to the user, the token check, the apply) uses
/// this one value, so a model cannot preview one value and commit another. There is no way to
/// change the arguments of a `CapturedArgs`: capture new ones and they get a new digest.
#[derive(Debug, Clone, PartialEq)]
pub struct CapturedArgs {
    arguments: Map<String, Value>,
    digest: ArgsDigest,
    token_digest: ArgsDigest,
    canonical_len: usize,
}

impl CapturedArgs {
    /// Captures the arguments of a tool call. `None` (no arguments sent) is the empty object.
    ///
    /// The limits are checked before the arguments are copied, so a pathological value is refused
    /// without being cloned.
    pub fn capture(
        args: Option<&Map<String, Value>>,
        limits: &ArgLimits,
    ) -> Result<Self, ArgsError> {
        let empty = Map::new();
        let map = args.unwrap_or(&empty);
        let (digest, canonical_len) = digest_object(map, None, limits)?;
        let token_digest = if map.contains_key(CONFIRMATION_TOKEN_ARG) {
            digest_object(map, Some(CONFIRMATION_TOKEN_ARG), limits)?.0
        } else {
            digest
        };
        Ok(Self {
            arguments: map.clone(),
            digest,
            token_digest,
            canonical_len,
        })
    }

    /// Captures arguments given as any JSON value: anything but an object is
    /// [`ArgsError::NotAnObject`] (`null` included).
    pub fn capture_value(args: &Value, limits: &ArgLimits) -> Result<Self, ArgsError> {
        match args {
            Value::Object(map) => Self::capture(Some(map), limits),
            _ => Err(ArgsError::NotAnObject),
        }
    }

    /// Rebuilds captured arguments from a stored copy, refusing them unless they still have the
    /// digest recorded with them.
    pub(crate) fn restore(
        arguments: Map<String, Value>,
        expected: ArgsDigest,
    ) -> Result<Self, ArgsError> {
        // These arguments passed the caller's limits when captured; the digest check below is
        // what matters here, and canonicalisation is iterative whatever the depth.
        let limits = ArgLimits::new(usize::MAX, usize::MAX);
        let (digest, canonical_len) = digest_object(&arguments, None, &limits)?;
        if digest != expected {
            return Err(ArgsError::Unrepresentable(
                "stored arguments do not match their digest".into(),
            ));
        }
        let token_digest = if arguments.contains_key(CONFIRMATION_TOKEN_ARG) {
            digest_object(&arguments, Some(CONFIRMATION_TOKEN_ARG), &limits)?.0
        } else {
            digest
        };
        Ok(Self {
            arguments,
            digest,
            token_digest,
            canonical_len,
        })
    }

    /// The arguments exactly as captured (including any `confirmationToken`).
    pub fn arguments(&self) -> &Map<String, Value> {
        &self.arguments
    }

    /// The digest of all the arguments.
    pub fn digest(&self) -> ArgsDigest {
        self.digest
    }

    /// The digest of the arguments without the `confirmationToken` member: what a token is bound
    /// to. Equal to [`digest`](Self::digest) when there is no such member.
    pub fn token_digest(&self) -> ArgsDigest {
        self.token_digest
    }

    /// The `confirmationToken` argument, if present and a string.
    pub fn confirmation_token(&self) -> Option<&str> {
        self.arguments
            .get(CONFIRMATION_TOKEN_ARG)
            .and_then(Value::as_str)
    }

    /// Whether a `confirmationToken` member is present at all (of any type).
    pub fn has_confirmation_token(&self) -> bool {
        self.arguments.contains_key(CONFIRMATION_TOKEN_ARG)
    }

    /// A copy of the arguments without the `confirmationToken` member: what the inner tool
    /// receives when the token has been spent.
    pub fn without_token(&self) -> Map<String, Value> {
        let mut map = self.arguments.clone();
        map.remove(CONFIRMATION_TOKEN_ARG);
        map
    }

    /// The length in bytes of the canonical form of the arguments.
    pub fn canonical_len(&self) -> usize {
        self.canonical_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn none_is_the_empty_object() {
        let limits = ArgLimits::default();
        let a = CapturedArgs::capture(None, &limits).unwrap();
        let b = CapturedArgs::capture(Some(&Map::new()), &limits).unwrap();
        assert_eq!(a.digest(), b.digest());
        assert!(a.arguments().is_empty());
        assert_eq!(a.canonical_len(), 2);
    }

    #[test]
    fn non_objects_are_refused() {
        let limits = ArgLimits::default();
        for v in [json!(null), json!([]), json!("x"), json!(1), json!(true)] {
            assert_eq!(
                CapturedArgs::capture_value(&v, &limits),
                Err(ArgsError::NotAnObject),
                "{v}"
            );
        }
    }

    #[test]
    fn token_digest_ignores_the_token_only() {
        let limits = ArgLimits::default();
        let plain = CapturedArgs::capture(Some(&map(json!({"id": 7}))), &limits).unwrap();
        let with = CapturedArgs::capture(
            Some(&map(json!({"id": 7, "confirmationToken": "abc"}))),
            &limits,
        )
        .unwrap();
        let other_token = CapturedArgs::capture(
            Some(&map(json!({"id": 7, "confirmationToken": "xyz"}))),
            &limits,
        )
        .unwrap();
        assert_eq!(plain.token_digest(), plain.digest());
        assert_eq!(with.token_digest(), plain.digest());
        assert_eq!(other_token.token_digest(), plain.digest());
        assert_ne!(with.digest(), plain.digest());
        assert_ne!(with.digest(), other_token.digest());
        assert_eq!(with.confirmation_token(), Some("abc"));
        assert_eq!(with.without_token(), *plain.arguments());
        let nested = CapturedArgs::capture(
            Some(&map(json!({"id": 7, "x": {"confirmationToken": "abc"}}))),
            &limits,
        )
        .unwrap();
        assert_ne!(nested.token_digest(), plain.digest());
    }

    #[test]
    fn a_non_string_token_is_present_but_not_a_token() {
        let a = CapturedArgs::capture(
            Some(&map(json!({"confirmationToken": 5}))),
            &ArgLimits::default(),
        )
        .unwrap();
        assert!(a.has_confirmation_token());
        assert_eq!(a.confirmation_token(), None);
    }

    #[test]
    fn limits_are_enforced_on_capture() {
        let deep = map(json!({"a": [[[1]]]}));
        assert_eq!(
            CapturedArgs::capture(Some(&deep), &ArgLimits::new(1024, 3)),
            Err(ArgsError::TooDeep { limit: 3 })
        );
        let big = map(json!({"a": "x".repeat(100)}));
        assert!(matches!(
            CapturedArgs::capture(Some(&big), &ArgLimits::new(50, 64)),
            Err(ArgsError::TooLarge { limit: 50, .. })
        ));
        let odd = map(json!({"a": 9007199254740993u64}));
        assert!(matches!(
            CapturedArgs::capture(Some(&odd), &ArgLimits::default()),
            Err(ArgsError::Unrepresentable(_))
        ));
    }

    #[test]
    fn restore_checks_the_digest() {
        let a = CapturedArgs::capture(Some(&map(json!({"id": 7}))), &ArgLimits::default()).unwrap();
        let back = CapturedArgs::restore(a.arguments().clone(), a.digest()).unwrap();
        assert_eq!(back, a);
        assert!(CapturedArgs::restore(map(json!({"id": 8})), a.digest()).is_err());
    }
}
