//! The canonical form against the RFC 8785 (JCS) test vectors (sources in `rfc8785/README.md`),
//! and pinned canonical forms and digests: a change of implementation must not change the digest
//! of any argument that was already approved.

use mcp_write_guard_core::{
    CapturedArgs,
    canonical::{ArgLimits, ArgsError, canonical_json},
    ids::ArgsDigest,
};
use serde_json::{Number, Value};
use sha2::{Digest as _, Sha256};

fn canon(v: &Value) -> Result<String, ArgsError> {
    canonical_json(v, &ArgLimits::default())
}

#[test]
fn reference_testdata_and_rfc_examples() {
    let files = [
        (
            "arrays",
            include_str!("rfc8785/input/arrays.json"),
            include_str!("rfc8785/output/arrays.json"),
        ),
        (
            "french",
            include_str!("rfc8785/input/french.json"),
            include_str!("rfc8785/output/french.json"),
        ),
        (
            "structures",
            include_str!("rfc8785/input/structures.json"),
            include_str!("rfc8785/output/structures.json"),
        ),
        (
            "unicode",
            include_str!("rfc8785/input/unicode.json"),
            include_str!("rfc8785/output/unicode.json"),
        ),
        (
            "values",
            include_str!("rfc8785/input/values.json"),
            include_str!("rfc8785/output/values.json"),
        ),
        (
            "weird",
            include_str!("rfc8785/input/weird.json"),
            include_str!("rfc8785/output/weird.json"),
        ),
        (
            "rfc-3.2.2",
            include_str!("rfc8785/input/rfc-3.2.2.json"),
            include_str!("rfc8785/output/rfc-3.2.2.json"),
        ),
        (
            "rfc-3.2.3",
            include_str!("rfc8785/input/rfc-3.2.3.json"),
            include_str!("rfc8785/output/rfc-3.2.3.json"),
        ),
    ];
    for (name, input, output) in files {
        let v: Value = serde_json::from_str(input).unwrap();
        assert_eq!(canon(&v).unwrap(), output, "{name}");
    }
}

#[test]
fn es6_number_vectors() {
    let data = include_str!("rfc8785/es6testfile10k.txt");
    // The SHA-256 that the reference repository lists for the first 10,000 lines.
    assert_eq!(
        ArgsDigest::from_bytes(Sha256::digest(data.as_bytes()).into()).to_hex(),
        "b9f7a8e75ef22a835685a52ccba7f7d6bdc99e34b010992cbc5864cd12be6892"
    );
    let mut checked = 0;
    for line in data.lines() {
        let (bits, want) = line.split_once(',').unwrap();
        let f = f64::from_bits(u64::from_str_radix(bits, 16).unwrap());
        let v = Value::Number(Number::from_f64(f).unwrap());
        assert_eq!(canon(&v).unwrap(), want, "{bits}");
        checked += 1;
    }
    assert_eq!(checked, 10_000);
}

/// Canonical forms and digests computed before the canonical writer was replaced by a library:
/// if this fails, tokens and approvals issued before the change no longer match.
#[test]
fn canonical_forms_and_digests_do_not_change() {
    // (arguments, canonical form, digest, digest without `confirmationToken`)
    let pinned: &[(&str, &str, &str, &str)] = &[
        (
            r#"{"name":"Blue mug","qty":3,"price":12.5,"tags":["kitchen","gift"],"meta":{"z":null,"a":true}}"#,
            r#"{"meta":{"a":true,"z":null},"name":"Blue mug","price":12.5,"qty":3,"tags":["kitchen","gift"]}"#,
            "0fc50ec7bab93be71f6f5bc0e9bb081a37d180cb1deb30a0bb1ff3893a74122d",
            "0fc50ec7bab93be71f6f5bc0e9bb081a37d180cb1deb30a0bb1ff3893a74122d",
        ),
        (
            r#"{"n":[0,-0.0,1.0,1e21,1e-7,0.000001,123456789012,9007199254740992,-9223372036854775808,5e-324,1.7976931348623157e308,333333333.33333329,1424953923781206.25]}"#,
            r#"{"n":[0,0,1,1e+21,1e-7,0.000001,123456789012,9007199254740992,-9223372036854776000,5e-324,1.7976931348623157e+308,333333333.3333333,1424953923781206.2]}"#,
            "635811b4d7e4413b382fbb407c8d2c35aaab5d6b6aefd78867199fc841c3343a",
            "635811b4d7e4413b382fbb407c8d2c35aaab5d6b6aefd78867199fc841c3343a",
        ),
        (
            r#"{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7,"\uff61":8,"":9}"#,
            "{\"\":9,\"\\r\":2,\"1\":4,\"\u{80}\":6,\"\u{f6}\":7,\"\u{20ac}\":1,\"\u{1f600}\":5,\"\u{fb33}\":3,\"\u{ff61}\":8}",
            "6e1a1103ccbe01949ba6166da5fce960fa08b2b67794e559695369389a2f5a15",
            "6e1a1103ccbe01949ba6166da5fce960fa08b2b67794e559695369389a2f5a15",
        ),
        (
            r#"{"s":"a\"b\\c\b\t\n\f\r\u0001\u001f\u007f\u2028\/é😀</script>"}"#,
            "{\"s\":\"a\\\"b\\\\c\\b\\t\\n\\f\\r\\u0001\\u001f\u{7f}\u{2028}/\u{e9}\u{1f600}</script>\"}",
            "4352ece79a708ac5853da36b6c11620fbcae83aedf8d86b69768089e652de078",
            "4352ece79a708ac5853da36b6c11620fbcae83aedf8d86b69768089e652de078",
        ),
        (
            r#"{"confirmationToken":"tok-1","sku":"A-1","stock":4}"#,
            r#"{"confirmationToken":"tok-1","sku":"A-1","stock":4}"#,
            "59183c038f8b7e9a2202db6a9c6f14b2f88593201e08a98169c3c0b22fb9ab50",
            "a1748dcf20dff58130949335ad7ee8c86f893f7c84c7eaa1a1f2a7f06fcc5635",
        ),
    ];
    for &(input, canonical, digest, token_digest) in pinned {
        let v: Value = serde_json::from_str(input).unwrap();
        let captured = CapturedArgs::capture_value(&v, &ArgLimits::default()).unwrap();
        assert_eq!(canon(&v).unwrap(), canonical, "{input}");
        assert_eq!(captured.digest().to_hex(), digest, "{input}");
        assert_eq!(captured.token_digest().to_hex(), token_digest, "{input}");
        assert_eq!(captured.canonical_len(), canonical.len());
    }
}

mod reads_back {
    use super::*;
    use proptest::prelude::*;

    /// A number as serde_json holds it after parsing: a `u64`, an `i64` or a finite double.
    fn arb_number() -> impl Strategy<Value = Number> {
        prop_oneof![
            any::<u64>().prop_map(Number::from),
            any::<i64>().prop_map(Number::from),
            (-(1i64 << 53)..=(1i64 << 53)).prop_map(Number::from),
            any::<f64>().prop_filter_map("finite", Number::from_f64),
            (-1e6f64..1e6).prop_filter_map("finite", Number::from_f64),
            Just(-0.0f64).prop_filter_map("finite", Number::from_f64),
        ]
    }

    /// Strings heavy in what escaping and UTF-16 ordering treat specially.
    fn arb_string() -> impl Strategy<Value = String> {
        let special = prop_oneof![
            proptest::char::range('\u{0}', '\u{7f}'),
            proptest::char::range('\u{d7f0}', '\u{d7ff}'),
            proptest::char::range('\u{e000}', '\u{e00f}'),
            proptest::char::range('\u{fff0}', '\u{ffff}'),
            proptest::char::range('\u{10000}', '\u{1000f}'),
            proptest::char::range('\u{10fff0}', '\u{10ffff}'),
            any::<char>(),
        ];
        proptest::collection::vec(special, 0..6).prop_map(|c| c.into_iter().collect())
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            arb_number().prop_map(Value::Number),
            arb_string().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map(arb_string(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Whether `a` and `b` are the same JSON value once every number is read as a double (as
    /// RFC 8785 and JavaScript read them; `-0` equals `0`).
    fn same_as_doubles(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_as_doubles(a, b))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .all(|(k, a)| y.get(k).is_some_and(|b| same_as_doubles(a, b)))
            }
            _ => a == b,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// The canonical form parses back to the value it was written from (numbers as
        /// doubles). So two values with the same canonical form, and so the same digest, are the
        /// same value read as doubles: no two different arguments share a digest.
        #[test]
        fn the_canonical_form_reads_back_as_the_same_value(v in arb_value()) {
            let Ok(text) = canon(&v) else {
                // Only integers without an exact double are refused.
                return Ok(());
            };
            let back: Value = serde_json::from_str(&text).unwrap();
            prop_assert!(same_as_doubles(&v, &back), "{v} -> {text} -> {back}");
        }

    }
}
