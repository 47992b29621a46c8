//! `capture`: tool arguments captured once, checked, canonicalised and digested.

use mcp_write_guard_core::{
    CapturedArgs,
    canonical::{
        ArgLimits, ArgsError, DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, MAX_SERIALIZED_DEPTH,
        canonical_json,
    },
    ids::ArgsDigest,
    token::CONFIRMATION_TOKEN_ARG,
};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use crate::support::{depth, fail, has_inexact_integer};

/// The limits every input is captured under: the defaults, then two small ones that real
/// inputs reach.
const LIMITS: [ArgLimits; 3] = [
    ArgLimits::new(DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH),
    ArgLimits::new(256, 4),
    ArgLimits::new(16, 1),
];

/// Parses `data` as JSON, as rmcp does with a call's `arguments`, and captures it under the
/// default limits and under small ones.
///
/// Properties: capture never panics, and either succeeds or returns an [`ArgsError`] that says
/// truly why (too deep, too large, an integer with no exact double, not an object);
/// `capture`, `capture_value` and `capture_owned` agree; the digest is the SHA-256 of
/// [`canonical_json`] and `canonical_len` its length, within the byte limit; the token digest
/// is the digest of `without_token()`; the same object written with its keys in another order
/// and other whitespace has the same digest; arguments accepted under small limits are accepted
/// under the defaults with the same digest.
pub fn check_capture(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Value::Object(map) = &value else {
        for limits in &LIMITS {
            assert_eq!(
                CapturedArgs::capture_value(&value, limits),
                Err(ArgsError::NotAnObject),
                "capture: a value that is not an object must be refused as NotAnObject"
            );
        }
        return;
    };
    let mut digests: Vec<Option<ArgsDigest>> = Vec::new();
    for limits in &LIMITS {
        let captured = capture_all_ways(map, limits);
        match &captured {
            Ok(args) => check_accepted(map, args, limits),
            Err(error) => check_refused(&value, error, limits),
        }
        digests.push(captured.ok().map(|args| args.digest()));
    }
    // Smaller limits accept less, never something else.
    let mut accepted = digests.iter().flatten();
    if let Some(first) = accepted.next() {
        assert!(
            digests.first().is_some_and(Option::is_some),
            "capture: accepted under small limits but refused under the defaults"
        );
        for other in accepted {
            assert_same_digest(first, other, "the same object under other limits");
        }
    }
}

/// `capture`, `capture_value` and `capture_owned` of `map`, which must agree.
fn capture_all_ways(
    map: &Map<String, Value>,
    limits: &ArgLimits,
) -> Result<CapturedArgs, ArgsError> {
    let borrowed = CapturedArgs::capture(Some(map), limits);
    let again = CapturedArgs::capture(Some(map), limits);
    assert_eq!(
        borrowed, again,
        "capture: the same object captured twice gives two results"
    );
    let as_value = CapturedArgs::capture_value(&Value::Object(map.clone()), limits);
    assert_eq!(
        borrowed, as_value,
        "capture: capture_value disagrees with capture"
    );
    let owned = CapturedArgs::capture_owned(Some(map.clone()), limits);
    assert_eq!(
        borrowed, owned,
        "capture: capture_owned disagrees with capture"
    );
    borrowed
}

fn check_accepted(map: &Map<String, Value>, args: &CapturedArgs, limits: &ArgLimits) {
    assert_eq!(
        args.arguments(),
        map,
        "capture: the captured arguments are not the arguments"
    );
    let value = Value::Object(map.clone());
    match canonical_json(&value, limits) {
        Ok(canonical) => assert_digest_is_sha256_of(args, &canonical),
        Err(error) => fail(format_args!(
            "capture: accepted, but canonical_json refuses the same object: {error}"
        )),
    }
    assert!(
        args.canonical_len() <= limits.max_bytes,
        "capture: canonical_len {} is over the limit of {} bytes",
        args.canonical_len(),
        limits.max_bytes
    );
    // The token digest is the digest of the arguments without the token.
    let without = args.without_token();
    let mut expected_without = map.clone();
    let token = expected_without.remove(CONFIRMATION_TOKEN_ARG);
    assert_eq!(
        without, expected_without,
        "capture: without_token removed something else"
    );
    assert_eq!(
        args.has_confirmation_token(),
        token.is_some(),
        "capture: has_confirmation_token is wrong"
    );
    assert_eq!(
        args.confirmation_token(),
        token.as_ref().and_then(Value::as_str),
        "capture: confirmation_token is wrong"
    );
    match CapturedArgs::capture(Some(&without), limits) {
        Ok(plain) => assert_token_digest(args, &plain),
        Err(error) => fail(format_args!(
            "capture: arguments without their token are refused where the whole was not: {error}"
        )),
    }
    // Another spelling of the same object: reversed key order, whitespace.
    let mut text = String::new();
    write_reordered(&value, &mut text);
    let reparsed: Result<Value, _> = serde_json::from_str(&text);
    assert!(
        reparsed.as_ref().is_ok_and(|v| *v == value),
        "capture: the reordered text does not read back as the same object: {text}"
    );
    if let Ok(reparsed) = reparsed {
        match CapturedArgs::capture_value(&reparsed, limits) {
            Ok(other) => assert_same_digest(
                &args.digest(),
                &other.digest(),
                "the object with its keys reordered",
            ),
            Err(error) => fail(format_args!(
                "capture: the reordered object is refused: {error}"
            )),
        }
    }
}

/// A refusal must be for the reason it names.
fn check_refused(value: &Value, error: &ArgsError, limits: &ArgLimits) {
    let depth_limit = limits.max_depth.min(MAX_SERIALIZED_DEPTH);
    match error {
        ArgsError::NotAnObject => fail(format_args!("capture: an object refused as NotAnObject")),
        ArgsError::TooDeep { limit } => {
            assert_eq!(
                *limit, depth_limit,
                "capture: TooDeep names the wrong limit"
            );
            assert!(
                depth(value) > *limit,
                "capture: refused as deeper than {limit}, but it nests {}",
                depth(value)
            );
        }
        ArgsError::Unrepresentable(why) => assert!(
            has_inexact_integer(value),
            "capture: refused as unrepresentable ({why}) without an inexact integer"
        ),
        ArgsError::TooLarge { limit, actual } => {
            assert_eq!(
                *limit, limits.max_bytes,
                "capture: TooLarge names the wrong limit"
            );
            assert!(actual > limit, "capture: TooLarge with {actual} <= {limit}");
            let unlimited = ArgLimits::new(usize::MAX, usize::MAX);
            let whole = canonical_json(value, &unlimited).map(|text| text.len());
            assert_eq!(
                whole,
                Ok(*actual),
                "capture: TooLarge names a size that is not the canonical form's"
            );
            assert!(
                depth(value) <= depth_limit && !has_inexact_integer(value),
                "capture: TooLarge for a value the earlier checks should have refused"
            );
        }
        other => fail(format_args!("capture: an unknown refusal: {other}")),
    }
    assert_eq!(
        canonical_json(value, limits).err().as_ref(),
        Some(error),
        "capture: canonical_json refuses the same object differently"
    );
}

/// The digest of `args` is the SHA-256 of `canonical`, and `canonical_len` its length.
pub(crate) fn assert_digest_is_sha256_of(args: &CapturedArgs, canonical: &str) {
    let sha: [u8; 32] = Sha256::digest(canonical.as_bytes()).into();
    assert_eq!(
        args.digest(),
        ArgsDigest::from_bytes(sha),
        "capture: the digest is not the SHA-256 of the canonical form {canonical}"
    );
    assert_eq!(
        args.canonical_len(),
        canonical.len(),
        "capture: canonical_len is not the length of the canonical form {canonical}"
    );
}

/// `with`'s token digest is the digest of `without` (its arguments less the token), and equal to
/// its own digest exactly when it holds no token.
pub(crate) fn assert_token_digest(with: &CapturedArgs, without: &CapturedArgs) {
    assert_eq!(
        with.token_digest(),
        without.digest(),
        "capture: the token digest is not the digest of the arguments without the token"
    );
    assert_eq!(
        with.token_digest() == with.digest(),
        !with.has_confirmation_token(),
        "capture: the token digest equals the digest exactly when there is no token"
    );
}

pub(crate) fn assert_same_digest(a: &ArgsDigest, b: &ArgsDigest, what: &str) {
    assert_eq!(a, b, "capture: {what} has another digest");
}

/// Writes `value` as JSON text with every object's keys in reverse order and some whitespace.
pub(crate) fn write_reordered(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push_str("[ ");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(" ,\n");
                }
                write_reordered(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push_str("{\t");
            for (i, (key, item)) in map.iter().rev().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push_str(" : ");
                write_reordered(item, out);
            }
            out.push_str(" }");
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn capture(v: Value) -> CapturedArgs {
        CapturedArgs::capture_value(&v, &ArgLimits::default()).unwrap()
    }

    #[test]
    fn holds_for_ordinary_arguments() {
        check_capture(br#"{"b": [1, 2.5, "x"], "a": {"z": null}, "confirmationToken": "t"}"#);
        check_capture(br#"{"n": 9007199254740993}"#);
        check_capture(br#"[1]"#);
        check_capture(b"not json");
    }

    #[test]
    fn the_reordered_text_reverses_keys() {
        let mut text = String::new();
        write_reordered(&json!({"a": 1, "b": [true]}), &mut text);
        assert_eq!(text, "{\t\"b\" : [ true], \"a\" : 1 }");
    }

    #[test]
    #[should_panic(expected = "not the SHA-256 of the canonical form")]
    fn a_digest_of_other_text_fails() {
        assert_digest_is_sha256_of(&capture(json!({"a": 1})), r#"{"a":2}"#);
    }

    #[test]
    #[should_panic(expected = "not the digest of the arguments without the token")]
    fn a_token_digest_of_other_arguments_fails() {
        let with = capture(json!({"a": 1, "confirmationToken": "t"}));
        let other = capture(json!({"a": 2}));
        assert_token_digest(&with, &other);
    }

    #[test]
    #[should_panic(expected = "has another digest")]
    fn different_digests_fail() {
        let a = capture(json!({"a": 1}));
        let b = capture(json!({"a": 1.5}));
        assert_same_digest(&a.digest(), &b.digest(), "the same object");
    }

    #[test]
    #[should_panic(expected = "refused as deeper than")]
    fn a_false_refusal_fails() {
        check_refused(
            &json!({"a": 1}),
            &ArgsError::TooDeep { limit: 1 },
            &ArgLimits::new(1024, 1),
        );
    }
}
