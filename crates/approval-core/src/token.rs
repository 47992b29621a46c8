//! The 5-minute, single-use admin confirmation token.

use std::fmt;

use time::OffsetDateTime;

use crate::approval::expiry;
use crate::args::CapturedArgs;
use crate::bound::{self, LiveRecord, Refusal};
use crate::ids::{ConfirmationToken, Principal, TokenId, ToolName};
use crate::policy::ApprovalPolicy;
use crate::store::{RecordKind, Store, StoreError, StoreKey};

/// The one text every token refusal renders to, whatever the reason, so the refusal is no oracle.
pub const TOKEN_REFUSAL_MESSAGE: &str = "The confirmation token was not accepted for this action, so nothing was changed. \
A confirmation token is valid once, for five minutes, for the same user, tool and arguments it was approved for. \
To go ahead, the user needs to approve this exact action again.";

/// Why a confirmation token was not spent. Kept for the audit trail ([`as_str`](Self::as_str));
/// shown to nobody: [`Display`](fmt::Display) and [`user_message`](Self::user_message) render the
/// same [`TOKEN_REFUSAL_MESSAGE`] for every variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
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

impl fmt::Display for TokenRejection {
    /// Renders [`TOKEN_REFUSAL_MESSAGE`], whatever the reason. Use [`TokenRejection::as_str`] for
    /// the audit trail.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(TOKEN_REFUSAL_MESSAGE)
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
/// from `now` for [`ApprovalPolicy::token_ttl`] (default 300 s).
///
/// The token is a fresh random version 4 UUID, never derived from its inputs. A token is live
/// while `now < issued_at + token_ttl`: at 299 s it spends, at exactly 300 s it does not.
/// Call this only after the user approved issuing it.
pub async fn issue_token<S: Store + ?Sized>(
    store: &S,
    principal: &Principal,
    tool: &ToolName,
    args: &CapturedArgs,
    now: OffsetDateTime,
    policy: &ApprovalPolicy,
) -> Result<ConfirmationToken, StoreError> {
    let id = TokenId::random();
    let expires_at = expiry(now, policy.token_ttl);
    let record = LiveRecord {
        principal: principal.clone(),
        tool: tool.clone(),
        digest: args.token_digest(),
        issued_at_ns: bound::to_ns(now)?,
        expires_at_ns: bound::to_ns(expires_at)?,
        retain_until_ns: bound::to_ns(bound::retain_until(now, expires_at))?,
        approval: None,
    };
    bound::put(store, token_key(id), record, now).await?;
    Ok(ConfirmationToken::new(id, expires_at))
}

/// Spends `token` for `principal` calling `tool` with `args` at `now`: `Ok(())` exactly once, for
/// a live token issued for this principal, this tool and these arguments (compared by
/// [`CapturedArgs::token_digest`]).
///
/// Atomic: of concurrent attempts, at most one succeeds. **Any attempt that finds a live token
/// uses it up**, including one with another principal, tool or arguments (fail closed: there is
/// no put-back, so there is no moment when a token is both checked and still spendable; the cost
/// is that a mistaken attempt means asking the user again). Every failure is a
/// [`TokenRejection`]; a store error is [`TokenRejection::Store`].
pub async fn spend_token<S: Store + ?Sized>(
    store: &S,
    token: &str,
    principal: &Principal,
    tool: &ToolName,
    args: &CapturedArgs,
    now: OffsetDateTime,
) -> Result<(), TokenRejection> {
    let id: TokenId = token.parse().map_err(|_| TokenRejection::Malformed)?;
    bound::take(
        store,
        token_key(id),
        principal,
        tool,
        args.token_digest(),
        now,
    )
    .await
    .map(|_| ())
    .map_err(TokenRejection::from)
}

/// Like [`spend_token`], reading the token from the `confirmationToken` member of `args`: absent
/// is [`TokenRejection::Missing`], not a string is [`TokenRejection::Malformed`].
pub async fn spend_token_from_args<S: Store + ?Sized>(
    store: &S,
    principal: &Principal,
    tool: &ToolName,
    args: &CapturedArgs,
    now: OffsetDateTime,
) -> Result<(), TokenRejection> {
    if !args.has_confirmation_token() {
        return Err(TokenRejection::Missing);
    }
    let token = args.confirmation_token().ok_or(TokenRejection::Malformed)?;
    spend_token(store, token, principal, tool, args, now).await
}

fn token_key(id: TokenId) -> StoreKey {
    StoreKey::new(RecordKind::Token, id.to_string())
}
