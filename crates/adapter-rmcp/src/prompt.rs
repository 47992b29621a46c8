//! The question the user is asked.
//!
//! By default: the tool, every argument (except the confirmation token), and the values the
//! preview returned (its `before` and `after` when it has them, else the whole preview). A tool
//! may supply its own wording with [`crate::WriteGuardBuilder::prompt`].

use std::{fmt::Write as _, sync::Arc};

use serde_json::{Map, Value};

/// Everything a prompt may be built from.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct PromptInput<'a> {
    /// The tool that will write.
    pub tool: &'a str,
    /// The captured arguments, without the confirmation token.
    pub arguments: &'a Map<String, Value>,
    /// The preview value (the dry run's `structuredContent`, else its text), if the tool
    /// supports previews.
    pub preview: Option<&'a Value>,
}

impl<'a> PromptInput<'a> {
    /// Bundles a prompt's inputs.
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
}

/// A tool's own prompt wording.
pub(crate) type PromptFn = Arc<dyn Fn(&PromptInput<'_>) -> String + Send + Sync>;

/// The default prompt: tool, every argument, the preview's before/after values.
pub fn default_prompt(input: &PromptInput<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Approve this change? Tool: {}", input.tool);
    if input.arguments.is_empty() {
        out.push_str("Arguments: none\n");
    } else {
        out.push_str("Arguments:\n");
        for (name, value) in input.arguments {
            let _ = writeln!(out, "  {}: {}", key(name), compact(value));
        }
    }
    match input.preview {
        None | Some(Value::Null) => {}
        Some(preview) => {
            let before = preview.get("before");
            let after = preview.get("after");
            if before.is_some() || after.is_some() {
                if let Some(before) = before {
                    let _ = writeln!(out, "Before: {}", compact(before));
                }
                if let Some(after) = after {
                    let _ = writeln!(out, "After: {}", compact(after));
                }
            } else {
                let _ = writeln!(out, "Preview: {}", compact(preview));
            }
        }
    }
    out.push_str("Nothing is saved unless you approve.");
    out
}

/// An argument name as shown: as it is when it is a plain identifier (letters, digits, `_`,
/// `-`, `.`), quoted and escaped otherwise, so that a name the model chose cannot start a line
/// of its own (a fake `Before:` or `After:`) or look like something else.
fn key(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if plain {
        name.to_owned()
    } else {
        format!("{name:?}")
    }
}

fn compact(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_default_prompt_names_the_tool_every_argument_and_before_after() {
        let args = json!({"sku": "A-1", "delta": 20})
            .as_object()
            .cloned()
            .unwrap();
        let preview = json!({"before": {"stock": 5}, "after": {"stock": 25}});
        let text = default_prompt(&PromptInput::new("adjust_stock", &args, Some(&preview)));
        assert!(text.contains("adjust_stock"), "{text}");
        assert!(text.contains("sku: \"A-1\""), "{text}");
        assert!(text.contains("delta: 20"), "{text}");
        assert!(text.contains("Before: {\"stock\":5}"), "{text}");
        assert!(text.contains("After: {\"stock\":25}"), "{text}");
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
        let before: Vec<&&str> = lines.iter().filter(|l| l.starts_with("Before:")).collect();
        let after: Vec<&&str> = lines.iter().filter(|l| l.starts_with("After:")).collect();
        assert_eq!(before, [&"Before: {\"stock\":5}"], "{text}");
        assert_eq!(after, [&"After: {\"stock\":6}"], "{text}");
        assert!(
            text.contains(r#"  "delta\nBefore: {\"stock\":999}\nAfter: {\"stock\":999}": 1"#),
            "{text}"
        );
        assert!(text.contains("  \"note: ok\": 2"), "{text}");
        assert!(text.contains("  plain_name-1.x: 3"), "{text}");
        // One line per argument, plus the header lines.
        assert_eq!(lines.len(), 1 + 1 + 3 + 2 + 1, "{text}");
    }

    #[test]
    fn a_preview_without_before_after_is_shown_whole() {
        let args = Map::new();
        let preview = json!({"deleted": 3});
        let text = default_prompt(&PromptInput::new("purge", &args, Some(&preview)));
        assert!(text.contains("Arguments: none"), "{text}");
        assert!(text.contains("Preview: {\"deleted\":3}"), "{text}");
    }
}
