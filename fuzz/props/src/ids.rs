//! `ids`: every id parser, `requestState`, stored approvals, approval pages and confirmation
//! tokens.

use std::fmt::Display;
use std::str::FromStr;

use mcp_write_guard_core::{
    ApprovalId, ApprovalPolicy, Approvals, Binding, CapturedArgs, MemoryStore, PendingApproval,
    Principal, ToolName,
    ids::{ArgsDigest, DefinitionDigest, IdError, StateId, TokenId},
    page::{CsrfToken, PageChoice, PageId, PagePerson, PageRefusal, PageView},
    round_trip::{RoundTripRejection, parse_state},
    token::{TokenRejection, parse_token, token_in},
};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::support::{block_on, fail, t0};

/// The definition of the tool the records are for.
const DEFINITION: DefinitionDigest = DefinitionDigest::from_bytes([7; 32]);

/// Reads `data` (lossily) as a text and feeds it to every parser of an id, and, parsed at the
/// edge as a server takes it from a client, to what takes one: [`Approvals::take_round_trip`]
/// (`requestState`), [`Approvals::take_approval`], [`Approvals::show_page`] and
/// [`Approvals::answer_page`] (the page's URL), [`Approvals::check_token`] and
/// [`Approvals::spend_token`] (`confirmationToken`). It also edits genuine ids with the input: the first byte picks a
/// position, the rest overwrites the id's text there.
///
/// Properties: nothing panics; a parser accepts exactly the one spelling its docs give (a version
/// 4 UUID, hyphenated, lowercase; or 64 lowercase hex digits) and an accepted text displays as
/// itself; a refusal names the kind it was parsing; [`TokenId`], [`ApprovalId`] and [`StateId`]
/// share one form, which is never a [`PageId`](mcp_write_guard_core::page::PageId) or
/// [`ArgsDigest`]'s, and the other way round; on an empty store a malformed `requestState` is
/// `Malformed` and a well-formed one `Unknown`; a genuine round trip, stored approval or token
/// is given back only for its exact text, and a near miss never uses it up.
pub fn check_ids(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    check_parsers(&text);
    check_empty_store(&text);
    check_genuine(data);
}

/// A random (version 4) UUID, hyphenated, lowercase: the docs' one spelling, checked by hand.
pub(crate) fn is_uuid_v4_text(text: &str) -> bool {
    text.len() == 36
        && text.bytes().enumerate().all(|(at, b)| match at {
            8 | 13 | 18 | 23 => b == b'-',
            14 => b == b'4',
            19 => matches!(b, b'8' | b'9' | b'a' | b'b'),
            _ => matches!(b, b'0'..=b'9' | b'a'..=b'f'),
        })
}

/// 64 lowercase hex digits.
pub(crate) fn is_hex64_text(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `T` accepts `text` exactly when `spelled` says so, displays it as itself, and refuses with
/// `refusal`.
pub(crate) fn assert_parser<T>(text: &str, spelled: bool, refusal: &IdError, name: &str)
where
    T: FromStr<Err = IdError> + Display,
{
    match text.parse::<T>() {
        Ok(id) => {
            assert!(
                spelled,
                "ids: {name} accepted {text:?}, not its one spelling"
            );
            assert_eq!(
                id.to_string(),
                text,
                "ids: {name} accepted {text:?} but displays otherwise"
            );
        }
        Err(error) => {
            assert!(!spelled, "ids: {name} refused its own spelling {text:?}");
            assert_eq!(
                &error, refusal,
                "ids: {name} refused {text:?} naming another kind"
            );
        }
    }
}

fn check_parsers(text: &str) {
    let uuid = is_uuid_v4_text(text);
    let hex = is_hex64_text(text);
    assert!(
        !(uuid && hex),
        "ids: one text has two forms (the spec check is wrong)"
    );
    let malformed = |kind| IdError::MalformedId { kind };
    assert_parser::<TokenId>(text, uuid, &malformed("token"), "TokenId");
    assert_parser::<ApprovalId>(text, uuid, &malformed("approval"), "ApprovalId");
    assert_parser::<StateId>(text, uuid, &malformed("round-trip state"), "StateId");
    assert_parser::<mcp_write_guard_core::page::PageId>(
        text,
        hex,
        &malformed("approval page"),
        "PageId",
    );
    assert_parser::<ArgsDigest>(text, hex, &IdError::MalformedDigest, "ArgsDigest");
    // The serde forms read what the parsers read.
    let as_json = Value::String(text.to_owned());
    let approval = serde_json::from_value::<ApprovalId>(as_json.clone());
    assert_eq!(
        approval.is_ok(),
        uuid,
        "ids: ApprovalId's serde form disagrees with its parser on {text:?}"
    );
    let digest = serde_json::from_value::<ArgsDigest>(as_json.clone());
    assert_eq!(
        digest.as_ref().ok().map(ToString::to_string).as_deref(),
        hex.then_some(text),
        "ids: ArgsDigest's serde form disagrees with its parser on {text:?}"
    );
    let csrf = serde_json::from_value::<CsrfToken>(as_json);
    assert_eq!(
        csrf.as_ref().ok().map(ToString::to_string).as_deref(),
        hex.then_some(text),
        "ids: CsrfToken's serde form is not its one spelling on {text:?}"
    );
    if let Ok(csrf) = &csrf {
        assert!(
            csrf.matches(text),
            "ids: a CSRF token does not match its own text"
        );
        assert!(
            !csrf.matches(&text.to_uppercase()) || text == text.to_uppercase(),
            "ids: a CSRF token matches another spelling"
        );
    }
}

/// Principal, tool and arguments for the store's records.
struct Call {
    principal: Principal,
    tool: ToolName,
    args: CapturedArgs,
    policy: ApprovalPolicy,
}

impl Call {
    fn binding(&self) -> Binding<'_> {
        Binding::new(&self.principal, &self.tool, &self.args)
    }

    /// The `requestState` text `state`, parsed at the edge, taken for this call at `now`.
    fn take_round_trip(
        &self,
        store: &MemoryStore,
        state: &str,
        now: OffsetDateTime,
    ) -> Result<PendingApproval, RoundTripRejection> {
        let state = parse_state(state)?;
        block_on(Approvals::new(store).take_round_trip(state, self.binding(), now))
    }

    /// The approval id text `id`, parsed, taken for this call at `now`.
    fn take_approval(
        &self,
        store: &MemoryStore,
        id: &str,
        now: OffsetDateTime,
    ) -> Result<PendingApproval, RoundTripRejection> {
        let id = id
            .parse::<ApprovalId>()
            .map_err(|_| RoundTripRejection::Malformed)?;
        block_on(Approvals::new(store).take_approval(id, self.binding(), now))
    }

    /// The token text `token`, parsed at the edge, checked for this call (of [`DEFINITION`]) at
    /// `now`.
    fn check_token(
        &self,
        store: &MemoryStore,
        token: &str,
        now: OffsetDateTime,
    ) -> Result<(), TokenRejection> {
        let token = parse_token(token)?;
        block_on(Approvals::new(store).check_token(&token, self.binding(), DEFINITION, now))
    }
}

/// The page whose id came as `id` in its URL, as the page's router shows it: a malformed id is
/// unknown.
fn show_page(store: &MemoryStore, id: &str, now: OffsetDateTime) -> PageView {
    match id.parse::<PageId>() {
        Ok(id) => block_on(Approvals::new(store).show_page(&id, now)),
        Err(_) => PageView::Unknown,
    }
}

fn call() -> Call {
    let policy = ApprovalPolicy::default();
    let args = match CapturedArgs::capture_value(&json!({"id": 7}), &policy.limits) {
        Ok(args) => args,
        Err(error) => fail(format_args!("ids: fixed arguments refused: {error}")),
    };
    Call {
        principal: Principal::new("fuzz"),
        tool: ToolName::new("delete"),
        args,
        policy,
    }
}

/// Nothing a client sends finds anything in an empty store, and what it is told depends only on
/// the spelling.
fn check_empty_store(text: &str) {
    let c = call();
    let store = MemoryStore::for_policy(&c.policy);
    let now = t0();
    let expected = if is_uuid_v4_text(text) {
        RoundTripRejection::Unknown
    } else {
        RoundTripRejection::Malformed
    };
    let taken = c.take_round_trip(&store, text, now);
    assert_eq!(
        taken.err(),
        Some(expected),
        "ids: requestState {text:?} on an empty store"
    );
    let taken = c.take_approval(&store, text, now);
    assert_eq!(
        taken.err(),
        Some(expected),
        "ids: approval id {text:?} on an empty store"
    );
    assert_eq!(
        show_page(&store, text, now),
        PageView::Unknown,
        "ids: page {text:?} on an empty store"
    );
    let answered = match text.parse::<PageId>() {
        Ok(id) => block_on(Approvals::new(&store).answer_page(
            &id,
            text,
            PagePerson::NotChecked,
            PageChoice::Approve,
            now,
        )),
        Err(_) => Err(PageRefusal::Unknown),
    };
    assert_eq!(
        answered.err(),
        Some(PageRefusal::Unknown),
        "ids: an answer to page {text:?} on an empty store"
    );
    let token = if is_uuid_v4_text(text) {
        TokenRejection::Unknown
    } else {
        TokenRejection::Malformed
    };
    let checked = c.check_token(&store, text, now);
    assert_eq!(checked, Err(token), "ids: token {text:?} on an empty store");
    assert!(store.is_empty(), "ids: refusals wrote to the store");
}

/// `genuine` with `data`'s tail written over it from the position `data`'s first byte picks
/// (lossily UTF-8); `genuine` itself for an empty input.
pub(crate) fn edit(genuine: &str, data: &[u8]) -> String {
    let Some((&at, patch)) = data.split_first() else {
        return genuine.to_owned();
    };
    let mut bytes = genuine.as_bytes().to_vec();
    let at = usize::from(at) % (bytes.len() + 1);
    for (slot, &b) in bytes.iter_mut().skip(at).zip(patch) {
        *slot = b;
    }
    let written = bytes.len().saturating_sub(at).min(patch.len());
    bytes.extend(patch.iter().skip(written));
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A genuine round trip, stored approval and token, each presented as `data` edits its text.
fn check_genuine(data: &[u8]) {
    let c = call();
    let store = MemoryStore::for_policy(&c.policy);
    let now = t0();
    let pending = PendingApproval::new(
        c.principal.clone(),
        c.tool.clone(),
        DEFINITION,
        c.args.clone(),
        json!({"before": 1, "after": 0}),
        now,
        &c.policy,
    );
    let approvals = Approvals::new(&store);
    let opened = block_on(approvals.open_round_trip(&pending, now));
    let stored = block_on(approvals.store_approval(&pending, now));
    let issued = block_on(approvals.issue_token(c.binding(), DEFINITION, &c.policy, now));
    let (Ok(state), Ok(approval), Ok(token)) = (opened, stored, issued) else {
        fail(format_args!("ids: the memory store refused a fresh record"));
    };

    let state = state.to_string();
    let presented = edit(&state, data);
    let taken = c.take_round_trip(&store, &presented, now);
    assert_genuine_only("requestState", &state, &presented, taken.is_ok());
    if taken.is_err() {
        let again = c.take_round_trip(&store, &state, now);
        assert!(
            again.is_ok(),
            "ids: a near-miss requestState used up the real one"
        );
    }

    let approval = approval.to_string();
    let presented = edit(&approval, data);
    let taken = c.take_approval(&store, &presented, now);
    assert_genuine_only("approval id", &approval, &presented, taken.is_ok());

    let token_id = token.id();
    let token = token.as_str().to_owned();
    let presented = edit(&token, data);
    let checked = c.check_token(&store, &presented, now);
    assert_genuine_only("token (check)", &token, &presented, checked.is_ok());
    // The token as the call's `confirmationToken` argument, spent.
    let with_token = json!({"id": 7, "confirmationToken": presented});
    let spent = match CapturedArgs::capture_value(&with_token, &c.policy.limits) {
        Ok(args) => token_in(&args).and_then(|presented| {
            let call = Binding::new(&c.principal, &c.tool, &args);
            block_on(approvals.spend_token(&presented, call, DEFINITION, now))
        }),
        // Refused arguments never reach the token.
        Err(_) => Err(TokenRejection::Malformed),
    };
    assert_genuine_only("token (spend)", &token, &presented, spent.is_ok());
    if spent.is_err() {
        let real = block_on(approvals.spend_token(&token_id, c.binding(), DEFINITION, now));
        assert_eq!(real, Ok(()), "ids: a near-miss token used up the real one");
    }
}

/// Only the genuine text is accepted.
pub(crate) fn assert_genuine_only(what: &str, genuine: &str, presented: &str, accepted: bool) {
    assert_eq!(
        accepted,
        presented == genuine,
        "ids: {what} {presented:?} (the genuine one is {genuine:?})"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const V4: &str = "0f6b8bc9-7a1e-4c3d-9e2f-1a2b3c4d5e6f";

    #[test]
    fn holds_for_ordinary_texts() {
        check_ids(b"");
        check_ids(V4.as_bytes());
        check_ids(V4.to_uppercase().as_bytes());
        check_ids("ab".repeat(32).as_bytes());
        check_ids(b"\x05X");
    }

    #[test]
    fn the_spellings() {
        assert!(is_uuid_v4_text(V4));
        assert!(!is_uuid_v4_text(&V4.to_uppercase()));
        assert!(!is_uuid_v4_text("0f6b8bc9-7a1e-1c3d-9e2f-1a2b3c4d5e6f"));
        assert!(!is_uuid_v4_text("0f6b8bc9-7a1e-4c3d-7e2f-1a2b3c4d5e6f"));
        assert!(is_hex64_text(&"0a".repeat(32)));
        assert!(!is_hex64_text(&"0A".repeat(32)));
    }

    #[test]
    fn edits() {
        assert_eq!(edit("abcdef", b""), "abcdef");
        assert_eq!(edit("abcdef", b"\x02XY"), "abXYef");
        assert_eq!(edit("abcdef", b"\x05XYZ"), "abcdeXYZ");
        assert_eq!(edit("abc", b"\x03!"), "abc!");
    }

    #[test]
    #[should_panic(expected = "not its one spelling")]
    fn accepting_another_spelling_fails() {
        // Pretend the upper-case spelling were not allowed while the parser accepts it.
        assert_parser::<TokenId>(
            V4,
            false,
            &IdError::MalformedId { kind: "token" },
            "TokenId",
        );
    }

    #[test]
    #[should_panic(expected = "naming another kind")]
    fn refusing_as_another_kind_fails() {
        assert_parser::<StateId>(
            "x",
            false,
            &IdError::MalformedId { kind: "token" },
            "StateId",
        );
    }

    #[test]
    #[should_panic(expected = "the genuine one is")]
    fn accepting_a_near_miss_fails() {
        assert_genuine_only("token", V4, &V4.to_uppercase(), true);
    }
}
