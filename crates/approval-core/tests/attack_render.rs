//! Attacks on what a person reads (`render_value`, `render_key`) and on the argument digest.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use mcp_write_guard_core::{
    CapturedArgs,
    canonical::ArgLimits,
    render::{render_key, render_value},
};
use serde_json::{Value, json};
use unicode_general_category::{GeneralCategory, get_general_category};

/// A combining mark: drawn on top of (or around) the character before it.
fn is_mark(c: char) -> bool {
    matches!(
        get_general_category(c),
        GeneralCategory::NonspacingMark | GeneralCategory::EnclosingMark
    )
}

/// The longest run of combining marks shown raw, and whether the text's first character after
/// an opening quote is a raw mark (it would be drawn on the renderer's own quote).
fn longest_mark_run(text: &str) -> usize {
    let (mut run, mut longest) = (0, 0);
    for c in text.chars() {
        if is_mark(c) {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    longest
}

/// A value of one letter and 200 combining marks ("Zalgo" text) fits in the 240-character
/// budget and is shown raw: the stack of marks is drawn far above and below its line, over the
/// question's other lines (the real `Before:`/`After:`), in every renderer that stacks marks
/// (browsers, most dialogs). A stack that tall is never text a person needs to read; Unicode's
/// Stream-Safe Text Format (UAX #15) caps a run of non-starters at 30, and real text stacks
/// at most a handful. The renderer should show long runs as escapes.
#[test]
fn a_combining_mark_flood_is_not_shown_raw() {
    for mark in ['\u{0301}', '\u{0336}', '\u{0489}', '\u{20DD}', '\u{0363}'] {
        let flood: String = std::iter::once('a')
            .chain(std::iter::repeat_n(mark, 200))
            .collect();
        let value = render_value(&json!(flood), 240);
        assert!(
            longest_mark_run(value.as_str()) <= 4,
            "{} raw combining marks {mark:?} in a row in {:?}",
            longest_mark_run(value.as_str()),
            value.as_str()
        );
        let key = render_key(&flood);
        assert!(
            longest_mark_run(key.as_str()) <= 4,
            "{} raw combining marks in a row in a key",
            longest_mark_run(key.as_str())
        );
    }
}

/// A string that starts with a combining mark has that mark drawn on the renderer's own
/// opening quote (`"` + U+0338 shows as a struck-through quote, U+20E5 as a reversed solidus
/// overlay): the value changes how the renderer's own delimiter looks.
#[test]
fn a_leading_combining_mark_is_not_drawn_on_the_renderers_quote() {
    for mark in ['\u{0338}', '\u{20E5}', '\u{0301}'] {
        let text = render_value(&json!(format!("{mark}x")), 240);
        let second = text.as_str().chars().nth(1).unwrap();
        assert!(
            !is_mark(second),
            "the opening quote carries {mark:?}: {:?}",
            text.as_str()
        );
    }
}

fn digest_of(text: &str) -> Result<(Value, mcp_write_guard_core::ids::ArgsDigest), String> {
    let value: Value = serde_json::from_str(text).unwrap();
    CapturedArgs::capture_value(&value, &ArgLimits::default())
        .map(|args| (value, args.digest()))
        .map_err(|e| e.to_string())
}

/// Two argument objects the tool can tell apart (different integers) must not share a digest:
/// a token or an approval for one would then spend for the other. With serde_json's default
/// number representation both texts below parse to the same double (the tool sees the same
/// value, so there is nothing to tell apart). But `arbitrary_precision` is an additive cargo
/// feature: any crate in the embedding server's build that enables it (feature unification)
/// makes both numbers reach the tool exactly as sent, while `exact_number` accepts any number
/// whose `as_f64` is finite, and the digest is that of the nearest double.
///
/// Without that feature this test has nothing to tell apart; `.ci/run` also runs it with the
/// feature on: `cargo test -p mcp-write-guard-core --test attack_render --features
/// serde_json/arbitrary_precision`.
#[test]
fn numbers_the_tool_can_tell_apart_never_share_a_digest() {
    for (a, b) in [
        (
            r#"{"amount": 100000000000000000000}"#,
            r#"{"amount": 100000000000000000001}"#,
        ),
        (
            r#"{"amount": 9007199254740992.0}"#,
            r#"{"amount": 9007199254740993.0}"#,
        ),
        (
            r#"{"amount": 0.1}"#,
            r#"{"amount": 0.1000000000000000000001}"#,
        ),
    ] {
        let (Ok((va, da)), Ok((vb, db))) = (digest_of(a), digest_of(b)) else {
            continue; // refused: fine
        };
        if va != vb {
            assert_ne!(
                da, db,
                "{a} and {b} reach the tool as different values but share a digest"
            );
        }
    }
}
