//! Reading a tool list into write-policy's surface report, and measuring its size.

use rmcp::model::Tool;
use write_policy::{Annotations, SurfaceReport, ToolFacts};

use crate::error::AuditError;

/// The annotation object a tool declares, as write-policy reads it (`None` when it declares
/// none; an empty object stays `Some` and write-policy counts it as unannotated).
pub fn annotations_of(tool: &Tool) -> Option<Annotations> {
    tool.annotations.as_ref().map(|a| Annotations {
        title: a.title.clone(),
        read_only_hint: a.read_only_hint,
        destructive_hint: a.destructive_hint,
        idempotent_hint: a.idempotent_hint,
        open_world_hint: a.open_world_hint,
    })
}

/// write-policy's [`SurfaceReport`] of `tools`: every count and predicate comes from there.
pub fn surface_report(tools: &[Tool]) -> SurfaceReport {
    let annotations: Vec<Option<Annotations>> = tools.iter().map(annotations_of).collect();
    SurfaceReport::from_tools(
        tools
            .iter()
            .zip(&annotations)
            .map(|(tool, a)| ToolFacts::new(&tool.name, a.as_ref(), &tool.input_schema)),
    )
}

/// The size of the tool list, in bytes, as a published-surface contract pins it.
///
/// Defined as the length in bytes of the compact JSON array (no whitespace, UTF-8) of every tool
/// the server listed, all pages merged in the order listed, each tool serialised as rmcp 3.11
/// serialises its `Tool` type: `name`, `title`, `description`, `inputSchema`, `outputSchema`,
/// `annotations`, `icons` and `_meta`, absent fields left out, fields the type does not know
/// dropped. Pagination fields (`nextCursor`) and the JSON-RPC frame are not counted. This is
/// roughly what a client puts in front of the model.
///
/// # Errors
///
/// [`AuditError::Serialize`] if a tool cannot be serialised (not expected for parsed tools).
pub fn tools_list_bytes(tools: &[Tool]) -> Result<usize, AuditError> {
    serde_json::to_vec(tools)
        .map(|bytes| bytes.len())
        .map_err(AuditError::Serialize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ToolAnnotations;
    use std::sync::Arc;

    fn tool(name: &'static str, a: Option<ToolAnnotations>) -> Tool {
        let schema = serde_json::json!({"type": "object"});
        let mut t = Tool::new(name, "d", Arc::new(schema.as_object().unwrap().clone()));
        t.annotations = a;
        t
    }

    #[test]
    fn every_hint_is_carried_over() {
        let a = ToolAnnotations::with_title("T")
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false);
        let got = annotations_of(&tool("t", Some(a))).unwrap();
        assert_eq!(got.title.as_deref(), Some("T"));
        assert_eq!(
            (
                got.read_only_hint,
                got.destructive_hint,
                got.idempotent_hint,
                got.open_world_hint
            ),
            (Some(true), Some(false), Some(true), Some(false))
        );
        assert_eq!(annotations_of(&tool("t", None)), None);
        assert_eq!(
            annotations_of(&tool("t", Some(ToolAnnotations::new()))),
            Some(Annotations::default())
        );
    }

    #[test]
    fn a_server_without_annotations_is_all_destructive_and_open_world() {
        let tools = [tool("a", None), tool("b", Some(ToolAnnotations::new()))];
        let report = surface_report(&tools);
        assert_eq!(
            (
                report.total,
                report.read_only,
                report.destructive,
                report.open_world
            ),
            (2, 0, 2, 2)
        );
        assert_eq!(report.unannotated, ["a", "b"]);
    }

    #[test]
    fn the_size_is_the_compact_json_array() {
        let tools = [tool("a", None)];
        let expected = r#"[{"name":"a","description":"d","inputSchema":{"type":"object"}}]"#;
        assert_eq!(tools_list_bytes(&tools).unwrap(), expected.len());
        assert_eq!(tools_list_bytes(&[]).unwrap(), 2);
    }
}
