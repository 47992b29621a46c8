//! The canonical JSON form of tool arguments (see [`canonical_json`]).
//!
//! The canonical bytes (RFC 8785) are `serde_json_canonicalizer`'s: numbers written as
//! ECMAScript's `Number.prototype.toString` writes them (`ryu-js`), strings with the RFC's
//! escapes, members sorted by their keys as UTF-16 code units. It passes the RFC's examples, the
//! reference implementation's test data, ES6 number-formatting vectors and the pinned digests
//! (`tests/rfc8785.rs`). In front of it stay the checks a library cannot make for us: nesting
//! depth (which also bounds the serializer's recursion), integers without an exact double (which
//! the form would round to another integer's digest), numbers that `arbitrary_precision` would
//! hand the tool in another spelling, and the size of the result. The digest without the
//! top-level `confirmationToken` is the same serializer over a view of the object that leaves
//! that member out (`Without`), not a second writer.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Number, Value};
use sha2::{Digest as _, Sha256};

use crate::ids::ArgsDigest;

/// The limits a tool's preview is read with (see [`previews_match`](crate::previews_match)).
pub use crate::approval::PREVIEW_LIMITS;

/// Default [`ArgLimits::max_bytes`]: 1 MiB of canonical JSON.
pub const DEFAULT_MAX_BYTES: usize = 1024 * 1024;
/// Default [`ArgLimits::max_depth`]: 64 nested containers.
pub const DEFAULT_MAX_DEPTH: usize = 64;

/// Limits applied to tool arguments before anything else is done with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ArgLimits {
    /// The longest canonical form accepted, in bytes (default 1 MiB).
    pub max_bytes: usize,
    /// The deepest nesting of containers accepted (default 64; the argument object itself is 1;
    /// never more than [`MAX_SERIALIZED_DEPTH`]).
    pub max_depth: usize,
}

impl ArgLimits {
    /// Limits with the given size (bytes of canonical JSON) and depth (nested containers).
    pub const fn new(max_bytes: usize, max_depth: usize) -> Self {
        Self {
            max_bytes,
            max_depth,
        }
    }
}

impl Default for ArgLimits {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH)
    }
}

/// Why arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgsError {
    /// The arguments are not a JSON object.
    #[error("tool arguments must be a JSON object")]
    NotAnObject,
    /// The canonical form is longer than the limit.
    #[error("tool arguments are larger than the limit of {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
        /// The length of the canonical form in bytes: always more than `limit`.
        actual: usize,
    },
    /// The arguments nest deeper than the limit.
    #[error("tool arguments nest deeper than the limit of {limit} levels")]
    TooDeep {
        /// The limit in nested containers.
        limit: usize,
    },
    /// A value the canonical form cannot represent faithfully (see [`canonical_json`]).
    #[error("tool arguments hold a value that cannot be represented canonically: {0}")]
    Unrepresentable(String),
}

/// The deepest nesting accepted whatever [`ArgLimits::max_depth`] says: the serializer recurses
/// once per level, and this bounds its stack use. (`serde_json`'s parser stops at 128 levels, so
/// no parsed value comes near it.)
pub const MAX_SERIALIZED_DEPTH: usize = 256;

/// The canonical JSON text of `value`, checked against `limits`. Any depth gives an error, never
/// a stack overflow.
///
/// # The form
///
/// The workspace uses the JSON Canonicalization Scheme of RFC 8785 (JCS), because it is a
/// published, widely implemented scheme whose number rules match what JavaScript clients (most
/// MCP clients) do to arguments anyway. The bytes are those `serde_json_canonicalizer` writes:
///
/// - no insignificant whitespace;
/// - object members sorted by their keys compared as UTF-16 code units (as RFC 8785 says; this
///   differs from byte order only for keys that mix characters above U+FFFF with characters in
///   U+E000..U+FFFF);
/// - strings written with the shortest escapes: `\"`, `\\`, `\b`, `\t`, `\n`, `\f`, `\r`,
///   `\u00xx` (lowercase hex) for the other control characters, everything else as UTF-8;
/// - every number is read as an IEEE-754 double and written the way ECMAScript's
///   `Number.prototype.toString` writes it (shortest digits that read back to the same double,
///   exponent form below 1e-6 and from 1e21 up, `-0` written as `0`).
///
/// Strings cannot hold lone surrogates (`serde_json` refuses `"\ud800"` when it parses), and a
/// [`Map`] cannot hold a key twice (`serde_json` keeps the last), so neither reaches the form.
///
/// ## `1` and `1.0` are the same argument
///
/// Both are written `1` (and so is `1e0`, `10e-1` and `-0` is `0`). JSON itself (RFC 8259) gives
/// no meaning to the spelling of a number, JavaScript cannot tell them apart
/// (`JSON.stringify(1.0) === "1"`), and a client that passes arguments through a JavaScript
/// runtime would otherwise turn an approved `1.0` into a refused `1`. A person approving a change
/// sees the number, not its spelling. A tool that gives `1` and `1.0` different meanings must not
/// rely on the digest to tell them apart (it still receives the exact arguments that were captured).
///
/// ## Refused numbers
///
/// An integer that has no exact double (for example `9007199254740993`, which is 2^53 + 1) is
/// refused with [`ArgsError::Unrepresentable`]: canonicalising it would give it the digest of a
/// *different* integer, so a token approved for one value would spend for another. (RFC 8785
/// leaves such numbers to the application, and `serde_json_canonicalizer` rounds them, so this
/// check runs before it.) Send such values as strings. The workspace builds `serde_json` without
/// its `arbitrary_precision` feature, so a number with a fraction or an exponent, or an integer
/// beyond the 64-bit range, has already been read as a double when the arguments were parsed (the
/// tool sees that same double), and is written as that double. `serde_json` is built with
/// `float_roundtrip`, so that double is the one nearest the text.
///
/// # Limits
///
/// [`ArgLimits::max_bytes`] bounds the length of the canonical form in bytes;
/// [`ArgLimits::max_depth`] bounds nesting, counting containers: `{}` and `{"a":1}` have depth 1,
/// `{"a":[1]}` depth 2. A scalar adds no depth. Depth is checked (without recursion) before the
/// form is written, and is never more than [`MAX_SERIALIZED_DEPTH`]; size is checked on the
/// written form.
///
/// # A hazard for callers
///
/// A value nested 100,000 deep yields [`ArgsError::TooDeep`], never a stack overflow.
/// `serde_json::Value` itself is *not* so careful: its `Drop`, `Clone`, `PartialEq`, `Debug` and
/// `Serialize` all recurse. Values parsed by `serde_json` are safe (its parser stops at depth 128
/// unless the `unbounded_depth` feature is on), but a caller that builds very deep values by
/// hand, or parses with `unbounded_depth`, can overflow the stack merely by dropping one. Check
/// depth with this module before doing anything else with untrusted values, and dismantle a
/// pathological value iteratively if you must drop it.
/// [`CapturedArgs::capture`](crate::CapturedArgs::capture) checks the limits before it clones
/// anything.
///
/// # Example
///
/// ```
/// use mcp_write_guard_core::canonical::{canonical_json, ArgLimits};
/// use serde_json::json;
///
/// let v = json!({"b": [1.0, 2, "x"], "a": {"z": null, "y": true}});
/// assert_eq!(
///     canonical_json(&v, &ArgLimits::default()).unwrap(),
///     r#"{"a":{"y":true,"z":null},"b":[1,2,"x"]}"#
/// );
/// ```
pub fn canonical_json(value: &Value, limits: &ArgLimits) -> Result<String, ArgsError> {
    check(vec![(value, 0)], limits)?;
    let out = jcs(value)?;
    within(out.len(), limits)?;
    // serde_json writes whole UTF-8 strings and ASCII only.
    String::from_utf8(out).map_err(|e| ArgsError::Unrepresentable(e.to_string()))
}

/// The RFC 8785 bytes of a value that passed [`check`].
fn jcs(value: &impl Serialize) -> Result<Vec<u8>, ArgsError> {
    serde_json_canonicalizer::to_vec(value).map_err(|e| ArgsError::Unrepresentable(e.to_string()))
}

/// An argument object without its top-level member `skip`, as the serializer sees it: the
/// digest of a token-gated call's arguments without the token, with no copy of the object.
struct Without<'a> {
    args: &'a Map<String, Value>,
    skip: &'a str,
}

impl Serialize for Without<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self
            .args
            .iter()
            .filter(|(key, _)| key.as_str() != self.skip)
        {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// The SHA-256 digest of the canonical form of an argument object, leaving out the top-level
/// member `skip` if given, and the length of that form: what
/// [`digest_object_and_without`] must agree with.
#[cfg(test)]
pub(crate) fn digest_object(
    args: &Map<String, Value>,
    skip: Option<&str>,
    limits: &ArgLimits,
) -> Result<(ArgsDigest, usize), ArgsError> {
    let mut kept = args.clone();
    if let Some(skip) = skip {
        kept.remove(skip);
    }
    let kept = Value::Object(kept);
    check(vec![(&kept, 0)], limits)?;
    let out = jcs(&kept)?;
    within(out.len(), limits)?;
    Ok((sha256(&[&out]), out.len()))
}

/// What two calls of [`digest_object`] give: the digest and length of the whole object's
/// canonical form, and the digest of the form without the top-level member `skip` (the same
/// digest when there is no such member). The size limit applies to the whole form.
pub(crate) fn digest_object_and_without(
    args: &Map<String, Value>,
    skip: &str,
    limits: &ArgLimits,
) -> Result<(ArgsDigest, ArgsDigest, usize), ArgsError> {
    let depth = enter(0, limits)?;
    let mut stack = Vec::with_capacity(64);
    stack.extend(args.values().map(|v| (v, depth)));
    check(stack, limits)?;
    let out = jcs(args)?;
    within(out.len(), limits)?;
    let all = sha256(&[&out]);
    let without = if args.contains_key(skip) {
        sha256(&[&jcs(&Without { args, skip })?])
    } else {
        all
    };
    Ok((all, without, out.len()))
}

/// The SHA-256 bytes of the canonical form of `whole`, an object (depth 1) whose members are
/// strings, the JSON objects `maps` (each a container at depth 2) and the JSON `values`: the
/// checks [`canonical_json`] makes, over each part where it lies, then the same serializer over
/// the whole, with no copy of any part. (A tool's definition: its name and texts, its schemas,
/// its annotations.)
pub(crate) fn digest_members(
    whole: &impl Serialize,
    maps: &[&Map<String, Value>],
    values: &[&Value],
    limits: &ArgLimits,
) -> Result<[u8; 32], ArgsError> {
    let depth = enter(0, limits)?;
    let mut stack = Vec::with_capacity(64);
    for map in maps {
        let inner = enter(depth, limits)?;
        stack.extend(map.values().map(|v| (v, inner)));
    }
    stack.extend(values.iter().map(|v| (*v, depth)));
    check(stack, limits)?;
    let out = jcs(whole)?;
    within(out.len(), limits)?;
    Ok(*sha256(&[&out]).as_bytes())
}

fn sha256(parts: &[&[u8]]) -> ArgsDigest {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    ArgsDigest::from_bytes(hasher.finalize().into())
}

/// Refuses a canonical form of `len` bytes longer than the limit.
fn within(len: usize, limits: &ArgLimits) -> Result<(), ArgsError> {
    if len > limits.max_bytes {
        Err(ArgsError::TooLarge {
            limit: limits.max_bytes,
            actual: len,
        })
    } else {
        Ok(())
    }
}

/// Checks, without recursion, what the serializer does not: the nesting of each `(value, depth
/// of its container)` and integers without an exact double.
fn check(mut stack: Vec<(&Value, usize)>, limits: &ArgLimits) -> Result<(), ArgsError> {
    while let Some((value, depth)) = stack.pop() {
        match value {
            Value::Array(items) => {
                let depth = enter(depth, limits)?;
                stack.extend(items.iter().map(|v| (v, depth)));
            }
            Value::Object(map) => {
                let depth = enter(depth, limits)?;
                stack.extend(map.values().map(|v| (v, depth)));
            }
            Value::Number(n) => exact_number(n)?,
            Value::Null | Value::Bool(_) | Value::String(_) => {}
        }
    }
    Ok(())
}

/// The depth of a container inside one at `depth`, if allowed.
fn enter(depth: usize, limits: &ArgLimits) -> Result<usize, ArgsError> {
    let limit = limits.max_depth.min(MAX_SERIALIZED_DEPTH);
    if depth < limit {
        Ok(depth + 1)
    } else {
        Err(ArgsError::TooDeep { limit })
    }
}

/// Refuses an integer that no double equals: the form would write its neighbour.
fn exact_number(n: &Number) -> Result<(), ArgsError> {
    let exact = if let Some(i) = n.as_i64() {
        exact_integer(i128::from(i))
    } else if let Some(u) = n.as_u64() {
        exact_integer(i128::from(u))
    } else {
        n.as_f64()
            .is_some_and(|f| f.is_finite() && (!*ARBITRARY_PRECISION || written_as(n, f)))
    };
    if exact {
        Ok(())
    } else {
        Err(ArgsError::Unrepresentable(format!(
            "number {n} has no exact IEEE-754 double; send it as a string"
        )))
    }
}

/// Whether serde_json keeps numbers as their text (its `arbitrary_precision` feature, which any
/// crate in the build can turn on). Then a number reaches the tool exactly as it was sent, and
/// two numbers with the same nearest double (`100000000000000000000` and
/// `100000000000000000001`, `0.1` and `0.1000000000000000000001`) are different arguments that
/// the canonical form would give one digest.
static ARBITRARY_PRECISION: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
    // Without it, `1.00` is read as the double 1, which is written `1.0`.
    serde_json::from_str::<Number>("1.00").is_ok_and(|n| n.to_string() != "1.0")
});

/// Whether `n` is written the way serde_json writes the double `f`: with
/// `arbitrary_precision`, the only spelling accepted for a number that is not a 64-bit integer,
/// so that no other text with the same double (and another value to the tool) shares its digest.
fn written_as(n: &Number, f: f64) -> bool {
    Number::from_f64(f).is_some_and(|m| m.to_string() == n.to_string())
}

/// Whether some double equals `i`.
fn exact_integer(i: i128) -> bool {
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    let f = i as f64;
    // Every integral double below 2^64 in magnitude converts to i128 exactly.
    #[allow(clippy::cast_possible_truncation)]
    let back = f as i128;
    back == i
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canon(v: &Value) -> String {
        canonical_json(v, &ArgLimits::default()).unwrap()
    }

    fn num(f: f64) -> String {
        canon(&Value::Number(Number::from_f64(f).unwrap()))
    }

    /// Objects whose keys serde_json's map holds out of UTF-16 order ("\u{ffff}" sorts before
    /// "\u{10000}" by bytes, after it by UTF-16 code units), each nested in the first member of
    /// the one above, 63 deep. Each member is written once: a writer that wrote an object and
    /// wrote it again once it found the order wrong would write the innermost one 2^63 times,
    /// and this test would not end (a watchdog fails it after a minute instead).
    #[test]
    fn objects_out_of_order_nested_deep_are_each_written_once() {
        let mut value = json!(0);
        for _ in 0..63 {
            value = json!({"\u{ffff}": value, "\u{10000}": 0});
        }
        let (done, finished) = std::sync::mpsc::channel();
        let input = value.clone();
        std::thread::spawn(move || {
            let _ = done.send(canonical_json(&input, &ArgLimits::default()));
        });
        let written = finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the canonical form of 63 nested objects was not written within a minute");
        let expected = serde_json_canonicalizer::to_string(&value).unwrap();
        assert_eq!(written.unwrap(), expected);
        assert!(expected.starts_with("{\"\u{10000}\":0,\"\u{ffff}\":{"));
        let (all, without, len) = digest_object_and_without(
            value.as_object().unwrap(),
            "\u{10000}",
            &ArgLimits::default(),
        )
        .unwrap();
        assert_eq!(len, expected.len());
        assert_ne!(all, without);
    }

    #[test]
    fn rfc8785_number_vectors() {
        // Appendix B of RFC 8785.
        let vectors: &[(u64, &str)] = &[
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for &(bits, want) in vectors {
            assert_eq!(num(f64::from_bits(bits)), want, "{bits:#018x}");
        }
    }

    #[test]
    fn numbers_match_an_ecmascript_engine() {
        // Random doubles (all exponents) and everyday values, written by Node.js `String(x)`.
        let data = include_str!("testdata/ecmascript_numbers.txt");
        let mut checked = 0;
        for line in data.lines().filter(|l| !l.starts_with('#')) {
            let (bits, want) = line.split_once(' ').unwrap();
            let f = f64::from_bits(u64::from_str_radix(bits, 16).unwrap());
            assert_eq!(num(f), want, "{bits}");
            checked += 1;
        }
        assert!(checked > 2000);
    }

    #[test]
    fn one_and_one_point_zero_are_the_same_argument() {
        let a: Value = serde_json::from_str(r#"{"qty":1}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"qty":1.0}"#).unwrap();
        let c: Value = serde_json::from_str(r#"{"qty":1e0}"#).unwrap();
        let d: Value = serde_json::from_str(r#"{"qty":10e-1}"#).unwrap();
        assert_eq!(canon(&a), r#"{"qty":1}"#);
        for v in [&b, &c, &d] {
            assert_eq!(canon(v), canon(&a));
        }
        let z: Value = serde_json::from_str(r#"{"x":-0.0}"#).unwrap();
        assert_eq!(canon(&z), r#"{"x":0}"#);
        // But 1 and 1.5, or 1 and "1", are different.
        assert_ne!(canon(&json!({"qty": 1.5})), canon(&a));
        assert_ne!(canon(&json!({"qty": "1"})), canon(&a));
    }

    #[test]
    fn what_the_parser_settles_before_the_form() {
        // Lone surrogates never reach a `Value`: serde_json refuses them.
        for text in [r#""\ud800""#, r#""\udc00x""#, r#""\ud800\u0041""#] {
            assert!(serde_json::from_str::<Value>(text).is_err(), "{text}");
        }
        // A repeated key keeps its last value, which is what the tool receives and what is bound.
        let dup: Value = serde_json::from_str(r#"{"a":1,"a":2}"#).unwrap();
        assert_eq!(canon(&dup), r#"{"a":2}"#);
        // An integer beyond the 64-bit range is read as a double, and written as that double.
        let big: Value = serde_json::from_str("123456789012345678901234567891").unwrap();
        assert!(big.is_f64());
        assert_eq!(canon(&big), "1.2345678901234568e+29");
    }

    #[test]
    fn integers_use_the_same_form_as_doubles() {
        assert_eq!(canon(&json!(100)), "100");
        assert_eq!(canon(&json!(-7)), "-7");
        assert_eq!(
            canon(&json!(1u64 << 60)),
            canon(&json!((1u64 << 60) as f64))
        );
        assert_eq!(canon(&json!(9007199254740992u64)), "9007199254740992");
        assert_eq!(
            canon(&json!(100000000000000000000.0)),
            "100000000000000000000"
        );
        assert_eq!(canon(&json!(1e21)), "1e+21");
        assert_eq!(canon(&json!(0.5)), "0.5");
        assert_eq!(canon(&json!(1e-7)), "1e-7");
    }

    #[test]
    fn inexact_integers_are_refused() {
        let limits = ArgLimits::default();
        for v in [
            json!(9007199254740993u64),
            json!(-9007199254740993i64),
            json!(u64::MAX),
            json!(i64::MAX),
        ] {
            assert!(
                matches!(
                    canonical_json(&v, &limits),
                    Err(ArgsError::Unrepresentable(_))
                ),
                "{v}"
            );
        }
        assert!(canonical_json(&json!(i64::MIN), &limits).is_ok()); // -2^63 is a double
    }

    #[test]
    fn strings_use_shortest_escapes() {
        let v = json!("a\"b\\c\u{08}\t\n\u{0c}\r\u{01}\u{1f}\u{7f}é€😀\u{2028}/");
        assert_eq!(
            canon(&v),
            "\"a\\\"b\\\\c\\b\\t\\n\\f\\r\\u0001\\u001f\u{7f}é€😀\u{2028}/\""
        );
    }

    #[test]
    fn every_character_to_escape_is_escaped_however_many_a_string_holds() {
        // Whether a string needs escaping is decided over all its bytes at once: two, three or
        // four such characters, in any order and with text between them, are each escaped.
        let specials = ['"', '\\', '\n', '\u{01}', '\u{1f}'];
        let mut texts = Vec::new();
        for a in specials {
            for b in specials {
                texts.push(format!("{a}{b}"));
                texts.push(format!("x{a}y{b}z"));
                for c in specials {
                    texts.push(format!("{a}{b}{c}"));
                    texts.push(format!("{a}{b}{c}{a}"));
                }
            }
        }
        for text in texts {
            let oracle = serde_json_canonicalizer::to_string(&json!(text)).unwrap();
            assert_eq!(canon(&json!(text)), oracle, "{text:?}");
        }
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // U+1F600 is the surrogate pair D83D DE00 in UTF-16, so it sorts before U+FF61, though
        // its UTF-8 bytes (F0 …) sort after those of U+FF61 (EF …).
        let v = json!({"\u{ff61}": 2, "😀": 1, "b": 3, "a": 4, "": 5});
        assert_eq!(
            canon(&v),
            "{\"\":5,\"a\":4,\"b\":3,\"😀\":1,\"\u{ff61}\":2}"
        );
        assert!("\u{ff61}" < "😀"); // byte order would have put it first
    }

    #[test]
    fn no_whitespace_and_nested_sorting() {
        let v = json!({"z": [ {"b": 1, "a": [true, false, null]} ], "y": {}});
        assert_eq!(canon(&v), r#"{"y":{},"z":[{"a":[true,false,null],"b":1}]}"#);
        assert_eq!(canon(&json!([])), "[]");
    }

    #[test]
    fn depth_counts_containers() {
        let limits = ArgLimits::new(DEFAULT_MAX_BYTES, 2);
        assert!(canonical_json(&json!({"a": [1]}), &limits).is_ok());
        assert_eq!(
            canonical_json(&json!({"a": [[1]]}), &limits),
            Err(ArgsError::TooDeep { limit: 2 })
        );
        assert_eq!(
            canonical_json(&json!({"a": {"b": {}}}), &limits),
            Err(ArgsError::TooDeep { limit: 2 })
        );
        let zero = ArgLimits::new(DEFAULT_MAX_BYTES, 0);
        assert_eq!(
            canonical_json(&json!({}), &zero),
            Err(ArgsError::TooDeep { limit: 0 })
        );
        assert_eq!(canonical_json(&json!(1), &zero).unwrap(), "1");
    }

    #[test]
    fn default_depth_limit_is_64() {
        let mut v = json!(1);
        for _ in 0..63 {
            v = json!([v]);
        }
        let v = json!({ "a": v }); // 64 containers
        assert!(canonical_json(&v, &ArgLimits::default()).is_ok());
        let v = json!({ "a": [v] }); // 66
        assert_eq!(
            canonical_json(&v, &ArgLimits::default()),
            Err(ArgsError::TooDeep { limit: 64 })
        );
    }

    #[test]
    fn size_limit_counts_canonical_bytes() {
        let v = json!({"a": "xxxx"}); // {"a":"xxxx"} = 12 bytes
        assert_eq!(canon(&v).len(), 12);
        assert!(canonical_json(&v, &ArgLimits::new(12, 64)).is_ok());
        match canonical_json(&v, &ArgLimits::new(11, 64)) {
            Err(ArgsError::TooLarge { limit: 11, actual }) => assert!(actual > 11),
            other => panic!("{other:?}"),
        }
        // Whitespace in the input does not count: only the canonical form does.
        let spaced: Value = serde_json::from_str("{ \"a\" :   \"xxxx\"   }").unwrap();
        assert!(canonical_json(&spaced, &ArgLimits::new(12, 64)).is_ok());
    }

    #[test]
    fn default_size_limit_is_one_mebibyte() {
        // In absolute terms, not only relative to the constant: 1 MiB is 1,048,576 bytes, so a
        // 1,000,000-character argument fits and 1,048,577 bytes of canonical form do not.
        assert_eq!(DEFAULT_MAX_BYTES, 1_048_576);
        let million = json!({ "a": "x".repeat(1_000_000) });
        assert!(canonical_json(&million, &ArgLimits::default()).is_ok());
        let exact = "x".repeat(DEFAULT_MAX_BYTES - 8); // {"a":"…"} adds 8 bytes
        let v = json!({ "a": exact });
        assert_eq!(canon(&v).len(), DEFAULT_MAX_BYTES);
        let v = json!({ "a": format!("{exact}x") });
        assert!(matches!(
            canonical_json(&v, &ArgLimits::default()),
            Err(ArgsError::TooLarge { limit: DEFAULT_MAX_BYTES, actual }) if actual == DEFAULT_MAX_BYTES + 1
        ));
    }

    /// Drops a deep value without recursing: `serde_json::Value`'s own `Drop` recurses.
    fn dismantle(mut v: Value) {
        let mut stack = Vec::new();
        loop {
            match &mut v {
                Value::Array(items) => stack.append(items),
                Value::Object(map) => {
                    let keys: Vec<String> = map.keys().cloned().collect();
                    for k in keys {
                        if let Some(child) = map.remove(&k) {
                            stack.push(child);
                        }
                    }
                }
                _ => {}
            }
            drop(v);
            match stack.pop() {
                Some(next) => v = next,
                None => break,
            }
        }
    }

    fn deeply_nested(depth: usize, object: bool) -> Value {
        let mut v = json!(0);
        for _ in 0..depth {
            v = if object {
                let mut m = Map::new();
                m.insert("k".into(), v);
                Value::Object(m)
            } else {
                Value::Array(vec![v])
            };
        }
        v
    }

    /// Runs `f` on a thread with a stack of `bytes`.
    fn on_stack(bytes: usize, f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(bytes)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn hundred_thousand_nested_arrays_is_an_error_not_an_overflow() {
        // A small stack proves that the depth check does not use the stack per level.
        on_stack(256 * 1024, || {
            let unlimited = ArgLimits::new(usize::MAX, usize::MAX);
            for object in [false, true] {
                let deep = deeply_nested(100_000, object);
                assert_eq!(
                    canonical_json(&deep, &ArgLimits::default()),
                    Err(ArgsError::TooDeep { limit: 64 })
                );
                // Without a depth limit the serializer's own bound still applies.
                assert_eq!(
                    canonical_json(&deep, &unlimited),
                    Err(ArgsError::TooDeep {
                        limit: MAX_SERIALIZED_DEPTH
                    })
                );
                dismantle(deep);
            }
        });
    }

    #[test]
    fn the_deepest_value_allowed_is_written_on_a_small_stack() {
        // The serializer recurses; at MAX_SERIALIZED_DEPTH it must fit well inside the 2 MiB a
        // tokio worker thread has.
        on_stack(512 * 1024, || {
            let unlimited = ArgLimits::new(usize::MAX, usize::MAX);
            for object in [false, true] {
                let deepest = deeply_nested(MAX_SERIALIZED_DEPTH, object);
                let text = canonical_json(&deepest, &unlimited).unwrap();
                let per_level = if object {
                    r#"{"k":}"#.len()
                } else {
                    "[]".len()
                };
                assert_eq!(text.len(), MAX_SERIALIZED_DEPTH * per_level + 1);
                let too_deep = json!([deepest]);
                assert_eq!(
                    canonical_json(&too_deep, &unlimited),
                    Err(ArgsError::TooDeep {
                        limit: MAX_SERIALIZED_DEPTH
                    })
                );
                dismantle(too_deep);
            }
        });
    }

    #[test]
    fn skip_leaves_out_a_top_level_member_only() {
        let m = json!({"confirmationToken": "t", "a": {"confirmationToken": "u"}});
        let Value::Object(m) = m else { unreachable!() };
        let limits = ArgLimits::default();
        let (with, _) = digest_object(&m, None, &limits).unwrap();
        let (without, len) = digest_object(&m, Some("confirmationToken"), &limits).unwrap();
        assert_ne!(with, without);
        assert_eq!(len, r#"{"a":{"confirmationToken":"u"}}"#.len());
    }

    mod props {
        //! Properties of the form over arbitrary values: the digest without a member, and a form
        //! that reads back to itself.
        use super::*;
        use proptest::prelude::*;

        fn arb_number() -> impl Strategy<Value = Value> {
            prop_oneof![
                (-(1i64 << 53)..=(1i64 << 53)).prop_map(|i| json!(i)),
                // Exact integers beyond 2^53 (multiples of a power of two), both signs.
                (0u32..11, -(1i64 << 52)..(1i64 << 52)).prop_map(|(shift, i)| json!(i << shift)),
                (0u32..12, 0u64..(1u64 << 52)).prop_map(|(shift, u)| json!(u << shift)),
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(|f| json!(f)),
                prop_oneof![Just(0.0), Just(-0.0), Just(1e21), Just(1e-7), Just(5e-324)]
                    .prop_map(|f| json!(f)),
            ]
        }

        /// Keys and strings from every region that matters: ASCII, control characters, the
        /// characters that need escapes, U+E000..=U+FFFF and characters above U+FFFF.
        fn arb_text() -> impl Strategy<Value = String> {
            prop::collection::vec(
                prop_oneof![
                    proptest::char::range('\u{0}', '\u{7f}'),
                    proptest::char::range('\u{80}', '\u{d7ff}'),
                    proptest::char::range('\u{e000}', '\u{ffff}'),
                    proptest::char::range('\u{10000}', '\u{10ffff}'),
                ],
                0..8,
            )
            .prop_map(|chars| chars.into_iter().collect())
        }

        fn arb_value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                arb_number(),
                arb_text().prop_map(Value::String),
            ];
            leaf.prop_recursive(5, 64, 8, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                    prop::collection::btree_map(arb_text(), inner, 0..6)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn the_view_without_a_member_is_the_object_without_it(
                members in prop::collection::btree_map(arb_text(), arb_value(), 0..6),
                pick in any::<prop::sample::Index>(),
                absent in any::<bool>(),
            ) {
                let map: Map<String, Value> = members.into_iter().collect();
                let limits = ArgLimits::new(usize::MAX, usize::MAX);
                // The key left out: one of the members (first, last, only, ...) or none of them.
                let keys: Vec<&String> = map.keys().collect();
                let skip = match keys.is_empty() || absent {
                    true => "\u{1}not a member".to_owned(),
                    false => keys[pick.index(keys.len())].clone(),
                };
                let (all, without, len) = digest_object_and_without(&map, &skip, &limits).unwrap();
                prop_assert_eq!((all, len), digest_object(&map, None, &limits).unwrap());
                prop_assert_eq!(without, digest_object(&map, Some(&skip), &limits).unwrap().0);
            }

            #[test]
            fn the_form_is_a_fixed_point(v in arb_value()) {
                // Every value that passes the checks has a form, and the form read back as JSON
                // has the same form: a client that sends the canonical text gets its digest.
                let form = canonical_json(&v, &ArgLimits::new(usize::MAX, usize::MAX)).unwrap();
                let back: Value = serde_json::from_str(&form).unwrap();
                prop_assert_eq!(serde_json_canonicalizer::to_string(&back).unwrap(), form);
            }
        }
    }
}
