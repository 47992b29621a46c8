//! What a tool is, as the person approved it: a digest of its definition.
//!
//! A server's `tools/list` can change at any time; behind a proxy, an upstream server can
//! rewrite a tool's description or schema after the person approved a call of it (a "rug
//! pull"). So a question binds the tool's definition as the guard saw it when it asked
//! ([`DefinitionDigest`], carried by the [`PendingApproval`](crate::PendingApproval) and by a
//! confirmation token), and just before the apply the guard reads the definition again:
//! [`check_definition`] says whether it is still the one approved.
//!
//! What counts, and why, is [`ToolDefinition`]'s to say.

use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::canonical::{ArgLimits, ArgsError, digest_members};
use crate::ids::DefinitionDigest;

/// The limits a tool definition is read with: 16 MiB of canonical JSON, 256 nested containers
/// (the definition object itself is one). Definitions come from the server, not the model, so
/// these are as generous as [`PREVIEW_LIMITS`](crate::canonical::PREVIEW_LIMITS).
pub const DEFINITION_LIMITS: ArgLimits = ArgLimits::new(16 * 1024 * 1024, 256);

/// The parts of a tool's definition that say what the tool does, borrowed from wherever the
/// definition is held: the adapter converts its protocol library's tool type into this. Its
/// [`digest`](Self::digest) is what an approval and a confirmation token bind.
///
/// # What counts
///
/// The digest is the SHA-256 of the RFC 8785 canonical form (the one
/// [`canonical_json`](crate::canonical::canonical_json) writes) of the JSON object that holds exactly these
/// members of the tool as `tools/list` spells them, each left out when the tool has none:
///
/// | member | why it counts |
/// |---|---|
/// | `name` | the tool itself: a digest stands for one tool only |
/// | `title` | what clients show people as the tool's name |
/// | `description` | what the model reads to decide what the tool does and when to call it: the text a rug pull rewrites |
/// | `inputSchema` | what each argument means (its descriptions, defaults, enumerations, formats), and whether the tool takes a `confirmationToken` |
/// | `outputSchema` | what the result claims to be, which the model reads the result by |
/// | `annotations` | the hints the tool is classified by (read-only, destructive, open-world) |
///
/// Not counted: `icons` (pictures for people, which carry no meaning the model acts on) and
/// `_meta` (free-form, for implementations; servers put values there that change without the
/// tool changing). A field a later protocol adds counts once it is added here. Key order and the
/// spelling of a number do not matter (the canonical form); anything else that differs in a
/// counted member is another definition, a new member included. Anyone can recompute a digest
/// from a `tools/list` entry with any RFC 8785 implementation.
///
/// A definition the canonical form cannot represent (larger or deeper than
/// [`DEFINITION_LIMITS`], or holding an integer without an exact double) has no digest
/// ([`DefinitionError`]): nothing can be shown to be the definition the person approved, so a
/// write with such a tool is refused.
///
/// # Example
///
/// ```
/// use mcp_write_guard_core::{ToolDefinition, definition::check_definition};
/// use serde_json::json;
///
/// let schema = json!({"type": "object", "properties": {"id": {"type": "integer"}}});
/// let schema = schema.as_object().unwrap();
/// let annotations = json!({"readOnlyHint": false, "destructiveHint": true});
/// let asked = ToolDefinition::new("delete_order", schema)
///     .with_description(Some("Delete one order."))
///     .with_annotations(Some(&annotations));
/// let approved = asked.digest()?;
///
/// // Just before the apply: the same definition passes; a rewritten description does not.
/// assert_eq!(check_definition(approved, Some(&asked)), Ok(()));
/// let rewritten = asked.with_description(Some("Delete every order."));
/// assert!(check_definition(approved, Some(&rewritten)).is_err());
/// assert!(check_definition(approved, None).is_err(), "the tool is gone");
/// # Ok::<(), mcp_write_guard_core::definition::DefinitionError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDefinition<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    input_schema: &'a Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_schema: Option<&'a Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<&'a Value>,
}

impl<'a> ToolDefinition<'a> {
    /// A tool named `name` taking arguments described by `input_schema`, with no title,
    /// description, output schema or annotations.
    pub fn new(name: &'a str, input_schema: &'a Map<String, Value>) -> Self {
        Self {
            name,
            title: None,
            description: None,
            input_schema,
            output_schema: None,
            annotations: None,
        }
    }

    /// The same definition with this `title` (`None`: none).
    #[must_use]
    pub fn with_title(mut self, title: Option<&'a str>) -> Self {
        self.title = title;
        self
    }

    /// The same definition with this `description` (`None`: none).
    #[must_use]
    pub fn with_description(mut self, description: Option<&'a str>) -> Self {
        self.description = description;
        self
    }

    /// The same definition with this `output_schema` (`None`: none).
    #[must_use]
    pub fn with_output_schema(mut self, output_schema: Option<&'a Map<String, Value>>) -> Self {
        self.output_schema = output_schema;
        self
    }

    /// The same definition with these `annotations`, as the protocol's JSON object (`None`:
    /// none).
    #[must_use]
    pub fn with_annotations(mut self, annotations: Option<&'a Value>) -> Self {
        self.annotations = annotations;
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The digest of this definition: the SHA-256 of the RFC 8785 form of the members that
    /// count (see the type's docs).
    ///
    /// # Errors
    /// [`DefinitionError`] when the canonical form cannot represent it under
    /// [`DEFINITION_LIMITS`].
    pub fn digest(&self) -> Result<DefinitionDigest, DefinitionError> {
        let maps: Vec<&Map<String, Value>> = std::iter::once(self.input_schema)
            .chain(self.output_schema)
            .collect();
        let values: Vec<&Value> = self.annotations.into_iter().collect();
        digest_members(self, &maps, &values, &DEFINITION_LIMITS)
            .map(DefinitionDigest::from_bytes)
            .map_err(DefinitionError::from)
    }
}

/// Why a tool definition has no digest: the canonical form cannot represent it under
/// [`DEFINITION_LIMITS`]. Nothing can then be shown to be the definition a person approved, so
/// it is refused like a changed one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DefinitionError {
    /// Its canonical form is longer than the limit.
    #[error("the tool's definition is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// It nests deeper than the limit.
    #[error("the tool's definition nests deeper than the limit of {limit} levels")]
    TooDeep {
        /// The limit in nested containers.
        limit: usize,
    },
    /// It holds a value the canonical form cannot represent faithfully (an integer without an
    /// exact double).
    #[error("the tool's definition holds a value without a canonical form: {0}")]
    Unrepresentable(String),
}

impl From<ArgsError> for DefinitionError {
    fn from(error: ArgsError) -> Self {
        match error {
            ArgsError::TooLarge { limit, .. } => Self::TooLarge { limit },
            ArgsError::TooDeep { limit } => Self::TooDeep { limit },
            ArgsError::Unrepresentable(reason) => Self::Unrepresentable(reason),
            // The definition is always an object; any other error is one without a form.
            other => Self::Unrepresentable(other.to_string()),
        }
    }
}

/// Why the tool is no longer the one the person approved ([`check_definition`]): the apply is
/// refused and nothing is written. [`Display`](fmt::Display) is for the audit trail (it may
/// name digests); the words for the model are the adapter's.
#[derive(Debug, Clone, PartialEq, Eq)]
/// Not `#[non_exhaustive]`: a new kind of denial must be a compile error wherever denials are
/// turned into outcomes.
pub enum ToolChanged {
    /// The server no longer offers the tool.
    Gone,
    /// The tool's definition is another one now.
    Changed {
        /// The definition the person approved.
        approved: DefinitionDigest,
        /// The definition now.
        now: DefinitionDigest,
    },
    /// The tool's definition now has no digest, so it cannot be shown to be the one approved.
    Unreadable(DefinitionError),
}

impl ToolChanged {
    /// A stable, kebab-case name for the audit trail: `gone`, `changed`, `unreadable`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Gone => "gone",
            Self::Changed { .. } => "changed",
            Self::Unreadable(_) => "unreadable",
        }
    }
}

impl fmt::Display for ToolChanged {
    /// For the audit trail: `gone`, `changed (approved <hex>, now <hex>)`, `unreadable: <why>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Gone => f.write_str("gone"),
            Self::Changed { approved, now } => {
                write!(f, "changed (approved {approved}, now {now})")
            }
            Self::Unreadable(error) => write!(f, "unreadable: {error}"),
        }
    }
}

/// Whether `current`, the tool's definition just before the apply (`None`: the server no longer
/// offers the tool), is the definition `approved` stands for. Pure; fail closed: a tool that is
/// gone, whose definition differs in any counted member, or whose definition has no digest, is
/// [`ToolChanged`].
pub fn check_definition(
    approved: DefinitionDigest,
    current: Option<&ToolDefinition<'_>>,
) -> Result<(), ToolChanged> {
    check_definition_digest(approved, current.map(ToolDefinition::digest))
}

/// [`check_definition`] for a caller that holds the current definition's digest already (an
/// adapter that keeps the digest of a definition it has not seen change): `current` is
/// [`ToolDefinition::digest`] of the tool's definition as the server hands it out just before
/// the apply, read again then (`None`: the server no longer offers the tool). The judgement is
/// only as fresh as that digest: the caller must read the definition again, and may reuse a
/// digest only for a definition it knows to be the very same. The same judgement as
/// [`check_definition`], fail closed in the same cases.
pub fn check_definition_digest(
    approved: DefinitionDigest,
    current: Option<Result<DefinitionDigest, DefinitionError>>,
) -> Result<(), ToolChanged> {
    match current {
        None => Err(ToolChanged::Gone),
        Some(Ok(now)) if now == approved => Ok(()),
        Some(Ok(now)) => Err(ToolChanged::Changed { approved, now }),
        Some(Err(error)) => Err(ToolChanged::Unreadable(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::canonical_json;
    use serde_json::json;
    use sha2::{Digest as _, Sha256};

    use crate::test_support::object;

    /// The digest is the SHA-256 of the canonical form of the object that holds the counted
    /// members as `tools/list` spells them: recomputable from the wire form.
    #[test]
    fn the_digest_is_the_sha256_of_the_wire_members_canonical_form() {
        let input = object(json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
        let output = object(json!({"type": "object"}));
        let annotations = json!({"readOnlyHint": false, "title": "Add"});
        let full = ToolDefinition::new("add", &input)
            .with_title(Some("Add"))
            .with_description(Some("Add to the counter."))
            .with_output_schema(Some(&output))
            .with_annotations(Some(&annotations));
        let wire = json!({
            "annotations": annotations,
            "description": "Add to the counter.",
            "inputSchema": input,
            "name": "add",
            "outputSchema": output,
            "title": "Add",
        });
        let canonical = canonical_json(&wire, &DEFINITION_LIMITS).unwrap();
        let expected = DefinitionDigest::from_bytes(Sha256::digest(canonical.as_bytes()).into());
        assert_eq!(full.digest(), Ok(expected));
        // Absent members are left out, not written as null.
        let bare = ToolDefinition::new("add", &input);
        let wire = json!({"inputSchema": input, "name": "add"});
        let canonical = canonical_json(&wire, &DEFINITION_LIMITS).unwrap();
        let expected = DefinitionDigest::from_bytes(Sha256::digest(canonical.as_bytes()).into());
        assert_eq!(bare.digest(), Ok(expected));
        assert_eq!(
            canonical,
            r#"{"inputSchema":{"properties":{"n":{"type":"integer"}},"type":"object"},"name":"add"}"#
        );
    }

    /// Pinned: a change of implementation must not change a definition's digest (approvals and
    /// tokens in a shared store carry it across versions).
    #[test]
    fn a_definition_digest_is_pinned() {
        let input = object(json!({"type": "object"}));
        let digest = ToolDefinition::new("t", &input).digest().unwrap();
        // printf %s '{"inputSchema":{"type":"object"},"name":"t"}' | sha256sum
        let canonical = r#"{"inputSchema":{"type":"object"},"name":"t"}"#;
        assert_eq!(
            digest.to_hex(),
            hex::encode(Sha256::digest(canonical.as_bytes()))
        );
        assert_eq!(
            digest.to_hex(),
            "c6005ee7854db532c5afa7ec72ecc502c63014ac9fe51e0b422daf578ebd3e0a",
            "pinned"
        );
    }

    #[test]
    fn every_way_the_tool_is_not_the_approved_one_is_refused() {
        let input = object(json!({"type": "object"}));
        let asked = ToolDefinition::new("t", &input).with_description(Some("Adds."));
        let approved = asked.digest().unwrap();
        assert_eq!(check_definition(approved, Some(&asked)), Ok(()));
        assert_eq!(check_definition(approved, None), Err(ToolChanged::Gone));
        let other = asked.with_description(Some("Adds twice."));
        assert_eq!(
            check_definition(approved, Some(&other)),
            Err(ToolChanged::Changed {
                approved,
                now: other.digest().unwrap()
            })
        );
        // 2^53 + 1 has no exact double: no digest, so not the approved definition.
        let huge = object(serde_json::from_str(r#"{"maximum": 9007199254740993}"#).unwrap());
        let unreadable = ToolDefinition::new("t", &huge);
        let refused = check_definition(approved, Some(&unreadable)).unwrap_err();
        assert!(
            matches!(
                refused,
                ToolChanged::Unreadable(DefinitionError::Unrepresentable(_))
            ),
            "{refused:?}"
        );
        assert_eq!(refused.as_str(), "unreadable");
        assert_eq!(ToolChanged::Gone.as_str(), "gone");
        // The same judgement from digests held already.
        assert_eq!(
            check_definition_digest(approved, Some(Ok(approved))),
            Ok(())
        );
        assert_eq!(
            check_definition_digest(approved, None),
            Err(ToolChanged::Gone)
        );
        assert_eq!(
            check_definition_digest(approved, Some(unreadable.digest())),
            Err(refused.clone())
        );
        assert_eq!(
            check_definition_digest(approved, Some(other.digest())),
            check_definition(approved, Some(&other))
        );
        let changed = check_definition(approved, Some(&other)).unwrap_err();
        assert_eq!(changed.as_str(), "changed");
        assert_eq!(
            changed.to_string(),
            format!(
                "changed (approved {approved}, now {})",
                other.digest().unwrap()
            )
        );
    }

    #[test]
    fn a_definition_too_deep_or_too_large_has_no_digest() {
        let mut deep = json!(1);
        for _ in 0..300 {
            deep = json!([deep]);
        }
        let input = object(json!({ "default": deep }));
        assert_eq!(
            ToolDefinition::new("t", &input).digest(),
            Err(DefinitionError::TooDeep { limit: 256 })
        );
        let input = object(json!({"description": "d".repeat(16 * 1024 * 1024)}));
        assert_eq!(
            ToolDefinition::new("t", &input).digest(),
            Err(DefinitionError::TooLarge {
                limit: 16 * 1024 * 1024
            })
        );
        // Depth 256 counts the definition object and the schema: 254 more levels fit.
        let nest = |levels: usize| {
            let mut v = json!(1);
            for _ in 0..levels {
                v = json!([v]);
            }
            object(json!({ "default": v }))
        };
        assert!(ToolDefinition::new("t", &nest(254)).digest().is_ok());
        assert!(ToolDefinition::new("t", &nest(255)).digest().is_err());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        use crate::test_support::reversed_text;

        fn json_value() -> impl Strategy<Value = Value> {
            crate::test_support::small_json("[a-z ]{0,6}")
        }

        fn json_object() -> impl Strategy<Value = Map<String, Value>> {
            prop::collection::btree_map("[a-c]{1,2}", json_value(), 0..4)
                .prop_map(|m| m.into_iter().collect())
        }

        /// A tool definition, owned.
        #[derive(Debug, Clone)]
        struct Owned {
            name: String,
            title: Option<String>,
            description: Option<String>,
            input: Map<String, Value>,
            output: Option<Map<String, Value>>,
            annotations: Option<Value>,
        }

        impl Owned {
            fn view(&self) -> ToolDefinition<'_> {
                ToolDefinition::new(&self.name, &self.input)
                    .with_title(self.title.as_deref())
                    .with_description(self.description.as_deref())
                    .with_output_schema(self.output.as_ref())
                    .with_annotations(self.annotations.as_ref())
            }
        }

        fn definition() -> impl Strategy<Value = Owned> {
            (
                "[a-z_]{1,8}",
                proptest::option::of("[A-Za-z ]{0,8}"),
                proptest::option::of("[A-Za-z .]{0,16}"),
                json_object(),
                proptest::option::of(json_object()),
                proptest::option::of(json_value()),
            )
                .prop_map(|(name, title, description, input, output, annotations)| {
                    Owned {
                        name,
                        title,
                        description,
                        input,
                        output,
                        annotations,
                    }
                })
        }

        fn reordered(v: &Value) -> Value {
            serde_json::from_str(&reversed_text(v)).unwrap()
        }

        fn reordered_map(m: &Map<String, Value>) -> Map<String, Value> {
            object(reordered(&Value::Object(m.clone())))
        }

        /// A value whose canonical form differs from `v`'s; `choice` picks where.
        fn perturb(v: &Value, choice: usize) -> Value {
            match v {
                Value::Null => json!(false),
                Value::Bool(b) => json!(!b),
                Value::Number(n) => json!(n.as_i64().unwrap_or(0) + 1),
                Value::String(s) => json!(format!("{s}x")),
                Value::Array(items) => {
                    let mut items = items.clone();
                    let at = choice % (items.len() + 1);
                    match items.get_mut(at) {
                        Some(item) => *item = perturb(item, choice / 2),
                        None => items.push(Value::Null),
                    }
                    Value::Array(items)
                }
                Value::Object(map) => Value::Object(perturb_map(map, choice)),
            }
        }

        /// A map whose canonical form differs from `map`'s: a member added, removed or changed.
        fn perturb_map(map: &Map<String, Value>, choice: usize) -> Map<String, Value> {
            let mut map = map.clone();
            let keys: Vec<String> = map.keys().cloned().collect();
            match keys.get(choice % (keys.len() + 1)) {
                // Generated keys are [a-c]: "~new" is never one of them.
                None => {
                    map.insert("~new".into(), Value::Null);
                }
                Some(key) if choice.is_multiple_of(3) => {
                    map.remove(key);
                }
                Some(key) => {
                    let changed = perturb(&map[key], choice / 3);
                    map.insert(key.clone(), changed);
                }
            }
            map
        }

        fn perturb_text(text: Option<&String>) -> Option<String> {
            Some(text.map_or_else(String::new, |t| format!("{t}x")))
        }

        /// `def` with counted member number `field` (of six) changed.
        fn change(def: &Owned, field: usize, choice: usize) -> Owned {
            let mut changed = def.clone();
            match field % 6 {
                0 => changed.name.push('x'),
                1 => changed.title = perturb_text(def.title.as_ref()),
                2 => changed.description = perturb_text(def.description.as_ref()),
                3 => changed.input = perturb_map(&def.input, choice),
                4 => {
                    changed.output = Some(match &def.output {
                        Some(output) => perturb_map(output, choice),
                        None => Map::new(),
                    });
                }
                _ => {
                    changed.annotations = Some(match &def.annotations {
                        Some(annotations) => perturb(annotations, choice),
                        None => json!({}),
                    });
                }
            }
            changed
        }

        proptest! {
            /// Key order anywhere in the schemas and annotations never changes the digest.
            #[test]
            fn the_digest_ignores_key_order(def in definition()) {
                let mut shuffled = def.clone();
                shuffled.input = reordered_map(&def.input);
                shuffled.output = def.output.as_ref().map(reordered_map);
                shuffled.annotations = def.annotations.as_ref().map(reordered);
                prop_assert_eq!(def.view().digest().unwrap(), shuffled.view().digest().unwrap());
            }

            /// Any change of any counted member changes the digest, and the check refuses it.
            #[test]
            fn any_change_of_a_counted_member_changes_the_digest(
                def in definition(),
                field in 0..6usize,
                choice in any::<usize>(),
            ) {
                let changed = change(&def, field, choice);
                let before = def.view().digest().unwrap();
                let after = changed.view().digest().unwrap();
                prop_assert_ne!(before, after, "{:?} vs {:?}", def, changed);
                prop_assert_eq!(
                    check_definition(before, Some(&changed.view())),
                    Err(ToolChanged::Changed { approved: before, now: after })
                );
                prop_assert_eq!(check_definition(before, Some(&def.view())), Ok(()));
            }
        }
    }
}
