//! A client that declared URL mode but will not show the page's link (a host that opens no
//! links, by policy or by fault) answers the question with an error, not an answer. Nobody was
//! asked through it: with a notifier the person is sent the same page's link and the model is
//! told to call again; without one, or when the notice fails, the page is withdrawn and the call
//! refused. Below 2026-07-28, where the server hears the client's error (from 2026-07-28 the
//! client's own library sees the input request, and no retry arrives).

use mcp_write_guard_core::store::BoxFuture;
use mcp_write_guard_rmcp::notify::{Notice, Notifier, NotifyError};
use parking_lot::Mutex;

use super::*;

/// A notifier that keeps every notice (the person's inbox), or fails every delivery.
#[derive(Clone, Default)]
struct Inbox {
    notices: Arc<Mutex<Vec<Notice>>>,
    down: bool,
}

impl Inbox {
    fn down() -> Self {
        Self {
            down: true,
            ..Self::default()
        }
    }

    fn notices(&self) -> Vec<Notice> {
        self.notices.lock().clone()
    }
}

impl Notifier for Inbox {
    fn channel(&self) -> &str {
        "inbox"
    }

    fn notify<'a>(&'a self, notice: &'a Notice) -> BoxFuture<'a, Result<(), NotifyError>> {
        Box::pin(async move {
            if self.down {
                return Err(NotifyError::new("the inbox is down"));
            }
            self.notices.lock().push(notice.clone());
            Ok(())
        })
    }
}

async fn harness(inbox: Option<Inbox>) -> PageHarness {
    PageHarness::with(
        Era::Legacy,
        PageClient::new(),
        |page| page,
        |builder| match inbox {
            Some(inbox) => builder.notifier(inbox),
            None => builder,
        },
    )
    .await
}

fn text(result: &CallToolResult) -> String {
    text_of(result)
}

/// Calls `set_counter 7` and has the client refuse the question's link (an error, not an
/// answer); returns the page's URL and the call's result.
async fn call_whose_link_is_refused(h: &PageHarness) -> (String, CallToolResult) {
    let call = h.set_counter(7);
    let question = h.question().await;
    let url = question.url.clone();
    question.refuse();
    (url, call.await.unwrap())
}

/// Calls `set_counter 7` again, asserts it is a new question on a page other than `url`,
/// declines it there and returns the declined call's result.
async fn declined_on_a_new_page(h: &PageHarness, url: &str) -> CallToolResult {
    let call = h.set_counter(7);
    let fresh = h.question().await;
    assert_ne!(fresh.url, url);
    fresh.reply(ElicitationAction::Decline);
    call.await.unwrap()
}

/// Asserts that the page at `url` no longer answers with 200 (it was withdrawn).
async fn assert_withdrawn(h: &PageHarness, url: &str) -> Page {
    let page = h.get(url).await;
    assert_ne!(page.status, 200, "{}", page.body);
    page
}

#[tokio::test]
async fn with_a_notifier_the_person_gets_the_link_and_the_retry_applies_once() {
    let inbox = Inbox::default();
    let h = harness(Some(inbox.clone())).await;
    let (url, result) = call_whose_link_is_refused(&h).await;
    let said = text(&result);
    assert_eq!(result.is_error, Some(true), "{said}");
    assert!(said.contains("a person was asked"), "{said}");
    assert!(said.contains("Nothing was saved"), "{said}");
    assert!(!said.contains(&url), "the link reaches the model: {said}");
    assert!(!said.contains("/approvals/"), "{said}");
    assert_eq!(h.counter(), (0, 0));

    // The notice carries the same page, with the whole question.
    let notices = inbox.notices();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].url, url);
    assert_eq!(notices[0].tool, "set_counter");
    assert!(notices[0].prompt.contains('7'), "{}", notices[0].prompt);
    assert_eq!(
        h.outcomes(),
        [Outcome::Asked, Outcome::Notified, Outcome::AwaitingAnswer]
    );

    // The person approves on the page; the same call again applies it, once, asking nobody.
    let answered = h.answer(&url, "approve").await;
    assert_eq!(answered.status, 200, "{}", answered.body);
    assert_eq!(h.counter(), (0, 0), "the page applies nothing");
    let retry = h.set_counter(7).await.unwrap();
    assert_ne!(retry.is_error, Some(true), "{}", text(&retry));
    assert_eq!(h.counter(), (7, 1));
    // Spent: the same call again is a new question, on a new page.
    let again = declined_on_a_new_page(&h, &url).await;
    assert_eq!(again.is_error, Some(true), "{}", text(&again));
    assert_eq!(h.counter(), (7, 1), "applied once");
    assert_eq!(
        h.outcomes()
            .iter()
            .filter(|o| **o == Outcome::Applied)
            .count(),
        1,
        "{:?}",
        h.outcomes()
    );
}

#[tokio::test]
async fn without_a_notifier_the_call_is_refused_at_once_and_the_page_withdrawn() {
    let h = harness(None).await;
    // Refused at once, not at the end of the clock: no time passes on the guard's clock.
    let (url, result) = call_whose_link_is_refused(&h).await;
    let said = text(&result);
    assert_eq!(result.is_error, Some(true), "{said}");
    assert!(said.contains("nothing was saved"), "{said}");
    h.assert_last_outcome(Outcome::AskFailed);
    // Nobody can approve the withdrawn page any more.
    let page = assert_withdrawn(&h, &url).await;
    assert!(page.csrf().is_none(), "{}", page.body);
    assert_eq!(h.counter(), (0, 0));
    // The same call again is a new question (a new page), not the withdrawn one.
    let declined = declined_on_a_new_page(&h, &url).await;
    assert_eq!(declined.is_error, Some(true));
    assert_eq!(h.counter(), (0, 0));
}

#[tokio::test]
async fn a_notifier_that_fails_refuses_and_withdraws_the_page() {
    let h = harness(Some(Inbox::down())).await;
    let (url, result) = call_whose_link_is_refused(&h).await;
    let said = text(&result);
    assert_eq!(result.is_error, Some(true), "{said}");
    assert!(said.contains("nobody could be reached"), "{said}");
    h.assert_last_outcome(Outcome::NotifyFailed);
    assert_withdrawn(&h, &url).await;
    assert_eq!(h.counter(), (0, 0));
}

/// The next URL question, if one comes within `ms`.
async fn question_within(h: &PageHarness, ms: u64) -> Option<PageQuestion> {
    tokio::time::timeout(
        std::time::Duration::from_millis(ms),
        h.person.next_question(),
    )
    .await
    .ok()
    .flatten()
}

#[tokio::test]
async fn calls_of_the_same_change_whose_client_refuses_too_notify_the_person_once() {
    let inbox = Inbox::default();
    let h = harness(Some(inbox.clone())).await;
    let (url, first) = call_whose_link_is_refused(&h).await;
    assert!(
        text(&first).contains("a person was asked"),
        "{}",
        text(&first)
    );
    for retry in 0..3 {
        let call = h.set_counter(7);
        // The same question is put to the client again; it refuses the link again.
        let again = question_within(&h, 2000).await.expect("asked again");
        assert_eq!(again.url, url, "retry {retry}: the same page");
        again.refuse();
        let result = call.await.unwrap();
        let said = text(&result);
        assert_eq!(result.is_error, Some(true), "retry {retry}: {said}");
        assert!(
            said.contains("has not answered yet"),
            "retry {retry}: {said}"
        );
        assert!(!said.contains(&url), "retry {retry}: {said}");
    }
    assert_eq!(inbox.notices().len(), 1, "one notice for one question");
    assert_eq!(h.counter(), (0, 0));
    // The person answers the one notice; the next call applies it, once.
    assert_eq!(h.answer(&url, "approve").await.status, 200);
    let applied = h.set_counter(7).await.unwrap();
    assert_ne!(applied.is_error, Some(true), "{}", text(&applied));
    assert_eq!(h.counter(), (7, 1));
}

#[tokio::test]
async fn without_a_notifier_a_call_waiting_on_the_same_question_ends_too() {
    let h = harness(None).await;
    let first = h.set_counter(7);
    let question = h.question().await;
    let url = question.url.clone();
    // A second call of the same change joins the question and waits for it.
    let second = h.set_counter(7);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    question.refuse();
    let first = first.await.unwrap();
    assert_eq!(first.is_error, Some(true), "{}", text(&first));
    // The second call is not sent the withdrawn page, and does not wait for the clock's end.
    if let Some(again) = question_within(&h, 1000).await {
        assert_ne!(again.url, url, "a withdrawn page was put to the client");
        again.reply(ElicitationAction::Decline);
    }
    let second = tokio::time::timeout(std::time::Duration::from_secs(5), second)
        .await
        .expect("the waiting call ended")
        .unwrap();
    assert_eq!(second.is_error, Some(true), "{}", text(&second));
    assert_eq!(h.counter(), (0, 0));
    assert_eq!(h.get(&url).await.status, 410);
}
