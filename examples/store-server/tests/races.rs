//! The race the compare-and-apply closes, against the built `store-server` binary: ten
//! approvals of one `+1`, each shown "3 -> 4", applied at once, land exactly once. Over stdio
//! in both protocol eras, over streamable HTTP in the legacy era (the 2026-07-28 era has no
//! HTTP sessions, and the binary refuses writes it cannot attribute). The audit outcomes are
//! read from the binary's log (stderr), where its default audit sink writes them.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use common::{Log, StoreFile};
use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::Outcome;
use mcp_write_guard_rmcp::test_util::{ERAS, Reply, ScriptedClient};
use serde_json::Value;
use workspace_tests::{
    Client, Failure, FileView, RACE_PLUS_ONE_PROMPT, counter_sale, hold_approvals, race_one_stock,
    race_plus_one, sell_one, tally,
};

/// How many approvals the model collects before it sends the applies.
const N: usize = 10;

fn plus_one() -> Value {
    race_plus_one()
}

fn count(outcomes: &[String], outcome: Outcome) -> usize {
    outcomes
        .iter()
        .filter(|o| o.as_str() == outcome.as_str())
        .count()
}

/// Collects N approvals on one connection, applies them at once, and checks the file and the
/// logged audit outcomes: exactly one applied, N - 1 stale.
async fn race(
    client: &Client,
    user: &ScriptedClient,
    era: Era,
    file: &FileView,
    log: &Log,
) -> Result<(), Failure> {
    race_one_stock(client, user, era, file, N).await?;
    let outcomes = log.outcomes_when(2 * N).await;
    assert_eq!(
        count(&outcomes, Outcome::Approved),
        N,
        "{era:?}: {outcomes:?}"
    );
    assert_eq!(
        count(&outcomes, Outcome::Applied),
        1,
        "{era:?}: {outcomes:?}"
    );
    assert_eq!(
        count(&outcomes, Outcome::Stale),
        N - 1,
        "{era:?}: {outcomes:?}"
    );
    Ok(())
}

#[tokio::test]
async fn over_stdio_ten_approvals_shown_on_one_stock_apply_exactly_once() -> Result<(), Failure> {
    for era in ERAS {
        let store = StoreFile::new()?;
        let user = ScriptedClient::answering([]);
        let (client, log) = store.launch_stdio(&user, era).await?;

        race(&client, &user, era, &store.view(), &log).await?;

        client.cancel().await?;
    }
    Ok(())
}

#[tokio::test]
async fn over_http_ten_approvals_shown_on_one_stock_apply_exactly_once() -> Result<(), Failure> {
    // Without --auth-* the binary binds loopback and the machine is one person (`local`), so
    // both eras write over HTTP: the legacy era in a session, 2026-07-28 without one.
    for era in ERAS {
        let store = StoreFile::new()?;
        let server = store.serve_http().await?;
        let user = ScriptedClient::answering([]);
        let client = server.connect(&user, era).await?;

        race(&client, &user, era, &store.view(), &server.log).await?;

        client.cancel().await?;
    }
    Ok(())
}

#[tokio::test]
async fn over_stdio_a_second_writer_between_ask_and_apply_makes_it_stale() -> Result<(), Failure> {
    for era in ERAS {
        let store = StoreFile::new()?;
        let file = store.view();
        let user = ScriptedClient::answering([]);
        let (client, log) = store.launch_stdio(&user, era).await?;
        // Another program on the same file: a second server process, with its own person.
        let other_user = ScriptedClient::answering([Reply::Approve]);
        let (other, _other_log) = store.launch_stdio(&other_user, era).await?;

        let held = hold_approvals(&client, &user, era, "adjust_stock", &[plus_one()]).await?;
        assert_eq!(held.prompts(), [RACE_PLUS_ONE_PROMPT], "{era:?}");
        sell_one(&other, "TLS-002").await?;

        let tally = tally(&held.apply_all().await?)?;

        assert_eq!(tally.stale, 1, "{era:?}: {tally:?}");
        assert!(tally.applied.is_empty(), "{era:?}: {tally:?}");
        assert_eq!(file.stock("TLS-002")?, 2, "{era:?}");
        assert_eq!(file.movements()?, [counter_sale("TLS-002")], "{era:?}");
        let outcomes = log.outcomes_when(2).await;
        assert_eq!(outcomes, ["approved", "stale"], "{era:?}");
        client.cancel().await?;
        other.cancel().await?;
    }
    Ok(())
}
