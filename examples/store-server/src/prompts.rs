//! The words the user reads before approving a change.
//!
//! Each function builds the question from the tool's **preview**: the values the dry run
//! computed inside a rolled-back transaction (stock before and after, the priced order lines,
//! the order being cancelled). The user approves what the database says will happen, not what
//! the model claims.

use serde_json::Value;

use crate::db::{OrderCancellation, OrderPlacement, StockAdjustment};

/// "Adjust TLS-002 by -2 (damaged in transit): stock 3 -> 1".
pub(crate) fn adjust_stock(preview: &StockAdjustment) -> String {
    format!(
        "Adjust {} by {:+} ({}): stock {} -> {}",
        preview.sku, preview.delta, preview.reason, preview.previous_stock, preview.new_stock
    )
}

/// "Create a pending order for customer 1: 1 x TLS-002, total $109.99".
pub(crate) fn create_order(preview: &OrderPlacement) -> String {
    format!(
        "Create a pending order for customer {}: {}, total {}",
        preview.customer_id,
        join_lines(preview.lines.iter().map(|l| (l.quantity, l.sku.as_str()))),
        preview.total
    )
}

/// "Cancel order 1 for customer 1 (Harbor Street Garage): 1 x TLS-002, total $109.99. Reason:
/// wrong size. Stock goes back: TLS-002 2 -> 3".
pub(crate) fn cancel_order(preview: &OrderCancellation) -> String {
    let restock = preview
        .lines
        .iter()
        .map(|l| format!("{} {} -> {}", l.sku, l.previous_stock, l.new_stock))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "Cancel order {} for customer {} ({}): {}, total {}. Reason: {}. Stock goes back: {}",
        preview.order_id,
        preview.customer_id,
        preview.customer_name,
        join_lines(preview.lines.iter().map(|l| (l.quantity, l.sku.as_str()))),
        preview.total,
        preview.reason,
        restock
    )
}

fn join_lines<'a>(lines: impl Iterator<Item = (i64, &'a str)>) -> String {
    lines
        .map(|(quantity, sku)| format!("{quantity} x {sku}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The question for `tool`, built from the preview's structured content.
///
/// Returns `None` when the tool has no wording of its own here or the preview does not have the
/// expected shape; the guard then falls back to its generic wording, which lists every argument
/// and the raw preview.
pub fn for_preview(tool: &str, preview: &Value) -> Option<String> {
    match tool {
        "adjust_stock" => parse(preview).map(|p| adjust_stock(&p)),
        "create_order" => parse(preview).map(|p| create_order(&p)),
        "cancel_order" => parse(preview).map(|p| cancel_order(&p)),
        _ => None,
    }
}

fn parse<T: serde::de::DeserializeOwned>(preview: &Value) -> Option<T> {
    serde_json::from_value(preview.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{PlacedLine, RestockedLine};
    use serde_json::json;

    fn adjustment(delta: i64, previous: i64) -> StockAdjustment {
        StockAdjustment {
            sku: "TLS-002".into(),
            name: "Digital torque wrench".into(),
            delta,
            reason: "damaged in transit".into(),
            previous_stock: previous,
            new_stock: previous + delta,
        }
    }

    #[test]
    fn adjust_stock_names_sku_delta_reason_and_stock() {
        assert_eq!(
            adjust_stock(&adjustment(-2, 3)),
            "Adjust TLS-002 by -2 (damaged in transit): stock 3 -> 1"
        );
        assert_eq!(
            adjust_stock(&adjustment(5, 3)),
            "Adjust TLS-002 by +5 (damaged in transit): stock 3 -> 8"
        );
    }

    #[test]
    fn create_order_names_customer_lines_and_total() {
        let line = |sku: &str, quantity, cents| PlacedLine {
            sku: sku.into(),
            name: String::new(),
            quantity,
            unit_price: String::new(),
            line_total_cents: cents,
            previous_stock: 0,
            new_stock: 0,
        };
        let mut order = OrderPlacement {
            order_id: None,
            customer_id: 1,
            customer_name: "Harbor Street Garage".into(),
            status: "pending".into(),
            lines: vec![line("TLS-002", 1, 10999)],
            total: "$109.99".into(),
            total_cents: 10999,
        };
        assert_eq!(
            create_order(&order),
            "Create a pending order for customer 1: 1 x TLS-002, total $109.99"
        );
        order.lines.push(line("TLS-003", 4, 9996));
        order.total = "$209.95".into();
        assert_eq!(
            create_order(&order),
            "Create a pending order for customer 1: 1 x TLS-002, 4 x TLS-003, total $209.95"
        );
    }

    #[test]
    fn cancel_order_names_order_customer_lines_total_and_reason() {
        let preview = OrderCancellation {
            order_id: 7,
            customer_id: 1,
            customer_name: "Harbor Street Garage".into(),
            previous_status: "pending".into(),
            status: "cancelled".into(),
            reason: "customer changed their mind".into(),
            lines: vec![RestockedLine {
                sku: "TLS-002".into(),
                quantity: 1,
                previous_stock: 2,
                new_stock: 3,
            }],
            total: "$109.99".into(),
            total_cents: 10999,
        };
        assert_eq!(
            cancel_order(&preview),
            "Cancel order 7 for customer 1 (Harbor Street Garage): 1 x TLS-002, total $109.99. \
             Reason: customer changed their mind. Stock goes back: TLS-002 2 -> 3"
        );
    }

    #[test]
    fn for_preview_reads_the_structured_content() {
        let value = serde_json::to_value(adjustment(-2, 3)).unwrap();
        assert_eq!(
            for_preview("adjust_stock", &value).as_deref(),
            Some("Adjust TLS-002 by -2 (damaged in transit): stock 3 -> 1")
        );
        assert_eq!(
            for_preview("adjust_stock", &json!({"sku": "TLS-002"})),
            None
        );
        assert_eq!(for_preview("list_products", &value), None);
    }
}
