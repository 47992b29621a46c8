//! The tool list as the server sent it, and its reading into mcp-write-guard-policy's surface report.

use std::sync::LazyLock;

use mcp_write_guard_policy::{Annotations, SurfaceReport, ToolFacts};
use rmcp::model::JsonObject;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::AuditError;

/// One tool exactly as the server listed it: every field it sent, those rmcp's `Tool` type knows
/// and those it does not (for example `execution`), with their values untouched.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct ListedTool(JsonObject);

static NO_SCHEMA: LazyLock<JsonObject> = LazyLock::new(JsonObject::new);

impl ListedTool {
    /// The tool object as listed.
    pub fn new(fields: JsonObject) -> Self {
        Self(fields)
    }

    /// Every field the server sent.
    pub fn fields(&self) -> &JsonObject {
        &self.0
    }

    /// The tool's `name` (empty when it is missing or not a string).
    pub fn name(&self) -> &str {
        self.0.get("name").and_then(Value::as_str).unwrap_or("")
    }

    /// The annotation object, read leniently by mcp-write-guard-policy
    /// ([`Annotations::from_json_lenient`]): `None` when the tool declares none (or `null`);
    /// a hint of the wrong type reads as not declared.
    pub fn annotations(&self) -> Option<Annotations> {
        match self.0.get("annotations") {
            None | Some(Value::Null) => None,
            Some(a) => Some(Annotations::from_json_lenient(a)),
        }
    }

    /// The input schema (empty when it is missing or not an object).
    pub fn input_schema(&self) -> &JsonObject {
        self.0
            .get("inputSchema")
            .and_then(Value::as_object)
            .unwrap_or(&NO_SCHEMA)
    }

    /// `execution.taskSupport` as declared (`forbidden`, `optional`, `required`), when it is.
    pub fn task_support(&self) -> Option<&str> {
        self.0
            .get("execution")
            .and_then(|e| e.get("taskSupport"))
            .and_then(Value::as_str)
    }
}

/// The tool list of one or more `tools/list` results, as the server sent them.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct ToolsList {
    /// Every tool, all pages merged in the order listed.
    pub tools: Vec<ListedTool>,
    /// The size of the list, in bytes: see [`ToolsList::from_results`].
    pub bytes: usize,
}

impl ToolsList {
    /// Reads the `result` member of each `tools/list` response, in page order, exactly as the
    /// server sent it.
    ///
    /// The size is the sum of the byte lengths of each result's `tools` array as received
    /// (UTF-8, whitespace and key order as the server wrote them, every field of every tool
    /// kept, `execution` and unknown ones included). The rest of the result (`nextCursor`,
    /// `_meta`, and the `resultType`, `ttlMs`, `cacheScope` of protocol 2026-07-28), the
    /// JSON-RPC frame and the transport's framing (line end, SSE `data:` lines) are not
    /// counted, so the size is the same over stdio and HTTP, in either protocol era, and does
    /// not depend on the request id.
    ///
    /// # Errors
    ///
    /// [`AuditError::ListTools`] when a result is not an object with a `tools` array of objects.
    pub fn from_results<'a>(
        results: impl IntoIterator<Item = &'a RawValue>,
    ) -> Result<Self, AuditError> {
        #[derive(serde::Deserialize)]
        struct Page<'a> {
            #[serde(borrow)]
            tools: &'a RawValue,
        }
        let malformed = |e: serde_json::Error| {
            AuditError::ListTools(format!("a tools/list result without a tool array: {e}"))
        };
        let mut list = Self::default();
        for raw in results {
            // serde reads a struct from an array as well (`[[...]]` as `{"tools": [...]}`): a
            // result must be an object.
            if !raw.get().trim_start().starts_with('{') {
                return Err(AuditError::ListTools(
                    "a tools/list result that is not an object".into(),
                ));
            }
            let page: Page<'_> = serde_json::from_str(raw.get()).map_err(malformed)?;
            list.bytes += page.tools.get().len();
            let tools: Vec<Value> = serde_json::from_str(page.tools.get()).map_err(malformed)?;
            for tool in tools {
                let Value::Object(fields) = tool else {
                    return Err(AuditError::ListTools(format!(
                        "a tools/list entry is not an object: {tool}"
                    )));
                };
                list.tools.push(ListedTool::new(fields));
            }
        }
        Ok(list)
    }
}

/// mcp-write-guard-policy's [`SurfaceReport`] of `tools`: every count and predicate comes from there.
pub fn surface_report(tools: &[ListedTool]) -> SurfaceReport {
    let annotations: Vec<Option<Annotations>> = tools.iter().map(ListedTool::annotations).collect();
    SurfaceReport::from_tools(
        tools
            .iter()
            .zip(&annotations)
            .map(|(tool, a)| ToolFacts::new(tool.name(), a.as_ref(), tool.input_schema())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn listed(v: Value) -> ListedTool {
        ListedTool::new(v.as_object().unwrap().clone())
    }

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn every_hint_is_read_leniently_and_unknown_fields_are_kept() {
        let t = listed(json!({
            "name": "t", "inputSchema": {"type": "object"},
            "annotations": {"title": "T", "readOnlyHint": true, "destructiveHint": "no",
                            "openWorldHint": false},
            "execution": {"taskSupport": "required"}, "x-vendor": [1]
        }));
        let a = t.annotations().unwrap();
        assert_eq!(a.title.as_deref(), Some("T"));
        assert_eq!(
            (a.read_only_hint, a.destructive_hint, a.open_world_hint),
            (Some(true), None, Some(false))
        );
        assert_eq!(t.task_support(), Some("required"));
        assert_eq!(t.fields()["x-vendor"], json!([1]));
        assert_eq!(t.input_schema()["type"], "object");
        assert_eq!(
            listed(json!({"name": "n", "annotations": null})).annotations(),
            None
        );
        assert!(listed(json!({"name": "n"})).input_schema().is_empty());
    }

    #[test]
    fn a_server_without_annotations_is_all_destructive_and_open_world() {
        let tools = [
            listed(json!({"name": "a", "inputSchema": {}})),
            listed(json!({"name": "b", "inputSchema": {}, "annotations": {}})),
        ];
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
    fn a_read_needs_only_read_only_and_open_world() {
        let tools = [listed(json!({"name": "r", "inputSchema": {},
            "annotations": {"readOnlyHint": true, "openWorldHint": false}}))];
        let report = surface_report(&tools);
        assert_eq!(report.read_only, 1);
        assert!(report.partially_annotated.is_empty());
        assert!(report.unannotated.is_empty());
    }

    #[test]
    fn the_size_is_the_tool_arrays_as_sent() {
        let tools1 = r#"[ {"name":"a","inputSchema":{}} ]"#;
        let tools2 = r#"[{"name":"b","inputSchema":{},"execution":{"taskSupport":"optional"}}]"#;
        let page1 = format!(r#"{{ "tools": {tools1}, "nextCursor": "1" }}"#);
        let page2 = format!(r#"{{"resultType":"complete","tools":{tools2},"ttlMs":0}}"#);
        let (a, b) = (raw(&page1), raw(&page2));
        let list = ToolsList::from_results([&*a, &*b]).unwrap();
        assert_eq!(list.bytes, tools1.len() + tools2.len());
        let names: Vec<&str> = list.tools.iter().map(ListedTool::name).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(list.tools[1].task_support(), Some("optional"));
    }

    #[test]
    fn a_result_without_a_tool_array_is_an_error() {
        // `[[...]]` is regression input of the fuzz target `tools_list`
        // (fuzz/regressions/tools_list/): serde read it as a struct, and so as a tool list.
        for bad in [
            r#"{}"#,
            r#"{"tools": {}}"#,
            r#"{"tools": [1]}"#,
            "[]",
            r#"[[{"name": "a", "inputSchema": {}}]]"#,
            "[[]]",
            r#"["tools"]"#,
        ] {
            assert!(
                matches!(
                    ToolsList::from_results([&*raw(bad)]),
                    Err(AuditError::ListTools(_))
                ),
                "{bad}"
            );
        }
    }
}
