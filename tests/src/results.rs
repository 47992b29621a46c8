//! Calling tools and reading their results.

use mcp_write_guard_rmcp::test_util::ScriptedClient;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};

use crate::{Client, Failure};

/// Calls `tool` with `arguments` (a JSON object) and returns the tool result. A JSON-RPC error
/// is an `Err`.
pub async fn call(
    client: &Client,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, Failure> {
    let Value::Object(arguments) = arguments else {
        return Err("arguments must be a JSON object".into());
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    Ok(client.call_tool(params).await?)
}

/// Asks `client` to adjust TLS-002 by -3 giving `reason`, with the person (`user`) scripted to
/// decline: asserts that the call was refused after exactly one question, and returns that
/// question. `case` names the case in a failure.
pub async fn declined_adjustment_question(
    client: &Client,
    user: &ScriptedClient,
    reason: &str,
    case: &str,
) -> Result<String, Failure> {
    let result = call(
        client,
        "adjust_stock",
        json!({"sku": "TLS-002", "delta": -3, "reason": reason}),
    )
    .await?;
    assert!(is_error(&result), "{case}: {result:?}");
    let mut messages = user.asked();
    assert_eq!(messages.len(), 1, "{case}: {messages:?}");
    Ok(messages.remove(0))
}

/// Whether the result is a tool error.
pub fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

/// All text content of the result, joined by newlines.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asserts that `result` is a tool error whose text contains `saying`; `case` names the case in
/// a failure.
#[track_caller]
pub fn assert_refused(result: &CallToolResult, saying: &str, case: &str) {
    assert!(is_error(result), "{case}: {result:?}");
    let text = text(result);
    assert!(text.contains(saying), "{case}: {text}");
}

/// The result's structured content.
pub fn structured(result: &CallToolResult) -> Result<&Value, Failure> {
    result
        .structured_content
        .as_ref()
        .ok_or_else(|| format!("no structured content in {result:?}").into())
}

/// The `data` inside the result's untrusted-data envelope; an error if the structured content
/// is not a well-formed envelope.
pub fn enveloped_data(result: &CallToolResult) -> Result<&Value, Failure> {
    let content = structured(result)?;
    mcp_write_guard_envelope::unwrap(content)
        .ok_or_else(|| format!("not an envelope: {content}").into())
}

/// What the result says, in plain words: the text content, with any untrusted-data envelope
/// taken off (`data` when it is a string, its compact JSON otherwise). Tool errors from the
/// store are written results too, so they arrive wrapped.
pub fn message(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.as_str()))
        .map(|text| {
            match mcp_write_guard_envelope::parse_text(text)
                .as_ref()
                .and_then(mcp_write_guard_envelope::unwrap)
            {
                Some(Value::String(data)) => data.clone(),
                Some(other) => other.to_string(),
                None => text.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
