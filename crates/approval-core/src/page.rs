//! The approval page's records: the person answers on the server's own page instead of through
//! the client (URL-mode elicitation).
//!
//! A page is opened for one [`PendingApproval`] ([`Approvals::open_page`](crate::Approvals::open_page)) and lives exactly as long as its
//! approval clock. Its id is the URL's secret: 256 random bits, single use. The page's form
//! carries a [`CsrfToken`] bound to that id. Three functions do everything else, each with the
//! store as the only shared state, so replicas behind a shared store agree:
//!
//! - [`Approvals::show_page`](crate::Approvals::show_page): what a `GET` shows (the change, or why there is nothing to answer).
//! - [`Approvals::answer_page`](crate::Approvals::answer_page): a `POST`: the CSRF token and, where people sign in, the person are checked
//!   first (a refusal changes nothing); then the page is taken from the store, atomically and
//!   once, and the answer is kept for the guard. A second answer finds the page decided.
//! - [`Approvals::page_outcome`](crate::Approvals::page_outcome): the guard reads the answer (once). The answer then goes through the same
//!   [`PendingApproval::decide`] as a form answer: only an approval, inside the clock, approves.
//!
//! [`Approvals::withdraw_page`](crate::Approvals::withdraw_page) closes a page nobody may answer any more (the client declined to open it,
//! or the guard stopped waiting).
//!
//! Under `sha256-` and the SHA-256 of the page's id (no key name holds the id itself, see
//! [`StoreKey`]), the store holds:
//!
//! | key | holds | until |
//! |---|---|---|
//! | `page:sha256-<hex>` | the open page, then (once answered or withdrawn) a closed marker | the clock's end; the marker as long again as was left when it closed (at least a second) |
//! | `page:sha256-<hex>.receipt` | that the page was opened, and when it expires | one more lifetime after the clock |
//! | `page:sha256-<hex>.answer` | the person's answer, until the guard takes it | like the closed marker |
//!
//! The marker and the receipt only make later refusals say "answered" or "expired" rather than
//! "unknown"; an answer matters only while the clock runs, and is refused after it either way.

use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::answer::{APPROVE_FIELD, AnswerAction, AnswerChannel};
use crate::approval::PendingApproval;
use crate::ids::{ApprovalId, Principal};
use crate::record::{
    AnswerRecord, Closed, PageState, Record, answer_key, from_ns, retain_until, to_ns,
};
pub use crate::record::{OpenPage, PageSubject};
pub use crate::secret::{CsrfToken, PageId};
use crate::store::{RecordKind, Store, StoreError, StoreKey};

impl PageId {
    fn key(&self) -> StoreKey {
        StoreKey::of_secret(RecordKind::Page, &self.to_string())
    }

    fn receipt_key(&self) -> StoreKey {
        crate::record::receipt_key(&self.key())
    }

    fn answer_key(&self) -> StoreKey {
        self.key().with_suffix(".answer")
    }
}

/// What a `GET` of a page finds.
#[derive(Debug, Clone, PartialEq)]
pub enum PageView {
    /// Open: show the change and the form.
    Open(Box<OpenPage>),
    /// Already answered: nothing more to do here.
    Answered,
    /// Closed before anyone answered on it (the client declined to open it, or the call gave
    /// up waiting).
    Withdrawn,
    /// The approval clock ran out.
    Expired,
    /// No such page (or forgotten after its retention, or a malformed id).
    Unknown,
    /// The store failed: nothing can be shown or answered.
    Unavailable,
}

/// Who is at the page, as far as the deployment can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PagePerson<'a> {
    /// The deployment does not sign people in on the page: whoever holds the URL answers.
    NotChecked,
    /// People sign in, and this one did.
    SignedIn(&'a Principal),
    /// People sign in, and this request is not signed in.
    NotSignedIn,
}

/// What the person chose on the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageChoice {
    /// The Approve button.
    Approve,
    /// The Decline button.
    Decline,
}

/// Why a `POST` to a page changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PageRefusal {
    /// The form's CSRF token is missing or is not this page's.
    #[error("the form's token is missing or wrong")]
    Csrf,
    /// People sign in, and this request is not signed in.
    #[error("not signed in")]
    NotSignedIn,
    /// Signed in as someone other than the person who made the call.
    #[error("signed in as another person")]
    OtherPerson,
    /// Already answered.
    #[error("already answered")]
    Answered,
    /// Closed before anyone answered on it.
    #[error("withdrawn")]
    Withdrawn,
    /// The approval clock ran out.
    #[error("expired")]
    Expired,
    /// No such page.
    #[error("unknown page")]
    Unknown,
    /// The store failed.
    #[error("approval store unavailable")]
    Unavailable,
}

impl PageRefusal {
    /// A stable, kebab-case name for the audit trail.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Csrf => "csrf",
            Self::NotSignedIn => "not-signed-in",
            Self::OtherPerson => "other-person",
            Self::Answered => "answered",
            Self::Withdrawn => "withdrawn",
            Self::Expired => "expired",
            Self::Unknown => "unknown",
            Self::Unavailable => "store",
        }
    }
}

/// A page answer that was kept for the guard.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PageAnswered {
    /// The page as it was answered.
    pub page: OpenPage,
    /// What the person chose.
    pub choice: PageChoice,
}

/// What the guard finds when it looks at a page.
#[derive(Debug, Clone, PartialEq)]
pub enum PageOutcome {
    /// The person answered; decide it with [`PendingApproval::decide`] (`action`, `content`).
    Answered {
        /// The answer's action: `accept` for Approve, `decline` for Decline.
        action: AnswerAction,
        /// `{"approve": true}` for Approve.
        content: Option<Value>,
    },
    /// Nobody has answered yet and the page is open.
    Open,
    /// Nothing will be answered: expired, withdrawn, unknown, or the store failed.
    Closed,
}

/// Opens a page for `pending` showing `subject`, until its approval clock runs out. Returns the
/// approval, now asked about on that page ([`PendingApproval::page`]): store that one (in the
/// round trip, or with `store_approval`), so the guard finds the page again.
///
/// # Errors
/// The store's error (a page that cannot be stored is a refusal), or
/// [`StoreError::Unavailable`] when the operating system gives no random bytes.
pub(crate) async fn open_page<S: Store + ?Sized>(
    store: &S,
    pending: PendingApproval,
    subject: PageSubject,
    now: OffsetDateTime,
) -> Result<PendingApproval, StoreError> {
    let id = PageId::random()?;
    let mut subject = subject;
    // As its JSON reads back: a `null` preview is no preview, in every store.
    subject.preview = subject.preview.filter(|preview| !preview.is_null());
    let page = OpenPage {
        approval: pending.id(),
        principal: pending.principal().clone(),
        subject,
        expires_at: pending.expires_at(),
        csrf: CsrfToken::random()?,
    };
    let keep_until = retain_until(pending.asked_at(), pending.expires_at());
    let receipt = PageState::Receipt {
        expires_at_ns: to_ns(pending.expires_at())?,
    };
    store
        .insert(
            id.key(),
            pending.principal(),
            Record::from(PageState::Open(Box::new(page))),
            pending.expires_at(),
            now,
        )
        .await?;
    // Best effort: without it a late visitor is told "unknown" rather than "expired".
    let _ignored = store
        .insert_tombstone(
            id.receipt_key(),
            pending.principal(),
            Record::from(receipt),
            keep_until,
            now,
        )
        .await;
    Ok(pending.on_page(id))
}

/// What the page with the id `id` (as it came in the URL) shows at `now`. Reads only.
pub(crate) async fn show_page<S: Store + ?Sized>(
    store: &S,
    id: &PageId,
    now: OffsetDateTime,
) -> PageView {
    match store.get(&id.key(), now).await {
        Ok(Some(value)) => match decode(value) {
            Some(PageState::Open(page)) => PageView::Open(page),
            Some(PageState::Closed {
                how: Closed::Answered,
            }) => PageView::Answered,
            Some(PageState::Closed {
                how: Closed::Withdrawn,
            }) => PageView::Withdrawn,
            Some(PageState::Receipt { .. } | PageState::Answer { .. }) | None => {
                PageView::Unavailable
            }
        },
        Ok(None) => absent(store, id, now).await,
        Err(_) => PageView::Unavailable,
    }
}

/// The person at `person` chose `choice` on the page `id` with the form's `csrf` token, at
/// `now`.
///
/// The CSRF token and the person are checked against the open page before anything changes: a
/// refusal there leaves the page open. Then the page is taken from the store (atomic, single
/// use: of two answers at once, one finds it gone and is [`PageRefusal::Answered`]), and the
/// answer is kept for the guard ([`Approvals::page_outcome`](crate::Approvals::page_outcome)) until the page's retention ends.
///
/// # Errors
/// A [`PageRefusal`]: nothing was recorded.
pub(crate) async fn answer_page<S: Store + ?Sized>(
    store: &S,
    id: &PageId,
    csrf: &str,
    person: PagePerson<'_>,
    choice: PageChoice,
    now: OffsetDateTime,
) -> Result<PageAnswered, PageRefusal> {
    let page = match show_page(store, id, now).await {
        PageView::Open(page) => page,
        PageView::Answered => return Err(PageRefusal::Answered),
        PageView::Withdrawn => return Err(PageRefusal::Withdrawn),
        PageView::Expired => return Err(PageRefusal::Expired),
        PageView::Unknown => return Err(PageRefusal::Unknown),
        PageView::Unavailable => return Err(PageRefusal::Unavailable),
    };
    check(&page, csrf, person)?;
    let taken = match store.take(&id.key(), now).await {
        Ok(Some(value)) => value,
        // Taken between the read and now: someone else answered, or the guard withdrew it.
        Ok(None) => return Err(PageRefusal::Answered),
        Err(_) => return Err(PageRefusal::Unavailable),
    };
    let Some(PageState::Open(page)) = decode(taken) else {
        return Err(PageRefusal::Unavailable);
    };
    // The same checks on the record actually taken (it is the one read above: ids are random).
    check(&page, csrf, person)?;
    let keep_until = keep_until(&page, now);
    let answer = PageState::Answer {
        approve: choice == PageChoice::Approve,
    };
    let stored = store
        .insert_tombstone(
            id.answer_key(),
            &page.principal,
            Record::from(answer),
            keep_until,
            now,
        )
        .await;
    if stored.is_ok() {
        keep_page_answer(
            store,
            page.approval,
            &page.principal,
            choice == PageChoice::Approve,
            keep_until,
            now,
        )
        .await;
    }
    close(store, id, &page, Closed::Answered, now).await;
    // The page is closed either way; an answer that could not be kept reaches the guard as a
    // closed page, which is a refusal.
    stored.map_err(|_| PageRefusal::Unavailable)?;
    Ok(PageAnswered {
        page: *page,
        choice,
    })
}

/// The guard looks at the page of `pending` at `now`: takes the person's answer if there is one
/// (once), else says whether the page is still open.
pub(crate) async fn page_outcome<S: Store + ?Sized>(
    store: &S,
    id: &PageId,
    now: OffsetDateTime,
) -> PageOutcome {
    match store.take(&id.answer_key(), now).await {
        Ok(Some(value)) => match decode(value) {
            Some(PageState::Answer { approve: true }) => PageOutcome::Answered {
                action: AnswerAction::Accept,
                content: Some(json!({ APPROVE_FIELD: true })),
            },
            Some(PageState::Answer { approve: false }) => PageOutcome::Answered {
                action: AnswerAction::Decline,
                content: None,
            },
            _ => PageOutcome::Closed,
        },
        Ok(None) => match show_page(store, id, now).await {
            PageView::Open(_) => PageOutcome::Open,
            _ => PageOutcome::Closed,
        },
        Err(_) => PageOutcome::Closed,
    }
}

/// Closes the page `id` if it is still open, so nobody can answer on it any more (the client
/// declined to open it, or the guard stopped waiting). An answer given before stays until the
/// guard takes it or it is forgotten, and grants nothing without the guard.
pub(crate) async fn withdraw_page<S: Store + ?Sized>(store: &S, id: &PageId, now: OffsetDateTime) {
    if let Ok(Some(value)) = store.take(&id.key(), now).await
        && let Some(PageState::Open(page)) = decode(value)
    {
        close(store, id, &page, Closed::Withdrawn, now).await;
    }
}

/// The page's answer, kept as the answer of the question about `approval` the moment the person
/// gives it (the first answer counts: an answer that came first through another channel
/// stays). Best effort: an answer not kept here is taken over from the page when the question is
/// next read.
pub(crate) async fn keep_page_answer<S: Store + ?Sized>(
    store: &S,
    approval: ApprovalId,
    principal: &Principal,
    approve: bool,
    keep_until: OffsetDateTime,
    now: OffsetDateTime,
) {
    let (action, content) = if approve {
        ("accept", Some(serde_json::json!({ APPROVE_FIELD: true })))
    } else {
        ("decline", None)
    };
    let Ok(answered_at_ns) = to_ns(now) else {
        return;
    };
    let record = AnswerRecord {
        action: action.to_owned(),
        content,
        channel: AnswerChannel::Page,
        answered_at_ns,
    };
    let _first_or_not = store
        .insert_tombstone(
            answer_key(&approval),
            principal,
            Record::Answer(record),
            keep_until,
            now,
        )
        .await;
}

fn check(page: &OpenPage, csrf: &str, person: PagePerson<'_>) -> Result<(), PageRefusal> {
    if !page.csrf.matches(csrf) {
        return Err(PageRefusal::Csrf);
    }
    match person {
        PagePerson::NotChecked => Ok(()),
        PagePerson::NotSignedIn => Err(PageRefusal::NotSignedIn),
        PagePerson::SignedIn(who) if *who == page.principal => Ok(()),
        PagePerson::SignedIn(_) => Err(PageRefusal::OtherPerson),
    }
}

/// Marks a taken page closed until its retention ends (best effort: without the marker a later
/// visit reads "expired" or "unknown", and is refused either way).
async fn close<S: Store + ?Sized>(
    store: &S,
    id: &PageId,
    page: &OpenPage,
    how: Closed,
    now: OffsetDateTime,
) {
    let marker = Record::from(PageState::Closed { how });
    let _ignored = store
        .insert_tombstone(
            id.key(),
            &page.principal,
            marker,
            keep_until(page, now),
            now,
        )
        .await;
}

/// How long a closed page's marker and answer are kept: past the clock's end by as long as was
/// left of it at `now`, and at least a second after `now`, so a marker is always stored.
fn keep_until(page: &OpenPage, now: OffsetDateTime) -> OffsetDateTime {
    let lifetime = page.expires_at - now;
    let until = page
        .expires_at
        .checked_add(lifetime.max(time::Duration::ZERO))
        .unwrap_or(page.expires_at);
    until.max(now + time::Duration::SECOND)
}

/// Why the page's own key is empty: its receipt tells expired from never opened.
async fn absent<S: Store + ?Sized>(store: &S, id: &PageId, now: OffsetDateTime) -> PageView {
    match store.get(&id.receipt_key(), now).await {
        Ok(Some(value)) => match decode(value) {
            Some(PageState::Receipt { expires_at_ns }) => match from_ns(expires_at_ns) {
                Ok(expires_at) if now >= expires_at => PageView::Expired,
                // Open by its receipt, yet gone: taken by a withdrawal whose marker was lost.
                Ok(_) => PageView::Withdrawn,
                Err(_) => PageView::Unavailable,
            },
            _ => PageView::Unavailable,
        },
        Ok(None) => PageView::Unknown,
        Err(_) => PageView::Unavailable,
    }
}

/// The page's record under a page key, if that is what it holds.
fn decode(record: Record) -> Option<PageState> {
    record.into_page()
}

#[cfg(test)]
mod tests {
    use crate::Binding;
    use serde_json::Map;

    use crate::ids::ToolName;
    use serde_json::json;

    use super::*;
    use crate::answer::DenyReason;
    use crate::approval::Verdict;
    use crate::clock::Clock;
    use crate::policy::ApprovalPolicy;
    use crate::round_trip::{open_round_trip, take_round_trip};
    use crate::test_support::{BrokenStore, Fixture, fixture, ready};

    /// A `null` preview is kept as no preview, so the memory store shows the page as a store
    /// that keeps JSON does (where `null` reads back as absent).
    #[test]
    fn a_null_preview_shows_alike_from_every_store() {
        let f = fixture();
        let json = crate::test_support::ThroughJson::default();
        let mut shown = Vec::new();
        for store in [&f.store as &dyn Store, &json] {
            let pending = PendingApproval::new(
                f.pending.principal().clone(),
                f.pending.tool().clone(),
                f.pending.definition(),
                f.pending.args().clone(),
                json!(null),
                f.clock.now(),
                &ApprovalPolicy::default(),
            );
            let subject = PageSubject::new(
                f.pending.tool().clone(),
                f.pending.args().arguments().clone(),
                Some(json!(null)),
            );
            let pending = ready(open_page(store, pending, subject, f.clock.now())).unwrap();
            let PageView::Open(page) =
                ready(show_page(store, pending.page().unwrap(), f.clock.now()))
            else {
                panic!("the page is not open");
            };
            shown.push(page.subject.preview);
        }
        assert_eq!(shown, vec![None, None]);
    }

    impl Fixture {
        fn open(&self) -> (PendingApproval, OpenPage) {
            let subject = PageSubject::new(
                self.pending.tool().clone(),
                self.pending.args().arguments().clone(),
                Some(self.pending.preview().clone()),
            );
            let pending = ready(open_page(
                &self.store,
                self.pending.clone(),
                subject,
                self.clock.now(),
            ))
            .unwrap();
            let id = pending.page().unwrap().to_string();
            let PageView::Open(page) = self.show(&id) else {
                panic!("the page is not open");
            };
            (pending, *page)
        }

        /// What the page whose id came as `id` in the URL shows: a malformed id is unknown,
        /// as the page's router says at its edge.
        fn show(&self, id: &str) -> PageView {
            match id.parse::<PageId>() {
                Ok(id) => ready(show_page(&self.store, &id, self.clock.now())),
                Err(_) => PageView::Unknown,
            }
        }

        fn answer(
            &self,
            id: &str,
            csrf: &str,
            person: PagePerson<'_>,
            choice: PageChoice,
        ) -> Result<PageAnswered, PageRefusal> {
            let Ok(id) = id.parse::<PageId>() else {
                return Err(PageRefusal::Unknown);
            };
            ready(answer_page(
                &self.store,
                &id,
                csrf,
                person,
                choice,
                self.clock.now(),
            ))
        }

        fn outcome(&self, id: &PageId) -> PageOutcome {
            ready(page_outcome(&self.store, id, self.clock.now()))
        }

        /// Answers the page `id` with `choice`, as a person the page does not check.
        fn choose(&self, id: &PageId, page: &OpenPage, choice: PageChoice) -> PageAnswered {
            self.answer(
                &id.to_string(),
                &page.csrf.to_string(),
                PagePerson::NotChecked,
                choice,
            )
            .unwrap()
        }

        /// What `pending` decides now on the answer its page `id` holds (the decision uses it up).
        fn verdict(&self, pending: PendingApproval, id: &PageId) -> Verdict {
            let PageOutcome::Answered { action, content } = self.outcome(id) else {
                panic!("no answer");
            };
            pending.decide(&action, content.as_ref(), self.clock.now())
        }
    }

    #[test]
    fn ids_and_tokens_are_256_random_bits_in_one_spelling() {
        let a = PageId::random().unwrap();
        let b = PageId::random().unwrap();
        assert_ne!(a, b);
        let text = a.to_string();
        assert_eq!(text.len(), 64);
        assert_eq!(text.parse::<PageId>().unwrap(), a);
        assert!(text.to_uppercase().parse::<PageId>().is_err());
        assert!(text[..63].parse::<PageId>().is_err());
        assert!(format!("{text}0").parse::<PageId>().is_err());
        assert!(format!("{}g", &text[..63]).parse::<PageId>().is_err());
        assert_eq!(format!("{a:?}"), "PageId(..)");
        let csrf = CsrfToken::random().unwrap();
        assert!(csrf.matches(&csrf.to_string()));
        assert!(!csrf.matches(&b.to_string()));
        assert!(!csrf.matches(""));
        assert_eq!(format!("{csrf:?}"), "CsrfToken(..)");
    }

    /// The store keys a page's records by its id's SHA-256: what it holds (or a replica of it)
    /// gives no URL to answer the page with.
    #[test]
    fn the_store_holds_a_pages_digest_never_its_id() {
        use sha2::{Digest, Sha256};
        let f = fixture();
        let (pending, page) = f.open();
        let id = pending.page().unwrap().to_string();
        let bare = hex::encode(Sha256::digest(id.as_bytes()));
        // The bare digest is spelled like a page id: a replica that keys pages by the id itself
        // would look there when handed it, and must find nothing.
        assert!(bare.parse::<PageId>().is_ok());
        let digest = format!("sha256-{bare}");
        let held = |name: String| {
            ready(
                f.store
                    .get(&StoreKey::new(RecordKind::Page, name), f.clock.now()),
            )
            .unwrap()
            .is_some()
        };
        for suffix in ["", ".receipt"] {
            assert!(!held(format!("{id}{suffix}")), "{suffix}");
            assert!(!held(format!("{bare}{suffix}")), "{suffix}");
            assert!(held(format!("{digest}{suffix}")), "{suffix}");
        }
        let answered = f.answer(
            &id,
            &page.csrf.to_string(),
            PagePerson::NotChecked,
            PageChoice::Approve,
        );
        assert!(answered.is_ok(), "{answered:?}");
        assert!(!held(format!("{id}.answer")));
        assert!(held(format!("{digest}.answer")));
    }

    #[test]
    fn an_approval_on_the_page_is_decided_like_a_form_answer() {
        let f = fixture();
        let (pending, page) = f.open();
        let id = *pending.page().unwrap();
        assert_eq!(page.approval, pending.id());
        assert_eq!(
            page.subject.preview,
            Some(json!({"before": 5, "after": 25}))
        );
        assert_eq!(f.outcome(&id), PageOutcome::Open);

        f.clock.advance(time::Duration::seconds(30));
        let answered = f.choose(&id, &page, PageChoice::Approve);
        assert_eq!(answered.choice, PageChoice::Approve);
        assert_eq!(f.show(&id.to_string()), PageView::Answered);

        assert!(matches!(f.verdict(pending, &id), Verdict::Approved(_)));
        // Taken once: the answer is not found twice.
        assert_eq!(f.outcome(&id), PageOutcome::Closed);
    }

    #[test]
    fn a_decline_on_the_page_is_a_decline() {
        let f = fixture();
        let (pending, page) = f.open();
        let id = *pending.page().unwrap();
        f.choose(&id, &page, PageChoice::Decline);
        assert_eq!(
            f.verdict(pending, &id),
            Verdict::Denied(DenyReason::Declined)
        );
    }

    #[test]
    fn a_page_answers_once() {
        let f = fixture();
        let (pending, page) = f.open();
        let id = pending.page().unwrap().to_string();
        let csrf = page.csrf.to_string();
        f.answer(&id, &csrf, PagePerson::NotChecked, PageChoice::Decline)
            .unwrap();
        assert_eq!(
            f.answer(&id, &csrf, PagePerson::NotChecked, PageChoice::Approve),
            Err(PageRefusal::Answered)
        );
        let PageOutcome::Answered { action, .. } = f.outcome(pending.page().unwrap()) else {
            panic!("the first answer was lost");
        };
        assert_eq!(action, AnswerAction::Decline, "the first answer stands");
    }

    #[test]
    fn a_wrong_or_missing_csrf_token_changes_nothing() {
        let f = fixture();
        let (pending, page) = f.open();
        let id = pending.page().unwrap().to_string();
        let other = CsrfToken::random().unwrap().to_string();
        for csrf in [
            "",
            "x",
            other.as_str(),
            &page.csrf.to_string().to_uppercase(),
        ] {
            assert_eq!(
                f.answer(&id, csrf, PagePerson::NotChecked, PageChoice::Approve),
                Err(PageRefusal::Csrf),
                "{csrf:?}"
            );
        }
        assert_eq!(f.show(&id), PageView::Open(Box::new(page)));
        assert_eq!(f.outcome(pending.page().unwrap()), PageOutcome::Open);
    }

    #[test]
    fn where_people_sign_in_only_the_caller_answers() {
        let f = fixture();
        let (pending, page) = f.open();
        let id = pending.page().unwrap().to_string();
        let csrf = page.csrf.to_string();
        let mallory = Principal::new("mallory");
        assert_eq!(
            f.answer(
                &id,
                &csrf,
                PagePerson::SignedIn(&mallory),
                PageChoice::Approve
            ),
            Err(PageRefusal::OtherPerson)
        );
        assert_eq!(
            f.answer(&id, &csrf, PagePerson::NotSignedIn, PageChoice::Approve),
            Err(PageRefusal::NotSignedIn)
        );
        assert_eq!(f.outcome(pending.page().unwrap()), PageOutcome::Open);
        let alice = Principal::new("alice");
        f.answer(
            &id,
            &csrf,
            PagePerson::SignedIn(&alice),
            PageChoice::Approve,
        )
        .unwrap();
    }

    #[test]
    fn an_expired_page_says_so_and_takes_no_answer() {
        let f = fixture();
        let (pending, page) = f.open();
        let id = pending.page().unwrap().to_string();
        f.clock.advance(time::Duration::seconds(120));
        assert_eq!(f.show(&id), PageView::Expired);
        assert_eq!(
            f.answer(
                &id,
                &page.csrf.to_string(),
                PagePerson::NotChecked,
                PageChoice::Approve
            ),
            Err(PageRefusal::Expired)
        );
        assert_eq!(f.outcome(pending.page().unwrap()), PageOutcome::Closed);
    }

    #[test]
    fn an_answer_just_before_the_end_is_expired_when_the_guard_reads_it_after() {
        let f = fixture();
        let (pending, page) = f.open();
        let id = *pending.page().unwrap();
        f.clock.advance(time::Duration::milliseconds(119_999));
        f.choose(&id, &page, PageChoice::Approve);
        f.clock.advance(time::Duration::milliseconds(1));
        assert_eq!(
            f.verdict(pending, &id),
            Verdict::Denied(DenyReason::Expired)
        );
    }

    #[test]
    fn refusal_names_are_pinned() {
        use PageRefusal::*;
        for (refusal, name) in [
            (Csrf, "csrf"),
            (NotSignedIn, "not-signed-in"),
            (OtherPerson, "other-person"),
            (Answered, "answered"),
            (Withdrawn, "withdrawn"),
            (Expired, "expired"),
            (Unknown, "unknown"),
            (Unavailable, "store"),
        ] {
            assert_eq!(refusal.as_str(), name);
        }
    }

    #[test]
    fn a_closed_page_is_kept_past_its_clock_by_what_was_left_and_at_least_a_second() {
        let f = fixture();
        let (_, page) = f.open();
        let now = f.clock.now();
        let left = page.expires_at - now;
        assert_eq!(left, time::Duration::seconds(120));
        assert_eq!(keep_until(&page, now), page.expires_at + left);
        // Closed at or after the clock's end: kept a second, so the marker is still stored.
        for late in [
            page.expires_at,
            page.expires_at + time::Duration::seconds(30),
        ] {
            assert_eq!(keep_until(&page, late), late + time::Duration::SECOND);
        }
    }

    #[test]
    fn a_page_gone_before_its_clock_ran_out_reads_withdrawn_then_expired() {
        let f = fixture();
        let (pending, _) = f.open();
        let id = *pending.page().unwrap();
        // Taken without the marker a withdrawal writes, as when writing the marker failed.
        assert!(
            ready(f.store.take(&id.key(), f.clock.now()))
                .unwrap()
                .is_some()
        );
        assert_eq!(f.show(&id.to_string()), PageView::Withdrawn);
        f.clock.advance(time::Duration::milliseconds(119_999));
        assert_eq!(f.show(&id.to_string()), PageView::Withdrawn);
        f.clock.advance(time::Duration::milliseconds(1));
        assert_eq!(f.show(&id.to_string()), PageView::Expired);
    }

    #[test]
    fn a_withdrawn_page_takes_no_answer() {
        let f = fixture();
        let (pending, page) = f.open();
        let id = *pending.page().unwrap();
        ready(withdraw_page(&f.store, &id, f.clock.now()));
        assert_eq!(f.show(&id.to_string()), PageView::Withdrawn);
        assert_eq!(
            f.answer(
                &id.to_string(),
                &page.csrf.to_string(),
                PagePerson::NotChecked,
                PageChoice::Approve
            ),
            Err(PageRefusal::Withdrawn)
        );
        assert_eq!(f.outcome(&id), PageOutcome::Closed);
    }

    #[test]
    fn unknown_and_malformed_ids_show_nothing() {
        let f = fixture();
        let _ = f.open();
        let unknown = PageId::random().unwrap().to_string();
        assert_eq!(f.show(&unknown), PageView::Unknown);
        assert_eq!(f.show("../../etc/passwd"), PageView::Unknown);
        assert_eq!(
            f.answer(&unknown, "", PagePerson::NotChecked, PageChoice::Approve),
            Err(PageRefusal::Unknown)
        );
    }

    #[test]
    fn a_store_that_is_down_shows_and_takes_nothing() {
        let f = fixture();
        let (pending, page) = f.open();
        let id = pending.page().unwrap();
        let broken = BrokenStore::Unavailable;
        assert_eq!(
            ready(show_page(&broken, id, f.clock.now())),
            PageView::Unavailable
        );
        assert_eq!(
            ready(answer_page(
                &broken,
                id,
                &page.csrf.to_string(),
                PagePerson::NotChecked,
                PageChoice::Approve,
                f.clock.now()
            )),
            Err(PageRefusal::Unavailable)
        );
        assert_eq!(
            ready(page_outcome(&broken, id, f.clock.now())),
            PageOutcome::Closed
        );
        assert!(
            ready(open_page(
                &broken,
                f.pending.clone(),
                PageSubject::new(ToolName::new("t"), Map::new(), None),
                f.clock.now()
            ))
            .is_err()
        );
    }

    proptest::proptest! {
        /// Whatever a POST carries that is not the page's own token, and whoever sends it, the
        /// page stays open and nothing is recorded for the guard.
        #[test]
        fn only_the_pages_own_token_answers(
            csrf in "[0-9a-fA-F]{64}|\\PC{0,80}",
            approve in proptest::bool::ANY,
        ) {
            let f = fixture();
            let (pending, page) = f.open();
            proptest::prop_assume!(csrf != page.csrf.to_string());
            let id = pending.page().unwrap();
            let choice = if approve { PageChoice::Approve } else { PageChoice::Decline };
            proptest::prop_assert_eq!(
                f.answer(&id.to_string(), &csrf, PagePerson::NotChecked, choice),
                Err(PageRefusal::Csrf)
            );
            proptest::prop_assert_eq!(f.outcome(id), PageOutcome::Open);
        }

        /// A page is found only by its own id, spelled as it was issued.
        #[test]
        fn only_the_exact_id_finds_a_page(other in "[0-9a-fA-F]{64}|\\PC{0,80}") {
            let f = fixture();
            let (pending, _) = f.open();
            let id = pending.page().unwrap().to_string();
            proptest::prop_assume!(other != id);
            proptest::prop_assert_eq!(f.show(&other), PageView::Unknown);
        }
    }

    /// One step of a page's life, for the model below.
    #[derive(Debug, Clone)]
    enum Step {
        Answer { choice: PageChoice, own_token: bool },
        Withdraw,
        Look,
        Advance(i64),
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        let choice = prop_oneof![Just(PageChoice::Approve), Just(PageChoice::Decline)];
        prop_oneof![
            (choice, any::<bool>())
                .prop_map(|(choice, own_token)| Step::Answer { choice, own_token }),
            Just(Step::Withdraw),
            Just(Step::Look),
            (0_i64..70_000).prop_map(Step::Advance),
        ]
    }

    proptest::proptest! {
        /// Any interleaving of answers (with and without the page's token), withdrawals, the
        /// guard's looks and the clock: an answer is taken only while the page is open and
        /// inside the clock, only the first one counts, the guard reads it at most once, and
        /// only a taken Approve read inside the clock approves, once.
        #[test]
        fn only_the_first_answer_on_an_open_page_inside_the_clock_approves(
            steps in proptest::collection::vec(step(), 1..24),
        ) {
            let f = fixture();
            let (pending, page) = f.open();
            let id = *pending.page().unwrap();
            let csrf = page.csrf.to_string();
            let wrong = CsrfToken::random().unwrap().to_string();
            let (mut open, mut kept, mut approvals) = (true, None, 0);
            for step in steps {
                let live = f.clock.now() < page.expires_at;
                match step {
                    Step::Answer { choice, own_token } => {
                        let token = if own_token { &csrf } else { &wrong };
                        let taken =
                            f.answer(&id.to_string(), token, PagePerson::NotChecked, choice);
                        proptest::prop_assert_eq!(taken.is_ok(), open && live && own_token);
                        if taken.is_ok() {
                            open = false;
                            kept = Some(choice);
                        }
                    }
                    Step::Withdraw => {
                        ready(withdraw_page(&f.store, &id, f.clock.now()));
                        open = false;
                    }
                    Step::Look => match f.outcome(&id) {
                        PageOutcome::Answered { action, content } => {
                            let choice = kept.take();
                            proptest::prop_assert!(choice.is_some(), "an answer from nowhere");
                            let verdict = pending.clone().decide(
                                &action,
                                content.as_ref(),
                                f.clock.now(),
                            );
                            if matches!(verdict, Verdict::Approved(_)) {
                                proptest::prop_assert_eq!(choice, Some(PageChoice::Approve));
                                proptest::prop_assert!(live);
                                approvals += 1;
                            }
                        }
                        PageOutcome::Open => {
                            proptest::prop_assert!(open && live && kept.is_none());
                        }
                        PageOutcome::Closed => {
                            proptest::prop_assert!(!(open && live));
                            // An answer not read inside the clock is never read as an approval.
                            if !live {
                                kept = None;
                            }
                            proptest::prop_assert!(kept.is_none(), "a kept answer was lost");
                        }
                    },
                    Step::Advance(ms) => f.clock.advance(time::Duration::milliseconds(ms)),
                }
            }
            proptest::prop_assert!(approvals <= 1);
        }
    }

    #[test]
    fn the_round_trip_remembers_the_page() {
        let f = fixture();
        let (pending, _) = f.open();
        let state = ready(open_round_trip(&f.store, &pending, f.clock.now())).unwrap();
        let back = ready(take_round_trip(
            &f.store,
            state,
            Binding::new(pending.principal(), pending.tool(), pending.args()),
            f.clock.now(),
        ))
        .unwrap();
        assert_eq!(back.page(), pending.page());
        assert_eq!(back, pending);
    }
}
