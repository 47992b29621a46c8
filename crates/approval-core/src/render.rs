//! One renderer for every value a person reads in an approval question.
//!
//! The model chooses every argument, and a tool's preview echoes some of them back (a reason, a
//! name). Shown raw, such a value can start lines of its own (a fake `Before:`/`After:` line, a
//! fake "no stock change" sentence followed by enough blank lines to push the real one out of
//! sight), reorder the text around it (bidi overrides) or hide characters (zero-width
//! characters). Whatever passes through [`render_value`] or [`render_key`] comes out as a
//! [`Rendered`]: text in which none of that can happen.
//!
//! The rules are listed on [`Rendered`].
//!
//! Rendering is pure, never panics, and walks nested values with an explicit stack, so a value
//! of any depth renders without recursion.

use std::fmt;

use serde_json::Value;
use unicode_general_category::{GeneralCategory, get_general_category};

/// The default budget, in rendered characters, for one value in an approval question: 240.
///
/// Long enough that a typical free-text argument is shown whole (the reference store accepts
/// reasons of up to 200 characters; quotes and a few escapes fit too), short enough that one
/// value stays within about three lines of a dialog and cannot push the rest of the question
/// (the real before and after) out of sight.
pub const DEFAULT_MAX_RENDERED_CHARS: usize = 240;

/// Text that is safe to put into an approval question.
///
/// It contains no character of general category Cc, Cf, Zl or Zp (nor Co, Cn or another
/// invisible default-ignorable character), so it can never start a new line of the question,
/// reorder the text around it, or hide a character. The only ways to get one are
/// [`render_value`] and [`render_key`].
///
/// How values are rendered:
///
/// - Strings are quoted (`"..."`) with `"` and `\` escaped, so where a value ends is always
///   visible.
/// - Numbers, booleans and `null` are written as JSON; arrays and objects as compact JSON whose
///   keys and string values are escaped like strings.
/// - Characters that are not drawn as themselves are shown as visible escapes: `\n`, `\r`, `\t`,
///   else `\u{202E}` (hexadecimal code point, upper case, at least four digits). That is every
///   character of general category Cc (controls, C0 and C1), Cf (format: bidi controls, zero
///   width characters, the byte-order mark, tags), Zl and Zp (U+2028, U+2029), Co (private use,
///   drawn differently by every font), Cn (unassigned in Unicode 16, the version the
///   `unicode-general-category` tables follow: a newer version may assign a format character
///   there), and the few other default-ignorable characters that are invisible although they
///   are not Cf (U+034F, U+115F, U+1160, U+17B4, U+17B5, U+180B–U+180D, U+180F, U+3164,
///   U+FE00–U+FE0F, U+FFA0, U+E0100–U+E01EF).
/// - Quotation marks other than `"`, of any script (curly quotes, guillemets, CJK corner
///   brackets, fullwidth forms and the like), are escaped the same way, so no character inside
///   a quoted value can pass for the quote that ends it.
/// - Combining marks (categories Mn, Me) are escaped too where they would be drawn on the
///   renderer's own text (first in a string, right after an escape) and beyond four in a row,
///   so a stack of marks cannot be drawn over the question's other lines.
/// - A value longer than its budget is cut with a visible marker (see [`render_value`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rendered(String);

impl Rendered {
    /// The rendered text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Text this crate composed from rendered pieces and its own printable ASCII (a change
    /// row's path such as `lines[0].stock`); never a value as given.
    pub(crate) fn composed(text: String) -> Self {
        debug_assert!(!text.chars().any(|c| c.is_control()), "{text:?}");
        Self(text)
    }
}

impl fmt::Display for Rendered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Rendered {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Renders `value` for a person to read, in at most `max_chars` characters plus the cut marker.
///
/// Strings are quoted and escaped, other values written as compact JSON with their keys and
/// strings escaped the same way (the escapes are listed on [`Rendered`]).
///
/// When the rendered text is longer than `max_chars` characters (counted after escaping, quotes
/// and JSON punctuation included), it is cut at a whole character or escape at or before
/// `max_chars` and ` … (N more characters)` is appended, where **N counts the rendered
/// characters left off** (escapes, quotes and punctuation included, as `max_chars` counts
/// them). A cut text always ends with the marker's `)`, a whole one never does (it ends with a
/// quote, a bracket, a digit or a JSON literal), and the marker sits outside any string's
/// quotes, so no value can imitate a cut or hide one.
///
/// On strings whose rendered text fits in `max_chars`, rendering is injective: two different
/// strings never render the same.
///
/// ```
/// use mcp_write_guard_core::render::render_value;
/// use serde_json::json;
///
/// let reason = json!("recount\nBefore: {\"stock\":3}\u{202E}");
/// assert_eq!(
///     render_value(&reason, 200).as_str(),
///     r#""recount\nBefore: {\"stock\":3}\u{202E}""#
/// );
/// assert_eq!(render_value(&json!({"a": [1, true, null]}), 200).as_str(), r#"{"a":[1,true,null]}"#);
/// assert_eq!(render_value(&json!("abcdefgh"), 5).as_str(), r#""abcd … (5 more characters)"#);
/// ```
pub fn render_value(value: &Value, max_chars: usize) -> Rendered {
    let mut out = Writer::new(max_chars);
    write_value(value, &mut out);
    out.finish()
}

/// Renders an argument or field name: as it is when it is a plain identifier (non-empty, at
/// most [`DEFAULT_MAX_RENDERED_CHARS`] long, ASCII letters, digits, `_`, `-` and `.` only), otherwise quoted and escaped like a string value
/// and cut at [`DEFAULT_MAX_RENDERED_CHARS`] like one.
///
/// A plain name never starts with a quote, so a quoted name cannot pass for a plain one.
///
/// ```
/// use mcp_write_guard_core::render::render_key;
///
/// assert_eq!(render_key("orderId").as_str(), "orderId");
/// assert_eq!(render_key("note: ok").as_str(), r#""note: ok""#);
/// assert_eq!(render_key("a\nAfter").as_str(), r#""a\nAfter""#);
/// ```
pub fn render_key(name: &str) -> Rendered {
    let plain = !name.is_empty()
        && name.len() <= DEFAULT_MAX_RENDERED_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if plain {
        return Rendered(name.to_owned());
    }
    let mut out = Writer::new(DEFAULT_MAX_RENDERED_CHARS);
    write_string(name, &mut out);
    out.finish()
}

/// Builds the rendered text one unit (an escaped character, a token of JSON) at a time: units
/// are kept while they fit in the budget; from the first that does not, every later unit is
/// only counted.
struct Writer {
    out: String,
    kept: usize,
    max: usize,
    left_off: usize,
    full: bool,
}

impl Writer {
    fn new(max: usize) -> Self {
        Self {
            out: String::new(),
            kept: 0,
            max,
            left_off: 0,
            full: false,
        }
    }

    /// One unit of `chars` characters (all ASCII, or one safe character).
    fn unit(&mut self, unit: &str, chars: usize) {
        if !self.full && chars <= self.max.saturating_sub(self.kept) {
            self.out.push_str(unit);
            self.kept = self.kept.saturating_add(chars);
        } else {
            self.full = true;
            self.left_off = self.left_off.saturating_add(chars);
        }
    }

    fn ascii(&mut self, unit: &str) {
        self.unit(unit, unit.len());
    }

    fn char(&mut self, c: char) {
        let mut buf = [0_u8; 4];
        self.unit(c.encode_utf8(&mut buf), 1);
    }

    fn finish(mut self) -> Rendered {
        if self.left_off > 0 {
            if !self.out.is_empty() {
                self.out.push(' ');
            }
            let unit = if self.left_off == 1 {
                "character"
            } else {
                "characters"
            };
            self.out
                .push_str(&format!("… ({} more {unit})", self.left_off));
        }
        Rendered(self.out)
    }
}

/// What is left to write of a nested value.
enum Frame<'a> {
    Value(&'a Value),
    Array(std::slice::Iter<'a, Value>, bool),
    Object(serde_json::map::Iter<'a>, bool),
}

fn write_value(value: &Value, out: &mut Writer) {
    let mut stack = vec![Frame::Value(value)];
    while let Some(frame) = stack.pop() {
        match frame {
            Frame::Value(Value::Null) => out.ascii("null"),
            Frame::Value(Value::Bool(b)) => out.ascii(if *b { "true" } else { "false" }),
            Frame::Value(Value::Number(n)) => out.ascii(&n.to_string()),
            Frame::Value(Value::String(s)) => write_string(s, out),
            Frame::Value(Value::Array(items)) => {
                out.ascii("[");
                stack.push(Frame::Array(items.iter(), true));
            }
            Frame::Value(Value::Object(map)) => {
                out.ascii("{");
                stack.push(Frame::Object(map.iter(), true));
            }
            Frame::Array(mut items, first) => match items.next() {
                Some(item) => {
                    if !first {
                        out.ascii(",");
                    }
                    stack.push(Frame::Array(items, false));
                    stack.push(Frame::Value(item));
                }
                None => out.ascii("]"),
            },
            Frame::Object(mut entries, first) => match entries.next() {
                Some((key, item)) => {
                    if !first {
                        out.ascii(",");
                    }
                    write_string(key, out);
                    out.ascii(":");
                    stack.push(Frame::Object(entries, false));
                    stack.push(Frame::Value(item));
                }
                None => out.ascii("}"),
            },
        }
    }
}

fn write_string(s: &str, out: &mut Writer) {
    out.ascii("\"");
    // The combining marks shown as themselves since the last character shown as itself; `None`
    // right after the opening quote or an escape, where a mark would be drawn on the
    // renderer's own text.
    let mut marks: Option<usize> = None;
    for c in s.chars() {
        let mark = is_mark(c);
        match c {
            '"' => out.ascii("\\\""),
            '\\' => out.ascii("\\\\"),
            '\n' => out.ascii("\\n"),
            '\r' => out.ascii("\\r"),
            '\t' => out.ascii("\\t"),
            c if must_escape(c) || (mark && marks.is_none_or(|n| n >= MAX_RAW_MARKS)) => {
                let escaped = format!("\\u{{{:04X}}}", u32::from(c));
                out.ascii(&escaped);
            }
            c => {
                out.char(c);
                marks = Some(if mark { marks.unwrap_or(0) + 1 } else { 0 });
                continue;
            }
        }
        marks = None;
    }
    out.ascii("\"");
}

/// The most combining marks in a row shown as themselves: enough for real text (Vietnamese,
/// Hebrew points, Indic scripts stack a few), far below the towers of "Zalgo" text that are
/// drawn over the lines above and below.
const MAX_RAW_MARKS: usize = 4;

/// A combining mark drawn on (or around) the character before it: categories Mn and Me.
fn is_mark(c: char) -> bool {
    matches!(
        get_general_category(c),
        GeneralCategory::NonspacingMark | GeneralCategory::EnclosingMark
    )
}

/// Whether `c` is shown as a `\u{...}` escape rather than as itself.
fn must_escape(c: char) -> bool {
    match get_general_category(c) {
        GeneralCategory::Control
        | GeneralCategory::Format
        | GeneralCategory::LineSeparator
        | GeneralCategory::ParagraphSeparator
        | GeneralCategory::Surrogate
        | GeneralCategory::PrivateUse
        | GeneralCategory::Unassigned => true,
        _ => invisible(c) || quotation_mark(c),
    }
}

/// Quotation marks other than `"`, of any script: inside a quoted value each would read, to a
/// hasty eye, as the value's end (`"duplicate” Stock goes back: “nothing"`). The single and
/// double curly quotes and their low and reversed forms (U+2018–U+201F), guillemets (U+00AB,
/// U+00BB, U+2039, U+203A), the fullwidth quote and apostrophe (U+FF02, U+FF07), CJK corner
/// brackets (U+300C–U+300F, U+FE41–U+FE44, U+FF62, U+FF63), CJK double prime quotes
/// (U+301D–U+301F), the low reversed quote (U+2E42) and the dingbat quotation ornaments
/// (U+275B–U+2760, U+1F676–U+1F678). ASCII `'` stays as it is: it is in most English text and
/// cannot be mistaken for the `"` that ends a value.
fn quotation_mark(c: char) -> bool {
    matches!(
        c,
        '\u{00AB}'
            | '\u{00BB}'
            | '\u{2018}'..='\u{201F}'
            | '\u{2039}'..='\u{203A}'
            | '\u{2E42}'
            | '\u{275B}'..='\u{2760}'
            | '\u{300C}'..='\u{300F}'
            | '\u{301D}'..='\u{301F}'
            | '\u{FE41}'..='\u{FE44}'
            | '\u{FF02}'
            | '\u{FF07}'
            | '\u{FF62}'..='\u{FF63}'
            | '\u{1F676}'..='\u{1F678}'
    )
}

/// Default-ignorable characters (Unicode's `Default_Ignorable_Code_Point`) that are not of
/// category Cf or Cn and are drawn as nothing: the combining grapheme joiner, the Hangul
/// fillers, the Khmer inherent vowels, the Mongolian and other variation selectors.
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{034F}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180D}'
            | '\u{180F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FFA0}'
            | '\u{E0100}'..='\u{E01EF}'
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    const MAX: usize = DEFAULT_MAX_RENDERED_CHARS;

    #[test]
    fn a_rendered_value_reads_the_same_as_text_and_as_a_str() {
        let rendered = render_value(&json!("a\u{202e}b"), MAX);
        assert_eq!(rendered.to_string(), "\"a\\u{202E}b\"");
        assert_eq!(rendered.as_ref(), rendered.to_string());
    }

    fn string(s: &str) -> String {
        render_value(&Value::String(s.to_owned()), 10_000).to_string()
    }

    use crate::test_support::forbidden;

    fn assert_clean(text: &str) {
        assert!(
            !text.chars().any(forbidden),
            "forbidden character in {text:?}"
        );
    }

    #[test]
    fn strings_are_quoted_and_quotes_and_backslashes_escaped() {
        assert_eq!(string("damaged in transit"), r#""damaged in transit""#);
        assert_eq!(string(""), r#""""#);
        assert_eq!(string(r#"say "hi""#), r#""say \"hi\"""#);
        assert_eq!(string(r"a\b"), r#""a\\b""#);
        assert_eq!(string(r#"\""#), r#""\\\"""#);
        // Printable non-ASCII is shown as itself.
        assert_eq!(string("Grüße 東京 €"), "\"Grüße 東京 €\"");
    }

    #[test]
    fn line_breaks_and_tabs_are_short_escapes() {
        assert_eq!(
            string("a\nBefore: {\"stock\":3}\r\n\tx"),
            r#""a\nBefore: {\"stock\":3}\r\n\tx""#
        );
    }

    #[test]
    fn other_c0_and_c1_controls_are_code_point_escapes() {
        assert_eq!(string("\u{0}"), r#""\u{0000}""#);
        assert_eq!(
            string("\u{7}\u{8}\u{B}\u{C}"),
            r#""\u{0007}\u{0008}\u{000B}\u{000C}""#
        );
        assert_eq!(string("\u{1B}[2J"), r#""\u{001B}[2J""#);
        assert_eq!(string("\u{7F}"), r#""\u{007F}""#);
        assert_eq!(string("\u{85}\u{9B}"), r#""\u{0085}\u{009B}""#);
    }

    #[test]
    fn line_and_paragraph_separators_are_escaped() {
        assert_eq!(string("a\u{2028}b\u{2029}c"), r#""a\u{2028}b\u{2029}c""#);
    }

    #[test]
    fn bidi_controls_are_escaped() {
        for c in [
            '\u{061C}', '\u{200E}', '\u{200F}', '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}',
            '\u{202E}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
        ] {
            assert_eq!(
                string(&format!("x{c}y")),
                format!("\"x\\u{{{:04X}}}y\"", u32::from(c))
            );
        }
        assert_eq!(string("\u{202E}3 -> 3"), r#""\u{202E}3 -> 3""#);
    }

    #[test]
    fn zero_width_and_other_format_characters_are_escaped() {
        for (c, shown) in [
            ('\u{200B}', r"\u{200B}"),
            ('\u{200C}', r"\u{200C}"),
            ('\u{200D}', r"\u{200D}"),
            ('\u{2060}', r"\u{2060}"),
            ('\u{FEFF}', r"\u{FEFF}"),
            ('\u{00AD}', r"\u{00AD}"),
            ('\u{180E}', r"\u{180E}"),
            ('\u{2064}', r"\u{2064}"),
            ('\u{E0001}', r"\u{E0001}"),
            ('\u{E0041}', r"\u{E0041}"),
            ('\u{1D173}', r"\u{1D173}"),
        ] {
            assert_eq!(get_general_category(c), GeneralCategory::Format, "{c:?}");
            assert_eq!(string(&c.to_string()), format!("\"{shown}\""));
        }
    }

    #[test]
    fn quotation_marks_of_every_script_are_escaped_inside_a_value() {
        let reason = "duplicate\u{201D} Stock goes back: \u{201C}nothing, the order stays open";
        assert_eq!(
            string(reason),
            r#""duplicate\u{201D} Stock goes back: \u{201C}nothing, the order stays open""#
        );
        for c in [
            '\u{2018}',
            '\u{2019}',
            '\u{201A}',
            '\u{201B}',
            '\u{201C}',
            '\u{201D}',
            '\u{201E}',
            '\u{201F}',
            '\u{00AB}',
            '\u{00BB}',
            '\u{2039}',
            '\u{203A}',
            '\u{FF02}',
            '\u{FF07}',
            '\u{300C}',
            '\u{300D}',
            '\u{300E}',
            '\u{300F}',
            '\u{301D}',
            '\u{301E}',
            '\u{301F}',
            '\u{2E42}',
            '\u{275D}',
            '\u{275E}',
            '\u{FE41}',
            '\u{FF62}',
            '\u{1F676}',
        ] {
            let shown = string(&format!("a{c}b"));
            assert_eq!(shown, format!("\"a\\u{{{:04X}}}b\"", u32::from(c)), "{c:?}");
            assert!(!shown.contains(c), "{c:?}");
            assert_eq!(
                render_key(&c.to_string()).as_str(),
                format!("\"\\u{{{:04X}}}\"", u32::from(c))
            );
        }
        // The ASCII apostrophe and ordinary punctuation stay as they are.
        assert_eq!(string("it's (ok) - [1]"), r#""it's (ok) - [1]""#);
    }

    #[test]
    fn invisible_private_and_unassigned_characters_are_escaped() {
        assert_eq!(string("\u{3164}"), r#""\u{3164}""#);
        assert_eq!(string("\u{115F}\u{FFA0}"), r#""\u{115F}\u{FFA0}""#);
        assert_eq!(string("x\u{FE0F}"), r#""x\u{FE0F}""#);
        assert_eq!(string("\u{034F}"), r#""\u{034F}""#);
        assert_eq!(string("\u{E000}\u{F8FF}"), r#""\u{E000}\u{F8FF}""#);
        assert_eq!(string("\u{10FFFF}"), r#""\u{10FFFF}""#);
        assert_eq!(string("\u{FFFE}"), r#""\u{FFFE}""#);
        // Ordinary spaces and marks are shown as they are.
        assert_eq!(string("a\u{A0}b\u{301}"), "\"a\u{A0}b\u{301}\"");
    }

    #[test]
    fn a_character_and_the_text_of_its_escape_render_differently() {
        for (raw, imitation) in [
            ("\n", r"\n"),
            ("\u{202E}", r"\u{202E}"),
            ("\"", r#"\""#),
            ("a\u{200B}", r"a\u{200B}"),
            ("x\" + \"y", r#"x\" + \"y"#),
        ] {
            assert_ne!(string(raw), string(imitation), "{raw:?}");
        }
    }

    #[test]
    fn numbers_booleans_and_null_are_json() {
        assert_eq!(render_value(&json!(-2), MAX).as_str(), "-2");
        assert_eq!(render_value(&json!(1.5), MAX).as_str(), "1.5");
        assert_eq!(render_value(&json!(true), MAX).as_str(), "true");
        assert_eq!(render_value(&json!(false), MAX).as_str(), "false");
        assert_eq!(render_value(&Value::Null, MAX).as_str(), "null");
    }

    #[test]
    fn arrays_and_objects_are_compact_json_with_escaped_keys_and_strings() {
        assert_eq!(
            render_value(&json!({"stock": 3, "sku": "TLS-002"}), MAX).as_str(),
            r#"{"sku":"TLS-002","stock":3}"#
        );
        assert_eq!(
            render_value(&json!([1, "a\nb", [], {}, [null]]), MAX).as_str(),
            r#"[1,"a\nb",[],{},[null]]"#
        );
        assert_eq!(
            render_value(&json!({"k\u{202E}\"": ["\u{2028}"]}), MAX).as_str(),
            r#"{"k\u{202E}\"":["\u{2028}"]}"#
        );
    }

    #[test]
    fn a_long_value_is_cut_with_a_marker_counting_what_was_left_off() {
        assert_eq!(
            render_value(&json!("abcdefgh"), 5).as_str(),
            r#""abcd … (5 more characters)"#
        );
        // Exactly the budget: whole.
        assert_eq!(
            render_value(&json!("abcdefgh"), 10).as_str(),
            r#""abcdefgh""#
        );
        assert_eq!(
            render_value(&json!("abcdefgh"), 9).as_str(),
            r#""abcdefgh … (1 more character)"#
        );
        // Escapes are never split; N counts rendered characters.
        assert_eq!(
            render_value(&json!("ab\u{202E}cd"), 6).as_str(),
            r#""ab … (11 more characters)"#
        );
        assert_eq!(
            render_value(&json!({"a": [1, 2, 3]}), 8).as_str(),
            r#"{"a":[1, … (5 more characters)"#
        );
        assert_eq!(
            render_value(&json!("abc"), 0).as_str(),
            "… (5 more characters)"
        );
        let long = "x".repeat(10_000);
        let text = render_value(&json!(long), MAX).to_string();
        assert_eq!(
            text,
            format!("\"{} … (9762 more characters)", "x".repeat(MAX - 1))
        );
    }

    #[test]
    fn a_cut_text_ends_with_the_marker_and_a_whole_one_never_does() {
        for (value, max) in [
            (json!("x)"), 3),
            (json!("x)"), 4),
            (json!(["a", "b"]), 5),
            (json!({"a": "(1 more character)"}), 100),
        ] {
            let text = render_value(&value, max).to_string();
            let whole = text.chars().count() <= max;
            assert_eq!(!text.ends_with(')'), whole, "{text}");
        }
    }

    #[test]
    fn deep_nesting_renders_without_recursion() {
        let mut value = json!("bottom");
        for _ in 0..100_000 {
            value = Value::Array(vec![value]);
        }
        let text = render_value(&value, MAX).to_string();
        assert!(text.starts_with("[[[["), "{text}");
        assert!(text.ends_with(" … (199768 more characters)"), "{text}");
        let whole = render_value(&value, usize::MAX).to_string();
        assert_eq!(whole.len(), 200_008);
        // Dropping a value this deep recurses (serde_json); that is not the renderer's concern.
        std::mem::forget(value);
    }

    #[test]
    fn keys_are_plain_or_quoted() {
        assert_eq!(render_key("orderId").as_str(), "orderId");
        assert_eq!(render_key("plain_name-1.x").as_str(), "plain_name-1.x");
        assert_eq!(render_key("").as_str(), r#""""#);
        assert_eq!(render_key("note: ok").as_str(), r#""note: ok""#);
        assert_eq!(render_key("\"x\"").as_str(), r#""\"x\"""#);
        assert_eq!(
            render_key("delta\nBefore: {\"stock\":999}").as_str(),
            r#""delta\nBefore: {\"stock\":999}""#
        );
        assert_eq!(render_key("ключ").as_str(), r#""ключ""#);
        assert_eq!(render_key("a\u{200B}").as_str(), r#""a\u{200B}""#);
        let long = "k".repeat(1_000);
        assert!(
            render_key(&long)
                .as_str()
                .ends_with(" … (762 more characters)")
        );
    }

    /// Characters that mix plain ASCII with every range that matters here.
    fn risky_char() -> impl Strategy<Value = char> {
        prop_oneof![
            3 => proptest::char::range(' ', '~'),
            1 => Just('"'),
            1 => Just('\\'),
            2 => proptest::char::range('\u{0}', '\u{A0}'),
            2 => proptest::char::range('\u{2000}', '\u{206F}'),
            1 => proptest::char::range('\u{FE00}', '\u{FEFF}'),
            1 => proptest::char::range('\u{FFF0}', '\u{FFFF}'),
            1 => proptest::char::range('\u{E0000}', '\u{E01EF}'),
            1 => prop_oneof![Just('\u{061C}'), Just('\u{00AD}'), Just('\u{180E}'), Just('\u{3164}')],
            1 => prop_oneof![
                proptest::char::range('\u{2018}', '\u{201F}'),
                Just('\u{00AB}'), Just('\u{00BB}'), Just('\u{FF02}'), Just('\u{FF07}'),
                proptest::char::range('\u{300C}', '\u{301F}'),
                Just('\''), Just('u'), Just('{'), Just('}'),
            ],
            2 => any::<char>(),
        ]
    }

    fn risky_string() -> impl Strategy<Value = String> {
        proptest::collection::vec(risky_char(), 0..40).prop_map(|cs| cs.into_iter().collect())
    }

    fn risky_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            risky_string().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((risky_string(), inner), 0..4)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn no_rendered_string_carries_a_forbidden_character(
            s in risky_string(),
            max in 0_usize..400,
        ) {
            let text = render_value(&Value::String(s.clone()), max);
            prop_assert!(!text.as_str().chars().any(forbidden), "{:?}", text);
            prop_assert!(!render_key(&s).as_str().chars().any(forbidden));
            // No quotation mark but the renderer's own `"` is shown raw.
            prop_assert!(!text.as_str().chars().any(quotation_mark), "{:?}", text);
            prop_assert!(!render_key(&s).as_str().chars().any(quotation_mark));
            // At most the budget, plus the marker.
            let marker = " … (000000 more characters)".chars().count();
            prop_assert!(text.as_str().chars().count() <= max + marker);
        }

        #[test]
        fn no_rendered_json_carries_a_forbidden_character(
            value in risky_json(),
            max in 0_usize..400,
        ) {
            let text = render_value(&value, max);
            prop_assert!(!text.as_str().chars().any(forbidden), "{:?}", text);
            let whole = render_value(&value, usize::MAX);
            prop_assert!(!whole.as_str().ends_with(')'));
            if whole.as_str().chars().count() <= max {
                prop_assert_eq!(&text, &whole);
            } else {
                prop_assert!(text.as_str().ends_with(" more characters)")
                    || text.as_str().ends_with(" more character)"));
            }
        }

        #[test]
        fn rendering_is_injective_on_strings_that_fit(a in risky_string(), b in risky_string()) {
            prop_assume!(a != b);
            let ra = render_value(&Value::String(a.clone()), MAX);
            let rb = render_value(&Value::String(b.clone()), MAX);
            let fits = |r: &Rendered| !r.as_str().ends_with(')');
            if fits(&ra) && fits(&rb) {
                prop_assert_ne!(ra, rb);
            }
            let (ka, kb) = (render_key(&a), render_key(&b));
            if fits(&ka) && fits(&kb) {
                prop_assert_ne!(ka, kb);
            }
        }

        #[test]
        fn a_string_that_fits_is_shown_whole_and_quoted(s in risky_string()) {
            let text = render_value(&Value::String(s.clone()), 10_000).to_string();
            prop_assert!(text.starts_with('"') && text.ends_with('"') && text.len() >= 2);
            assert_clean(&text);
        }
    }
}
