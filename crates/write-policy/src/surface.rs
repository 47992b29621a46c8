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

fn coverage(a: Option<&Annotations>) -> Coverage {
    match a {
        None => Coverage::None,
        Some(a) if a.hints_set() == 0 && a.title.is_none() => Coverage::None,
        Some(a) if a.hints_set() < 4 => Coverage::Partial,
        Some(_) => Coverage::Full,
    }
}

impl SurfaceReport {
    /// Classifies every tool and builds the report.
    ///
    /// ```
    /// use write_policy::{Annotations, SurfaceReport, ToolFacts};
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
            match coverage(tool.annotations) {
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
