//! Attacks on the approval page: requests a person's browser would never send, races, hand-made
//! 2026-07-28 retries, cancellations and hostile text. Each test asserts what matters: the
//! fixture's data and applies, the audit trail, and that the page is still answerable (or not)
//! afterwards.

use std::time::Duration;

use mcp_write_guard_rmcp::{INPUT_KEY, Outcome, PREPARE_ADMIN_ACTION};
use rmcp::model::{CallToolResponse, CallToolResult, InputResponses};

use super::*;
use crate::common::{delete_with_token, params};

fn responses(answer: Value) -> InputResponses {
    let mut responses = InputResponses::new();
    responses.insert(INPUT_KEY.to_owned(), answer);
    responses
}

fn accept_approve() -> InputResponses {
    responses(json!({"action": "accept", "content": {"approve": true}}))
}

/// A first round or retry by hand: `Ok((url, state))` for an input round, `Err(result)` for a
/// final result.
async fn round(
    h: &PageHarness,
    tool: &str,
    args: &Value,
    retry: Option<(&str, InputResponses)>,
) -> Result<(String, String), CallToolResult> {
    let mut request = params(tool, args);
    if let Some((state, answer)) = retry {
        request.request_state = Some(state.to_owned());
        request.input_responses = Some(answer);
    }
    match h.client.call_tool_once(request).await.unwrap() {
        CallToolResponse::InputRequired(input) => {
            let text = serde_json::to_value(&input).unwrap().to_string();
            let marker = r#""url":""#;
            let start = text.find(marker).expect("a url-mode request") + marker.len();
            let url = text[start..].split('"').next().unwrap().to_owned();
            Ok((url, input.request_state.unwrap()))
        }
        CallToolResponse::Complete(result) => Err(result),
        other => panic!("unexpected {other:?}"),
    }
}

/// A first `set_counter` round by hand, which must be asked on the page: the page's URL and the
/// round's request state.
async fn first_round(h: &PageHarness, args: &Value) -> (String, String) {
    round(h, "set_counter", args, None).await.unwrap()
}

/// A 2026-07-28 harness whose first `set_counter {"value": 7}` round was sent by hand and asked
/// on the page: the harness, those arguments, the page's URL and the round's request state.
async fn asked_by_hand() -> (PageHarness, Value, String, String) {
    let h = PageHarness::start(Era::InputRounds).await;
    let args = json!({"value": 7});
    let (url, state) = first_round(&h, &args).await;
    (h, args, url, state)
}

/// A hand-made `set_counter` retry with `state` and the client's "accept, approve: true", which
/// must end the call: its final result.
async fn accepted_retry(h: &PageHarness, args: &Value, state: &str) -> CallToolResult {
    round(h, "set_counter", args, Some((state, accept_approve())))
        .await
        .unwrap_err()
}

/// Asserts that a hand-made `set_counter` retry (see [`accepted_retry`]) ends in an error and
/// that nothing was applied: the counter is still `(0, 0)`.
async fn assert_retry_refused(h: &PageHarness, args: &Value, state: &str) {
    let result = accepted_retry(h, args, state).await;
    assert_eq!(result.is_error, Some(true));
    assert_eq!(h.counter(), (0, 0));
}

impl PageHarness {
    async fn raw_post(&self, url: &str, content_type: &str, body: impl Into<String>) -> Page {
        let response = self
            .http
            .post(url)
            .header("content-type", content_type)
            .body(body.into())
            .send()
            .await
            .unwrap();
        Page::read(response).await
    }

    async fn method(&self, method: reqwest::Method, url: &str) -> Page {
        Page::read(self.http.request(method, url).send().await.unwrap()).await
    }

    fn count(&self, outcome: Outcome) -> usize {
        self.outcomes().iter().filter(|o| **o == outcome).count()
    }
}

/// Sends `set_counter {"value": 7}` once (one request, no follow-up rounds) on a task of its
/// own, so that the test can answer or cancel it meanwhile.
fn set_counter_once_spawned(
    h: &PageHarness,
) -> JoinHandle<Result<CallToolResponse, rmcp::service::ServiceError>> {
    let client = Arc::clone(&h.client);
    tokio::spawn(async move {
        client
            .call_tool_once(params("set_counter", &json!({"value": 7})))
            .await
    })
}

/// Every response of the page carries the security headers.
fn assert_hardened(page: &Page, what: &str) {
    assert_eq!(page.header("cache-control"), "no-store", "{what}");
    assert!(
        page.header("content-security-policy")
            .starts_with("default-src 'none'"),
        "{what}: {:?}",
        page.headers
    );
    assert_eq!(page.header("x-frame-options"), "DENY", "{what}");
}

/// Forms a browser would not send from the page: each is refused with the security headers,
/// nothing is recorded for the guard, and the page's own form still answers afterwards.
#[tokio::test]
async fn no_request_but_the_pages_own_form_answers_it() {
    let h = PageHarness::start(Era::InputRounds).await;
    let call_a = h.set_counter(7);
    let a = h.question().await;
    let call_b = h.set_counter(8);
    let b = h.question().await;
    let csrf_a = h.get(&a.url).await.csrf().unwrap();
    let csrf_b = h.get(&b.url).await.csrf().unwrap();
    assert_ne!(csrf_a, csrf_b);
    // The page never carries another page's token.
    let page_a = h.get(&a.url).await;
    assert!(!page_a.body.contains(&csrf_b) && !page_a.body.contains(&b.url[b.url.len() - 64..]));

    let form = "application/x-www-form-urlencoded";
    let huge = format!("decision=approve&csrf={csrf_a}&pad={}", "x".repeat(3 << 20));
    let attempts: Vec<(&str, String, String, u16)> = vec![
        // Page B's token on page A.
        (
            "token of another page",
            form.into(),
            format!("decision=approve&csrf={csrf_b}"),
            403,
        ),
        (
            "uppercase token",
            form.into(),
            format!("decision=approve&csrf={}", csrf_a.to_uppercase()),
            403,
        ),
        (
            "token with a space",
            form.into(),
            format!("decision=approve&csrf=+{csrf_a}"),
            403,
        ),
        (
            "token twice",
            form.into(),
            format!("decision=approve&csrf={csrf_a}&csrf={csrf_a}"),
            400,
        ),
        (
            "wrong then right token",
            form.into(),
            format!("decision=approve&csrf={csrf_b}&csrf={csrf_a}"),
            400,
        ),
        (
            "two decisions",
            form.into(),
            format!("decision=decline&decision=approve&csrf={csrf_a}"),
            400,
        ),
        (
            "uppercase decision",
            form.into(),
            format!("decision=APPROVE&csrf={csrf_a}"),
            400,
        ),
        (
            "json body",
            "application/json".into(),
            json!({"decision": "approve", "csrf": csrf_a}).to_string(),
            400,
        ),
        (
            "text/plain body",
            "text/plain".into(),
            format!("decision=approve&csrf={csrf_a}"),
            400,
        ),
        (
            "multipart body",
            "multipart/form-data; boundary=XX".into(),
            format!(
                "--XX\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n{csrf_a}\r\n--XX\r\n\
                 Content-Disposition: form-data; name=\"decision\"\r\n\r\napprove\r\n--XX--\r\n"
            ),
            400,
        ),
        ("huge body", form.into(), huge, 400),
    ];
    for (what, content_type, body, status) in attempts {
        let refused = h.raw_post(&a.url, &content_type, body).await;
        assert!(
            refused.status == status || (what == "huge body" && refused.status == 413),
            "{what}: {} {}",
            refused.status,
            refused.body
        );
        assert_hardened(&refused, what);
        assert_eq!(h.counter(), (0, 0), "{what}");
        assert_eq!(h.count(Outcome::PageAnswered), 0, "{what}");
    }
    // The token in the query string: with an empty form body, then with the decision in it.
    for (query, body, status) in [
        (format!("?decision=approve&csrf={csrf_a}"), "", 400),
        (format!("?csrf={csrf_a}"), "decision=approve", 403),
    ] {
        let query = h.raw_post(&format!("{}{query}", a.url), form, body).await;
        assert_eq!(query.status, status, "{}", query.body);
    }
    // A GET with the form in the query answers nothing.
    let get = h
        .get(&format!("{}?decision=approve&csrf={csrf_a}", a.url))
        .await;
    assert_eq!(get.status, 200);
    assert_eq!(h.count(Outcome::PageAnswered), 0);

    // Both pages are still open; page A's own form answers A only.
    assert_eq!(h.get(&a.url).await.status, 200);
    assert_eq!(h.get(&b.url).await.status, 200);
    let approved = h.post(&a.url, Some(&csrf_a), "approve").await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(h.get(&b.url).await.status, 200, "page B untouched");
    a.reply(ElicitationAction::Accept);
    assert_ne!(call_a.await.unwrap().is_error, Some(true));
    assert_eq!(h.counter(), (7, 1));
    b.reply(ElicitationAction::Decline);
    assert_eq!(call_b.await.unwrap().is_error, Some(true));
    assert_eq!(h.counter(), (7, 1));
    assert_eq!(h.count(Outcome::PageAnswered), 1);
}

/// Other spellings of the id and other methods find no page and change nothing.
#[tokio::test]
async fn other_spellings_and_methods_change_nothing() {
    let h = PageHarness::start(Era::InputRounds).await;
    let call = h.set_counter(7);
    let question = h.question().await;
    let url = question.url.clone();
    let csrf = h.get(&url).await.csrf().unwrap();
    let id = &url[url.len() - 64..];
    let prefix = &url[..url.len() - 64];
    let body = format!("decision=approve&csrf={csrf}");
    for other in [
        format!("{prefix}{}", id.to_uppercase()),
        format!("{prefix}{id}/"),
        format!("{prefix}{id}/approve"),
        format!("{prefix}{id}%00"),
        format!("{prefix}{id}0"),
        format!("{prefix}/{id}"),
        format!("{prefix}..%2F{id}"),
    ] {
        let page = h
            .raw_post(&other, "application/x-www-form-urlencoded", body.clone())
            .await;
        assert!(
            page.status == 404 || page.status == 405,
            "{other}: {}",
            page.status
        );
        assert_eq!(h.count(Outcome::PageAnswered), 0, "{other}");
    }
    for method in [
        reqwest::Method::PUT,
        reqwest::Method::DELETE,
        reqwest::Method::PATCH,
        reqwest::Method::HEAD,
        reqwest::Method::OPTIONS,
    ] {
        let page = h.method(method.clone(), &url).await;
        if method == reqwest::Method::HEAD {
            // A GET without the body.
            assert_eq!(page.status, 200);
            assert!(page.body.is_empty());
        } else {
            assert_eq!(page.status, 405, "{method}");
        }
        assert_hardened(&page, method.as_str());
        assert_eq!(h.count(Outcome::PageAnswered), 0, "{method}");
    }
    assert_eq!(h.get(&url).await.status, 200, "still open");
    question.reply(ElicitationAction::Decline);
    assert_eq!(call.await.unwrap().is_error, Some(true));
    assert_eq!(h.counter(), (0, 0));
}

/// Approve and Decline posted at once: exactly one is recorded, and the guard acts on that one.
#[tokio::test]
async fn of_two_answers_at_once_exactly_one_counts() {
    for era in ERAS {
        for _ in 0..4 {
            let h = PageHarness::start(era).await;
            let call = h.set_counter(7);
            let question = h.question().await;
            let csrf = h.get(&question.url).await.csrf().unwrap();
            let (approve, decline) = tokio::join!(
                h.post(&question.url, Some(&csrf), "approve"),
                h.post(&question.url, Some(&csrf), "decline"),
            );
            let mut statuses = [approve.status, decline.status];
            statuses.sort_unstable();
            assert_eq!(statuses, [200, 410], "{era:?}");
            assert_eq!(h.count(Outcome::PageAnswered), 1);
            let reasons = h.reasons(Outcome::PageAnswered);
            question.reply(ElicitationAction::Accept);
            let result = call.await.unwrap();
            if approve.status == 200 {
                assert_eq!(reasons, ["approve"]);
                assert_ne!(result.is_error, Some(true), "{era:?}: {result:?}");
                assert_eq!(h.counter(), (7, 1), "{era:?}");
            } else {
                assert_eq!(reasons, ["decline"]);
                assert_eq!(result.is_error, Some(true), "{era:?}");
                assert_eq!(h.counter(), (0, 0), "{era:?}");
                assert!(h.outcomes().contains(&Outcome::Declined));
            }
        }
    }
}

/// The person approves on the page and the client says decline: the question takes its first
/// answer, whichever channel gives it. Approved first: applied once. Declined first: nothing.
#[tokio::test]
async fn an_approval_racing_the_clients_decline_saves_nothing() {
    for era in ERAS {
        for approve_first in [true, false] {
            let h = PageHarness::start(era).await;
            let call = h.set_counter(7);
            let question = h.question().await;
            let url = question.url.clone();
            let csrf = h.get(&url).await.csrf().unwrap();
            if approve_first {
                assert_eq!(h.post(&url, Some(&csrf), "approve").await.status, 200);
                question.reply(ElicitationAction::Decline);
            } else {
                question.reply(ElicitationAction::Decline);
                let late = h.post(&url, Some(&csrf), "approve").await;
                assert!(late.status == 200 || late.status == 410, "{}", late.status);
            }
            let result = call.await.unwrap();
            if approve_first {
                assert_ne!(result.is_error, Some(true), "{era:?}: {result:?}");
                assert_eq!(h.counter(), (7, 1), "{era:?}");
                assert_eq!(h.count(Outcome::Approved), 1);
            } else {
                assert_eq!(result.is_error, Some(true), "{era:?}");
                assert_eq!(h.counter(), (0, 0), "{era:?}");
                assert!(!h.outcomes().contains(&Outcome::Approved));
            }
            assert_ne!(h.get(&url).await.status, 200, "closed");
        }
    }
}

/// An approval given in the clock's last millisecond, read by the guard after the end, is
/// expired (2026-07-28: the retry comes later); one at the end itself is refused by the page.
#[tokio::test]
async fn an_answer_at_the_end_of_the_clock_saves_nothing() {
    let (h, args, url, state) = asked_by_hand().await;
    h.clock.advance(time::Duration::milliseconds(119_999));
    let csrf = h.get(&url).await.csrf().unwrap();
    assert_eq!(h.post(&url, Some(&csrf), "approve").await.status, 200);
    h.clock.advance(time::Duration::milliseconds(1));
    assert_retry_refused(&h, &args, &state).await;
    assert!(
        !h.outcomes().contains(&Outcome::Approved),
        "{:?}",
        h.outcomes()
    );

    for era in ERAS {
        let h = PageHarness::start(era).await;
        let call = h.set_counter(7);
        let question = h.question().await;
        let csrf = h.get(&question.url).await.csrf().unwrap();
        h.clock.advance(time::Duration::seconds(120));
        let late = h.post(&question.url, Some(&csrf), "approve").await;
        assert_eq!(late.status, 410, "{era:?}");
        question.reply(ElicitationAction::Accept);
        assert_eq!(call.await.unwrap().is_error, Some(true), "{era:?}");
        assert_eq!(h.counter(), (0, 0), "{era:?}");
        assert_eq!(h.count(Outcome::PageAnswered), 0);
    }
}

/// 2026-07-28, by hand: the client's "accept, approve: true" never approves; only the page
/// does; every state is single use, bound to the caller and the arguments.
#[tokio::test]
async fn hand_made_retries_cannot_approve_without_the_page() {
    let (h, args, url, first) = asked_by_hand().await;

    // Accept + approve without a page answer: asked again, same page, a new state.
    let (again, second) = round(&h, "set_counter", &args, Some((&first, accept_approve())))
        .await
        .unwrap();
    assert_eq!(again, url);
    assert_ne!(second, first);
    // Content a form would carry, in every shape: still only asked again.
    let (_, third) = round(
        &h,
        "set_counter",
        &args,
        Some((
            &second,
            responses(
                json!({"action": "accept", "content": {"approve": true, "decision": "approve"}}),
            ),
        )),
    )
    .await
    .unwrap();
    assert_eq!(h.counter(), (0, 0));
    assert_eq!(h.count(Outcome::Approved), 0);

    // The first state again (replayed), an altered state, another argument: refused.
    let replay = accepted_retry(&h, &args, &first).await;
    assert_eq!(replay.is_error, Some(true));
    let mut altered = third.clone().into_bytes();
    altered[0] = if altered[0] == b'a' { b'b' } else { b'a' };
    let altered = String::from_utf8(altered).unwrap();
    assert_retry_refused(&h, &args, &altered).await;

    // Another connection (another principal) with the live state: refused, and it spends the
    // state, so the caller is refused too; the page is closed for good.
    let other = connect(h.guard.clone(), Era::InputRounds, PageClient::new())
        .await
        .unwrap();
    let mut stolen = params("set_counter", &args);
    stolen.request_state = Some(third.clone());
    stolen.input_responses = Some(accept_approve());
    let CallToolResponse::Complete(stolen) = other.call_tool_once(stolen).await.unwrap() else {
        panic!("another principal was asked");
    };
    assert_eq!(stolen.is_error, Some(true));
    assert_eq!(h.count(Outcome::StateRejected), 3, "{:?}", h.outcomes());
    // The person approves on the page after that: the spent state applies nothing.
    assert_eq!(h.answer(&url, "approve").await.status, 200);
    let after = round(&h, "set_counter", &args, Some((&third, accept_approve()))).await;
    assert!(after.is_err_and(|r| r.is_error == Some(true)));
    assert_eq!(h.counter(), (0, 0));
    assert_eq!(h.count(Outcome::Approved), 0);
    assert_eq!(h.count(Outcome::Applied), 0);
}

/// 2026-07-28: a page declined stays declined whatever the retry says; a page approved applies
/// once (through its state, or a call of the same change without one), and its state cannot be
/// spent twice.
#[tokio::test]
async fn a_retry_applies_the_pages_answer_once() {
    let (h, args, url, state) = asked_by_hand().await;
    assert_eq!(h.answer(&url, "decline").await.status, 200);
    assert_retry_refused(&h, &args, &state).await;
    assert_eq!(h.count(Outcome::Declined), 1);

    let args = json!({"value": 8});
    let (url, state) = first_round(&h, &args).await;
    assert_eq!(h.answer(&url, "approve").await.status, 200);
    // A retry with other arguments does not take the approval (and spends the state).
    assert_retry_refused(&h, &json!({"value": 9}), &state).await;
    // The spent state applies nothing.
    assert_retry_refused(&h, &args, &state).await;
    // The same change without a state finds the approved question and applies it once.
    let applied = round(&h, "set_counter", &args, None).await.unwrap_err();
    assert_ne!(applied.is_error, Some(true), "{applied:?}");
    assert_eq!(h.counter(), (8, 1));

    let args = json!({"value": 7});
    h.fixture.state.lock().counter = 0;
    let (url, state) = first_round(&h, &json!({"value": 10})).await;
    assert_eq!(h.answer(&url, "approve").await.status, 200);
    let applied = accepted_retry(&h, &json!({"value": 10}), &state).await;
    assert_ne!(applied.is_error, Some(true), "{applied:?}");
    assert_eq!(h.counter(), (10, 2));
    for _ in 0..2 {
        let replay = accepted_retry(&h, &json!({"value": 10}), &state).await;
        assert_eq!(replay.is_error, Some(true));
    }
    let _ = args;
    assert_eq!(h.snapshot_applies(), 2, "each approval applied once");
    assert_eq!(h.count(Outcome::Applied), 2);
}

/// Below 2026-07-28: the client cancels the request while the guard waits for the page. The
/// question outlives the call: the page still takes the person's answer, nothing is applied for
/// the cancelled call, and the next call of the same change applies the approval once, without
/// asking again; the one after it asks anew.
#[tokio::test]
async fn a_request_cancelled_while_waiting_leaves_the_question_for_the_next_call() {
    let h = PageHarness::start(Era::Legacy).await;
    let call = set_counter_once_spawned(&h);
    let question = h.question().await;
    let url = question.url.clone();
    let csrf = h.get(&url).await.csrf().unwrap();
    question.reply_with(ElicitationAction::Accept, json!({"approve": true}));
    // Dropping the request sends notifications/cancelled.
    tokio::time::sleep(Duration::from_millis(50)).await;
    call.abort();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(h.get(&url).await.status, 200, "the page stays open");
    assert_eq!(h.post(&url, Some(&csrf), "approve").await.status, 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        h.counter(),
        (0, 0),
        "nothing applied for the cancelled call"
    );
    assert_eq!(h.count(Outcome::Applied), 0);

    let CallToolResponse::Complete(applied) = h
        .client
        .call_tool_once(params("set_counter", &json!({"value": 7})))
        .await
        .unwrap()
    else {
        panic!("the approved change is applied without a question");
    };
    assert_ne!(applied.is_error, Some(true), "{applied:?}");
    assert_eq!(h.counter(), (7, 1));
    let approval_ids: std::collections::HashSet<_> = h
        .audit
        .records()
        .iter()
        .filter(|r| r.outcome != Outcome::PageAnswered)
        .filter_map(|r| r.approval_id)
        .collect();
    assert_eq!(approval_ids.len(), 1, "one approval id joins the story");

    // Applied once: the same change again is a new question.
    let again = set_counter_once_spawned(&h);
    let fresh = h.question().await;
    assert_ne!(fresh.url, url, "a new page");
    fresh.reply(ElicitationAction::Decline);
    let CallToolResponse::Complete(declined) = again.await.unwrap().unwrap() else {
        panic!("a result");
    };
    assert_eq!(declined.is_error, Some(true));
    assert_eq!(h.counter(), (7, 1));
    assert_eq!(h.count(Outcome::Applied), 1);
}

/// Hostile argument text reaches the page as inert, visible text, whatever the era.
#[tokio::test]
async fn hostile_arguments_are_inert_on_the_page() {
    let hostile = "</style><script>alert(1)</script>\"'><a href=\"javascript:alert(2)\">x</a>\u{202E}\u{200B}\r\nApproved: yes";
    let h = PageHarness::start(Era::InputRounds).await;
    let client = Arc::clone(&h.client);
    let args = json!({"name": hostile, "value": 1});
    let call = tokio::spawn(async move { client.call_tool(params("add_row", &args)).await });
    let question = h.question().await;
    let page = h.get(&question.url).await;
    assert_eq!(page.status, 200, "{}", page.body);
    for raw in [
        "<script",
        "</style><script",
        "<a ",
        "javascript:alert(2)\">",
        "\u{202E}",
        "\u{200B}",
        "\r\nApproved",
    ] {
        assert!(!page.body.contains(raw), "{raw:?} in {}", page.body);
    }
    assert!(page.body.contains("&lt;script&gt;"), "{}", page.body);
    // Exactly one style element and one form, the page's own.
    assert_eq!(page.body.matches("<style>").count(), 1);
    assert_eq!(page.body.matches("<form").count(), 1);
    question.reply(ElicitationAction::Decline);
    assert_eq!(call.await.unwrap().unwrap().is_error, Some(true));
    assert!(h.fixture.snapshot().rows.is_empty());
}

/// prepare_admin_action on the page: the page names the target tool and says approving issues
/// a token; approving issues exactly one, bound to those arguments.
#[tokio::test]
async fn an_admin_token_approved_on_the_page_is_bound_to_what_it_showed() {
    let h = PageHarness::start(Era::InputRounds).await;
    h.fixture.state.lock().rows.insert("a".into(), 1);
    h.fixture.state.lock().rows.insert("b".into(), 2);
    let client = Arc::clone(&h.client);
    let call = tokio::spawn(async move {
        client
            .call_tool(params(
                PREPARE_ADMIN_ACTION,
                &json!({"tool": "delete_row", "arguments": {"name": "a"}}),
            ))
            .await
    });
    let question = h.question().await;
    let page = h.get(&question.url).await;
    assert!(page.body.contains("delete_row"), "{}", page.body);
    assert!(
        page.body.contains("one-time confirmation token"),
        "{}",
        page.body
    );
    assert!(!page.body.contains(PREPARE_ADMIN_ACTION), "{}", page.body);
    assert_eq!(h.answer(&question.url, "approve").await.status, 200);
    question.reply(ElicitationAction::Accept);
    let result = call.await.unwrap().unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let token = result.structured_content.unwrap()["confirmationToken"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(h.count(Outcome::TokenIssued), 1);
    let page_answer = h
        .audit
        .records()
        .into_iter()
        .find(|r| r.outcome == Outcome::PageAnswered)
        .unwrap();
    assert_eq!(page_answer.tool, PREPARE_ADMIN_ACTION);
    assert_eq!(h.fixture.snapshot().rows.len(), 2, "nothing deleted yet");

    // The token does not delete another row.
    let stolen = round(&h, "delete_row", &delete_with_token("b", &token), None).await;
    assert!(stolen.is_err_and(|r| r.is_error == Some(true)));
    assert_eq!(h.fixture.snapshot().rows.len(), 2);
    assert_eq!(h.fixture.snapshot().applies, 0);

    // For the row it was issued for, the deletion is asked about on the page again, and
    // approved there it deletes that row only.
    let args = delete_with_token("a", &token);
    let (url, state) = round(&h, "delete_row", &args, None).await.unwrap();
    let page = h.get(&url).await;
    assert!(!page.body.contains(&token), "the token is not shown");
    assert!(!page.body.contains("one-time confirmation token"));
    assert_eq!(h.answer(&url, "approve").await.status, 200);
    let deleted = round(&h, "delete_row", &args, Some((&state, accept_approve())))
        .await
        .unwrap_err();
    assert_ne!(deleted.is_error, Some(true), "{deleted:?}");
    let rows = h.fixture.snapshot().rows;
    assert_eq!(rows.keys().collect::<Vec<_>>(), ["b"]);
    assert_eq!(h.count(Outcome::TokenIssued), 1);
}

/// A sign-in that cannot name anyone at the page (a per-connection resolver: the page request
/// is a connection of its own) refuses every answer, and the page stays open.
#[tokio::test]
async fn a_sign_in_that_names_nobody_refuses_every_answer() {
    for era in ERAS {
        let h = PageHarness::with(
            era,
            PageClient::new(),
            |page| page.sign_in(Arc::new(mcp_write_guard_rmcp::PerConnection)),
            |builder| builder,
        )
        .await;
        let call = h.set_counter(9);
        let question = h.question().await;
        for decision in ["approve", "decline"] {
            let refused = h.answer(&question.url, decision).await;
            assert_eq!(refused.status, 401, "{era:?}: {}", refused.body);
            assert_hardened(&refused, decision);
        }
        assert_eq!(h.get(&question.url).await.status, 200, "still open");
        assert_eq!(h.count(Outcome::PageAnswered), 0);
        assert_eq!(h.count(Outcome::PageRefused), 2);
        question.reply(ElicitationAction::Decline);
        assert_eq!(call.await.unwrap().is_error, Some(true));
        assert_eq!(h.counter(), (0, 0), "{era:?}");
    }
}
