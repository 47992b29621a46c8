//! `render`: the renderer of every value a person reads in an approval question.

use mcp_write_guard_core::render::{DEFAULT_MAX_RENDERED_CHARS, render_key, render_value};
use serde_json::Value;
use unicode_general_category::{GeneralCategory, get_general_category};

use crate::support::fail;

/// The first two bytes of `data` (little-endian) pick the budget: `0xFFFF` is unlimited,
/// anything else is taken modulo 600. The rest is rendered as a string (lossily UTF-8), as a key,
/// and, when it parses, as a JSON value.
///
/// Properties, as [`Rendered`](mcp_write_guard_core::render::Rendered) and [`render_value`] promise them:
/// no character of general category Cc, Cf, Zl, Zp, Co, Cn (or Cs), nor one of the listed
/// invisible default-ignorable characters, survives; an escape `\u{..}` is used only for such a
/// character; the whole rendering never ends with `)` and reads back (escapes undone) as the
/// value it renders; a rendering within the budget is the whole one; a cut one is a prefix of the
/// whole one of at most `max_chars` characters, cut between units (never inside an escape, a
/// number or a literal), followed by ` … (N more characters)` where N counts exactly the
/// characters left off; a key is shown as it is exactly when it is a plain identifier, and
/// otherwise as a string value under the default budget.
pub fn check_render(data: &[u8]) {
    let (max, body) = match data {
        [low, high, rest @ ..] => {
            let selector = u16::from_le_bytes([*low, *high]);
            let max = if selector == u16::MAX {
                usize::MAX
            } else {
                usize::from(selector % 600)
            };
            (max, rest)
        }
        _ => (DEFAULT_MAX_RENDERED_CHARS, data),
    };
    let text = String::from_utf8_lossy(body);
    check_value(&Value::String(text.clone().into_owned()), max);
    check_key(&text);
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        check_value(&value, max);
    }
}

/// Whether `c` must never be shown as itself: general category Cc, Cf, Zl, Zp, Cs, Co, Cn, or
/// one of the invisible default-ignorable characters [`Rendered`](mcp_write_guard_core::render::Rendered)
/// lists.
pub(crate) fn hidden(c: char) -> bool {
    let category = matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
            | GeneralCategory::Surrogate
            | GeneralCategory::PrivateUse
            | GeneralCategory::Unassigned
    );
    let invisible = matches!(
        u32::from(c),
        0x034F
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180D
            | 0x180F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFFA0
            | 0xE0100..=0xE01EF
    );
    category || invisible
}

fn check_value(value: &Value, max: usize) {
    let whole = render_value(value, usize::MAX);
    let whole = whole.as_str();
    assert_clean(whole);
    assert!(
        !whole.ends_with(')'),
        "render: a whole rendering ends with ')': {whole:?}"
    );
    assert_reads_back(whole, value);
    let shown = render_value(value, max);
    assert_clean(shown.as_str());
    assert_budget(shown.as_str(), whole, max);
}

fn check_key(name: &str) {
    let shown = render_key(name);
    assert_clean(shown.as_str());
    let plain = !name.is_empty()
        && name.chars().count() <= DEFAULT_MAX_RENDERED_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    let expected = if plain {
        name.to_owned()
    } else {
        render_value(&Value::String(name.to_owned()), DEFAULT_MAX_RENDERED_CHARS).to_string()
    };
    assert_eq!(
        shown.as_str(),
        expected,
        "render: the key {name:?} (plain: {plain}) is shown otherwise"
    );
    assert_eq!(
        shown.as_str().starts_with('"'),
        !plain,
        "render: a key is quoted exactly when it is not plain"
    );
}

/// No hidden character in `text`.
pub(crate) fn assert_clean(text: &str) {
    if let Some(c) = text.chars().find(|&c| hidden(c)) {
        fail(format_args!(
            "render: U+{:04X} survives in {text:?}",
            u32::from(c)
        ));
    }
}

/// `shown` is `whole` when that fits in `max` characters, else a prefix of it cut between units
/// and the marker counting what was left off.
pub(crate) fn assert_budget(shown: &str, whole: &str, max: usize) {
    let whole_chars = whole.chars().count();
    if whole_chars <= max {
        assert_eq!(shown, whole, "render: cut although it fits in {max}");
        return;
    }
    let Some((kept, left_off)) = split_marker(shown) else {
        fail(format_args!(
            "render: longer than {max} characters but no marker: {shown:?}"
        ));
    };
    let kept_chars = kept.chars().count();
    assert!(
        kept_chars <= max,
        "render: {kept_chars} characters kept, over the budget of {max}"
    );
    assert!(
        whole.starts_with(kept),
        "render: the kept text is not the start of the whole rendering: {kept:?}"
    );
    assert_eq!(
        left_off,
        whole_chars - kept_chars,
        "render: the marker does not count what was left off: {shown:?}"
    );
    let rest = whole.get(kept.len()..).unwrap_or_default();
    assert!(
        !cuts_a_unit(kept, rest),
        "render: cut inside a unit: {kept:?} | {rest:?}"
    );
}

/// `shown` as (kept text, count) if it ends with the cut marker.
fn split_marker(shown: &str) -> Option<(&str, usize)> {
    let body = shown
        .strip_suffix(" more characters)")
        .or_else(|| shown.strip_suffix(" more character)"))?;
    let at = body.rfind("… (")?;
    let count: usize = body.get(at + "… (".len()..)?.parse().ok()?;
    let singular = shown.ends_with(" more character)");
    if singular != (count == 1) {
        return None;
    }
    let before = body.get(..at)?;
    let kept = if before.is_empty() {
        before
    } else {
        before.strip_suffix(' ')?
    };
    Some((kept, count))
}

/// Whether the boundary between `kept` and `rest` falls inside an escape, a number or a literal.
fn cuts_a_unit(kept: &str, rest: &str) -> bool {
    let mut in_string = false;
    let mut after_backslash = false;
    let mut in_code_point = false;
    for c in kept.chars() {
        if in_code_point {
            in_code_point = c != '}';
        } else if after_backslash {
            after_backslash = false;
            in_code_point = c == 'u';
        } else if in_string {
            match c {
                '\\' => after_backslash = true,
                '"' => in_string = false,
                _ => {}
            }
        } else {
            in_string = c == '"';
        }
    }
    let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-');
    let between_words = !in_string
        && kept.chars().next_back().is_some_and(word)
        && rest.chars().next().is_some_and(word);
    after_backslash || in_code_point || between_words
}

/// `rendered` (a whole rendering) with its escapes undone is JSON for `value`: nothing was lost.
pub(crate) fn assert_reads_back(rendered: &str, value: &Value) {
    let json = unescape(rendered);
    match serde_json::from_str::<Value>(&json) {
        Ok(back) => assert_eq!(
            &back, value,
            "render: {rendered:?} reads back as another value"
        ),
        Err(error) => fail(format_args!(
            "render: {rendered:?} does not read back ({error})"
        )),
    }
}

/// JSON text from a rendering: each `\u{X}` becomes JSON's `\uXXXX` (a surrogate pair above
/// U+FFFF); only a hidden character may have been escaped that way.
fn unescape(rendered: &str) -> String {
    let mut out = String::with_capacity(rendered.len());
    let mut chars = rendered.chars();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        out.push(c);
        if !in_string {
            in_string = c == '"';
            continue;
        }
        match c {
            '"' => in_string = false,
            '\\' => match chars.next() {
                Some('u') => {
                    out.pop();
                    let code: String = chars
                        .by_ref()
                        .skip_while(|&c| c == '{')
                        .take_while(|&c| c != '}')
                        .collect();
                    let escaped = u32::from_str_radix(&code, 16).ok().and_then(char::from_u32);
                    let Some(escaped) = escaped else {
                        fail(format_args!("render: a malformed escape \\u{{{code}}}"));
                    };
                    assert!(
                        hidden(escaped),
                        "render: U+{code} is escaped but is shown as itself by the rules"
                    );
                    for unit in escaped.encode_utf16(&mut [0; 2]) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                Some(short @ ('"' | '\\' | 'n' | 'r' | 't')) => out.push(short),
                other => fail(format_args!("render: an unknown escape \\{other:?}")),
            },
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn holds_for_ordinary_values() {
        check_render(b"\x05\x00abcdefgh");
        check_render(b"\xFF\xFF{\"a\\u202e\": [1, true, null, \"\\n\"]}");
        check_render(b"\x00\x00\"x\"");
        check_render("\x10\x00a\u{200B}b\u{E0100}".as_bytes());
        check_render(b"");
    }

    #[test]
    fn reading_back() {
        assert_reads_back(r#""a\u{202E}\n""#, &json!("a\u{202E}\n"));
        assert_reads_back(r#"{"\u{10FFFF}":[1]}"#, &json!({"\u{10FFFF}": [1]}));
    }

    #[test]
    #[should_panic(expected = "survives in")]
    fn a_bidi_override_fails() {
        assert_clean("a\u{202E}b");
    }

    #[test]
    #[should_panic(expected = "survives in")]
    fn a_line_separator_fails() {
        assert_clean("a\u{2028}b");
    }

    #[test]
    #[should_panic(expected = "escaped but is shown as itself")]
    fn escaping_a_plain_character_fails() {
        assert_reads_back(r#""\u{0041}""#, &json!("A"));
    }

    #[test]
    #[should_panic(expected = "reads back as another value")]
    fn a_lossy_rendering_fails() {
        assert_reads_back(r#""ab""#, &json!("abc"));
    }

    #[test]
    #[should_panic(expected = "does not count what was left off")]
    fn a_wrong_count_fails() {
        assert_budget(r#""ab … (4 more characters)"#, r#""abcd""#, 3);
    }

    #[test]
    #[should_panic(expected = "cut inside a unit")]
    fn a_cut_escape_fails() {
        assert_budget(r#""a\u{20 … (4 more characters)"#, r#""a\u{202E}""#, 7);
    }

    #[test]
    #[should_panic(expected = "cut although it fits")]
    fn a_needless_cut_fails() {
        assert_budget(r#""a … (2 more characters)"#, r#""ab""#, 10);
    }
}
