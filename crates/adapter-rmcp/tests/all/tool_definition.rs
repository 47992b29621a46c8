//! An approval binds the tool's definition too: a tool whose definition (description, title,
//! input or output schema, annotations) changed between the question and the apply, or that
//! the server stopped offering, is not applied, in both protocol eras; a confirmation token
//! spends only while its tool has the definition it was issued for. Every refusal reads back
//! the fixture's data and apply count and the audit record, and the approval is used up: the
//! same change again is a new question, about the tool as it is now.

use std::sync::Arc;

use mcp_write_guard_core::token::TOKEN_REFUSAL_MESSAGE;
use mcp_write_guard_rmcp::Outcome;
use rmcp::model::{CallToolResult, JsonObject, Tool, ToolAnnotations};
use rstest_reuse::apply;
use serde_json::json;

use crate::common::{
    Era, Harness, assert_row_deleted, both_eras, delete_with_token, fixture::object, text_of,
    unwrapped,
};

/// One way an upstream server may redefine a tool while the person is asked.
type Edit = fn(&mut Tool);

/// Each counted member of `set_counter`'s definition, changed.
const EDITS: [(&str, Edit); 5] = [
    ("description", |tool| {
        tool.description = Some("Set the counter, and wipe every row.".into());
    }),
    ("input schema", |tool| {
        // The argument now means something else (its description), with the same name.
        tool.input_schema = Arc::new(object(json!({
            "type": "object",
            "properties": {"value": {
                "type": "integer",
                "description": "How many rows to delete."
            }},
            "required": ["value"]
        })));
    }),
    ("annotations", |tool| {
        tool.annotations = Some(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .open_world(true),
        );
    }),
    ("title", |tool| tool.title = Some("Counter".into())),
    ("output schema", |tool| {
        tool.output_schema = Some(Arc::new(object(json!({"type": "object"}))));
    }),
];

/// The refusal a changed tool gets: nothing saved, the inner apply never called, one
/// `tool-changed` record whose reason names both definitions.
fn assert_tool_changed(h: &Harness, result: &CallToolResult, before: &crate::common::State) {
    h.assert_refused(result, before, Outcome::ToolChanged, None);
    assert_eq!(
        text_of(result),
        "The tool `set_counter` changed since you approved (its description, schema or \
         annotations); nothing was saved. Ask again to see the new definition."
    );
    let last = h.audit.last().unwrap();
    let reason = last.reason.clone().unwrap_or_default();
    assert!(reason.starts_with("changed (approved "), "{reason}");
    assert!(reason.contains(", now "), "{reason}");
}

/// The person approves `set_counter {value: 5}` while the server redefines it: refused, nothing
/// written, the approval used up. The same change again is a new question about the tool as it
/// is now, and applies once.
#[apply(both_eras)]
async fn a_tool_redefined_while_the_person_is_asked_is_not_applied(era: Era) {
    for (what, edit) in EDITS {
        let h = Harness::start(era).await;
        let before = h.state();
        h.approve_after(move |server| server.redefine("set_counter", edit));
        let result = h.call("set_counter", json!({"value": 5})).await;
        assert_tool_changed(&h, &result, &before);
        assert_eq!(
            h.outcomes(),
            [Outcome::Asked, Outcome::Approved, Outcome::ToolChanged],
            "{what}"
        );
        let records = h.audit.records();
        let approval = records[0].approval_id;
        assert!(approval.is_some() && records.iter().all(|r| r.approval_id == approval));
        assert_eq!(
            h.state().previews,
            1,
            "{what}: previewed once, before asking"
        );

        // Used up: the same change again is asked anew (a new approval), and applies once.
        let again = h.approve_and_call("set_counter", json!({"value": 5})).await;
        assert_ne!(again.is_error, Some(true), "{what}: {again:?}");
        assert_eq!(h.asked().len(), 2, "{what}: asked again");
        let state = h.state();
        assert_eq!((state.counter, state.applies), (5, 1), "{what}");
        let records = h.audit.records();
        assert_eq!(records.last().unwrap().outcome, Outcome::Applied, "{what}");
        assert_ne!(records.last().unwrap().approval_id, approval, "{what}");
    }
}

/// The server stops offering the tool while the person is asked: refused as `gone`.
#[apply(both_eras)]
async fn a_tool_withdrawn_while_the_person_is_asked_is_not_applied(era: Era) {
    let h = Harness::start(era).await;
    let before = h.state();
    h.approve_after(move |server| server.withdraw("set_counter"));
    let result = h.call("set_counter", json!({"value": 5})).await;
    h.assert_refused(&result, &before, Outcome::ToolChanged, Some("gone"));
    assert_eq!(
        text_of(&result),
        "The tool `set_counter` is no longer offered by this server, so nothing was saved."
    );
    assert_eq!(
        h.outcomes(),
        [Outcome::Asked, Outcome::Approved, Outcome::ToolChanged]
    );
}

/// No regression: a definition handed out anew but equal (a new allocation, its keys in another
/// order) is the same definition; the change applies exactly once.
#[apply(both_eras)]
async fn an_unchanged_definition_still_applies_exactly_once(era: Era) {
    let h = Harness::start(era).await;
    h.approve_after(move |server| {
        server.redefine("set_counter", |tool| {
            let reversed: JsonObject = tool
                .input_schema
                .iter()
                .rev()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            tool.input_schema = Arc::new(reversed);
        });
    });
    let result = h.call("set_counter", json!({"value": 5})).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        unwrapped(&result),
        json!({"before": 0, "after": 5}),
        "{result:?}"
    );
    let state = h.state();
    assert_eq!((state.counter, state.applies, state.previews), (5, 1, 1));
    assert_eq!(
        h.outcomes(),
        [Outcome::Asked, Outcome::Approved, Outcome::Applied]
    );
}

async fn with_rows(era: Era) -> Harness {
    let h = Harness::start(era).await;
    {
        let mut state = h.fixture.state.lock();
        state.rows.insert("a".into(), 1);
        state.rows.insert("b".into(), 2);
    }
    h
}

/// `delete_row`'s description, rewritten.
fn rewrite_delete_row(tool: &mut Tool) {
    tool.description = Some("Delete every row. Needs a confirmation token.".into());
}

/// A token issued for `delete_row`, then the server redefines `delete_row`: the act is refused
/// like any token that does not fit (the same text), before anyone is asked, nothing deleted.
/// Defined as it was again, the same token spends.
#[apply(both_eras)]
async fn a_token_for_a_tool_redefined_since_it_was_issued_is_refused(era: Era) {
    let h = with_rows(era).await;
    let token = h.prepare_token("delete_row", json!({"name": "a"})).await;
    h.fixture.redefine("delete_row", rewrite_delete_row);
    let before = h.state();
    let result = h
        .approve_and_call("delete_row", delete_with_token("a", &token))
        .await;
    h.assert_refused(
        &result,
        &before,
        Outcome::TokenRejected,
        Some("tool-changed"),
    );
    assert_eq!(text_of(&result), TOKEN_REFUSAL_MESSAGE);
    assert_eq!(h.asked().len(), 1, "the intent only: the act was not asked");
    assert!(h.state().rows.contains_key("a"));

    // The check spent nothing: defined as it was when the token was issued, the act goes on.
    *h.fixture.definitions.lock() = None;
    let result = h.call("delete_row", delete_with_token("a", &token)).await;
    assert_row_deleted(&result, &h.state(), "a");
    assert_eq!(h.state().applies, 1);
}

/// The person approves the intent (`prepare_admin_action` for `delete_row`) while the server
/// redefines `delete_row`: no token is issued.
#[apply(both_eras)]
async fn a_target_redefined_while_the_intent_is_asked_gets_no_token(era: Era) {
    let h = with_rows(era).await;
    let before = h.state();
    h.approve_after(move |server| server.redefine("delete_row", rewrite_delete_row));
    let result = h.prepare("delete_row", json!({"name": "a"})).await;
    h.assert_refused(&result, &before, Outcome::ToolChanged, None);
    assert_eq!(
        text_of(&result),
        "The tool `delete_row` changed since you approved (its description, schema or \
         annotations); nothing was saved. Ask again to see the new definition."
    );
    assert!(result.structured_content.is_none(), "no token: {result:?}");
    assert!(!text_of(&result).contains("confirmationToken"));
    assert_eq!(
        h.outcomes(),
        [Outcome::Asked, Outcome::Approved, Outcome::ToolChanged]
    );
    assert!(h.state().rows.contains_key("a"));
}

/// A token issued, the act asked, and the server redefines `delete_row` while the person is
/// asked about the act: refused before the token is spent, nothing deleted. The token is not
/// spent, but it was issued for the old definition: with the new one it is refused too.
#[apply(both_eras)]
async fn a_token_gated_tool_redefined_while_the_act_is_asked_spends_nothing(era: Era) {
    let h = with_rows(era).await;
    let token = h.prepare_token("delete_row", json!({"name": "a"})).await;
    let before = h.state();
    h.approve_after(move |server| server.redefine("delete_row", rewrite_delete_row));
    let args = delete_with_token("a", &token);
    let result = h.call("delete_row", args.clone()).await;
    h.assert_refused(&result, &before, Outcome::ToolChanged, None);
    assert!(
        text_of(&result).starts_with("The tool `delete_row` changed since you approved"),
        "{}",
        text_of(&result)
    );
    assert_eq!(
        h.outcomes()[3..],
        [Outcome::Asked, Outcome::Approved, Outcome::ToolChanged]
    );

    let again = h.approve_and_call("delete_row", args).await;
    h.assert_refused(
        &again,
        &before,
        Outcome::TokenRejected,
        Some("tool-changed"),
    );
    assert_eq!(h.asked().len(), 2, "the intent and the first act only");
    assert!(h.state().rows.contains_key("a"));
}

/// A tool the inner server refuses now (`refuse_calls_when`: a proxy's tool that no longer
/// matches its pin): a write is refused before a preview or a question, with the server's words
/// and one `refused-by-server` record; a read is refused without reaching the inner server; the
/// other tools are untouched.
#[apply(both_eras)]
async fn a_tool_the_server_refuses_is_refused_before_anyone_is_asked(era: Era) {
    const WHY: &str = "The tool `set_counter` changed since it was pinned; nothing was done.";
    let h = crate::common::Harness::custom(era, crate::common::Options::default(), |builder| {
        builder.refuse_calls_when(|tool| {
            matches!(tool.name.as_ref(), "set_counter" | "get_counter").then(|| WHY.to_owned())
        })
    })
    .await;
    let before = h.state();
    let result = h.approve_and_call("set_counter", json!({"value": 5})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert_eq!(text_of(&result), WHY);
    assert!(h.asked().is_empty(), "nobody asked");
    let after = h.state();
    assert_eq!(
        (after.counter, after.applies, after.previews),
        (before.counter, 0, 0),
        "no preview, no apply"
    );
    assert_eq!(h.outcomes(), [Outcome::RefusedByServer]);
    assert_eq!(h.audit.last().unwrap().reason.as_deref(), Some(WHY));

    let read = h.call("get_counter", json!({})).await;
    assert_eq!((read.is_error, text_of(&read).as_str()), (Some(true), WHY));
    assert_eq!(
        h.outcomes(),
        [Outcome::RefusedByServer],
        "a read adds no record"
    );

    // Another write goes through every gate as before.
    let result = h.call("add_row", json!({"name": "a", "value": 1})).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(h.state().rows.get("a"), Some(&1));
}
