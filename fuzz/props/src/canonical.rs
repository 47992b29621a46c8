//! `canonical`: the RFC 8785 canonical form of any JSON value.

use mcp_write_guard_core::canonical::{
    ArgLimits, ArgsError, DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, canonical_json,
};
use serde_json::{Number, Value};

use crate::support::{depth, fail, has_inexact_integer};

/// Parses `data` as JSON and writes its canonical form under the default limits and without
/// limits.
///
/// Properties: the form is valid JSON with no insignificant whitespace and no raw control
/// character; it is a fixed point (`canonical(parse(canonical(x))) == canonical(x)`); it is byte
/// for byte what the oracle `serde_json_canonicalizer` writes; another spelling of the same value
/// (serde_json's own compact text) has the same form; a refusal is for the reason it names (too
/// deep, an integer without an exact double), and only the depth limit separates the default
/// limits from none.
pub fn check_canonical(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let limits = ArgLimits::default();
    let inexact = has_inexact_integer(&value);
    let nesting = depth(&value);
    match canonical_json(&value, &limits) {
        Ok(text) => {
            assert!(
                nesting <= DEFAULT_MAX_DEPTH && !inexact && text.len() <= DEFAULT_MAX_BYTES,
                "canonical: accepted a value the limits refuse (depth {nesting}, inexact {inexact})"
            );
            check_form(&value, &text);
        }
        Err(ArgsError::TooDeep { limit }) => assert!(
            limit == DEFAULT_MAX_DEPTH && nesting > limit,
            "canonical: refused as deeper than {limit}, but it nests {nesting}"
        ),
        Err(ArgsError::Unrepresentable(why)) => assert!(
            inexact,
            "canonical: refused as unrepresentable ({why}) without an inexact integer"
        ),
        Err(other) => fail(format_args!("canonical: an unexpected refusal: {other}")),
    }
    // Without limits only inexact integers are refused (a parsed value nests at most 128 deep,
    // under the writer's own bound).
    match canonical_json(&value, &ArgLimits::new(usize::MAX, usize::MAX)) {
        Ok(text) => {
            assert!(
                !inexact,
                "canonical: wrote an integer that has no exact double"
            );
            check_form(&value, &text);
        }
        Err(ArgsError::Unrepresentable(_)) if inexact => {}
        Err(other) => fail(format_args!("canonical: refused without limits: {other}")),
    }
}

/// Everything a canonical form `text` of `value` must be.
fn check_form(value: &Value, text: &str) {
    assert_no_insignificant_whitespace(text);
    assert_fixed_point(text);
    assert_matches_oracle(value, text);
    let compact = value.to_string();
    match serde_json::from_str::<Value>(&compact) {
        Ok(respelled) => assert_eq!(
            canonical_json(&respelled, &ArgLimits::new(usize::MAX, usize::MAX)).as_deref(),
            Ok(text),
            "canonical: another spelling of the same value has another form"
        ),
        Err(error) => fail(format_args!(
            "canonical: serde_json's own text does not read back: {error}"
        )),
    }
}

/// Outside strings: no space, tab, line feed or carriage return; inside: no raw control
/// character (they are escaped).
pub(crate) fn assert_no_insignificant_whitespace(text: &str) {
    let mut in_string = false;
    let mut escaped = false;
    for (at, byte) in text.bytes().enumerate() {
        if in_string {
            assert!(
                byte >= 0x20,
                "canonical: a raw control character at byte {at} of {text:?}"
            );
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                (false, _) => {}
            }
        } else {
            assert!(
                !matches!(byte, b' ' | b'\t' | b'\n' | b'\r'),
                "canonical: insignificant whitespace at byte {at} of {text:?}"
            );
            in_string = byte == b'"';
        }
    }
}

/// `text` is valid JSON, and its canonical form is itself, with its numbers read as RFC 8785
/// reads them: as doubles.
///
/// (serde_json reads a number without a fraction or exponent as an integer when it fits in 64
/// bits. A double from 2^53 up to 1e21 is written as digits alone, the shortest that read back
/// to it in ECMAScript, `1152921504606847000` for 2^60, and serde_json reads those digits as an
/// integer that no double equals, which `canonical_json` refuses by design rather than round.
/// Read as doubles, as a JavaScript client reads them, the form is a fixed point.)
pub(crate) fn assert_fixed_point(text: &str) {
    match serde_json::from_str::<Value>(text) {
        Ok(back) => assert_eq!(
            canonical_json(&as_doubles(back), &ArgLimits::new(usize::MAX, usize::MAX)).as_deref(),
            Ok(text),
            "canonical: the form is not a fixed point"
        ),
        Err(error) => fail(format_args!(
            "canonical: the form is not valid JSON ({error}): {text:?}"
        )),
    }
}

/// `value` with every integer turned into the double nearest it.
fn as_doubles(value: Value) -> Value {
    match value {
        Value::Number(n) if !n.is_f64() => n
            .as_f64()
            .and_then(Number::from_f64)
            .map_or(Value::Number(n), Value::Number),
        Value::Array(items) => Value::Array(items.into_iter().map(as_doubles).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, item)| (key, as_doubles(item)))
                .collect(),
        ),
        other => other,
    }
}

/// `text` is what `serde_json_canonicalizer` writes for `value`.
pub(crate) fn assert_matches_oracle(value: &Value, text: &str) {
    match serde_json_canonicalizer::to_string(value) {
        Ok(oracle) => assert_eq!(
            text, oracle,
            "canonical: the form differs from serde_json_canonicalizer's"
        ),
        Err(error) => fail(format_args!(
            "canonical: serde_json_canonicalizer refuses what we wrote: {error}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn holds_for_ordinary_values() {
        check_canonical(
            br#"{"b": [1, 1.0, 1e21, -0.0, "\u0001"], "a": {"\uffff": 1, "\ud800\udc00": 2}}"#,
        );
        check_canonical(b"9007199254740993");
        check_canonical(b"[[[[]]]]");
    }

    #[test]
    #[should_panic(expected = "insignificant whitespace")]
    fn whitespace_fails() {
        assert_no_insignificant_whitespace(r#"{"a": 1}"#);
    }

    #[test]
    #[should_panic(expected = "raw control character")]
    fn a_raw_control_character_fails() {
        assert_no_insignificant_whitespace("[\"a\tb\"]");
    }

    #[test]
    fn whitespace_inside_strings_is_fine() {
        assert_no_insignificant_whitespace(r#"{"a b":"c \" d"}"#);
    }

    #[test]
    #[should_panic(expected = "not a fixed point")]
    fn unsorted_keys_are_not_a_fixed_point() {
        assert_fixed_point(r#"{"b":1,"a":2}"#);
    }

    #[test]
    fn big_doubles_are_a_fixed_point_read_as_doubles() {
        // 2^60 is written as ECMAScript writes it; serde_json reads those digits as an integer
        // no double equals.
        assert_fixed_point("[1152921504606847000,992547403007199200,1e+21]");
        check_canonical(b"[992547403007199254.40992891, 1152921504606846976]");
    }

    #[test]
    #[should_panic(expected = "not valid JSON")]
    fn invalid_json_fails() {
        assert_fixed_point("{");
    }

    #[test]
    #[should_panic(expected = "differs from serde_json_canonicalizer")]
    fn another_form_than_the_oracles_fails() {
        assert_matches_oracle(&json!({"a": 1.0}), r#"{"a":1.0}"#);
    }
}
