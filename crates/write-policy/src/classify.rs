//! Classification of a tool into read, additive write or destructive write.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::annotations::{Annotations, EffectiveAnnotations, effective_annotations};

/// The name of the input property that makes a tool token-gated.
pub const CONFIRMATION_TOKEN_ARG: &str = "confirmationToken";

/// What a tool does to its environment, as far as the write gate is concerned.
///
/// Serialises as `"read"`, `"additiveWrite"` or `"destructiveWrite"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolClass {
    /// The tool claims, with `readOnlyHint: true`, to change nothing.
    Read,
    /// A write that claims, with `destructiveHint: false`, only to add.
    AdditiveWrite,
    /// Any other write: it may destroy or overwrite data.
    DestructiveWrite,
}

impl ToolClass {
    /// Whether calls to this tool are writes (anything but [`ToolClass::Read`]).
    pub fn is_write(self) -> bool {
        !matches!(self, Self::Read)
    }

    /// Whether this tool is a destructive write.
    pub fn is_destructive(self) -> bool {
        matches!(self, Self::DestructiveWrite)
    }

    /// The name used in JSON: `read`, `additiveWrite` or `destructiveWrite`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::AdditiveWrite => "additiveWrite",
            Self::DestructiveWrite => "destructiveWrite",
        }
    }
}

impl std::fmt::Display for ToolClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything the policy needs to know about one tool, borrowed from whatever representation
/// the caller has (an rmcp `Tool`, a JSON `tools/list` entry).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolFacts<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// The annotation object the server declares, if any.
    pub annotations: Option<&'a Annotations>,
    /// The tool's input JSON Schema (an object schema).
    pub input_schema: &'a Map<String, Value>,
}

impl<'a> ToolFacts<'a> {
    /// Bundles the facts about one tool.
    pub fn new(
        name: &'a str,
        annotations: Option<&'a Annotations>,
        input_schema: &'a Map<String, Value>,
    ) -> Self {
        Self {
            name,
            annotations,
            input_schema,
        }
    }
}

/// The classification of one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Classification {
    /// Read, additive write or destructive write.
    pub class: ToolClass,
    /// The input schema declares a [`CONFIRMATION_TOKEN_ARG`] property, so the tool is a
    /// destructive write whatever its annotations claim.
    pub token_gated: bool,
    /// The effective annotations of what is advertised for the tool (after any rewrite by
    /// [`advertised_annotations`]); always consistent with `class`.
    pub effective: EffectiveAnnotations,
}

/// Whether an input schema declares a `confirmationToken` property of the arguments object:
/// in its `properties`, or in the `properties` of a schema it is composed of (`allOf`, `anyOf`,
/// `oneOf`, `if`/`then`/`else`, and local `$ref`s to `#/$defs/…` or `#/definitions/…`),
/// whatever the property's own schema.
///
/// A composition nested deeper than [`MAX_SCHEMA_COMPOSITION`] (a `$ref` cycle, say) counts as
/// declaring it: the tool is then treated as a token-gated destructive write, the cautious
/// reading. A `$ref` to another document cannot be read here and declares nothing.
pub fn declares_confirmation_token(input_schema: &Map<String, Value>) -> bool {
    let mut read = ReadWithout::default();
    declares_token_in(input_schema, input_schema, 0, &mut read)
}

/// How deep [`declares_confirmation_token`] follows compositions and `$ref`s.
pub const MAX_SCHEMA_COMPOSITION: usize = 16;

/// For each schema already read and found not to declare the token (by its address in the
/// document), the greatest depth it was read at. Read again at that depth or less, it cannot
/// declare it either (only reaching the depth limit turns an answer to "declares", and there is
/// more room before the limit), so it is not read again. Each schema is read at most
/// `MAX_SCHEMA_COMPOSITION + 1` times: without this, `$ref`s that fan out to shared definitions
/// are followed once per path, exponentially many (7 levels of 10 `$ref`s took seconds).
#[derive(Default)]
struct ReadWithout(std::collections::HashMap<usize, usize>);

impl ReadWithout {
    fn covers(&self, schema: &Map<String, Value>, depth: usize) -> bool {
        self.0
            .get(&address(schema))
            .is_some_and(|&read_at| depth <= read_at)
    }

    fn remember(&mut self, schema: &Map<String, Value>, depth: usize) {
        let read_at = self.0.entry(address(schema)).or_insert(depth);
        *read_at = (*read_at).max(depth);
    }
}

fn address(schema: &Map<String, Value>) -> usize {
    std::ptr::from_ref(schema) as usize
}

fn declares_token_in(
    root: &Map<String, Value>,
    schema: &Map<String, Value>,
    depth: usize,
    read: &mut ReadWithout,
) -> bool {
    if depth > MAX_SCHEMA_COMPOSITION {
        return true;
    }
    if read.covers(schema, depth) {
        return false;
    }
    let declares = declares_token_here(schema)
        || composed_parts(root, schema).any(|part| declares_token_in(root, part, depth + 1, read));
    if !declares {
        read.remember(schema, depth);
    }
    declares
}

/// Whether `schema` itself lists the token among its `properties`.
fn declares_token_here(schema: &Map<String, Value>) -> bool {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|properties| properties.contains_key(CONFIRMATION_TOKEN_ARG))
}

/// The schemas `schema` is composed of, one level down: the members of `allOf`, `anyOf` and
/// `oneOf`, the `if`, `then` and `else` branches, and the target of a local `$ref`.
fn composed_parts<'a>(
    root: &'a Map<String, Value>,
    schema: &'a Map<String, Value>,
) -> impl Iterator<Item = &'a Map<String, Value>> {
    ["allOf", "anyOf", "oneOf"]
        .into_iter()
        .filter_map(|key| schema.get(key).and_then(Value::as_array))
        .flatten()
        .chain(
            ["if", "then", "else"]
                .into_iter()
                .filter_map(|key| schema.get(key)),
        )
        .filter_map(Value::as_object)
        .chain(schema.get("$ref").and_then(|r| local_ref(root, r)))
}

/// The schema a local `$ref` (`#`, `#/$defs/Name`, `#/definitions/Name`) points at.
fn local_ref<'a>(
    root: &'a Map<String, Value>,
    reference: &Value,
) -> Option<&'a Map<String, Value>> {
    let pointer = reference.as_str()?.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    pointer
        .strip_prefix('/')?
        .split('/')
        .try_fold(root, |object, part| {
            let part = part.replace("~1", "/").replace("~0", "~");
            object.get(&part)?.as_object()
        })
}

/// Classifies a tool.
///
/// - A tool whose input schema declares a `confirmationToken` property is a destructive write,
///   whatever its annotations claim.
/// - Otherwise a tool is a read only if `readOnlyHint` is exactly `true`.
/// - A write is additive only if `destructiveHint` is exactly `false`; otherwise destructive.
///
/// ```
/// use mcp_write_guard_policy::{classify, Annotations, ToolClass, ToolFacts};
/// let schema = serde_json::Map::new();
/// let claims_read = Annotations { read_only_hint: Some(true), ..Annotations::default() };
/// let c = classify(&ToolFacts::new("list_products", Some(&claims_read), &schema));
/// assert_eq!(c.class, ToolClass::Read);
/// // No annotations at all: the spec defaults make it a destructive write.
/// assert_eq!(classify(&ToolFacts::new("x", None, &schema)).class, ToolClass::DestructiveWrite);
/// ```
pub fn classify(tool: &ToolFacts<'_>) -> Classification {
    let token_gated = declares_confirmation_token(tool.input_schema);
    let effective = if token_gated {
        let mut advertised = tool.annotations.cloned().unwrap_or_default();
        force_destructive(&mut advertised);
        effective_annotations(Some(&advertised))
    } else {
        effective_annotations(tool.annotations)
    };
    let class = if effective.read_only {
        ToolClass::Read
    } else if effective.destructive {
        ToolClass::DestructiveWrite
    } else {
        ToolClass::AdditiveWrite
    };
    Classification {
        class,
        token_gated,
        effective,
    }
}

fn force_destructive(a: &mut Annotations) {
    a.read_only_hint = Some(false);
    a.destructive_hint = Some(true);
}

/// The annotations a guarded server must advertise for a tool, when they differ from what the
/// tool declares.
///
/// Returns `None` when the declared annotations can be advertised unchanged. A token-gated tool
/// (see [`declares_confirmation_token`]) must advertise `readOnlyHint: false` and
/// `destructiveHint: true` explicitly; if it does not already (including when it declares no
/// annotation object, or leaves either hint to its default), this returns the declared
/// annotations with those two fields set and every other field (title, idempotent, open-world)
/// kept.
///
/// ```
/// use mcp_write_guard_policy::{advertised_annotations, Annotations, ToolFacts};
/// let schema = serde_json::json!({"type": "object", "properties": {"confirmationToken": {"type": "string"}}});
/// let schema = schema.as_object().unwrap();
/// let claims = Annotations { read_only_hint: Some(true), title: Some("Purge".into()), ..Annotations::default() };
/// let advertised = advertised_annotations(&ToolFacts::new("purge", Some(&claims), schema)).unwrap();
/// assert_eq!(advertised.read_only_hint, Some(false));
/// assert_eq!(advertised.destructive_hint, Some(true));
/// assert_eq!(advertised.title.as_deref(), Some("Purge"));
/// ```
pub fn advertised_annotations(tool: &ToolFacts<'_>) -> Option<Annotations> {
    if !declares_confirmation_token(tool.input_schema) {
        return None;
    }
    let declared = tool.annotations.cloned().unwrap_or_default();
    let mut advertised = declared.clone();
    force_destructive(&mut advertised);
    (tool.annotations.is_none() || advertised != declared).then_some(advertised)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const HINT_VALUES: [Option<bool>; 3] = [None, Some(true), Some(false)];

    fn schema(with_token: bool) -> Map<String, Value> {
        let mut properties = json!({"id": {"type": "string"}});
        if with_token {
            properties[CONFIRMATION_TOKEN_ARG] = json!({"type": "string"});
        }
        json!({"type": "object", "properties": properties, "required": ["id"]})
            .as_object()
            .cloned()
            .unwrap()
    }

    /// The expected result, written from the rules of the MCP spec and the issue, not from the
    /// implementation: (class, effective [ro, destructive, idempotent, open_world], advertised).
    fn expected(
        hints: [Option<bool>; 4],
        title: Option<&str>,
        token: bool,
    ) -> (ToolClass, [bool; 4], Option<Annotations>) {
        let [ro, de, id, ow] = hints;
        // What is advertised: a token-gated tool must say readOnly false, destructive true.
        let (adv_ro, adv_de) = if token {
            (Some(false), Some(true))
        } else {
            (ro, de)
        };
        let class = if adv_ro == Some(true) {
            ToolClass::Read
        } else if adv_de == Some(false) {
            ToolClass::AdditiveWrite
        } else {
            ToolClass::DestructiveWrite
        };
        let eff_ro = adv_ro == Some(true);
        let eff = [
            eff_ro,
            if eff_ro {
                false
            } else {
                adv_de.unwrap_or(true)
            },
            if eff_ro { true } else { id.unwrap_or(false) },
            ow.unwrap_or(true),
        ];
        let needs_rewrite = token && !(ro == Some(false) && de == Some(true));
        let advertised = needs_rewrite.then(|| Annotations {
            title: title.map(str::to_owned),
            read_only_hint: Some(false),
            destructive_hint: Some(true),
            idempotent_hint: id,
            open_world_hint: ow,
        });
        (class, eff, advertised)
    }

    #[test]
    fn truth_table_all_81_hint_combinations_with_and_without_token() {
        let mut cases = 0;
        let mut seen_classes = std::collections::HashSet::new();
        for (i, hints) in HINT_VALUES
            .iter()
            .flat_map(|&ro| HINT_VALUES.iter().map(move |&de| (ro, de)))
            .flat_map(|(ro, de)| HINT_VALUES.iter().map(move |&id| (ro, de, id)))
            .flat_map(|(ro, de, id)| HINT_VALUES.iter().map(move |&ow| [ro, de, id, ow]))
            .enumerate()
        {
            // Alternate a title in, to check the rewrite keeps it.
            let title = (i % 2 == 0).then_some("A title");
            let annotations = Annotations {
                title: title.map(str::to_owned),
                read_only_hint: hints[0],
                destructive_hint: hints[1],
                idempotent_hint: hints[2],
                open_world_hint: hints[3],
            };
            for token in [false, true] {
                let input_schema = schema(token);
                let facts = ToolFacts::new("tool", Some(&annotations), &input_schema);
                let (class, eff, advertised) = expected(hints, title, token);
                let c = classify(&facts);
                let ctx = format!("hints {hints:?}, token {token}");
                assert_eq!(c.class, class, "{ctx}");
                assert_eq!(c.token_gated, token, "{ctx}");
                assert_eq!(
                    [
                        c.effective.read_only,
                        c.effective.destructive,
                        c.effective.idempotent,
                        c.effective.open_world
                    ],
                    eff,
                    "{ctx}"
                );
                assert_eq!(c.class.is_write(), class != ToolClass::Read, "{ctx}");
                assert_eq!(
                    c.class.is_destructive(),
                    class == ToolClass::DestructiveWrite
                );
                assert_eq!(advertised_annotations(&facts), advertised, "{ctx}");
                // Whatever is advertised classifies the same way when read back without the
                // schema's help (the rewrite is what clients see).
                let shown = advertised_annotations(&facts).unwrap_or_else(|| annotations.clone());
                let plain = Map::new();
                assert_eq!(
                    classify(&ToolFacts::new("tool", Some(&shown), &plain)).class,
                    class,
                    "{ctx}"
                );
                seen_classes.insert(class);
                cases += 1;
            }
        }
        assert_eq!(cases, 162);
        assert_eq!(seen_classes.len(), 3);
    }

    #[test]
    fn no_annotation_object_is_a_destructive_open_world_write() {
        for token in [false, true] {
            let input_schema = schema(token);
            let facts = ToolFacts::new("t", None, &input_schema);
            let c = classify(&facts);
            assert_eq!(c.class, ToolClass::DestructiveWrite);
            assert_eq!(c.effective, EffectiveAnnotations::SPEC_DEFAULTS);
            assert_eq!(c.token_gated, token);
            let expected_adv = token.then(|| Annotations {
                read_only_hint: Some(false),
                destructive_hint: Some(true),
                ..Annotations::default()
            });
            assert_eq!(advertised_annotations(&facts), expected_adv);
        }
    }

    #[test]
    fn confirmation_token_counts_only_as_a_declared_property() {
        let cases = [
            (json!({}), false),
            (json!({"type": "object"}), false),
            (json!({"properties": {}}), false),
            (json!({"properties": {"confirmationtoken": {}}}), false),
            (json!({"properties": {"confirmation_token": {}}}), false),
            (json!({"confirmationToken": {"type": "string"}}), false),
            (json!({"properties": ["confirmationToken"]}), false),
            (json!({"properties": "confirmationToken"}), false),
            (json!({"required": ["confirmationToken"]}), false),
            (json!({"properties": {"confirmationToken": {}}}), true),
            (json!({"properties": {"confirmationToken": true}}), true),
            (json!({"properties": {"confirmationToken": null}}), true),
            (
                json!({"type": "object", "properties": {"a": {}, "confirmationToken": {"type": "string"}}}),
                true,
            ),
            // Composed schemas: the arguments object is still the one that declares it.
            (
                json!({"allOf": [{"properties": {"confirmationToken": {}}}]}),
                true,
            ),
            (
                json!({"anyOf": [{}, {"properties": {"confirmationToken": {}}}]}),
                true,
            ),
            (
                json!({"oneOf": [{"allOf": [{"properties": {"confirmationToken": {}}}]}]}),
                true,
            ),
            (
                json!({"if": {}, "then": {"properties": {"confirmationToken": {}}}}),
                true,
            ),
            (
                json!({"$ref": "#/$defs/Args", "$defs": {"Args": {"properties": {"confirmationToken": {}}}}}),
                true,
            ),
            (
                json!({"allOf": [{"$ref": "#/definitions/A~1B"}], "definitions": {"A/B": {"properties": {"confirmationToken": {}}}}}),
                true,
            ),
            // A $ref cycle is read the cautious way.
            (json!({"$ref": "#"}), true),
            (
                json!({"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}}),
                true,
            ),
            // Nested objects, other documents and other keys declare nothing.
            (
                json!({"properties": {"a": {"properties": {"confirmationToken": {}}}}}),
                false,
            ),
            (json!({"$ref": "https://example.com/args.json"}), false),
            (json!({"$ref": "#/$defs/Missing", "$defs": {}}), false),
            (
                json!({"allOf": [{"properties": {"a": {}}}], "$defs": {"X": {"properties": {"confirmationToken": {}}}}}),
                false,
            ),
            (
                json!({"not": {"properties": {"confirmationToken": {}}}}),
                false,
            ),
        ];
        for (schema, gated) in cases {
            let map = schema.as_object().unwrap();
            assert_eq!(declares_confirmation_token(map), gated, "{schema}");
            let read = Annotations {
                read_only_hint: Some(true),
                ..Annotations::default()
            };
            let class = classify(&ToolFacts::new("t", Some(&read), map)).class;
            let want = if gated {
                ToolClass::DestructiveWrite
            } else {
                ToolClass::Read
            };
            assert_eq!(class, want, "{schema}");
        }
    }

    /// The reading without [`ReadWithout`]: every path followed.
    fn declares_token_naively(
        root: &Map<String, Value>,
        schema: &Map<String, Value>,
        depth: usize,
    ) -> bool {
        if depth > MAX_SCHEMA_COMPOSITION {
            return true;
        }
        declares_token_here(schema)
            || composed_parts(root, schema)
                .any(|part| declares_token_naively(root, part, depth + 1))
    }

    /// `levels` of definitions, each an `anyOf` of `fan_out` `$ref`s to the next; the last
    /// declares the token if `token`.
    fn fanned_out(levels: usize, fan_out: usize, token: bool) -> Map<String, Value> {
        let mut defs = Map::new();
        for level in 0..levels {
            let refs: Vec<Value> = (0..fan_out)
                .map(|_| json!({"$ref": format!("#/$defs/d{}", level + 1)}))
                .collect();
            defs.insert(format!("d{level}"), json!({"anyOf": refs}));
        }
        let last = if token {
            json!({"properties": {"confirmationToken": {}}})
        } else {
            json!({"properties": {"a": {}}})
        };
        defs.insert(format!("d{levels}"), last);
        json!({"$ref": "#/$defs/d0", "$defs": defs})
            .as_object()
            .cloned()
            .unwrap()
    }

    /// 10^14 paths (7 levels, the most within the limit, of 100 `$ref`s), read without
    /// following each (7 levels of 10 took seconds before, and the time grows as fan-out to the
    /// 7th: a hostile server could stall mcp-audit with 2 KB). Read path by path these would
    /// never finish: a watchdog fails the test after 20 s instead of letting it hang.
    #[test]
    fn shared_definitions_are_read_once_per_depth_not_once_per_path() {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send([
                declares_confirmation_token(&fanned_out(7, 100, false)),
                declares_confirmation_token(&fanned_out(7, 100, true)),
                // Deeper than the limit through shared definitions: the cautious reading.
                declares_confirmation_token(&fanned_out(20, 10, false)),
            ]);
        });
        let answers = finished
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("7 levels of 100 shared $refs were not read within 20 s");
        assert_eq!(answers, [false, true, true]);
    }

    /// A definition read first on a short path, then again on a long one: the second reading
    /// has less room before the limit, reaches it, and so declares the token (the cautious
    /// reading), as reading each path afresh does.
    #[test]
    fn a_definition_read_again_deeper_can_still_reach_the_limit() {
        let leaf = json!({"properties": {"a": {}}});
        let definition = Value::Object(nested_all_of(5, leaf));
        let long_way = Value::Object(nested_all_of(12, json!({"$ref": "#/$defs/d"})));
        let schema = json!({
            "allOf": [{"$ref": "#/$defs/d"}, long_way],
            "$defs": {"d": definition},
        });
        let schema = schema.as_object().unwrap();
        assert!(declares_token_naively(schema, schema, 0));
        assert!(declares_confirmation_token(schema));
        // Either path alone stays within the limit, or goes past it.
        let short_only = json!({"allOf": [{"$ref": "#/$defs/d"}], "$defs": schema["$defs"]});
        assert!(!declares_confirmation_token(
            short_only.as_object().unwrap()
        ));
    }

    /// Random graphs of definitions referring to each other (cycles included), some declaring
    /// the token: the reading that skips what it already read answers as the naive one.
    fn arb_definitions() -> impl Strategy<Value = Map<String, Value>> {
        let def = (
            // At most two `$ref`s each: the naive reading follows up to 2^17 paths.
            prop::collection::vec(0..6_usize, 0..3),
            prop::bool::weighted(0.1),
        );
        (prop::collection::vec(def, 1..6), 0..6_usize).prop_map(|(defs, start)| {
            let n = defs.len();
            let mut map = Map::new();
            for (i, (refs, token)) in defs.into_iter().enumerate() {
                let parts: Vec<Value> = refs
                    .into_iter()
                    .map(|to| json!({"$ref": format!("#/$defs/d{}", to % n)}))
                    .collect();
                let mut def = json!({"anyOf": parts});
                if token {
                    def["properties"] = json!({"confirmationToken": {}});
                }
                map.insert(format!("d{i}"), def);
            }
            json!({"$ref": format!("#/$defs/d{}", start % n), "$defs": map})
                .as_object()
                .cloned()
                .unwrap()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn skipping_what_was_read_changes_no_answer(schema in arb_definitions()) {
            prop_assert_eq!(
                declares_confirmation_token(&schema),
                declares_token_naively(&schema, &schema, 0)
            );
        }
    }

    /// `allOf` nested `levels` deep around `innermost`.
    fn nested_all_of(levels: usize, innermost: Value) -> Map<String, Value> {
        let mut schema = innermost;
        for _ in 0..levels {
            schema = json!({"allOf": [schema]});
        }
        schema.as_object().cloned().unwrap()
    }

    #[test]
    fn compositions_are_read_to_exactly_max_schema_composition_levels() {
        let token = json!({"properties": {"confirmationToken": {}}});
        let plain = json!({"properties": {"a": {}}});
        // Up to the limit the schema is read, and what it says counts, either way.
        for levels in [0, 1, MAX_SCHEMA_COMPOSITION - 1, MAX_SCHEMA_COMPOSITION] {
            assert!(
                declares_confirmation_token(&nested_all_of(levels, token.clone())),
                "{levels} levels, declared"
            );
            assert!(
                !declares_confirmation_token(&nested_all_of(levels, plain.clone())),
                "{levels} levels, not declared"
            );
        }
        // One level more is not read, and counts as declaring it: the cautious reading.
        let deeper = nested_all_of(MAX_SCHEMA_COMPOSITION + 1, plain);
        assert!(declares_confirmation_token(&deeper));
    }

    #[test]
    fn tool_class_names() {
        for (class, name) in [
            (ToolClass::Read, "read"),
            (ToolClass::AdditiveWrite, "additiveWrite"),
            (ToolClass::DestructiveWrite, "destructiveWrite"),
        ] {
            assert_eq!(class.as_str(), name);
            assert_eq!(class.to_string(), name);
            assert_eq!(serde_json::to_value(class).unwrap(), json!(name));
            assert_eq!(
                serde_json::from_value::<ToolClass>(json!(name)).unwrap(),
                class
            );
        }
    }

    #[test]
    fn classification_serialises_in_camel_case() {
        let input_schema = schema(true);
        let c = classify(&ToolFacts::new("t", None, &input_schema));
        assert_eq!(
            serde_json::to_value(c).unwrap(),
            json!({
                "class": "destructiveWrite",
                "tokenGated": true,
                "effective": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}
            })
        );
    }
}
