//! One model of what a write changes: the rows of its preview, which the form's question and the
//! approval page both show, so a person reads the same change in either place. Pure: no IO, and
//! the walk uses an explicit stack, so a preview of any depth is read without recursion.

use std::fmt;

use serde_json::{Map, Value};

use crate::render::{DEFAULT_MAX_RENDERED_CHARS, Rendered, render_key, render_value};

/// What a write changes, as rows a person reads: the same rows in the form's question and on
/// the approval page.
///
/// A preview is the value a tool's dry run computed (stock before and after, the priced order
/// lines). [`Change::of_preview`] reads it into [`ChangeRow`]s:
///
/// - a pair of fields becomes one before/after row: `{"before": .., "after": ..}` (two objects
///   pair field by field, anything else is one row), or `previousX` beside `newX` (else beside
///   `x`), shown as the field `x`;
/// - nested objects and arrays are walked with their path (`lines[0].stock`);
/// - every other value (a scalar, an empty object or array) is a plain row.
///
/// Every name and value in a row went through [`render_key`] or [`render_value`], so nothing in
/// a preview (which may echo what a model wrote) can start a line, reorder the text or hide a
/// character; a row reads as one line ([`ChangeRow`]'s `Display`).
///
/// ```
/// use mcp_write_guard_core::{Change, ChangeRow};
/// use serde_json::json;
///
/// let preview = json!({"sku": "TLS-002", "previousStock": 3, "newStock": 1});
/// let change = Change::of_preview(&preview);
/// let lines: Vec<String> = change.rows().iter().map(ToString::to_string).collect();
/// assert_eq!(lines, ["stock: 3 -> 1", r#"sku: "TLS-002""#]);
/// assert!(matches!(&change.rows()[0], ChangeRow::Change { field, .. } if field.as_str() == "stock"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    rows: Vec<ChangeRow>,
}

/// One row of a [`Change`]; every text in it is [`Rendered`].
///
/// As text (`Display`) a row is one line: `field: before -> after`, or `field: value`. A field
/// is a path of names as [`render_key`] shows them, joined by `.` and `[i]` (a name that holds
/// a `.` is quoted, so `{"a.b": 1}` and `{"a": {"b": 1}}` read differently); `(preview)` names
/// a preview that is not an object and `(value)` a top-level before/after pair: in parentheses,
/// which no name shows unquoted. A side of a pair without the field shows `(none)`, which no
/// value shows (a removed field does not read as one set to `null`). A value can show ` -> `
/// only inside its quotes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeRow {
    /// A field whose value changes.
    Change {
        /// The field's path.
        field: Rendered,
        /// Its value before the write (`(none)` when it had no such field).
        before: Rendered,
        /// Its value after the write (`(none)` when it has no such field).
        after: Rendered,
    },
    /// A value that describes the change without a before and after.
    Value {
        /// The field's path.
        field: Rendered,
        /// The value.
        value: Rendered,
    },
}

/// The field of a row that shows a preview that is not an object.
const WHOLE_PREVIEW: &str = "(preview)";
/// The field of a top-level before/after pair.
const VALUE: &str = "(value)";
/// The side of a before/after pair that does not have the field.
const NONE: &str = "(none)";

impl Change {
    /// The rows of `preview` (see [`Change`]); never empty: a preview with nothing
    /// to walk is one plain row, `(preview)`, of the whole value.
    pub fn of_preview(preview: &Value) -> Self {
        let mut rows = Vec::new();
        let mut stack = vec![Work::Walk(preview, String::new())];
        while let Some(work) = stack.pop() {
            match work {
                Work::Row(row) => rows.push(row),
                Work::Walk(value, path) => {
                    let mut next = Vec::new();
                    walk(value, &path, &mut next);
                    stack.extend(next.into_iter().rev());
                }
            }
        }
        if rows.is_empty() {
            rows.push(ChangeRow::Value {
                field: Rendered::composed(WHOLE_PREVIEW.to_owned()),
                value: render(preview),
            });
        }
        Self { rows }
    }

    /// The rows, in the order of the preview's fields (an object's fields in the order
    /// `serde_json` keeps them).
    pub fn rows(&self) -> &[ChangeRow] {
        &self.rows
    }
}

impl ChangeRow {
    /// The row's field.
    pub fn field(&self) -> &Rendered {
        match self {
            Self::Change { field, .. } | Self::Value { field, .. } => field,
        }
    }
}

/// One line: `field: before -> after`, or `field: value`.
impl fmt::Display for ChangeRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Change {
                field,
                before,
                after,
            } => write!(f, "{field}: {before} -> {after}"),
            Self::Value { field, value } => write!(f, "{field}: {value}"),
        }
    }
}

/// What is left to do of the walk, in order.
enum Work<'a> {
    /// Read this value at this path.
    Walk(&'a Value, String),
    /// A row already made.
    Row(ChangeRow),
}

fn render(value: &Value) -> Rendered {
    render_value(value, DEFAULT_MAX_RENDERED_CHARS)
}

/// The field of a row at `path`; `empty` names the top level.
fn field(path: &str, empty: &str) -> Rendered {
    Rendered::composed(if path.is_empty() {
        empty.to_owned()
    } else {
        path.to_owned()
    })
}

/// The work `value` at `path` gives, in order.
fn walk<'a>(value: &'a Value, path: &str, out: &mut Vec<Work<'a>>) {
    match value {
        Value::Object(map) if !map.is_empty() => walk_object(map, path, out),
        Value::Array(items) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                out.push(Work::Walk(item, format!("{path}[{i}]")));
            }
        }
        leaf => out.push(Work::Row(ChangeRow::Value {
            field: field(path, WHOLE_PREVIEW),
            value: render(leaf),
        })),
    }
}

/// A field's name in a row's path: as [`render_key`] shows it, quoted when it holds a `.` (the
/// path's separator), so that `{"a.b": 1}` and `{"a": {"b": 1}}` give different rows.
fn path_key(key: &str) -> Rendered {
    if key.contains('.') {
        render(&Value::String(key.to_owned()))
    } else {
        render_key(key)
    }
}

fn join(path: &str, key: &str) -> String {
    let key = path_key(key);
    if path.is_empty() {
        key.as_str().to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn walk_object<'a>(map: &'a Map<String, Value>, path: &str, out: &mut Vec<Work<'a>>) {
    if let (Some(before), Some(after)) = (map.get("before"), map.get("after")) {
        pair_before_after(before, after, path, out);
        for (key, value) in map {
            if key != "before" && key != "after" {
                out.push(Work::Walk(value, join(path, key)));
            }
        }
        return;
    }
    let partners: Vec<(&str, &str)> = map
        .keys()
        .filter_map(|key| Some((key.as_str(), partner_of(map, key)?)))
        .collect();
    for (key, value) in map {
        if partners.iter().any(|(_, partner)| *partner == key) {
            continue;
        }
        match partners.iter().find(|(previous, _)| *previous == key) {
            Some((_, partner)) => out.push(Work::Row(ChangeRow::Change {
                field: Rendered::composed(join(
                    path,
                    &lower_first(key.get("previous".len()..).unwrap_or_default()),
                )),
                before: render(value),
                after: map.get(*partner).map_or_else(absent, render),
            })),
            None => out.push(Work::Walk(value, join(path, key))),
        }
    }
}

/// `{"before": .., "after": ..}`: two non-empty objects pair field by field (a field only one
/// of them has is `(none)` in the other), anything else is one row (so `{}` against an object
/// shows both whole: nothing is paired against nothing).
fn pair_before_after(before: &Value, after: &Value, path: &str, out: &mut Vec<Work<'_>>) {
    if let (Value::Object(b), Value::Object(a)) = (before, after)
        && !b.is_empty()
        && !a.is_empty()
    {
        let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            out.push(Work::Row(ChangeRow::Change {
                field: Rendered::composed(join(path, key)),
                before: b.get(key).map_or_else(absent, render),
                after: a.get(key).map_or_else(absent, render),
            }));
        }
        return;
    }
    out.push(Work::Row(ChangeRow::Change {
        field: field(path, VALUE),
        before: render(before),
        after: render(after),
    }));
}

/// The field that holds the new value of `previousX`: `newX`, else `x`.
fn partner_of<'m>(map: &'m Map<String, Value>, key: &str) -> Option<&'m str> {
    let rest = key.strip_prefix("previous")?;
    if !rest.starts_with(|c: char| c.is_ascii_uppercase()) {
        return None;
    }
    [format!("new{rest}"), lower_first(rest)]
        .into_iter()
        .find_map(|name| map.get_key_value(&name).map(|(k, _)| k.as_str()))
}

fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_ascii_lowercase().to_string() + chars.as_str()
    })
}

fn absent() -> Rendered {
    Rendered::composed(NONE.to_owned())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn change(field: &str, before: Value, after: Value) -> ChangeRow {
        ChangeRow::Change {
            field: Rendered::composed(field.to_owned()),
            before: render(&before),
            after: render(&after),
        }
    }

    fn plain(field: &str, value: Value) -> ChangeRow {
        ChangeRow::Value {
            field: Rendered::composed(field.to_owned()),
            value: render(&value),
        }
    }

    fn rows(preview: &Value) -> Vec<ChangeRow> {
        Change::of_preview(preview).rows().to_vec()
    }

    #[test]
    fn previous_and_new_fields_pair_into_before_and_after() {
        let preview = json!({
            "sku": "TLS-002", "delta": -2, "previousStock": 3, "newStock": 1,
            "previousStatus": "pending", "status": "cancelled",
        });
        assert_eq!(
            rows(&preview),
            vec![
                plain("delta", json!(-2)),
                change("status", json!("pending"), json!("cancelled")),
                change("stock", json!(3), json!(1)),
                plain("sku", json!("TLS-002")),
            ]
        );
    }

    #[test]
    fn before_and_after_objects_pair_by_field_and_lines_keep_their_path() {
        assert_eq!(
            rows(&json!({"before": {"a": 1, "b": 2}, "after": {"a": 1, "c": 3}})),
            vec![
                change("a", json!(1), json!(1)),
                ChangeRow::Change {
                    field: Rendered::composed("b".to_owned()),
                    before: render(&json!(2)),
                    after: absent(),
                },
                ChangeRow::Change {
                    field: Rendered::composed("c".to_owned()),
                    before: absent(),
                    after: render(&json!(3)),
                },
            ]
        );
        // A removed field reads as removed, not as set to null; a field set to null reads so.
        let lines = |preview: Value| -> Vec<String> {
            rows(&preview).iter().map(ToString::to_string).collect()
        };
        assert_eq!(
            lines(json!({"before": {"a": 1, "b": null}, "after": {"b": 2}})),
            ["a: 1 -> (none)", "b: null -> 2"]
        );
        // An empty object against a non-empty one pairs nothing: both show whole.
        assert_eq!(
            lines(json!({"after": {}, "before": {"before": null}})),
            [r#"(value): {"before":null} -> {}"#]
        );
        assert_eq!(
            lines(json!({"before": {}, "after": {"sku": "A"}})),
            [r#"(value): {} -> {"sku":"A"}"#]
        );
        assert_eq!(
            rows(&json!({"before": 3, "after": 4})),
            vec![change(VALUE, json!(3), json!(4))]
        );
        assert_eq!(
            rows(&json!({"lines": [{"sku": "A", "previousStock": 5, "newStock": 4}]})),
            vec![
                change("lines[0].stock", json!(5), json!(4)),
                plain("lines[0].sku", json!("A")),
            ]
        );
        assert_eq!(
            rows(&json!("free text")),
            vec![plain(WHOLE_PREVIEW, json!("free text"))]
        );
        assert_eq!(rows(&json!({})), vec![plain(WHOLE_PREVIEW, json!({}))]);
    }

    /// The change table joins nested names with `.`, and a plain name may itself hold a `.`:
    /// different previews must give different rows, or the person cannot tell which change
    /// they approve (`{"a.b": 1}` and `{"a": {"b": 1}}`; `{"before": 3, "after": 4}` and
    /// `{"value": {"before": 3, "after": 4}}`; `5` and `{"preview": 5}`).
    #[test]
    fn different_previews_give_different_change_rows() {
        for (a, b) in [
            (json!({"a.b": 1}), json!({"a": {"b": 1}})),
            (
                json!({"before": 3, "after": 4}),
                json!({"value": {"before": 3, "after": 4}}),
            ),
            (json!(5), json!({"preview": 5})),
            (json!({"a": []}), json!({"a": {}})),
            (json!({"a": [], "b": 1}), json!({"b": 1})),
        ] {
            assert_ne!(rows(&a), rows(&b), "{a} / {b}");
        }
    }

    #[test]
    fn empty_objects_and_arrays_are_rows_of_their_own() {
        assert_eq!(
            rows(&json!({"lines": [], "note": {}, "n": 1})),
            vec![
                plain("lines", json!([])),
                plain("n", json!(1)),
                plain("note", json!({})),
            ]
        );
        assert_eq!(
            rows(&json!({"x": {"before": {}, "after": {}}})),
            vec![change("x", json!({}), json!({}))]
        );
    }

    #[test]
    fn a_row_reads_as_one_line() {
        let preview = json!({
            "previousStock": 3, "newStock": 1,
            "reason": "recount\nstock: 3 -> 3\u{202E}",
            "we\nird": {"before": 1, "after": 2},
        });
        let lines: Vec<String> = rows(&preview).iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "stock: 3 -> 1",
                r#"reason: "recount\nstock: 3 -> 3\u{202E}""#,
                r#""we\nird": 1 -> 2"#,
            ]
        );
        assert_eq!(rows(&preview)[0].field().as_str(), "stock");
    }

    #[test]
    fn a_deep_preview_is_read_without_recursion() {
        let mut value = json!(1);
        for _ in 0..5_000 {
            value = Value::Array(vec![value]);
        }
        let rows = rows(&value);
        assert_eq!(rows.len(), 1);
        assert!(rows[0].field().as_str().starts_with("[0][0]"));
        assert_eq!(rows[0].to_string().len(), 5_000 * 3 + 3);
        std::mem::forget(value);
    }

    use crate::test_support::forbidden;

    fn risky_string() -> impl Strategy<Value = String> {
        let c = prop_oneof![
            4 => proptest::char::range('a', 'e'),
            2 => prop_oneof![Just('.'), Just('['), Just(']'), Just('"'), Just(':'), Just(' ')],
            1 => prop_oneof![Just('\n'), Just('\r'), Just('\u{202E}'), Just('\u{2028}'), Just('\u{85}')],
            1 => any::<char>(),
        ];
        proptest::collection::vec(c, 0..8).prop_map(|cs| cs.into_iter().collect())
    }

    /// Names that steer the walk: pairs, previous/new, and ordinary ones.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            2 => prop_oneof![
                Just("before"), Just("after"), Just("previousStock"), Just("newStock"),
                Just("stock"), Just("previousStatus"), Just("status"), Just("lines"),
            ]
            .prop_map(str::to_owned),
            3 => risky_string(),
        ]
    }

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            risky_string().prop_map(Value::String),
        ]
    }

    /// A preview whose members are named by `names`.
    fn preview_named(names: BoxedStrategy<String>) -> impl Strategy<Value = Value> {
        leaf().prop_recursive(4, 32, 4, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((names.clone(), inner), 0..5)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    fn preview() -> impl Strategy<Value = Value> {
        preview_named(key().boxed())
    }

    /// A name that pairs with nothing: neither `before`/`after` nor `previous…`.
    fn plain_name() -> impl Strategy<Value = String> {
        risky_string().prop_filter("no pair", |k| {
            k != "before" && k != "after" && !k.starts_with("previous")
        })
    }

    /// A preview without pairs.
    fn plain_preview() -> impl Strategy<Value = Value> {
        preview_named(plain_name().boxed())
    }

    /// The leaves of `value` (scalars, empty objects and arrays) with their paths as a row
    /// names them, in order.
    fn leaves(value: &Value, path: &str, out: &mut Vec<(String, Value)>) {
        match value {
            Value::Object(map) if !map.is_empty() => {
                for (key, item) in map {
                    leaves(item, &join(path, key), out);
                }
            }
            Value::Array(items) if !items.is_empty() => {
                for (i, item) in items.iter().enumerate() {
                    leaves(item, &format!("{path}[{i}]"), out);
                }
            }
            leaf => {
                let path = if path.is_empty() { WHOLE_PREVIEW } else { path };
                out.push((path.to_owned(), leaf.clone()));
            }
        }
    }

    proptest! {
        /// Without pairs, every leaf of the preview is exactly one plain row: its path, its
        /// value, in order, and nothing else.
        #[test]
        fn every_leaf_is_exactly_one_row(preview in plain_preview()) {
            let mut expected = Vec::new();
            leaves(&preview, "", &mut expected);
            let expected: Vec<ChangeRow> =
                expected.iter().map(|(path, value)| plain(path, value.clone())).collect();
            prop_assert_eq!(rows(&preview), expected);
        }

        /// Any preview: at least one row, each one line without a control, format or
        /// separator character; every scalar of the preview shows in some row.
        #[test]
        fn every_row_is_one_clean_line(preview in preview()) {
            let rows = rows(&preview);
            prop_assert!(!rows.is_empty());
            let lines: Vec<String> = rows.iter().map(ToString::to_string).collect();
            for line in &lines {
                prop_assert!(!line.chars().any(forbidden), "{:?}", line);
            }
            // A long value is cut with a marker; then a scalar inside it may be left off.
            prop_assume!(!lines.iter().any(|line| line.contains(" more character")));
            let mut all = Vec::new();
            leaves(&preview, "", &mut all);
            for (_, leaf) in all {
                let shown = render(&leaf);
                prop_assert!(
                    lines.iter().any(|line| line.contains(shown.as_str())),
                    "{} not in {:?}", shown, lines
                );
            }
        }
    }
}
