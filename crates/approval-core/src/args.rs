//! Arguments captured once: checked, canonicalised, digested.

use serde_json::{Map, Value};

use crate::canonical::{ArgLimits, ArgsError, digest_object_and_without};
use crate::ids::ArgsDigest;

/// The name of the argument that carries a confirmation token (mcp-write-guard-policy's one definition).
/// It is left out of the digest a token is bound to (a token cannot be bound to arguments that
/// contain itself).
pub use mcp_write_guard_policy::CONFIRMATION_TOKEN_ARG;

/// Tool arguments captured once, at the start of a call: checked against [`ArgLimits`],
/// canonicalised and digested.
///
/// Everything downstream (the preview, the question to the user, the token check, the apply) uses
/// this one value, so a model cannot preview one value and commit another. There is no way to
/// change the arguments of a `CapturedArgs`: capture new ones and they get a new digest.
#[derive(Clone, PartialEq)]
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
        let (digest, token_digest, canonical_len) =
            digest_object_and_without(map, CONFIRMATION_TOKEN_ARG, limits)?;
        Ok(Self {
            arguments: map.clone(),
            digest,
            token_digest,
            canonical_len,
        })
    }

    /// Like [`capture`](Self::capture), taking the arguments instead of copying them: for a
    /// caller that has no further use for its own copy (the copy of a 1 KiB object costs about
    /// as much as its canonical form and both digests together). `None` is the empty object.
    ///
    /// On refusal the arguments are dropped here; a caller that must dismantle a pathological
    /// value itself (see [`canonical_json`](crate::canonical::canonical_json)) should check with
    /// [`capture`](Self::capture) first.
    pub fn capture_owned(
        args: Option<Map<String, Value>>,
        limits: &ArgLimits,
    ) -> Result<Self, ArgsError> {
        let arguments = args.unwrap_or_default();
        let (digest, token_digest, canonical_len) =
            digest_object_and_without(&arguments, CONFIRMATION_TOKEN_ARG, limits)?;
        Ok(Self {
            arguments,
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
        // what matters here (depth stays capped at MAX_SERIALIZED_DEPTH whatever the limits).
        let limits = ArgLimits::new(usize::MAX, usize::MAX);
        let (digest, token_digest, canonical_len) =
            digest_object_and_without(&arguments, CONFIRMATION_TOKEN_ARG, &limits)?;
        if digest != expected {
            return Err(ArgsError::Unrepresentable(
                "stored arguments do not match their digest".into(),
            ));
        }
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

/// `arguments` as `Debug` shows them: a confirmation token's value (a bearer value) replaced by
/// `<redacted>`.
pub(crate) fn redacted(arguments: &Map<String, Value>) -> Map<String, Value> {
    let mut shown = arguments.clone();
    if let Some(token) = shown.get_mut(CONFIRMATION_TOKEN_ARG) {
        *token = Value::from("<redacted>");
    }
    shown
}

/// The arguments without the value of a confirmation token (a bearer value: it is shown as
/// `<redacted>`), and the digests.
impl std::fmt::Debug for CapturedArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapturedArgs")
            .field("arguments", &redacted(&self.arguments))
            .field("digest", &self.digest)
            .field("token_digest", &self.token_digest)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn debug_shows_no_confirmation_token() {
        let secret = "tok-secret-value";
        let args = CapturedArgs::capture(
            Some(
                &serde_json::json!({"name": "a", CONFIRMATION_TOKEN_ARG: secret})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
            &ArgLimits::default(),
        )
        .unwrap();
        let shown = format!("{args:?}");
        assert!(!shown.contains(secret), "{shown}");
        assert!(
            shown.contains("<redacted>") && shown.contains("\"name\""),
            "{shown}"
        );
        let plain = CapturedArgs::capture(
            Some(
                &serde_json::json!({"name": "a"})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
            &ArgLimits::default(),
        )
        .unwrap();
        assert!(!format!("{plain:?}").contains("<redacted>"));
    }

    use super::*;
    use serde_json::json;

    use crate::test_support::object as map;

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
    fn capture_owned_is_capture_without_the_copy() {
        let limits = ArgLimits::default();
        for v in [
            json!({"id": 7}),
            json!({"id": 7, "confirmationToken": "abc"}),
            json!({}),
        ] {
            let borrowed = CapturedArgs::capture(Some(&map(v.clone())), &limits).unwrap();
            let owned = CapturedArgs::capture_owned(Some(map(v)), &limits).unwrap();
            assert_eq!(owned, borrowed);
        }
        assert_eq!(
            CapturedArgs::capture_owned(None, &limits).unwrap(),
            CapturedArgs::capture(None, &limits).unwrap()
        );
        let deep = map(json!({"a": [[[1]]]}));
        assert_eq!(
            CapturedArgs::capture_owned(Some(deep), &ArgLimits::new(1024, 3)),
            Err(ArgsError::TooDeep { limit: 3 })
        );
    }

    #[test]
    fn restore_checks_the_digest() {
        let a = CapturedArgs::capture(Some(&map(json!({"id": 7}))), &ArgLimits::default()).unwrap();
        let back = CapturedArgs::restore(a.arguments().clone(), a.digest()).unwrap();
        assert_eq!(back, a);
        assert!(CapturedArgs::restore(map(json!({"id": 8})), a.digest()).is_err());
    }

    mod props {
        use super::*;
        use crate::canonical::canonical_json;
        use proptest::prelude::*;
        use proptest::sample::Index;

        fn digest_of(v: &Value) -> ArgsDigest {
            CapturedArgs::capture_value(v, &ArgLimits::default())
                .unwrap()
                .digest()
        }

        fn arb_leaf() -> impl Strategy<Value = Value> {
            prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                (-(1i64 << 53)..(1i64 << 53)).prop_map(|i| json!(i)),
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(|f| json!(f)),
                "\\PC{0,6}".prop_map(Value::String),
            ]
        }

        fn arb_value() -> impl Strategy<Value = Value> {
            arb_leaf().prop_recursive(4, 40, 5, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                    prop::collection::btree_map("\\PC{0,4}", inner, 0..5)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        fn arb_args() -> impl Strategy<Value = Value> {
            prop::collection::btree_map("[a-zA-Z_]{1,6}", arb_value(), 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect()))
        }

        /// Writes `v` as JSON text with the members of each object in an order chosen by `seed`
        /// and some whitespace, so that parsing it gives the same value from different texts.
        fn write_shuffled(v: &Value, seed: &mut u64, out: &mut String) {
            fn next(seed: &mut u64) -> u64 {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                *seed >> 33
            }
            match v {
                Value::Array(items) => {
                    out.push_str("[ ");
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            out.push_str(" ,\n");
                        }
                        write_shuffled(item, seed, out);
                    }
                    out.push(']');
                }
                Value::Object(map) => {
                    let mut members: Vec<_> = map.iter().collect();
                    for i in (1..members.len()).rev() {
                        let j = (next(seed) % (i as u64 + 1)) as usize;
                        members.swap(i, j);
                    }
                    out.push_str("{\t");
                    for (i, (k, item)) in members.into_iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        out.push_str(&serde_json::to_string(k).unwrap());
                        out.push_str(" : ");
                        write_shuffled(item, seed, out);
                    }
                    out.push_str(" }");
                }
                other => out.push_str(&serde_json::to_string(other).unwrap()),
            }
        }

        /// Paths to every leaf and every object key, as (container path, step) pairs.
        #[derive(Debug, Clone)]
        enum Step {
            Index(usize),
            Key(String),
        }

        fn leaves(v: &Value, path: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
            match v {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        path.push(Step::Index(i));
                        leaves(item, path, out);
                        path.pop();
                    }
                }
                Value::Object(map) => {
                    for (k, item) in map {
                        path.push(Step::Key(k.clone()));
                        leaves(item, path, out);
                        path.pop();
                    }
                }
                _ => out.push(path.clone()),
            }
        }

        fn at_mut<'a>(v: &'a mut Value, path: &[Step]) -> &'a mut Value {
            let mut cur = v;
            for step in path {
                cur = match (step, cur) {
                    (Step::Index(i), Value::Array(items)) => &mut items[*i],
                    (Step::Key(k), Value::Object(map)) => map.get_mut(k).unwrap(),
                    _ => unreachable!(),
                };
            }
            cur
        }

        /// A leaf that is canonically different from `leaf`.
        fn mutate(leaf: &Value, choice: u8) -> Value {
            let candidates = [
                json!(null),
                json!(true),
                json!(false),
                json!(0),
                json!(1),
                json!(0.5),
                json!(""),
                json!("x"),
                json!([]),
                json!({}),
            ];
            let canon = |v: &Value| canonical_json(v, &ArgLimits::default()).unwrap();
            let start = usize::from(choice) % candidates.len();
            (0..candidates.len())
                .map(|i| &candidates[(start + i) % candidates.len()])
                .find(|c| canon(c) != canon(leaf))
                .cloned()
                .unwrap()
        }

        fn has_float(v: &Value) -> bool {
            match v {
                Value::Number(n) => n.is_f64(),
                Value::Array(items) => items.iter().any(has_float),
                Value::Object(map) => map.values().any(has_float),
                _ => false,
            }
        }

        proptest! {
            /// The digest depends on content only: member order and whitespace never matter.
            #[test]
            fn key_order_never_matters(v in arb_args(), seed_a in any::<u64>(), seed_b in any::<u64>()) {
                let (mut a, mut b) = (String::new(), String::new());
                write_shuffled(&v, &mut seed_a.clone(), &mut a);
                write_shuffled(&v, &mut seed_b.clone(), &mut b);
                let pa: Value = serde_json::from_str(&a).unwrap();
                let pb: Value = serde_json::from_str(&b).unwrap();
                // (Compared with each other, not with `v`: serde_json's default float parsing
                // may differ from the generated double in the last bit.)
                prop_assert_eq!(digest_of(&pa), digest_of(&pb));
            }

            /// Changing any one leaf value changes the digest.
            #[test]
            fn any_leaf_mutation_changes_the_digest(v in arb_args(), which in any::<Index>(), choice in any::<u8>()) {
                let mut paths = Vec::new();
                leaves(&v, &mut Vec::new(), &mut paths);
                prop_assume!(!paths.is_empty());
                let path = which.get(&paths);
                let mut changed = v.clone();
                let leaf = at_mut(&mut changed, path);
                *leaf = mutate(leaf, choice);
                prop_assert_ne!(digest_of(&changed), digest_of(&v));
            }

            /// Renaming any one key changes the digest.
            #[test]
            fn any_key_rename_changes_the_digest(v in arb_args(), which in any::<Index>()) {
                let mut paths = Vec::new();
                leaves(&v, &mut Vec::new(), &mut paths);
                let keyed: Vec<&Vec<Step>> = paths
                    .iter()
                    .filter(|p| matches!(p.last(), Some(Step::Key(_))))
                    .collect();
                prop_assume!(!keyed.is_empty());
                let path = *which.get(&keyed);
                let (last, parent) = path.split_last().unwrap();
                let Step::Key(old) = last else { unreachable!() };
                let mut changed = v.clone();
                let Value::Object(map) = at_mut(&mut changed, parent) else { unreachable!() };
                let mut new_key = format!("{old}~");
                while map.contains_key(&new_key) {
                    new_key.push('~');
                }
                let item = map.remove(old).unwrap();
                map.insert(new_key, item);
                prop_assert_ne!(digest_of(&changed), digest_of(&v));
            }

            /// Swapping two canonically different elements of an array changes the digest.
            #[test]
            fn array_order_matters(items in prop::collection::vec(arb_value(), 2..6), i in any::<Index>(), j in any::<Index>()) {
                let (i, j) = (i.index(items.len()), j.index(items.len()));
                let canon = |v: &Value| canonical_json(v, &ArgLimits::default()).unwrap();
                prop_assume!(canon(&items[i]) != canon(&items[j]));
                let mut swapped = items.clone();
                swapped.swap(i, j);
                prop_assert_ne!(
                    digest_of(&json!({"list": items})),
                    digest_of(&json!({"list": swapped}))
                );
            }

            /// The canonical form is valid JSON and a fixed point. (Integers only: serde_json's
            /// default float parser is not correctly rounded, so a float written in its shortest
            /// form may read back as its neighbour. `numbers_read_back_exactly` covers floats.)
            #[test]
            fn canonical_form_is_a_fixed_point(v in arb_args().prop_filter("no floats", |v| !has_float(v))) {
                let limits = ArgLimits::default();
                let text = canonical_json(&v, &limits).unwrap();
                let back: Value = serde_json::from_str(&text).unwrap();
                prop_assert_eq!(canonical_json(&back, &limits).unwrap(), text);
            }

            /// Every canonical number reads back (with a correctly rounded parser) to the same
            /// double.
            #[test]
            fn numbers_read_back_exactly(f in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
                let text = canonical_json(&json!(f), &ArgLimits::default()).unwrap();
                let back: f64 = text.parse().unwrap();
                prop_assert!(back == f, "{} -> {} -> {}", f, text, back);
            }

            /// The token digest is the digest of the arguments without the token, whatever it holds.
            #[test]
            fn token_digest_ignores_only_the_token(v in arb_args(), token in arb_value()) {
                let Value::Object(mut with) = v.clone() else { unreachable!() };
                with.insert(CONFIRMATION_TOKEN_ARG.into(), token);
                let limits = ArgLimits::default();
                let a = CapturedArgs::capture(Some(&with), &limits).unwrap();
                let mut without = with.clone();
                without.remove(CONFIRMATION_TOKEN_ARG);
                let b = CapturedArgs::capture(Some(&without), &limits).unwrap();
                prop_assert_eq!(a.token_digest(), b.digest());
                prop_assert_ne!(a.digest(), b.digest());
            }
        }
    }
}
