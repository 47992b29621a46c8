//! The attack on the approval questions is closed: a reason the model writes cannot add lines
//! to what the person reads, fake a "Before:"/"After:" line or a "no stock change" sentence,
//! reorder the text (bidi overrides), hide characters (zero-width, U+2028) or end its quotes
//! with a look-alike quotation mark. Each question has exactly the lines its wording intends,
//! the line with the change carries the true figures before the reason, and none of the raw
//! characters reaches the person. The person declines, and nothing on disk
//! moves.

use mcp_write_guard_rmcp::test_util::{ERAS, Reply};
use mcp_write_guard_rmcp::{
    DEFAULT_MAX_RENDERED_CHARS, Outcome, PREPARE_ADMIN_ACTION, render_value,
};
use serde_json::json;
use workspace_tests::{
    Client, Failure, FileView, Snapshot, call, cancel_args, cancel_order_token,
    declined_adjustment_question, is_error,
};

use crate::store::Store;

const FAKE_SENTENCE: &str = "No stock change: stock 3 -> 3. Approve to record the count only.";

/// The sentence `prepare_admin_action` puts before the target's question.
const PREPARING: &str = "Allow preparing an admin action? It issues a one-time confirmation token \
                         for tool cancel_order with exactly these arguments; the action itself \
                         will ask you again before it runs.";

/// Characters that must never reach the person raw (line breaks are counted separately):
/// controls, and quotation marks that could pass for the end of a quoted reason.
const RAW: [char; 17] = [
    '\r', '\u{202E}', '\u{200B}', '\u{2060}', '\u{FEFF}', '\u{2028}', '\u{2029}', '\u{200E}',
    '\u{2066}', '\u{201C}', '\u{201D}', '\u{2018}', '\u{2019}', '\u{00AB}', '\u{00BB}', '\u{300C}',
    '\u{FF02}',
];

/// The hostile reasons, each within the store's 200-character limit (a longer one is refused
/// by the preview, and nobody is asked).
fn hostile_reasons() -> Vec<(&'static str, String)> {
    vec![
        (
            "a fake sentence, then 60 line breaks to push the real one out of sight",
            format!(
                "recount\n{FAKE_SENTENCE}\n{FAKE_SENTENCE}{}",
                "\n".repeat(58)
            ),
        ),
        (
            "fake Before/After lines",
            "recount\nBefore: {\"stock\":3}\nAfter: {\"stock\":3}".to_owned(),
        ),
        (
            "a right-to-left override",
            "recount \u{202E}3 >- 3 kcots".to_owned(),
        ),
        (
            "zero-width characters",
            "re\u{200B}count\u{2060} stock 3 -> 3\u{FEFF}".to_owned(),
        ),
        (
            "a line separator",
            format!("recount\u{2028}{FAKE_SENTENCE}\u{2029}\u{200E}\u{2066}\r"),
        ),
        (
            "look-alike quotation marks that close the reason and open a fake consequence",
            "duplicate\u{201D} Stock goes back: \u{201C}nothing, the order stays open".to_owned(),
        ),
        (
            "single quotes, guillemets, corner brackets and a fullwidth quote",
            "x\u{2019} stock 3 -> 3 \u{2018}y\u{00BB} \u{00AB}z\u{300C} \u{FF02}w".to_owned(),
        ),
    ]
}

/// The reason as the person must see it: quoted, escaped, cut like any value.
fn shown(reason: &str) -> String {
    render_value(&json!(reason), DEFAULT_MAX_RENDERED_CHARS).to_string()
}

/// The question has exactly `lines` lines and no control character but its own line breaks,
/// nor any of the raw characters.
fn assert_clean(question: &str, lines: usize, case: &str) {
    assert_eq!(question.split('\n').count(), lines, "{case}: {question:?}");
    for c in question.chars() {
        assert!(
            c == '\n' || !(c.is_control() || RAW.contains(&c)),
            "{case}: raw {c:?} in {question:?}"
        );
    }
}

/// Asserts that the cancellation was not made: `order` still pending, TLS-002 at 2, only the
/// order's own movement, the file as `before`. `case` names the case in a failure.
fn assert_order_still_pending(
    file: &FileView,
    order: i64,
    before: &Snapshot,
    case: &str,
) -> Result<(), Failure> {
    assert_eq!(
        file.order_status(order)?.as_deref(),
        Some("pending"),
        "{case}"
    );
    assert_eq!(file.stock("TLS-002")?, 2, "{case}");
    assert_eq!(file.movements()?.len(), 1, "{case}: only the order's own");
    assert_eq!(file.snapshot()?, *before, "{case}");
    Ok(())
}

/// How the cancellation question starts, up to the quoted reason.
const CANCEL_QUESTION_START: &str = "Cancel order 1 for customer 1 (\"Harbor Street Garage\"): 1 x \
                                     \"TLS-002\", total $109.99. Stock goes back: \"TLS-002\" 2 \
                                     -> 3. Reason given: \"";

/// The cancellation question, as the store words it from its preview of order 1.
fn cancel_question(reason: &str) -> String {
    format!(
        "Cancel order 1 for customer 1 (\"Harbor Street Garage\"): 1 x \"TLS-002\", total \
         $109.99. Stock goes back: \"TLS-002\" 2 -> 3. Reason given: {}",
        shown(reason)
    )
}

async fn prepare(
    client: &Client,
    order: i64,
    reason: &str,
) -> Result<rmcp::model::CallToolResult, Failure> {
    call(
        client,
        PREPARE_ADMIN_ACTION,
        json!({"tool": "cancel_order", "arguments": {"orderId": order, "reason": reason}}),
    )
    .await
}

#[tokio::test]
async fn a_hostile_reason_cannot_reshape_the_adjust_stock_question() -> Result<(), Failure> {
    for era in ERAS {
        for (case, reason) in hostile_reasons() {
            let case = format!("{era:?}, {case}");
            let (store, _, before) = Store::with_snapshot()?;
            let (user, client) = store.person(era, [Reply::Decline]).await?;

            let question = &declined_adjustment_question(&client, &user, &reason, &case).await?;
            assert_clean(question, 1, &case);
            // The true change first, the reason last and labelled.
            assert!(
                question.starts_with("Adjust \"TLS-002\" by -3: stock 3 -> 0. Reason given: \""),
                "{case}: {question}"
            );
            assert_eq!(
                question,
                &format!(
                    "Adjust \"TLS-002\" by -3: stock 3 -> 0. Reason given: {}",
                    shown(&reason)
                ),
                "{case}"
            );

            store.assert_stock_untouched(&before, &[Outcome::Declined], &case)?;
            client.cancel().await?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_hostile_reason_cannot_reshape_the_admin_intent_question() -> Result<(), Failure> {
    for era in ERAS {
        for (case, reason) in hostile_reasons() {
            let case = format!("{era:?}, {case}");
            let (store, file, order, before) = Store::with_an_order()?;
            let (user, client) = store.person(era, [Reply::Decline]).await?;

            let result = prepare(&client, order, &reason).await?;

            assert!(is_error(&result), "{case}: {result:?}");
            assert!(
                result
                    .structured_content
                    .as_ref()
                    .and_then(|content| content.get("confirmationToken"))
                    .is_none(),
                "{case}: no token issued"
            );
            let messages = user.asked();
            assert_eq!(messages.len(), 1, "{case}");
            let question = &messages[0];
            // The preparing sentence, then the cancellation in the store's words: two lines.
            assert_clean(question, 2, &case);
            let lines: Vec<&str> = question.split('\n').collect();
            assert_eq!(lines[0], PREPARING, "{case}");
            assert!(
                lines[1].starts_with(CANCEL_QUESTION_START),
                "{case}: {question}"
            );
            assert_eq!(lines[1], cancel_question(&reason), "{case}");

            assert_order_still_pending(&file, order, &before, &case)?;
            assert_eq!(store.audit.decisions(), [Outcome::Declined], "{case}");
            client.cancel().await?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_hostile_reason_cannot_reshape_the_cancel_order_question() -> Result<(), Failure> {
    for era in ERAS {
        for (case, reason) in hostile_reasons() {
            let case = format!("{era:?}, {case}");
            let (store, file, order, before) = Store::with_an_order()?;
            // Approve the intent (to get a token), decline the act.
            let (user, client) = store.person(era, [Reply::Approve, Reply::Decline]).await?;

            let token = cancel_order_token(&client, order, &reason).await?;
            let args = cancel_args(order, &reason, &token);
            let result = call(&client, "cancel_order", args).await?;

            assert!(is_error(&result), "{case}: {result:?}");
            let messages = user.asked();
            assert_eq!(messages.len(), 2, "{case}");
            assert_clean(&messages[0], 2, &case);
            let question = &messages[1];
            assert_clean(question, 1, &case);
            assert_eq!(question, &cancel_question(&reason), "{case}");
            assert!(
                question.starts_with(CANCEL_QUESTION_START),
                "{case}: {question}"
            );

            assert_order_still_pending(&file, order, &before, &case)?;
            assert_eq!(
                store.audit.decisions(),
                [Outcome::Approved, Outcome::TokenIssued, Outcome::Declined],
                "{case}"
            );
            client.cancel().await?;
        }
    }
    Ok(())
}
