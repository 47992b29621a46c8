//! The question the user is asked.
//!
//! By default: the tool, what changes (the rows of the preview's [`Change`], the same rows the
//! approval page shows), and every argument (except the confirmation token). A tool may supply
//! its own wording with [`crate::WriteGuardBuilder::prompt`]; [`PromptInput::change`] gives it
//! the same rows.
//!
//! What a person reads is part of the security boundary: the model chose every argument, and
//! a preview may echo them. So a wording never sees a raw value: [`PromptInput`] hands out
//! [`Rendered`] text only (strings quoted, line breaks, bidi controls and zero-width characters
//! shown as visible escapes, long values cut with a marker; see [`mcp_write_guard_core::render::render_value`])
//! and plain integers, which cannot carry text.

use std::{fmt, fmt::Write as _, sync::Arc};

use mcp_write_guard_core::{
    Change,
    render::{DEFAULT_MAX_RENDERED_CHARS, Rendered, render_key, render_value},
};
use serde_json::{Map, Value};

/// Everything a prompt may be built from, handed out rendered.
///
/// Every string it gives is a [`Rendered`] (made by [`render_value`] or [`render_key`] with
/// [`DEFAULT_MAX_RENDERED_CHARS`]), every number an `i64` or a `usize`, so a wording cannot
/// interpolate a raw argument by accident: a value with line breaks or bidi controls cannot add
/// lines to the question or reorder it.
///
/// ```
/// use mcp_write_guard_rmcp::PromptInput;
/// use serde_json::json;
///
/// let args = json!({"sku": "TLS-002", "reason": "recount\nAfter: 3"});
/// let preview = json!({"previousStock": 3, "newStock": 1, "lines": [{"sku": "TLS-002"}]});
/// let input = PromptInput::new("adjust_stock", args.as_object().unwrap(), Some(&preview));
///
/// assert_eq!(input.tool().as_str(), "adjust_stock");
/// assert_eq!(input.argument("reason").unwrap().as_str(), r#""recount\nAfter: 3""#);
/// assert_eq!(input.preview_i64("/newStock"), Some(1));
/// assert_eq!(input.preview_len("/lines"), Some(1));
/// assert_eq!(input.preview("/lines/0/sku").unwrap().as_str(), r#""TLS-002""#);
/// // The true change first; free text the model wrote last, labelled.
/// let question = format!(
///     "Adjust {}: stock {} -> {}. Reason given: {}",
///     input.argument("sku").unwrap(),
///     input.preview_i64("/previousStock").unwrap(),
///     input.preview_i64("/newStock").unwrap(),
///     input.argument("reason").unwrap(),
/// );
/// assert_eq!(question.lines().count(), 1);
/// ```
#[derive(Clone, Copy)]
pub struct PromptInput<'a> {
    /// The tool that will write.
    tool: &'a str,
    /// The captured arguments, without the confirmation token.
    arguments: &'a Map<String, Value>,
    /// The preview value (the dry run's `structuredContent`, else its text), if the tool
    /// supports previews.
    preview: Option<&'a Value>,
}

impl<'a> PromptInput<'a> {
    /// Bundles a prompt's inputs: the tool, its captured arguments (without the confirmation
    /// token) and the preview value (the dry run's `structuredContent`, else its text), if the
    /// tool supports previews.
    pub fn new(
        tool: &'a str,
        arguments: &'a Map<String, Value>,
        preview: Option<&'a Value>,
    ) -> Self {
        Self {
            tool,
            arguments,
            preview,
        }
    }

    /// The tool's name, as [`render_key`] shows it (a plain name as it is).
    pub fn tool(&self) -> Rendered {
        render_key(self.tool)
    }

    /// The argument `name`, rendered; `None` when there is no such argument.
    pub fn argument(&self, name: &str) -> Option<Rendered> {
        self.arguments
            .get(name)
            .map(|value| render_value(value, DEFAULT_MAX_RENDERED_CHARS))
    }

    /// Every argument as (name, value), both rendered, in the order of the captured arguments.
    pub fn arguments(&self) -> impl Iterator<Item = (Rendered, Rendered)> + use<'a> {
        self.arguments.iter().map(|(name, value)| {
            (
                render_key(name),
                render_value(value, DEFAULT_MAX_RENDERED_CHARS),
            )
        })
    }

    /// Whether there is a preview to show: the tool supports previews and its preview is not
    /// `null`. When this is false, every `preview*` accessor returns `None`.
    pub fn has_preview(&self) -> bool {
        self.preview_value().is_some()
    }

    /// The preview value at the JSON pointer `pointer` (RFC 6901; `""` is the whole preview,
    /// `/lines/0/sku` a field of an array item), rendered; `None` when there is nothing there.
    pub fn preview(&self, pointer: &str) -> Option<Rendered> {
        self.preview_at(pointer)
            .map(|value| render_value(value, DEFAULT_MAX_RENDERED_CHARS))
    }

    /// The preview value at `pointer` when it is an integer that fits in an `i64`.
    pub fn preview_i64(&self, pointer: &str) -> Option<i64> {
        self.preview_at(pointer).and_then(Value::as_i64)
    }

    /// The length of the preview array at `pointer`, to visit its items one by one
    /// (`/lines/0`, `/lines/1`, ...); `None` when there is no array there.
    pub fn preview_len(&self, pointer: &str) -> Option<usize> {
        self.preview_at(pointer)
            .and_then(Value::as_array)
            .map(Vec::len)
    }

    /// What changes: the rows of the preview (see [`Change`]), the same rows the approval page
    /// shows; `None` when there is no preview to show ([`Self::has_preview`]).
    ///
    /// ```
    /// use mcp_write_guard_rmcp::PromptInput;
    /// use serde_json::{Map, json};
    ///
    /// let preview = json!({"sku": "TLS-002", "previousStock": 3, "newStock": 1});
    /// let args = Map::new();
    /// let input = PromptInput::new("adjust_stock", &args, Some(&preview));
    /// let rows: Vec<String> = input.change().unwrap().rows().iter().map(ToString::to_string).collect();
    /// assert_eq!(rows, ["stock: 3 -> 1", r#"sku: "TLS-002""#]);
    /// ```
    pub fn change(&self) -> Option<Change> {
        self.preview_value().map(Change::of_preview)
    }

    fn preview_value(&self) -> Option<&'a Value> {
        self.preview.filter(|preview| !preview.is_null())
    }

    fn preview_at(&self, pointer: &str) -> Option<&'a Value> {
        self.preview_value()
            .and_then(|preview| preview.pointer(pointer))
    }
}

/// Shows the tool and the arguments rendered, never a raw value.
impl fmt::Debug for PromptInput<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PromptInput")
            .field("tool", &self.tool().as_str())
            .field(
                "arguments",
                &self
                    .arguments()
                    .map(|(name, value)| format!("{name}: {value}"))
                    .collect::<Vec<_>>(),
            )
            .field("has_preview", &self.has_preview())
            .finish()
    }
}

/// A tool's own prompt wording.
pub(crate) type PromptFn = Arc<dyn Fn(&PromptInput<'_>) -> String + Send + Sync>;

/// The default prompt: the tool, what changes, every argument.
///
/// One line per item, every value rendered ([`PromptInput`]), the true change before anything
/// the model wrote: the header with the tool, then, when there is a preview, `What changes:` and
/// one indented line per row of its [`Change`] (`  field: before -> after` or `  field: value`,
/// the rows the approval page shows, in its order), then `Arguments: none` or `Arguments:` and
/// one indented `name: value` line per argument (a name that reads like one of these labels
/// quoted; numbers, flags, arrays and objects first, free text last), then `Nothing is saved
/// unless you approve.`
pub fn default_prompt(input: &PromptInput<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Approve this change? Tool: {}", input.tool());
    // The true change first: what the preview computed, row by row as the page shows it.
    if let Some(change) = input.change() {
        out.push_str("What changes:\n");
        for row in change.rows() {
            let _ = writeln!(out, "  {row}");
        }
    }
    // Then the arguments as the model gave them, free text (strings) last.
    let (text, other): (Vec<_>, Vec<_>) = input
        .arguments()
        .partition(|(_, value)| value.as_str().starts_with('"'));
    if text.is_empty() && other.is_empty() {
        out.push_str("Arguments: none\n");
    } else {
        out.push_str("Arguments:\n");
        for (name, value) in other.into_iter().chain(text) {
            let name = unlike_a_label(name);
            let _ = writeln!(out, "  {name}: {value}");
        }
    }
    out.push_str("Nothing is saved unless you approve.");
    out
}

/// The labels of the default prompt's own lines (`Arguments: …`), and those it used before the
/// change rows (`Before: …`, `After: …`, `Preview: …`), which a person may still take for the
/// guard's own.
const LABELS: [&str; 4] = ["Arguments", "Before", "After", "Preview"];

/// An argument's rendered name on its line of the default prompt: quoted if it reads like one
/// of the prompt's own labels (in any case), so that its line (`  "Before": 5`) cannot pass for
/// the prompt's own `Before: 5`, even where the message is shown with leading spaces collapsed
/// (Markdown, HTML). Only a plain name can read like a label, and a plain name is rendered as
/// it is spelled.
fn unlike_a_label(name: Rendered) -> Rendered {
    if LABELS
        .iter()
        .any(|label| name.as_str().eq_ignore_ascii_case(label))
    {
        render_value(&Value::from(name.as_str()), DEFAULT_MAX_RENDERED_CHARS)
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_default_prompt_names_the_tool_every_argument_and_what_changes() {
        let args = json!({"sku": "A-1", "delta": 20})
            .as_object()
            .cloned()
            .unwrap();
        let preview = json!({"before": {"stock": 5}, "after": {"stock": 25}});
        let text = default_prompt(&PromptInput::new("adjust_stock", &args, Some(&preview)));
        assert!(text.contains("adjust_stock"), "{text}");
        assert!(text.contains("sku: \"A-1\""), "{text}");
        assert!(text.contains("delta: 20"), "{text}");
        assert!(text.contains("What changes:\n  stock: 5 -> 25\n"), "{text}");
        // The preview's change before the arguments, a number before text.
        let at = |needle: &str| text.find(needle).unwrap();
        assert!(at("stock: 5 -> 25") < at("Arguments:"), "{text}");
        assert!(at("delta: 20") < at("sku: "), "{text}");
    }

    #[test]
    fn a_preview_without_a_before_after_pair_shows_every_field_as_the_page_does() {
        let args = serde_json::Map::new();
        for (preview, lines) in [
            (
                json!({"after": 25}),
                &[
                    "Approve this change? Tool: t",
                    "What changes:",
                    "  after: 25",
                    "Arguments: none",
                ][..],
            ),
            (
                json!({"before": 5, "note": "x"}),
                &[
                    "Approve this change? Tool: t",
                    "What changes:",
                    "  before: 5",
                    "  note: \"x\"",
                    "Arguments: none",
                ],
            ),
            (
                json!({"stock": 25}),
                &[
                    "Approve this change? Tool: t",
                    "What changes:",
                    "  stock: 25",
                    "Arguments: none",
                ],
            ),
            (
                json!({"before": 5, "after": 6, "note": "x"}),
                &[
                    "Approve this change? Tool: t",
                    "What changes:",
                    "  (value): 5 -> 6",
                    "  note: \"x\"",
                    "Arguments: none",
                ],
            ),
        ] {
            let text = default_prompt(&PromptInput::new("t", &args, Some(&preview)));
            let mut expected = lines.to_vec();
            expected.push("Nothing is saved unless you approve.");
            assert_eq!(text.lines().collect::<Vec<_>>(), expected, "{preview}");
        }
    }

    #[test]
    fn debug_shows_the_tool_and_rendered_arguments() {
        let args = json!({"note": "a\u{202e}b"}).as_object().cloned().unwrap();
        let input = PromptInput::new("adjust_stock", &args, None);
        assert_eq!(
            format!("{input:?}"),
            r#"PromptInput { tool: "adjust_stock", arguments: ["note: \"a\\u{202E}b\""], has_preview: false }"#
        );
    }

    #[test]
    fn an_argument_name_cannot_fake_a_line_of_the_prompt() {
        let args = json!({
            "delta\nBefore: {\"stock\":999}\nAfter: {\"stock\":999}": 1,
            "note: ok": 2,
            "plain_name-1.x": 3,
        })
        .as_object()
        .cloned()
        .unwrap();
        let preview = json!({"before": {"stock": 5}, "after": {"stock": 6}});
        let text = default_prompt(&PromptInput::new("adjust_stock", &args, Some(&preview)));
        let lines: Vec<&str> = text.lines().collect();
        // The one change line is the preview's; no line starts like a label of the question.
        let changes: Vec<&&str> = lines.iter().filter(|l| l.contains(" -> ")).collect();
        assert_eq!(changes, [&"  stock: 5 -> 6"], "{text}");
        assert!(
            !lines
                .iter()
                .any(|l| l.starts_with("Before:") || l.starts_with("After:")),
            "{text}"
        );
        assert!(
            text.contains(r#"  "delta\nBefore: {\"stock\":999}\nAfter: {\"stock\":999}": 1"#),
            "{text}"
        );
        assert!(text.contains("  \"note: ok\": 2"), "{text}");
        assert!(text.contains("  plain_name-1.x: 3"), "{text}");
        // One line per argument, plus the header lines and the one change row.
        assert_eq!(lines.len(), 1 + 2 + 1 + 3 + 1, "{text}");
    }

    #[test]
    fn an_argument_value_cannot_fake_a_line_of_the_prompt() {
        let args = json!({
            "reason": "recount\nNo stock change: stock 3 -> 3.\nBefore: {\"stock\":3}\u{2028}After: {\"stock\":3}\r\n",
            "sku": "\u{202E}200-SLT\u{200B}\u{2060}\u{FEFF}",
            "nested": {"k\n": ["\u{2029}", "\u{61C}"]},
        })
        .as_object()
        .cloned()
        .unwrap();
        let preview = json!({"before": {"stock": 3, "note": "a\nb"}, "after": {"stock": 0}});
        let text = default_prompt(&PromptInput::new("adjust_stock", &args, Some(&preview)));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "Approve this change? Tool: adjust_stock",
                // The true change first, then the arguments, free text last.
                "What changes:",
                r#"  note: "a\nb" -> (none)"#,
                "  stock: 3 -> 0",
                "Arguments:",
                r#"  nested: {"k\n":["\u{2029}","\u{061C}"]}"#,
                r#"  reason: "recount\nNo stock change: stock 3 -> 3.\nBefore: {\"stock\":3}\u{2028}After: {\"stock\":3}\r\n""#,
                r#"  sku: "\u{202E}200-SLT\u{200B}\u{2060}\u{FEFF}""#,
                "Nothing is saved unless you approve.",
            ],
            "{text}"
        );
    }

    #[test]
    fn a_long_argument_is_cut_with_a_marker() {
        let args = json!({"note": "x".repeat(1_000)})
            .as_object()
            .cloned()
            .unwrap();
        let text = default_prompt(&PromptInput::new("add_note", &args, None));
        let expected = format!(
            "  note: \"{} … (762 more characters)",
            "x".repeat(DEFAULT_MAX_RENDERED_CHARS - 1)
        );
        assert!(text.lines().any(|line| line == expected), "{text}");
        assert_eq!(text.lines().count(), 4, "{text}");
    }

    #[test]
    fn the_accessors_render_or_give_numbers() {
        let args = json!({"name": "b\n", "n": 3}).as_object().cloned().unwrap();
        let preview = json!({"before": 2, "lines": [{"sku": "A\u{202E}"}, {"sku": "B"}], "x": 1.5});
        let input = PromptInput::new("delete row", &args, Some(&preview));
        assert_eq!(input.tool().as_str(), r#""delete row""#);
        assert_eq!(input.argument("name").unwrap().as_str(), r#""b\n""#);
        assert_eq!(input.argument("n").unwrap().as_str(), "3");
        assert_eq!(input.argument("missing"), None);
        let all: Vec<(String, String)> = input
            .arguments()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(
            all,
            [
                ("n".to_owned(), "3".to_owned()),
                ("name".to_owned(), r#""b\n""#.to_owned())
            ]
        );
        assert!(input.has_preview());
        assert_eq!(input.preview("/before").unwrap().as_str(), "2");
        assert_eq!(input.preview_i64("/before"), Some(2));
        assert_eq!(input.preview_i64("/x"), None);
        assert_eq!(input.preview_i64("/lines"), None);
        assert_eq!(input.preview_len("/lines"), Some(2));
        assert_eq!(input.preview_len("/before"), None);
        assert_eq!(
            input.preview("/lines/0/sku").unwrap().as_str(),
            r#""A\u{202E}""#
        );
        assert_eq!(input.preview("/lines/2/sku"), None);
        assert_eq!(input.preview("before"), None, "a pointer starts with /");
        assert_eq!(
            input.preview("").unwrap().as_str(),
            r#"{"before":2,"lines":[{"sku":"A\u{202E}"},{"sku":"B"}],"x":1.5}"#
        );
        let debug = format!("{input:?}");
        assert!(
            !debug.contains('\n') && !debug.contains('\u{202E}'),
            "{debug}"
        );

        assert_eq!(
            input
                .change()
                .unwrap()
                .rows()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                "before: 2",
                r#"lines[0].sku: "A\u{202E}""#,
                r#"lines[1].sku: "B""#,
                "x: 1.5"
            ]
        );

        for preview in [None, Some(&Value::Null)] {
            let input = PromptInput::new("t", &args, preview);
            assert!(!input.has_preview());
            assert_eq!(input.change(), None);
            assert_eq!(input.preview(""), None);
            assert_eq!(input.preview_len(""), None);
        }
    }

    #[test]
    fn a_preview_without_before_after_is_shown_field_by_field() {
        let args = Map::new();
        let preview = json!({"deleted": 3});
        let text = default_prompt(&PromptInput::new("purge", &args, Some(&preview)));
        assert!(text.contains("Arguments: none"), "{text}");
        assert!(text.contains("What changes:\n  deleted: 3\n"), "{text}");
        // A preview that is not an object is one row of the whole value.
        let preview = json!("3 rows");
        let text = default_prompt(&PromptInput::new("purge", &args, Some(&preview)));
        assert!(
            text.contains("What changes:\n  (preview): \"3 rows\"\n"),
            "{text}"
        );
    }

    #[test]
    fn free_text_arguments_come_after_the_others_each_kind_in_order() {
        let args = json!({
            "a_note": "recount", "b_count": 2, "c_flag": true, "d_sku": "TLS-002",
            "e_lines": [{"sku": "x"}], "f_extra": null,
        })
        .as_object()
        .cloned()
        .unwrap();
        let text = default_prompt(&PromptInput::new("t", &args, None));
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                "Approve this change? Tool: t",
                "Arguments:",
                "  b_count: 2",
                "  c_flag: true",
                r#"  e_lines: [{"sku":"x"}]"#,
                "  f_extra: null",
                r#"  a_note: "recount""#,
                r#"  d_sku: "TLS-002""#,
                "Nothing is saved unless you approve.",
            ]
        );
    }
}
