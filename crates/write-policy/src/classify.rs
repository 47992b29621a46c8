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

/// Whether an input schema declares a `confirmationToken` property
/// (`properties.confirmationToken` exists, whatever its own schema).
pub fn declares_confirmation_token(input_schema: &Map<String, Value>) -> bool {
    input_schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|properties| properties.contains_key(CONFIRMATION_TOKEN_ARG))
}

/// Classifies a tool.
///
/// - A tool whose input schema declares a `confirmationToken` property is a destructive write,
///   whatever its annotations claim.
/// - Otherwise a tool is a read only if `readOnlyHint` is exactly `true`.
/// - A write is additive only if `destructiveHint` is exactly `false`; otherwise destructive.
///
/// ```
/// use write_policy::{classify, Annotations, ToolClass, ToolFacts};
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
/// `destructiveHint: true`; if it does not already, this returns the declared annotations with
/// those two fields set and every other field (title, idempotent, open-world) kept.
///
/// ```
/// use write_policy::{advertised_annotations, Annotations, ToolFacts};
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
