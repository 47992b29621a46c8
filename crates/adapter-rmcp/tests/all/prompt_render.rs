//! Whatever the model puts into an argument's name or value, the question a person reads has
//! exactly the lines its wording intends and no control, format or separator character of its
//! own making: the default wording, and a tool's own wording built from `PromptInput`.

use mcp_write_guard_rmcp::{PromptInput, default_prompt};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use unicode_general_category::{GeneralCategory, get_general_category};

/// Cc, Cf, Zl, Zp: what may not reach the person, except the wording's own `\n`.
fn forbidden(c: char) -> bool {
    c != '\n'
        && matches!(
            get_general_category(c),
            GeneralCategory::Control
                | GeneralCategory::Format
                | GeneralCategory::LineSeparator
                | GeneralCategory::ParagraphSeparator
        )
}

/// Characters that mix plain ASCII with every range that matters here: line breaks and other
/// controls, U+2028/U+2029, bidi controls, zero-width characters, tags, and anything at all.
fn risky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => proptest::char::range(' ', '~'),
        1 => prop_oneof![Just('\n'), Just('\r'), Just('"'), Just('\\'), Just(':')],
        2 => proptest::char::range('\u{0}', '\u{A0}'),
        2 => proptest::char::range('\u{2000}', '\u{206F}'),
        1 => proptest::char::range('\u{FE00}', '\u{FEFF}'),
        1 => proptest::char::range('\u{E0000}', '\u{E007F}'),
        1 => prop_oneof![Just('\u{061C}'), Just('\u{00AD}'), Just('\u{180E}'), Just('\u{FFF9}')],
        2 => any::<char>(),
    ]
}

fn risky_string() -> impl Strategy<Value = String> {
    proptest::collection::vec(risky_char(), 0..60).prop_map(|cs| cs.into_iter().collect())
}

fn arguments() -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::vec((risky_string(), risky_string()), 0..5).prop_map(|entries| {
        entries
            .into_iter()
            .map(|(name, value)| (name, Value::String(value)))
            .collect()
    })
}

fn assert_clean(text: &str) -> Result<(), TestCaseError> {
    let bad: Vec<char> = text.chars().filter(|c| forbidden(*c)).collect();
    prop_assert!(bad.is_empty(), "{bad:?} in {text:?}");
    Ok(())
}

/// A tool's own wording, as a tool author writes it: one line from rendered values only.
fn custom(input: &PromptInput<'_>) -> String {
    let names: Vec<String> = input
        .arguments()
        .map(|(name, _)| name.to_string())
        .collect();
    format!(
        "Set {} to {} in {} (now {}, was {}; every argument: {})?",
        shown(input.argument("name")),
        shown(input.argument("value")),
        input.tool(),
        shown(input.preview("/after")),
        shown(input.preview("/before/note")),
        names.join(", "),
    )
}

/// A rendered value as the wording shows it; nothing where there is none.
fn shown(value: Option<impl std::fmt::Display>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_default_prompt_has_its_own_lines_only(
        arguments in arguments(),
        tool in risky_string(),
        note in risky_string(),
        with_before_after in any::<bool>(),
    ) {
        let preview = if with_before_after {
            json!({"before": {"note": note.clone()}, "after": note.clone()})
        } else {
            json!({"note": note.clone()})
        };
        let text = default_prompt(&PromptInput::new(&tool, &arguments, Some(&preview)));
        assert_clean(&text)?;
        // Header, "What changes:" and its one row (the pair, or the note): the true change
        // first; then "Arguments:" (or "Arguments: none"), one line per argument, the closing
        // line.
        let preview_lines = 2;
        let expected = 1 + preview_lines + 1 + arguments.len() + 1;
        prop_assert_eq!(text.split('\n').count(), expected, "{:?}", text);
        let lines: Vec<&str> = text.split('\n').collect();
        prop_assert!(lines[0].starts_with("Approve this change? Tool: "));
        prop_assert_eq!(*lines.last().unwrap(), "Nothing is saved unless you approve.");
        prop_assert_eq!(lines[1], "What changes:");
        if with_before_after {
            prop_assert!(lines[2].starts_with("  (value): {\"note\":"), "{:?}", text);
        } else {
            prop_assert!(lines[2].starts_with("  note: \""), "{:?}", text);
        }
        prop_assert!(lines[1 + preview_lines].starts_with("Arguments:"));
        let first = 2 + preview_lines;
        let argument_lines = &lines[first..first + arguments.len()];
        prop_assert!(argument_lines.iter().all(|l| l.starts_with("  ")), "{:?}", text);
    }

    #[test]
    fn a_custom_wording_from_rendered_values_stays_one_clean_line(
        mut arguments in arguments(),
        name in risky_string(),
        value in risky_string(),
        tool in risky_string(),
        note in risky_string(),
    ) {
        arguments.insert("name".to_owned(), Value::String(name));
        arguments.insert("value".to_owned(), Value::String(value));
        let preview = json!({"before": {"note": note.clone()}, "after": note});
        let text = custom(&PromptInput::new(&tool, &arguments, Some(&preview)));
        assert_clean(&text)?;
        prop_assert!(!text.contains('\n'), "{:?}", text);
    }
}
