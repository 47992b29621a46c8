//! The audit file (`store-server --audit-log`, the guard's `JsonLinesSink`): after a decline,
//! an approval, a stale refusal and a token's issue and spend it holds exactly those records,
//! in order and chained; `mcp-audit verify-log` passes it, and names the right record after a
//! flipped byte, a deleted line, two swapped lines and a cut last line.

use std::sync::Arc;

use mcp_write_guard_audit::verify_log;
use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::test_util::{Reply, ScriptedClient};
use mcp_write_guard_rmcp::{CHAIN_START, JsonLinesSink};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use store_server::{AdjustStockArgs, Mode};
use workspace_tests::{Failure, call, cancel_args, cancel_order_token, is_error};

use crate::store::{Store, connect};

/// What `verify-log` says about `lines` written to a file (with `tail` after the last line
/// break).
fn verdict(lines: &[String], tail: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    std::fs::write(&path, format!("{}\n{tail}", lines.join("\n"))).unwrap();
    verify_log(&[path]).unwrap().broken
}

#[tokio::test]
async fn the_audit_file_holds_every_decision_chained_and_verify_log_finds_each_change()
-> Result<(), Failure> {
    let store = Store::new()?;
    let file = store.file();
    let order = store.order("TLS-002", 1)?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("audit.jsonl");
    let db = Arc::clone(&store.db);
    let counter_sale = move || {
        let sale = AdjustStockArgs {
            sku: "TLS-003".into(),
            delta: -1,
            reason: "sold at the counter".into(),
        };
        db.adjust_stock(&sale, Mode::Apply).unwrap();
    };
    let user = ScriptedClient::answering([
        Reply::Decline,
        Reply::Approve,
        // Another writer sells one while the person looks: the approved change is stale.
        Reply::after(counter_sale, Reply::Approve),
        Reply::Approve,
        Reply::Approve,
    ]);
    let guard = store
        .guard_builder(true)
        .audit(Arc::new(JsonLinesSink::open(&path)?))
        .build();
    let client = connect(guard, &user, Era::Legacy).await?;
    let adjust = |sku: &str| json!({"sku": sku, "delta": 1, "reason": "recount"});

    let declined = call(&client, "adjust_stock", adjust("TLS-001")).await?;
    assert!(is_error(&declined));
    let applied = call(&client, "adjust_stock", adjust("TLS-001")).await?;
    assert!(!is_error(&applied), "{applied:?}");
    let stale = call(&client, "adjust_stock", adjust("TLS-003")).await?;
    assert!(is_error(&stale), "{stale:?}");
    let reason = "customer changed their mind";
    let token = cancel_order_token(&client, order, reason).await?;
    let spend = cancel_args(order, reason, &token);
    let cancelled = call(&client, "cancel_order", spend).await?;
    assert!(!is_error(&cancelled), "{cancelled:?}");
    assert_eq!(file.order_status(order)?.as_deref(), Some("cancelled"));
    client.cancel().await?;

    // Exactly those records, in order, each naming the hash of the line before it.
    let text = std::fs::read_to_string(&path)?;
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let records: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let outcomes: Vec<&str> = records
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        [
            "asked",
            "declined", // the decline
            "asked",
            "approved",
            "applied", // the approval
            "asked",
            "approved",
            "stale", // the stale refusal
            "asked",
            "approved",
            "token-issued", // the token's issue
            "asked",
            "approved",
            "applied", // its spend
        ]
    );
    let mut prev = CHAIN_START.to_owned();
    for (i, (line, record)) in lines.iter().zip(&records).enumerate() {
        assert_eq!(record["seq"], i + 1, "{line}");
        assert_eq!(record["prev"], prev, "{line}");
        prev = hex::encode(Sha256::digest(line.as_bytes()));
    }
    // A record carries no token: the one spent is redacted.
    assert!(!lines.iter().any(|l| l.contains(&token)));
    // The token's spend keeps its question too (no question shows a token).
    let spend_story = mcp_write_guard_audit::story(
        std::slice::from_ref(&path),
        records[11]["approval_id"].as_str().unwrap(),
        None,
    )?;
    assert!(
        spend_story[0].contains("asked \"Cancel order "),
        "{spend_story:?}"
    );
    assert!(!spend_story.iter().any(|l| l.contains(&token)));
    // One approval's story: asked (with the question) -> approved -> applied, joined by its
    // id.
    let approval = records[2]["approval_id"].as_str().unwrap();
    let story = mcp_write_guard_audit::story(std::slice::from_ref(&path), approval, None)?;
    assert_eq!(story.len(), 3, "{story:?}");
    assert!(story[0].contains(r#""asked" "adjust_stock""#), "{story:?}");
    assert!(
        story[0].contains(r#"asked "Adjust \"TLS-001\" by +1: stock 12 -> 13. Reason given"#),
        "{story:?}"
    );
    assert!(
        story[1].contains(r#""approved""#) && story[2].contains(r#""applied""#),
        "{story:?}"
    );

    let report = verify_log(std::slice::from_ref(&path))?;
    assert_eq!(report.broken, None);
    assert_eq!(report.records, 14);
    assert_eq!(report.last, Some((14, prev)));

    // One byte flipped in record 6: record 7 names another hash for it.
    let mut flipped = lines.clone();
    flipped[5] = flipped[5].replacen("adjust_stock", "adjust_stocK", 1);
    let why = verdict(&flipped, "").unwrap();
    assert!(
        why.starts_with("record 6 (line 6 of") && why.contains("was changed"),
        "{why}"
    );
    // Record 2 deleted.
    let mut deleted = lines.clone();
    deleted.remove(1);
    assert!(
        verdict(&deleted, "")
            .unwrap()
            .starts_with("record 2 was removed")
    );
    // Records 4 and 5 swapped.
    let mut swapped = lines.clone();
    swapped.swap(3, 4);
    assert!(
        verdict(&swapped, "")
            .unwrap()
            .starts_with("record 4 is out of order")
    );
    // The last line cut short.
    let cut = &lines[13][..lines[13].len() / 2];
    let why = verdict(&lines[..13], cut).unwrap();
    assert!(
        why.starts_with("line 14 of") && why.contains("cut short"),
        "{why}"
    );
    Ok(())
}
