//! [`WriteGuard`]: the wrapper, and its `ServerHandler` implementation.
//!
//! Every `ServerHandler` method forwards to the inner server. Three are changed on the way:
//! `list_tools` and `get_tool` advertise the rewritten annotations and output schemas (plus
//! `prepare_admin_action` when a tool is token-gated), and `call_tool` runs the write path
//! (see [`crate`] for the steps). Everything else is the inner server's answer, unchanged.

#![expect(
    deprecated,
    reason = "set_level, subscribe and unsubscribe are forwarded as they are"
)]

use std::{
    borrow::Cow,
    collections::{HashMap, HashSet},
    fmt,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicBool, AtomicU8, Ordering},
    },
};

use mcp_write_guard_core::{ApprovalPolicy, Approvals, Clock, Store};
use mcp_write_guard_envelope::EnvelopePolicy;
use rmcp::{
    ErrorData, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CancelTaskParams, CancelledNotificationParam,
        CompleteRequestParams, CompleteResult, CustomNotification, CustomRequest, CustomResult,
        DiscoverResult, GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams,
        GetSkillResult, GetTaskParams, GetTaskResult, InitializeRequestParams, InitializeResult,
        ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult,
        ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion,
        ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams,
        ReadResourceResponse, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
        SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
    },
    service::{
        MaybeSendFuture, NotificationContext, RequestContext, RoleServer, SubscriptionContext,
    },
};

use crate::{
    audit::{AuditSink, Redaction},
    config_check::{self, ConfigMistake},
    methods,
    principal::{ConnectionId, PrincipalResolver},
    prompt::PromptFn,
    tools::{self, PREPARE_ADMIN_ACTION},
    write_path::{Books, Channels, ToolCalls},
};

/// Configuration shared by every clone of a guard.
pub(crate) struct Shared<S> {
    pub(crate) inner: S,
    pub(crate) server_name: String,
    pub(crate) writes_enabled: bool,
    pub(crate) envelope: EnvelopePolicy,
    pub(crate) previews: HashSet<String>,
    pub(crate) prompts: HashMap<String, PromptFn>,
    pub(crate) policy: ApprovalPolicy,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) audit: Arc<dyn AuditSink>,
    pub(crate) redaction: Redaction,
    pub(crate) principal: Arc<dyn PrincipalResolver>,
    pub(crate) write_scope: Option<String>,
    pub(crate) allow_without_elicitation: bool,
    /// Run every preview twice and refuse when the two differ (a test aid).
    pub(crate) check_dry_previews: bool,
    /// The inner server's say on whether a tool may be called now
    /// ([`crate::WriteGuardBuilder::refuse_calls_when`]).
    pub(crate) refuse_calls: Option<RefuseCalls>,
    /// Whether the warning about stateless HTTP writes without a principal was logged.
    pub(crate) warned_stateless: AtomicBool,
    /// The builder mistakes, found when the whole tool list was first read.
    pub(crate) config_mistakes: OnceLock<Vec<ConfigMistake>>,
    /// What the last complete `tools/list` said about token-gated tools, so that `get_tool`
    /// (which cannot read the list itself) agrees with it: [`GATED_UNKNOWN`], [`GATED_YES`] or
    /// [`GATED_NO`].
    pub(crate) any_gated: AtomicU8,
    /// The classifications and definition digests of the tools calls named, while the inner
    /// server hands out the same tool.
    pub(crate) known_tools: tools::KnownTools,
    /// The approval page, when one is configured.
    #[cfg(feature = "approval-page")]
    pub(crate) pages: Option<Arc<crate::page::Pages>>,
    /// Reaches a person when the client cannot ask (with the approval page).
    #[cfg(feature = "approval-page")]
    pub(crate) notifier: Option<Arc<dyn crate::notify::Notifier>>,
    /// How often a waiting call sends `notifications/progress` (when its request asked for
    /// progress).
    pub(crate) progress_every: std::time::Duration,
    /// The questions a client of this process has in front of it now.
    pub(crate) asked_now: Arc<crate::write_path::PerQuestion>,
    /// The calls waiting for each question on this process (a few per question).
    pub(crate) waiting_now: Arc<crate::write_path::PerQuestion>,
    /// The questions a notice was delivered for on this process (notified once each).
    #[cfg(feature = "approval-page")]
    pub(crate) notices_sent: crate::write_path::NoticesSent,
}

impl<S> Shared<S> {
    /// The approvals, tokens, questions and pages in the guard's store.
    pub(crate) fn approvals(&self) -> Approvals<'_, dyn Store> {
        Approvals::new(&*self.store)
    }

    /// The guard's books, for one step.
    pub(crate) fn books(&self) -> Books<'_> {
        Books {
            approvals: self.approvals(),
            clock: &*self.clock,
            policy: &self.policy,
            audit: &*self.audit,
            redaction: &self.redaction,
        }
    }

    /// What the steps that call the inner server borrow, for one step.
    pub(crate) fn tool_calls(&self) -> ToolCalls<'_, S> {
        ToolCalls {
            server: &self.inner,
            previews: &self.previews,
            check_dry_previews: self.check_dry_previews,
            envelope: &self.envelope,
            server_name: &self.server_name,
            books: self.books(),
            known_tools: &self.known_tools,
        }
    }

    /// What the steps that ask a person borrow, for one step.
    pub(crate) fn channels(&self) -> Channels<'_, S> {
        Channels {
            tool_calls: self.tool_calls(),
            prompts: &self.prompts,
            server_name: &self.server_name,
            asked_now: &self.asked_now,
            waiting_now: &self.waiting_now,
            progress_every: self.progress_every,
            #[cfg(feature = "approval-page")]
            pages: self.pages.as_ref(),
            #[cfg(feature = "approval-page")]
            notifier: self.notifier.as_ref(),
            #[cfg(feature = "approval-page")]
            notices_sent: &self.notices_sent,
        }
    }
}

/// Whether the inner server refuses calls to a tool now: `Some(why)` refuses.
pub(crate) type RefuseCalls = Arc<dyn Fn(&Tool) -> Option<String> + Send + Sync>;

/// No complete tool list has been read yet.
pub(crate) const GATED_UNKNOWN: u8 = 0;
/// The last complete tool list had a token-gated tool.
const GATED_YES: u8 = 1;
/// The last complete tool list had no token-gated tool.
const GATED_NO: u8 = 2;

/// Wraps any rmcp [`ServerHandler`] so that every write needs a person's approval of that exact
/// change. Build one with [`WriteGuard::builder`](crate::WriteGuard::builder).
///
/// Cloning is cheap (the configuration, store and audit sink are shared), and **each clone is a
/// new connection** for the default [`crate::PerConnection`] principal: serve one clone per
/// connection, for example `move || Ok(guard.clone())` as rmcp's streamable-HTTP service
/// factory. A clone has answered no `initialize` handshake yet
/// ([`crate::PrincipalRequest::began_with_handshake`]).
pub struct WriteGuard<S> {
    pub(crate) shared: Arc<Shared<S>>,
    pub(crate) connection: ConnectionId,
    /// This value answered an `initialize` handshake: it serves a connection (a session over
    /// streamable HTTP), not one stateless request.
    pub(crate) handshake: AtomicBool,
}

impl<S> Clone for WriteGuard<S> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            connection: ConnectionId::random(),
            handshake: AtomicBool::new(false),
        }
    }
}

impl<S> fmt::Debug for WriteGuard<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteGuard")
            .field("server_name", &self.shared.server_name)
            .field("writes_enabled", &self.shared.writes_enabled)
            .field("connection", &self.connection)
            .finish_non_exhaustive()
    }
}

impl<S> WriteGuard<S> {
    /// The wrapped server.
    pub fn inner(&self) -> &S {
        &self.shared.inner
    }

    /// Whether writes are enabled (decided once, when the guard was built).
    pub fn writes_enabled(&self) -> bool {
        self.shared.writes_enabled
    }

    /// The connection this guard value serves (see [`crate::PerConnection`]).
    pub fn connection(&self) -> &ConnectionId {
        &self.connection
    }

    /// The builder settings that match no tool, or a tool of the wrong kind (see
    /// [`ConfigMistake`]): `None` until the guard first read the inner server's whole tool
    /// list (the first `tools/list`), then the mistakes found, each also logged as a warning.
    pub fn config_mistakes(&self) -> Option<&[ConfigMistake]> {
        self.shared.config_mistakes.get().map(Vec::as_slice)
    }
}

#[cfg(feature = "approval-page")]
impl<S> WriteGuard<S> {
    /// What the approval page's routes need from this guard (feature `approval-page`): `None`
    /// when no page is configured
    /// ([`WriteGuardBuilder::approval_page`](crate::WriteGuardBuilder::approval_page)). Hand it
    /// to `mcp_write_guard_page::router` and mount the routes where the page's base URL points:
    /// beside the MCP endpoint in the server's own axum router, or, when the MCP transport is
    /// stdio, on a listener of their own (bind loopback). Every clone of the guard serves the
    /// same pages.
    ///
    /// ```no_run
    /// # async fn run<S: rmcp::ServerHandler>(inner: S) -> Result<(), Box<dyn std::error::Error>> {
    /// use mcp_write_guard_rmcp::{WriteGuard, page::ApprovalPage};
    ///
    /// // Bind first (port 0: any free port), so the page's URL names the real address.
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let page = ApprovalPage::new(&format!("http://{}", listener.local_addr()?))?;
    /// let guard = WriteGuard::builder(inner).approval_page(page).build();
    /// let host = guard.approval_page_host().expect("a page is configured");
    /// let router = mcp_write_guard_page::router(host);
    /// tokio::spawn(async move { axum::serve(listener, router).await });
    /// // Serve `guard` over stdio as usual; clients with URL-mode elicitation are asked on the
    /// // page, the others with a form.
    /// # Ok(()) }
    /// ```
    pub fn approval_page_host(&self) -> Option<Arc<dyn crate::page::PageHost>> {
        let pages = self.shared.pages.clone()?;
        Some(Arc::new(crate::page::GuardPages {
            pages,
            store: Arc::clone(&self.shared.store),
            clock: Arc::clone(&self.shared.clock),
            audit: Arc::clone(&self.shared.audit),
            server_name: self.shared.server_name.clone(),
        }))
    }
}

impl<S: ServerHandler> WriteGuard<S> {
    /// Finds the builder mistakes against `classes` (once), and logs each.
    fn check_config(&self, classes: &[(String, mcp_write_guard_policy::ToolClass)]) {
        let shared = &self.shared;
        let found = config_check::mistakes(
            classes,
            shared.previews.iter().map(String::as_str),
            shared.prompts.keys().map(String::as_str),
            shared.envelope.trusted_reads(),
        );
        if shared.config_mistakes.set(found).is_ok() {
            for mistake in shared.config_mistakes.get().into_iter().flatten() {
                tracing::warn!(server = %shared.server_name, "guard configuration: {mistake}");
            }
        }
    }
}

/// Each tool of `list` with its class.
fn classes_of(list: &[Tool]) -> Vec<(String, mcp_write_guard_policy::ToolClass)> {
    list.iter()
        .map(|t| (t.name.to_string(), tools::classify_tool(t).class))
        .collect()
}

/// Whether any tool of `list` is token-gated.
fn any_token_gated(list: &[Tool]) -> bool {
    list.iter().any(|t| tools::classify_tool(t).token_gated)
}

/// `ServerHandler` methods that go to the inner server unchanged, one line each: `fn` for a
/// method that answers at once, `async fn` for one that returns rmcp's `impl Future`.
macro_rules! forward {
    () => {};
    (fn $name:ident($($arg:ident: $ty:ty),*) -> $out:ty; $($rest:tt)*) => {
        fn $name(&self, $($arg: $ty),*) -> $out {
            self.shared.inner.$name($($arg),*)
        }
        forward!($($rest)*);
    };
    (async fn $name:ident($($arg:ident: $ty:ty),*) -> $out:ty; $($rest:tt)*) => {
        fn $name(&self, $($arg: $ty),*) -> impl Future<Output = $out> + MaybeSendFuture + '_ {
            self.shared.inner.$name($($arg),*)
        }
        forward!($($rest)*);
    };
}

impl<S: ServerHandler> ServerHandler for WriteGuard<S> {
    forward! {
        fn negotiate_initialize(request: &InitializeRequestParams) -> Result<InitializeResult, ErrorData>;
        fn supported_protocol_versions() -> Cow<'static, [ProtocolVersion]>;
        fn accepted_subscription_filter(requested: &SubscriptionFilter) -> Option<SubscriptionFilter>;
        fn get_info() -> ServerConfig;
        async fn ping(context: RequestContext<RoleServer>) -> Result<(), ErrorData>;
        async fn discover(context: RequestContext<RoleServer>) -> Result<DiscoverResult, ErrorData>;
        async fn complete(request: CompleteRequestParams, context: RequestContext<RoleServer>) -> Result<CompleteResult, ErrorData>;
        async fn set_level(request: SetLevelRequestParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData>;
        async fn get_prompt(request: GetPromptRequestParams, context: RequestContext<RoleServer>) -> Result<GetPromptResponse, ErrorData>;
        async fn list_prompts(request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListPromptsResult, ErrorData>;
        async fn list_resources(request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListResourcesResult, ErrorData>;
        async fn list_resource_templates(request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListResourceTemplatesResult, ErrorData>;
        async fn read_resource(request: ReadResourceRequestParams, context: RequestContext<RoleServer>) -> Result<ReadResourceResponse, ErrorData>;
        async fn read_resource_directory(request: ReadResourceDirectoryRequestParams, context: RequestContext<RoleServer>) -> Result<ReadResourceDirectoryResult, ErrorData>;
        async fn listen(context: SubscriptionContext) -> Result<(), ErrorData>;
        async fn subscribe(request: SubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData>;
        async fn unsubscribe(request: UnsubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData>;
        async fn get_task(request: GetTaskParams, context: RequestContext<RoleServer>) -> Result<GetTaskResult, ErrorData>;
        async fn update_task(request: UpdateTaskParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData>;
        async fn cancel_task(request: CancelTaskParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData>;
        async fn list_skills(request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListSkillsResult, ErrorData>;
        async fn get_skill(request: GetSkillRequestParams, context: RequestContext<RoleServer>) -> Result<GetSkillResult, ErrorData>;
        async fn on_cancelled(notification: CancelledNotificationParam, context: NotificationContext<RoleServer>) -> ();
        async fn on_progress(notification: ProgressNotificationParam, context: NotificationContext<RoleServer>) -> ();
        async fn on_initialized(context: NotificationContext<RoleServer>) -> ();
        async fn on_roots_list_changed(context: NotificationContext<RoleServer>) -> ();
    }

    fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<InitializeResult, ErrorData>> + MaybeSendFuture + '_ {
        self.handshake.store(true, Ordering::Release);
        self.shared.inner.initialize(request, context)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.guard_call(request, context).await
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let had_cursor = request.as_ref().is_some_and(|r| r.cursor.is_some());
        let mut result = self
            .shared
            .inner
            .list_tools(request, context.clone())
            .await?;
        let gated_here = any_token_gated(&result.tools);
        if self.shared.config_mistakes.get().is_none() {
            let classes = if !had_cursor && result.next_cursor.is_none() {
                classes_of(&result.tools)
            } else {
                classes_of(&self.shared.tool_calls().all_tools(&context).await?)
            };
            self.check_config(&classes);
        }
        result.tools = std::mem::take(&mut result.tools)
            .into_iter()
            .filter(|t| t.name != PREPARE_ADMIN_ACTION)
            .map(|t| tools::advertise(t, &self.shared.envelope))
            .collect();
        if result.next_cursor.is_none() {
            let gated = gated_here
                || (had_cursor
                    && any_token_gated(&self.shared.tool_calls().all_tools(&context).await?));
            let seen = if gated { GATED_YES } else { GATED_NO };
            self.shared.any_gated.store(seen, Ordering::Relaxed);
            if gated {
                result.tools.push(tools::prepare_admin_action_tool());
            }
        }
        Ok(result)
    }

    /// The inner server's tool as `tools/list` advertises it. [`PREPARE_ADMIN_ACTION`] is
    /// described unless the last complete `tools/list` had no token-gated tool (before any
    /// list has been read, the guard cannot know, and describes it).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        if name == PREPARE_ADMIN_ACTION {
            let seen = self.shared.any_gated.load(Ordering::Relaxed);
            return (seen != GATED_NO).then(tools::prepare_admin_action_tool);
        }
        self.shared
            .inner
            .get_tool(name)
            .map(|t| tools::advertise(t, &self.shared.envelope))
    }

    fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CustomResult, ErrorData>> + MaybeSendFuture + '_ {
        // rmcp reads a request whose params do not fit its method's type (`tools/call` with
        // `arguments: [1]` or `requestState: 123`), or a notification's method sent with an
        // id, as a custom request of that name. It is answered here and never reaches the
        // inner server: a `tools/call` there would be a call the gates never saw.
        let refused = methods::refuse_custom_request(&request.method, request.params.as_ref());
        async move {
            match refused {
                Some(error) => Err(error),
                None => self.shared.inner.on_custom_request(request, context).await,
            }
        }
    }

    fn on_custom_notification(
        &self,
        notification: CustomNotification,
        context: NotificationContext<RoleServer>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        // Likewise a notification named after one of rmcp's own methods (a `tools/call` sent
        // without an id): no one waits for an answer, so it is dropped.
        let misfit = methods::is_rmcp_method(&notification.method);
        async move {
            if misfit {
                tracing::warn!(
                    method = ?notification.method,
                    "dropped a notification named after one of rmcp's own methods"
                );
            } else {
                self.shared
                    .inner
                    .on_custom_notification(notification, context)
                    .await;
            }
        }
    }
}
