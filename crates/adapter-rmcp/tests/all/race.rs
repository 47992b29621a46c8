//! Approved writes that race for the same state, in both protocol eras: many approvals of the
//! same "0 -> 1", another client's write between the question and the apply, and any
//! interleaving of questions and applies. Whatever lands is exactly what its person was shown;
//! everything else is `stale` and saves nothing.

use std::sync::Arc;

use mcp_write_guard_rmcp::{AuditRecord, Outcome, STALE_MESSAGE};
use proptest::{collection::vec, prelude::*};
use rmcp::model::CallToolResult;
use rstest::rstest;
use rstest_reuse::{apply, template};
use serde_json::{Value, json};
use tokio::sync::Barrier;

use crate::common::{
    Era, Reply, call_on, connect,
    counter::{Asked, Committed, CounterHarness, Tally, approve_round, first_round},
    gated::shown_change,
    params, text_of, unwrapped,
};

/// `both_eras` on a multi-threaded runtime, so that concurrent calls really overlap.
#[template]
#[rstest]
#[case::legacy(Era::Legacy)]
#[case::rounds(Era::InputRounds)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
fn both_eras_multi_thread(#[case] era: Era) {}

const N: usize = 10;

fn count(outcomes: &[Outcome], outcome: Outcome) -> usize {
    outcomes.iter().filter(|o| **o == outcome).count()
}

/// Ten people (ten connections, so ten principals: one person's identical calls share one
/// question) approve the same `+1` at once, all shown "0 -> 1": below 2026-07-28 every answer is
/// held until all ten questions were asked, then all are approved at once; at 2026-07-28 the ten
/// questions are collected, then the ten retries are sent together.
#[apply(both_eras_multi_thread)]
async fn ten_approvals_of_the_same_increment_apply_once(era: Era) {
    let h = CounterHarness::start(era, 0).await;
    let args = json!({"delta": 1});
    let mut people = Vec::new();
    for _ in 0..N {
        people.push(
            connect(h.guard.clone(), era, h.gated.clone())
                .await
                .unwrap(),
        );
    }
    let (prompts, results): (Vec<String>, Vec<CallToolResult>) = match era {
        Era::Legacy => {
            let calls: Vec<_> = people
                .iter()
                .map(|person| {
                    let peer = person.peer().clone();
                    let params = params("add_to_counter", &args);
                    tokio::spawn(async move { peer.call_tool(params).await.unwrap() })
                })
                .collect();
            let prompts = h.gated.wait_asked(N).await;
            // Every question is out and held: each preview ran, nothing was applied.
            assert_eq!(h.tally().previews, N);
            assert_eq!(h.tally().applies, 0);
            h.gated.release_all();
            let mut results = Vec::new();
            for call in calls {
                results.push(call.await.unwrap());
            }
            (prompts, results)
        }
        Era::InputRounds => {
            let asks: Vec<_> = people
                .iter()
                .map(|person| {
                    let peer = person.peer().clone();
                    let args = args.clone();
                    tokio::spawn(async move { first_round(&peer, "add_to_counter", &args).await })
                })
                .collect();
            let mut asked: Vec<Asked> = Vec::new();
            for ask in asks {
                asked.push(ask.await.unwrap());
            }
            assert_eq!(h.tally().previews, N);
            assert_eq!(h.tally().applies, 0);
            // All ten retries start together.
            let start = Arc::new(Barrier::new(N));
            let retries: Vec<_> = asked
                .iter()
                .zip(&people)
                .map(|(asked, person)| {
                    let peer = person.peer().clone();
                    let args = args.clone();
                    let state = asked.state.clone();
                    let start = Arc::clone(&start);
                    tokio::spawn(async move {
                        start.wait().await;
                        approve_round(&peer, "add_to_counter", &args, &state).await
                    })
                })
                .collect();
            let mut results = Vec::new();
            for retry in retries {
                results.push(retry.await.unwrap());
            }
            // Here each result is paired with its own question.
            (asked.into_iter().map(|a| a.prompt).collect(), results)
        }
        other => unreachable!("no test written for {other:?}"),
    };

    // Every person was shown "0 -> 1".
    assert_eq!(prompts.len(), N);
    let shown = json!({"before": 0, "after": 1});
    for prompt in &prompts {
        assert_eq!(shown_change(prompt), shown, "{prompt}");
        assert!(prompt.contains("delta: 1"), "{prompt}");
    }

    // Exactly one applies, and its result is what its prompt showed.
    let (applied, refused): (Vec<_>, Vec<_>) = prompts
        .iter()
        .zip(&results)
        .partition(|(_, result)| result.is_error != Some(true));
    assert_eq!(applied.len(), 1, "{results:?}");
    for (prompt, result) in &applied {
        assert_eq!(unwrapped(result), shown_change(prompt));
    }
    // The other nine are stale and say so.
    assert_eq!(refused.len(), N - 1);
    for (_, result) in &refused {
        assert_eq!(result.is_error, Some(true));
        assert_eq!(text_of(result), STALE_MESSAGE);
        assert!(result.structured_content.is_none(), "{result:?}");
    }

    // The counter moved once, by the one change that was shown and applied.
    let tally = assert_one_commit_to(&h, 1);
    // Every approved write reached the tool's compare; nine rolled back there.
    assert_eq!(tally.applies, N);
    assert_eq!(tally.previews, N);

    let outcomes = h.audit.outcomes();
    assert_eq!(outcomes.len(), 3 * N, "{outcomes:?}");
    assert_eq!(count(&outcomes, Outcome::Asked), N);
    assert_eq!(count(&outcomes, Outcome::Approved), N);
    assert_eq!(count(&outcomes, Outcome::Applied), 1);
    assert_eq!(count(&outcomes, Outcome::Stale), N - 1);
    for record in h.audit.records() {
        if record.outcome == Outcome::Stale {
            assert_eq!(
                record.reason.as_deref(),
                Some("preview changed"),
                "{record:?}"
            );
        }
    }
}

/// Another client's approved write to the same counter lands while this person looks at
/// "0 -> 1": this one is stale and saves nothing; the other one stands.
#[apply(both_eras_multi_thread)]
async fn another_clients_write_between_ask_and_apply_makes_it_stale(era: Era) {
    let h = CounterHarness::start(era, 0).await;
    let (other, other_client) = h.second_connection().await;
    let theirs = async {
        other_client.script([Reply::Approve]);
        let result = call_on(&other, "add_to_counter", json!({"delta": 5}))
            .await
            .unwrap();
        assert_ne!(result.is_error, Some(true), "{result:?}");
        assert_eq!(unwrapped(&result), json!({"before": 0, "after": 5}));
    };
    let (prompt, result) = h
        .write_with("add_to_counter", &json!({"delta": 1}), theirs)
        .await;
    assert_eq!(shown_change(&prompt), json!({"before": 0, "after": 1}));
    assert_eq!(
        shown_change(&other_client.asked()[0]),
        json!({"before": 0, "after": 5})
    );

    assert_eq!(result.is_error, Some(true));
    assert_eq!(text_of(&result), STALE_MESSAGE);
    assert!(result.structured_content.is_none(), "{result:?}");

    // Nothing of ours was saved: the counter holds the other write alone.
    let tally = assert_one_commit_to(&h, 5);
    assert_eq!(tally.applies, 2, "ours reached the compare and rolled back");

    // Theirs: approved, applied. Ours (another principal): approved, then stale.
    let records = h.audit.records();
    let outcomes: Vec<Outcome> = records.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        vec![
            Outcome::Asked,
            Outcome::Asked,
            Outcome::Approved,
            Outcome::Applied,
            Outcome::Approved,
            Outcome::Stale
        ]
    );
    // Ours was asked first; theirs was asked, approved and applied while ours waited.
    let ours = [0, 4, 5];
    let theirs = [1, 2, 3];
    assert!(all_alike(&records, &ours, |r| r.principal.clone()));
    assert!(all_alike(&records, &theirs, |r| r.principal.clone()));
    assert_ne!(records[0].principal, records[1].principal);
    assert_ne!(records[0].args_digest, records[1].args_digest);
    assert!(all_alike(&records, &ours, |r| r.approval_id));
    assert!(all_alike(&records, &theirs, |r| r.approval_id));
    assert_eq!(records[5].reason.as_deref(), Some("preview changed"));
}

/// A sequence of approved `add_to_counter` writes whose questions and applies interleave.
#[derive(Debug, Clone)]
struct Plan {
    legacy: bool,
    initial: i64,
    deltas: Vec<i64>,
    /// Each write's index appears twice: its first place asks, its second applies.
    order: Vec<usize>,
    /// Seconds the clock moves before each step (all of them together stay under the
    /// two-minute approval clock).
    ticks: Vec<i64>,
}

fn plan() -> impl Strategy<Value = Plan> {
    (1usize..=8).prop_flat_map(|n| {
        let places: Vec<usize> = (0..n).flat_map(|i| [i, i]).collect();
        (
            any::<bool>(),
            -5i64..=5,
            // Distinct deltas: two writes of the same delta at once are one change, and one
            // question (ten_approvals_of_the_same_increment_apply_once covers that).
            prop::sample::subsequence((-4i64..=4).collect::<Vec<_>>(), n).prop_shuffle(),
            Just(places).prop_shuffle(),
            vec(0i64..=7, 2 * n),
        )
            .prop_map(|(legacy, initial, deltas, order, ticks)| Plan {
                legacy,
                initial,
                deltas,
                order,
                ticks,
            })
    })
}

/// Where one write stands between its question and its apply.
enum Pending {
    Legacy {
        question: usize,
        call: tokio::task::JoinHandle<CallToolResult>,
    },
    Rounds(Asked),
}

/// Runs `plan` step by step, checking each step against a model of the counter: a write is
/// shown the counter as it is when asked, and applies if and only if the counter is still what
/// it was shown then.
async fn run(plan: Plan) {
    let era = if plan.legacy {
        Era::Legacy
    } else {
        Era::InputRounds
    };
    let h = CounterHarness::start(era, plan.initial).await;
    let n = plan.deltas.len();
    let mut model = plan.initial;
    let mut shown: Vec<Option<Value>> = vec![None; n];
    let mut pending: Vec<Option<Pending>> = (0..n).map(|_| None).collect();
    let mut applied: Vec<usize> = Vec::new();
    let mut stale = 0;

    for (step, &i) in plan.order.iter().enumerate() {
        h.clock.advance(time::Duration::seconds(plan.ticks[step]));
        let delta = plan.deltas[i];
        let args = json!({"delta": delta});
        let Some(waiting) = pending[i].take() else {
            // The question.
            let (prompt, waiting) = match era {
                Era::Legacy => {
                    let question = h.gated.asked().len();
                    let call = h.spawn_call("add_to_counter", args);
                    let prompt = h.gated.wait_asked(question + 1).await.swap_remove(question);
                    (prompt, Pending::Legacy { question, call })
                }
                Era::InputRounds => {
                    let asked = h.ask("add_to_counter", &args).await;
                    (asked.prompt.clone(), Pending::Rounds(asked))
                }
                other => unreachable!("no test written for {other:?}"),
            };
            let change = shown_change(&prompt);
            assert_eq!(change, json!({"before": model, "after": model + delta}));
            assert!(shown[i].replace(change).is_none(), "write {i} asked twice");
            pending[i] = Some(waiting);
            continue;
        };
        // The apply.
        let before = h.tally();
        let result = match waiting {
            Pending::Legacy { question, call } => {
                h.gated.release(question);
                call.await.unwrap()
            }
            Pending::Rounds(asked) => h.approve("add_to_counter", &args, &asked).await,
        };
        let approved = shown[i].clone().unwrap();
        let after = h.tally();
        if result.is_error == Some(true) {
            assert_eq!(text_of(&result), STALE_MESSAGE, "write {i}: {result:?}");
            assert_ne!(approved["before"], json!(model), "stale though unchanged");
            assert_eq!(
                after.counter, before.counter,
                "a stale write saved something"
            );
            assert_eq!(after.committed, before.committed);
            assert_eq!(h.audit.last().unwrap().outcome, Outcome::Stale);
            stale += 1;
        } else {
            assert_eq!(unwrapped(&result), approved, "write {i}");
            assert_eq!(
                approved["before"],
                json!(model),
                "applied on a moved counter"
            );
            model += delta;
            assert_eq!(after.counter, model);
            assert_eq!(after.committed.len(), before.committed.len() + 1);
            assert_eq!(after.committed.last().unwrap().change(), approved);
            assert_eq!(h.audit.last().unwrap().outcome, Outcome::Applied);
            applied.push(i);
        }
        assert_eq!(after.applies, before.applies + 1);
    }

    // Every write was asked and applied or refused; nothing is left waiting.
    assert!(pending.iter().all(Option::is_none));
    assert_eq!(applied.len() + stale, n);
    let tally = h.tally();
    let applied_sum: i64 = applied.iter().map(|&i| plan.deltas[i]).sum();
    assert_eq!(tally.counter, plan.initial + applied_sum);
    let committed: Vec<Value> = tally.committed.iter().map(Committed::change).collect();
    let approved: Vec<Value> = applied.iter().map(|&i| shown[i].clone().unwrap()).collect();
    assert_eq!(committed, approved);
    assert_eq!(tally.previews, n);
    let outcomes = h.audit.outcomes();
    assert_eq!(count(&outcomes, Outcome::Approved), n);
    assert_eq!(count(&outcomes, Outcome::Applied), applied.len());
    assert_eq!(count(&outcomes, Outcome::Stale), stale);
    assert_eq!(count(&outcomes, Outcome::Asked), n);
    assert_eq!(outcomes.len(), 3 * n, "{outcomes:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Any interleaving of questions and applies of approved writes to one counter: what is
    /// applied is what was shown, the counter ends at the start plus exactly the applied
    /// deltas, and every other write is stale with nothing saved.
    #[test]
    fn interleaved_approved_writes_apply_only_what_was_shown(plan in plan()) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run(plan));
    }
}

/// Asserts that the counter holds `after`, reached by one commit of `add_to_counter` from 0.
/// Returns the tally.
fn assert_one_commit_to(h: &CounterHarness, after: i64) -> Tally {
    let tally = h.tally();
    assert_eq!(tally.counter, after);
    assert_eq!(
        tally.committed,
        vec![Committed {
            tool: "add_to_counter".into(),
            before: 0,
            after,
        }]
    );
    tally
}

/// Whether the records at `indices` all have the `field` of the first of them.
fn all_alike<T: PartialEq>(
    records: &[AuditRecord],
    indices: &[usize],
    field: impl Fn(&AuditRecord) -> T,
) -> bool {
    indices
        .iter()
        .all(|&i| field(&records[i]) == field(&records[indices[0]]))
}
