//! The approval page: the person approves on the server's own page (URL-mode elicitation)
//! instead of in a form the client shows (feature `approval-page`).
//!
//! With a page configured ([`WriteGuardBuilder::approval_page`](crate::WriteGuardBuilder::approval_page)),
//! a client that declares URL-mode elicitation is asked with a link to
//! `<base>/approvals/<id>` instead of a form:
//!
//! - below 2026-07-28, with `elicitation/create` (`mode: "url"`); the guard then waits for the
//!   page's answer for what is left of the 2-minute clock, and says
//!   `notifications/elicitation/complete` when it has one;
//! - from 2026-07-28, with a url-mode input request in an `InputRequiredResult`; on the retry
//!   the guard looks at the page: answered, it decides; still open, it asks again with the same
//!   URL on the same clock; expired or withdrawn, it refuses.
//!
//! Either way the person's answer goes through the same decision as a form answer (only
//! Approve, inside the clock, approves), and the apply is the same compare-and-apply. The client
//! only says whether it opened the link: its `decline` or `cancel` is a denial (and closes the
//! page); its `accept` approves nothing by itself, whatever content it carries.
//!
//! **When a client supports both modes**, a guard with a page asks on the page: the answer then
//! travels from the person to the server directly, not through the client. A client with form
//! elicitation only keeps the form; a client with URL mode only can write only where a page is
//! configured.
//!
//! The page is served by crate `mcp-write-guard-page`'s `router`, from the guard's
//! [`WriteGuard::approval_page_host`](crate::WriteGuard::approval_page_host) (an axum router to
//! mount in the server's own HTTP server, or to serve on a listener of its own when the MCP
//! transport is stdio); the routes reach the guard only through [`PageHost`]. What it sends: server-rendered HTML with automatic
//! escaping (every argument and preview value through [`render_value`](crate::render_value)
//! first, as in the form's question), no script, a form that works without JavaScript, a CSRF
//! token bound to the page, `Cache-Control: no-store`, a `Content-Security-Policy` that allows
//! no script and no framing, `Referrer-Policy: no-referrer`. The page's id is 256 random bits
//! and single use; a page that was answered, withdrawn, has expired or never existed shows a
//! plain page saying so and changes nothing.
//!
//! Mounting the routes in a team's own axum server, or on a listener of their own beside a
//! stdio transport: crate `mcp-write-guard-page`'s README (keep them outside a bearer-token
//! layer: a browser sends no bearer token; put your own sign-in in front instead, see below).
//!
//! **Who may answer.** By default whoever holds the URL: it is sent only to the client that made
//! the call, and is single use. A deployment that signs people in on its web pages passes a
//! [`PrincipalResolver`] with [`ApprovalPage::sign_in`]: it sees the page request's
//! `http::request::Parts` (in the extensions, as rmcp's streamable HTTP puts them for MCP
//! requests, so a layer that verifies a session cookie and inserts an
//! [`AuthenticatedSubject`](crate::AuthenticatedSubject) works with
//! [`FromAuthenticatedSubject`](crate::FromAuthenticatedSubject)), and the page then refuses
//! anyone who is not the principal who made the call.

use std::{collections::HashMap, sync::Arc};

use mcp_write_guard_core::{Clock, Store, page::PageId};
use parking_lot::Mutex;
use time::OffsetDateTime;
use tokio::sync::Notify;

use crate::{
    audit::{AuditRecord, AuditSink},
    principal::PrincipalResolver,
};

/// The path the page is served at, under the base URL: `/approvals/{id}`.
pub const PAGE_PATH: &str = "/approvals/{id}";

/// Where the approval page is reachable, and who may answer on it.
#[derive(Clone, derive_more::Debug)]
pub struct ApprovalPage {
    base: String,
    /// `Debug` shows whether there is one.
    #[debug("{}", sign_in.is_some())]
    sign_in: Option<Arc<dyn PrincipalResolver>>,
}

/// The base URL of an approval page is not one a browser can open as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "approval page URL {0:?}: give the URL a browser opens for the page's router, scheme, host, \
     optional port and optional path as a browser writes them (lowercase host, no default \
     port), such as http://127.0.0.1:8080 or https://store.example.com/mcp-approvals"
)]
pub struct PageUrlError(String);

impl ApprovalPage {
    /// A page served under `base_url` (`http` or `https`, a host, an optional port and path; no
    /// user info, query or fragment): pages are at `<base_url>/approvals/<id>`.
    ///
    /// # Errors
    /// [`PageUrlError`] when `base_url` is not such a URL.
    pub fn new(base_url: &str) -> Result<Self, PageUrlError> {
        let error = || PageUrlError(base_url.to_owned());
        let url = url::Url::parse(base_url).map_err(|_| error())?;
        // Read by the WHATWG parser (the one browsers use) and accepted only when spelled as it
        // writes the URL back (a bare host may leave out the final `/`), so the link the person
        // opens is the URL the operator wrote, not another reading of an ambiguous spelling.
        let written = url.as_str();
        let as_written = written == base_url || written.strip_suffix('/') == Some(base_url);
        let plain = matches!(url.scheme(), "http" | "https")
            && url.has_host()
            && url.username().is_empty()
            && url.password().is_none()
            && url.query().is_none()
            && url.fragment().is_none();
        if !as_written || !plain {
            return Err(error());
        }
        Ok(Self {
            base: written.trim_end_matches('/').to_owned(),
            sign_in: None,
        })
    }

    /// Only the principal who made the call may answer: `resolver` names the person at the page
    /// from the page request (see the [module docs](self)); a request it names nobody for, or
    /// someone else, is refused and changes nothing.
    #[must_use]
    pub fn sign_in(mut self, resolver: Arc<dyn PrincipalResolver>) -> Self {
        self.sign_in = Some(resolver);
        self
    }

    /// The URL of the page `id`.
    pub(crate) fn url(&self, id: &PageId) -> String {
        format!("{}/approvals/{id}", self.base)
    }
}

/// What the approval page's web handlers need from the guard, and all they may do: read and
/// answer pages in the guard's store by its clock (mcp-write-guard-core's `show_page` and
/// `answer_page` decide), record the page's events in its audit trail, and wake the call that
/// waits for an answer. The page's router (crate `mcp-write-guard-page`) takes one; get it from
/// [`WriteGuard::approval_page_host`](crate::WriteGuard::approval_page_host).
pub trait PageHost: Send + Sync + 'static {
    /// The store the pages (and their questions) live in.
    fn store(&self) -> &dyn Store;
    /// Now, by the guard's clock.
    fn now(&self) -> OffsetDateTime;
    /// The server's name, shown on the page and in its audit records.
    fn server_name(&self) -> &str;
    /// Who is at the page, when it signs people in ([`ApprovalPage::sign_in`]); `None`:
    /// whoever holds the link may answer.
    fn sign_in(&self) -> Option<&dyn PrincipalResolver>;
    /// Records a page event (`page-answered`, `page-refused`) in the guard's audit trail.
    fn record(&self, record: &AuditRecord);
    /// Wakes the call waiting on this process for page `id`'s answer, if one waits.
    fn answered(&self, id: &PageId);
}

/// The guard's [`PageHost`]: its pages, store, clock, audit sink and name.
pub(crate) struct GuardPages {
    pub(crate) pages: Arc<Pages>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) audit: Arc<dyn AuditSink>,
    pub(crate) server_name: String,
}

impl PageHost for GuardPages {
    fn store(&self) -> &dyn Store {
        &*self.store
    }

    fn now(&self) -> OffsetDateTime {
        self.clock.now()
    }

    fn server_name(&self) -> &str {
        &self.server_name
    }

    fn sign_in(&self) -> Option<&dyn PrincipalResolver> {
        self.pages.config.sign_in.as_deref()
    }

    fn record(&self, record: &AuditRecord) {
        self.audit.record(record);
    }

    fn answered(&self, id: &PageId) {
        self.pages.answered(id);
    }
}

/// A configured page as the guard runs it: the configuration, and the calls waiting for an
/// answer on this process.
pub(crate) struct Pages {
    pub(crate) config: ApprovalPage,
    waiting: Mutex<HashMap<PageId, Arc<Notify>>>,
}

impl Pages {
    pub(crate) fn new(config: ApprovalPage) -> Self {
        Self {
            config,
            waiting: Mutex::new(HashMap::new()),
        }
    }

    /// The waiter of page `id`; answers wake it. Remove it with [`Self::forget`].
    pub(crate) fn waiter(&self, id: &PageId) -> Arc<Notify> {
        Arc::clone(self.waiting.lock().entry(*id).or_default())
    }

    pub(crate) fn forget(&self, id: &PageId) {
        self.waiting.lock().remove(id);
    }

    /// Wakes the call waiting for page `id`, if it waits on this process.
    pub(crate) fn answered(&self, id: &PageId) {
        if let Some(waiter) = self.waiting.lock().get(id) {
            waiter.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_url_is_one_a_browser_opens() {
        for good in [
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8080/",
            "https://store.example.com/mcp-approvals",
            "http://[::1]:9000",
        ] {
            assert!(ApprovalPage::new(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "127.0.0.1:8080",
            "ftp://example.com",
            "javascript:alert(1)",
            "http://user:pw@example.com",
            "http://example.com/?next=x",
            "http://example.com/#x",
            "http:///path",
            // Spellings the parser reads as another URL than the one written.
            "HTTP://Store.example.com",
            "https://store.example.com:443/a",
            "http://0x7f.1:8080",
            "http://127.0.0.1:08080",
            "http://example.com/a/../b",
            "http://example.com/a b",
        ] {
            assert!(ApprovalPage::new(bad).is_err(), "{bad}");
        }
        let id: PageId = "ab".repeat(32).parse().unwrap();
        assert_eq!(
            ApprovalPage::new("http://127.0.0.1:8080/")
                .unwrap()
                .url(&id),
            format!("http://127.0.0.1:8080/approvals/{}", "ab".repeat(32))
        );
    }
}
