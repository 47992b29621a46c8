//! The approval page (feature `approval-page`): a client with URL-mode elicitation is sent to the
//! server's own page, the person answers there, and only the page's answer can approve. Every
//! test runs in both protocol eras against the page served on a real loopback listener, and
//! checks the fixture's data and the audit trail, not only the texts.

use std::sync::Arc;

use mcp_write_guard_core::{ManualClock, Principal};
use mcp_write_guard_rmcp::{
    Channel, MemorySink, Outcome, PrincipalRequest, WriteGuard,
    page::ApprovalPage,
    test_util::{PageClient, PageQuestion},
};
use rmcp::{
    RoleClient,
    model::{CallToolRequestParams, CallToolResult, ElicitationAction},
    service::RunningService,
};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::common::{
    ERAS, Era, Fixture, Options, Reply, ScriptedClient, connect, custom, start_time, text_of,
};

/// A guard with an approval page served on loopback, and a URL-mode client connected to it.
struct PageHarness {
    era: Era,
    client: Arc<RunningService<RoleClient, PageClient>>,
    person: PageClient,
    fixture: Fixture,
    audit: MemorySink,
    clock: ManualClock,
    base: String,
    http: reqwest::Client,
    guard: WriteGuard<Fixture>,
}

impl PageHarness {
    async fn start(era: Era) -> Self {
        Self::with(era, PageClient::new(), |page| page, |builder| builder).await
    }

    async fn with(
        era: Era,
        person: PageClient,
        page: impl FnOnce(ApprovalPage) -> ApprovalPage,
        customize: impl FnOnce(
            mcp_write_guard_rmcp::WriteGuardBuilder<Fixture>,
        ) -> mcp_write_guard_rmcp::WriteGuardBuilder<Fixture>,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let fixture = Fixture::default();
        let audit = MemorySink::new();
        let clock = ManualClock::new(start_time());
        let builder = custom::guard_builder(fixture.clone(), &audit, &clock, &Options::default())
            .approval_page(page(ApprovalPage::new(&base).unwrap()));
        let guard = customize(builder).build();
        let router = mcp_write_guard_page::router(guard.approval_page_host().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await });
        let client = connect(guard.clone(), era, person.clone()).await.unwrap();
        Self {
            era,
            client: Arc::new(client),
            person,
            fixture,
            audit,
            clock,
            base,
            http: reqwest::Client::new(),
            guard,
        }
    }

    /// A harness in `era` (see [`PageHarness::start`]) with `set_counter {value}` called (see
    /// [`PageHarness::set_counter`]) and its question sent to the person.
    async fn asking(era: Era, value: i64) -> (Self, JoinHandle<CallToolResult>, PageQuestion) {
        let h = Self::start(era).await;
        let call = h.set_counter(value);
        let question = h.question().await;
        (h, call, question)
    }

    /// Calls `set_counter {value}` on a task of its own (the client waits for the question's
    /// reply, which the test gives).
    fn set_counter(&self, value: i64) -> JoinHandle<CallToolResult> {
        let client = Arc::clone(&self.client);
        tokio::spawn(async move { client.call_tool(set_counter(value)).await.unwrap() })
    }

    async fn question(&self) -> PageQuestion {
        let question = self.person.next_question().await.unwrap();
        assert!(
            question
                .url
                .starts_with(&format!("{}/approvals/", self.base)),
            "{}",
            question.url
        );
        question
    }

    /// The next question, asserting that it sends the person to the same page, `url`.
    async fn same_page_again(&self, url: &str) -> PageQuestion {
        let again = self.question().await;
        assert_eq!(again.url, url);
        again
    }

    async fn get(&self, url: &str) -> Page {
        let response = self.http.get(url).send().await.unwrap();
        Page::read(response).await
    }

    /// Posts the form as a browser would: `csrf` (none: left out) and `decision`.
    async fn post(&self, url: &str, csrf: Option<&str>, decision: &str) -> Page {
        let mut body = format!("decision={decision}");
        if let Some(csrf) = csrf {
            body.push_str(&format!("&csrf={csrf}"));
        }
        let response = self
            .http
            .post(url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        Page::read(response).await
    }

    /// Opens the page and presses `decision`, as the person would.
    async fn answer(&self, url: &str, decision: &str) -> Page {
        let page = self.get(url).await;
        assert_eq!(page.status, 200, "{}", page.body);
        self.post(url, Some(&page.csrf().unwrap()), decision).await
    }

    fn counter(&self) -> (i64, usize) {
        let state = self.fixture.snapshot();
        (state.counter, state.applies)
    }

    /// Waits for `call` to end; asserts that it wrote and that the counter is `value`, applied
    /// once. Returns the result.
    async fn assert_applied(&self, call: JoinHandle<CallToolResult>, value: i64) -> CallToolResult {
        let era = self.era;
        let result = call.await.unwrap();
        assert_ne!(result.is_error, Some(true), "{era:?}: {result:?}");
        assert_eq!(self.counter(), (value, 1), "{era:?}");
        result
    }

    /// Waits for `call` to end; asserts that it was refused and that nothing was applied.
    /// Returns the result.
    async fn assert_nothing_applied(&self, call: JoinHandle<CallToolResult>) -> CallToolResult {
        let era = self.era;
        let result = call.await.unwrap();
        assert_eq!(result.is_error, Some(true), "{era:?}: {result:?}");
        assert_eq!(self.counter(), (0, 0), "{era:?}: nothing applied");
        result
    }

    fn outcomes(&self) -> Vec<Outcome> {
        self.audit.outcomes()
    }

    /// Asserts that the last audit record names `outcome`.
    fn assert_last_outcome(&self, outcome: Outcome) {
        assert_eq!(
            self.outcomes().last(),
            Some(&outcome),
            "{:?}",
            self.outcomes()
        );
    }

    /// The reasons of the audit records that name `outcome`, in order.
    fn reasons(&self, outcome: Outcome) -> Vec<String> {
        self.audit
            .records()
            .iter()
            .filter(|r| r.outcome == outcome)
            .map(|r| r.reason.clone().unwrap())
            .collect()
    }

    fn snapshot_applies(&self) -> usize {
        self.fixture.snapshot().applies
    }
}

/// The parameters of a `set_counter {value}` call.
fn set_counter(value: i64) -> CallToolRequestParams {
    CallToolRequestParams::new("set_counter")
        .with_arguments(json!({"value": value}).as_object().cloned().unwrap())
}

/// A guard on a fresh fixture with the default options and the approval page at `page_base`, if
/// given, which nothing serves: for clients that are never sent to it.
struct Unserved {
    guard: WriteGuard<Fixture>,
    fixture: Fixture,
    audit: MemorySink,
    _clock: ManualClock,
}

impl Unserved {
    fn new(page_base: Option<&str>) -> Self {
        let fixture = Fixture::default();
        let audit = MemorySink::new();
        let clock = ManualClock::new(start_time());
        let mut builder =
            custom::guard_builder(fixture.clone(), &audit, &clock, &Options::default());
        if let Some(base) = page_base {
            builder = builder.approval_page(ApprovalPage::new(base).unwrap());
        }
        Self {
            guard: builder.build(),
            fixture,
            audit,
            _clock: clock,
        }
    }
}

/// A page as the server answered it.
struct Page {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Page {
    async fn read(response: reqwest::Response) -> Self {
        Self {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: response.text().await.unwrap(),
        }
    }

    /// The form's CSRF token.
    fn csrf(&self) -> Option<String> {
        let marker = r#"name="csrf" value=""#;
        let start = self.body.find(marker)? + marker.len();
        Some(self.body[start..start + 64].to_owned())
    }

    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

#[tokio::test]
async fn approving_on_the_page_applies_exactly_what_it_showed() {
    for era in ERAS {
        let (h, call, question) = PageHarness::asking(era, 7).await;
        assert!(
            question.message.contains("set_counter"),
            "{}",
            question.message
        );

        let page = h.get(&question.url).await;
        assert_eq!(page.status, 200);
        assert_eq!(page.header("cache-control"), "no-store");
        assert_eq!(page.header("referrer-policy"), "no-referrer");
        let csp = page.header("content-security-policy");
        assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"));
        assert!(!csp.contains("script"), "{csp}");
        assert!(page.body.contains("set_counter"), "{}", page.body);
        assert!(
            page.body.contains(r#"<td class="before">0</td>"#)
                && page.body.contains(r#"<td class="after">7</td>"#),
            "the before/after table: {}",
            page.body
        );
        assert_eq!(h.counter(), (0, 0), "nothing applied before the answer");

        let answered = h
            .post(&question.url, page.csrf().as_deref(), "approve")
            .await;
        assert_eq!(answered.status, 200, "{}", answered.body);
        assert!(answered.body.contains("You approved this change"));
        let (url, elicitation_id) = (question.url.clone(), question.elicitation_id.clone());
        question.reply(ElicitationAction::Accept);
        h.assert_applied(call, 7).await;
        assert_eq!(
            h.outcomes(),
            [
                Outcome::Asked,
                Outcome::PageAnswered,
                Outcome::Approved,
                Outcome::Applied
            ],
            "{era:?}"
        );
        let records = h.audit.records();
        assert!(
            records.iter().all(|r| r.channel == Some(Channel::Page)),
            "{records:?}"
        );
        assert_eq!(records[0].asked.as_ref().unwrap().channel, Channel::Page);
        let approval = records[0].approval_id;
        assert!(approval.is_some() && records.iter().all(|r| r.approval_id == approval));
        if era == Era::Legacy {
            assert_eq!(
                h.person.completed(),
                [elicitation_id],
                "elicitation/complete"
            );
        }

        // Single use: the page now says so, and a second answer changes nothing.
        let shown = h.get(&url).await;
        assert_eq!(shown.status, 410);
        assert!(shown.body.contains("Already answered"), "{}", shown.body);
        let again = h.post(&url, page.csrf().as_deref(), "approve").await;
        assert_eq!(again.status, 410, "{}", again.body);
        assert_eq!(h.counter(), (7, 1));
        assert_eq!(h.outcomes().len(), 4, "{:?}", h.outcomes());
    }
}

/// The server redefines `set_counter` while its question waits on the page; the person then
/// approves there. Nothing is applied (`tool-changed`), and the approval is used up.
#[tokio::test]
async fn a_tool_redefined_before_the_page_is_answered_is_not_applied() {
    for era in ERAS {
        let (h, call, question) = PageHarness::asking(era, 7).await;
        h.fixture.redefine("set_counter", |tool| {
            tool.description = Some("Set the counter, and wipe every row.".into());
        });
        let answered = h.answer(&question.url, "approve").await;
        assert_eq!(answered.status, 200, "{}", answered.body);
        let url = question.url.clone();
        question.reply(ElicitationAction::Accept);
        let result = call.await.unwrap();
        assert_eq!(result.is_error, Some(true), "{era:?}: {result:?}");
        assert_eq!(
            text_of(&result),
            "The tool `set_counter` changed since you approved (its description, schema or \
             annotations); nothing was saved. Ask again to see the new definition.",
            "{era:?}"
        );
        assert_eq!(h.counter(), (0, 0), "{era:?}: nothing applied");
        assert_eq!(
            h.outcomes(),
            [
                Outcome::Asked,
                Outcome::PageAnswered,
                Outcome::Approved,
                Outcome::ToolChanged
            ],
            "{era:?}"
        );
        let records = h.audit.records();
        let approval = records[0].approval_id;
        assert!(approval.is_some() && records.iter().all(|r| r.approval_id == approval));
        // The page was answered once; it cannot approve again.
        let shown = h.get(&url).await;
        assert_eq!(shown.status, 410, "{era:?}");
    }
}

#[tokio::test]
async fn declining_on_the_page_saves_nothing() {
    for era in ERAS {
        let (h, call, question) = PageHarness::asking(era, 7).await;
        let declined = h.answer(&question.url, "decline").await;
        assert_eq!(declined.status, 200);
        assert!(declined.body.contains("You declined this change"));
        question.reply(ElicitationAction::Accept);
        let result = h.assert_nothing_applied(call).await;
        assert!(
            text_of(&result).contains("nothing was saved"),
            "{}",
            text_of(&result)
        );
        assert_eq!(
            h.outcomes(),
            [Outcome::Asked, Outcome::PageAnswered, Outcome::Declined],
            "{era:?}"
        );
    }
}

#[tokio::test]
async fn a_client_that_declines_or_cancels_the_link_denies_and_closes_the_page() {
    for era in ERAS {
        for (action, outcome) in [
            (ElicitationAction::Decline, Outcome::Declined),
            (ElicitationAction::Cancel, Outcome::Cancelled),
        ] {
            let (h, call, question) = PageHarness::asking(era, 7).await;
            let url = question.url.clone();
            let open = h.get(&url).await;
            question.reply(action.clone());
            let result = call.await.unwrap();
            assert_eq!(result.is_error, Some(true), "{era:?} {action:?}");
            assert_eq!(h.outcomes(), [Outcome::Asked, outcome], "{era:?}");
            // The page is withdrawn: it says so, and an answer now changes nothing.
            let shown = h.get(&url).await;
            assert_eq!(shown.status, 410, "{}", shown.body);
            assert!(shown.body.contains("No longer open"), "{}", shown.body);
            let late = h.post(&url, open.csrf().as_deref(), "approve").await;
            assert_eq!(late.status, 410);
            assert_eq!(h.counter(), (0, 0), "{era:?} {action:?}");
        }
    }
}

#[tokio::test]
async fn a_post_without_the_pages_token_changes_nothing() {
    for era in ERAS {
        let (h, call, question) = PageHarness::asking(era, 7).await;
        let page = h.get(&question.url).await;
        let csrf = page.csrf().unwrap();
        let wrong = "0".repeat(64);
        for (token, status) in [
            (None, 403),
            (Some(wrong.as_str()), 403),
            (Some(&csrf[..63]), 403),
        ] {
            let refused = h.post(&question.url, token, "approve").await;
            assert_eq!(refused.status, status, "{token:?}: {}", refused.body);
            assert!(refused.body.contains("Nothing changed"), "{}", refused.body);
        }
        // Not a decision either.
        let odd = h.post(&question.url, Some(&csrf), "yes").await;
        assert_eq!(odd.status, 400);
        assert_eq!(h.counter(), (0, 0));
        let records = h.audit.records();
        let refused: Vec<_> = records
            .iter()
            .filter(|r| r.outcome == Outcome::PageRefused)
            .collect();
        assert_eq!(refused.len(), 3, "{records:?}");
        assert!(refused.iter().all(|r| r.reason.as_deref() == Some("csrf")
            && r.channel == Some(Channel::Page)
            && r.tool == "set_counter"));
        // The page is still open, and its own form still answers it.
        assert_eq!(h.get(&question.url).await.status, 200);
        let approved = h.post(&question.url, Some(&csrf), "approve").await;
        assert_eq!(approved.status, 200);
        question.reply(ElicitationAction::Accept);
        h.assert_applied(call, 7).await;
    }
}

#[tokio::test]
async fn the_clients_accept_approves_nothing_by_itself() {
    for era in ERAS {
        let (h, call, question) = PageHarness::asking(era, 7).await;
        let url = question.url.clone();
        // The client says "accept, approve: true" but nobody answered on the page.
        question.reply_with(ElicitationAction::Accept, json!({"approve": true}));
        if era == Era::Legacy {
            // The call waits for the page; the clock runs out.
            h.clock.advance(time::Duration::seconds(121));
        } else {
            // The retry finds the page open: the same page is asked about again.
            let again = h.same_page_again(&url).await;
            assert_eq!(h.get(&url).await.status, 200, "still open");
            again.reply(ElicitationAction::Decline);
        }
        h.assert_nothing_applied(call).await;
        assert!(
            !h.outcomes().contains(&Outcome::Approved),
            "{:?}",
            h.outcomes()
        );
        assert_ne!(h.get(&url).await.status, 200, "the page is closed");
    }
}

#[tokio::test]
async fn the_page_may_be_answered_after_the_client_said_it_opened_it() {
    for era in ERAS {
        let (h, call, question) = PageHarness::asking(era, 5).await;
        let url = question.url.clone();
        question.reply(ElicitationAction::Accept);
        if era == Era::InputRounds {
            // Asked again, same page, same clock; answered on the page meanwhile.
            let again = h.same_page_again(&url).await;
            assert_eq!(h.answer(&url, "approve").await.status, 200);
            again.reply(ElicitationAction::Accept);
        } else {
            // The call is waiting for the page; the answer wakes it.
            assert_eq!(h.answer(&url, "approve").await.status, 200);
        }
        h.assert_applied(call, 5).await;
    }
}

#[tokio::test]
async fn an_expired_page_says_so_and_saves_nothing() {
    for era in ERAS {
        let (h, call, question) = PageHarness::asking(era, 7).await;
        let url = question.url.clone();
        let open = h.get(&url).await;
        h.clock.advance(time::Duration::seconds(120));
        let shown = h.get(&url).await;
        assert_eq!(shown.status, 410);
        assert!(shown.body.contains("Expired"), "{}", shown.body);
        let late = h.post(&url, open.csrf().as_deref(), "approve").await;
        assert_eq!(late.status, 410);
        question.reply(ElicitationAction::Accept);
        h.assert_nothing_applied(call).await;
        h.assert_last_outcome(Outcome::Expired);
    }
}

#[tokio::test]
async fn where_people_sign_in_only_the_caller_may_answer() {
    /// The page's sign-in: the `x-user` header a trusted proxy would set.
    fn header_user(request: &PrincipalRequest<'_>) -> Option<Principal> {
        let parts = request.http_parts()?;
        let user = parts.headers.get("x-user")?.to_str().ok()?;
        Some(Principal::new(user))
    }
    for era in ERAS {
        let h = PageHarness::with(
            era,
            PageClient::new(),
            |page| page.sign_in(Arc::new(header_user)),
            |builder| {
                builder.principal(Arc::new(|_: &PrincipalRequest<'_>| {
                    Some(Principal::new("alice"))
                }))
            },
        )
        .await;
        let call = h.set_counter(9);
        let question = h.question().await;
        let page = h.get(&question.url).await;
        let csrf = page.csrf().unwrap();
        let post_as = |user: Option<&'static str>| {
            let mut request = h
                .http
                .post(&question.url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("decision=approve&csrf={csrf}"));
            if let Some(user) = user {
                request = request.header("x-user", user);
            }
            request.send()
        };
        let mallory = post_as(Some("mallory")).await.unwrap();
        assert_eq!(mallory.status(), 403);
        let nobody = post_as(None).await.unwrap();
        assert_eq!(nobody.status(), 401);
        assert_eq!(h.counter(), (0, 0));
        let alice = post_as(Some("alice")).await.unwrap();
        assert_eq!(alice.status(), 200);
        question.reply(ElicitationAction::Accept);
        h.assert_applied(call, 9).await;
        let reasons = h.reasons(Outcome::PageRefused);
        assert_eq!(reasons, ["other-person", "not-signed-in"], "{era:?}");
    }
}

#[tokio::test]
async fn a_client_with_both_modes_is_asked_on_the_page_and_form_only_clients_keep_the_form() {
    for era in ERAS {
        let h = PageHarness::with(era, PageClient::new().with_form(), |p| p, |b| b).await;
        let call = h.set_counter(3);
        let question = h.question().await;
        assert_eq!(h.answer(&question.url, "approve").await.status, 200);
        question.reply(ElicitationAction::Accept);
        h.assert_applied(call, 3).await;

        // The same guard configuration; a client with form elicitation only.
        let form = Unserved::new(Some(&h.base));
        let scripted = ScriptedClient::new();
        scripted.script([Reply::Approve]);
        let client = connect(form.guard, era, scripted.clone()).await.unwrap();
        assert_ne!(
            client.call_tool(set_counter(4)).await.unwrap().is_error,
            Some(true)
        );
        assert_eq!(form.fixture.snapshot().counter, 4);
        assert_eq!(scripted.asked().len(), 1);
        assert_eq!(
            form.audit.records()[0].asked.as_ref().unwrap().channel,
            Channel::Form
        );
    }
}

#[tokio::test]
async fn a_url_only_client_cannot_write_without_a_page() {
    for era in ERAS {
        let bare = Unserved::new(None);
        let person = PageClient::new();
        let client = connect(bare.guard, era, person).await.unwrap();
        let result = client.call_tool(set_counter(4)).await.unwrap();
        assert_eq!(result.is_error, Some(true));
        assert_eq!(bare.fixture.snapshot().counter, 0);
        assert_eq!(bare.audit.outcomes(), [Outcome::RefusedNoElicitation]);
    }
}

#[tokio::test]
async fn unknown_and_malformed_page_ids_show_a_plain_page() {
    let h = PageHarness::start(Era::Legacy).await;
    for id in ["nope", &"ab".repeat(32), "%3Cscript%3E"] {
        let page = h.get(&format!("{}/approvals/{id}", h.base)).await;
        assert_eq!(page.status, 404, "{id}");
        assert!(page.body.contains("Not found"));
        assert_eq!(page.header("cache-control"), "no-store");
        let post = h
            .post(
                &format!("{}/approvals/{id}", h.base),
                Some(&"0".repeat(64)),
                "approve",
            )
            .await;
        assert_eq!(post.status, 404);
    }
    assert!(h.audit.records().is_empty());
    let _: Value = json!(h.era == Era::Legacy);
}

mod attacks;
mod link_refused;
