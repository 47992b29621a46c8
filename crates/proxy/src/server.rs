//! [`ProxyServer`]: an rmcp `ServerHandler` that forwards every request to the upstream, so
//! that `mcp_write_guard_rmcp::WriteGuard` can wrap it like any other server.

// Sampling, roots, logging and resource subscriptions are deprecated by SEP-2577, yet they are
// what clients and servers of the handshake era speak: the proxy forwards them.
#![expect(deprecated)]

use std::{sync::Arc, time::Duration};

use mcp_write_guard_audit::{PinChange, PinFile};
use rmcp::{
    ErrorData, Peer, RoleClient, RoleServer, ServerHandler,
    model::{
        CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult,
        CancelledNotificationParam, ClientRequest, CompleteRequest, CompleteRequestParams,
        CompleteResult, ContentBlock, GetPromptRequest, GetPromptRequestParams, GetPromptResponse,
        ListPromptsRequest, ListPromptsResult, ListResourceTemplatesRequest,
        ListResourceTemplatesResult, ListResourcesRequest, ListResourcesResult, ListToolsResult,
        PaginatedRequestParams, ReadResourceRequest, ReadResourceRequestParams,
        ReadResourceResponse, ServerCapabilities, ServerConfig, ServerResult, SetLevelRequest,
        SetLevelRequestParams, SubscribeRequest, SubscribeRequestParams, Tool, UnsubscribeRequest,
        UnsubscribeRequestParams,
    },
    service::{NotificationContext, PeerRequestOptions, RequestContext, ServiceError},
};

use crate::{
    downstream::Downstream,
    tools::Tools,
    upstream::{self, DEFAULT_UPSTREAM_TIMEOUT, UpstreamClient, UpstreamError, UpstreamSpec},
};

/// Forwards every request to one upstream MCP server, and the upstream's requests and
/// notifications back to the clients. Wrap it in a `WriteGuard`: on its own it guards nothing
/// (its only refusals are calls to tools the pin withdrew, see [`ProxyServer::connect`]).
///
/// Cloning is cheap: every clone shares the one upstream connection.
#[derive(Clone)]
pub struct ProxyServer {
    shared: Arc<Shared>,
}

struct Shared {
    upstream: Peer<RoleClient>,
    info: ServerConfig,
    tools: Arc<Tools>,
    downstream: Arc<Downstream>,
    timeout: Duration,
    shown: String,
    name: String,
}

impl std::fmt::Debug for ProxyServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyServer")
            .field("upstream", &self.shared.shown)
            .finish_non_exhaustive()
    }
}

/// How a [`ProxyServer`] connects.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProxyOptions {
    /// The pin the upstream's tools are checked against, if any.
    pub pin: Option<PinFile>,
    /// How long one request to the upstream may take before it is cancelled and answered with
    /// an error ([`DEFAULT_UPSTREAM_TIMEOUT`]).
    pub timeout: Duration,
    /// The proxy serves one connection (stdio): the upstream's own requests (elicitation,
    /// sampling, `roots/list`) go to its client even when none of its requests is in flight.
    /// Off (the default), they go only to the client of the one request in flight.
    pub single_client: bool,
    /// What the person and the envelope call the upstream ([`ProxyServer::name`]); default: the
    /// upstream command's file name, or the URL's host. Never the name the upstream gives
    /// itself, which it chooses.
    pub name: Option<String>,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        Self {
            pin: None,
            timeout: DEFAULT_UPSTREAM_TIMEOUT,
            single_client: false,
            name: None,
        }
    }
}

impl ProxyOptions {
    /// Checks the upstream's tools against `pin`.
    #[must_use]
    pub fn with_pin(mut self, pin: PinFile) -> Self {
        self.pin = Some(pin);
        self
    }

    /// Calls the upstream `name` (see [`ProxyOptions::name`]).
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Serves one connection (stdio); see [`ProxyOptions::single_client`].
    #[must_use]
    pub fn with_single_client(mut self) -> Self {
        self.single_client = true;
        self
    }

    /// Cancels an upstream request after `timeout`.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// How a forwarded request failed.
enum Failed {
    /// The upstream answered with a JSON-RPC error.
    Upstream(ErrorData),
    /// The request never reached the upstream.
    NotSent(String),
    /// It reached the upstream, which then gave no answer (it stopped, or took too long).
    NoAnswer(String),
    /// The client cancelled it; the upstream was told.
    Cancelled,
}

impl Failed {
    fn into_error(self) -> ErrorData {
        match self {
            Self::Upstream(error) => error,
            Self::NotSent(why) | Self::NoAnswer(why) => ErrorData::internal_error(why, None),
            Self::Cancelled => ErrorData::internal_error("the request was cancelled", None),
        }
    }
}

fn refused(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(text.into())]).into()
}

impl ProxyServer {
    /// Connects to the upstream, reads its tools and checks them against the pin.
    ///
    /// # Errors
    ///
    /// The upstream cannot be started or reached, fails its handshake or its tool list, or
    /// (with a pin) offers tools that differ from the pin: [`UpstreamError::PinMismatch`] lists
    /// every difference, and the proxy does not start.
    pub async fn connect(spec: UpstreamSpec, options: ProxyOptions) -> Result<Self, UpstreamError> {
        let downstream = Arc::new(Downstream::default());
        let tools = Arc::new(Tools::new(options.pin));
        let name = Arc::new(parking_lot::RwLock::new(
            options.name.clone().unwrap_or_else(|| spec.short_name()),
        ));
        let client = UpstreamClient {
            downstream: Arc::clone(&downstream),
            tools: Arc::clone(&tools),
            name: Arc::clone(&name),
            single_client: options.single_client,
        };
        let connection = upstream::connect(&spec, client).await?;
        let name = name.read().clone();
        tools
            .refresh(&connection.peer)
            .await
            .map_err(UpstreamError::Tools)?;
        let changes = tools.pin_changes();
        if !changes.is_empty() {
            let lines: Vec<String> = changes.iter().map(|c| format!("  {c}")).collect();
            return Err(UpstreamError::PinMismatch(lines.join("\n")));
        }
        let mut info = ServerConfig::new(capabilities(&connection.info.capabilities));
        if let Some(server) = connection.info.server_info.clone() {
            info = info.with_server_info(server);
        }
        info.instructions.clone_from(&connection.info.instructions);
        Ok(Self {
            shared: Arc::new(Shared {
                upstream: connection.peer,
                info,
                tools,
                downstream,
                timeout: options.timeout,
                shown: spec.shown(),
                name,
            }),
        })
    }

    /// What the person and the envelope call the upstream: [`ProxyOptions::name`], or the
    /// command's file name, or the URL's host.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The name the upstream gave itself in its handshake (its own choice: shown in logs only).
    pub fn upstream_name(&self) -> &str {
        &self.shared.info.server_info.name
    }

    /// Why a call to `tool` is refused now, if it is: the upstream stopped, or the tool differs
    /// from the pin. Hand it to the guard
    /// (`WriteGuardBuilder::refuse_calls_when(move |t| proxy.refuses(t))`), so such a call is
    /// refused before anyone is asked; [`ServerHandler::call_tool`] refuses it too.
    pub fn refuses(&self, tool: &Tool) -> Option<String> {
        if self.shared.upstream.is_transport_closed() {
            return Some(format!(
                "`{}` was not called: the upstream server is not running (it stopped or closed \
                 its connection); nothing was sent to it. The proxy has to be restarted.",
                tool.name
            ));
        }
        self.shared.tools.withdrawn(&tool.name)
    }

    /// Every difference between the pin and the upstream's tools as last read (empty without a
    /// pin, or when they match).
    pub fn pin_changes(&self) -> Vec<PinChange> {
        self.shared.tools.pin_changes()
    }

    /// Sends `request` upstream on behalf of the client request `context`: its progress goes
    /// back to that client, its cancellation goes upstream, and it is cancelled after the
    /// timeout.
    async fn forward(
        &self,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, Failed> {
        let shared = &self.shared;
        if context.ct.is_cancelled() {
            return Err(Failed::Cancelled);
        }
        let mut in_flight = shared.downstream.begin(&context.peer);
        let handle = shared
            .upstream
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| {
                Failed::NotSent(format!(
                    "the upstream server is not running or not reachable ({e}); nothing was sent \
                     to it"
                ))
            })?;
        if let Some(token) = context.meta.get_progress_token() {
            in_flight.forward_progress(handle.progress_token.clone(), &context.peer, token);
        }
        let id = handle.id.clone();
        let cancel = |reason: &str| {
            let upstream = shared.upstream.clone();
            let notice = CancelledNotificationParam::new(Some(id.clone()), Some(reason.to_owned()));
            async move {
                let _ = upstream.notify_cancelled(notice).await;
            }
        };
        tokio::select! {
            answer = handle.await_response() => answer.map_err(|e| match e {
                ServiceError::McpError(error) => Failed::Upstream(error),
                other => Failed::NoAnswer(format!(
                    "the upstream server gave no answer ({other}): it may have stopped"
                )),
            }),
            () = context.ct.cancelled() => {
                cancel("the client cancelled the request").await;
                Err(Failed::Cancelled)
            }
            () = tokio::time::sleep(shared.timeout) => {
                cancel("the proxy's time limit passed").await;
                Err(Failed::NoAnswer(format!(
                    "the upstream server did not answer within {} s; the request was cancelled",
                    shared.timeout.as_secs()
                )))
            }
        }
    }

    /// The upstream's current tool list, read again.
    async fn fresh_tools(&self) -> Result<Vec<Tool>, ErrorData> {
        let refresh = self.shared.tools.refresh(&self.shared.upstream);
        tokio::time::timeout(self.shared.timeout, refresh)
            .await
            .unwrap_or_else(|_| Err("no answer within the proxy's time limit".to_owned()))
            .map_err(|e| {
                // The upstream's own words stay in the log: they are not the model's to read.
                tracing::warn!("the upstream server's tool list could not be read: {e}");
                ErrorData::internal_error(
                    "the upstream server's tool list could not be read (the proxy's log says \
                     why)",
                    None,
                )
            })
    }
}

/// What the proxy offers downstream: what the upstream offers of tools, resources, prompts,
/// completions and logging. Tasks and extensions are not offered (the guard refuses
/// task-augmented calls).
fn capabilities(upstream: &ServerCapabilities) -> ServerCapabilities {
    let mut offered = ServerCapabilities::default();
    offered.tools = Some(upstream.tools.clone().unwrap_or_default());
    offered.resources.clone_from(&upstream.resources);
    offered.prompts.clone_from(&upstream.prompts);
    offered.completions.clone_from(&upstream.completions);
    offered.logging.clone_from(&upstream.logging);
    offered
}

macro_rules! unexpected {
    ($method:literal) => {
        Err(ErrorData::internal_error(
            concat!(
                "the upstream server's answer to ",
                $method,
                " was of the wrong kind"
            ),
            None,
        ))
    };
}

/// Spells the [`ServerHandler`] methods that pass a request on to the upstream unchanged, each
/// as its own `ClientRequest` variant:
///
/// - `list METHOD: REQUEST => RESULT, "WHAT";` a paginated list, answered with the upstream's
///   `RESULT` as it is;
/// - `one METHOD(PARAMS): REQUEST => RESULT [as RESPONSE], "WHAT";` one request, answered with
///   the upstream's `RESULT` (turned into the method's `RESPONSE` where it has its own);
/// - `unit METHOD(PARAMS): REQUEST;` one request whose answer carries nothing.
///
/// An answer of another kind is an internal error naming `WHAT` ([`unexpected!`]); a failed
/// forward is its own error ([`Failed::into_error`]).
macro_rules! forward {
    () => {};
    ($(#[$doc:meta])* list $method:ident: $request:ident => $result:ident, $what:literal;
        $($rest:tt)*) => {
        $(#[$doc])*
        async fn $method(
            &self,
            request: Option<PaginatedRequestParams>,
            context: RequestContext<RoleServer>,
        ) -> Result<$result, ErrorData> {
            let request = $request {
                params: request,
                ..Default::default()
            };
            match self.forward(ClientRequest::$request(request), &context).await {
                Ok(ServerResult::$result(result)) => Ok(result),
                Ok(_) => unexpected!($what),
                Err(failed) => Err(failed.into_error()),
            }
        }
        forward! { $($rest)* }
    };
    ($(#[$doc:meta])* one $method:ident($params:ident): $request:ident
        => $result:ident as $response:ident, $what:literal; $($rest:tt)*) => {
        $(#[$doc])*
        async fn $method(
            &self,
            request: $params,
            context: RequestContext<RoleServer>,
        ) -> Result<$response, ErrorData> {
            match self
                .forward(ClientRequest::$request($request::new(request)), &context)
                .await
            {
                Ok(ServerResult::$result(result)) => Ok(result.into()),
                Ok(_) => unexpected!($what),
                Err(failed) => Err(failed.into_error()),
            }
        }
        forward! { $($rest)* }
    };
    ($(#[$doc:meta])* one $method:ident($params:ident): $request:ident
        => $result:ident, $what:literal; $($rest:tt)*) => {
        forward! {
            $(#[$doc])* one $method($params): $request => $result as $result, $what; $($rest)*
        }
    };
    ($(#[$doc:meta])* unit $method:ident($params:ident): $request:ident; $($rest:tt)*) => {
        $(#[$doc])*
        async fn $method(
            &self,
            request: $params,
            context: RequestContext<RoleServer>,
        ) -> Result<(), ErrorData> {
            match self
                .forward(ClientRequest::$request($request::new(request)), &context)
                .await
            {
                Ok(_) => Ok(()),
                Err(failed) => Err(failed.into_error()),
            }
        }
        forward! { $($rest)* }
    };
}

impl ServerHandler for ProxyServer {
    fn get_info(&self) -> ServerConfig {
        self.shared.info.clone()
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // The upstream asked for roots when it started, before any client was connected, and
        // got an error: a client that has roots makes it ask again.
        let has_roots = context
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        self.shared.downstream.connected(context.peer);
        if has_roots {
            let _ = self.shared.upstream.notify_roots_list_changed().await;
        }
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        let _ = self.shared.upstream.notify_roots_list_changed().await;
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.shared.tools.get(name)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // Every page at once, read afresh: the guard classifies what the upstream says now. A
        // tool the pin withdrew is not offered: its new description never reaches the model.
        let tools = self.fresh_tools().await?;
        Ok(ListToolsResult::with_all_items(
            tools
                .into_iter()
                .filter(|t| self.shared.tools.withdrawn(&t.name).is_none())
                .collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(tool) = self.shared.tools.get(&request.name)
            && let Some(why) = self.refuses(&tool)
        {
            return Ok(refused(why));
        }
        // A write (the policy's rule: anything not marked `readOnlyHint: true`) reads the tool
        // list again first, so that a change the upstream made since the guard last looked
        // (with or without telling) is seen before anything is sent.
        let before = self.shared.tools.get(&request.name);
        let write = before
            .as_ref()
            .and_then(|t| t.annotations.as_ref())
            .and_then(|a| a.read_only_hint)
            != Some(true);
        if write {
            let fresh = tokio::select! {
                fresh = self.fresh_tools() => fresh,
                () = context.ct.cancelled() => return Err(Failed::Cancelled.into_error()),
                () = tokio::time::sleep(self.shared.timeout) => Err(ErrorData::internal_error(
                    format!(
                        "the upstream server did not list its tools within {} s",
                        self.shared.timeout.as_secs()
                    ),
                    None,
                )),
            };
            if let Err(e) = fresh {
                return Ok(refused(format!(
                    "`{}` was not called: {}; nothing was sent to the server.",
                    request.name, e.message
                )));
            }
            if before != self.shared.tools.get(&request.name) {
                return Ok(refused(format!(
                    "The tool `{}` changed while this call was on its way to the server; nothing \
                     was sent. Ask again to see the new definition.",
                    request.name
                )));
            }
        }
        if let Some(why) = self.shared.tools.withdrawn(&request.name) {
            return Ok(refused(why));
        }
        let name = request.name.clone();
        let answer = self
            .forward(
                ClientRequest::CallToolRequest(CallToolRequest::new(request)),
                &context,
            )
            .await;
        Ok(match answer {
            Ok(ServerResult::CallToolResult(result)) => result.into(),
            Ok(ServerResult::InputRequiredResult(_) | ServerResult::CreateTaskResult(_)) => {
                refused(format!(
                    "The server answered `{name}` by asking for more input or with a task, which \
                     the proxy does not forward; what the server did with the call is unknown."
                ))
            }
            Ok(_) => refused(format!(
                "The server's answer to `{name}` was not a tool result; what it did with the call \
                 is unknown."
            )),
            Err(Failed::Upstream(error)) => refused(format!(
                "The server answered `{name}` with an error: {}",
                error.message
            )),
            Err(Failed::NotSent(why)) => refused(format!("`{name}` was not called: {why}.")),
            Err(Failed::NoAnswer(why)) => refused(format!(
                "`{name}` was sent, but {why}. Whether the server made the change is unknown; \
                 check before trying again."
            )),
            Err(Failed::Cancelled) => return Err(Failed::Cancelled.into_error()),
        })
    }

    forward! {
        /// Each page of the upstream's resources, as it answers.
        list list_resources: ListResourcesRequest => ListResourcesResult, "resources/list";
        /// Each page of the upstream's resource templates, as it answers.
        list list_resource_templates:
            ListResourceTemplatesRequest => ListResourceTemplatesResult, "resources/templates/list";
        /// Each page of the upstream's prompts, as it answers.
        list list_prompts: ListPromptsRequest => ListPromptsResult, "prompts/list";
        /// The upstream's resource.
        one read_resource(ReadResourceRequestParams): ReadResourceRequest
            => ReadResourceResult as ReadResourceResponse, "resources/read";
        /// The upstream's prompt.
        one get_prompt(GetPromptRequestParams): GetPromptRequest
            => GetPromptResult as GetPromptResponse, "prompts/get";
        /// The upstream's completions.
        one complete(CompleteRequestParams): CompleteRequest
            => CompleteResult, "completion/complete";
        /// Passed on; whatever the upstream answers without an error is done.
        unit subscribe(SubscribeRequestParams): SubscribeRequest;
        /// Passed on; whatever the upstream answers without an error is done.
        unit unsubscribe(UnsubscribeRequestParams): UnsubscribeRequest;
        /// Passed on; whatever the upstream answers without an error is done.
        unit set_level(SetLevelRequestParams): SetLevelRequest;
    }
}
