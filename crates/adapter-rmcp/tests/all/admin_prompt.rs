//! `prepare_admin_action`'s question for a target tool that opted in to previews: it runs the
//! target's preview with the target arguments (without any token) and asks in the target's own
//! words, in both eras. A target preview that fails refuses the preparation: nobody is asked,
//! no token is issued, nothing changes, and one `PreviewFailed` record says so.

use std::sync::atomic::Ordering;

use mcp_write_guard_rmcp::{Outcome, PREPARE_ADMIN_ACTION, PromptInput, WriteGuardBuilder};
use rmcp::model::*;
use rstest_reuse::apply;
use serde_json::{Value, json};

use crate::common::{
    Era, Reply, State, assert_deleted_once, assert_row_deleted, both_eras, delete_with_token,
    prepare_token_on, text_of,
};
use crate::wrapped::{Harness, Wrapped, no_such_row};

/// The sentence every `prepare_admin_action` question for `delete_row` starts with.
const PREPARING: &str = "Allow preparing an admin action? It issues a one-time confirmation \
token for tool delete_row with exactly these arguments; the action itself will ask you again \
before it runs.\n";

/// The fixture, with one business rule added to `delete_row`'s preview (a row that does not
/// exist cannot be deleted), behind a guard: writes enabled, `delete_row` previewed, rows `a` =
/// 1 and `b` = 2; `configure` adds the rest.
async fn start(
    era: Era,
    configure: impl FnOnce(WriteGuardBuilder<Wrapped>) -> WriteGuardBuilder<Wrapped>,
) -> Harness {
    let server = Wrapped::default();
    server
        .knobs
        .deletes_need_the_row
        .store(true, Ordering::SeqCst);
    {
        let mut state = server.fixture.state.lock();
        state.rows.insert("a".into(), 1);
        state.rows.insert("b".into(), 2);
    }
    Harness::guarded(era, server, |builder| {
        configure(builder.preview("delete_row"))
    })
    .await
}

impl Harness {
    /// The arguments of every `delete_row` preview so far.
    fn previewed(&self) -> Vec<JsonObject> {
        self.server.knobs.delete_previews.lock().clone()
    }

    /// Scripts the client to approve, then calls `prepare_admin_action` for `delete_row` with
    /// `arguments`: its result, a token or a refusal.
    async fn approve_and_prepare(&self, arguments: Value) -> CallToolResult {
        self.scripted.script([Reply::Approve]);
        self.prepare("delete_row", arguments).await
    }

    async fn prepare_token(&self, args: Value) -> String {
        prepare_token_on(&self.client, &self.scripted, "delete_row", args).await
    }

    /// A refused `prepare_admin_action`: an error without a token, nobody asked, the data as
    /// `before`, no apply, and exactly one record, `PreviewFailed` with `reason`.
    fn assert_refused_before_asking(&self, result: &CallToolResult, before: &State, reason: &str) {
        assert_eq!(result.is_error, Some(true), "{result:?}");
        assert!(result.structured_content.is_none(), "no token: {result:?}");
        assert!(!text_of(result).contains("confirmationToken"), "{result:?}");
        assert!(
            self.scripted.asked().is_empty(),
            "{:?}",
            self.scripted.asked()
        );
        let after = self.state();
        assert_eq!(after.data(), before.data());
        assert_eq!(after.applies, before.applies);
        let records = self.audit.records();
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0].outcome, Outcome::PreviewFailed);
        assert_eq!(records[0].tool, PREPARE_ADMIN_ACTION);
        assert_eq!(records[0].reason.as_deref(), Some(reason));
    }
}

#[apply(both_eras)]
async fn the_intent_question_shows_the_target_preview(era: Era) {
    let h = start(era, |b| b).await;
    let token = h.prepare_token(json!({"name": "a"})).await;

    let asked = h.scripted.asked();
    assert_eq!(
        asked,
        [format!(
            "{PREPARING}Approve this change? Tool: delete_row\nWhat changes:\n  (value): 1 -> null\n\
             Arguments:\n  name: \"a\"\nNothing is saved unless you approve."
        )]
    );
    assert_eq!(
        h.previewed(),
        [json!({"name": "a"}).as_object().cloned().unwrap()]
    );
    assert_eq!(h.state().previews, 1);
    assert_eq!(h.state().applies, 0, "preparing is not deleting");
    assert!(h.state().rows.contains_key("a"));
    assert_eq!(
        h.audit.outcomes(),
        [Outcome::Asked, Outcome::Approved, Outcome::TokenIssued]
    );

    // The token is bound as before: to delete_row and {"name": "a"}; the act asks again.
    let result = h
        .approve_and_call("delete_row", delete_with_token("a", &token))
        .await;
    assert_deleted_once(&result, &h.state(), "a");
    let asked = h.scripted.asked();
    assert_eq!(asked.len(), 2);
    assert!(
        asked[1].starts_with("Approve this change? Tool: delete_row"),
        "{}",
        asked[1]
    );
    assert!(asked[1].contains("  (value): 1 -> null"), "{}", asked[1]);
}

#[apply(both_eras)]
async fn the_intent_question_is_the_target_prompt_after_the_preparing_sentence(era: Era) {
    let h = start(era, |b| {
        b.prompt("delete_row", |input: &PromptInput<'_>| {
            format!(
                "Delete row {} (value {})?",
                input
                    .argument("name")
                    .map(|n| n.to_string())
                    .unwrap_or_default(),
                input
                    .preview("/before")
                    .map_or_else(|| "null".to_owned(), |b| b.to_string())
            )
        })
    })
    .await;
    let token = h.prepare_token(json!({"name": "b"})).await;
    assert_eq!(
        h.scripted.asked(),
        [format!("{PREPARING}Delete row \"b\" (value 2)?")]
    );

    // The act is asked in the same words, without the preparing sentence.
    let result = h
        .approve_and_call("delete_row", delete_with_token("b", &token))
        .await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(h.scripted.asked()[1], "Delete row \"b\" (value 2)?");
    assert!(!h.state().rows.contains_key("b"));
}

#[apply(both_eras)]
async fn the_target_preview_never_sees_a_confirmation_token(era: Era) {
    let h = start(era, |b| b).await;
    // A stray token among the target arguments is neither shown, previewed nor bound.
    let token = h
        .prepare_token(json!({"name": "a", "confirmationToken": "stray"}))
        .await;
    assert_eq!(
        h.previewed(),
        [json!({"name": "a"}).as_object().cloned().unwrap()]
    );
    let intent = &h.scripted.asked()[0];
    assert!(!intent.contains("stray"), "{intent}");
    assert!(intent.contains("  (value): 1 -> null"), "{intent}");

    let result = h
        .approve_and_call("delete_row", delete_with_token("a", &token))
        .await;
    assert_row_deleted(&result, &h.state(), "a");
}

#[apply(both_eras)]
async fn a_target_preview_that_says_no_refuses_without_asking(era: Era) {
    let h = start(era, |b| b).await;
    let before = h.state();
    let result = h.approve_and_prepare(json!({"name": "zzz"})).await;
    h.assert_refused_before_asking(&result, &before, "preview failed");
    // The tool's own words, in the envelope, as a failed preview of the tool itself is.
    let text = text_of(&result);
    let wrapped = mcp_write_guard_envelope::parse_text(&text)
        .unwrap_or_else(|| panic!("not wrapped: {text}"));
    assert_eq!(
        mcp_write_guard_envelope::unwrap(&wrapped),
        Some(&json!(no_such_row("zzz")))
    );
    assert_eq!(
        mcp_write_guard_envelope::source(&wrapped),
        Some("fixture/delete_row")
    );
    assert_eq!(h.state().previews, before.previews + 1);

    // Nothing was issued: the act has no token to present and is refused before asking.
    let result = h.call("delete_row", json!({"name": "zzz"})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert!(h.scripted.asked().is_empty());
    assert_eq!(h.audit.last().unwrap().outcome, Outcome::TokenRejected);
}

#[apply(both_eras)]
async fn a_target_preview_that_errors_refuses_without_asking(era: Era) {
    let h = start(era, |b| b).await;
    let before = h.state();
    // The fixture rejects the arguments with a protocol error.
    let result = h.approve_and_prepare(json!({"name": 7})).await;
    h.assert_refused_before_asking(&result, &before, "name must be a string");
    let text = text_of(&result);
    assert!(text.contains("could not be previewed"), "{text}");
    assert!(text.contains("nothing was saved"), "{text}");
    assert!(
        !text.contains("must be a string"),
        "inner text stays in the audit: {text}"
    );
}
