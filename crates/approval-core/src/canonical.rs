//! The canonical JSON form of tool arguments, computed without recursion (see [`canonical_json`]).

use std::cmp::Ordering;
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};
use sha2::{Digest as _, Sha256};

use crate::ids::ArgsDigest;

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
    /// The deepest nesting of containers accepted (default 64; the argument object itself is 1).
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
        /// How many canonical bytes had been produced when the limit was crossed: always more
        /// than `limit`, and a lower bound on the full size (work stops at the limit).
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

/// The canonical JSON text of `value`, checked against `limits`. Iterative: any depth gives an
/// error, never a stack overflow.
///
/// # The form
///
/// The workspace uses the JSON Canonicalization Scheme of RFC 8785 (JCS), because it is a
/// published, widely implemented scheme whose number rules match what JavaScript clients (most
/// MCP clients) do to arguments anyway:
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
/// *different* integer, so a token approved for one value would spend for another. Send such
/// values as strings. (The workspace builds `serde_json` without its `arbitrary_precision`
/// feature, so a non-integer number has already been read as a double when the arguments were
/// parsed, and the tool sees that same double. Note that `serde_json`'s default float parser is
/// fast rather than correctly rounded: a few decimal texts read as the neighbour of the nearest
/// double. That does not weaken the binding, because the same text always gives the same double,
/// but it means the canonical text of such a number, parsed again by `serde_json`, can give a
/// different digest; `serde_json`'s `float_roundtrip` feature removes the difference.)
///
/// # Limits
///
/// [`ArgLimits::max_bytes`] bounds the length of the canonical form in bytes;
/// [`ArgLimits::max_depth`] bounds nesting, counting containers: `{}` and `{"a":1}` have depth 1,
/// `{"a":[1]}` depth 2. A scalar adds no depth.
///
/// # No recursion, and a hazard for callers
///
/// [`canonical_json`] walks the value with an explicit stack, so a value nested 100,000 deep
/// yields [`ArgsError::TooDeep`], never a stack overflow. `serde_json::Value` itself is *not* so
/// careful: its `Drop`, `Clone`, `PartialEq`, `Debug` and `Serialize` all recurse. Values parsed
/// by `serde_json` are safe (its parser stops at depth 128 unless the `unbounded_depth` feature is
/// on), but a caller that builds very deep values by hand, or parses with `unbounded_depth`, can
/// overflow the stack merely by dropping one. Check depth with this module before doing anything
/// else with untrusted values, and dismantle a pathological value iteratively if you must drop it.
/// [`CapturedArgs::capture`](crate::CapturedArgs::capture) checks the limits before it clones
/// anything.
///
/// # Example
///
/// ```
/// use approval_core::{canonical_json, ArgLimits};
/// use serde_json::json;
///
/// let v = json!({"b": [1.0, 2, "x"], "a": {"z": null, "y": true}});
/// assert_eq!(
///     canonical_json(&v, &ArgLimits::default()).unwrap(),
///     r#"{"a":{"y":true,"z":null},"b":[1,2,"x"]}"#
/// );
/// ```
pub fn canonical_json(value: &Value, limits: &ArgLimits) -> Result<String, ArgsError> {
    let mut out = String::new();
    write_canonical(value, None, limits, &mut out)?;
    Ok(out)
}

/// The SHA-256 digest of the canonical form of an argument object, leaving out the top-level
/// member `skip` if given.
pub(crate) fn digest_object(
    args: &Map<String, Value>,
    skip: Option<&str>,
    limits: &ArgLimits,
) -> Result<(ArgsDigest, usize), ArgsError> {
    let mut out = String::new();
    write_canonical_object(args, skip, limits, &mut out)?;
    let digest: [u8; 32] = Sha256::digest(out.as_bytes()).into();
    Ok((ArgsDigest::from_bytes(digest), out.len()))
}

enum Frame<'a> {
    Array {
        items: std::slice::Iter<'a, Value>,
        first: bool,
    },
    Object {
        members: std::vec::IntoIter<(&'a String, &'a Value)>,
        first: bool,
    },
}

enum Step<'a> {
    Value {
        key: Option<&'a str>,
        value: &'a Value,
        first: bool,
    },
    Close(char),
}

fn write_canonical(
    value: &Value,
    skip: Option<&str>,
    limits: &ArgLimits,
    out: &mut String,
) -> Result<(), ArgsError> {
    let mut stack: Vec<Frame<'_>> = Vec::new();
    open(value, skip, &mut stack, limits, out)?;
    walk(&mut stack, limits, out)
}

fn write_canonical_object(
    args: &Map<String, Value>,
    skip: Option<&str>,
    limits: &ArgLimits,
    out: &mut String,
) -> Result<(), ArgsError> {
    let mut stack: Vec<Frame<'_>> = Vec::new();
    open_object(args, skip, &mut stack, limits, out)?;
    walk(&mut stack, limits, out)
}

fn walk<'a>(
    stack: &mut Vec<Frame<'a>>,
    limits: &ArgLimits,
    out: &mut String,
) -> Result<(), ArgsError> {
    loop {
        check_size(out, limits)?;
        let step = match stack.last_mut() {
            None => return Ok(()),
            Some(Frame::Array { items, first }) => match items.next() {
                Some(value) => Step::Value {
                    key: None,
                    value,
                    first: std::mem::replace(first, false),
                },
                None => Step::Close(']'),
            },
            Some(Frame::Object { members, first }) => match members.next() {
                Some((key, value)) => Step::Value {
                    key: Some(key.as_str()),
                    value,
                    first: std::mem::replace(first, false),
                },
                None => Step::Close('}'),
            },
        };
        match step {
            Step::Close(c) => {
                out.push(c);
                stack.pop();
            }
            Step::Value { key, value, first } => {
                if !first {
                    out.push(',');
                }
                if let Some(key) = key {
                    write_string(key, out);
                    out.push(':');
                }
                open(value, None, stack, limits, out)?;
            }
        }
    }
}

fn check_size(out: &str, limits: &ArgLimits) -> Result<(), ArgsError> {
    if out.len() > limits.max_bytes {
        Err(ArgsError::TooLarge {
            limit: limits.max_bytes,
            actual: out.len(),
        })
    } else {
        Ok(())
    }
}

/// Writes a scalar, or the opening of a container (pushing its frame).
fn open<'a>(
    value: &'a Value,
    skip: Option<&str>,
    stack: &mut Vec<Frame<'a>>,
    limits: &ArgLimits,
    out: &mut String,
) -> Result<(), ArgsError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(n, out)?,
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            enter(stack, limits)?;
            out.push('[');
            stack.push(Frame::Array {
                items: items.iter(),
                first: true,
            });
        }
        Value::Object(map) => open_object(map, skip, stack, limits, out)?,
    }
    Ok(())
}

fn open_object<'a>(
    map: &'a Map<String, Value>,
    skip: Option<&str>,
    stack: &mut Vec<Frame<'a>>,
    limits: &ArgLimits,
    out: &mut String,
) -> Result<(), ArgsError> {
    enter(stack, limits)?;
    let mut members: Vec<(&'a String, &'a Value)> = map
        .iter()
        .filter(|(k, _)| Some(k.as_str()) != skip)
        .collect();
    members.sort_by(|(a, _), (b, _)| utf16_cmp(a, b));
    out.push('{');
    stack.push(Frame::Object {
        members: members.into_iter(),
        first: true,
    });
    Ok(())
}

fn enter(stack: &[Frame<'_>], limits: &ArgLimits) -> Result<(), ArgsError> {
    if stack.len() >= limits.max_depth {
        Err(ArgsError::TooDeep {
            limit: limits.max_depth,
        })
    } else {
        Ok(())
    }
}

fn utf16_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{0c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_number(n: &Number, out: &mut String) -> Result<(), ArgsError> {
    let f = if let Some(i) = n.as_i64() {
        exact_integer(i128::from(i))?
    } else if let Some(u) = n.as_u64() {
        exact_integer(i128::from(u))?
    } else if let Some(f) = n.as_f64() {
        f
    } else {
        return Err(ArgsError::Unrepresentable(format!("number {n}")));
    };
    if !f.is_finite() {
        return Err(ArgsError::Unrepresentable(format!("number {n}")));
    }
    write_ecmascript_number(f, out);
    Ok(())
}

/// The double equal to `i`, if there is one.
fn exact_integer(i: i128) -> Result<f64, ArgsError> {
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    let f = i as f64;
    // Every integral double below 2^64 in magnitude converts to i128 exactly.
    #[allow(clippy::cast_possible_truncation)]
    let back = f as i128;
    if back == i {
        Ok(f)
    } else {
        Err(ArgsError::Unrepresentable(format!(
            "integer {i} has no exact IEEE-754 double; send it as a string"
        )))
    }
}

/// ECMAScript `Number.prototype.toString` for a finite double (ECMA-262 Number::toString).
fn write_ecmascript_number(f: f64, out: &mut String) {
    if f == 0.0 {
        // Both +0 and -0.
        out.push('0');
        return;
    }
    if f < 0.0 {
        out.push('-');
    }
    let sci = shortest_scientific(f.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let k = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    // The value is 0.d1d2...dk × 10^n.
    let n = exponent + 1;
    if k <= n && n <= 21 {
        out.push_str(&digits);
        push_zeros(out, n - k);
    } else if 0 < n && n <= 21 {
        let split = usize::try_from(n).unwrap_or(0);
        let (int, frac) = digits.split_at(split.min(digits.len()));
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        push_zeros(out, -n);
        out.push_str(&digits);
    } else {
        let mut chars = digits.chars();
        if let Some(first) = chars.next() {
            out.push(first);
        }
        let rest = chars.as_str();
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        let _ = write!(out, "{}", (n - 1).abs());
    }
}

/// The shortest digits that read back to `f`, and of those the closest to `f`, ties to even
/// (ECMA-262 Number::toString step 5), in Rust's `d.ddde±x` form.
///
/// Rust's `{:e}` gives the shortest digit count and a closest candidate, but does not break an
/// exact tie towards the even digit (0x43143ff3c1cb0959 is exactly 1424953923781206.25: `{:e}`
/// gives …6.3, ECMAScript …6.2). Rust's fixed-precision formatting rounds the exact value to
/// nearest, ties to even, so re-format with that many digits and keep it if it reads back.
fn shortest_scientific(f: f64) -> String {
    let shortest = format!("{f:e}");
    let digits = shortest
        .split_once('e')
        .map_or(shortest.as_str(), |(m, _)| m)
        .chars()
        .filter(char::is_ascii_digit)
        .count();
    let nearest = format!("{:.*e}", digits.saturating_sub(1), f);
    if nearest.parse::<f64>() == Ok(f) {
        nearest
    } else {
        shortest
    }
}

fn push_zeros(out: &mut String, count: i64) {
    for _ in 0..count {
        out.push('0');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canon(v: &Value) -> String {
        canonical_json(v, &ArgLimits::default()).unwrap()
    }

    fn num(f: f64) -> String {
        let mut s = String::new();
        write_ecmascript_number(f, &mut s);
        s
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

    #[test]
    fn hundred_thousand_nested_arrays_is_an_error_not_an_overflow() {
        // Run on a small stack to prove that canonicalisation does not use the stack per level.
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let limits = ArgLimits::default();
                let deep = deeply_nested(100_000, false);
                assert_eq!(
                    canonical_json(&deep, &limits),
                    Err(ArgsError::TooDeep { limit: 64 })
                );
                // Even with no depth limit at all, the walk itself is iterative.
                let unlimited = ArgLimits::new(usize::MAX, usize::MAX);
                let text = canonical_json(&deep, &unlimited).unwrap();
                assert_eq!(text.len(), 200_001);
                dismantle(deep);

                let deep = deeply_nested(100_000, true);
                assert_eq!(
                    canonical_json(&deep, &limits),
                    Err(ArgsError::TooDeep { limit: 64 })
                );
                dismantle(deep);
            })
            .unwrap()
            .join()
            .unwrap();
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
}
