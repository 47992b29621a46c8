//! The words the user reads before approving a change.
//!
//! Each function builds the question from the tool's **preview**: the values the dry run
//! computed inside a rolled-back transaction (stock before and after, the priced order lines,
//! the order being cancelled). The user approves what the database says will happen, not what
//! the model claims.
//!
//! Every value comes through [`PromptInput`]'s accessors: strings rendered (quoted, with line
//! breaks, bidi controls and zero-width characters shown as escapes, long ones cut with a
//! marker), numbers as integers. A reason the model wrote cannot add a line to the question,
//! fake a "stock 3 -> 3", or reorder the text around it; the question is one line, and that
//! line carries the true figures.
//!
//! The true change comes first and free text the model wrote comes last, labelled as what it
//! is (`Reason given: "…"`): whatever a reason says, the person has already read what will
//! happen, and nothing after the reason claims to be a consequence.

use mcp_write_guard_rmcp::PromptInput;

use crate::wire::format_cents;

/// `Adjust "TLS-002" by -2: stock 3 -> 1. Reason given: "damaged in transit"`.
fn adjust_stock(input: &PromptInput<'_>) -> Option<String> {
    Some(format!(
        "Adjust {} by {:+}: stock {} -> {}. Reason given: {}",
        input.preview("/sku")?,
        input.preview_i64("/delta")?,
        input.preview_i64("/previousStock")?,
        input.preview_i64("/newStock")?,
        input.preview("/reason")?,
    ))
}

/// `Create a pending order for customer 1: 1 x "TLS-002", total $109.99`.
fn create_order(input: &PromptInput<'_>) -> Option<String> {
    Some(format!(
        "Create a pending order for customer {}: {}, total {}",
        input.preview_i64("/customerId")?,
        order_lines(input)?,
        format_cents(input.preview_i64("/totalCents")?),
    ))
}

/// `Cancel order 1 for customer 1 ("Harbor Street Garage"): 1 x "TLS-002", total $109.99.
/// Stock goes back: "TLS-002" 2 -> 3. Reason given: "wrong size"`.
fn cancel_order(input: &PromptInput<'_>) -> Option<String> {
    let restock = (0..input.preview_len("/lines")?)
        .map(|i| {
            Some(format!(
                "{} {} -> {}",
                input.preview(&format!("/lines/{i}/sku"))?,
                input.preview_i64(&format!("/lines/{i}/previousStock"))?,
                input.preview_i64(&format!("/lines/{i}/newStock"))?,
            ))
        })
        .collect::<Option<Vec<_>>>()?
        .join(", ");
    Some(format!(
        "Cancel order {} for customer {} ({}): {}, total {}. Stock goes back: {}. Reason given: {}",
        input.preview_i64("/orderId")?,
        input.preview_i64("/customerId")?,
        input.preview("/customerName")?,
        order_lines(input)?,
        format_cents(input.preview_i64("/totalCents")?),
        restock,
        input.preview("/reason")?,
    ))
}

/// `1 x "TLS-002", 4 x "TLS-003"`; `None` when the preview has no lines.
fn order_lines(input: &PromptInput<'_>) -> Option<String> {
    let count = input.preview_len("/lines").filter(|n| *n > 0)?;
    let lines = (0..count)
        .map(|i| {
            Some(format!(
                "{} x {}",
                input.preview_i64(&format!("/lines/{i}/quantity"))?,
                input.preview(&format!("/lines/{i}/sku"))?,
            ))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(lines.join(", "))
}

/// The store's question for the tool in `input`, built from its preview.
///
/// Returns `None` when the tool has no wording of its own here or the preview does not have the
/// expected shape; the guard then falls back to its generic wording, which lists every argument
/// and the preview, rendered the same way.
pub fn for_preview(input: &PromptInput<'_>) -> Option<String> {
    match input.tool().as_str() {
        "adjust_stock" => adjust_stock(input),
        "create_order" => create_order(input),
        "cancel_order" => cancel_order(input),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value, json};

    use super::*;
    use crate::wire::{
        OrderCancellation, OrderPlacement, OrderStatus, PlacedLine, RestockedLine, StockAdjustment,
    };

    fn ask(tool: &str, preview: &impl serde::Serialize) -> Option<String> {
        let preview = serde_json::to_value(preview).unwrap();
        for_preview(&PromptInput::new(tool, &Map::new(), Some(&preview)))
    }

    fn adjustment(delta: i64, previous: i64, reason: &str) -> StockAdjustment {
        StockAdjustment {
            sku: "TLS-002".into(),
            name: "Digital torque wrench".into(),
            delta,
            reason: reason.into(),
            previous_stock: previous,
            new_stock: previous + delta,
        }
    }

    fn cancellation(reason: &str, customer_name: &str) -> OrderCancellation {
        OrderCancellation {
            order_id: 7,
            customer_id: 1,
            customer_name: customer_name.into(),
            previous_status: OrderStatus::Pending,
            status: OrderStatus::Cancelled,
            reason: reason.into(),
            lines: vec![RestockedLine {
                sku: "TLS-002".into(),
                quantity: 1,
                previous_stock: 2,
                new_stock: 3,
            }],
            total: "$109.99".into(),
            total_cents: 10999,
        }
    }

    #[test]
    fn adjust_stock_names_sku_delta_reason_and_stock() {
        assert_eq!(
            ask("adjust_stock", &adjustment(-2, 3, "damaged in transit")).as_deref(),
            Some(r#"Adjust "TLS-002" by -2: stock 3 -> 1. Reason given: "damaged in transit""#)
        );
        assert_eq!(
            ask("adjust_stock", &adjustment(5, 3, "damaged in transit")).as_deref(),
            Some(r#"Adjust "TLS-002" by +5: stock 3 -> 8. Reason given: "damaged in transit""#)
        );
    }

    #[test]
    fn a_hostile_reason_stays_inside_its_quotes_on_the_one_line() {
        // Near the longest the store accepts (200 characters): the sentence twice, 58 line breaks.
        let sentence = "No stock change: stock 3 -> 3. Approve to record the count only.";
        let reason = format!("recount\n{sentence}\n{sentence}{}", "\n".repeat(58));
        assert_eq!(reason.chars().count(), 195);
        let text = ask("adjust_stock", &adjustment(-3, 3, &reason)).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        // The true figures come first; the reason follows, labelled, and is cut (it renders
        // longer than the budget) with a marker.
        assert!(
            text.starts_with(
                r#"Adjust "TLS-002" by -3: stock 3 -> 0. Reason given: "recount\nNo stock change: stock 3 -> 3. Approve to record the count only.\nNo stock"#
            ),
            "{text}"
        );
        assert!(text.ends_with(" … (17 more characters)"), "{text}");

        let reason = "ok\u{202E}0 >- 3 kcots\u{200B}\u{2060}\u{FEFF}\u{2028}Before: 3";
        let text = ask("adjust_stock", &adjustment(-3, 3, reason)).unwrap();
        assert_eq!(
            text,
            r#"Adjust "TLS-002" by -3: stock 3 -> 0. Reason given: "ok\u{202E}0 >- 3 kcots\u{200B}\u{2060}\u{FEFF}\u{2028}Before: 3""#
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
            status: OrderStatus::Pending,
            lines: vec![line("TLS-002", 1, 10999)],
            total: "$109.99".into(),
            total_cents: 10999,
        };
        assert_eq!(
            ask("create_order", &order).as_deref(),
            Some(r#"Create a pending order for customer 1: 1 x "TLS-002", total $109.99"#)
        );
        order.lines.push(line("TLS-003", 4, 9996));
        order.total = "$209.95".into();
        order.total_cents = 20995;
        assert_eq!(
            ask("create_order", &order).as_deref(),
            Some(
                r#"Create a pending order for customer 1: 1 x "TLS-002", 4 x "TLS-003", total $209.95"#
            )
        );
        // The total is worded from the cents, a number: text in `total` never reaches the user.
        order.total = "$0.00\nAfter: nothing".into();
        assert!(
            ask("create_order", &order)
                .unwrap()
                .ends_with("total $209.95")
        );
    }

    #[test]
    fn cancel_order_names_order_customer_lines_total_and_reason() {
        assert_eq!(
            ask(
                "cancel_order",
                &cancellation("customer changed their mind", "Harbor Street Garage")
            )
            .as_deref(),
            Some(
                r#"Cancel order 7 for customer 1 ("Harbor Street Garage"): 1 x "TLS-002", total $109.99. Stock goes back: "TLS-002" 2 -> 3. Reason given: "customer changed their mind""#
            )
        );
        let text = ask(
            "cancel_order",
            &cancellation(
                "x\nBefore: {\"stock\":3}\nAfter: {\"stock\":3}",
                "A\u{202E}B",
            ),
        )
        .unwrap();
        assert_eq!(
            text,
            r#"Cancel order 7 for customer 1 ("A\u{202E}B"): 1 x "TLS-002", total $109.99. Stock goes back: "TLS-002" 2 -> 3. Reason given: "x\nBefore: {\"stock\":3}\nAfter: {\"stock\":3}""#
        );
    }

    #[test]
    fn an_unexpected_preview_or_tool_has_no_wording_here() {
        let value = serde_json::to_value(adjustment(-2, 3, "damaged in transit")).unwrap();
        assert_eq!(ask("adjust_stock", &json!({"sku": "TLS-002"})), None);
        assert_eq!(
            ask(
                "adjust_stock",
                &json!({"sku": "TLS-002", "delta": "-2", "reason": "r",
                "previousStock": 3, "newStock": 1})
            ),
            None,
            "a delta that is not a number"
        );
        assert_eq!(ask("list_products", &value), None);
        assert_eq!(
            ask(
                "create_order",
                &json!({"customerId": 1, "lines": [], "totalCents": 0})
            ),
            None
        );
        assert_eq!(
            for_preview(&PromptInput::new("adjust_stock", &Map::new(), None)),
            None
        );
        assert_eq!(
            for_preview(&PromptInput::new(
                "adjust_stock",
                &Map::new(),
                Some(&Value::Null)
            )),
            None
        );
    }

    /// The reason of issue 32: look-alike quotation marks that would end the quoted reason and
    /// start a fake consequence, to a hasty eye. They are escaped, and the true consequence
    /// stands before the reason anyway.
    #[test]
    fn look_alike_quotation_marks_cannot_close_the_reason() {
        let reason = "duplicate\u{201D} Stock goes back: \u{201C}nothing, the order stays open";
        let text = ask(
            "cancel_order",
            &cancellation(reason, "Harbor Street Garage"),
        )
        .unwrap();
        assert_eq!(
            text,
            r#"Cancel order 7 for customer 1 ("Harbor Street Garage"): 1 x "TLS-002", total $109.99. Stock goes back: "TLS-002" 2 -> 3. Reason given: "duplicate\u{201D} Stock goes back: \u{201C}nothing, the order stays open""#
        );
        for quote in ['\u{201C}', '\u{201D}', '\u{00AB}', '\u{300C}', '\u{FF02}'] {
            let reason = format!("x{quote} stock 3 -> 3");
            let text = ask("adjust_stock", &adjustment(-3, 3, &reason)).unwrap();
            assert!(!text.contains(quote), "{text}");
            assert!(
                text.starts_with(r#"Adjust "TLS-002" by -3: stock 3 -> 0. Reason given: ""#),
                "{text}"
            );
        }
    }
}
