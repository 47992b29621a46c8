//! `GET` and `POST /approvals/{id}`: the page, and the person's answer (any other method is
//! refused with the same headers).

use std::sync::Arc;

use axum::{
    Form, Router,
    extract::{Path, State, rejection::FormRejection},
    response::{Html, IntoResponse, Response},
    routing::get,
};
use http::{HeaderValue, StatusCode, header};
use maud::Markup;
use mcp_write_guard_rmcp::{
    AuditRecord, Channel, ConnectionId, Outcome, PREPARE_ADMIN_ACTION, PrincipalRequest,
    PrincipalResolver,
    approval::{
        Approvals, Principal,
        page::{OpenPage, PageChoice, PageId, PagePerson, PageRefusal, PageView},
    },
    page::{PAGE_PATH, PageHost},
};
use serde::Deserialize;

use crate::html;

/// What the page's handlers share: the guard's side of the page.
type PageState = Arc<dyn PageHost>;

/// The approval page's routes, `GET` and `POST /approvals/{id}` (any other method is refused),
/// answering from the guard's store through `host`
/// ([`WriteGuard::approval_page_host`](mcp_write_guard_rmcp::WriteGuard::approval_page_host)).
pub fn router(host: Arc<dyn PageHost>) -> Router {
    Router::new()
        .route(PAGE_PATH, get(show).post(answer).fallback(not_allowed))
        .with_state(host)
}

/// The form: the CSRF token and the button pressed. Missing fields are read as empty, so that
/// the page, not the extractor, answers them.
#[derive(Debug, Deserialize)]
struct AnswerForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    decision: String,
}

async fn show(State(state): State<PageState>, Path(id): Path<String>) -> Response {
    // The URL's id, parsed at the edge: a malformed one is a page nobody opened.
    let Ok(id) = id.parse::<PageId>() else {
        let unknown = PageView::Unknown;
        return respond(status_of(&unknown), &html::closed(&unknown));
    };
    match Approvals::new(state.store())
        .show_page(&id, state.now())
        .await
    {
        PageView::Open(page) => respond(StatusCode::OK, &html::open(state.server_name(), &page)),
        other => respond(status_of(&other), &html::closed(&other)),
    }
}

async fn answer(
    State(state): State<PageState>,
    Path(id): Path<String>,
    parts: http::request::Parts,
    form: Result<Form<AnswerForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return respond(StatusCode::BAD_REQUEST, &html::bad_form());
    };
    let choice = match form.decision.as_str() {
        "approve" => PageChoice::Approve,
        "decline" => PageChoice::Decline,
        _ => return respond(StatusCode::BAD_REQUEST, &html::bad_form()),
    };
    let Ok(id) = id.parse::<PageId>() else {
        let unknown = PageRefusal::Unknown;
        return respond(refusal_status(unknown), &html::refused(unknown));
    };
    let now = state.now();
    let approvals = Approvals::new(state.store());
    // The page as it stands, for the audit record of a refusal.
    let shown = match approvals.show_page(&id, now).await {
        PageView::Open(page) => Some(page),
        _ => None,
    };
    let signed_in = state.sign_in().map(|resolver| person(resolver, parts));
    let person = match &signed_in {
        None => PagePerson::NotChecked,
        Some(Some(who)) => PagePerson::SignedIn(who),
        Some(None) => PagePerson::NotSignedIn,
    };
    match approvals
        .answer_page(&id, &form.csrf, person, choice, now)
        .await
    {
        Ok(answered) => {
            let reason = match choice {
                PageChoice::Approve => "approve",
                PageChoice::Decline => "decline",
            };
            record(&*state, &answered.page, Outcome::PageAnswered, reason);
            state.answered(&id);
            respond(StatusCode::OK, &html::answered(choice))
        }
        Err(refusal) => {
            if let Some(page) = &shown {
                record(&*state, page, Outcome::PageRefused, refusal.as_str());
            }
            respond(refusal_status(refusal), &html::refused(refusal))
        }
    }
}

/// Any other method: refused like every other answer of the page, with its headers.
async fn not_allowed() -> Response {
    let mut response = respond(StatusCode::METHOD_NOT_ALLOWED, &html::bad_method());
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD, POST"));
    response
}

/// A page event, with channel `page`, under the approval it answers.
fn record(host: &dyn PageHost, page: &OpenPage, outcome: Outcome, reason: &str) {
    let tool = if page.subject.issues_token {
        PREPARE_ADMIN_ACTION
    } else {
        page.subject.tool.as_str()
    };
    let record = AuditRecord::new(
        host.now(),
        Some(page.principal.clone()),
        tool,
        None,
        outcome,
        Some(reason.to_owned()),
    )
    .with_approval(Some(page.approval))
    .with_channel(Some(Channel::Page));
    host.record(&record);
}

/// Who the sign-in resolver names for this page request: it sees the request's parts in the
/// extensions, as for an MCP request over streamable HTTP, and a connection of its own (so a
/// per-connection resolver names nobody who made a call).
fn person(resolver: &dyn PrincipalResolver, parts: http::request::Parts) -> Option<Principal> {
    let mut extensions = rmcp::model::Extensions::new();
    extensions.insert(parts);
    let connection = ConnectionId::random();
    resolver.resolve(&PrincipalRequest::new(&extensions, &connection))
}

fn status_of(view: &PageView) -> StatusCode {
    match view {
        PageView::Open(_) => StatusCode::OK,
        PageView::Answered | PageView::Withdrawn | PageView::Expired => StatusCode::GONE,
        PageView::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        PageView::Unknown => StatusCode::NOT_FOUND,
    }
}

fn refusal_status(refusal: PageRefusal) -> StatusCode {
    match refusal {
        PageRefusal::Csrf | PageRefusal::OtherPerson => StatusCode::FORBIDDEN,
        PageRefusal::NotSignedIn => StatusCode::UNAUTHORIZED,
        PageRefusal::Answered | PageRefusal::Withdrawn | PageRefusal::Expired => StatusCode::GONE,
        PageRefusal::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        PageRefusal::Unknown => StatusCode::NOT_FOUND,
    }
}

/// Every response of the page: HTML, never stored, no script, never framed, no referrer.
fn respond(status: StatusCode, body: &Markup) -> Response {
    let Ok(policy) = HeaderValue::from_str(&html::CONTENT_SECURITY_POLICY) else {
        // Never without the policy.
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let mut response = (status, Html(body.0.clone())).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    response
}
