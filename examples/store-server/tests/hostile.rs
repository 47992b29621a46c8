//! Against the built `store-server` binary: a reason the model writes cannot reshape the
//! approval question (extra lines, fake "Before:"/"After:" lines, a fake "no stock change"
//! sentence, bidi overrides, zero-width characters, U+2028), over stdio in both protocol eras
//! and over streamable HTTP in the legacy era (the 2026-07-28 era over HTTP is refused for want
//! of a principal); the person declines and nothing on disk moves. And the audit trail the
//! binary's default sink writes to its log joins asked → approved → applied by one approval id.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use std::collections::HashMap;

use common::{Log, StoreFile};
use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::test_util::{ERAS, Reply, ScriptedClient};
use serde_json::json;
use workspace_tests::{Client, Failure, FileView, call, declined_adjustment_question, is_error};

const FAKE_SENTENCE: &str = "No stock change: stock 3 -> 3. Approve to record the count only.";

/// Characters that must never reach the person raw.
const RAW: [char; 5] = ['\n', '\u{202E}', '\u{200B}', '\u{FEFF}', '\u{2028}'];

/// The hostile reasons, each within the store's 200-character limit.
fn hostile_reasons() -> Vec<(&'static str, String)> {
    vec![
        (
            "a fake sentence, then many line breaks",
            format!("{FAKE_SENTENCE}{}", "\n".repeat(100)),
        ),
        (
            "fake Before/After lines",
            "x\nBefore: {\"stock\":3}\nAfter: {\"stock\":3}".to_owned(),
        ),
        (
            "a right-to-left override",
            "recount \u{202E}3 >- 3 kcots".to_owned(),
        ),
        (
            "zero-width characters",
            "re\u{200B}count stock 3 -> 3\u{FEFF}".to_owned(),
        ),
        (
            "a line separator",
            format!("recount\u{2028}{FAKE_SENTENCE}"),
        ),
    ]
}

/// Sends `adjust_stock` TLS-002 by -3 with `reason`; the user (scripted to decline) must have
/// been asked one clean one-line question with the true figures, and nothing may move.
async fn declined_cleanly(
    client: &Client,
    user: &ScriptedClient,
    file: &FileView,
    log: &Log,
    reason: &str,
    case: &str,
) -> Result<(), Failure> {
    assert!(reason.chars().count() <= 200, "{case}: reason too long");
    let question = &declined_adjustment_question(client, user, reason, case).await?;
    assert_eq!(question.lines().count(), 1, "{case}: {question:?}");
    assert!(question.contains("by -3"), "{case}: {question:?}");
    assert!(question.contains("stock 3 -> 0"), "{case}: {question:?}");
    for raw in RAW {
        assert!(
            !question.contains(raw),
            "{case}: raw {raw:?} in {question:?}"
        );
    }

    assert_eq!(file.stock("TLS-002")?, 3, "{case}");
    assert!(file.movements()?.is_empty(), "{case}");
    let outcomes = log.outcomes_when(1).await;
    assert_eq!(outcomes, ["declined"], "{case}");
    Ok(())
}

#[tokio::test]
async fn over_stdio_a_hostile_reason_cannot_reshape_the_question() -> Result<(), Failure> {
    for era in ERAS {
        for (case, reason) in hostile_reasons() {
            let case = format!("stdio, {era:?}, {case}");
            let store = StoreFile::new()?;
            let user = ScriptedClient::answering([Reply::Decline]);
            let (client, log) = store.launch_stdio(&user, era).await?;

            declined_cleanly(&client, &user, &store.view(), &log, &reason, &case).await?;

            client.cancel().await?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn over_http_a_hostile_reason_cannot_reshape_the_question() -> Result<(), Failure> {
    let era = Era::Legacy;
    for (case, reason) in hostile_reasons() {
        let case = format!("HTTP, {era:?}, {case}");
        let store = StoreFile::new()?;
        let server = store.serve_http().await?;
        let user = ScriptedClient::answering([Reply::Decline]);
        let client = server.connect(&user, era).await?;

        declined_cleanly(&client, &user, &store.view(), &server.log, &reason, &case).await?;

        client.cancel().await?;
    }
    Ok(())
}

/// The `key=value` fields of one log line, surrounding quotes stripped. (Quoted values with
/// spaces, such as `prompt`, come out in pieces; the fields read here are plain tokens.)
fn fields(line: &str) -> HashMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|token| token.split_once('='))
        .map(|(key, value)| {
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value);
            (key, value)
        })
        .collect()
}

/// `YYYY-MM-DDTHH:MM:SS(.fraction)?Z`, checked by hand.
fn is_rfc3339_utc(value: &str) -> bool {
    let bytes = value.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .is_some_and(|d| !d.is_empty() && d.iter().all(u8::is_ascii_digit))
    };
    let at = |i: usize, c: u8| bytes.get(i) == Some(&c);
    if !(digits(0..4)
        && at(4, b'-')
        && digits(5..7)
        && at(7, b'-')
        && digits(8..10)
        && at(10, b'T')
        && digits(11..13)
        && at(13, b':')
        && digits(14..16)
        && at(16, b':')
        && digits(17..19))
    {
        return false;
    }
    match &value[19..] {
        "Z" => true,
        rest => rest
            .strip_prefix('.')
            .and_then(|r| r.strip_suffix('Z'))
            .is_some_and(|fraction| {
                !fraction.is_empty() && fraction.bytes().all(|b| b.is_ascii_digit())
            }),
    }
}

#[test]
fn the_rfc3339_check_itself() {
    assert!(is_rfc3339_utc("2026-07-28T12:34:56Z"));
    assert!(is_rfc3339_utc("2026-07-28T12:34:56.123456789Z"));
    assert!(!is_rfc3339_utc("2026-07-28T12:34:56.Z"));
    assert!(!is_rfc3339_utc("2026-07-28 12:34:56Z"));
    assert!(!is_rfc3339_utc("2026-07-28T12:34:56+00:00"));
    assert!(!is_rfc3339_utc("2026-07-28T12:34:5Z"));
}

/// The audit lines (target `mcp_write_guard_rmcp::audit`) once one says `outcome=applied`, or whatever
/// was logged after a few seconds.
async fn audit_lines_until_applied(log: &Log) -> Vec<String> {
    let audit = || -> Vec<String> {
        log.lines()
            .into_iter()
            .filter(|line| common::audit_fields(line).is_some())
            .collect()
    };
    for _ in 0..100 {
        if audit()
            .iter()
            .any(|line| fields(line).get("outcome") == Some(&"applied"))
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    audit()
}

#[tokio::test]
async fn over_stdio_the_log_joins_asked_approved_applied_by_one_approval_id() -> Result<(), Failure>
{
    for era in ERAS {
        let store = StoreFile::new()?;
        let file = store.view();
        let user = ScriptedClient::answering([Reply::Approve]);
        let (client, log) = store.launch_stdio(&user, era).await?;

        let result = call(
            &client,
            "adjust_stock",
            json!({"sku": "TLS-002", "delta": 1, "reason": "audit"}),
        )
        .await?;
        assert!(!is_error(&result), "{era:?}: {result:?}");
        assert_eq!(user.asked().len(), 1, "{era:?}");
        assert_eq!(file.stock("TLS-002")?, 4, "{era:?}");

        let lines = audit_lines_until_applied(&log).await;
        let with = |outcome: &str| -> Vec<HashMap<&str, &str>> {
            lines
                .iter()
                .map(|line| fields(line))
                .filter(|f| f.get("outcome") == Some(&outcome))
                .collect()
        };
        let asked = with("asked");
        let approved = with("approved");
        let applied = with("applied");
        assert_eq!(asked.len(), 1, "{era:?}: {lines:#?}");
        assert_eq!(approved.len(), 1, "{era:?}: {lines:#?}");
        assert_eq!(applied.len(), 1, "{era:?}: {lines:#?}");

        let asked = &asked[0];
        let approval_id = *asked
            .get("approval_id")
            .unwrap_or_else(|| panic!("{era:?}: no approval_id in {lines:#?}"));
        assert!(!approval_id.is_empty(), "{era:?}: {lines:#?}");
        let digest = asked
            .get("prompt_digest")
            .unwrap_or_else(|| panic!("{era:?}: no prompt_digest in {lines:#?}"));
        assert_eq!(digest.len(), 64, "{era:?}: {digest}");
        assert!(
            digest.bytes().all(|b| b.is_ascii_hexdigit()),
            "{era:?}: {digest}"
        );
        let expected_era = match era {
            Era::Legacy => "legacy",
            _ => "2026-07-28",
        };
        assert_eq!(asked.get("era"), Some(&expected_era), "{era:?}: {lines:#?}");
        assert_eq!(asked.get("channel"), Some(&"form"), "{era:?}: {lines:#?}");
        assert_eq!(
            approved[0].get("approval_id"),
            Some(&approval_id),
            "{era:?}: {lines:#?}"
        );
        assert_eq!(
            applied[0].get("approval_id"),
            Some(&approval_id),
            "{era:?}: {lines:#?}"
        );

        for line in &lines {
            let time = fields(line)
                .get("time")
                .copied()
                .unwrap_or_else(|| panic!("{era:?}: no time= in {line}"));
            assert!(is_rfc3339_utc(time), "{era:?}: time={time} in {line}");
        }

        client.cancel().await?;
    }
    Ok(())
}
