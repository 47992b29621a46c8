//! Two `store-server` replicas sharing one Redis store (`--store redis://... --store-prefix`) and
//! one SQLite file, driven with raw 2026-07-28 HTTP calls, as a load balancer would spread them:
//!
//! - a `requestState` asked on one replica is answered on the other and applies once; replaying
//!   it on either replica is refused;
//! - a confirmation token issued on one replica is spent on the other once, and never again,
//!   however many spends race for it across both replicas;
//! - an approval answered on the other replica after its clock ran out is refused as expired;
//! - with Redis gone every write is refused (fail closed) while reads still answer, and once
//!   Redis is back the same processes write again;
//! - with bearer-token auth (the same issuer, audience, JWKS file and write scope on both), a
//!   person is the same on every replica: Alice's round trip asked on one applies on the other,
//!   Bob cannot use it on either, and a request without a token is 401;
//! - an approval page opened by one replica is shown and answered on the other (where a load
//!   balancer would send the browser), and the call then applies once;
//! - a client that cannot ask its user (no elicitation: hand-written 2026-07-28 calls, a legacy
//!   rmcp session, the official Python SDK in the 2026-07-28 era) calls on one replica, a person
//!   is notified through a signed webhook, answers the page on the other replica in headless
//!   Chromium, and the same call made again on the first applies once; once more, it is a new
//!   question.
//!
//! What is checked is state: the SQLite file (stock, stock movements, orders) through a
//! connection of its own, and the audit records each replica's default sink writes to its log
//! (stderr), not only the texts a client reads. Each test uses a fresh key prefix, so tests
//! sharing one Redis (`MCP_WRITE_GUARD_REDIS_URL`) never meet.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use common::{AUDIENCE, HttpChild, ISSUER, Log, WRITE_SCOPE, claims, place_order};
use mcp_write_guard_core::{round_trip::ROUND_TRIP_REFUSAL_MESSAGE, token::TOKEN_REFUSAL_MESSAGE};
use mcp_write_guard_redis::test_util::{RedisServer, redis_url};
use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::test_util::ScriptedClient;
use mcp_write_guard_rmcp::{
    ALREADY_USED_MESSAGE, INPUT_KEY, Outcome, PREPARE_ADMIN_ACTION,
    STORE_UNAVAILABLE_MESSAGE as STORE_UNAVAILABLE,
};
use serde_json::{Value, json};
use store_server::Db;
use tempfile::TempDir;
use workspace_tests::{
    Browser, Failure, FileView, HttpReply, Movement, RawHttp, SigningKey, Snapshot, approve,
};

/// What the guard answers to an approval given after its clock ran out.
const EXPIRED: &str = "The approval was not given in time, so nothing was saved. Call the tool \
again to ask the user anew.";

// ---------------------------------------------------------------------------------------------
// Two replicas
// ---------------------------------------------------------------------------------------------

/// One replica: the child process and raw HTTP to its endpoint.
struct Replica {
    server: HttpChild,
    raw: RawHttp,
}

impl Replica {
    fn log(&self) -> &Log {
        &self.server.log
    }
}

/// Two replicas of one server: one Redis prefix, one SQLite file.
struct Replicas {
    _dir: TempDir,
    db: PathBuf,
    a: Replica,
    b: Replica,
}

impl Replicas {
    /// Both replicas on `redis` under a fresh prefix, writes enabled, with `extra` arguments.
    async fn start(redis: &str, extra: &[&str]) -> Result<Self, Failure> {
        Self::start_with(redis, extra, |_| Ok(())).await
    }

    /// As [`Replicas::start`], after `prepare` ran on the freshly created and seeded file.
    async fn start_with(
        redis: &str,
        extra: &[&str],
        prepare: impl FnOnce(&Path) -> Result<(), Failure>,
    ) -> Result<Self, Failure> {
        let dir = tempfile::tempdir()?;
        let db = dir.path().join("store.db");
        drop(Db::open(&db)?);
        prepare(&db)?;
        let prefix = format!("replicas-{}", uuid::Uuid::new_v4());
        let mut args = vec![
            "--db",
            db.to_str().unwrap(),
            "--store",
            redis,
            "--store-prefix",
            &prefix,
        ];
        args.extend_from_slice(extra);
        let (a, b) = tokio::try_join!(
            HttpChild::start(dir.path(), &args, Some("true")),
            HttpChild::start(dir.path(), &args, Some("true")),
        )?;
        let replica = |server: HttpChild| Replica {
            raw: RawHttp::new(&server.url),
            server,
        };
        Ok(Self {
            _dir: dir,
            db,
            a: replica(a),
            b: replica(b),
        })
    }

    fn file(&self) -> FileView {
        FileView::new(&self.db)
    }
}

/// Asserts that the one change saved is TLS-002 by +5 for `reason`: stock 3 -> 8, exactly as
/// shown, and that one movement. Returns the movement and the file as it is then.
fn assert_plus_five_saved(file: &FileView, reason: &str) -> Result<(Movement, Snapshot), Failure> {
    assert_eq!(file.stock("TLS-002")?, 8, "exactly as shown");
    let movement = Movement {
        sku: "TLS-002".into(),
        delta: 5,
        reason: reason.into(),
    };
    assert_eq!(file.movements()?, std::slice::from_ref(&movement));
    Ok((movement, file.snapshot()?))
}

// ---------------------------------------------------------------------------------------------
// Raw 2026-07-28 calls
// ---------------------------------------------------------------------------------------------

/// A stateless 2026-07-28 `tools/call` on `replica`, optionally the retry carrying `state` and
/// the approving answer.
async fn call(
    replica: &Replica,
    tool: &str,
    arguments: &Value,
    state: Option<&str>,
) -> Result<HttpReply, Failure> {
    let retry = state.map(|state| (state, approve()));
    call_declaring(replica, &json!({"form": {}}), tool, arguments, retry).await
}

/// A stateless 2026-07-28 `tools/call` on `replica` from a client whose elicitation
/// capabilities are `elicitation`, the retry carrying `retry`'s state and answer if given:
/// answered within ten seconds, with HTTP 200.
async fn call_declaring(
    replica: &Replica,
    elicitation: &Value,
    tool: &str,
    arguments: &Value,
    retry: Option<(&str, Value)>,
) -> Result<HttpReply, Failure> {
    let call = replica
        .raw
        .call_2026_asking(&[], elicitation, tool, arguments, retry);
    let reply = tokio::time::timeout(Duration::from_secs(10), call).await??;
    assert_eq!(reply.status, 200, "{reply:?}");
    Ok(reply)
}

/// Asks on `replica`: the input round's `requestState` and the question the person reads.
async fn ask(
    replica: &Replica,
    tool: &str,
    arguments: &Value,
) -> Result<(String, String), Failure> {
    ask_reply(&call(replica, tool, arguments, None).await?)
}

/// The state and question of an input round.
fn ask_reply(reply: &HttpReply) -> Result<(String, String), Failure> {
    let state = reply
        .request_state()
        .ok_or_else(|| format!("expected an input round: {reply:?}"))?;
    let message = reply.message().ok_or("no message")?;
    let question = message["result"]["inputRequests"][INPUT_KEY]["params"]["message"]
        .as_str()
        .ok_or_else(|| format!("no question: {message}"))?
        .to_owned();
    Ok((state, question))
}

/// Retries on `replica` with `state` and the approving answer; the complete result.
async fn answer(
    replica: &Replica,
    tool: &str,
    arguments: &Value,
    state: &str,
) -> Result<HttpReply, Failure> {
    call(replica, tool, arguments, Some(state)).await
}

/// The text of a refusal: a complete error result, no new input round.
fn refusal(reply: &HttpReply) -> Result<String, Failure> {
    assert_eq!(reply.request_state(), None, "{reply:?}");
    let (is_error, text) = reply.tool_result().ok_or("no tool result")?;
    assert!(is_error, "expected a refusal, got {text}");
    Ok(text)
}

/// The text of a success.
fn success(reply: &HttpReply) -> Result<String, Failure> {
    let (is_error, text) = reply.tool_result().ok_or("no tool result")?;
    assert!(!is_error, "expected a success, got {text}");
    Ok(text)
}

// ---------------------------------------------------------------------------------------------
// The audit log
// ---------------------------------------------------------------------------------------------

/// One audit record: its outcome, and its reason if it has one.
type Record = (String, Option<String>);

/// A record as the tests spell it.
fn rec(outcome: Outcome, reason: Option<&str>) -> Record {
    (outcome.as_str().to_owned(), reason.map(str::to_owned))
}

/// Every audit record `log` holds so far, `asked` included, in order; every one for `local`.
fn records(log: &Log) -> Vec<Record> {
    common::records(log)
        .into_iter()
        .map(|record| {
            assert_eq!(record.principal.as_deref(), Some("local"), "{record:?}");
            (record.outcome, record.reason)
        })
        .collect()
}

/// The audit records once there are at least `n` (the log is read in the background), or
/// whatever was logged after a few seconds.
async fn records_when(log: &Log, n: usize) -> Vec<Record> {
    common::records_when(log, n).await;
    records(log)
}

fn count(records: &[Record], outcome: Outcome) -> usize {
    records
        .iter()
        .filter(|(logged, _)| logged == outcome.as_str())
        .count()
}

// ---------------------------------------------------------------------------------------------
// 1. A round trip crosses replicas, once
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_request_state_asked_on_one_replica_applies_once_on_the_other_and_never_again()
-> Result<(), Failure> {
    let redis = redis_url();
    let replicas = Replicas::start(redis.url(), &[]).await?;
    let (a, b) = (&replicas.a, &replicas.b);
    let file = replicas.file();
    let before = file.snapshot()?;
    let arguments = json!({"sku": "TLS-002", "delta": 5, "reason": "replica recount"});

    let (state, question) = ask(a, "adjust_stock", &arguments).await?;
    assert_eq!(
        question,
        r#"Adjust "TLS-002" by +5: stock 3 -> 8. Reason given: "replica recount""#
    );
    assert_eq!(file.snapshot()?, before, "asking saves nothing");

    let applied = answer(b, "adjust_stock", &arguments, &state).await?;
    success(&applied)?;
    let (movement, after) = assert_plus_five_saved(&file, "replica recount")?;

    // The same state again, on the replica that asked and on the one that applied.
    for replica in [a, b] {
        let replayed = answer(replica, "adjust_stock", &arguments, &state).await?;
        assert_eq!(refusal(&replayed)?, ROUND_TRIP_REFUSAL_MESSAGE);
        assert_eq!(file.snapshot()?, after, "nothing more saved");
    }
    assert_eq!(file.stock("TLS-002")?, 8);
    assert_eq!(file.movements()?, [movement]);

    let replayed = rec(Outcome::StateRejected, Some("replayed"));
    assert_eq!(
        records_when(a.log(), 2).await,
        [rec(Outcome::Asked, None), replayed.clone()]
    );
    assert_eq!(
        records_when(b.log(), 3).await,
        [
            rec(Outcome::Approved, None),
            rec(Outcome::Applied, None),
            replayed
        ]
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 2. A confirmation token crosses replicas, once
// ---------------------------------------------------------------------------------------------

/// Issues a confirmation token for cancelling `order` with `reason`: asked on `asked_on`,
/// approved on `approved_on`.
async fn issue_token(
    asked_on: &Replica,
    approved_on: &Replica,
    order: i64,
    reason: &str,
) -> Result<String, Failure> {
    let prepare =
        json!({"tool": "cancel_order", "arguments": {"orderId": order, "reason": reason}});
    let (state, _) = ask(asked_on, PREPARE_ADMIN_ACTION, &prepare).await?;
    let issued = answer(approved_on, PREPARE_ADMIN_ACTION, &prepare, &state).await?;
    success(&issued)?;
    let message = issued.message().ok_or("no message")?;
    Ok(message["result"]["structuredContent"]["confirmationToken"]
        .as_str()
        .ok_or_else(|| format!("no token: {message}"))?
        .to_owned())
}

/// The stock movement cancelling `order` (two TLS-001) writes.
fn restocked(order: i64, reason: &str) -> Movement {
    Movement {
        sku: "TLS-001".into(),
        delta: 2,
        reason: format!("order {order} cancelled: {reason}"),
    }
}

#[tokio::test]
async fn a_confirmation_token_issued_on_one_replica_is_spent_on_the_other_once()
-> Result<(), Failure> {
    let redis = redis_url();
    let mut order = 0;
    let replicas = Replicas::start_with(redis.url(), &[], |db| {
        order = place_order(db)?;
        Ok(())
    })
    .await?;
    let (a, b) = (&replicas.a, &replicas.b);
    let file = replicas.file();
    assert_eq!(file.order_status(order)?.as_deref(), Some("pending"));
    assert_eq!(file.stock("TLS-001")?, 10);
    let placed = file.movements()?;
    let reason = "duplicate order";

    let token = issue_token(a, a, order, reason).await?;
    let before = file.snapshot()?;
    let cancel = json!({"orderId": order, "reason": reason, "confirmationToken": token});

    // A round asked on A while the token is unspent, answered only after B spent it.
    let (late, _) = ask(a, "cancel_order", &cancel).await?;
    let (state, question) = ask(b, "cancel_order", &cancel).await?;
    assert!(question.contains(reason), "{question}");
    assert_eq!(file.snapshot()?, before, "asking spends and saves nothing");

    success(&answer(b, "cancel_order", &cancel, &state).await?)?;
    assert_eq!(file.order_status(order)?.as_deref(), Some("cancelled"));
    assert_eq!(file.stock("TLS-001")?, 12);
    let mut movements = placed.clone();
    movements.push(restocked(order, reason));
    assert_eq!(file.movements()?, movements);
    let after = file.snapshot()?;

    // Spent: a new call on A is refused before anyone is asked ...
    let again = call(a, "cancel_order", &cancel, None).await?;
    assert_eq!(refusal(&again)?, TOKEN_REFUSAL_MESSAGE);
    // ... and the round A asked before the spend (B's call was the same change by the same
    // person, so B was shown that same question) finds the approval already used.
    let late = answer(a, "cancel_order", &cancel, &late).await?;
    assert_eq!(refusal(&late)?, ALREADY_USED_MESSAGE);
    assert_eq!(file.snapshot()?, after, "nothing more saved");
    assert_eq!(file.stock("TLS-001")?, 12);
    assert_eq!(file.movements()?, movements);

    let spent = rec(Outcome::TokenRejected, Some("already-spent"));
    assert_eq!(
        records_when(a.log(), 6).await,
        [
            rec(Outcome::Asked, None),
            rec(Outcome::Approved, None),
            rec(Outcome::TokenIssued, Some("for cancel_order")),
            rec(Outcome::Asked, None),
            spent,
            // The late round: its approval was taken by B's apply.
            rec(
                Outcome::AlreadyUsed,
                Some("the approval was taken by another call")
            ),
        ]
    );
    assert_eq!(
        records_when(b.log(), 2).await,
        [
            // B put A's open question again (no second `asked`), then applied it.
            rec(Outcome::Approved, None),
            rec(Outcome::Applied, None),
        ]
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 3. Sixteen spends of one token race across both replicas
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn of_sixteen_concurrent_spends_of_one_token_across_replicas_exactly_one_applies()
-> Result<(), Failure> {
    const SPENDS: usize = 16;
    let redis = redis_url();
    let mut order = 0;
    let replicas = Arc::new(
        Replicas::start_with(redis.url(), &[], |db| {
            order = place_order(db)?;
            Ok(())
        })
        .await?,
    );
    let file = replicas.file();
    let placed = file.movements()?;
    let reason = "raced";
    let token = issue_token(&replicas.b, &replicas.a, order, reason).await?;
    let cancel = json!({"orderId": order, "reason": reason, "confirmationToken": token});
    assert_eq!(
        records_when(replicas.b.log(), 1).await,
        [rec(Outcome::Asked, None)]
    );
    assert_eq!(
        records_when(replicas.a.log(), 2).await,
        [
            rec(Outcome::Approved, None),
            rec(Outcome::TokenIssued, Some("for cancel_order"))
        ]
    );
    let (issued_a, issued_b) = (2, 1);

    // Sixteen approvals of the same cancellation, asked alternately on A and B ...
    let mut states = Vec::with_capacity(SPENDS);
    for i in 0..SPENDS {
        let asked_on = if i % 2 == 0 { &replicas.a } else { &replicas.b };
        states.push(ask(asked_on, "cancel_order", &cancel).await?.0);
    }
    let before = file.snapshot()?;
    assert_eq!(file.order_status(order)?.as_deref(), Some("pending"));

    // ... each approved at once on the other replica: eight spends on each.
    let start = Arc::new(tokio::sync::Barrier::new(SPENDS));
    let mut spends = Vec::with_capacity(SPENDS);
    for (i, state) in states.into_iter().enumerate() {
        let (replicas, start, cancel) = (replicas.clone(), start.clone(), cancel.clone());
        spends.push(tokio::spawn(async move {
            let answered_on = if i % 2 == 0 { &replicas.b } else { &replicas.a };
            start.wait().await;
            let reply = answer(answered_on, "cancel_order", &cancel, &state).await?;
            reply
                .tool_result()
                .ok_or_else(|| Failure::from(format!("no tool result: {reply:?}")))
        }));
    }
    let mut results = Vec::with_capacity(SPENDS);
    for spend in spends {
        results.push(spend.await??);
    }

    let (applied, refused): (Vec<_>, Vec<_>) = results.iter().partition(|(is_error, _)| !is_error);
    assert_eq!(applied.len(), 1, "{results:#?}");
    assert_eq!(refused.len(), SPENDS - 1, "{results:#?}");
    // One person asking the same change sixteen times is one question, put sixteen times: the
    // others find its approval used, or (if their token check came after the spend) the token.
    assert!(
        refused
            .iter()
            .all(|(_, text)| text == TOKEN_REFUSAL_MESSAGE || text == ALREADY_USED_MESSAGE),
        "{refused:#?}"
    );
    assert_ne!(file.snapshot()?, before);
    assert_eq!(file.order_status(order)?.as_deref(), Some("cancelled"));
    assert_eq!(file.stock("TLS-001")?, 12, "restored once");
    let mut movements = placed;
    movements.push(restocked(order, reason));
    assert_eq!(file.movements()?, movements, "one set of movement rows");

    // The decisions of the race, on both replicas together, once every spend is logged.
    let mut logged = Vec::new();
    for _ in 0..100 {
        let (a, b) = (records(replicas.a.log()), records(replicas.b.log()));
        logged = [&a[issued_a..], &b[issued_b..]].concat();
        let ended = count(&logged, Outcome::Applied)
            + count(&logged, Outcome::TokenRejected)
            + count(&logged, Outcome::AlreadyUsed);
        if ended >= SPENDS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        count(&logged, Outcome::Asked),
        1,
        "one question: {logged:#?}"
    );
    assert_eq!(count(&logged, Outcome::Approved), 1, "{logged:#?}");
    assert_eq!(count(&logged, Outcome::Applied), 1, "{logged:#?}");
    let rejected: Vec<_> = logged
        .iter()
        .filter(|(outcome, _)| outcome == Outcome::TokenRejected.as_str())
        .collect();
    assert!(
        rejected
            .iter()
            .all(|(_, reason)| reason.as_deref() == Some("already-spent")),
        "{rejected:#?}"
    );
    assert_eq!(
        rejected.len() + count(&logged, Outcome::AlreadyUsed),
        SPENDS - 1,
        "{logged:#?}"
    );
    assert_eq!(logged.len(), 3 + (SPENDS - 1), "nothing else: {logged:#?}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 4. The approval clock is the same on every replica
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn an_approval_answered_on_the_other_replica_after_its_clock_ran_out_is_refused_as_expired()
-> Result<(), Failure> {
    let redis = redis_url();
    let replicas = Replicas::start(redis.url(), &["--approval-ttl", "2"]).await?;
    let (a, b) = (&replicas.a, &replicas.b);
    let file = replicas.file();
    let before = file.snapshot()?;
    let arguments = json!({"sku": "TLS-003", "delta": -4, "reason": "too late"});

    let (state, _) = ask(a, "adjust_stock", &arguments).await?;
    // The clock must run out: two seconds, and a little.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let late = answer(b, "adjust_stock", &arguments, &state).await?;

    assert_eq!(refusal(&late)?, EXPIRED);
    assert_eq!(file.snapshot()?, before, "nothing saved");
    assert_eq!(file.stock("TLS-003")?, 40);
    assert!(file.movements()?.is_empty());
    assert_eq!(records_when(a.log(), 1).await, [rec(Outcome::Asked, None)]);
    assert_eq!(
        records_when(b.log(), 1).await,
        [rec(Outcome::Expired, Some("expired"))]
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 5. Redis goes away and comes back
// ---------------------------------------------------------------------------------------------

/// Asks on `replica` until the store takes the round trip again (Redis back, the connection
/// re-made), for at most five seconds; the state.
async fn ask_when_redis_is_back(
    replica: &Replica,
    arguments: &Value,
) -> Result<(String, String), Failure> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let reply = call(replica, "adjust_stock", arguments, None).await?;
        if reply.request_state().is_some() {
            return ask_reply(&reply);
        }
        assert_eq!(
            refusal(&reply)?,
            STORE_UNAVAILABLE,
            "only the outage refuses"
        );
        if Instant::now() > deadline {
            return Err("the replica did not reach Redis again within 5 s".into());
        }
        // Waiting for the reconnect.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn with_redis_gone_writes_are_refused_and_reads_answer_and_once_back_writes_apply_again()
-> Result<(), Failure> {
    let mut redis = RedisServer::start();
    let replicas = Replicas::start(&redis.url(), &[]).await?;
    let (a, b) = (&replicas.a, &replicas.b);
    let file = replicas.file();
    let before = file.snapshot()?;
    let arguments = json!({"sku": "TLS-002", "delta": 2, "reason": "after the outage"});

    // A round asked while Redis is up, answered while it is down.
    let (held, _) = ask(a, "adjust_stock", &arguments).await?;

    redis.stop();
    for replica in [a, b] {
        let refused = call(replica, "adjust_stock", &arguments, None).await?;
        assert_eq!(refusal(&refused)?, STORE_UNAVAILABLE);
        let read = call(replica, "get_product", &json!({"sku": "TLS-002"}), None).await?;
        success(&read)?;
        assert_eq!(
            read.message().ok_or("no message")?["result"]["structuredContent"]["stock"],
            3
        );
        let listed = call(replica, "list_products", &json!({}), None).await?;
        success(&listed)?;
    }
    let answered = answer(b, "adjust_stock", &arguments, &held).await?;
    assert_eq!(refusal(&answered)?, STORE_UNAVAILABLE);
    assert_eq!(
        file.snapshot()?,
        before,
        "nothing saved while Redis is gone"
    );
    let unavailable = |log: &Log| {
        records(log)
            .into_iter()
            .filter(|(outcome, _)| outcome == Outcome::StoreFailed.as_str())
            .count()
    };
    assert_eq!(
        records_when(a.log(), 2).await.len(),
        2,
        "{:?}",
        records(a.log())
    );
    assert_eq!(unavailable(a.log()), 1, "{:?}", records(a.log()));
    assert_eq!(
        records_when(b.log(), 2).await.len(),
        2,
        "{:?}",
        records(b.log())
    );
    assert_eq!(unavailable(b.log()), 2, "{:?}", records(b.log()));

    // Redis back on the same port (empty): the same processes write again.
    redis.restart();
    let (state, question) = ask_when_redis_is_back(a, &arguments).await?;
    assert_eq!(
        question,
        r#"Adjust "TLS-002" by +2: stock 3 -> 5. Reason given: "after the outage""#
    );
    success(&answer(b, "adjust_stock", &arguments, &state).await?)?;
    let (state, _) = ask_when_redis_is_back(b, &arguments).await?;
    success(&answer(a, "adjust_stock", &arguments, &state).await?)?;
    assert_eq!(file.stock("TLS-002")?, 7);
    let movement = Movement {
        sku: "TLS-002".into(),
        delta: 2,
        reason: "after the outage".into(),
    };
    assert_eq!(file.movements()?, [movement.clone(), movement]);
    // The round held across the outage is gone with Redis's memory, and stays refused.
    let stale = answer(a, "adjust_stock", &arguments, &held).await?;
    assert_eq!(refusal(&stale)?, ROUND_TRIP_REFUSAL_MESSAGE);
    assert_eq!(file.stock("TLS-002")?, 7);
    assert_eq!(file.movements()?.len(), 2);

    let logged = [records(a.log()), records(b.log())].concat();
    assert_eq!(count(&logged, Outcome::Applied), 2, "{logged:#?}");
    assert_eq!(count(&logged, Outcome::Approved), 2, "{logged:#?}");
    assert_eq!(
        records(a.log()).last(),
        Some(&rec(Outcome::StateRejected, Some("unknown"))),
        "{logged:#?}"
    );
    assert_eq!(count(&logged, Outcome::StateRejected), 1, "{logged:#?}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 6. With bearer tokens, a person is the same on every replica
// ---------------------------------------------------------------------------------------------

/// Tokens of the test issuer.
trait TestTokens {
    /// A valid token for `sub` granting reads and writes.
    fn token(&self, sub: &str) -> String;
}

impl TestTokens for SigningKey {
    fn token(&self, sub: &str) -> String {
        self.sign(&claims(sub, &format!("store:read {WRITE_SCOPE}")))
            .unwrap()
    }
}

/// The principal the server names for `sub` of the test issuer.
fn principal(sub: &str) -> String {
    format!(r#"oauth:["{ISSUER}","{sub}"]"#)
}

/// A 2026-07-28 `tools/call` on `replica` with `token` as bearer (or none), optionally the retry
/// carrying `state` and the approving answer. Whatever the HTTP status.
async fn call_as(
    replica: &Replica,
    token: Option<&str>,
    tool: &str,
    arguments: &Value,
    state: Option<&str>,
) -> Result<HttpReply, Failure> {
    let bearer = token.map(|token| format!("Bearer {token}"));
    let mut extra = Vec::new();
    if let Some(bearer) = &bearer {
        extra.push(("authorization", bearer.as_str()));
    }
    let retry = state.map(|state| (state, approve()));
    let reply = tokio::time::timeout(
        Duration::from_secs(10),
        replica.raw.call_2026(&extra, tool, arguments, retry),
    )
    .await??;
    Ok(reply)
}

/// An audit record with its principal: who, the outcome, the reason.
type Signed = (String, String, Option<String>);

fn signed(sub: &str, outcome: Outcome, reason: Option<&str>) -> Signed {
    (
        principal(sub),
        outcome.as_str().to_owned(),
        reason.map(str::to_owned),
    )
}

/// The audit records of `log` with their principals, once there are at least `n`.
async fn signed_records_when(log: &Log, n: usize) -> Vec<Signed> {
    common::records_when(log, n)
        .await
        .into_iter()
        .map(|record| {
            (
                record.principal.unwrap_or_default(),
                record.outcome,
                record.reason,
            )
        })
        .collect()
}

#[tokio::test]
async fn with_bearer_auth_a_person_is_the_same_on_every_replica() -> Result<(), Failure> {
    let redis = redis_url();
    // The keys live beside the replicas' folder: both are started with the same file.
    let keys = tempfile::tempdir()?;
    let key = SigningKey::generate("replica-key");
    let jwks = key.write_jwks(keys.path())?;
    let auth = [
        "--auth-issuer",
        ISSUER,
        "--auth-audience",
        AUDIENCE,
        "--auth-jwks",
        jwks.to_str().unwrap(),
        "--auth-write-scope",
        WRITE_SCOPE,
    ];
    let replicas = Replicas::start(redis.url(), &auth).await?;
    let (a, b) = (&replicas.a, &replicas.b);
    let file = replicas.file();
    let before = file.snapshot()?;
    let (alice, bob) = (key.token("alice"), key.token("bob"));
    let arguments = json!({"sku": "TLS-002", "delta": 5, "reason": "alice recounts"});

    // Alice asks on A.
    let asked = call_as(a, Some(&alice), "adjust_stock", &arguments, None).await?;
    assert_eq!(asked.status, 200, "{asked:?}");
    let (state, question) = ask_reply(&asked)?;
    assert_eq!(
        question,
        r#"Adjust "TLS-002" by +5: stock 3 -> 8. Reason given: "alice recounts""#
    );

    // Without a token, on B: 401 before anything reaches the guard, so her state is untouched.
    for retry in [None, Some(state.as_str())] {
        let anonymous = call_as(b, None, "adjust_stock", &arguments, retry).await?;
        assert_eq!(anonymous.status, 401, "{anonymous:?}");
        assert!(
            anonymous
                .header("www-authenticate")
                .is_some_and(|challenge| challenge.starts_with("Bearer ")),
            "{anonymous:?}"
        );
    }
    assert_eq!(file.snapshot()?, before, "asking and the 401s save nothing");

    // Her approving retry on B, with the same token: applied once.
    let applied = call_as(b, Some(&alice), "adjust_stock", &arguments, Some(&state)).await?;
    assert_eq!(applied.status, 200, "{applied:?}");
    success(&applied)?;
    let (movement, after) = assert_plus_five_saved(&file, "alice recounts")?;

    // Bob, with a valid token of his own, retries her spent state on B: refused as a replay (a
    // used state is refused as used, whoever presents it).
    let stolen = call_as(b, Some(&bob), "adjust_stock", &arguments, Some(&state)).await?;
    assert_eq!(stolen.status, 200, "{stolen:?}");
    assert_eq!(refusal(&stolen)?, ROUND_TRIP_REFUSAL_MESSAGE);
    assert_eq!(file.snapshot()?, after, "nothing more saved");

    // Alice asks again on A; Bob retries this live state on B: refused as another person's ...
    let asked = call_as(a, Some(&alice), "adjust_stock", &arguments, None).await?;
    assert_eq!(asked.status, 200, "{asked:?}");
    let (live, _) = ask_reply(&asked)?;
    let stolen = call_as(b, Some(&bob), "adjust_stock", &arguments, Some(&live)).await?;
    assert_eq!(stolen.status, 200, "{stolen:?}");
    assert_eq!(refusal(&stolen)?, ROUND_TRIP_REFUSAL_MESSAGE);
    assert_eq!(file.snapshot()?, after, "Bob's approval saved nothing");
    // ... and, as the guard defines it, his attempt used the state up (fail closed: any attempt
    // that finds a state takes it, a mismatched one included; `take_round_trip`), so Alice's own
    // approving retry on A is refused as a replay. She has to ask anew; nothing was saved.
    let own = call_as(a, Some(&alice), "adjust_stock", &arguments, Some(&live)).await?;
    assert_eq!(own.status, 200, "{own:?}");
    assert_eq!(refusal(&own)?, ROUND_TRIP_REFUSAL_MESSAGE);
    assert_eq!(file.snapshot()?, after, "nothing more saved");
    assert_eq!(file.stock("TLS-002")?, 8);
    assert_eq!(file.movements()?, [movement]);

    // Each decision under the person who made the request, on the replica that made it; the
    // 401s reached no guard.
    assert_eq!(
        signed_records_when(a.log(), 3).await,
        [
            signed("alice", Outcome::Asked, None),
            signed("alice", Outcome::Asked, None),
            signed("alice", Outcome::StateRejected, Some("replayed")),
        ]
    );
    assert_eq!(
        signed_records_when(b.log(), 4).await,
        [
            signed("alice", Outcome::Approved, None),
            signed("alice", Outcome::Applied, None),
            signed("bob", Outcome::StateRejected, Some("replayed")),
            signed("bob", Outcome::StateRejected, Some("other-principal")),
        ]
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 7. An approval page opened on one replica is answered on the other
// ---------------------------------------------------------------------------------------------

/// A 2026-07-28 `tools/call` on `replica` from a client that declares URL-mode elicitation only
/// (so a replica with a page asks on it), optionally the retry carrying `state` and the
/// client's `accept` (it opened the link; the page holds the person's answer).
async fn call_url_mode(
    replica: &Replica,
    tool: &str,
    arguments: &Value,
    state: Option<&str>,
) -> Result<HttpReply, Failure> {
    let retry = state.map(|state| (state, json!({"action": "accept"})));
    call_declaring(replica, &json!({"url": {}}), tool, arguments, retry).await
}

/// `http://127.0.0.1:PORT` of `replica`.
fn origin(replica: &Replica) -> &str {
    replica.server.url.strip_suffix("/mcp").unwrap()
}

/// The page's status and HTML.
async fn get_page(http: &reqwest::Client, url: &str) -> Result<(u16, String), Failure> {
    let response = http.get(url).send().await?;
    Ok((response.status().as_u16(), response.text().await?))
}

/// Posts the page's form: `decision` with the `csrf` token; the status and HTML.
async fn post_page(
    http: &reqwest::Client,
    url: &str,
    csrf: &str,
    decision: &str,
) -> Result<(u16, String), Failure> {
    let response = http
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&decision={decision}"))
        .send()
        .await?;
    Ok((response.status().as_u16(), response.text().await?))
}

/// The CSRF token of the page's form.
fn csrf_of(html: &str) -> Result<String, Failure> {
    const FIELD: &str = r#"name="csrf" value=""#;
    let at = html.find(FIELD).ok_or("no csrf field")? + FIELD.len();
    let token = html[at..].split('"').next().ok_or("no csrf value")?;
    Ok(token.to_owned())
}

#[tokio::test]
async fn an_approval_page_opened_by_one_replica_is_answered_on_the_other() -> Result<(), Failure> {
    let redis = redis_url();
    let replicas = Replicas::start(redis.url(), &["--approval-page"]).await?;
    let (a, b) = (&replicas.a, &replicas.b);
    let file = replicas.file();
    let before = file.snapshot()?;
    let arguments = json!({"sku": "TLS-002", "delta": 5, "reason": "counted on the page"});
    let http = reqwest::Client::new();

    // Asked on A: a url-mode input request naming A's listener (no --public-url).
    let asked = call_url_mode(a, "adjust_stock", &arguments, None).await?;
    let state = asked
        .request_state()
        .ok_or_else(|| format!("expected an input round: {asked:?}"))?;
    let message = asked.message().ok_or("no message")?;
    let params = &message["result"]["inputRequests"][INPUT_KEY]["params"];
    assert_eq!(params["mode"], "url", "{message}");
    let on_a = params["url"].as_str().ok_or("no url")?.to_owned();
    let page = on_a
        .strip_prefix(&format!("{}/approvals/", origin(a)))
        .ok_or_else(|| format!("not a page of A: {on_a}"))?
        .to_owned();
    assert_eq!(file.snapshot()?, before, "asking saves nothing");

    // The browser is routed to B, as a load balancer would send it.
    let on_b = format!("{}/approvals/{page}", origin(b));
    let (status, shown) = get_page(&http, &on_b).await?;
    assert_eq!(status, 200, "{shown}");
    assert!(shown.contains("Approve this change?"), "{shown}");
    assert!(shown.contains("counted on the page"), "{shown}");
    let csrf = csrf_of(&shown)?;
    let (status, answered) = post_page(&http, &on_b, &csrf, "approve").await?;
    assert_eq!(status, 200, "{answered}");
    assert!(answered.contains("You approved this change"), "{answered}");
    assert_eq!(
        file.snapshot()?,
        before,
        "the page's answer alone saves nothing"
    );

    // The client retries on A: the answer given on B decides, and the change applies once.
    let applied = call_url_mode(a, "adjust_stock", &arguments, Some(&state)).await?;
    success(&applied)?;
    let (movement, after) = assert_plus_five_saved(&file, "counted on the page")?;

    // The same answer again, on either replica: already answered, nothing more saved.
    for url in [&on_b, &on_a] {
        let (status, again) = post_page(&http, url, &csrf, "approve").await?;
        assert_eq!(status, 410, "{url}: {again}");
        assert!(again.contains("Already answered"), "{url}: {again}");
        let (status, reopened) = get_page(&http, url).await?;
        assert_eq!(status, 410, "{url}: {reopened}");
        assert!(reopened.contains("Already answered"), "{url}: {reopened}");
        assert!(
            !reopened.contains("<form"),
            "{url}: no form on a decided page"
        );
    }
    assert_eq!(file.snapshot()?, after, "nothing more saved");
    assert_eq!(file.stock("TLS-002")?, 8);
    assert_eq!(file.movements()?, [movement]);

    // A asked and applied; B took the page's answer. The refused posts are not records: a page
    // that is no longer open has no approval to file them under. (A moment first, so that a
    // record logged for the last posts would be read.)
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        records_when(a.log(), 3).await,
        [
            rec(Outcome::Asked, None),
            rec(Outcome::Approved, None),
            rec(Outcome::Applied, None),
        ]
    );
    assert_eq!(
        records_when(b.log(), 1).await,
        [rec(Outcome::PageAnswered, Some("approve"))]
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 8. A question a headless client could not ask is answered on the other replica
// ---------------------------------------------------------------------------------------------

/// The webhook's shared secret, as the operator writes it to the file (with a line break).
const HOOK_SECRET: &[u8] = b"replicas-hook-secret-5b1e07c2d94a3f685b1e07c2d94a3f68";

use common::{Delivery, Receiver};

/// The body of `delivery`, after its signature was checked with [`HOOK_SECRET`].
fn verified(delivery: &Delivery) -> Result<Value, Failure> {
    Ok(delivery.verified_with(HOOK_SECRET))
}

/// The kinds of client that cannot ask their user.
#[derive(Debug, Clone, Copy)]
enum Agent {
    /// Stateless 2026-07-28 calls, written by hand, declaring no elicitation capability.
    Raw,
    /// A legacy session (rmcp's client) whose `initialize` declares no elicitation.
    Session,
    /// The official Python SDK in the 2026-07-28 era with no elicitation callback (so no
    /// elicitation capability): `tests/python/store_client.py --answer none`.
    Python,
}

/// A client that cannot ask its user, speaking to one replica.
enum Headless<'a> {
    Raw(&'a Replica),
    Session(workspace_tests::Client),
    Python(&'a Replica),
}

/// What a headless call got back: whether it is an error, its text, and everything the client
/// received (to check that no link leaks anywhere in it).
#[derive(Debug)]
struct Got {
    is_error: bool,
    text: String,
    wire: String,
}

impl<'a> Headless<'a> {
    /// A headless client of kind `agent` on `replica`.
    async fn open(agent: Agent, replica: &'a Replica) -> Result<Self, Failure> {
        Ok(match agent {
            Agent::Raw => Self::Raw(replica),
            Agent::Python => Self::Python(replica),
            Agent::Session => Self::Session(
                replica
                    .server
                    .connect(&ScriptedClient::without_elicitation(), Era::Legacy)
                    .await?,
            ),
        })
    }

    async fn adjust(&self, arguments: &Value) -> Result<Got, Failure> {
        match self {
            Self::Raw(replica) => {
                let call = replica.raw.call_2026_asking(
                    &[],
                    &Value::Null,
                    "adjust_stock",
                    arguments,
                    None,
                );
                let reply = tokio::time::timeout(Duration::from_secs(10), call).await??;
                assert_eq!(reply.status, 200, "{reply:?}");
                assert_eq!(reply.request_state(), None, "no input round: {reply:?}");
                let (is_error, text) = reply.tool_result().ok_or("no tool result")?;
                Ok(Got {
                    is_error,
                    text,
                    wire: reply.body,
                })
            }
            Self::Python(replica) => {
                // The script calls adjust_stock TLS-002 by -1 with this reason.
                assert_eq!(
                    (&arguments["sku"], &arguments["delta"]),
                    (&json!("TLS-002"), &json!(-1))
                );
                let reason = arguments["reason"].as_str().ok_or("no reason")?;
                let call =
                    common::python_adjust(&replica.server.url, "2026-07-28", "none", reason, &[]);
                let result = tokio::time::timeout(Duration::from_secs(60), call).await??;
                assert_eq!(
                    result.elicitations, 0,
                    "nobody was asked through the client"
                );
                Ok(Got {
                    is_error: result.is_error,
                    text: result.text,
                    wire: result.wire,
                })
            }
            Self::Session(client) => {
                let call = workspace_tests::call(client, "adjust_stock", arguments.clone());
                let result = tokio::time::timeout(Duration::from_secs(10), call).await??;
                Ok(Got {
                    is_error: result.is_error == Some(true),
                    text: workspace_tests::message(&result),
                    wire: serde_json::to_string(&result)?,
                })
            }
        }
    }

    async fn close(self) -> Result<(), Failure> {
        if let Self::Session(client) = self {
            client.cancel().await?;
        }
        Ok(())
    }
}

/// The page's id in `link`, which must be a page of `replica`: 64 hex digits.
fn page_id_on<'l>(link: &'l str, replica: &Replica) -> &'l str {
    let id = link
        .strip_prefix(&format!("{}/approvals/", origin(replica)))
        .unwrap_or_else(|| panic!("not a page of the replica that asked: {link}"));
    assert!(
        id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{link}"
    );
    id
}

/// Asserts `got` is the "a person was asked, call again" answer and carries neither `link`
/// nor its page id anywhere.
fn assert_asked(got: &Got, link: &str, id: &str, agent: Agent) {
    let text = &got.text;
    assert!(got.is_error, "{agent:?}: {text}");
    assert!(
        text.contains("a person was asked") && text.contains("Call this tool again"),
        "{agent:?}: {text}"
    );
    assert!(text.contains("Nothing was saved"), "{agent:?}: {text}");
    for leak in [link, id, "/approvals/"] {
        assert!(
            !got.wire.contains(leak),
            "{agent:?}: {leak} reaches the client: {}",
            got.wire
        );
    }
}

/// One audit record with its approval id: outcome, reason, approval id.
type Joined = (String, Option<String>, Option<String>);

/// The audit records of `log` with their approval ids, once there are at least `n`; every one
/// for `local`.
async fn joined_records_when(log: &Log, n: usize) -> Vec<Joined> {
    common::records_when(log, n).await;
    log.lines()
        .iter()
        .filter(|line| common::audit_fields(line).is_some())
        .map(|line| {
            let fields = common::fields(line);
            let get = |key: &str| {
                fields
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, value)| value.clone())
            };
            assert_eq!(get("principal").as_deref(), Some("local"), "{line}");
            (
                get("outcome").unwrap_or_default(),
                get("reason"),
                get("approval_id"),
            )
        })
        .collect()
}

/// The question the notice carries for the change `stock` (`stock 3 -> 2`).
fn page_question(stock: &str) -> String {
    format!(
        "Adjust \"TLS-002\" by -1: {stock}. Reason given: \"damaged on replica a\"\n\
         Approve or decline it on the server's approval page."
    )
}

fn joined(outcome: Outcome, reason: Option<&str>, approval: &str) -> Joined {
    (
        outcome.as_str().to_owned(),
        reason.map(str::to_owned),
        Some(approval.to_owned()),
    )
}

#[tokio::test]
async fn a_headless_question_asked_on_one_replica_is_answered_on_the_other_and_applied_once()
-> Result<(), Failure> {
    let redis = redis_url();
    let browser = Browser::start().await?;
    for agent in [Agent::Raw, Agent::Session, Agent::Python] {
        let hooks = Receiver::start().await?;
        let secrets = tempfile::tempdir()?;
        let secret_file = secrets.path().join("webhook-secret");
        std::fs::write(&secret_file, [HOOK_SECRET, b"\n"].concat())?;
        let args = [
            "--approval-page",
            "--notify-webhook",
            hooks.url.as_str(),
            "--notify-secret-file",
            secret_file.to_str().unwrap(),
        ];
        let replicas = Replicas::start(redis.url(), &args).await?;
        let (a, b) = (&replicas.a, &replicas.b);
        let file = replicas.file();
        let before = file.snapshot()?;
        let arguments = json!({"sku": "TLS-002", "delta": -1, "reason": "damaged on replica a"});
        let client = Headless::open(agent, a).await?;

        // 1. Asked on A: answered at once, one signed delivery carries the link, nothing saved.
        let first = client.adjust(&arguments).await?;
        let deliveries = hooks.deliveries();
        assert_eq!(deliveries.len(), 1, "{agent:?}: exactly one delivery");
        let notice = verified(&deliveries[0])?;
        assert_eq!(notice["tool"], "adjust_stock", "{agent:?}: {notice}");
        let prompt = notice["prompt"].as_str().ok_or("no prompt")?;
        assert_eq!(prompt, page_question("stock 3 -> 2"), "{agent:?}");
        let asked_id = notice["approvalId"]
            .as_str()
            .ok_or("no approvalId")?
            .to_owned();
        let link = notice["url"].as_str().ok_or("no url")?.to_owned();
        let page = page_id_on(&link, a).to_owned();
        assert_asked(&first, &link, &page, agent);
        assert_eq!(file.snapshot()?, before, "{agent:?}: asking saves nothing");

        // 2. The person's browser (headless Chromium) is routed to B, where the page answers
        // from Redis.
        let on_b = format!("{}/approvals/{page}", origin(b));
        browser.open(&on_b).await?;
        assert_eq!(
            browser.text("h1").await?,
            "Approve this change?",
            "{agent:?}"
        );
        let shown = browser.source().await?;
        assert!(shown.contains("damaged on replica a"), "{agent:?}: {shown}");
        browser.click("button[value=approve]").await?;
        assert_eq!(
            browser.text("h1").await?,
            "You approved this change",
            "{agent:?}"
        );
        assert_eq!(
            file.snapshot()?,
            before,
            "{agent:?}: the page's answer alone saves nothing"
        );

        // 3. The same call again on A: the answer given on B decides, applied once.
        let applied = client.adjust(&arguments).await?;
        assert!(
            !applied.is_error,
            "{agent:?}: {} / A {:?} / B {:?}",
            applied.text,
            records(a.log()),
            records(b.log())
        );
        assert_eq!(file.stock("TLS-002")?, 2, "{agent:?}: exactly as shown");
        let movement = Movement {
            sku: "TLS-002".into(),
            delta: -1,
            reason: "damaged on replica a".into(),
        };
        assert_eq!(
            file.movements()?,
            std::slice::from_ref(&movement),
            "{agent:?}"
        );
        let after = file.snapshot()?;
        assert_eq!(hooks.deliveries().len(), 1, "{agent:?}: nobody asked again");

        // 4. The approval is spent: the same call again is a new question (2 -> 1).
        let again = client.adjust(&arguments).await?;
        let deliveries = hooks.deliveries();
        assert_eq!(deliveries.len(), 2, "{agent:?}: asked anew");
        let renotice = verified(&deliveries[1])?;
        let second_id = renotice["approvalId"]
            .as_str()
            .ok_or("no approvalId")?
            .to_owned();
        assert_ne!(second_id, asked_id, "{agent:?}: a question of its own");
        let second_link = renotice["url"].as_str().ok_or("no url")?.to_owned();
        let second_page = page_id_on(&second_link, a).to_owned();
        assert_ne!(second_page, page, "{agent:?}: a page of its own");
        assert_asked(&again, &second_link, &second_page, agent);
        assert_eq!(
            renotice["prompt"].as_str(),
            Some(page_question("stock 2 -> 1").as_str()),
            "{agent:?}"
        );
        assert_eq!(file.snapshot()?, after, "{agent:?}: nothing more saved");
        assert_eq!(file.stock("TLS-002")?, 2, "{agent:?}");
        assert_eq!(file.movements()?, [movement], "{agent:?}");

        // 5. A asked, notified, waited, then took B's answer and applied, all under one
        // approval id (the one the delivery named); the second question under another.
        let (delivered, waiting) = (Some("webhook: delivered"), Some("asked through webhook"));
        assert_eq!(
            joined_records_when(a.log(), 8).await,
            [
                joined(Outcome::Asked, None, &asked_id),
                joined(Outcome::Notified, delivered, &asked_id),
                joined(Outcome::AwaitingAnswer, waiting, &asked_id),
                joined(Outcome::Approved, None, &asked_id),
                joined(Outcome::Applied, None, &asked_id),
                joined(Outcome::Asked, None, &second_id),
                joined(Outcome::Notified, delivered, &second_id),
                joined(Outcome::AwaitingAnswer, waiting, &second_id),
            ],
            "{agent:?}"
        );
        assert_eq!(
            joined_records_when(b.log(), 1).await,
            [joined(Outcome::PageAnswered, Some("approve"), &asked_id)],
            "{agent:?}"
        );
        client.close().await?;
    }
    browser.close().await
}
