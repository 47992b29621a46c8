//! `tools_list`: mcp-audit's reading of `tools/list` results and its surface report.

use std::collections::BTreeMap;

use mcp_write_guard_audit::{AuditError, ListedTool, ToolsList, surface_report};
use mcp_write_guard_policy::{
    SurfaceReport, ToolClass, ToolFacts, classify, declares_confirmation_token,
};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::support::fail;

/// Splits `data` at every `0xFF` into pages, keeps those that are JSON, and reads them as the
/// `result`s of consecutive `tools/list` responses ([`ToolsList::from_results`]), then reports
/// on the tools ([`surface_report`]).
///
/// Properties: nothing panics; a refusal is [`AuditError::ListTools`]; an accepted list is
/// exactly the tools of every page's `tools` array (each page an object), each counted once, in
/// order, with the byte size of those arrays as sent; in the report, a tool is a read only if
/// its `readOnlyHint` is the boolean `true` (absent or anything else: a write) and its schema
/// declares no `confirmationToken`; a write is destructive unless `destructiveHint` is the
/// boolean `false` (absent counts as true), and always when token-gated; it is open-world
/// unless `openWorldHint` is the boolean `false`; unannotated and partially annotated as the
/// policy defines them; each class agrees with `mcp_write_guard_policy::classify` of the same
/// annotations; the counts add up.
pub fn check_tools_list(data: &[u8]) {
    let pages: Vec<&RawValue> = data
        .split(|&b| b == 0xFF)
        .filter_map(|page| std::str::from_utf8(page).ok())
        .filter_map(|page| serde_json::from_str::<&RawValue>(page).ok())
        .collect();
    if pages.is_empty() {
        return;
    }
    match ToolsList::from_results(pages.iter().copied()) {
        Ok(list) => {
            check_list(&pages, &list);
            check_report(&list.tools, &surface_report(&list.tools));
        }
        Err(AuditError::ListTools(_)) => {}
        Err(other) => fail(format_args!(
            "tools_list: refused with something other than ListTools: {other}"
        )),
    }
}

/// The tools of one page as an independent reading finds them: the page is an object, its
/// `tools` member an array of objects; with the length of that array's text.
pub(crate) fn page_tools(page: &RawValue) -> Option<(Vec<Map<String, Value>>, usize)> {
    let members: BTreeMap<String, Box<RawValue>> = serde_json::from_str(page.get()).ok()?;
    let tools = members.get("tools")?;
    let items: Vec<Value> = serde_json::from_str(tools.get()).ok()?;
    let objects = items
        .into_iter()
        .map(|item| match item {
            Value::Object(map) => Some(map),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some((objects, tools.get().len()))
}

fn check_list(pages: &[&RawValue], list: &ToolsList) {
    let mut expected = Vec::new();
    let mut bytes = 0;
    for page in pages {
        let Some((tools, size)) = page_tools(page) else {
            fail(format_args!(
                "tools_list: accepted a result that is not an object with a tools array of \
                 objects: {}",
                page.get()
            ));
        };
        expected.extend(tools);
        bytes += size;
    }
    let listed: Vec<&Map<String, Value>> = list.tools.iter().map(ListedTool::fields).collect();
    let expected: Vec<&Map<String, Value>> = expected.iter().collect();
    assert_eq!(
        listed, expected,
        "tools_list: the tools listed are not the pages' tools"
    );
    assert_eq!(
        list.bytes, bytes,
        "tools_list: the size is not that of the tools arrays as sent"
    );
}

/// A hint as the spec reads it: only a JSON boolean counts.
fn hint(fields: &Map<String, Value>, name: &str) -> Option<bool> {
    fields
        .get("annotations")
        .and_then(|a| a.get(name))
        .and_then(Value::as_bool)
}

/// What the report must say about one tool, read from its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Expected {
    pub(crate) class: ToolClass,
    pub(crate) open_world: bool,
    pub(crate) token_gated: bool,
    pub(crate) unannotated: bool,
    pub(crate) partial: bool,
}

pub(crate) fn expected(fields: &Map<String, Value>) -> Expected {
    let schema = fields
        .get("inputSchema")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let token_gated = declares_confirmation_token(&schema);
    let read_only = hint(fields, "readOnlyHint");
    let destructive = hint(fields, "destructiveHint");
    let idempotent = hint(fields, "idempotentHint");
    let open_world = hint(fields, "openWorldHint");
    let class = if !token_gated && read_only == Some(true) {
        ToolClass::Read
    } else if token_gated || destructive != Some(false) {
        ToolClass::DestructiveWrite
    } else {
        ToolClass::AdditiveWrite
    };
    let title = fields
        .get("annotations")
        .and_then(|a| a.get("title"))
        .is_some_and(Value::is_string);
    let hints = [read_only, destructive, idempotent, open_world];
    let declared = hints.iter().flatten().count();
    let unannotated = declared == 0 && !title;
    let read_covered = class == ToolClass::Read && read_only.is_some() && open_world.is_some();
    Expected {
        class,
        open_world: open_world != Some(false),
        token_gated,
        unannotated,
        partial: !unannotated && !read_covered && declared < 4,
    }
}

/// The report agrees with the fields of every tool and with the policy's classification.
pub(crate) fn check_report(tools: &[ListedTool], report: &SurfaceReport) {
    assert_eq!(
        (report.total, report.tools.len()),
        (tools.len(), tools.len()),
        "tools_list: not every tool counted once"
    );
    let mut lists = Lists::default();
    for (tool, reported) in tools.iter().zip(&report.tools) {
        let name = tool.name();
        assert_eq!(reported.name, name, "tools_list: the report reorders tools");
        let want = expected(tool.fields());
        assert_eq!(
            (
                reported.class,
                reported.effective.open_world,
                reported.token_gated
            ),
            (want.class, want.open_world, want.token_gated),
            "tools_list: the report reads {:?} otherwise (class, open world, token-gated)",
            tool.fields()
        );
        assert_eq!(
            reported.effective.read_only,
            want.class == ToolClass::Read,
            "tools_list: an effective readOnlyHint that is not the class"
        );
        assert_eq!(
            reported.effective.destructive,
            want.class == ToolClass::DestructiveWrite,
            "tools_list: an effective destructiveHint that is not the class"
        );
        let annotations = tool.annotations();
        let policy = classify(&ToolFacts::new(
            name,
            annotations.as_ref(),
            tool.input_schema(),
        ));
        assert_eq!(
            policy.class, reported.class,
            "tools_list: the report and mcp_write_guard_policy::classify disagree"
        );
        assert_eq!(
            annotations.is_none(),
            matches!(tool.fields().get("annotations"), None | Some(Value::Null)),
            "tools_list: annotations read where none were declared, or the other way"
        );
        match want.class {
            ToolClass::Read => {}
            ToolClass::AdditiveWrite => lists.additive.push(name),
            ToolClass::DestructiveWrite => lists.destructive.push(name),
        }
        for (list, member) in [
            (&mut lists.open_world, want.open_world),
            (&mut lists.gated, want.token_gated),
            (&mut lists.unannotated, want.unannotated),
            (&mut lists.partial, want.partial),
        ] {
            if member {
                list.push(name);
            }
        }
    }
    let Lists {
        additive,
        destructive,
        open_world,
        gated,
        unannotated,
        partial,
    } = &lists;
    assert_eq!(
        (&report.additive_writes, &report.destructive_tools),
        (&owned(additive), &owned(destructive)),
        "tools_list: the lists of writes are wrong"
    );
    assert_eq!(
        (&report.open_world_tools, &report.token_gated_tools),
        (&owned(open_world), &owned(gated)),
        "tools_list: the open-world or token-gated list is wrong"
    );
    assert_eq!(
        (&report.unannotated, &report.partially_annotated),
        (&owned(unannotated), &owned(partial)),
        "tools_list: the unannotated or partially annotated list is wrong"
    );
    let reads = report
        .tools
        .iter()
        .filter(|t| t.class == ToolClass::Read)
        .count();
    assert_eq!(
        (report.read_only, report.destructive, report.open_world),
        (reads, destructive.len(), open_world.len()),
        "tools_list: a count does not match its list"
    );
    assert_eq!(
        report.read_only + report.additive_writes.len() + report.destructive,
        report.total,
        "tools_list: reads and writes do not add up to every tool"
    );
}

/// The names each of the report's lists must hold, in the tools' order.
#[derive(Default)]
struct Lists<'a> {
    additive: Vec<&'a str>,
    destructive: Vec<&'a str>,
    open_world: Vec<&'a str>,
    gated: Vec<&'a str>,
    unannotated: Vec<&'a str>,
    partial: Vec<&'a str>,
}

fn owned(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn listed(v: Value) -> ListedTool {
        ListedTool::new(v.as_object().cloned().unwrap())
    }

    #[test]
    fn holds_for_ordinary_lists() {
        check_tools_list(
            br#"{"tools": [{"name": "a", "inputSchema": {}}, {"name": "r", "annotations": {"readOnlyHint": true, "openWorldHint": false}}]}"#,
        );
        check_tools_list(br#"{"tools": [{"name": "d", "annotations": {"destructiveHint": false, "readOnlyHint": "true"}}], "nextCursor": "x"}"#);
        check_tools_list(b"{\"tools\": []}\xFF{\"tools\": [{\"name\": \"x\"}]}");
        check_tools_list(br#"{"tools": [1]}"#);
    }

    #[test]
    fn absent_hints_are_the_cautious_reading() {
        let fields = json!({"name": "x"});
        let e = expected(fields.as_object().unwrap());
        assert_eq!(e.class, ToolClass::DestructiveWrite);
        assert!(e.open_world && e.unannotated && !e.partial);
    }

    #[test]
    #[should_panic(expected = "the report reads")]
    fn a_report_that_calls_a_write_a_read_fails() {
        let write = listed(json!({"name": "w", "annotations": {"readOnlyHint": false}}));
        let read = listed(json!({"name": "w", "annotations": {"readOnlyHint": true}}));
        // The report of another tool under the same name.
        check_report(&[write], &surface_report(&[read]));
    }

    #[test]
    #[should_panic(expected = "not every tool counted once")]
    fn a_tool_counted_twice_fails() {
        let t = listed(json!({"name": "t"}));
        let twice = surface_report(&[t.clone(), t.clone()]);
        check_report(&[t], &twice);
    }

    #[test]
    #[should_panic(expected = "not an object with a tools array")]
    fn accepting_a_page_without_tools_fails() {
        let page: &RawValue = serde_json::from_str(r#"{"tool": []}"#).unwrap();
        check_list(&[page], &ToolsList::default());
    }
}
