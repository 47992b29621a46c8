//! Asking the user, in both protocol eras.
//!
//! - Below 2026-07-28: a server-to-client `elicitation/create` (form mode), with a timeout of
//!   whatever remains of the approval clock.
//! - At 2026-07-28 or later: server-to-client requests are not allowed; the guard returns an
//!   `InputRequiredResult` whose `requestState` names a server-side round-trip record, and the
//!   client answers by retrying the call with the elicitation result under [`INPUT_KEY`].
//!
//! Either way the answer becomes an [`Answer`] that mcp-write-guard-core turns into a decision.

use std::time::Duration;

use mcp_write_guard_core::{AnswerAction, answer::APPROVE_FIELD};
use rmcp::{
    model::{
        ElicitRequest, ElicitRequestParams, ElicitationCapability, ElicitationSchema, InputRequest,
        InputRequests, InputRequiredResult, InputResponses, ProtocolVersion,
    },
    service::{RequestContext, RoleServer, ServiceError},
};
use serde_json::Value;

use crate::error::Error;

/// The key of the guard's approval question in `inputRequests` / `inputResponses`.
pub const INPUT_KEY: &str = "mcp-write-guard/approve";

/// Which mechanism reaches the person on a request: the protocol era it was made in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[non_exhaustive]
pub enum Era {
    /// Below 2026-07-28: `elicitation/create` from server to client (`legacy` in records).
    #[serde(rename = "legacy")]
    Legacy,
    /// 2026-07-28 or later: `InputRequiredResult` and a retry (`2026-07-28` in records).
    #[serde(rename = "2026-07-28")]
    InputRounds,
}

impl Era {
    /// The name used in audit records (`legacy`, `2026-07-28`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Legacy => "legacy",
            Self::InputRounds => "2026-07-28",
        }
    }
}

pub(crate) fn era(context: &RequestContext<RoleServer>) -> Era {
    let input_rounds = context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
    if input_rounds {
        Era::InputRounds
    } else {
        Era::Legacy
    }
}

/// Whether the client declared form elicitation (`{}` counts as form, for older clients).
pub(crate) fn can_ask(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|caps| caps.elicitation)
        .is_some_and(|e| asks_by_form(&e))
}

/// Form elicitation, declared as such or as `{}` (before modes, elicitation was forms).
fn asks_by_form(declared: &ElicitationCapability) -> bool {
    declared.form.is_some() || declared.url.is_none()
}

/// Whether the client declared URL-mode elicitation (the approval page).
#[cfg(feature = "approval-page")]
pub(crate) fn can_ask_url(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|caps| caps.elicitation)
        .is_some_and(|e| asks_by_url(&e))
}

/// URL-mode elicitation, declared as such.
#[cfg(feature = "approval-page")]
fn asks_by_url(declared: &ElicitationCapability) -> bool {
    declared.url.is_some()
}

/// The question that sends the person to the approval page at `url`.
#[cfg(feature = "approval-page")]
pub(crate) fn url_request(
    message: String,
    url: String,
    elicitation_id: String,
) -> ElicitRequestParams {
    ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message,
        url,
        elicitation_id,
    }
}

/// Tells the client that the page's question `elicitation_id` was answered
/// (`notifications/elicitation/complete`), so it can close its prompt. Best effort.
pub(crate) async fn complete(context: &RequestContext<RoleServer>, elicitation_id: &str) {
    let notification = rmcp::model::CustomNotification::new(
        "notifications/elicitation/complete",
        Some(serde_json::json!({ "elicitationId": elicitation_id })),
    );
    let _ignored = context
        .peer
        .send_notification(rmcp::model::ServerNotification::CustomNotification(
            notification,
        ))
        .await;
}

/// The user's answer, before mcp-write-guard-core decides on it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub(crate) action: AnswerAction,
    pub(crate) content: Option<Value>,
}

impl Answer {
    /// Reads an elicitation result in its JSON form (`{"action": .., "content": ..}`).
    fn from_json(value: &Value) -> Result<Self, Error> {
        let action = value
            .get("action")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::MalformedAnswer("no action".into()))?;
        Ok(Self {
            action: AnswerAction::from_wire(action),
            content: value.get("content").cloned(),
        })
    }
}

/// The form the user fills in: a single required boolean `approve`.
pub(crate) fn approval_form(message: String) -> Result<ElicitRequestParams, Error> {
    let schema = ElicitationSchema::builder()
        .required_bool_property(APPROVE_FIELD, |b| b.title("Approve this change"))
        .build()
        .map_err(|e| Error::Form(e.to_owned()))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    })
}

/// Asks with `elicitation/create` (a form, or a URL) and waits for the answer until `timeout`,
/// whether or not the call is cancelled meanwhile: an answer that comes after the client gave up
/// on the call still counts for the question (the next call of the same change applies it).
pub(crate) fn ask_until(
    context: &RequestContext<RoleServer>,
    question: ElicitRequestParams,
    timeout: Duration,
) -> impl std::future::Future<Output = Result<Answer, Error>> + Send + 'static {
    let peer = context.peer.clone();
    async move {
        match peer
            .create_elicitation_with_timeout(question, Some(timeout))
            .await
        {
            Ok(result) => {
                let json = serde_json::to_value(&result)
                    .map_err(|e| Error::MalformedAnswer(e.to_string()))?;
                Answer::from_json(&json)
            }
            Err(ServiceError::Timeout { .. }) => Err(Error::TimedOut),
            Err(other) => Err(Error::Ask(other.to_string())),
        }
    }
}

/// The input-required result that asks the user on a 2026-07-28 session.
pub(crate) fn input_required(
    form: ElicitRequestParams,
    request_state: String,
) -> InputRequiredResult {
    let mut requests = InputRequests::new();
    requests.insert(
        INPUT_KEY.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(form)),
    );
    InputRequiredResult::new(Some(requests), Some(request_state))
}

/// The answer the client sent back with its retry.
pub(crate) fn answer_from_responses(responses: Option<InputResponses>) -> Result<Answer, Error> {
    let mut responses =
        responses.ok_or_else(|| Error::MalformedAnswer("no input responses".into()))?;
    let value = responses
        .remove(INPUT_KEY)
        .ok_or_else(|| Error::MalformedAnswer("no answer to the approval question".into()))?;
    Answer::from_json(&value)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_client_is_asked_by_form_unless_it_declared_url_mode_alone() {
        for (declared, by_form, by_url) in [
            (json!({}), true, false),
            (json!({"form": {}}), true, false),
            (json!({"form": {}, "url": {}}), true, true),
            (json!({"url": {}}), false, true),
        ] {
            let capability: ElicitationCapability =
                serde_json::from_value(declared.clone()).unwrap();
            assert_eq!(asks_by_form(&capability), by_form, "{declared}");
            #[cfg(feature = "approval-page")]
            assert_eq!(asks_by_url(&capability), by_url, "{declared}");
            let _ = by_url;
        }
    }

    #[test]
    fn the_form_asks_for_one_required_boolean() {
        let form = approval_form("Approve?".into()).unwrap();
        let json = serde_json::to_value(&form).unwrap();
        assert_eq!(json["mode"], "form");
        assert_eq!(json["requestedSchema"]["required"], json!(["approve"]));
        assert_eq!(
            json["requestedSchema"]["properties"]["approve"]["type"],
            "boolean"
        );
        assert_eq!(
            json["requestedSchema"]["properties"]
                .as_object()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn answers_are_read_from_the_retry_and_nothing_else() {
        let mut responses = InputResponses::new();
        responses.insert(
            INPUT_KEY.into(),
            json!({"action": "accept", "content": {"approve": true}}),
        );
        let answer = answer_from_responses(Some(responses)).unwrap();
        assert_eq!(answer.action, AnswerAction::Accept);
        assert_eq!(answer.content, Some(json!({"approve": true})));

        assert!(answer_from_responses(None).is_err());
        let mut other_key = InputResponses::new();
        other_key.insert("other".into(), json!({"action": "accept"}));
        assert!(answer_from_responses(Some(other_key)).is_err());
        let mut no_action = InputResponses::new();
        no_action.insert(INPUT_KEY.into(), json!({"content": {"approve": true}}));
        assert!(answer_from_responses(Some(no_action)).is_err());
        let mut not_object = InputResponses::new();
        not_object.insert(INPUT_KEY.into(), json!("accept"));
        assert!(answer_from_responses(Some(not_object)).is_err());
    }

    #[test]
    fn the_input_required_result_carries_the_form_and_the_state() {
        let form = approval_form("Approve?".into()).unwrap();
        let result = input_required(form, "state-1".into());
        let json = serde_json::to_value(&result).unwrap();
        assert_eq!(json["requestState"], "state-1");
        assert_eq!(
            json["inputRequests"][INPUT_KEY]["method"],
            "elicitation/create"
        );
        assert_eq!(
            json["inputRequests"][INPUT_KEY]["params"]["message"],
            "Approve?"
        );
    }
}
