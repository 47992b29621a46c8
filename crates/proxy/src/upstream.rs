//! The upstream server: started as a child process over stdio or reached over streamable HTTP,
//! with the proxy as its MCP client. Its own requests to the client (elicitation, sampling,
//! `roots/list`) go to the downstream client; its notifications go to every connected client.

// Sampling, roots, logging and resource subscriptions are deprecated by SEP-2577, yet they are
// what clients and servers of the handshake era speak: the proxy forwards them.
#![expect(deprecated)]

use std::{ffi::OsString, sync::Arc, time::Duration};

use rmcp::{
    ClientHandler, ErrorData, Peer, RoleClient, RoleServer, ServiceExt as _,
    model::{
        ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
        CustomNotification, ElicitRequestParams, ElicitResult, Implementation, ListRootsResult,
        LoggingMessageNotificationParam, ProgressNotificationParam,
        ResourceUpdatedNotificationParam, ServerPeerInfo,
    },
    service::{NotificationContext, RequestContext, RunningService, ServiceError},
    transport::{
        StreamableHttpClientTransport, TokioChildProcess,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};

use crate::{
    downstream::{Downstream, token_text},
    tools::Tools,
};

/// How to reach the upstream server. Its `Debug` never shows the bearer token.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpstreamSpec {
    /// Start `program` with `args` and speak MCP over its stdin and stdout; it inherits the
    /// proxy's environment and its stderr.
    Command {
        /// The program.
        program: OsString,
        /// Its arguments.
        args: Vec<OsString>,
    },
    /// Connect to a streamable-HTTP endpoint.
    Http {
        /// The endpoint's URL (`https://host/mcp`).
        url: String,
        /// A bearer token sent with every request, if any.
        bearer: Option<String>,
    },
}

impl std::fmt::Debug for UpstreamSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Command { program, args } => f
                .debug_struct("Command")
                .field("program", program)
                .field("args", args)
                .finish(),
            Self::Http { url, bearer } => f
                .debug_struct("Http")
                .field("url", url)
                .field("bearer", &bearer.as_ref().map(|_| "(redacted)"))
                .finish(),
        }
    }
}

impl UpstreamSpec {
    /// A short name: the program's file name, or the URL's host.
    pub fn short_name(&self) -> String {
        match self {
            Self::Command { program, .. } => std::path::Path::new(program)
                .file_name()
                .unwrap_or(program)
                .to_string_lossy()
                .into_owned(),
            Self::Http { url, .. } => url
                .split("://")
                .nth(1)
                .and_then(|rest| rest.split(['/', '?', '#']).next())
                .unwrap_or(url)
                .to_owned(),
        }
    }

    /// What the logs call it: the program, or the URL (never the token).
    pub fn shown(&self) -> String {
        match self {
            Self::Command { program, .. } => program.to_string_lossy().into_owned(),
            Self::Http { url, .. } => url.clone(),
        }
    }
}

/// Why the upstream could not be reached.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// The command could not be started.
    #[error("could not start the upstream server {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The MCP handshake with the upstream failed.
    #[error("the upstream server {upstream} did not complete the MCP handshake: {reason}")]
    Handshake {
        /// The program or URL.
        upstream: String,
        /// Why.
        reason: String,
    },
    /// The upstream's tool list could not be read or fingerprinted.
    #[error("the upstream server's tool list: {0}")]
    Tools(String),
    /// The upstream's tools differ from the pin file.
    #[error("the upstream server's tools differ from the pin file:\n{0}")]
    PinMismatch(String),
}

/// The proxy's MCP client towards the upstream.
pub(crate) struct UpstreamClient {
    pub(crate) downstream: Arc<Downstream>,
    pub(crate) tools: Arc<Tools>,
    /// How the question of an upstream is labelled for the person.
    pub(crate) name: Arc<parking_lot::RwLock<String>>,
    /// The proxy serves one connection (stdio): its client takes the upstream's requests even
    /// when no request of it is in flight.
    pub(crate) single_client: bool,
}

/// What the proxy tells the upstream it can do: everything a client can, each forwarded to the
/// downstream client (which may still refuse).
fn client_config() -> ClientConfig {
    let capabilities: ClientCapabilities = serde_json::from_value(serde_json::json!({
        "roots": { "listChanged": true },
        "sampling": {},
        "elicitation": { "form": {}, "url": {} },
    }))
    .unwrap_or_default();
    ClientConfig::new(
        capabilities,
        Implementation::new("mcp-write-guard-proxy", env!("CARGO_PKG_VERSION")),
    )
}

/// The upstream's request answered by the client: `answer`, unless the upstream cancels its
/// request first.
async fn unless_cancelled<T>(
    answer: impl Future<Output = Result<T, ServiceError>>,
    context: &RequestContext<RoleClient>,
) -> Result<T, ErrorData> {
    tokio::select! {
        answer = answer => answer.map_err(service_error),
        () = context.ct.cancelled() => Err(ErrorData::internal_error("cancelled", None)),
    }
}

fn service_error(error: ServiceError) -> ErrorData {
    match error {
        ServiceError::McpError(error) => error,
        other => ErrorData::internal_error(format!("the client did not answer: {other}"), None),
    }
}

/// Spells the [`ClientHandler`] methods that pass an upstream notification on to every
/// connected client as it is: `METHOD(PARAMS) => NOTIFY;` for one with parameters,
/// `METHOD => NOTIFY;` for one without. A client that cannot be told is skipped.
macro_rules! broadcast {
    () => {};
    ($method:ident($params:ident) => $notify:ident; $($rest:tt)*) => {
        async fn $method(&self, params: $params, _context: NotificationContext<RoleClient>) {
            for peer in self.downstream.everyone() {
                let _ = peer.$notify(params.clone()).await;
            }
        }
        broadcast! { $($rest)* }
    };
    ($method:ident => $notify:ident; $($rest:tt)*) => {
        async fn $method(&self, _context: NotificationContext<RoleClient>) {
            for peer in self.downstream.everyone() {
                let _ = peer.$notify().await;
            }
        }
        broadcast! { $($rest)* }
    };
}

impl UpstreamClient {
    /// The client an upstream request is put to (see [`Downstream::target`]), or why there is
    /// none.
    fn asked(&self) -> Result<Peer<RoleServer>, ErrorData> {
        self.downstream
            .target(self.single_client)
            .map_err(|no| ErrorData::internal_error(no.reason(), None))
    }
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        client_config()
    }

    async fn create_elicitation(
        &self,
        mut request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let peer = self.asked()?;
        // A form with the guard's own `approve` answer is an imitation of the guard's question:
        // not forwarded, so a person never meets a look-alike of an approval.
        if let ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } = &request
            && requested_schema.properties.contains_key("approve")
        {
            return Err(ErrorData::invalid_params(
                "the proxy does not forward a question with an `approve` field: that is the \
                 guard's approval question",
                None,
            ));
        }
        // The person sees who asks: the upstream, not the guard, first, whatever the text.
        let label = format!("The server {} asks: ", self.name.read());
        match &mut request {
            ElicitRequestParams::FormElicitationParams { message, .. }
            | ElicitRequestParams::UrlElicitationParams { message, .. } => {
                let text =
                    message.trim_start_matches(|c: char| c.is_whitespace() || c.is_control());
                *message = format!("{label}{text}");
            }
            _ => {}
        }
        unless_cancelled(peer.create_elicitation(request), &context).await
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let peer = self.asked()?;
        unless_cancelled(peer.create_message(params), &context).await
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let peer = self.asked()?;
        unless_cancelled(peer.list_roots(), &context).await
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some((peer, token)) = self.downstream.progress_target(&params.progress_token) else {
            tracing::debug!(
                token = token_text(&params.progress_token),
                "progress from the upstream for no request in flight; dropped"
            );
            return;
        };
        let mut forwarded = params;
        forwarded.progress_token = token;
        let _ = peer.notify_progress(forwarded).await;
    }

    broadcast! {
        on_logging_message(LoggingMessageNotificationParam) => notify_logging_message;
        on_resource_updated(ResourceUpdatedNotificationParam) => notify_resource_updated;
        on_resource_list_changed => notify_resource_list_changed;
        on_prompt_list_changed => notify_prompt_list_changed;
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        // Read the new list before telling anyone, so that the next call is checked against it.
        if let Err(e) = self.tools.refresh(&context.peer).await {
            tracing::warn!("the upstream's tools changed and could not be read again: {e}");
        }
        for peer in self.downstream.everyone() {
            let _ = peer.notify_tool_list_changed().await;
        }
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        for peer in self.downstream.everyone() {
            let _ = peer
                .send_notification(rmcp::model::ServerNotification::CustomNotification(
                    notification.clone(),
                ))
                .await;
        }
    }
}

/// A live connection to the upstream.
pub(crate) struct Connection {
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) info: ServerPeerInfo,
}

/// Connects to the upstream described by `spec`, with `client` answering its requests. The
/// connection lives until the upstream ends it (a task waits for that and logs it).
pub(crate) async fn connect(
    spec: &UpstreamSpec,
    client: UpstreamClient,
) -> Result<Connection, UpstreamError> {
    let shown = spec.shown();
    let handshake = |e: &dyn std::fmt::Display| UpstreamError::Handshake {
        upstream: shown.clone(),
        reason: e.to_string(),
    };
    let running: RunningService<RoleClient, UpstreamClient> = match spec {
        UpstreamSpec::Command { program, args } => {
            let mut command = tokio::process::Command::new(program);
            command.args(args).kill_on_drop(true);
            let (transport, _) = TokioChildProcess::builder(command)
                .stderr(std::process::Stdio::inherit())
                .spawn()
                .map_err(|source| UpstreamError::Spawn {
                    program: shown.clone(),
                    source,
                })?;
            client.serve(transport).await.map_err(|e| handshake(&e))?
        }
        UpstreamSpec::Http { url, bearer } => {
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            if let Some(token) = bearer {
                config = config.auth_header(token.clone());
            }
            let transport = StreamableHttpClientTransport::from_config(config);
            client.serve(transport).await.map_err(|e| handshake(&e))?
        }
    };
    let peer = running.peer().clone();
    let info = peer
        .peer_info()
        .map(|info| (*info).clone())
        .ok_or_else(|| handshake(&"no server information after the handshake"))?;
    tokio::spawn(async move {
        match running.waiting().await {
            Ok(reason) => tracing::error!(
                ?reason,
                upstream = %shown,
                "the upstream server's connection ended: every call is now refused; restart \
                 the proxy to start it again"
            ),
            Err(e) => tracing::error!(upstream = %shown, "the upstream connection failed: {e}"),
        }
    });
    Ok(Connection { peer, info })
}

/// How long a request to the upstream may take unless `--upstream-timeout` says otherwise.
pub const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(300);
