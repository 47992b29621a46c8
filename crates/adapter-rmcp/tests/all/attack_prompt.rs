//! Attacks on the question a person reads: an argument the person is not shown, argument names
//! that pass for the question's own lines, and whether two different argument objects can give
//! the same question.

use mcp_write_guard_rmcp::{Outcome, PromptInput, default_prompt};
use proptest::prelude::*;
use rstest_reuse::apply;
use serde_json::{Map, Value, json};

use crate::common::{Era, Harness, Reply, both_eras, text_of};

/// `add_row` is an additive write that takes no confirmation token. The question leaves a
/// `confirmationToken` member out (it is the token of a token-gated tool), so on this tool the
/// model's member, holding whatever it likes, would reach the tool without the person seeing
/// it. The call is refused before any preview or question: nothing applied, nobody asked, one
/// `bad_arguments` record. Without the member the same call is asked and applied.
#[apply(both_eras)]
async fn a_confirmation_token_on_a_tool_that_takes_none_is_refused_unseen(era: Era) {
    let h = Harness::start(era).await;
    h.script([Reply::Approve]);
    let before = h.state();
    let hidden = json!({"overwrite": true, "alsoDelete": ["everything"]});
    let result = h
        .call(
            "add_row",
            json!({"name": "a", "value": 1, "confirmationToken": hidden}),
        )
        .await;
    h.assert_refused(
        &result,
        &before,
        Outcome::BadArguments,
        Some("a confirmationToken argument for a tool that takes none"),
    );
    assert_eq!(h.state().previews, before.previews, "a preview ran");
    assert!(h.asked().is_empty(), "asked {:?}", h.asked());
    assert!(
        text_of(&result).contains("Call it again without one"),
        "{result:?}"
    );

    let result = h.call("add_row", json!({"name": "a", "value": 1})).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(h.state().rows.get("a"), Some(&1));
    assert_eq!(h.asked().len(), 1);
}

fn risky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => proptest::char::range('a', 'e'),
        2 => prop_oneof![
            Just('"'), Just('\\'), Just(':'), Just(' '), Just('{'), Just('}'), Just(','),
            Just('u'), Just('n'), Just('0'), Just('.'), Just('…'), Just('('), Just(')')
        ],
        1 => prop_oneof![Just('\n'), Just('\r'), Just('\u{202E}'), Just('\u{200B}'), Just('\u{85}')],
        1 => any::<char>(),
    ]
}

fn risky_string() -> impl Strategy<Value = String> {
    proptest::collection::vec(risky_char(), 0..8).prop_map(|cs| cs.into_iter().collect())
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3_i64..3).prop_map(Value::from),
        prop_oneof![Just(0.0), Just(-0.0), Just(1.0), Just(0.5), Just(1e21)].prop_map(Value::from),
        risky_string().prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            proptest::collection::vec((risky_string(), inner), 0..3)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

fn arguments() -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::vec((risky_string(), value()), 0..4)
        .prop_map(|entries| entries.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Injectivity of the whole default question: two different argument objects (nothing
    /// cut) never give the same text.
    #[test]
    fn two_different_argument_objects_never_give_the_same_question(
        a in arguments(),
        b in arguments(),
    ) {
        prop_assume!(a != b);
        let preview = json!({"before": 1, "after": 2});
        let qa = default_prompt(&PromptInput::new("t", &a, Some(&preview)));
        let qb = default_prompt(&PromptInput::new("t", &b, Some(&preview)));
        prop_assume!(!qa.contains(" more character"));
        prop_assert_ne!(qa, qb);
    }
}

/// A near miss that the random search above also finds easily: the same argument written
/// with different spellings must still differ in the question.
#[test]
fn spellings_that_imitate_escapes_give_different_questions() {
    let preview = json!({"before": 1, "after": 2});
    let pairs = [
        (json!({"a": "x\ny"}), json!({"a": "x\\ny"})),
        (json!({"a": "\u{202E}"}), json!({"a": "\\u{202E}"})),
        (json!({"a": 1}), json!({"a": 1.0})),
        (json!({"a": 0.0}), json!({"a": -0.0})),
        (json!({"a\": \"b": 1}), json!({"a": "b\": 1"})),
        (json!({"a": {"b": 1}}), json!({"a": "{\"b\":1}"})),
        (json!({"a.b": 1}), json!({"a": {"b": 1}})),
    ];
    for (a, b) in pairs {
        let (a, b) = (a.as_object().unwrap(), b.as_object().unwrap());
        let qa = default_prompt(&PromptInput::new("t", a, Some(&preview)));
        let qb = default_prompt(&PromptInput::new("t", b, Some(&preview)));
        assert_ne!(qa, qb, "{a:?} / {b:?}");
    }
}

/// The default question's own lines were once `Before: <value>` and `After: <value>`, and are
/// now `What changes:` with one `  <field>: <before> -> <after>` row per change, then
/// `Arguments:`; an argument line is `  <name>: <value>`, a plain name shown as it is. So
/// arguments named `Before`, `After` or `Arguments` (the tool ignores members it does not know;
/// the model may send any) would put lines into the question that differ from the guard's own
/// only by two leading spaces, which a client that renders the message as Markdown or HTML (most
/// chat clients) does not even show. They are quoted; and no argument line can hold a
/// ` -> ` outside quotes, so the only change a person reads is the preview's.
#[test]
fn an_argument_name_cannot_pass_for_the_questions_own_lines() {
    let args = json!({
        "Before": {"stock": 5},
        "After": {"stock": 6},
        "Arguments": "none",
        "delta": 999,
    });
    let preview = json!({"before": {"stock": 5}, "after": {"stock": 1004}});
    let text = default_prompt(&PromptInput::new(
        "adjust_stock",
        args.as_object().unwrap(),
        Some(&preview),
    ));
    // What a Markdown/HTML client shows: leading spaces collapsed.
    let shown: Vec<&str> = text.lines().map(str::trim_start).collect();
    let befores = shown.iter().filter(|l| l.starts_with("Before:")).count();
    let afters = shown.iter().filter(|l| l.starts_with("After:")).count();
    assert_eq!((befores, afters), (0, 0), "{text}");
    let labels = shown.iter().filter(|l| l.starts_with("Arguments")).count();
    assert_eq!(labels, 1, "{text}");
    let changes: Vec<&&str> = shown.iter().filter(|l| l.contains(" -> ")).collect();
    assert_eq!(changes, [&"stock: 5 -> 1004"], "{text}");
}
