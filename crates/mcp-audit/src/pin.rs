//! Tool fingerprints (`--pin`): detect a tool added, removed or changed since the pin, and
//! which part of it changed.
//!
//! A tool's fingerprint is the SHA-256 digest (lowercase hex) of the workspace's canonical JSON
//! form ([`approval_core::canonical_json`], RFC 8785 style: keys sorted, no whitespace, numbers
//! written as ECMAScript does) of the object
//! `{"name", "description", "inputSchema", "outputSchema", "annotations"}` (an absent part is
//! `null`), so it does not depend on JSON key order or whitespace. Each part also gets its own
//! digest, so a change can be named: `description`, `inputSchema`, `outputSchema` or
//! `annotations`. The pin also keeps each tool's raw annotations, so a changed hint can be shown
//! (for example `readOnlyHint: false -> true`, a tool that now claims to be harmless).
//! The tool's top-level `title`, `icons` and `_meta` are not part of the fingerprint.

use std::collections::BTreeMap;
use std::fmt;

use approval_core::{ArgLimits, canonical_json};
use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use write_policy::Annotations;

use crate::error::AuditError;
use crate::surface::annotations_of;

/// The pin file format version this build writes and reads.
pub const PIN_VERSION: u32 = 1;

/// Limits for canonicalising tool definitions: larger than the argument limits, since a schema
/// may be large, but still bounded.
const TOOL_LIMITS: ArgLimits = ArgLimits::new(16 * 1024 * 1024, 128);

/// A part of a tool definition that a pin tracks on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Part {
    /// The description.
    Description,
    /// The input schema.
    InputSchema,
    /// The output schema.
    OutputSchema,
    /// The annotation object.
    Annotations,
}

impl Part {
    /// The part's name as the MCP `Tool` object spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Description => "description",
            Self::InputSchema => "inputSchema",
            Self::OutputSchema => "outputSchema",
            Self::Annotations => "annotations",
        }
    }

    const ALL: [Part; 4] = [
        Part::Description,
        Part::InputSchema,
        Part::OutputSchema,
        Part::Annotations,
    ];
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One tool's entry in a pin file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolPin {
    /// Digest of the whole definition (name and every part).
    pub fingerprint: String,
    /// Digest of each part.
    pub parts: BTreeMap<Part, String>,
    /// The raw annotations, to show which hint changed.
    pub annotations: Option<Annotations>,
}

/// A pin file: every tool's fingerprint, keyed by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PinFile {
    /// [`PIN_VERSION`].
    pub version: u32,
    /// Tool name to pin.
    pub tools: BTreeMap<String, ToolPin>,
}

/// One hint whose declared value changed (`None` = not declared).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HintChange {
    /// `title`, `readOnlyHint`, `destructiveHint`, `idempotentHint` or `openWorldHint`.
    pub hint: &'static str,
    /// The pinned value.
    pub before: Option<Value>,
    /// The current value.
    pub after: Option<Value>,
}

impl fmt::Display for HintChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<Value>| v.as_ref().map_or("unset".to_owned(), Value::to_string);
        write!(
            f,
            "{} {} -> {}",
            self.hint,
            show(&self.before),
            show(&self.after)
        )
    }
}

/// How the current surface differs from the pin, for one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "change")]
pub enum PinChange {
    /// A tool that was not pinned.
    Added {
        /// The tool.
        tool: String,
    },
    /// A pinned tool that is gone.
    Removed {
        /// The tool.
        tool: String,
    },
    /// A pinned tool whose definition changed.
    Changed {
        /// The tool.
        tool: String,
        /// Which parts changed.
        parts: Vec<Part>,
        /// Which declared hints changed (when the annotations changed).
        hints: Vec<HintChange>,
    },
}

impl PinChange {
    /// The tool this change is about.
    pub fn tool(&self) -> &str {
        match self {
            Self::Added { tool } | Self::Removed { tool } | Self::Changed { tool, .. } => tool,
        }
    }

    /// True when the tool now claims `readOnlyHint: true` and did not before.
    pub fn now_claims_read_only(&self) -> bool {
        match self {
            Self::Changed { hints, .. } => hints.iter().any(|h| {
                h.hint == "readOnlyHint"
                    && h.after == Some(Value::Bool(true))
                    && h.before != Some(Value::Bool(true))
            }),
            _ => false,
        }
    }
}

impl fmt::Display for PinChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Added { tool } => write!(f, "added: {tool}"),
            Self::Removed { tool } => write!(f, "removed: {tool}"),
            Self::Changed { tool, parts, hints } => {
                let parts: Vec<&str> = parts.iter().map(|p| p.as_str()).collect();
                write!(f, "changed: {tool} ({})", parts.join(", "))?;
                if !hints.is_empty() {
                    let hints: Vec<String> = hints.iter().map(ToString::to_string).collect();
                    write!(f, ": {}", hints.join(", "))?;
                }
                if self.now_claims_read_only() {
                    write!(f, " [now claims to be read-only]")?;
                }
                Ok(())
            }
        }
    }
}

fn digest(tool: &str, value: &Value) -> Result<String, AuditError> {
    let canonical = canonical_json(value, &TOOL_LIMITS).map_err(|e| AuditError::Fingerprint {
        tool: tool.to_owned(),
        reason: e.to_string(),
    })?;
    let hash = Sha256::digest(canonical.as_bytes());
    Ok(hash.iter().map(|b| format!("{b:02x}")).collect())
}

fn part_value(tool: &Tool, part: Part) -> Value {
    match part {
        Part::Description => tool
            .description
            .as_ref()
            .map_or(Value::Null, |d| Value::String(d.to_string())),
        Part::InputSchema => Value::Object((*tool.input_schema).clone()),
        Part::OutputSchema => tool
            .output_schema
            .as_ref()
            .map_or(Value::Null, |s| Value::Object((**s).clone())),
        Part::Annotations => tool
            .annotations
            .as_ref()
            .and_then(|a| serde_json::to_value(a).ok())
            .unwrap_or(Value::Null),
    }
}

impl ToolPin {
    /// Fingerprints one tool.
    ///
    /// # Errors
    ///
    /// [`AuditError::Fingerprint`] when a part cannot be put in canonical form (too large, too
    /// deep, or an integer with no exact double).
    pub fn of(tool: &Tool) -> Result<Self, AuditError> {
        let mut whole = serde_json::Map::new();
        whole.insert("name".to_owned(), json!(tool.name));
        let mut parts = BTreeMap::new();
        for part in Part::ALL {
            let value = part_value(tool, part);
            parts.insert(part, digest(&tool.name, &value)?);
            whole.insert(part.as_str().to_owned(), value);
        }
        Ok(Self {
            fingerprint: digest(&tool.name, &Value::Object(whole))?,
            parts,
            annotations: annotations_of(tool),
        })
    }
}

fn hint_changes(before: Option<&Annotations>, after: Option<&Annotations>) -> Vec<HintChange> {
    let fields = |a: Option<&Annotations>| -> [(&'static str, Option<Value>); 5] {
        let b = |v: Option<bool>| v.map(Value::Bool);
        [
            ("title", a.and_then(|a| a.title.clone()).map(Value::String)),
            ("readOnlyHint", b(a.and_then(|a| a.read_only_hint))),
            ("destructiveHint", b(a.and_then(|a| a.destructive_hint))),
            ("idempotentHint", b(a.and_then(|a| a.idempotent_hint))),
            ("openWorldHint", b(a.and_then(|a| a.open_world_hint))),
        ]
    };
    fields(before)
        .into_iter()
        .zip(fields(after))
        .filter(|((_, b), (_, a))| b != a)
        .map(|((hint, before), (_, after))| HintChange {
            hint,
            before,
            after,
        })
        .collect()
}

impl PinFile {
    /// Fingerprints every tool.
    ///
    /// # Errors
    ///
    /// [`AuditError::DuplicateTool`] when two tools share a name, [`AuditError::Fingerprint`]
    /// when one cannot be fingerprinted.
    pub fn of(tools: &[Tool]) -> Result<Self, AuditError> {
        let mut pins = BTreeMap::new();
        for tool in tools {
            if pins
                .insert(tool.name.to_string(), ToolPin::of(tool)?)
                .is_some()
            {
                return Err(AuditError::DuplicateTool(tool.name.to_string()));
            }
        }
        Ok(Self {
            version: PIN_VERSION,
            tools: pins,
        })
    }

    /// Parses a pin file.
    ///
    /// # Errors
    ///
    /// A message saying what is wrong (not JSON, wrong shape, unknown version).
    pub fn from_json(text: &str) -> Result<Self, String> {
        let pin: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if pin.version != PIN_VERSION {
            return Err(format!(
                "version {} is not supported (this build reads version {PIN_VERSION})",
                pin.version
            ));
        }
        Ok(pin)
    }

    /// The pin file as pretty JSON with a trailing newline.
    pub fn to_json_pretty(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Every change from this pin to `current`: removed and changed tools in name order, then
    /// added ones in name order. Empty when nothing changed.
    pub fn changes(&self, current: &PinFile) -> Vec<PinChange> {
        let mut changes = Vec::new();
        for (name, pinned) in &self.tools {
            match current.tools.get(name) {
                None => changes.push(PinChange::Removed { tool: name.clone() }),
                Some(now) if now.fingerprint != pinned.fingerprint => {
                    let mut parts: Vec<Part> = Part::ALL
                        .into_iter()
                        .filter(|p| pinned.parts.get(p) != now.parts.get(p))
                        .collect();
                    let hints = hint_changes(pinned.annotations.as_ref(), now.annotations.as_ref());
                    if !hints.is_empty() && !parts.contains(&Part::Annotations) {
                        parts.push(Part::Annotations);
                    }
                    changes.push(PinChange::Changed {
                        tool: name.clone(),
                        parts,
                        hints,
                    });
                }
                Some(_) => {}
            }
        }
        for name in current.tools.keys() {
            if !self.tools.contains_key(name) {
                changes.push(PinChange::Added { tool: name.clone() });
            }
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ToolAnnotations;
    use std::sync::Arc;

    fn tool(name: &'static str, schema: Value) -> Tool {
        Tool::new(
            name,
            "does things",
            Arc::new(schema.as_object().unwrap().clone()),
        )
        .with_annotations(ToolAnnotations::new().read_only(false).destructive(true))
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {"a": {"type": "integer", "minimum": 1.5}}, "required": ["a"]})
    }

    #[test]
    fn key_order_does_not_change_the_fingerprint() {
        let reordered: Value = serde_json::from_str(
            r#"{"required": ["a"], "properties": {"a": {"minimum": 1.5, "type": "integer"}}, "type": "object"}"#,
        )
        .unwrap();
        let a = ToolPin::of(&tool("t", schema())).unwrap();
        let b = ToolPin::of(&tool("t", reordered)).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.fingerprint.len(), 64);
    }

    #[test]
    fn each_part_is_named_when_it_changes() {
        let base = tool("t", schema());
        let pin = PinFile::of(std::slice::from_ref(&base)).unwrap();

        let mut described = base.clone();
        described.description = Some("does other things".into());
        let mut reschema = base.clone();
        reschema.input_schema = Arc::new(json!({"type": "object"}).as_object().unwrap().clone());
        let mut outputs = base.clone();
        outputs.output_schema = Some(Arc::new(
            json!({"type": "object"}).as_object().unwrap().clone(),
        ));
        for (changed, part) in [
            (described, Part::Description),
            (reschema, Part::InputSchema),
            (outputs, Part::OutputSchema),
        ] {
            let changes = pin.changes(&PinFile::of(&[changed]).unwrap());
            assert_eq!(
                changes,
                [PinChange::Changed {
                    tool: "t".into(),
                    parts: vec![part],
                    hints: vec![]
                }]
            );
        }
    }

    #[test]
    fn a_flip_to_read_only_is_reported_with_its_hints() {
        let base = tool("t", schema());
        let pin = PinFile::of(std::slice::from_ref(&base)).unwrap();
        let flipped =
            base.with_annotations(ToolAnnotations::new().read_only(true).destructive(true));
        let changes = pin.changes(&PinFile::of(&[flipped]).unwrap());
        assert_eq!(changes.len(), 1);
        assert!(changes[0].now_claims_read_only());
        let PinChange::Changed { parts, hints, .. } = &changes[0] else {
            panic!()
        };
        assert_eq!(parts, &[Part::Annotations]);
        assert_eq!(
            hints,
            &[HintChange {
                hint: "readOnlyHint",
                before: Some(json!(false)),
                after: Some(json!(true))
            }]
        );
        assert_eq!(
            changes[0].to_string(),
            "changed: t (annotations): readOnlyHint false -> true [now claims to be read-only]"
        );
    }

    #[test]
    fn added_and_removed_tools_are_named() {
        let pin = PinFile::of(&[tool("a", schema()), tool("b", schema())]).unwrap();
        let now = PinFile::of(&[tool("b", schema()), tool("c", schema())]).unwrap();
        assert_eq!(
            pin.changes(&now),
            [
                PinChange::Removed { tool: "a".into() },
                PinChange::Added { tool: "c".into() }
            ]
        );
        assert!(pin.changes(&pin).is_empty());
    }

    #[test]
    fn a_pin_file_round_trips_and_rejects_other_versions() {
        let pin = PinFile::of(&[tool("a", schema())]).unwrap();
        assert_eq!(PinFile::from_json(&pin.to_json_pretty()).unwrap(), pin);
        let mut other = pin.clone();
        other.version = 2;
        assert!(
            PinFile::from_json(&other.to_json_pretty())
                .unwrap_err()
                .contains("version 2")
        );
        assert!(PinFile::from_json("{").is_err());
    }

    #[test]
    fn duplicate_names_cannot_be_pinned() {
        assert!(matches!(
            PinFile::of(&[tool("a", schema()), tool("a", json!({}))]),
            Err(AuditError::DuplicateTool(n)) if n == "a"
        ));
    }

    #[test]
    fn an_integer_without_an_exact_double_is_an_error_not_a_panic() {
        let t = tool(
            "big",
            json!({"type": "object", "maximum": 9007199254740993_u64}),
        );
        assert!(matches!(
            ToolPin::of(&t),
            Err(AuditError::Fingerprint { .. })
        ));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn hint() -> impl Strategy<Value = Option<bool>> {
            prop_oneof![Just(None), Just(Some(false)), Just(Some(true))]
        }

        fn annotations() -> impl Strategy<Value = Option<ToolAnnotations>> {
            proptest::option::of(
                (
                    proptest::option::of("[a-z ]{0,8}"),
                    hint(),
                    hint(),
                    hint(),
                    hint(),
                )
                    .prop_map(|(title, r, d, i, o)| ToolAnnotations::from_raw(title, r, d, i, o)),
            )
        }

        fn with(description: &str, a: Option<ToolAnnotations>) -> Tool {
            let mut t = tool("t", schema());
            t.description = Some(description.to_owned().into());
            t.annotations = a;
            t
        }

        proptest! {
            /// Exactly the parts that differ are named, and a flip to `readOnlyHint: true` is
            /// always called out.
            #[test]
            fn exactly_the_changed_parts_are_named(
                d1 in "[a-z]{0,6}", d2 in "[a-z]{0,6}",
                a1 in annotations(), a2 in annotations(),
            ) {
                let before = PinFile::of(&[with(&d1, a1.clone())]).unwrap();
                let after = PinFile::of(&[with(&d2, a2.clone())]).unwrap();
                let changes = before.changes(&after);
                let mut expected = Vec::new();
                if d1 != d2 { expected.push(Part::Description); }
                if a1 != a2 { expected.push(Part::Annotations); }
                if expected.is_empty() {
                    prop_assert!(changes.is_empty());
                } else {
                    prop_assert_eq!(changes.len(), 1);
                    let PinChange::Changed { parts, .. } = &changes[0] else {
                        panic!("not a change: {:?}", changes[0])
                    };
                    prop_assert_eq!(parts, &expected);
                    let ro = |a: &Option<ToolAnnotations>| a.as_ref().and_then(|a| a.read_only_hint);
                    prop_assert_eq!(
                        changes[0].now_claims_read_only(),
                        ro(&a2) == Some(true) && ro(&a1) != Some(true)
                    );
                }
            }
        }
    }
}
