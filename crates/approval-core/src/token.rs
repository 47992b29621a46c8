//! The 5-minute, single-use admin confirmation token.

use std::sync::Arc;

use time::OffsetDateTime;

use crate::approval::expiry;
/// The argument that carries a confirmation token; left out of the token's argument digest.
pub use crate::args::CONFIRMATION_TOKEN_ARG;
use crate::args::CapturedArgs;
use crate::binding::Binding;
use crate::bound::{self, Caller, Refusal};
use crate::ids::{ConfirmationToken, DefinitionDigest, TokenId};
use crate::policy::ApprovalPolicy;
use crate::store::{RecordKind, Store, StoreError, StoreKey};

/// The one text every token refusal renders to, whatever the reason, so the refusal is no oracle.
pub const TOKEN_REFUSAL_MESSAGE: &str = "The confirmation token was not accepted for this action, so nothing was changed. \
A confirmation token works once, for a short time, and only for the user, tool and arguments it was approved for. \
To go ahead, the user needs to approve this exact action again.";

/// Why a confirmation token was not spent. Kept for the audit trail ([`as_str`](Self::as_str));
/// shown to nobody: [`Display`](std::fmt::Display) and [`user_message`](Self::user_message) render the
/// same [`TOKEN_REFUSAL_MESSAGE`] for every variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, derive_more::Display)]
#[display("{TOKEN_REFUSAL_MESSAGE}")]
/// Not `#[non_exhaustive]`: a new kind of denial must be a compile error wherever denials
/// are turned into outcomes.
pub enum TokenRejection {
    /// No such token: never issued, forged, or forgotten after its retention.
    Unknown,
    /// Presented at or after its expiry.
    Expired,
    /// Already spent (or burned by an earlier mismatched attempt).
    AlreadySpent,
    /// Issued to another principal. The attempt burns the token.
    OtherPrincipal,
    /// Issued for another tool. The attempt burns the token.
    OtherTool,
    /// Issued for other arguments. The attempt burns the token.
    OtherArguments,
    /// Issued while the tool had another definition (its description, schema or annotations
    /// changed since; see [`ToolDefinition`](crate::ToolDefinition)). A spend burns the token.
    ToolChanged,
    /// Not a well-formed token (or not a string).
    Malformed,
    /// The call carried no `confirmationToken` at all.
    Missing,
    /// The store failed or held a record it could not read: a denial like any other.
    Store,
}

impl TokenRejection {
    /// A stable, kebab-case name for the audit trail.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Expired => "expired",
            Self::AlreadySpent => "already-spent",
            Self::OtherPrincipal => "other-principal",
            Self::OtherTool => "other-tool",
            Self::OtherArguments => "other-arguments",
            Self::ToolChanged => "tool-changed",
            Self::Malformed => "malformed",
            Self::Missing => "missing",
            Self::Store => "store",
        }
    }

    /// The text to show: the same for every reason.
    pub fn user_message(self) -> &'static str {
        TOKEN_REFUSAL_MESSAGE
    }
}

impl From<Refusal> for TokenRejection {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Unknown => Self::Unknown,
            Refusal::Expired => Self::Expired,
            Refusal::Used => Self::AlreadySpent,
            Refusal::OtherPrincipal => Self::OtherPrincipal,
            Refusal::OtherTool => Self::OtherTool,
            Refusal::OtherArguments => Self::OtherArguments,
            Refusal::Store => Self::Store,
        }
    }
}

/// Issues a confirmation token for `principal` to call `tool` with exactly `args` (bound to
/// [`CapturedArgs::token_digest`], so a `confirmationToken` member in `args` is ignored), live
/// from `now` for [`ApprovalPolicy::token_ttl`] (default 300 s). The token is bound to the
/// tool's `definition` too, as the person saw it when they approved issuing it (see
/// [`ToolDefinition`](crate::ToolDefinition)): it spends only while the tool still has that
/// definition.
///
/// The token is a fresh random version 4 UUID, never derived from its inputs. A token is live
/// while `now < issued_at + token_ttl`: at 299 s it spends, at exactly 300 s it does not.
/// Call this only after the user approved issuing it.
pub(crate) async fn issue_token<S: Store + ?Sized>(
    store: &S,
    call: Binding<'_>,
    definition: DefinitionDigest,
    policy: &ApprovalPolicy,
    now: OffsetDateTime,
) -> Result<ConfirmationToken, StoreError> {
    let Binding {
        principal,
        tool,
        args,
    } = call;
    let id = TokenId::random();
    let text: Arc<str> = id.with_text(|text| Arc::from(text));
    let key = StoreKey::of_secret(RecordKind::Token, &text);
    let expires_at = expiry(now, policy.token_ttl);
    let record = bound::new_record(
        principal,
        tool,
        definition,
        args.token_digest(),
        now,
        expires_at,
        None,
    )?;
    bound::put(store, key, principal, record, now).await?;
    Ok(ConfirmationToken::new(id, text, expires_at))
}

/// Spends `token` for `principal` calling `tool`, whose definition now has the digest
/// `definition`, with `args` at `now`: `Ok(())` exactly once, for a live token issued for this
/// principal, this tool while it had this definition, and these arguments (compared by
/// [`CapturedArgs::token_digest`]).
///
/// Atomic: of concurrent attempts, at most one succeeds. **Any attempt that finds a live token
/// uses it up**, including one with another principal, tool, definition or arguments (fail
/// closed: there is
/// no put-back, so there is no moment when a token is both checked and still spendable; the cost
/// is that a mistaken attempt means asking the user again). Every failure is a
/// [`TokenRejection`]; a store error is [`TokenRejection::Store`].
pub(crate) async fn spend_token<S: Store + ?Sized>(
    store: &S,
    token: &TokenId,
    call: Binding<'_>,
    definition: DefinitionDigest,
    now: OffsetDateTime,
) -> Result<(), TokenRejection> {
    attempt(Attempt::Spend, store, token, call, definition, now).await
}

/// Checks `token` exactly as [`Approvals::spend_token`](crate::Approvals::spend_token) would, **without spending it**: `Ok(())` means a
/// spend at the same `now` would succeed if nothing else spends the token first.
///
/// Use it to refuse early, before asking the user about an action whose token cannot work. It
/// grants nothing: the write itself must still [`Approvals::spend_token`](crate::Approvals::spend_token), which is the only atomic step.
/// A mismatched check does not burn the token (nothing is taken).
pub(crate) async fn check_token<S: Store + ?Sized>(
    store: &S,
    token: &TokenId,
    call: Binding<'_>,
    definition: DefinitionDigest,
    now: OffsetDateTime,
) -> Result<(), TokenRejection> {
    attempt(Attempt::Check, store, token, call, definition, now).await
}

/// Whether an attempt with a token takes it ([`Approvals::spend_token`](crate::Approvals::spend_token)) or only reads it
/// ([`Approvals::check_token`](crate::Approvals::check_token)).
#[derive(Debug, Clone, Copy)]
enum Attempt {
    Spend,
    Check,
}

/// [`Approvals::spend_token`](crate::Approvals::spend_token) or [`Approvals::check_token`](crate::Approvals::check_token): the same refusals, in the same order; only a spend takes
/// the token.
async fn attempt<S: Store + ?Sized>(
    attempt: Attempt,
    store: &S,
    token: &TokenId,
    call: Binding<'_>,
    definition: DefinitionDigest,
    now: OffsetDateTime,
) -> Result<(), TokenRejection> {
    let key = token.with_text(|text| StoreKey::of_secret(RecordKind::Token, text));
    let caller = Caller::new(call, call.args.token_digest());
    let live = match attempt {
        Attempt::Spend => bound::take(store, key, caller, now).await,
        Attempt::Check => bound::peek(store, &key, caller, now).await,
    }
    .map_err(TokenRejection::from)?;
    // A token issued for another definition of the tool is refused (and, by a spend, used up).
    same_definition(live.definition, definition)
}

/// Whether a token issued while the tool had the definition `issued_for` may spend now that it
/// has `now`.
fn same_definition(
    issued_for: DefinitionDigest,
    now: DefinitionDigest,
) -> Result<(), TokenRejection> {
    if issued_for == now {
        Ok(())
    } else {
        Err(TokenRejection::ToolChanged)
    }
}

/// The token in the `confirmationToken` member of `args`, parsed: the edge where a token that
/// came over the wire becomes a [`TokenId`]. Absent is [`TokenRejection::Missing`]; not a
/// string, or not a token's one spelling, is [`TokenRejection::Malformed`].
///
/// # Errors
/// [`TokenRejection::Missing`] or [`TokenRejection::Malformed`].
pub fn token_in(args: &CapturedArgs) -> Result<TokenId, TokenRejection> {
    if !args.has_confirmation_token() {
        return Err(TokenRejection::Missing);
    }
    let token = args.confirmation_token().ok_or(TokenRejection::Malformed)?;
    parse_token(token)
}

/// A token's text as a [`TokenId`], at the edge where it came over the wire: only its one
/// spelling parses, so the id's text is the key it was issued under. Anything else is
/// [`TokenRejection::Malformed`].
///
/// # Errors
/// [`TokenRejection::Malformed`].
pub fn parse_token(text: &str) -> Result<TokenId, TokenRejection> {
    text.parse().map_err(|_| TokenRejection::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Binding;
    use crate::clock::{Clock, ManualClock};
    use crate::ids::{Principal, ToolName};
    use crate::store::MemoryStore;
    use crate::test_support::tid;
    use crate::test_support::{BrokenStore, args, ready};
    use serde_json::{Value, json};
    use time::Duration;

    struct Fixture {
        store: MemoryStore,
        clock: ManualClock,
        policy: ApprovalPolicy,
        alice: Principal,
        tool: ToolName,
        args: CapturedArgs,
    }

    fn fixture() -> Fixture {
        Fixture {
            store: MemoryStore::new(),
            clock: ManualClock::default(),
            policy: ApprovalPolicy::default(),
            alice: Principal::new("alice"),
            tool: ToolName::new("delete_order"),
            args: args(json!({"orderId": 42})),
        }
    }

    impl Fixture {
        fn issue(&self) -> ConfirmationToken {
            ready(issue_token(
                &self.store,
                Binding::new(&self.alice, &self.tool, &self.args),
                crate::test_support::definition(),
                &self.policy,
                self.clock.now(),
            ))
            .unwrap()
        }

        fn spend(&self, token: &str) -> Result<(), TokenRejection> {
            self.spend_as(token, &self.alice, &self.tool, &self.args)
        }

        fn spend_as(
            &self,
            token: &str,
            p: &Principal,
            tool: &ToolName,
            args: &CapturedArgs,
        ) -> Result<(), TokenRejection> {
            let token = parse_token(token)?;
            ready(spend_token(
                &self.store,
                &token,
                Binding::new(p, tool, args),
                crate::test_support::definition(),
                self.clock.now(),
            ))
        }
    }

    /// What the adapter does with a call's arguments: the token read and parsed at the edge
    /// ([`token_in`]), then spent or checked.
    async fn from_args<S: Store + ?Sized>(
        attempt: Attempt,
        store: &S,
        principal: &Principal,
        tool: &ToolName,
        definition: DefinitionDigest,
        args: &CapturedArgs,
        now: OffsetDateTime,
    ) -> Result<(), TokenRejection> {
        let token = token_in(args)?;
        let call = Binding::new(principal, tool, args);
        match attempt {
            Attempt::Spend => spend_token(store, &token, call, definition, now).await,
            Attempt::Check => check_token(store, &token, call, definition, now).await,
        }
    }

    #[test]
    fn a_token_spends_once() {
        let f = fixture();
        let token = f.issue();
        assert_eq!(f.store.len(), 2, "the token and its receipt");
        assert_eq!(f.store.live_count(&f.alice, f.clock.now()), 1);
        assert_eq!(token.expires_at() - f.clock.now(), Duration::seconds(300));
        assert_eq!(f.spend(token.as_str()), Ok(()));
        assert_eq!(f.spend(token.as_str()), Err(TokenRejection::AlreadySpent));
        assert_eq!(f.spend(token.as_str()), Err(TokenRejection::AlreadySpent));
        // The tombstone is forgotten one lifetime after expiry; then the token is unknown.
        f.clock.advance(Duration::seconds(600));
        assert_eq!(f.spend(token.as_str()), Err(TokenRejection::Unknown));
        assert!(f.store.is_empty());
    }

    /// The store keys a token by its text's SHA-256: nothing it holds (or a replica of it)
    /// spends the token; the live record, then its tombstone, are under the digest.
    #[test]
    fn the_store_holds_a_tokens_digest_never_its_text() {
        use sha2::{Digest, Sha256};
        let f = fixture();
        let token = f.issue();
        let now = f.clock.now();
        let digest = format!(
            "sha256-{}",
            hex::encode(Sha256::digest(token.as_str().as_bytes()))
        );
        assert!(!digest.contains(token.as_str()));
        let plain = StoreKey::new(RecordKind::Token, token.as_str());
        let hashed = StoreKey::new(RecordKind::Token, digest);
        let held = |key: &StoreKey| ready(f.store.get(key, now)).unwrap().is_some();
        assert!(!held(&plain));
        assert!(held(&hashed), "the live token");
        assert_eq!(f.spend(token.as_str()), Ok(()));
        assert!(!held(&plain));
        assert!(held(&hashed), "its tombstone");
        assert_eq!(f.spend(token.as_str()), Err(TokenRejection::AlreadySpent));
    }

    #[test]
    fn token_clock_edges_at_299_and_300_seconds() {
        let f = fixture();
        let t0 = f.clock.now();
        let early = f.issue();
        let edge = f.issue();
        let just_before = f.issue();
        let late = f.issue();
        f.clock.set(t0 + Duration::seconds(299));
        assert_eq!(f.spend(early.as_str()), Ok(()));
        f.clock
            .set(t0 + Duration::seconds(300) - Duration::nanoseconds(1));
        assert_eq!(f.spend(just_before.as_str()), Ok(()));
        f.clock.set(t0 + Duration::seconds(300));
        assert_eq!(f.spend(edge.as_str()), Err(TokenRejection::Expired));
        assert_eq!(
            f.spend(edge.as_str()),
            Err(TokenRejection::Expired),
            "still expired, not spendable"
        );
        f.clock.set(t0 + Duration::seconds(301));
        assert_eq!(f.spend(late.as_str()), Err(TokenRejection::Expired));
    }

    #[test]
    fn an_unspent_token_holds_its_cap_slot_for_exactly_its_lifetime() {
        let mut f = fixture();
        f.store = MemoryStore::with_caps(1, 100);
        let t0 = f.clock.now();
        let unspent = f.issue();
        let issue = |f: &Fixture| {
            ready(issue_token(
                &f.store,
                Binding::new(&f.alice, &f.tool, &f.args),
                crate::test_support::definition(),
                &f.policy,
                f.clock.now(),
            ))
        };
        f.clock.set(t0 + Duration::seconds(299));
        assert_eq!(
            issue(&f),
            Err(StoreError::PrincipalCapReached { cap: 1 }),
            "held at 299 s"
        );
        assert_eq!(f.store.live_count(&f.alice, f.clock.now()), 1);
        f.clock.set(t0 + Duration::seconds(300));
        assert_eq!(f.store.live_count(&f.alice, f.clock.now()), 0);
        let spent = issue(&f).expect("free at 300 s");
        // The late attempt at the unspent token is still told it expired, not that it is unknown,
        // for one more lifetime.
        assert_eq!(f.spend(unspent.as_str()), Err(TokenRejection::Expired));
        f.clock.set(t0 + Duration::seconds(599));
        assert_eq!(f.spend(unspent.as_str()), Err(TokenRejection::Expired));
        // The one issued at 300 s spends, and a late attempt at it is told it was spent.
        assert_eq!(f.spend(spent.as_str()), Ok(()));
        f.clock.set(t0 + Duration::seconds(600));
        assert_eq!(f.spend(unspent.as_str()), Err(TokenRejection::Unknown));
        f.clock.set(t0 + Duration::seconds(601));
        assert_eq!(f.spend(spent.as_str()), Err(TokenRejection::AlreadySpent));
        f.clock.set(t0 + Duration::seconds(899));
        assert_eq!(f.spend(spent.as_str()), Err(TokenRejection::AlreadySpent));
        f.clock.set(t0 + Duration::seconds(900));
        assert_eq!(f.spend(spent.as_str()), Err(TokenRejection::Unknown));
        assert!(f.store.is_empty());
    }

    #[test]
    fn token_ttl_is_configurable() {
        let mut f = fixture();
        f.policy = ApprovalPolicy::default().with_token_ttl(Duration::seconds(30));
        let a = f.issue();
        let b = f.issue();
        f.clock.advance(Duration::seconds(29));
        assert_eq!(f.spend(a.as_str()), Ok(()));
        f.clock.advance(Duration::seconds(1));
        assert_eq!(f.spend(b.as_str()), Err(TokenRejection::Expired));
    }

    #[test]
    fn each_mismatch_is_refused_and_burns_the_token() {
        let f = fixture();
        let bob = Principal::new("bob");
        let other_tool = ToolName::new("delete_customer");
        let other_args = args(json!({"orderId": 43}));
        let cases = [
            (&bob, &f.tool, &f.args, TokenRejection::OtherPrincipal),
            (&f.alice, &other_tool, &f.args, TokenRejection::OtherTool),
            (
                &f.alice,
                &f.tool,
                &other_args,
                TokenRejection::OtherArguments,
            ),
        ];
        for (p, tool, a, want) in cases {
            let token = f.issue();
            assert_eq!(f.spend_as(token.as_str(), p, tool, a), Err(want));
            // Fail closed: the mismatched attempt used the token up; the rightful call is refused.
            assert_eq!(
                f.spend(token.as_str()),
                Err(TokenRejection::AlreadySpent),
                "{want:?}"
            );
        }
        assert_eq!(f.store.len(), 6, "three tombstones and three receipts");
        assert_eq!(
            f.store.live_count(&f.alice, f.clock.now()),
            0,
            "no live token"
        );
    }

    /// A token spends only while the tool has the definition it was issued for: a check
    /// refuses another definition and burns nothing, a spend refuses it and burns the token.
    #[test]
    fn a_token_is_bound_to_the_tools_definition() {
        let f = fixture();
        let token = f.issue();
        let now = f.clock.now();
        let check = |definition| {
            ready(check_token(
                &f.store,
                &tid(token.as_str()),
                Binding::new(&f.alice, &f.tool, &f.args),
                definition,
                now,
            ))
        };
        let changed = crate::test_support::other_definition();
        assert_eq!(check(changed), Err(TokenRejection::ToolChanged));
        assert_eq!(
            check(crate::test_support::definition()),
            Ok(()),
            "not burned"
        );
        let spent = ready(spend_token(
            &f.store,
            &tid(token.as_str()),
            Binding::new(&f.alice, &f.tool, &f.args),
            changed,
            now,
        ));
        assert_eq!(spent, Err(TokenRejection::ToolChanged));
        // Fail closed: the spend with another definition used the token up.
        assert_eq!(f.spend(token.as_str()), Err(TokenRejection::AlreadySpent));
        assert_eq!(f.store.live_count(&f.alice, now), 0);
        assert_eq!(TokenRejection::ToolChanged.as_str(), "tool-changed");
        assert_eq!(
            TokenRejection::ToolChanged.to_string(),
            TokenRejection::Unknown.to_string(),
            "the same text as every other rejection"
        );
    }

    #[test]
    fn a_check_refuses_like_a_spend_but_spends_nothing() {
        let f = fixture();
        let t0 = f.clock.now();
        let token = f.issue();
        let check = |p: &Principal, tool: &ToolName, a: &CapturedArgs| {
            ready(check_token(
                &f.store,
                &tid(token.as_str()),
                Binding::new(p, tool, a),
                crate::test_support::definition(),
                f.clock.now(),
            ))
        };
        let bob = Principal::new("bob");
        let other_tool = ToolName::new("delete_customer");
        let other_args = args(json!({"orderId": 43}));
        assert_eq!(check(&f.alice, &f.tool, &f.args), Ok(()));
        assert_eq!(check(&f.alice, &f.tool, &f.args), Ok(()), "still there");
        assert_eq!(
            check(&bob, &f.tool, &f.args),
            Err(TokenRejection::OtherPrincipal)
        );
        assert_eq!(
            check(&f.alice, &other_tool, &f.args),
            Err(TokenRejection::OtherTool)
        );
        assert_eq!(
            check(&f.alice, &f.tool, &other_args),
            Err(TokenRejection::OtherArguments)
        );
        let forged = TokenId::random().to_string();
        assert_eq!(
            ready(check_token(
                &f.store,
                &tid(&forged),
                Binding::new(&f.alice, &f.tool, &f.args),
                crate::test_support::definition(),
                t0
            )),
            Err(TokenRejection::Unknown)
        );
        // Unlike a mismatched spend, a mismatched check burns nothing.
        let unspent = f.issue();
        f.clock.set(t0 + Duration::seconds(299));
        assert_eq!(check(&f.alice, &f.tool, &f.args), Ok(()));
        assert_eq!(f.spend(token.as_str()), Ok(()));
        assert_eq!(
            check(&f.alice, &f.tool, &f.args),
            Err(TokenRejection::AlreadySpent)
        );
        f.clock.set(t0 + Duration::seconds(300));
        assert_eq!(
            check(&f.alice, &f.tool, &f.args),
            Err(TokenRejection::AlreadySpent),
            "spent stays spent after the expiry"
        );
        let check_unspent = || {
            ready(check_token(
                &f.store,
                &tid(unspent.as_str()),
                Binding::new(&f.alice, &f.tool, &f.args),
                crate::test_support::definition(),
                f.clock.now(),
            ))
        };
        assert_eq!(check_unspent(), Err(TokenRejection::Expired));
        assert_eq!(check_unspent(), Err(TokenRejection::Expired));
    }

    #[test]
    fn a_check_reads_the_token_from_the_arguments() {
        let f = fixture();
        let token = f.issue();
        let now = f.clock.now();
        let with = |v: Value| args(v);
        let check = |a: &CapturedArgs| {
            ready(from_args(
                Attempt::Check,
                &f.store,
                &f.alice,
                &f.tool,
                crate::test_support::definition(),
                a,
                now,
            ))
        };
        assert_eq!(
            check(&with(json!({"orderId": 42}))),
            Err(TokenRejection::Missing)
        );
        assert_eq!(
            check(&with(json!({"orderId": 42, "confirmationToken": 7}))),
            Err(TokenRejection::Malformed)
        );
        assert_eq!(
            check(&with(json!({"orderId": 42, "confirmationToken": "x"}))),
            Err(TokenRejection::Malformed)
        );
        assert_eq!(
            check(&with(
                json!({"orderId": 42, "confirmationToken": token.as_str()})
            )),
            Ok(())
        );
    }

    #[test]
    fn the_token_argument_is_left_out_of_the_binding() {
        let f = fixture();
        let token = f.issue();
        let call = args(json!({"orderId": 42, "confirmationToken": token.as_str()}));
        assert_eq!(
            ready(from_args(
                Attempt::Spend,
                &f.store,
                &f.alice,
                &f.tool,
                crate::test_support::definition(),
                &call,
                f.clock.now()
            )),
            Ok(())
        );
        // An extra argument is other arguments.
        let token = f.issue();
        let call = args(json!({"orderId": 42, "force": true, "confirmationToken": token.as_str()}));
        assert_eq!(
            ready(from_args(
                Attempt::Spend,
                &f.store,
                &f.alice,
                &f.tool,
                crate::test_support::definition(),
                &call,
                f.clock.now()
            )),
            Err(TokenRejection::OtherArguments)
        );
    }

    #[test]
    fn unknown_malformed_and_missing_tokens_are_refused_without_touching_the_store() {
        let f = fixture();
        let live = f.issue();
        let forged = TokenId::random().to_string();
        assert_eq!(f.spend(&forged), Err(TokenRejection::Unknown));
        let mut altered = live.as_str().to_owned();
        let last = altered.pop().unwrap();
        altered.push(if last == '0' { '1' } else { '0' });
        assert_eq!(f.spend(&altered), Err(TokenRejection::Unknown));
        for bad in [
            "",
            "yes",
            "true",
            &live.as_str().to_uppercase(),
            &format!(" {}", live.as_str()),
        ] {
            assert_eq!(f.spend(bad), Err(TokenRejection::Malformed), "{bad:?}");
        }
        let none = args(json!({"orderId": 42}));
        assert_eq!(
            ready(from_args(
                Attempt::Spend,
                &f.store,
                &f.alice,
                &f.tool,
                crate::test_support::definition(),
                &none,
                f.clock.now()
            )),
            Err(TokenRejection::Missing)
        );
        let number = args(json!({"orderId": 42, "confirmationToken": 7}));
        assert_eq!(
            ready(from_args(
                Attempt::Spend,
                &f.store,
                &f.alice,
                &f.tool,
                crate::test_support::definition(),
                &number,
                f.clock.now()
            )),
            Err(TokenRejection::Malformed)
        );
        // None of that touched the real token (held with its receipt).
        assert_eq!(f.store.len(), 2);
        assert_eq!(f.store.live_count(&f.alice, f.clock.now()), 1);
        assert_eq!(f.spend(live.as_str()), Ok(()));
    }

    #[test]
    fn store_errors_are_denials() {
        let f = fixture();
        let down = BrokenStore::Unavailable;
        let now = f.clock.now();
        assert!(matches!(
            ready(issue_token(
                &down,
                Binding::new(&f.alice, &f.tool, &f.args),
                crate::test_support::definition(),
                &f.policy,
                now
            )),
            Err(StoreError::Unavailable(_))
        ));
        let token = TokenId::random().to_string();
        assert_eq!(
            ready(spend_token(
                &down,
                &tid(&token),
                Binding::new(&f.alice, &f.tool, &f.args),
                crate::test_support::definition(),
                now
            )),
            Err(TokenRejection::Store)
        );
        for garbage in [
            json!("x"),
            json!({"status": "live"}),
            json!({"status": "bogus"}),
            // A receipt where the token itself should be.
            json!({"status": "receipt", "owner": "alice", "expiresAtNs": 0, "retainUntilNs": 0}),
        ] {
            let corrupt = BrokenStore::Garbage(garbage.to_string());
            assert_eq!(
                ready(spend_token(
                    &corrupt,
                    &tid(&token),
                    Binding::new(&f.alice, &f.tool, &f.args),
                    crate::test_support::definition(),
                    now
                )),
                Err(TokenRejection::Store)
            );
        }
    }

    #[test]
    fn a_full_store_refuses_to_issue() {
        let mut f = fixture();
        f.store = MemoryStore::with_caps(2, 100);
        f.issue();
        f.issue();
        let third = ready(issue_token(
            &f.store,
            Binding::new(&f.alice, &f.tool, &f.args),
            crate::test_support::definition(),
            &f.policy,
            f.clock.now(),
        ));
        assert_eq!(third, Err(StoreError::PrincipalCapReached { cap: 2 }));
        assert_eq!(
            f.store.len(),
            4,
            "two tokens, two receipts; none for the refused one"
        );
    }

    #[test]
    fn every_rejection_renders_the_same_text() {
        use TokenRejection::*;
        let all = [
            Unknown,
            Expired,
            AlreadySpent,
            OtherPrincipal,
            OtherTool,
            OtherArguments,
            ToolChanged,
            Malformed,
            Missing,
            Store,
        ];
        let kinds: std::collections::HashSet<_> = all.iter().map(|r| r.as_str()).collect();
        assert_eq!(kinds.len(), all.len(), "each reason has its own audit name");
        for r in all {
            assert_eq!(r.to_string(), TOKEN_REFUSAL_MESSAGE);
            assert_eq!(r.user_message(), TOKEN_REFUSAL_MESSAGE);
        }
    }

    #[test]
    fn tokens_are_not_derived_from_their_inputs() {
        let f = fixture();
        let a = f.issue();
        let b = f.issue();
        assert_ne!(a.as_str(), b.as_str());
        assert!(a.as_str().parse::<TokenId>().is_ok());
    }

    #[test]
    fn concurrent_spends_have_exactly_one_winner() {
        let store = std::sync::Arc::new(MemoryStore::new());
        let policy = ApprovalPolicy::default();
        let alice = Principal::new("alice");
        let tool = ToolName::new("delete_order");
        let a = args(json!({"orderId": 42}));
        let clock = ManualClock::default();
        const THREADS: usize = 8;
        for round in 0..200 {
            // Each round a lifetime and its retention later, so earlier rounds are forgotten.
            clock.advance(Duration::seconds(600));
            let now = clock.now();
            let token = ready(issue_token(
                &*store,
                Binding::new(&alice, &tool, &a),
                crate::test_support::definition(),
                &policy,
                now,
            ))
            .unwrap();
            let barrier = std::sync::Barrier::new(THREADS);
            let results: Vec<Result<(), TokenRejection>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..THREADS)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            ready(spend_token(
                                &*store,
                                &tid(token.as_str()),
                                Binding::new(&alice, &tool, &a),
                                crate::test_support::definition(),
                                now,
                            ))
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let winners = results.iter().filter(|r| r.is_ok()).count();
            assert_eq!(winners, 1, "round {round}: {results:?}");
            // The losers are refused as spent, even in the instant between the winner's take and
            // its tombstone (the receipt says the token was issued and is not yet expired).
            assert!(
                results
                    .iter()
                    .all(|r| matches!(r, Ok(()) | Err(TokenRejection::AlreadySpent))),
                "round {round}: {results:?}"
            );
            assert_eq!(
                ready(spend_token(
                    &*store,
                    &tid(token.as_str()),
                    Binding::new(&alice, &tool, &a),
                    crate::test_support::definition(),
                    now
                )),
                Err(TokenRejection::AlreadySpent)
            );
        }
        assert_eq!(
            store.len(),
            2,
            "the last round's tombstone and receipt; earlier rounds were purged"
        );
    }

    mod model {
        //! The token layer over the memory store against a simple map model.
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeMap;

        const CAP: usize = 6;
        const TTL: i64 = 300;
        /// Records are remembered (a tombstone, a receipt) for one more lifetime after expiry.
        const FORGET: i64 = 2 * TTL;

        #[derive(Debug, Clone)]
        enum Op {
            Issue {
                principal: u8,
                tool: u8,
                args: u8,
            },
            /// Spend issued token number `which` (modulo), as issued or with one of principal,
            /// tool or arguments changed.
            Spend {
                which: usize,
                mismatch: Mismatch,
            },
            /// Check (without spending) issued token number `which`, like `Spend`.
            Check {
                which: usize,
                mismatch: Mismatch,
            },
            SpendForged,
            SpendMalformed(String),
            Advance(i64),
            Purge,
        }

        /// What an attempt changes from what the token was issued for.
        #[derive(Debug, Clone, Copy)]
        enum Mismatch {
            Nothing,
            Principal,
            Tool,
            Arguments,
            /// The tool's definition changed since the token was issued.
            Definition,
        }

        impl Mismatch {
            /// The principal, tool and arguments of the attempt at `tok`.
            fn attempt(self, tok: &ModelToken) -> (u8, u8, u8) {
                let (p, tl, a) = (tok.principal, tok.tool, tok.args);
                match self {
                    Self::Nothing | Self::Definition => (p, tl, a),
                    Self::Principal => (p ^ 1, tl, a),
                    Self::Tool => (p, tl ^ 1, a),
                    Self::Arguments => (p, tl, a ^ 1),
                }
            }

            /// What the attempt gets from a live token.
            fn at_a_live_token(self) -> Result<(), TokenRejection> {
                match self {
                    Self::Nothing => Ok(()),
                    Self::Principal => Err(TokenRejection::OtherPrincipal),
                    Self::Tool => Err(TokenRejection::OtherTool),
                    Self::Arguments => Err(TokenRejection::OtherArguments),
                    Self::Definition => Err(TokenRejection::ToolChanged),
                }
            }

            /// The tool's definition at the attempt.
            fn definition(self) -> DefinitionDigest {
                match self {
                    Self::Definition => crate::test_support::other_definition(),
                    Self::Nothing | Self::Principal | Self::Tool | Self::Arguments => {
                        crate::test_support::definition()
                    }
                }
            }
        }

        fn arb_mismatch() -> impl Strategy<Value = Mismatch> {
            prop_oneof![
                3 => Just(Mismatch::Nothing),
                1 => Just(Mismatch::Principal),
                1 => Just(Mismatch::Tool),
                1 => Just(Mismatch::Arguments),
                1 => Just(Mismatch::Definition),
            ]
        }

        fn arb_op() -> impl Strategy<Value = Op> {
            prop_oneof![
                4 => (0..2u8, 0..2u8, 0..2u8).prop_map(|(principal, tool, args)| Op::Issue { principal, tool, args }),
                6 => (any::<usize>(), arb_mismatch()).prop_map(|(which, mismatch)| Op::Spend { which, mismatch }),
                3 => (any::<usize>(), arb_mismatch()).prop_map(|(which, mismatch)| Op::Check { which, mismatch }),
                1 => Just(Op::SpendForged),
                1 => "[a-z0-9-]{0,40}".prop_map(Op::SpendMalformed),
                3 => prop_oneof![Just(1i64), Just(299), Just(300), Just(301), Just(600), 0..700i64].prop_map(Op::Advance),
                1 => Just(Op::Purge),
            ]
        }

        #[derive(Debug, Clone, Copy, PartialEq)]
        enum State {
            Live,
            Used,
            Expired,
        }

        #[derive(Debug)]
        struct ModelToken {
            text: String,
            principal: u8,
            tool: u8,
            args: u8,
            issued: i64,
            state: State,
        }

        fn principal(i: u8) -> Principal {
            Principal::new(format!("p{i}"))
        }
        fn tool(i: u8) -> ToolName {
            ToolName::new(format!("t{i}"))
        }
        fn arguments(i: u8) -> CapturedArgs {
            args(json!({ "n": i }))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            #[test]
            fn tokens_spend_exactly_once_while_live(ops in prop::collection::vec(arb_op(), 1..60)) {
                let store = MemoryStore::with_caps(CAP, 1000);
                let policy = ApprovalPolicy::default();
                let clock = ManualClock::default();
                let t0 = clock.now();
                let mut now = 0i64; // seconds since t0, the model's clock
                let mut model: BTreeMap<usize, ModelToken> = BTreeMap::new();

                for op in ops {
                    let at = t0 + Duration::seconds(now);
                    prop_assert_eq!(clock.now(), at);
                    // Entries that count against a principal's cap: tokens not yet taken (a
                    // taken token leaves a tombstone, which does not count) and still live. An
                    // unspent token gives its place back at exactly its expiry, not when it is
                    // forgotten.
                    let held = |model: &BTreeMap<usize, ModelToken>, p: u8, now: i64| {
                        model.values().filter(|t| t.principal == p && t.state == State::Live && now < t.issued + TTL).count()
                    };
                    let mut check_len = true;
                    match op {
                        Op::Issue { principal: p, tool: tl, args: a } => {
                            let got = ready(issue_token(&store, Binding::new(&principal(p), &tool(tl), &arguments(a)), crate::test_support::definition(), &policy, at));
                            if held(&model, p, now) >= CAP {
                                prop_assert_eq!(got, Err(StoreError::PrincipalCapReached { cap: CAP }));
                            } else {
                                let token = got.unwrap();
                                prop_assert_eq!(token.expires_at(), at + Duration::seconds(TTL));
                                let id = model.len();
                                model.insert(id, ModelToken { text: token.into_string(), principal: p, tool: tl, args: a, issued: now, state: State::Live });
                            }
                        }
                        Op::Spend { which, mismatch } => {
                            if model.is_empty() { continue; }
                            let id = which % model.len();
                            let tok = model.get_mut(&id).unwrap();
                            let (p, tl, a) = mismatch.attempt(tok);
                            let got = ready(spend_token(&store, &tid(&tok.text), Binding::new(&principal(p), &tool(tl), &arguments(a)), mismatch.definition(), at));
                            let want = if now >= tok.issued + FORGET {
                                Err(TokenRejection::Unknown)
                            } else {
                                match tok.state {
                                    State::Used => Err(TokenRejection::AlreadySpent),
                                    State::Expired => Err(TokenRejection::Expired),
                                    State::Live if now >= tok.issued + TTL => {
                                        tok.state = State::Expired;
                                        Err(TokenRejection::Expired)
                                    }
                                    State::Live => {
                                        tok.state = State::Used;
                                        mismatch.at_a_live_token()
                                    }
                                }
                            };
                            prop_assert_eq!(got, want, "token {} at {}s, issued {}s", id, now, model[&id].issued);
                        }
                        Op::Check { which, mismatch } => {
                            if model.is_empty() { continue; }
                            let id = which % model.len();
                            let tok = &model[&id];
                            let (p, tl, a) = mismatch.attempt(tok);
                            let got = ready(check_token(&store, &tid(&tok.text), Binding::new(&principal(p), &tool(tl), &arguments(a)), mismatch.definition(), at));
                            // What a spend would say, with no change to the model's state.
                            let want = if now >= tok.issued + FORGET {
                                Err(TokenRejection::Unknown)
                            } else {
                                match tok.state {
                                    State::Used => Err(TokenRejection::AlreadySpent),
                                    State::Expired => Err(TokenRejection::Expired),
                                    State::Live if now >= tok.issued + TTL => Err(TokenRejection::Expired),
                                    State::Live => mismatch.at_a_live_token(),
                                }
                            };
                            prop_assert_eq!(got, want, "check of token {} at {}s, issued {}s", id, now, tok.issued);
                        }
                        Op::SpendForged => {
                            let forged = TokenId::random().to_string();
                            let got = ready(spend_token(&store, &tid(&forged), Binding::new(&principal(0), &tool(0), &arguments(0)), crate::test_support::definition(), at));
                            prop_assert_eq!(got, Err(TokenRejection::Unknown));
                        }
                        Op::SpendMalformed(text) => {
                            let got = parse_token(&text).and_then(|token| {
                                ready(spend_token(&store, &token, Binding::new(&principal(0), &tool(0), &arguments(0)), crate::test_support::definition(), at))
                            });
                            prop_assert_eq!(got, Err(TokenRejection::Malformed));
                            check_len = false; // refused before the store was asked
                        }
                        Op::Advance(secs) => {
                            clock.advance(Duration::seconds(secs));
                            now += secs;
                            check_len = false;
                        }
                        Op::Purge => {
                            let removed = ready(store.purge_expired(at)).unwrap();
                            prop_assert!(removed <= 2 * model.len());
                        }
                    }
                    if check_len {
                        // The store holds exactly, for each token the model has not yet
                        // forgotten, its receipt, plus its tombstone once spent or the token
                        // itself while it is live.
                        let expected: usize = model
                            .values()
                            .filter(|t| now < t.issued + FORGET)
                            .map(|t| {
                                let own_key = t.state == State::Used
                                    || (t.state == State::Live && now < t.issued + TTL);
                                1 + usize::from(own_key)
                            })
                            .sum();
                        prop_assert_eq!(store.len(), expected);
                    }
                    for p in 0..2u8 {
                        let at = t0 + Duration::seconds(now);
                        prop_assert_eq!(store.live_count(&principal(p), at), held(&model, p, now), "principal {} at {}s", p, now);
                    }
                }
                // And nothing live in the model is missing from the store's view.
                for tok in model.values().filter(|t| t.state == State::Live && now < t.issued + TTL) {
                    let got = ready(spend_token(&store, &tid(&tok.text), Binding::new(&principal(tok.principal), &tool(tok.tool), &arguments(tok.args)), crate::test_support::definition(), t0 + Duration::seconds(now)));
                    prop_assert_eq!(got, Ok(()));
                }
            }
        }
    }
}
