//! The stored form shared by tokens and approvals: a record bound to a principal, a tool and an
//! argument digest, taken once.
//!
//! Each record lives under two keys:
//! - its own key holds the [`LiveRecord`] **only while it is live** (until `expires_at`): that is
//!   the only entry that counts towards the principal's cap, so an unused record gives its place
//!   back the moment its lifetime ends. Once taken, the key holds a `Used` tombstone until the
//!   record's retention ends (one more lifetime), so a second attempt is told "already used".
//! - its receipt key ([`receipt_key`]) holds a [`Receipt`] from the moment it is stored until its
//!   retention ends: when the own key is empty, the receipt tells an expired record (now at or
//!   after `expires_at`) from one never issued (no receipt).
//!
//! Tombstones and receipts are stored with [`Store::insert_tombstone`]: they grant nothing and do
//! not count towards the principal's cap.

use time::OffsetDateTime;

use crate::binding::Binding;
use crate::ids::{ArgsDigest, DefinitionDigest, Principal, ToolName};
use crate::record::{
    Bound, LiveRecord, Receipt, Record, StoredApproval, Tombstone, from_ns, receipt_key, to_ns,
};
use crate::store::{Store, StoreError, StoreKey};

/// Why taking a bound record failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Unknown,
    Expired,
    Used,
    OtherPrincipal,
    OtherTool,
    OtherArguments,
    Store,
}

/// A live record to [`put`].
pub(crate) struct NewRecord {
    record: LiveRecord,
}

/// A live record for `principal` calling `tool` (whose definition has the digest `definition`)
/// with arguments of `digest`, issued at `issued_at` and live until `expires_at`, retained one
/// more lifetime after that (as [`retain_until`](crate::record::retain_until) says, here in nanoseconds).
pub(crate) fn new_record(
    principal: &Principal,
    tool: &ToolName,
    definition: DefinitionDigest,
    digest: ArgsDigest,
    issued_at: OffsetDateTime,
    expires_at: OffsetDateTime,
    approval: Option<Box<StoredApproval>>,
) -> Result<NewRecord, StoreError> {
    let issued_at_ns = to_ns(issued_at)?;
    let expires_at_ns = to_ns(expires_at)?;
    let (issued, expires) = (i128::from(issued_at_ns), i128::from(expires_at_ns));
    let lifetime = expires - issued;
    // Within i64 nanoseconds (years 1677 to 2262) the sum cannot leave `time`'s range, so
    // this is `retain_until` exactly; past i64 it is out of range, as `to_ns` would say.
    let keep = if lifetime <= 0 {
        expires
    } else {
        expires + lifetime
    };
    let retain_until_ns =
        i64::try_from(keep).map_err(|_| StoreError::Corrupt("time out of range".into()))?;
    let record = LiveRecord {
        principal: principal.clone(),
        tool: tool.clone(),
        digest,
        definition,
        issued_at_ns,
        expires_at_ns,
        retain_until_ns,
        approval,
    };
    Ok(NewRecord { record })
}

/// Stores a live record until it expires (it counts towards its principal's cap for exactly its
/// lifetime), then its receipt until its retention ends. `principal` is the record's.
pub(crate) async fn put<S: Store + ?Sized>(
    store: &S,
    key: StoreKey,
    principal: &Principal,
    new: NewRecord,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    put_counted(store, key, principal, new, true, now).await
}

/// [`put`], with the live record held against its principal's cap only when `counted` (a
/// record whose place another record already holds, such as a question's round trip, is not).
pub(crate) async fn put_counted<S: Store + ?Sized>(
    store: &S,
    key: StoreKey,
    principal: &Principal,
    new: NewRecord,
    counted: bool,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let NewRecord { record } = new;
    let receipt = Bound::Receipt(Receipt {
        owner: principal.clone(),
        expires_at_ns: record.expires_at_ns,
        retain_until_ns: record.retain_until_ns,
    });
    let expires_at = from_ns(record.expires_at_ns)?;
    let keep_until = from_ns(record.retain_until_ns)?;
    let live = Record::from(Bound::Live(record));
    // The record first: a record refused (over the cap, say) leaves no receipt behind. The
    // receipt is best effort, like every tombstone: without it a late attempt is told "unknown"
    // rather than "expired", and is refused either way.
    if counted {
        store
            .insert(key.clone(), principal, live, expires_at, now)
            .await?;
    } else {
        store
            .insert_tombstone(key.clone(), principal, live, expires_at, now)
            .await?;
    }
    let _ignored = store
        .insert_tombstone(
            receipt_key(&key),
            principal,
            receipt.into(),
            keep_until,
            now,
        )
        .await;
    Ok(())
}

/// What a take found under a record's own key, and what follows from it.
enum Taken {
    /// Nothing: the receipt says why.
    Absent,
    /// Already used: its tombstone, to put back.
    Used(Tombstone),
    /// A live record, now gone: the tombstone to leave, and whether the caller may have it.
    Live {
        live: LiveRecord,
        tomb: Tombstone,
        refusal: Option<Refusal>,
    },
    /// Refused outright: expired, or not a record this crate writes there.
    Refused(Refusal),
}

/// Who asks for a record: a principal calling a tool with arguments of one digest (the
/// arguments' own digest for an approval, their token digest for a confirmation token).
#[derive(Clone, Copy)]
pub(crate) struct Caller<'a> {
    principal: &'a Principal,
    tool: &'a ToolName,
    digest: ArgsDigest,
}

impl<'a> Caller<'a> {
    /// The principal and tool of `call`, with arguments of `digest`.
    pub(crate) fn new(call: Binding<'a>, digest: ArgsDigest) -> Self {
        Self {
            principal: call.principal,
            tool: call.tool,
            digest,
        }
    }
}

/// Judges what a take of a record's own key found at `now` (Unix nanoseconds), for `caller`.
fn judge_taken(found: Option<Bound>, now: i128, caller: Caller<'_>) -> Taken {
    let live = match found {
        None => return Taken::Absent,
        Some(Bound::Used(tomb)) => return Taken::Used(tomb),
        // A receipt is never stored under a record's own key.
        Some(Bound::Receipt(_)) => return Taken::Refused(Refusal::Store),
        Some(Bound::Live(live)) => live,
    };
    // Every i64 of nanoseconds is an instant `time` can hold, so comparing nanoseconds is
    // comparing the instants.
    if now >= i128::from(live.expires_at_ns) {
        // A backend that handed back a record past its expiry: it is gone now, and its receipt
        // tells later attempts that it expired.
        return Taken::Refused(Refusal::Expired);
    }
    let tomb = Tombstone {
        owner: live.principal.clone(),
        retain_until_ns: live.retain_until_ns,
    };
    // Fail closed: a mismatched attempt uses the record up too.
    let refusal = mismatch(&live, caller);
    Taken::Live {
        live,
        tomb,
        refusal,
    }
}

/// Judges what a read (not a take) of a record's own key found, as [`judge_taken`] would;
/// `None`: nothing there, the receipt says why.
fn judge_checked(
    found: Option<Bound>,
    now: i128,
    caller: Caller<'_>,
) -> Option<Result<LiveRecord, Refusal>> {
    let live = match found? {
        Bound::Used(_) => return Some(Err(Refusal::Used)),
        Bound::Receipt(_) => return Some(Err(Refusal::Store)),
        Bound::Live(live) => live,
    };
    if now >= i128::from(live.expires_at_ns) {
        return Some(Err(Refusal::Expired));
    }
    Some(mismatch(&live, caller).map_or(Ok(live), Err))
}

/// Why a record is not there, from what its receipt key holds: no receipt, never issued (or
/// forgotten after its retention); a receipt past its expiry, expired; a receipt still within
/// its lifetime, taken by another attempt a moment ago.
fn judge_receipt(found: Result<Option<Bound>, Refusal>, now: i128) -> Refusal {
    match found {
        Ok(Some(Bound::Receipt(receipt))) if now >= i128::from(receipt.expires_at_ns) => {
            Refusal::Expired
        }
        Ok(Some(Bound::Receipt(_))) => Refusal::Used,
        Ok(None) => Refusal::Unknown,
        Ok(Some(Bound::Live(_) | Bound::Used(_))) | Err(_) => Refusal::Store,
    }
}

/// What a store handed back, as a bound record: a record of another kind, or a store error, is
/// the store's fault.
fn bound(found: Result<Option<Record>, StoreError>) -> Result<Option<Bound>, Refusal> {
    match found {
        Ok(None) => Ok(None),
        Ok(Some(record)) => record.into_bound().map(Some).ok_or(Refusal::Store),
        Err(_) => Err(Refusal::Store),
    }
}

/// Takes the record under `key` once and checks it against the caller. Whatever the outcome, a
/// record that was live is gone afterwards (a mismatched attempt burns it: fail closed), and a
/// tombstone remembers that it was used until the retention ends.
pub(crate) async fn take<S: Store + ?Sized>(
    store: &S,
    key: StoreKey,
    caller: Caller<'_>,
    now: OffsetDateTime,
) -> Result<LiveRecord, Refusal> {
    let now_ns = now.unix_timestamp_nanos();
    let found = bound(store.take(&key, now).await)?;
    match judge_taken(found, now_ns, caller) {
        Taken::Absent => Err(absent(store, &key, now).await),
        Taken::Used(tomb) => {
            let owner = tomb.owner.clone();
            remember(store, key, &owner, tomb, now).await;
            Err(Refusal::Used)
        }
        Taken::Live {
            live,
            tomb,
            refusal,
        } => {
            remember(store, key, &live.principal, tomb, now).await;
            refusal.map_or(Ok(live), Err)
        }
        Taken::Refused(refusal) => Err(refusal),
    }
}

/// Reads the record under `key` without taking it and checks it against the caller exactly as
/// [`take`] would, handing back a copy of the live record it read. Nothing changes in the store,
/// so this may only be used to refuse early (or to put the same question again): the grant
/// itself is always a [`take`].
pub(crate) async fn peek<S: Store + ?Sized>(
    store: &S,
    key: &StoreKey,
    caller: Caller<'_>,
    now: OffsetDateTime,
) -> Result<LiveRecord, Refusal> {
    let now_ns = now.unix_timestamp_nanos();
    let found = bound(store.get(key, now).await)?;
    match judge_checked(found, now_ns, caller) {
        Some(judged) => judged,
        None => Err(absent(store, key, now).await),
    }
}

/// Why the record under `key` is not there, from its receipt (see [`judge_receipt`]).
async fn absent<S: Store + ?Sized>(store: &S, key: &StoreKey, now: OffsetDateTime) -> Refusal {
    let found = bound(store.get(&receipt_key(key), now).await);
    judge_receipt(found, now.unix_timestamp_nanos())
}

/// Whether a live record was issued for someone or something else than the caller.
fn mismatch(live: &LiveRecord, caller: Caller<'_>) -> Option<Refusal> {
    if &live.principal != caller.principal {
        Some(Refusal::OtherPrincipal)
    } else if &live.tool != caller.tool {
        Some(Refusal::OtherTool)
    } else if live.digest != caller.digest {
        Some(Refusal::OtherArguments)
    } else {
        None
    }
}

/// Stores the `Used` tombstone under the record's own key. Best effort: it only sharpens the
/// reason a later attempt is refused with (already used, rather than expired or unknown); the
/// later attempt is refused either way.
async fn remember<S: Store + ?Sized>(
    store: &S,
    key: StoreKey,
    owner: &Principal,
    tomb: Tombstone,
    now: OffsetDateTime,
) {
    let Ok(until) = from_ns(tomb.retain_until_ns) else {
        return;
    };
    let tomb = Record::from(Bound::Used(tomb));
    let _ignored = store.insert_tombstone(key, owner, tomb, until, now).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Binding;
    use crate::round_trip::{store_approval, take_approval};
    use crate::test_support::tid;
    use crate::test_support::{ThroughJson, ready};
    use crate::token::{TokenRejection, check_token, issue_token, spend_token};
    use crate::{ApprovalPolicy, CapturedArgs, Clock, ManualClock, MemoryStore, PendingApproval};
    use proptest::prelude::*;
    use serde_json::json;
    use time::Duration;

    /// A receipt says "used" while the record's own lifetime lasts (another attempt took it a
    /// moment ago), "expired" from its expiry instant on; no receipt says "unknown"; anything
    /// else under a receipt key, or a store error, is the store's fault.
    #[test]
    fn a_receipt_says_used_until_the_expiry_instant_then_expired() {
        let expires_at_ns = 1_000_000_i64;
        let receipt = |expires_at_ns| {
            Ok(Some(Bound::Receipt(Receipt {
                owner: Principal::new("alice"),
                expires_at_ns,
                retain_until_ns: expires_at_ns + 1_000,
            })))
        };
        let at = i128::from(expires_at_ns);
        assert_eq!(judge_receipt(receipt(expires_at_ns), at - 1), Refusal::Used);
        assert_eq!(judge_receipt(receipt(expires_at_ns), at), Refusal::Expired);
        assert_eq!(
            judge_receipt(receipt(expires_at_ns), at + 1),
            Refusal::Expired
        );
        assert_eq!(judge_receipt(Ok(None), at), Refusal::Unknown);
        assert_eq!(judge_receipt(Err(Refusal::Used), at), Refusal::Store);
    }

    /// The two ways this crate keeps its records: as they are in a `MemoryStore`, as JSON in
    /// any other store (here a `MemoryStore` reached only through the `Store` methods).
    #[derive(Debug, Clone)]
    enum Op {
        Issue {
            principal: u8,
            args: u8,
        },
        Spend {
            which: usize,
            principal: u8,
            args: u8,
        },
        Check {
            which: usize,
            principal: u8,
            args: u8,
        },
        Forged,
        StoreApproval {
            principal: u8,
            args: u8,
        },
        TakeApproval {
            which: usize,
            principal: u8,
            args: u8,
        },
        Advance(i64),
        Purge,
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        let who = || 0..2u8;
        prop_oneof![
            3 => (who(), who()).prop_map(|(principal, args)| Op::Issue { principal, args }),
            4 => (any::<usize>(), who(), who()).prop_map(|(which, principal, args)| Op::Spend { which, principal, args }),
            2 => (any::<usize>(), who(), who()).prop_map(|(which, principal, args)| Op::Check { which, principal, args }),
            1 => Just(Op::Forged),
            2 => (who(), who()).prop_map(|(principal, args)| Op::StoreApproval { principal, args }),
            3 => (any::<usize>(), who(), who()).prop_map(|(which, principal, args)| Op::TakeApproval { which, principal, args }),
            3 => prop_oneof![Just(119), Just(120), Just(299), Just(300), Just(1), 0..400i64].prop_map(Op::Advance),
            1 => Just(Op::Purge),
        ]
    }

    /// One side of the comparison: a store, reached as it is or only as JSON, and the tokens
    /// and approvals issued on it.
    struct Side {
        memory: std::sync::Arc<MemoryStore>,
        as_json: bool,
        tokens: Vec<String>,
        approvals: Vec<String>,
    }

    impl Side {
        fn new(as_json: bool) -> Self {
            let memory = std::sync::Arc::new(MemoryStore::with_caps(3, 1000));
            Self {
                memory,
                as_json,
                tokens: Vec::new(),
                approvals: Vec::new(),
            }
        }
    }

    fn principal(i: u8) -> Principal {
        Principal::new(format!("p{i}"))
    }

    fn arguments(i: u8) -> CapturedArgs {
        CapturedArgs::capture_value(&json!({ "n": i }), &crate::canonical::ArgLimits::default())
            .unwrap()
    }

    /// What an operation gave, comparable across the two sides (ids differ; outcomes may not).
    fn run(side: &mut Side, op: &Op, now: OffsetDateTime) -> String {
        let json = ThroughJson(std::sync::Arc::clone(&side.memory));
        let store: &dyn Store = if side.as_json { &json } else { &*side.memory };
        let policy = ApprovalPolicy::default().with_per_principal_cap(3);
        let tool = ToolName::new("t");
        let pick = |list: &Vec<String>, which: usize| list.get(which % list.len().max(1)).cloned();
        match *op {
            Op::Issue {
                principal: p,
                args: a,
            } => {
                let got = ready(issue_token(
                    store,
                    Binding::new(&principal(p), &tool, &arguments(a)),
                    crate::test_support::definition(),
                    &policy,
                    now,
                ));
                match got {
                    Ok(token) => {
                        side.tokens.push(token.as_str().to_owned());
                        format!("issued, expires {}", token.expires_at())
                    }
                    Err(e) => format!("{e:?}"),
                }
            }
            Op::Spend {
                which,
                principal: p,
                args: a,
            }
            | Op::Check {
                which,
                principal: p,
                args: a,
            } => match pick(&side.tokens, which) {
                Some(t) => {
                    let (token, who, args) = (tid(&t), principal(p), arguments(a));
                    let call = Binding::new(&who, &tool, &args);
                    let definition = crate::test_support::definition();
                    let got = if matches!(op, Op::Spend { .. }) {
                        ready(spend_token(store, &token, call, definition, now))
                    } else {
                        ready(check_token(store, &token, call, definition, now))
                    };
                    format!("{got:?}")
                }
                None => "none".into(),
            },
            Op::Forged => {
                let forged = crate::ids::TokenId::random().to_string();
                let got = ready(spend_token(
                    store,
                    &tid(&forged),
                    Binding::new(&principal(0), &tool, &arguments(0)),
                    crate::test_support::definition(),
                    now,
                ));
                assert_eq!(got, Err(TokenRejection::Unknown));
                format!("{got:?}")
            }
            Op::StoreApproval {
                principal: p,
                args: a,
            } => {
                let pending = PendingApproval::new(
                    principal(p),
                    tool.clone(),
                    crate::test_support::definition(),
                    arguments(a),
                    json!({"p": p}),
                    now,
                    &policy,
                );
                match ready(store_approval(store, &pending, now)) {
                    Ok(id) => {
                        side.approvals.push(id.to_string());
                        "stored".into()
                    }
                    Err(e) => format!("{e:?}"),
                }
            }
            Op::TakeApproval {
                which,
                principal: p,
                args: a,
            } => match pick(&side.approvals, which) {
                Some(id) => match ready(take_approval(
                    store,
                    id.parse().unwrap(),
                    Binding::new(&principal(p), &tool, &arguments(a)),
                    now,
                )) {
                    Ok(pending) => {
                        format!("taken {:?} {}", pending.preview(), pending.args().digest())
                    }
                    Err(e) => format!("{e:?}"),
                },
                None => "none".into(),
            },
            Op::Advance(_) => String::new(),
            Op::Purge => format!("{:?}", ready(store.purge_expired(now))),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Every token and approval operation answers the same whether the records are kept as
        /// they are (a `MemoryStore`) or as JSON (any other store), and the store holds as many
        /// entries, as many of them counted against each principal.
        #[test]
        fn records_kept_as_they_are_answer_as_json_records_do(ops in prop::collection::vec(arb_op(), 1..80)) {
            let (mut typed, mut json) = (Side::new(false), Side::new(true));
            let clock = ManualClock::default();
            for op in &ops {
                if let Op::Advance(by) = op {
                    clock.advance(Duration::seconds(*by));
                }
                let now = clock.now();
                let a = run(&mut typed, op, now);
                let b = run(&mut json, op, now);
                prop_assert_eq!(&a, &b, "{:?}", op);
                prop_assert_eq!(typed.memory.len(), json.memory.len(), "{:?}", op);
                for p in 0..2 {
                    prop_assert_eq!(typed.memory.live_count(&principal(p), now), json.memory.live_count(&principal(p), now));
                }
            }
        }
    }

    #[test]
    fn records_written_one_way_are_read_the_other() {
        let shared = std::sync::Arc::new(MemoryStore::new());
        let json = ThroughJson(std::sync::Arc::clone(&shared));
        let policy = ApprovalPolicy::default();
        let (alice, tool, args) = (Principal::new("alice"), ToolName::new("t"), arguments(1));
        let now = ManualClock::default().now();
        let definition = crate::test_support::definition();
        let call = || Binding::new(&alice, &tool, &args);
        let issue = |store: &dyn Store| {
            ready(issue_token(store, call(), definition, &policy, now)).unwrap()
        };
        let spend = |store: &dyn Store, token: &crate::ids::ConfirmationToken| {
            ready(spend_token(
                store,
                &tid(token.as_str()),
                call(),
                definition,
                now,
            ))
        };
        // Issued as JSON, spent as it is; issued as it is, spent as JSON.
        let a = issue(&json);
        let b = issue(&*shared);
        assert_eq!(
            ready(check_token(
                &*shared,
                &tid(a.as_str()),
                call(),
                definition,
                now
            )),
            Ok(())
        );
        assert_eq!(spend(&*shared, &a), Ok(()));
        assert_eq!(spend(&json, &b), Ok(()));
        for token in [&a, &b] {
            for store in [&json as &dyn Store, &*shared] {
                assert_eq!(spend(store, token), Err(TokenRejection::AlreadySpent));
            }
        }
        // A record's JSON, as a backend that keeps text stores it.
        let c = issue(&*shared);
        let key = StoreKey::of_secret(crate::store::RecordKind::Token, c.as_str());
        let as_json = |record: Record| {
            serde_json::from_str::<serde_json::Value>(&record.to_json().unwrap()).unwrap()
        };
        let value = as_json(ready(shared.get(&key, now)).unwrap().unwrap());
        assert_eq!(value["status"], json!("live"));
        assert_eq!(value["principal"], json!("alice"));
        assert_eq!(value["digest"], json!(args.token_digest().to_string()));
        assert_eq!(
            value["definition"],
            json!(crate::test_support::definition().to_string())
        );
        let receipt = as_json(ready(shared.get(&receipt_key(&key), now)).unwrap().unwrap());
        assert_eq!(receipt["status"], json!("receipt"));
        let expires_ns = i64::try_from(c.expires_at().unix_timestamp_nanos()).unwrap();
        assert_eq!(receipt["expiresAtNs"], json!(expires_ns));
        let _ = Tombstone {
            owner: alice.clone(),
            retain_until_ns: 0,
        };
    }

    proptest! {
        /// The nanoseconds `new_record` works out are those of the instants it was given and of
        /// `retain_until`, or it refuses exactly when one of them is out of range.
        #[test]
        fn new_record_keeps_the_instants_of_retain_until(
            issued in -(1i64 << 62)..(1i64 << 62),
            lifetime in prop_oneof![Just(0i64), Just(-1), 1..1_000_000_000_000i64, any::<i64>().prop_map(|l| l >> 1)],
        ) {
            let issued_at = OffsetDateTime::UNIX_EPOCH + time::Duration::nanoseconds(issued);
            let expires_at = issued_at.saturating_add(time::Duration::nanoseconds(lifetime));
            let (p, t) = (Principal::new("p"), ToolName::new("t"));
            let digest = ArgsDigest::from_bytes([7; 32]);
            let got = new_record(&p, &t, crate::test_support::definition(), digest, issued_at, expires_at, None).map(|n| n.record);
            let want = (|| Ok::<_, StoreError>((
                to_ns(issued_at)?,
                to_ns(expires_at)?,
                to_ns(crate::record::retain_until(issued_at, expires_at))?,
            )))();
            match (got, want) {
                (Ok(r), Ok(w)) => prop_assert_eq!((r.issued_at_ns, r.expires_at_ns, r.retain_until_ns), w),
                (Err(_), Err(_)) => {}
                (got, want) => prop_assert!(false, "{:?} vs {:?}", got.map(|r| r.retain_until_ns), want),
            }
        }
    }
}
