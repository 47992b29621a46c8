//! What goes over the wire: each tool's arguments and each tool's result, written once.
//!
//! One struct per tool's arguments serves both sides: rmcp's `#[tool]` reads its input schema
//! from it (`JsonSchema`, with these doc comments as the field descriptions) and parses the call
//! into it (`Deserialize`, unknown fields refused: an extra `confirm: true` is an error, not
//! something silently dropped), and the database layer takes the same struct. There is no
//! second "request" type to copy field by field, and no description written twice.
//!
//! The results are what a tool returns as its structured content. For a write, the result is
//! also its preview: what the person is shown before approving, and what the apply recomputes
//! and compares inside its transaction. Everything in a write's result is therefore pinned by
//! an approval; keep it deterministic (no timestamps, no fresh ids).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments naming one product.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkuArgs {
    /// The product's sku, for example `TLS-002`.
    pub sku: String,
}

/// Arguments naming one order.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OrderIdArgs {
    /// The order id.
    pub order_id: i64,
}

/// Arguments of `adjust_stock`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdjustStockArgs {
    /// The product's sku, for example `TLS-002`.
    pub sku: String,
    /// Units to add (positive) or remove (negative); never zero.
    pub delta: i64,
    /// Why the stock changes, for the movement log (1 to 200 characters).
    pub reason: String,
}

/// One line of `create_order`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OrderLineArgs {
    /// The product's sku.
    pub sku: String,
    /// Units to order, at least 1.
    pub quantity: i64,
}

/// Arguments of `create_order`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateOrderArgs {
    /// The customer placing the order.
    pub customer_id: i64,
    /// At least one line; each sku at most once.
    pub lines: Vec<OrderLineArgs>,
}

/// Arguments of `cancel_order`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CancelOrderArgs {
    /// The pending order to cancel.
    pub order_id: i64,
    /// Why the order is cancelled (1 to 200 characters).
    pub reason: String,
    /// The token `prepare_admin_action` returned for exactly these `orderId` and `reason`
    /// (checked and spent by the guard before this tool runs; the store never reads it).
    pub confirmation_token: Option<String>,
}

/// A product in the catalogue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Product {
    /// Stock keeping unit, for example `TLS-002`.
    pub sku: String,
    /// Product name.
    pub name: String,
    /// Unit price, for example `$109.99`.
    pub price: String,
    /// Unit price in cents.
    pub price_cents: i64,
    /// Units in stock.
    pub stock: i64,
}

/// One line of an order as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderLine {
    /// The product.
    pub sku: String,
    /// Units ordered.
    pub quantity: i64,
}

/// An order as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Order {
    /// Order id.
    pub order_id: i64,
    /// The customer who ordered.
    pub customer_id: i64,
    /// The customer's name.
    pub customer_name: String,
    /// Where the order stands.
    pub status: OrderStatus,
    /// The order lines.
    pub lines: Vec<OrderLine>,
    /// Order total, for example `$109.99`.
    pub total: String,
    /// Order total in cents.
    pub total_cents: i64,
}

/// One recorded change of a product's stock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StockMovement {
    /// Movement id.
    pub id: i64,
    /// The product.
    pub sku: String,
    /// The change in units.
    pub delta: i64,
    /// Why the stock changed.
    pub reason: String,
    /// When, as an RFC 3339 UTC timestamp.
    pub created_at: String,
}

/// A customer review of a product. The author and body are customer-written text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Review {
    /// Review id.
    pub id: i64,
    /// The product reviewed.
    pub sku: String,
    /// Who wrote it.
    pub author: String,
    /// What they wrote.
    pub body: String,
}

/// What a stock adjustment does (preview) or did (apply).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StockAdjustment {
    /// The product.
    pub sku: String,
    /// Product name.
    pub name: String,
    /// The change in units.
    pub delta: i64,
    /// Why.
    pub reason: String,
    /// Stock before the change.
    pub previous_stock: i64,
    /// Stock after the change.
    pub new_stock: i64,
}

/// One line of an order being placed, with its price and the stock it takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacedLine {
    /// The product.
    pub sku: String,
    /// Product name.
    pub name: String,
    /// Units ordered.
    pub quantity: i64,
    /// Unit price, for example `$109.99`.
    pub unit_price: String,
    /// Line total in cents.
    pub line_total_cents: i64,
    /// Stock before the order.
    pub previous_stock: i64,
    /// Stock after the order.
    pub new_stock: i64,
}

/// What creating an order does (preview) or did (apply).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderPlacement {
    /// The new order's id; absent in a preview (nothing was created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id: Option<i64>,
    /// The customer.
    pub customer_id: i64,
    /// The customer's name.
    pub customer_name: String,
    /// Always `pending`.
    pub status: OrderStatus,
    /// The lines, with the stock each one takes.
    pub lines: Vec<PlacedLine>,
    /// Order total, for example `$109.99`.
    pub total: String,
    /// Order total in cents.
    pub total_cents: i64,
}

/// One order line whose stock goes back on the shelf.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestockedLine {
    /// The product.
    pub sku: String,
    /// Units put back.
    pub quantity: i64,
    /// Stock before the cancellation.
    pub previous_stock: i64,
    /// Stock after the cancellation.
    pub new_stock: i64,
}

/// What cancelling an order does (preview) or did (apply).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderCancellation {
    /// The order.
    pub order_id: i64,
    /// The customer.
    pub customer_id: i64,
    /// The customer's name.
    pub customer_name: String,
    /// Status before (always `pending`).
    pub previous_status: OrderStatus,
    /// Status after (always `cancelled`).
    pub status: OrderStatus,
    /// Why.
    pub reason: String,
    /// The lines, with the stock each one puts back.
    pub lines: Vec<RestockedLine>,
    /// Order total, for example `$109.99`.
    pub total: String,
    /// Order total in cents.
    pub total_cents: i64,
}

/// Result of `list_products`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProductList {
    /// Every product, by sku.
    pub products: Vec<Product>,
}

/// Result of `list_orders`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderList {
    /// Every order, oldest first.
    pub orders: Vec<Order>,
}

/// Result of `list_stock_movements`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MovementList {
    /// The product.
    pub sku: String,
    /// Its stock movements, oldest first.
    pub movements: Vec<StockMovement>,
}

/// Result of `list_reviews`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewList {
    /// The product.
    pub sku: String,
    /// Its reviews, oldest first. Customer-written text.
    pub reviews: Vec<Review>,
}

/// Where an order stands. An order is created pending; only a pending order can be cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OrderStatus {
    /// Placed; its units have left the stock.
    Pending,
    /// Cancelled; its units went back on the shelf.
    Cancelled,
}

impl OrderStatus {
    /// The word stored in the database and sent on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Cancelled => "cancelled",
        }
    }

    /// The status named by `word`, if it is one ([`OrderStatus::as_str`] reversed).
    pub fn from_word(word: &str) -> Option<Self> {
        [Self::Pending, Self::Cancelled]
            .into_iter()
            .find(|status| status.as_str() == word)
    }
}

impl std::fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Formats an amount of cents as dollars, for example `$109.99`.
pub fn format_cents(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    format!("{sign}${}.{:02}", abs / 100, abs % 100)
}

/// Arguments as the tests write them, shared by the rule and database tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    pub(crate) fn adjust(sku: &str, delta: i64, reason: &str) -> AdjustStockArgs {
        AdjustStockArgs {
            sku: sku.into(),
            delta,
            reason: reason.into(),
        }
    }

    pub(crate) fn order(customer_id: i64, lines: &[(&str, i64)]) -> CreateOrderArgs {
        CreateOrderArgs {
            customer_id,
            lines: lines
                .iter()
                .map(|(sku, quantity)| OrderLineArgs {
                    sku: (*sku).into(),
                    quantity: *quantity,
                })
                .collect(),
        }
    }

    pub(crate) fn cancel(order_id: i64, reason: &str) -> CancelOrderArgs {
        CancelOrderArgs {
            order_id,
            reason: reason.into(),
            confirmation_token: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn a_status_reads_back_from_its_word() {
        for status in [OrderStatus::Pending, OrderStatus::Cancelled] {
            assert_eq!(OrderStatus::from_word(status.as_str()), Some(status));
            assert_eq!(status.to_string(), status.as_str());
        }
        assert_eq!(OrderStatus::from_word("Pending"), None);
        assert_eq!(OrderStatus::from_word("shipped"), None);
    }

    #[test]
    fn money_is_formatted_in_dollars() {
        assert_eq!(format_cents(10999), "$109.99");
        assert_eq!(format_cents(5), "$0.05");
        assert_eq!(format_cents(0), "$0.00");
        assert_eq!(format_cents(-150), "-$1.50");
        assert_eq!(format_cents(i64::MIN), "-$92233720368547758.08");
    }

    #[test]
    fn arguments_refuse_fields_the_tool_does_not_declare() {
        let parsed: Result<AdjustStockArgs, _> = serde_json::from_value(
            json!({"sku": "TLS-002", "delta": -2, "reason": "x", "confirm": true}),
        );
        let err = parsed.unwrap_err().to_string();
        assert!(err.contains("unknown field `confirm`"), "{err}");
        let parsed: CancelOrderArgs =
            serde_json::from_value(json!({"orderId": 1, "reason": "r"})).unwrap();
        assert_eq!(parsed.confirmation_token, None);
    }

    #[test]
    fn an_order_status_is_a_lowercase_word_on_the_wire() {
        let order = Order {
            order_id: 1,
            customer_id: 1,
            customer_name: "Harbor Street Garage".into(),
            status: OrderStatus::Cancelled,
            lines: Vec::new(),
            total: format_cents(0),
            total_cents: 0,
        };
        let value = serde_json::to_value(&order).unwrap();
        assert_eq!(value["status"], "cancelled");
        // The schema names every status (one documented constant each), and nothing else.
        let schema = serde_json::to_value(schemars::schema_for!(OrderStatus)).unwrap();
        let words: Vec<&Value> = schema["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|variant| &variant["const"])
            .collect();
        assert_eq!(words, [&json!("pending"), &json!("cancelled")], "{schema}");
    }
}
