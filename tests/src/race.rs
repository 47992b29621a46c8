//! Approvals held open and then applied together, in either protocol era: every question is
//! asked (and its prompt shown) before any approved apply reaches the server. This is how a
//! model races itself: it collects several approvals of one change, each shown on the same
//! state, and sends the approved applies at once.

use std::time::Duration;

use mcp_write_guard_rmcp::{
    Era, INPUT_KEY, STALE_MESSAGE,
    test_util::{Gate, Reply, ScriptedClient},
};
use rmcp::{
    model::{CallToolRequestParams, CallToolResponse, CallToolResult, InputResponses, JsonObject},
    service::{Peer, RoleClient},
};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::{
    Client, Failure,
    results::{enveloped_data, is_error, text},
    sqlite::FileView,
};

/// How long a held question may take to arrive before the helper gives up.
const ASKED_WITHIN: Duration = Duration::from_secs(10);

/// One 2026-07-28 input round the server opened and nobody answered yet.
#[derive(Debug, Clone)]
pub struct Round {
    /// The question the person is shown.
    pub message: String,
    tool: String,
    arguments: JsonObject,
    request_state: String,
}

/// Calls `tool` once, without answering: the server must answer with an input round that asks
/// the person (2026-07-28 era).
pub async fn ask_once(
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: &Value,
) -> Result<Round, Failure> {
    let arguments = object(arguments)?;
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments.clone());
    let input = match peer.call_tool_once(params).await? {
        CallToolResponse::InputRequired(input) => input,
        other => return Err(format!("expected an input round, got {other:?}").into()),
    };
    let request = input
        .input_requests
        .as_ref()
        .and_then(|requests| requests.get(INPUT_KEY))
        .ok_or("the input round asks nothing")?;
    let message = serde_json::to_value(request)?
        .pointer("/params/message")
        .and_then(Value::as_str)
        .ok_or("the input request has no message")?
        .to_owned();
    let request_state = input.request_state.ok_or("the input round has no state")?;
    Ok(Round {
        message,
        tool: tool.to_owned(),
        arguments,
        request_state,
    })
}

/// Retries `round` with the person's approval (`accept`, `approve: true`).
pub async fn approve_round(
    peer: &Peer<RoleClient>,
    round: &Round,
) -> Result<CallToolResult, Failure> {
    let mut responses = InputResponses::new();
    responses.insert(
        INPUT_KEY.to_owned(),
        json!({"action": "accept", "content": {"approve": true}}),
    );
    let mut params =
        CallToolRequestParams::new(round.tool.clone()).with_arguments(round.arguments.clone());
    params.request_state = Some(round.request_state.clone());
    params.input_responses = Some(responses);
    match peer.call_tool_once(params).await? {
        CallToolResponse::Complete(result) => Ok(result),
        other => Err(format!("expected a final result, got {other:?}").into()),
    }
}

/// Approvals that were asked and given but not yet applied. Made by [`hold_approvals`].
pub struct HeldApprovals {
    prompts: Vec<String>,
    pending: Pending,
}

enum Pending {
    /// Calls in flight, their answers held at the gate.
    Legacy {
        gate: Gate,
        calls: Vec<tokio::task::JoinHandle<Result<CallToolResult, rmcp::ServiceError>>>,
    },
    /// Input rounds, their approved retries not sent yet.
    Rounds {
        peer: Peer<RoleClient>,
        rounds: Vec<Round>,
    },
}

/// Calls `tool` with `arguments` `n` times and lets the server ask every time, holding every
/// answer back: returns once all `n` questions were asked.
///
/// - Legacy era: the `n` calls are in flight and `user` (the client's handler) has been asked
///   `n` times; each answer is an approval held at one gate.
/// - 2026-07-28 era: `n` calls came back with input rounds; `user` is not involved (the
///   approved retries are built by [`approve_round`]).
pub async fn hold_approvals(
    client: &Client,
    user: &ScriptedClient,
    era: Era,
    tool: &str,
    calls: &[Value],
) -> Result<HeldApprovals, Failure> {
    let peer = client.peer().clone();
    let n = calls.len();
    match era {
        Era::Legacy => {
            let gate = Gate::new();
            let asked_before = user.asked().len();
            user.script((0..n).map(|_| Reply::held(&gate, Reply::Approve)));
            let calls = calls
                .iter()
                .map(|arguments| {
                    let peer = peer.clone();
                    let params = CallToolRequestParams::new(tool.to_owned())
                        .with_arguments(object(arguments)?);
                    Ok(tokio::spawn(async move { peer.call_tool(params).await }))
                })
                .collect::<Result<_, Failure>>()?;
            gate.wait_for_questions(n, ASKED_WITHIN).await?;
            let prompts = user.asked().split_off(asked_before);
            Ok(HeldApprovals {
                prompts,
                pending: Pending::Legacy { gate, calls },
            })
        }
        // 2026-07-28 and later: input rounds.
        _ => {
            let mut rounds = Vec::with_capacity(n);
            for arguments in calls {
                rounds.push(ask_once(&peer, tool, arguments).await?);
            }
            Ok(HeldApprovals {
                prompts: rounds.iter().map(|round| round.message.clone()).collect(),
                pending: Pending::Rounds { peer, rounds },
            })
        }
    }
}

impl HeldApprovals {
    /// The question each approval answered, in the order they were asked.
    pub fn prompts(&self) -> &[String] {
        &self.prompts
    }

    /// Lets every approval through at once (legacy: opens the gate; 2026-07-28: sends every
    /// approved retry concurrently) and returns the final results, in the order they arrived.
    pub async fn apply_all(self) -> Result<Vec<CallToolResult>, Failure> {
        let mut results = Vec::new();
        match self.pending {
            Pending::Legacy { gate, calls } => {
                gate.open();
                for call in calls {
                    results.push(call.await??);
                }
            }
            Pending::Rounds { peer, rounds } => {
                let mut retries = JoinSet::new();
                for round in rounds {
                    let peer = peer.clone();
                    retries.spawn(async move { approve_round(&peer, &round).await });
                }
                while let Some(result) = retries.join_next().await {
                    results.push(result??);
                }
            }
        }
        Ok(results)
    }
}

/// The final results of approved applies, sorted by what the guard answered.
#[derive(Debug, Default)]
pub struct Tally {
    /// The data (inside the envelope) of every result that applied.
    pub applied: Vec<Value>,
    /// How many were refused as stale, with exactly [`STALE_MESSAGE`].
    pub stale: usize,
    /// The text of every other result.
    pub other: Vec<String>,
}

/// Sorts `results` into applied, stale and anything else.
pub fn tally(results: &[CallToolResult]) -> Result<Tally, Failure> {
    let mut tally = Tally::default();
    for result in results {
        if !is_error(result) {
            tally.applied.push(enveloped_data(result)?.clone());
        } else if text(result) == STALE_MESSAGE {
            tally.stale += 1;
        } else {
            tally.other.push(text(result));
        }
    }
    Ok(tally)
}

fn object(arguments: &Value) -> Result<JsonObject, Failure> {
    match arguments {
        Value::Object(arguments) => Ok(arguments.clone()),
        _ => Err("arguments must be a JSON object".into()),
    }
}

/// The question [`race_plus_one`] asks on the seeded store.
pub const RACE_PLUS_ONE_PROMPT: &str =
    r#"Adjust "TLS-002" by +1: stock 3 -> 4. Reason given: "race""#;

/// What another person sells at the counter while a question is open.
pub const COUNTER_SALE: &str = "sold at the counter";

/// Another person on `other` sells one `sku` at the counter (`adjust_stock` by -1, reason
/// [`COUNTER_SALE`]); an error if it was not applied.
pub async fn sell_one(other: &Client, sku: &str) -> Result<(), Failure> {
    let sale = crate::call(
        other,
        "adjust_stock",
        json!({"sku": sku, "delta": -1, "reason": COUNTER_SALE}),
    )
    .await?;
    if is_error(&sale) {
        return Err(format!("the counter sale of {sku} was refused: {sale:?}").into());
    }
    Ok(())
}

/// The one movement [`sell_one`] of `sku` records.
pub fn counter_sale(sku: &str) -> crate::Movement {
    crate::Movement {
        sku: sku.into(),
        delta: -1,
        reason: COUNTER_SALE.into(),
    }
}

/// The arguments of the race: `+1` on TLS-002 (seeded at stock 3).
pub fn race_plus_one() -> Value {
    race_plus_one_as(0)
}

/// [`race_plus_one`] with the reason `race` (`i` = 0) or `race i`: the same stock change, asked
/// as a change of its own (one person's identical calls would share one question).
fn race_plus_one_as(i: usize) -> Value {
    let reason = if i == 0 {
        "race".to_owned()
    } else {
        format!("race {i}")
    };
    json!({"sku": "TLS-002", "delta": 1, "reason": reason})
}

/// The race every transport must win: `n` approvals of [`race_plus_one`], each question shown
/// "stock 3 -> 4" on the same state, applied at once. Asserts the questions, that exactly one
/// applied (3 -> 4) and `n - 1` were stale, and the file: stock 4 and one movement. The caller
/// checks the audit trail its own way.
pub async fn race_one_stock(
    client: &Client,
    user: &ScriptedClient,
    era: Era,
    file: &FileView,
    n: usize,
) -> Result<(), Failure> {
    let calls: Vec<Value> = (0..n).map(race_plus_one_as).collect();
    let held = hold_approvals(client, user, era, "adjust_stock", &calls).await?;
    // Every question was asked on the same state, before any apply.
    let mut prompts = held.prompts().to_vec();
    prompts.sort();
    let mut expected: Vec<String> = calls
        .iter()
        .map(|call| {
            format!(
                r#"Adjust "TLS-002" by +1: stock 3 -> 4. Reason given: "{}""#,
                call["reason"].as_str().unwrap_or_default()
            )
        })
        .collect();
    expected.sort();
    assert_eq!(prompts, expected, "{era:?}");
    assert_eq!(file.stock("TLS-002")?, 3, "{era:?}");
    assert!(file.movements()?.is_empty(), "{era:?}");

    let results = held.apply_all().await?;

    let tally = tally(&results)?;
    assert_eq!(tally.applied.len(), 1, "{era:?}: {tally:?}");
    assert_eq!(tally.stale, n - 1, "{era:?}: {tally:?}");
    assert!(tally.other.is_empty(), "{era:?}: {tally:?}");
    // The one that applied did what its question said.
    let applied = tally.applied.first().ok_or("nothing applied")?;
    assert_eq!(applied["previousStock"], 3, "{era:?}");
    assert_eq!(applied["newStock"], 4, "{era:?}");
    assert_eq!(file.stock("TLS-002")?, 4, "{era:?}");
    let movements = file.movements()?;
    assert_eq!(movements.len(), 1, "{era:?}: {movements:?}");
    let reasons: Vec<&str> = calls.iter().filter_map(|c| c["reason"].as_str()).collect();
    assert!(
        movements
            .iter()
            .all(|m| m.sku == "TLS-002" && m.delta == 1 && reasons.contains(&m.reason.as_str())),
        "{era:?}: {movements:?}"
    );
    Ok(())
}
