//! The MCP tool annotation object and its reading with the spec defaults.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The MCP tool annotation object as a server advertises it. Every field is optional.
///
/// Serialises in camelCase (`readOnlyHint`, `destructiveHint`, ...), skips `None` fields and
/// ignores unknown fields when deserialising. The hints are claims made by the server: nothing
/// here trusts them more than the MCP specification says a client may.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// A human-readable title for the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool does not modify its environment. Spec default: `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may perform destructive updates (meaningful only when not read-only).
    /// Spec default: `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Repeating a call with the same arguments has no additional effect (meaningful only when
    /// not read-only). Spec default: `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool may interact with an open world of external entities. Spec default: `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

impl Annotations {
    /// Reads an annotation object from untrusted JSON, field by field, never failing.
    ///
    /// A field that is missing or has the wrong JSON type (for example `"readOnlyHint": "true"`)
    /// reads as absent, and absent hints take the spec defaults, which are the cautious reading:
    /// a write, destructive, open-world. A value that is not an object reads as no hints at all.
    ///
    /// ```
    /// use mcp_write_guard_policy::Annotations;
    /// let a = Annotations::from_json_lenient(&serde_json::json!({
    ///     "readOnlyHint": "true", "destructiveHint": false, "title": "Add item"
    /// }));
    /// assert_eq!(a.read_only_hint, None); // a string is not the boolean `true`
    /// assert_eq!(a.destructive_hint, Some(false));
    /// assert_eq!(a.title.as_deref(), Some("Add item"));
    /// ```
    pub fn from_json_lenient(value: &Value) -> Self {
        let Some(object) = value.as_object() else {
            return Self::default();
        };
        let flag = |key: &str| object.get(key).and_then(Value::as_bool);
        Self {
            title: object
                .get("title")
                .and_then(Value::as_str)
                .map(str::to_owned),
            read_only_hint: flag("readOnlyHint"),
            destructive_hint: flag("destructiveHint"),
            idempotent_hint: flag("idempotentHint"),
            open_world_hint: flag("openWorldHint"),
        }
    }

    /// How many of the four hints are set (the title is not a hint).
    pub fn hints_set(&self) -> usize {
        [
            self.read_only_hint,
            self.destructive_hint,
            self.idempotent_hint,
            self.open_world_hint,
        ]
        .iter()
        .filter(|hint| hint.is_some())
        .count()
    }
}

/// The annotations read with the MCP spec defaults.
///
/// Absent hints read as: `readOnlyHint` false, `destructiveHint` true, `idempotentHint` false,
/// `openWorldHint` true. The spec gives `destructiveHint` and `idempotentHint` a meaning only for
/// a tool that is not read-only; a tool that changes nothing destroys nothing and is trivially
/// idempotent, so for a read-only tool they read `false` and `true` whatever was claimed. This
/// keeps the effective values consistent with [`ToolClass`](crate::ToolClass): `destructive` is
/// true exactly for destructive writes.
///
/// Serialises as `{"readOnlyHint":..,"destructiveHint":..,"idempotentHint":..,"openWorldHint":..}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EffectiveAnnotations {
    /// The tool does not modify its environment (only an explicit `true` says so).
    #[serde(rename = "readOnlyHint")]
    pub read_only: bool,
    /// The tool may destroy or overwrite data (false only for an explicit `false` on a write,
    /// and for read-only tools).
    #[serde(rename = "destructiveHint")]
    pub destructive: bool,
    /// Repeating a call has no additional effect.
    #[serde(rename = "idempotentHint")]
    pub idempotent: bool,
    /// The tool may reach an open world of external entities (false only for an explicit `false`).
    #[serde(rename = "openWorldHint")]
    pub open_world: bool,
}

impl EffectiveAnnotations {
    /// The reading of a tool that declares no annotations at all.
    pub const SPEC_DEFAULTS: Self = Self {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    };
}

/// Reads annotations with the MCP spec defaults. `None` (no annotation object) reads as
/// [`EffectiveAnnotations::SPEC_DEFAULTS`].
///
/// This looks at the annotations alone; a tool's input schema can still force it to be a
/// destructive write (see [`classify`](crate::classify), whose result carries the effective
/// annotations of what is actually advertised).
///
/// ```
/// use mcp_write_guard_policy::{effective_annotations, Annotations, EffectiveAnnotations};
/// assert_eq!(effective_annotations(None), EffectiveAnnotations::SPEC_DEFAULTS);
/// let additive = Annotations { destructive_hint: Some(false), ..Annotations::default() };
/// let e = effective_annotations(Some(&additive));
/// assert!(!e.read_only && !e.destructive && e.open_world);
/// ```
pub fn effective_annotations(a: Option<&Annotations>) -> EffectiveAnnotations {
    let Some(a) = a else {
        return EffectiveAnnotations::SPEC_DEFAULTS;
    };
    let read_only = a.read_only_hint == Some(true);
    EffectiveAnnotations {
        read_only,
        destructive: !read_only && a.destructive_hint != Some(false),
        idempotent: read_only || a.idempotent_hint == Some(true),
        open_world: a.open_world_hint != Some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serialises_camel_case_and_skips_absent_fields() {
        let a = Annotations {
            title: Some("Add".into()),
            read_only_hint: Some(false),
            destructive_hint: None,
            idempotent_hint: Some(true),
            open_world_hint: None,
        };
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(
            v,
            json!({"title": "Add", "readOnlyHint": false, "idempotentHint": true})
        );
        assert_eq!(serde_json::from_value::<Annotations>(v).unwrap(), a);
        assert_eq!(
            serde_json::to_value(Annotations::default()).unwrap(),
            json!({})
        );
    }

    #[test]
    fn deserialising_ignores_unknown_fields() {
        let a: Annotations = serde_json::from_value(json!({
            "readOnlyHint": true, "somethingNew": 1, "destructive_hint": false
        }))
        .unwrap();
        assert_eq!(
            a,
            Annotations {
                read_only_hint: Some(true),
                ..Annotations::default()
            }
        );
    }

    #[test]
    fn lenient_reading_treats_wrong_types_as_absent() {
        let a = Annotations::from_json_lenient(&json!({
            "title": 7,
            "readOnlyHint": "true",
            "destructiveHint": 0,
            "idempotentHint": null,
            "openWorldHint": false,
        }));
        assert_eq!(
            a,
            Annotations {
                open_world_hint: Some(false),
                ..Annotations::default()
            }
        );
        for not_object in [json!(null), json!([]), json!("readOnlyHint"), json!(true)] {
            assert_eq!(
                Annotations::from_json_lenient(&not_object),
                Annotations::default()
            );
        }
        let full = json!({"title": "T", "readOnlyHint": true, "destructiveHint": false,
                          "idempotentHint": true, "openWorldHint": false});
        assert_eq!(
            Annotations::from_json_lenient(&full),
            serde_json::from_value::<Annotations>(full).unwrap()
        );
    }

    #[test]
    fn hints_set_ignores_the_title() {
        let mut a = Annotations {
            title: Some("T".into()),
            ..Annotations::default()
        };
        assert_eq!(a.hints_set(), 0);
        a.read_only_hint = Some(false);
        a.open_world_hint = Some(true);
        assert_eq!(a.hints_set(), 2);
    }

    #[test]
    fn spec_defaults() {
        let expected = EffectiveAnnotations {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
        };
        assert_eq!(EffectiveAnnotations::SPEC_DEFAULTS, expected);
        assert_eq!(effective_annotations(None), expected);
        assert_eq!(
            effective_annotations(Some(&Annotations::default())),
            expected
        );
        assert_eq!(
            serde_json::to_value(expected).unwrap(),
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true})
        );
    }

    #[test]
    fn read_only_tools_destroy_nothing_and_are_idempotent() {
        let a = Annotations {
            read_only_hint: Some(true),
            destructive_hint: Some(true),
            idempotent_hint: Some(false),
            open_world_hint: None,
            title: None,
        };
        let e = effective_annotations(Some(&a));
        assert_eq!(
            e,
            EffectiveAnnotations {
                read_only: true,
                destructive: false,
                idempotent: true,
                open_world: true,
            }
        );
    }
}
