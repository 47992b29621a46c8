//! The surface report: what a server's tool list claims, read with the spec defaults.

use serde::{Deserialize, Serialize};

use crate::annotations::{Annotations, EffectiveAnnotations};
use crate::classify::{ToolClass, ToolFacts, classify};

/// One tool in a [`SurfaceReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolReport {
    /// The tool's name.
    pub name: String,
    /// Its classification.
    pub class: ToolClass,
    /// Whether its input schema declares a `confirmationToken` property.
    pub token_gated: bool,
    /// The annotations exactly as the server declares them (`null` when it declares none).
    pub raw: Option<Annotations>,
    /// The effective annotations (spec defaults applied, token-gating rewrite applied).
    pub effective: EffectiveAnnotations,
}

/// What a list of tools claims about itself, read with the MCP spec defaults.
///
/// Built by [`SurfaceReport::from_tools`]; serialises to camelCase JSON. Name lists keep the
/// order of the input.
///
/// - `readOnly`: tools classified [`ToolClass::Read`].
/// - `destructive` / `destructiveTools`: tools classified [`ToolClass::DestructiveWrite`].
/// - `openWorld` / `openWorldTools`: tools whose effective `openWorldHint` is true, any class.
/// - `additiveWrites`: tools classified [`ToolClass::AdditiveWrite`].
/// - `tokenGatedTools`: tools whose input schema declares `confirmationToken`.
/// - `unannotated`: no annotation object, or one with no hint and no title.
/// - `partiallyAnnotated`: an annotation object that leaves at least one of the four hints to its
///   default, and is not unannotated (a title alone counts here).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SurfaceReport {
    /// Number of tools.
    pub total: usize,
    /// Number of read tools.
    pub read_only: usize,
    /// Number of destructive writes.
    pub destructive: usize,
    /// Number of open-world tools.
    pub open_world: usize,
    /// Names of the additive writes.
    pub additive_writes: Vec<String>,
    /// Names of the open-world tools.
    pub open_world_tools: Vec<String>,
    /// Names of the destructive writes.
    pub destructive_tools: Vec<String>,
    /// Names of the token-gated tools.
    pub token_gated_tools: Vec<String>,
    /// Names of the tools with no annotations.
    pub unannotated: Vec<String>,
    /// Names of the tools that leave some hint to its default.
    pub partially_annotated: Vec<String>,
    /// Every tool, in input order.
    pub tools: Vec<ToolReport>,
}

/// How much of the annotation object a tool declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coverage {
    None,
    Partial,
    Full,
}

/// How completely a tool is annotated. A read (`readOnlyHint: true`, and so classified) needs
/// only `readOnlyHint` and `openWorldHint`: the spec gives `destructiveHint` and
/// `idempotentHint` meaning only when `readOnlyHint` is false. Anything else needs all four.
fn coverage(a: Option<&Annotations>, read: bool) -> Coverage {
    match a {
        None => Coverage::None,
        Some(a) if a.hints_set() == 0 && a.title.is_none() => Coverage::None,
        Some(a) if read && a.read_only_hint.is_some() && a.open_world_hint.is_some() => {
            Coverage::Full
        }
        Some(a) if a.hints_set() < 4 => Coverage::Partial,
        Some(_) => Coverage::Full,
    }
}

impl SurfaceReport {
    /// Classifies every tool and builds the report.
    ///
    /// ```
    /// use mcp_write_guard_policy::{Annotations, SurfaceReport, ToolFacts};
    /// let schema = serde_json::Map::new();
    /// let read = Annotations { read_only_hint: Some(true), ..Annotations::default() };
    /// let report = SurfaceReport::from_tools([
    ///     ToolFacts::new("list_products", Some(&read), &schema),
    ///     ToolFacts::new("delete_product", None, &schema),
    /// ]);
    /// assert_eq!((report.total, report.read_only, report.destructive), (2, 1, 1));
    /// assert_eq!(report.unannotated, ["delete_product"]);
    /// assert_eq!(report.partially_annotated, ["list_products"]);
    /// ```
    pub fn from_tools<'a>(tools: impl IntoIterator<Item = ToolFacts<'a>>) -> Self {
        let mut report = Self::default();
        for tool in tools {
            let c = classify(&tool);
            let name = tool.name.to_owned();
            report.total += 1;
            match c.class {
                ToolClass::Read => report.read_only += 1,
                ToolClass::AdditiveWrite => report.additive_writes.push(name.clone()),
                ToolClass::DestructiveWrite => {
                    report.destructive += 1;
                    report.destructive_tools.push(name.clone());
                }
            }
            if c.effective.open_world {
                report.open_world += 1;
                report.open_world_tools.push(name.clone());
            }
            if c.token_gated {
                report.token_gated_tools.push(name.clone());
            }
            match coverage(tool.annotations, c.class == ToolClass::Read) {
                Coverage::None => report.unannotated.push(name.clone()),
                Coverage::Partial => report.partially_annotated.push(name.clone()),
                Coverage::Full => {}
            }
            report.tools.push(ToolReport {
                name,
                class: c.class,
                token_gated: c.token_gated,
                raw: tool.annotations.cloned(),
                effective: c.effective,
            });
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value, json};

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn ann(v: Value) -> Annotations {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn unannotated_partial_and_full() {
        let empty_schema = Map::new();
        let empty = ann(json!({}));
        let title_only = ann(json!({"title": "Only a title"}));
        let ro_only = ann(json!({"readOnlyHint": true}));
        let three =
            ann(json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true}));
        let full = ann(json!({"readOnlyHint": false, "destructiveHint": false,
                              "idempotentHint": true, "openWorldHint": false}));
        let full_read = ann(
            json!({"title": "List", "readOnlyHint": true, "destructiveHint": false,
                                   "idempotentHint": true, "openWorldHint": false}),
        );
        let report = SurfaceReport::from_tools([
            ToolFacts::new("none", None, &empty_schema),
            ToolFacts::new("empty", Some(&empty), &empty_schema),
            ToolFacts::new("title_only", Some(&title_only), &empty_schema),
            ToolFacts::new("ro_only", Some(&ro_only), &empty_schema),
            ToolFacts::new("three", Some(&three), &empty_schema),
            ToolFacts::new("full", Some(&full), &empty_schema),
            ToolFacts::new("full_read", Some(&full_read), &empty_schema),
        ]);
        assert_eq!(report.total, 7);
        assert_eq!(report.unannotated, ["none", "empty"]);
        assert_eq!(
            report.partially_annotated,
            ["title_only", "ro_only", "three"]
        );
        // none, empty, title_only: spec defaults, destructive and open world.
        assert_eq!(report.read_only, 2);
        assert_eq!(report.destructive, 3);
        assert_eq!(report.destructive_tools, ["none", "empty", "title_only"]);
        assert_eq!(report.additive_writes, ["three", "full"]);
        assert_eq!(report.open_world, 5);
        assert_eq!(
            report.open_world_tools,
            ["none", "empty", "title_only", "ro_only", "three"]
        );
        assert!(report.token_gated_tools.is_empty());

        let by_name = |n: &str| report.tools.iter().find(|t| t.name == n).unwrap();
        assert_eq!(by_name("none").raw, None);
        assert_eq!(by_name("empty").raw, Some(Annotations::default()));
        assert_eq!(
            by_name("none").effective,
            EffectiveAnnotations::SPEC_DEFAULTS
        );
        assert_eq!(
            by_name("empty").effective,
            EffectiveAnnotations::SPEC_DEFAULTS
        );
        assert_eq!(
            by_name("title_only").effective,
            EffectiveAnnotations::SPEC_DEFAULTS
        );
        assert_eq!(by_name("ro_only").class, ToolClass::Read);
        assert_eq!(
            by_name("ro_only").effective,
            EffectiveAnnotations {
                read_only: true,
                destructive: false,
                idempotent: true,
                open_world: true
            }
        );
        assert_eq!(by_name("full").raw, Some(full.clone()));
        assert_eq!(
            by_name("full").effective,
            EffectiveAnnotations {
                read_only: false,
                destructive: false,
                idempotent: true,
                open_world: false
            }
        );
        let names: Vec<_> = report.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "none",
                "empty",
                "title_only",
                "ro_only",
                "three",
                "full",
                "full_read"
            ]
        );
    }

    #[test]
    fn a_read_needs_only_read_only_and_open_world() {
        let schema = obj(json!({"type": "object"}));
        let closed_read = ann(json!({"readOnlyHint": true, "openWorldHint": false}));
        let bare_read = ann(json!({"readOnlyHint": true}));
        let write = ann(json!({"readOnlyHint": false, "openWorldHint": false}));
        let gated_schema =
            obj(json!({"type": "object", "properties": {"confirmationToken": {"type": "string"}}}));
        let report = SurfaceReport::from_tools([
            ToolFacts::new("read_file", Some(&closed_read), &schema),
            ToolFacts::new("list_dir", Some(&bare_read), &schema),
            ToolFacts::new("write_file", Some(&write), &schema),
            // Claims to be a read, is a destructive write by its schema: all four hints needed.
            ToolFacts::new("purge", Some(&closed_read), &gated_schema),
        ]);
        assert_eq!(
            report.partially_annotated,
            ["list_dir", "write_file", "purge"]
        );
    }

    #[test]
    fn token_gated_tool_reports_raw_claims_and_forced_effective() {
        let schema =
            obj(json!({"type": "object", "properties": {"confirmationToken": {"type": "string"}}}));
        let claims = ann(json!({"readOnlyHint": true, "destructiveHint": false,
                                "idempotentHint": true, "openWorldHint": false}));
        let report = SurfaceReport::from_tools([ToolFacts::new("purge", Some(&claims), &schema)]);
        assert_eq!(report.read_only, 0);
        assert_eq!(report.destructive, 1);
        assert_eq!(report.destructive_tools, ["purge"]);
        assert_eq!(report.token_gated_tools, ["purge"]);
        // Fully annotated: the server set every hint, even if the schema overrides two.
        assert!(report.unannotated.is_empty() && report.partially_annotated.is_empty());
        let tool = &report.tools[0];
        assert_eq!(tool.raw, Some(claims));
        assert!(tool.token_gated);
        assert_eq!(
            tool.effective,
            EffectiveAnnotations {
                read_only: false,
                destructive: true,
                idempotent: true,
                open_world: false
            }
        );
    }

    #[test]
    fn empty_surface() {
        let report = SurfaceReport::from_tools([]);
        assert_eq!(report, SurfaceReport::default());
        assert_eq!(report.total, 0);
    }

    #[test]
    fn serialises_to_camel_case_json() {
        let schema = Map::new();
        let read = ann(json!({"readOnlyHint": true}));
        let report = SurfaceReport::from_tools([
            ToolFacts::new("list", Some(&read), &schema),
            ToolFacts::new("drop", None, &schema),
        ]);
        let v = serde_json::to_value(&report).unwrap();
        assert_eq!(
            v,
            json!({
                "total": 2,
                "readOnly": 1,
                "destructive": 1,
                "openWorld": 2,
                "additiveWrites": [],
                "openWorldTools": ["list", "drop"],
                "destructiveTools": ["drop"],
                "tokenGatedTools": [],
                "unannotated": ["drop"],
                "partiallyAnnotated": ["list"],
                "tools": [
                    {"name": "list", "class": "read", "tokenGated": false,
                     "raw": {"readOnlyHint": true},
                     "effective": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": true}},
                    {"name": "drop", "class": "destructiveWrite", "tokenGated": false,
                     "raw": null,
                     "effective": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}}
                ]
            })
        );
        assert_eq!(serde_json::from_value::<SurfaceReport>(v).unwrap(), report);
    }
}
