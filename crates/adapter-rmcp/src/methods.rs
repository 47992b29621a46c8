//! The rmcp method table the guard refuses look-alike custom requests with.
//!
//! rmcp reads `ClientRequest` as an untagged enum whose last variant is `CustomRequest`, so a
//! request for one of rmcp's own methods whose params do not fit its type (`tools/call` with
//! `"arguments": [1]`) arrives as a custom request of that name, and a handler that dispatched
//! custom requests by name would run a `tools/call` the gates never saw. [`WriteGuard`] answers
//! such a request itself ([`refuse_custom_request`]) and never passes it on; a line transport
//! (mcp-write-guard-stdio's `JsonLines`) answers it before rmcp sees it ([`misfit`]). Names are
//! compared exactly, as JSON-RPC does.
//!
//! [`WriteGuard`]: crate::WriteGuard

use rmcp::model::{
    CallToolRequest, CancelTaskRequest, CancelledNotificationMethod, CompleteRequest, ConstString,
    DiscoverRequest, ErrorData, GetPromptRequest, GetSkillRequest, GetTaskRequest,
    InitializeRequest, InitializedNotificationMethod, ListPromptsRequest,
    ListResourceTemplatesRequest, ListResourcesRequest, ListSkillsRequest, ListToolsRequest,
    PingRequest, ProgressNotificationMethod, ReadResourceDirectoryRequest, ReadResourceRequest,
    RootsListChangedNotificationMethod, SubscriptionsListenRequest, UpdateTaskRequest,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The longest detail from serde that an error answer quotes, in characters.
const MAX_DETAIL_CHARS: usize = 200;

/// serde's account of what did not fit, cut to [`MAX_DETAIL_CHARS`] (it may quote the input).
fn shorten(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.char_indices().nth(MAX_DETAIL_CHARS) {
        Some((at, _)) => format!("{}…", text.get(..at).unwrap_or_default()),
        None => text,
    }
}

/// The `-32602` message for a request that rmcp read as a [`CustomRequest`] although its
/// method is one rmcp reads into a type of its own (every [`ClientRequest`](rmcp::model::ClientRequest) variant but the
/// custom one): its params do not fit that type. `None` for a method rmcp does not know, a
/// custom request proper.
///
/// [`CustomRequest`]: rmcp::model::CustomRequest
pub fn misfit(method: &str, params: Option<&Value>) -> Option<String> {
    let check = request_check(method)?;
    let detail = check(&request_value(method, params));
    Some(invalid_params_message(method, detail.as_ref()))
}

/// The error for a request rmcp read as a [`CustomRequest`](rmcp::model::CustomRequest)
/// although its method is one of rmcp's own: `-32602` for a request method whose params do not
/// fit ([`misfit`]), `-32600` for a notification's method sent with an id. `None` for a custom
/// request proper.
pub fn refuse_custom_request(method: &str, params: Option<&Value>) -> Option<ErrorData> {
    if let Some(message) = misfit(method, params) {
        return Some(ErrorData::invalid_params(message, None));
    }
    is_known_notification(method).then(|| {
        ErrorData::invalid_request(
            format!("Invalid Request: {method} is a notification; it takes no id"),
            None,
        )
    })
}

fn invalid_params_message(method: &str, detail: Option<&serde_json::Error>) -> String {
    match detail {
        Some(detail) => format!("Invalid params for {method}: {}", shorten(detail)),
        None => format!("Invalid params for {method}"),
    }
}

/// `{"method": method, "params": params}`, without `params` when there are none.
fn request_value(method: &str, params: Option<&Value>) -> Value {
    let mut request = serde_json::Map::new();
    request.insert("method".to_owned(), Value::String(method.to_owned()));
    if let Some(params) = params {
        request.insert("params".to_owned(), params.clone());
    }
    Value::Object(request)
}

/// Why a request with `{"method", "params"}` does not deserialize as its typed request, if
/// it does not.
type Check = fn(&Value) -> Option<serde_json::Error>;

fn check<T: DeserializeOwned>(request: &Value) -> Option<serde_json::Error> {
    T::deserialize(request).err()
}

/// The typed check of a method rmcp reads into its own request type (every
/// [`ClientRequest`](rmcp::model::ClientRequest) variant but the custom one); `None` for any other method.
#[allow(
    deprecated,
    reason = "rmcp still reads logging/setLevel and resources/(un)subscribe into their types"
)]
fn request_check(method: &str) -> Option<Check> {
    const CHECKS: [(&str, Check); 21] = [
        ("ping", check::<PingRequest>),
        ("initialize", check::<InitializeRequest>),
        ("server/discover", check::<DiscoverRequest>),
        ("completion/complete", check::<CompleteRequest>),
        ("logging/setLevel", check::<rmcp::model::SetLevelRequest>),
        ("prompts/get", check::<GetPromptRequest>),
        ("prompts/list", check::<ListPromptsRequest>),
        ("resources/list", check::<ListResourcesRequest>),
        (
            "resources/templates/list",
            check::<ListResourceTemplatesRequest>,
        ),
        ("resources/read", check::<ReadResourceRequest>),
        ("subscriptions/listen", check::<SubscriptionsListenRequest>),
        (
            "resources/subscribe",
            check::<rmcp::model::SubscribeRequest>,
        ),
        (
            "resources/unsubscribe",
            check::<rmcp::model::UnsubscribeRequest>,
        ),
        ("tools/call", check::<CallToolRequest>),
        ("tools/list", check::<ListToolsRequest>),
        ("tasks/get", check::<GetTaskRequest>),
        ("tasks/update", check::<UpdateTaskRequest>),
        ("tasks/cancel", check::<CancelTaskRequest>),
        ("skills/list", check::<ListSkillsRequest>),
        ("skills/get", check::<GetSkillRequest>),
        (
            "resources/directory/read",
            check::<ReadResourceDirectoryRequest>,
        ),
    ];
    CHECKS
        .iter()
        .find(|(known, _)| *known == method)
        .map(|(_, check)| *check)
}

/// Whether rmcp reads `method` into a request or notification type of its own: a custom
/// notification of that name is one that did not fit (a notification whose params do not, or a
/// request sent without an id), never a custom notification proper.
pub fn is_rmcp_method(method: &str) -> bool {
    request_check(method).is_some() || is_known_notification(method)
}

/// A method rmcp reads into its own notification type (every [`ClientNotification`](rmcp::model::ClientNotification) variant
/// but the custom one).
fn is_known_notification(method: &str) -> bool {
    [
        CancelledNotificationMethod::VALUE,
        ProgressNotificationMethod::VALUE,
        InitializedNotificationMethod::VALUE,
        RootsListChangedNotificationMethod::VALUE,
    ]
    .contains(&method)
}

/// The `-32602` message for a request of one of rmcp's own methods whose params do not fit its
/// type; `None` when they fit, or for any other method.
pub fn params_misfit(method: &str, params: Option<&Value>) -> Option<String> {
    let detail = request_check(method)?(&request_value(method, params))?;
    Some(invalid_params_message(method, Some(&detail)))
}
