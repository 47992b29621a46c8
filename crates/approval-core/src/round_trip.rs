//! Pending approvals kept in the store: the input-required round trip (`requestState`) and
//! approvals held across a question to the user.

use time::OffsetDateTime;

use crate::approval::PendingApproval;
use crate::binding::Binding;
use crate::bound::{self, Caller, Refusal};
use crate::ids::{ApprovalId, StateId};
use crate::record::StoredApproval;
use crate::store::{RecordKind, Store, StoreError, StoreKey};

/// The one text every round-trip refusal renders to, whatever the reason.
pub const ROUND_TRIP_REFUSAL_MESSAGE: &str = "This approval request is no longer valid (it expired, was already answered, \
or does not match this call), so nothing was changed. Call the tool again to ask the user anew.";

/// Why a stored approval or round-trip state was refused. Kept for the audit trail
/// ([`as_str`](Self::as_str)); [`Display`](std::fmt::Display) renders [`ROUND_TRIP_REFUSAL_MESSAGE`]
/// for every variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, derive_more::Display)]
#[display("{ROUND_TRIP_REFUSAL_MESSAGE}")]
/// Not `#[non_exhaustive]`: a new kind of denial must be a compile error wherever denials
/// are turned into outcomes.
pub enum RoundTripRejection {
    /// Not a well-formed state value: forged or altered.
    Malformed,
    /// No such state: forged, altered, or forgotten after its retention.
    Unknown,
    /// Presented at or after the end of the approval clock.
    Expired,
    /// Already used once: a replay.
    Replayed,
    /// Opened for another principal. The attempt uses the state up.
    OtherPrincipal,
    /// Opened for another tool. The attempt uses the state up.
    OtherTool,
    /// Opened for other arguments. The attempt uses the state up.
    OtherArguments,
    /// The store failed or held a record it could not read.
    Store,
}

impl RoundTripRejection {
    /// A stable, kebab-case name for the audit trail.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::Unknown => "unknown",
            Self::Expired => "expired",
            Self::Replayed => "replayed",
            Self::OtherPrincipal => "other-principal",
            Self::OtherTool => "other-tool",
            Self::OtherArguments => "other-arguments",
            Self::Store => "store",
        }
    }

    /// The text to show: the same for every reason.
    pub fn user_message(self) -> &'static str {
        ROUND_TRIP_REFUSAL_MESSAGE
    }
}

impl From<Refusal> for RoundTripRejection {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Unknown => Self::Unknown,
            Refusal::Expired => Self::Expired,
            Refusal::Used => Self::Replayed,
            Refusal::OtherPrincipal => Self::OtherPrincipal,
            Refusal::OtherTool => Self::OtherTool,
            Refusal::OtherArguments => Self::OtherArguments,
            Refusal::Store => Self::Store,
        }
    }
}

/// Stores `pending` as the state of an input-required round trip and returns the opaque
/// `requestState` value to hand to the client. The state expires with the approval clock
/// (`pending.expires_at()`) and can be taken once, by [`Approvals::take_round_trip`](crate::Approvals::take_round_trip).
pub(crate) async fn open_round_trip<S: Store + ?Sized>(
    store: &S,
    pending: &PendingApproval,
    now: OffsetDateTime,
) -> Result<StateId, StoreError> {
    open_state(store, pending, true, now).await
}

/// [`Approvals::open_round_trip`](crate::Approvals::open_round_trip) for a question opened with
/// [`Approvals::open_question`](crate::Approvals::open_question): the question's stored approval already holds the
/// principal's place in its cap for the clock, so the state does not hold a second one.
///
/// # Errors
/// The store's error.
pub(crate) async fn open_question_round_trip<S: Store + ?Sized>(
    store: &S,
    pending: &PendingApproval,
    now: OffsetDateTime,
) -> Result<StateId, StoreError> {
    open_state(store, pending, false, now).await
}

/// Stores `pending` under a fresh round-trip state, held against its principal's cap when
/// `counted`.
async fn open_state<S: Store + ?Sized>(
    store: &S,
    pending: &PendingApproval,
    counted: bool,
    now: OffsetDateTime,
) -> Result<StateId, StoreError> {
    let id = StateId::random();
    let key = id.with_text(|text| StoreKey::from_str(RecordKind::RoundTrip, text));
    put_pending(store, key, pending, counted, now).await?;
    Ok(id)
}

/// Takes the round-trip state `state` (the client's echoed `requestState`) for `principal`
/// retrying `tool` with `args` at `now`. Succeeds once, while the approval clock runs
/// (`now < expires_at`), when principal, tool and the digest of `args` all match what was opened.
/// Any attempt that finds the state uses it up (fail closed); a second attempt is
/// [`RoundTripRejection::Replayed`]. The returned approval still has to
/// [`decide`](PendingApproval::decide) the user's answer, and its
/// [`args`](PendingApproval::args) are the ones to apply.
pub(crate) async fn take_round_trip<S: Store + ?Sized>(
    store: &S,
    state: StateId,
    call: Binding<'_>,
    now: OffsetDateTime,
) -> Result<PendingApproval, RoundTripRejection> {
    let key = state.with_text(|text| StoreKey::from_str(RecordKind::RoundTrip, text));
    take_pending(store, key, call, now).await
}

/// A `requestState` as it came back from the client, parsed: the edge where it becomes a
/// [`StateId`]. Only a state's one spelling parses; anything else is
/// [`RoundTripRejection::Malformed`].
///
/// # Errors
/// [`RoundTripRejection::Malformed`].
pub fn parse_state(text: &str) -> Result<StateId, RoundTripRejection> {
    text.parse().map_err(|_| RoundTripRejection::Malformed)
}

/// Stores `pending` under its own [`ApprovalId`] (for example while a question to the user is in
/// flight on another replica), until its approval clock runs out.
pub(crate) async fn store_approval<S: Store + ?Sized>(
    store: &S,
    pending: &PendingApproval,
    now: OffsetDateTime,
) -> Result<ApprovalId, StoreError> {
    let key = pending
        .id()
        .with_text(|text| StoreKey::from_str(RecordKind::Approval, text));
    put_pending(store, key, pending, true, now).await?;
    Ok(pending.id())
}

/// Takes a stored approval once; the same checks as [`Approvals::take_round_trip`](crate::Approvals::take_round_trip).
pub(crate) async fn take_approval<S: Store + ?Sized>(
    store: &S,
    id: ApprovalId,
    call: Binding<'_>,
    now: OffsetDateTime,
) -> Result<PendingApproval, RoundTripRejection> {
    let key = id.with_text(|text| StoreKey::from_str(RecordKind::Approval, text));
    take_pending(store, key, call, now).await
}

/// A copy of the stored approval `id`, for `principal` calling `tool` with `args` (the same
/// checks as [`Approvals::take_approval`](crate::Approvals::take_approval)), to put the same question again. Grants nothing: the approval
/// stays in the store and is still taken once, by the apply.
///
/// # Errors
/// The same refusals as [`Approvals::take_approval`](crate::Approvals::take_approval); nothing is used up.
pub(crate) async fn peek_approval<S: Store + ?Sized>(
    store: &S,
    id: ApprovalId,
    call: Binding<'_>,
    now: OffsetDateTime,
) -> Result<PendingApproval, RoundTripRejection> {
    let key = id.with_text(|text| StoreKey::from_str(RecordKind::Approval, text));
    let caller = Caller::new(call, call.args.digest());
    let live = bound::peek(store, &key, caller, now).await?;
    PendingApproval::restore(live).ok_or(RoundTripRejection::Store)
}

async fn put_pending<S: Store + ?Sized>(
    store: &S,
    key: StoreKey,
    pending: &PendingApproval,
    counted: bool,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let approval = StoredApproval {
        id: pending.id().to_string(),
        arguments: pending.args().arguments().clone(),
        preview: pending.preview().clone(),
        page: pending.page().map(ToString::to_string),
    };
    let record = bound::new_record(
        pending.principal(),
        pending.tool(),
        pending.definition(),
        pending.args().digest(),
        pending.asked_at(),
        pending.expires_at(),
        Some(Box::new(approval)),
    )?;
    bound::put_counted(store, key, pending.principal(), record, counted, now).await
}

async fn take_pending<S: Store + ?Sized>(
    store: &S,
    key: StoreKey,
    call: Binding<'_>,
    now: OffsetDateTime,
) -> Result<PendingApproval, RoundTripRejection> {
    let caller = Caller::new(call, call.args.digest());
    let live = bound::take(store, key, caller, now).await?;
    PendingApproval::restore(live).ok_or(RoundTripRejection::Store)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Binding;
    use crate::answer::{AnswerAction, Decision, DenyReason};
    use crate::args::CapturedArgs;
    use crate::clock::Clock;
    use crate::ids::{Principal, ToolName};
    use crate::policy::ApprovalPolicy;
    use crate::record;
    use crate::store::MemoryStore;
    use crate::test_support::sid;
    use crate::test_support::{BrokenStore, Fixture, args, fixture, ready};
    use serde_json::json;
    use time::Duration;

    /// Every rejection.
    const ALL: [RoundTripRejection; 8] = [
        RoundTripRejection::Malformed,
        RoundTripRejection::Unknown,
        RoundTripRejection::Expired,
        RoundTripRejection::Replayed,
        RoundTripRejection::OtherPrincipal,
        RoundTripRejection::OtherTool,
        RoundTripRejection::OtherArguments,
        RoundTripRejection::Store,
    ];

    #[test]
    fn every_rejection_tells_the_user_what_happened() {
        for rejection in ALL {
            assert_eq!(rejection.user_message(), ROUND_TRIP_REFUSAL_MESSAGE);
        }
        assert!(ROUND_TRIP_REFUSAL_MESSAGE.contains("so nothing was changed"));
    }

    impl Fixture {
        fn open_state(&self) -> StateId {
            ready(open_round_trip(
                &self.store,
                &self.pending,
                self.clock.now(),
            ))
            .unwrap()
        }

        fn take(&self, state: &str) -> Result<PendingApproval, RoundTripRejection> {
            let p = &self.pending;
            self.take_as(state, p.principal(), p.tool(), p.args())
        }

        fn take_as(
            &self,
            state: &str,
            principal: &Principal,
            tool: &ToolName,
            args: &CapturedArgs,
        ) -> Result<PendingApproval, RoundTripRejection> {
            let state = parse_state(state)?;
            ready(take_round_trip(
                &self.store,
                state,
                Binding::new(principal, tool, args),
                self.clock.now(),
            ))
        }
    }

    #[test]
    fn a_round_trip_gives_back_the_approval_once() {
        let f = fixture();
        let state = f.open_state();
        assert_eq!(f.store.len(), 2, "the state and its receipt");
        assert_eq!(f.store.live_count(f.pending.principal(), f.clock.now()), 1);
        f.clock.advance(Duration::seconds(119));
        let back = f.take(&state.to_string()).unwrap();
        assert_eq!(
            back, f.pending,
            "the same principal, tool, captured arguments, preview, clock"
        );
        let yes = json!({"approve": true});
        assert_eq!(
            back.decide(&AnswerAction::Accept, Some(&yes), f.clock.now())
                .decision(),
            Decision::Approve
        );
        assert_eq!(
            f.take(&state.to_string()),
            Err(RoundTripRejection::Replayed)
        );
        assert_eq!(f.store.len(), 2, "a tombstone and a receipt");
        assert_eq!(
            f.store.live_count(f.pending.principal(), f.clock.now()),
            0,
            "nothing live"
        );
    }

    #[test]
    fn round_trip_clock_edges_at_119_and_120_seconds() {
        let f = fixture();
        let before = f.open_state();
        let at = f.open_state();
        f.clock
            .advance(Duration::seconds(120) - Duration::nanoseconds(1));
        assert!(f.take(&before.to_string()).is_ok());
        f.clock.advance(Duration::nanoseconds(1));
        assert_eq!(f.take(&at.to_string()), Err(RoundTripRejection::Expired));
        assert_eq!(f.take(&at.to_string()), Err(RoundTripRejection::Expired));
        f.clock.advance(Duration::seconds(120));
        assert_eq!(f.take(&at.to_string()), Err(RoundTripRejection::Unknown));
        assert!(f.store.is_empty());
    }

    #[test]
    fn an_unanswered_round_trip_holds_its_cap_slot_for_exactly_its_lifetime() {
        let mut f = fixture();
        f.store = MemoryStore::with_caps(1, 100);
        let t0 = f.clock.now();
        let unanswered = f.open_state();
        let p = &f.pending;
        let open_at = |s: i64| {
            let now = t0 + Duration::seconds(s);
            let pending = PendingApproval::new(
                p.principal().clone(),
                p.tool().clone(),
                crate::test_support::definition(),
                p.args().clone(),
                p.preview().clone(),
                now,
                &ApprovalPolicy::default(),
            );
            ready(open_round_trip(&f.store, &pending, now))
        };
        assert_eq!(
            open_at(119),
            Err(StoreError::PrincipalCapReached { cap: 1 }),
            "held at 119 s"
        );
        assert_eq!(
            f.store
                .live_count(p.principal(), t0 + Duration::seconds(119)),
            1
        );
        assert_eq!(
            f.store
                .live_count(p.principal(), t0 + Duration::seconds(120)),
            0
        );
        let next = open_at(120).expect("free at 120 s");
        f.clock.set(t0 + Duration::seconds(120));
        // A late retry of the unanswered one is still told it expired, for one more lifetime.
        assert_eq!(
            f.take(&unanswered.to_string()),
            Err(RoundTripRejection::Expired)
        );
        f.clock.set(t0 + Duration::seconds(239));
        assert_eq!(
            f.take(&unanswered.to_string()),
            Err(RoundTripRejection::Expired)
        );
        // The one opened at 120 s is answered; a late retry of it is told it was used.
        assert!(f.take(&next.to_string()).is_ok());
        f.clock.set(t0 + Duration::seconds(240));
        assert_eq!(
            f.take(&unanswered.to_string()),
            Err(RoundTripRejection::Unknown)
        );
        f.clock.set(t0 + Duration::seconds(241));
        assert_eq!(f.take(&next.to_string()), Err(RoundTripRejection::Replayed));
    }

    #[test]
    fn stored_approvals_hold_their_cap_slot_for_exactly_their_lifetime() {
        let mut f = fixture();
        f.store = MemoryStore::with_caps(1, 100);
        let t0 = f.clock.now();
        let p = &f.pending;
        let id = ready(store_approval(&f.store, p, t0)).unwrap();
        let later = |s: i64| {
            PendingApproval::new(
                p.principal().clone(),
                p.tool().clone(),
                crate::test_support::definition(),
                p.args().clone(),
                p.preview().clone(),
                t0 + Duration::seconds(s),
                &ApprovalPolicy::default(),
            )
        };
        let store_at = |s: i64| {
            ready(store_approval(
                &f.store,
                &later(s),
                t0 + Duration::seconds(s),
            ))
        };
        assert_eq!(
            store_at(119),
            Err(StoreError::PrincipalCapReached { cap: 1 })
        );
        let next = store_at(120).expect("free at 120 s");
        let take_at = |id: ApprovalId, s: i64| {
            ready(take_approval(
                &f.store,
                id,
                Binding::new(p.principal(), p.tool(), p.args()),
                t0 + Duration::seconds(s),
            ))
        };
        assert_eq!(take_at(id, 120), Err(RoundTripRejection::Expired));
        assert!(take_at(next, 121).is_ok());
        assert_eq!(take_at(next, 300), Err(RoundTripRejection::Replayed));
        assert_eq!(take_at(next, 360), Err(RoundTripRejection::Unknown));
    }

    #[test]
    fn forged_altered_and_malformed_states_are_refused() {
        let f = fixture();
        let state = f.open_state().to_string();
        assert_eq!(
            f.take(&StateId::random().to_string()),
            Err(RoundTripRejection::Unknown)
        );
        let mut altered = state.clone();
        let last = altered.pop().unwrap();
        altered.push(if last == 'a' { 'b' } else { 'a' });
        assert_eq!(f.take(&altered), Err(RoundTripRejection::Unknown));
        for bad in [
            "",
            "state",
            &state.to_uppercase(),
            &format!("{state}0"),
            "{}",
        ] {
            assert_eq!(f.take(bad), Err(RoundTripRejection::Malformed), "{bad:?}");
        }
        assert_eq!(
            f.store.len(),
            2,
            "the real state and its receipt are untouched"
        );
        assert!(f.take(&state).is_ok());
    }

    #[test]
    fn each_mismatch_is_refused_and_uses_the_state_up() {
        let f = fixture();
        let p = &f.pending;
        let bob = Principal::new("bob");
        let other_tool = ToolName::new("delete_sku");
        let other_args = args(json!({"sku": "A-1", "delta": 200}));
        let cases = [
            (&bob, p.tool(), p.args(), RoundTripRejection::OtherPrincipal),
            (
                p.principal(),
                &other_tool,
                p.args(),
                RoundTripRejection::OtherTool,
            ),
            (
                p.principal(),
                p.tool(),
                &other_args,
                RoundTripRejection::OtherArguments,
            ),
        ];
        for (who, tool, a, want) in cases {
            let state = f.open_state().to_string();
            assert_eq!(f.take_as(&state, who, tool, a), Err(want));
            assert_eq!(
                f.take(&state),
                Err(RoundTripRejection::Replayed),
                "{want:?}"
            );
        }
    }

    #[test]
    fn a_late_answer_to_a_taken_approval_is_expired() {
        let f = fixture();
        let state = f.open_state();
        f.clock.advance(Duration::seconds(100));
        let back = f.take(&state.to_string()).unwrap();
        f.clock.advance(Duration::seconds(20));
        let yes = json!({"approve": true});
        assert_eq!(
            back.decide(&AnswerAction::Accept, Some(&yes), f.clock.now())
                .decision(),
            Decision::Deny(DenyReason::Expired)
        );
    }

    #[test]
    fn stored_approvals_work_the_same_way() {
        let f = fixture();
        let id = ready(store_approval(&f.store, &f.pending, f.clock.now())).unwrap();
        assert_eq!(id, f.pending.id());
        let p = &f.pending;
        let take = || {
            ready(take_approval(
                &f.store,
                id,
                Binding::new(p.principal(), p.tool(), p.args()),
                f.clock.now(),
            ))
        };
        assert_eq!(take(), Ok(f.pending.clone()));
        assert_eq!(take(), Err(RoundTripRejection::Replayed));
        // An approval id is not a round-trip state.
        assert_eq!(f.take(&id.to_string()), Err(RoundTripRejection::Unknown));
    }

    #[test]
    fn store_errors_and_corrupt_records_are_denials() {
        let f = fixture();
        let p = &f.pending;
        let now = f.clock.now();
        assert!(ready(open_round_trip(&BrokenStore::Unavailable, p, now)).is_err());
        let state = StateId::random().to_string();
        let take = |store: &BrokenStore| {
            ready(take_round_trip(
                store,
                sid(&state),
                Binding::new(p.principal(), p.tool(), p.args()),
                now,
            ))
        };
        assert_eq!(
            take(&BrokenStore::Unavailable),
            Err(RoundTripRejection::Store)
        );
        assert_eq!(
            take(&BrokenStore::Garbage(json!(null).to_string())),
            Err(RoundTripRejection::Store)
        );
        // A record that claims to be live but whose arguments do not match its digest.
        let expires = record::to_ns(now + Duration::seconds(60)).unwrap();
        let tampered = json!({
            "status": "live",
            "principal": "alice",
            "tool": "adjust_stock",
            "digest": p.args().digest(),
            "definition": p.definition(),
            "issuedAtNs": record::to_ns(now).unwrap(),
            "expiresAtNs": expires,
            "retainUntilNs": expires,
            "approval": {"id": p.id().to_string(), "arguments": {"sku": "A-1", "delta": 200}, "preview": null}
        });
        assert_eq!(
            take(&BrokenStore::Garbage(tampered.to_string())),
            Err(RoundTripRejection::Store)
        );
    }

    #[test]
    fn every_rejection_renders_the_same_text() {
        crate::test_support::assert_names_distinct(&ALL, RoundTripRejection::as_str);
        for r in ALL {
            assert_eq!(r.to_string(), ROUND_TRIP_REFUSAL_MESSAGE);
        }
    }
}
