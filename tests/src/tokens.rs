//! Confirmation tokens for the store's token-gated `cancel_order`.

use mcp_write_guard_rmcp::PREPARE_ADMIN_ACTION;
use serde_json::{Value, json};

use crate::{Client, Failure, call, is_error, structured, text};

/// Asks `client` for a confirmation token for `cancel_order {orderId, reason}` through
/// `prepare_admin_action` (the scripted person must approve the intent) and returns it; a
/// refusal is an `Err` with its text.
pub async fn cancel_order_token(
    client: &Client,
    order_id: i64,
    reason: &str,
) -> Result<String, Failure> {
    let result = call(
        client,
        PREPARE_ADMIN_ACTION,
        json!({"tool": "cancel_order", "arguments": {"orderId": order_id, "reason": reason}}),
    )
    .await?;
    if is_error(&result) {
        return Err(format!("prepare refused: {}", text(&result)).into());
    }
    let token = structured(&result)?["confirmationToken"]
        .as_str()
        .ok_or("no token")?
        .to_owned();
    Ok(token)
}

/// The arguments of a `cancel_order` call for `order_id` with `reason` that carry the
/// confirmation `token`.
pub fn cancel_args(order_id: i64, reason: &str, token: &str) -> Value {
    json!({"orderId": order_id, "reason": reason, "confirmationToken": token})
}
