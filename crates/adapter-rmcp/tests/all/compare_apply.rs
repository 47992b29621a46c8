//! Tools that opted in to previews but get the compare-and-apply wrong, in both protocol eras:
//! the guard never passes their word on as a success it cannot vouch for.

use mcp_write_guard_rmcp::{Outcome, STALE_MESSAGE};
use rstest_reuse::apply;
use serde_json::json;

use crate::common::{
    Era, both_eras,
    counter::{Committed, CounterHarness},
    gated::shown_change,
    text_of,
};

const NOT_COMPARED: &str = "the tool did not compare the approved preview";

/// `careless_set` applies without calling `check`: whether or not the data moved, the answer
/// is an error that claims no success, and the audit says `apply-failed`.
#[apply(both_eras)]
async fn a_tool_that_never_compares_is_not_vouched_for(era: Era) {
    for moved_to in [None, Some(2)] {
        let h = CounterHarness::start(era, 0).await;
        let counter = h.counter.clone();
        let between = async move {
            if let Some(value) = moved_to {
                counter.set_behind_the_guard(value);
            }
        };
        let (prompt, result) = h
            .write_with("careless_set", &json!({"value": 4}), between)
            .await;
        assert_eq!(shown_change(&prompt), json!({"before": 0, "after": 4}));

        // An error, without the tool's result, that says the outcome is unknown.
        assert_eq!(result.is_error, Some(true), "{result:?}");
        assert!(result.structured_content.is_none(), "{result:?}");
        let text = text_of(&result);
        assert!(
            text.contains("cannot vouch for what was saved"),
            "{moved_to:?}: {text}"
        );
        assert!(text.contains("Check the current state"), "{text}");
        assert!(
            !text.contains("\"after\""),
            "the tool's result leaked: {text}"
        );
        assert_ne!(text, STALE_MESSAGE);

        assert_eq!(
            h.audit.outcomes(),
            vec![Outcome::Asked, Outcome::Approved, Outcome::ApplyFailed]
        );
        assert_eq!(
            h.audit.last().unwrap().reason.as_deref(),
            Some(NOT_COMPARED)
        );

        // The tool did write, on whatever it found: that is what the guard cannot vouch for.
        let tally = h.tally();
        let before = moved_to.unwrap_or(0);
        assert_eq!(tally.counter, 4);
        assert_eq!(
            tally.committed,
            vec![Committed {
                tool: "careless_set".into(),
                before,
                after: 4,
            }]
        );
        assert_eq!((tally.previews, tally.applies), (1, 1));
    }
}

/// `stubborn_set` calls `check`, is told the data moved, and returns success anyway: it broke
/// the contract, so the guard claims neither success nor "nothing saved" (it may have
/// written), records `apply-failed`, and the tool's success does not reach the model.
#[apply(both_eras)]
async fn a_tool_that_ignores_a_stale_check_is_not_vouched_for(era: Era) {
    for commits in [false, true] {
        let h = CounterHarness::start(era, 0).await;
        h.counter.tally.lock().stubborn_commits = commits;
        let counter = h.counter.clone();
        let between = async move { counter.set_behind_the_guard(2) };
        let (prompt, result) = h
            .write_with("stubborn_set", &json!({"value": 4}), between)
            .await;
        assert_eq!(shown_change(&prompt), json!({"before": 0, "after": 4}));

        assert_eq!(result.is_error, Some(true), "{result:?}");
        let text = text_of(&result);
        assert!(text.contains("cannot vouch for what was saved"), "{text}");
        assert!(!text.contains("nothing was saved"), "{text}");
        assert!(result.structured_content.is_none(), "{result:?}");
        assert_eq!(
            h.audit.outcomes(),
            vec![Outcome::Asked, Outcome::Approved, Outcome::ApplyFailed]
        );
        assert_eq!(
            h.audit.last().unwrap().reason.as_deref(),
            Some("the tool returned success after a stale compare")
        );

        let tally = h.tally();
        assert_eq!((tally.previews, tally.applies), (1, 1));
        if commits {
            // A tool that commits against the check's verdict has written on a state nobody
            // approved; the guard cannot undo that, it only refuses to call it applied.
            assert_eq!(tally.counter, 4);
            assert_eq!(
                tally.committed,
                vec![Committed {
                    tool: "stubborn_set".into(),
                    before: 2,
                    after: 4,
                }]
            );
        } else {
            assert_eq!(
                tally.counter, 2,
                "the other write stands, ours is not saved"
            );
            assert!(tally.committed.is_empty());
        }
    }
}
