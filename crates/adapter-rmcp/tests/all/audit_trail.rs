//! The audit trail reconstructs the approval: an `asked` record says what the person was shown
//! (the question, its digest, the arguments, the expiry, era and channel), and every record of
//! the call carries the same approval id, so asked → decided → applied can be joined.

use mcp_write_guard_rmcp::{AuditRecord, AuditSink, Channel, JsonLinesSink, Outcome, TracingSink};
use rstest_reuse::apply;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::common::{Era, Harness, Options, Reply, both_eras, logs::Captured, start_time, text_of};

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn era_name(era: Era) -> &'static str {
    match era {
        Era::Legacy => "legacy",
        Era::InputRounds => "2026-07-28",
        other => unreachable!("no test written for {other:?}"),
    }
}

/// Every record after the first that names an approval names the same one.
fn one_approval_id(records: &[AuditRecord]) -> String {
    let ids: Vec<_> = records.iter().map(|r| r.approval_id).collect();
    let first = ids[0].expect("the asked record names its approval");
    assert!(ids.iter().all(|id| *id == Some(first)), "{records:#?}");
    first.to_string()
}

#[apply(both_eras)]
async fn an_approved_write_is_asked_approved_and_applied_under_one_id(era: Era) {
    let h = Harness::start(era).await;
    h.assert_set_counter_applied().await;

    let records = h.audit.records();
    assert_eq!(
        h.outcomes(),
        [Outcome::Asked, Outcome::Approved, Outcome::Applied]
    );
    one_approval_id(&records);
    let asked = records[0].asked.clone().expect("asked detail");
    let shown = h.asked();
    assert_eq!(shown.len(), 1);
    assert_eq!(asked.prompt.as_deref(), Some(shown[0].as_str()));
    assert_eq!(asked.prompt_digest, sha256_hex(shown[0].as_bytes()));
    assert_eq!(asked.arguments, json!({"value": 7}));
    assert_eq!(
        asked.expires_at,
        start_time() + time::Duration::seconds(120)
    );
    assert_eq!(asked.era.as_str(), era_name(era));
    assert_eq!(asked.channel, Channel::Form);
    // Later records do not repeat the detail, and every record names the call the same way.
    assert!(records[1..].iter().all(|r| r.asked.is_none()));
    assert!(
        records
            .iter()
            .all(|r| r.args_digest == records[0].args_digest)
    );
    assert!(records.iter().all(|r| r.principal == records[0].principal));
}

#[apply(both_eras)]
async fn a_declined_write_is_asked_then_declined_under_one_id(era: Era) {
    let h = Harness::start(era).await;
    h.assert_set_counter_refused(Reply::Decline, Outcome::Declined, Some("declined"))
        .await;
    let records = h.audit.records();
    assert_eq!(h.outcomes(), [Outcome::Asked, Outcome::Declined]);
    one_approval_id(&records);
}

#[apply(both_eras)]
async fn a_stale_write_is_asked_approved_then_stale_under_one_id(era: Era) {
    let h = Harness::start(era).await;
    let result = h.set_counter_gone_stale().await;
    assert_eq!(text_of(&result), mcp_write_guard_rmcp::STALE_MESSAGE);
    assert_eq!(h.state().counter, 3);
    let records = h.audit.records();
    assert_eq!(
        h.outcomes(),
        [Outcome::Asked, Outcome::Approved, Outcome::Stale]
    );
    one_approval_id(&records);
}

#[apply(both_eras)]
async fn redacted_arguments_leave_only_their_digest_and_no_question_text(era: Era) {
    let h = Harness::custom(era, Options::default(), |b| {
        b.redact("set_counter", "value")
    })
    .await;
    let result = h
        .approve_and_call("set_counter", json!({"value": 424242}))
        .await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let records = h.audit.records();
    let asked = records[0].asked.clone().unwrap();
    assert_eq!(asked.prompt, None, "the question quotes the value");
    assert_eq!(asked.prompt_digest, sha256_hex(h.asked()[0].as_bytes()));
    assert_eq!(
        asked.arguments,
        json!({"value": {"redacted": sha256_hex(b"424242")}})
    );
    let serialised = serde_json::to_string(&records).unwrap();
    assert!(!serialised.contains("424242"), "{serialised}");
}

#[apply(both_eras)]
async fn a_confirmation_token_never_reaches_the_records(era: Era) {
    let h = Harness::custom(era, Options::default(), |b| b.preview("delete_row")).await;
    h.fixture.state.lock().rows.insert("a".into(), 1);
    let token = h.prepare_token("delete_row", json!({"name": "a"})).await;
    h.assert_token_deletes_row_a(&token).await;
    let records = h.audit.records();
    let serialised = serde_json::to_string(&records).unwrap();
    assert!(!serialised.contains(&token), "{serialised}");
    let asked: Vec<_> = records.iter().filter_map(|r| r.asked.clone()).collect();
    assert_eq!(asked.len(), 2, "the intent, then the act");
    let act = &asked[1];
    assert_eq!(act.arguments["name"], json!("a"));
    assert_eq!(
        act.arguments["confirmationToken"],
        json!({"redacted": sha256_hex(format!("\"{token}\"").as_bytes())})
    );
    // No question shows the token, so the act's question is kept, as it was asked.
    assert_eq!(act.prompt.as_deref(), Some(h.asked()[1].as_str()));
    assert!(!h.asked()[1].contains(&token));
}

fn a_record() -> AuditRecord {
    let time = time::OffsetDateTime::from_unix_timestamp(1_764_504_476).unwrap()
        + time::Duration::milliseconds(740);
    AuditRecord::new(
        time,
        Some(mcp_write_guard_core::Principal::new("connection:1")),
        "adjust_stock",
        None,
        Outcome::Declined,
        Some("declined".into()),
    )
}

#[test]
fn both_sinks_print_time_in_rfc_3339() {
    let captured = Captured::default();
    tracing::subscriber::with_default(captured.subscriber(), || {
        TracingSink.record(&a_record());
    });
    let line = captured.text();
    assert!(line.contains(r#"time="2025-11-30T12:07:56.74Z""#), "{line}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    JsonLinesSink::open(&path).unwrap().record(&a_record());
    let json: Value = serde_json::from_str(std::fs::read_to_string(&path).unwrap().trim()).unwrap();
    assert_eq!(json["time"], "2025-11-30T12:07:56.74Z");
}
