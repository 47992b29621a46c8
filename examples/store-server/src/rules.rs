//! The store's business rules, as pure functions: no SQL, no IO, no clock.
//!
//! Every write is decided in two steps, and each step is a function here:
//!
//! 1. **The request alone** ([`check_adjustment`], [`check_order`], [`check_cancellation`]):
//!    bounds and shape that no state can change (a non-zero delta, a reason, at least one order
//!    line, each sku once). It runs before anything is read, and returns the request as
//!    [`Checked`], the only way to reach step 2.
//! 2. **The request against the current state** ([`plan_adjustment`], [`plan_order`],
//!    [`plan_cancellation`]): the database layer reads the rows the rule needs and passes them
//!    in; the function returns the change exactly as the tool reports it (the preview the
//!    person approves) or the [`RuleViolation`] that says no. Stock may not go negative, an
//!    order takes only what is in stock, only a pending order can be cancelled, and every amount
//!    is computed with checked arithmetic (a total that does not fit is refused, never wrapped).
//!
//! The database layer then writes exactly the plan, inside the transaction it read the state
//! in. Because the rules are plain functions of their inputs, the preview and the apply cannot
//! decide differently on the same rows, and the tests below can state the invariants for any
//! input (proptest) without a database.
//!
//! ```
//! use store_server::{AdjustStockArgs, Product, RuleViolation, check_adjustment, plan_adjustment};
//!
//! let wrench = Product {
//!     sku: "TLS-002".into(),
//!     name: "Digital torque wrench".into(),
//!     price: "$109.99".into(),
//!     price_cents: 10999,
//!     stock: 3,
//! };
//! let args = AdjustStockArgs { sku: "TLS-002".into(), delta: -4, reason: "damaged".into() };
//! let checked = check_adjustment(&args)?; // the request alone is fine
//! let refused = plan_adjustment(checked, wrench).unwrap_err(); // the state says no
//! assert!(matches!(refused, RuleViolation::NegativeStock { stock: 3, delta: -4, .. }));
//! # Ok::<(), RuleViolation>(())
//! ```

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::ops::Deref;

use crate::wire::{
    AdjustStockArgs, CancelOrderArgs, CreateOrderArgs, Order, OrderCancellation, OrderPlacement,
    OrderStatus, PlacedLine, Product, RestockedLine, StockAdjustment, format_cents,
};

/// Longest accepted `reason` text, in characters.
pub const MAX_REASON_CHARS: usize = 200;
/// Most lines accepted in one order.
pub const MAX_ORDER_LINES: usize = 50;
/// Largest quantity accepted on one order line.
pub const MAX_LINE_QUANTITY: i64 = 10_000;
/// Largest stock change accepted in one adjustment (either direction).
pub const MAX_ABS_DELTA: i64 = 1_000_000;

/// A business rule said no. Each message is written for the person (and the model) reading the
/// tool result: what was wrong and what to do instead. Nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleViolation {
    /// No product has this sku.
    #[error("unknown sku {0:?}; list_products shows the skus the store carries")]
    UnknownSku(String),
    /// No customer has this id.
    #[error("unknown customer {0}; check the customer id")]
    UnknownCustomer(i64),
    /// No order has this id.
    #[error("unknown order {0}; list_orders shows the existing orders")]
    UnknownOrder(i64),
    /// The order is not pending any more.
    #[error("order {order_id} is {status}, only a pending order can be cancelled")]
    OrderNotPending {
        /// The order.
        order_id: i64,
        /// Its current status.
        status: OrderStatus,
    },
    /// The adjustment would take the stock below zero.
    #[error("{sku} has {stock} in stock; adjusting by {delta} would make it negative")]
    NegativeStock {
        /// The product.
        sku: String,
        /// The current stock.
        stock: i64,
        /// The requested change.
        delta: i64,
    },
    /// An order line asks for more than is in stock.
    #[error("{sku} has {available} in stock, the order asks for {requested}")]
    InsufficientStock {
        /// The product.
        sku: String,
        /// The current stock.
        available: i64,
        /// The quantity asked for.
        requested: i64,
    },
    /// The stock change is zero or larger than allowed.
    #[error("delta must be a non-zero whole number between -{max} and {max}, got {delta}", max = MAX_ABS_DELTA)]
    BadDelta {
        /// The requested change.
        delta: i64,
    },
    /// An order line's quantity is out of range.
    #[error("quantity for {sku} must be between 1 and {max}, got {quantity}", max = MAX_LINE_QUANTITY)]
    BadQuantity {
        /// The product.
        sku: String,
        /// The quantity asked for.
        quantity: i64,
    },
    /// The order has no lines.
    #[error("an order needs at least one line")]
    EmptyOrder,
    /// The order has more lines than allowed.
    #[error("an order may have at most {max} lines, got {count}", max = MAX_ORDER_LINES)]
    TooManyLines {
        /// The number of lines sent.
        count: usize,
    },
    /// The same sku appears on two lines.
    #[error("{0} appears on more than one line; put its whole quantity on one line")]
    DuplicateSku(String),
    /// The reason is empty or too long.
    #[error("reason must be between 1 and {max} characters", max = MAX_REASON_CHARS)]
    BadReason,
    /// A money amount or a stock level does not fit.
    #[error("the amounts in this request are too large")]
    Overflow,
}

/// A request that passed the checks on its own ([`check_adjustment`], [`check_order`],
/// [`check_cancellation`]); only those functions make one, so a plan cannot be computed for an
/// unchecked request. Dereferences to the request.
#[derive(Debug)]
pub struct Checked<'a, T>(&'a T);

// By hand: a derive would ask `T: Copy`, but only the reference is copied.
impl<T> Clone for Checked<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Checked<'_, T> {}

impl<T> Deref for Checked<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0
    }
}

/// A reason is 1 to [`MAX_REASON_CHARS`] characters, and not only blanks.
pub fn check_reason(reason: &str) -> Result<(), RuleViolation> {
    if reason.trim().is_empty() || reason.chars().count() > MAX_REASON_CHARS {
        return Err(RuleViolation::BadReason);
    }
    Ok(())
}

/// An adjustment has a reason and a non-zero delta of at most [`MAX_ABS_DELTA`] either way.
pub fn check_adjustment(
    args: &AdjustStockArgs,
) -> Result<Checked<'_, AdjustStockArgs>, RuleViolation> {
    check_reason(&args.reason)?;
    if args.delta == 0 || args.delta.unsigned_abs() > MAX_ABS_DELTA.unsigned_abs() {
        return Err(RuleViolation::BadDelta { delta: args.delta });
    }
    Ok(Checked(args))
}

/// An order has 1 to [`MAX_ORDER_LINES`] lines, each quantity between 1 and
/// [`MAX_LINE_QUANTITY`], each sku on one line only.
pub fn check_order(args: &CreateOrderArgs) -> Result<Checked<'_, CreateOrderArgs>, RuleViolation> {
    if args.lines.is_empty() {
        return Err(RuleViolation::EmptyOrder);
    }
    if args.lines.len() > MAX_ORDER_LINES {
        return Err(RuleViolation::TooManyLines {
            count: args.lines.len(),
        });
    }
    let mut seen = BTreeSet::new();
    for line in &args.lines {
        if !(1..=MAX_LINE_QUANTITY).contains(&line.quantity) {
            return Err(RuleViolation::BadQuantity {
                sku: line.sku.clone(),
                quantity: line.quantity,
            });
        }
        if !seen.insert(line.sku.as_str()) {
            return Err(RuleViolation::DuplicateSku(line.sku.clone()));
        }
    }
    Ok(Checked(args))
}

/// A cancellation has a reason. (The confirmation token is the guard's business.)
pub fn check_cancellation(
    args: &CancelOrderArgs,
) -> Result<Checked<'_, CancelOrderArgs>, RuleViolation> {
    check_reason(&args.reason)?;
    Ok(Checked(args))
}

/// The stock after moving `delta` units of `sku` from `stock`: refused when it would go below
/// zero or does not fit.
pub fn stock_after(sku: &str, stock: i64, delta: i64) -> Result<i64, RuleViolation> {
    let after = stock.checked_add(delta).ok_or(RuleViolation::Overflow)?;
    if after < 0 {
        return Err(RuleViolation::NegativeStock {
            sku: sku.to_owned(),
            stock,
            delta,
        });
    }
    Ok(after)
}

/// `quantity` units at `price_cents` each, refused when it does not fit.
pub fn line_total(price_cents: i64, quantity: i64) -> Result<i64, RuleViolation> {
    price_cents
        .checked_mul(quantity)
        .ok_or(RuleViolation::Overflow)
}

/// The sum of `line_totals`, refused when it does not fit.
pub fn order_total(line_totals: impl IntoIterator<Item = i64>) -> Result<i64, RuleViolation> {
    line_totals
        .into_iter()
        .try_fold(0i64, |total, line| total.checked_add(line))
        .ok_or(RuleViolation::Overflow)
}

/// What `args` does to `product`, as of its current stock.
pub fn plan_adjustment(
    args: Checked<'_, AdjustStockArgs>,
    product: Product,
) -> Result<StockAdjustment, RuleViolation> {
    let new_stock = stock_after(&product.sku, product.stock, args.delta)?;
    Ok(StockAdjustment {
        sku: product.sku,
        name: product.name,
        delta: args.delta,
        reason: args.reason.clone(),
        previous_stock: product.stock,
        new_stock,
    })
}

/// The pending order `args` places for `customer_name`, priced and taken from the stock of
/// `products` (the current rows of the skus it names; a sku missing from it is unknown). The
/// result has no order id: the database gives one when it inserts the order.
pub fn plan_order(
    args: Checked<'_, CreateOrderArgs>,
    customer_name: String,
    products: &BTreeMap<String, Product>,
) -> Result<OrderPlacement, RuleViolation> {
    let mut lines = Vec::with_capacity(args.lines.len());
    for line in &args.lines {
        let product = products
            .get(&line.sku)
            .ok_or_else(|| RuleViolation::UnknownSku(line.sku.clone()))?;
        if product.stock < line.quantity {
            return Err(RuleViolation::InsufficientStock {
                sku: product.sku.clone(),
                available: product.stock,
                requested: line.quantity,
            });
        }
        lines.push(PlacedLine {
            sku: product.sku.clone(),
            name: product.name.clone(),
            quantity: line.quantity,
            unit_price: product.price.clone(),
            line_total_cents: line_total(product.price_cents, line.quantity)?,
            previous_stock: product.stock,
            new_stock: product.stock - line.quantity,
        });
    }
    let total_cents = order_total(lines.iter().map(|line| line.line_total_cents))?;
    Ok(OrderPlacement {
        order_id: None,
        customer_id: args.customer_id,
        customer_name,
        status: OrderStatus::Pending,
        lines,
        total: format_cents(total_cents),
        total_cents,
    })
}

/// What cancelling `order` does: it must be pending, and each line's units go back onto the
/// current stock in `stocks` (by sku; a sku missing from it is unknown).
pub fn plan_cancellation(
    args: Checked<'_, CancelOrderArgs>,
    order: Order,
    stocks: &BTreeMap<String, i64>,
) -> Result<OrderCancellation, RuleViolation> {
    if order.status != OrderStatus::Pending {
        return Err(RuleViolation::OrderNotPending {
            order_id: order.order_id,
            status: order.status,
        });
    }
    let lines = order
        .lines
        .iter()
        .map(|line| {
            let stock = *stocks
                .get(&line.sku)
                .ok_or_else(|| RuleViolation::UnknownSku(line.sku.clone()))?;
            Ok(RestockedLine {
                sku: line.sku.clone(),
                quantity: line.quantity,
                previous_stock: stock,
                new_stock: stock
                    .checked_add(line.quantity)
                    .ok_or(RuleViolation::Overflow)?,
            })
        })
        .collect::<Result<_, RuleViolation>>()?;
    Ok(OrderCancellation {
        order_id: order.order_id,
        customer_id: order.customer_id,
        customer_name: order.customer_name,
        previous_status: order.status,
        status: OrderStatus::Cancelled,
        reason: args.reason.clone(),
        lines,
        total: order.total,
        total_cents: order.total_cents,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::wire::fixtures::{adjust, cancel, order};
    use crate::wire::{OrderLine, OrderLineArgs};

    fn product(sku: &str, price_cents: i64, stock: i64) -> Product {
        Product {
            sku: sku.into(),
            name: format!("{sku} name"),
            price: format_cents(price_cents),
            price_cents,
            stock,
        }
    }

    fn catalogue(products: &[Product]) -> BTreeMap<String, Product> {
        products
            .iter()
            .map(|p| (p.sku.clone(), p.clone()))
            .collect()
    }

    fn stored_order(status: OrderStatus, lines: &[(&str, i64)]) -> Order {
        Order {
            order_id: 7,
            customer_id: 1,
            customer_name: "Harbor Street Garage".into(),
            status,
            lines: lines
                .iter()
                .map(|(sku, quantity)| OrderLine {
                    sku: (*sku).into(),
                    quantity: *quantity,
                })
                .collect(),
            total: "$109.99".into(),
            total_cents: 10999,
        }
    }

    #[test]
    fn a_request_is_checked_on_its_own() {
        let refused = [
            (
                adjust("TLS-002", 0, "nothing"),
                RuleViolation::BadDelta { delta: 0 },
            ),
            (
                adjust("TLS-002", MAX_ABS_DELTA + 1, "big"),
                RuleViolation::BadDelta {
                    delta: MAX_ABS_DELTA + 1,
                },
            ),
            (
                adjust("TLS-002", i64::MIN, "min"),
                RuleViolation::BadDelta { delta: i64::MIN },
            ),
            (adjust("TLS-002", 1, ""), RuleViolation::BadReason),
            (adjust("TLS-002", 1, " \t\n"), RuleViolation::BadReason),
            (
                adjust("TLS-002", 1, &"x".repeat(MAX_REASON_CHARS + 1)),
                RuleViolation::BadReason,
            ),
        ];
        for (args, expected) in refused {
            assert_eq!(check_adjustment(&args).unwrap_err(), expected, "{args:?}");
        }
        for args in [
            adjust("TLS-002", -MAX_ABS_DELTA, "most"),
            adjust("TLS-002", 1, &"é".repeat(MAX_REASON_CHARS)),
        ] {
            assert!(check_adjustment(&args).is_ok(), "{args:?}");
        }

        let too_many: Vec<(&str, i64)> = vec![("TLS-003", 1); MAX_ORDER_LINES + 1];
        let refused = [
            (order(1, &[]), RuleViolation::EmptyOrder),
            (
                order(1, &too_many),
                RuleViolation::TooManyLines {
                    count: MAX_ORDER_LINES + 1,
                },
            ),
            (
                order(1, &[("TLS-002", 0)]),
                RuleViolation::BadQuantity {
                    sku: "TLS-002".into(),
                    quantity: 0,
                },
            ),
            (
                order(1, &[("TLS-002", MAX_LINE_QUANTITY + 1)]),
                RuleViolation::BadQuantity {
                    sku: "TLS-002".into(),
                    quantity: MAX_LINE_QUANTITY + 1,
                },
            ),
            (
                order(1, &[("TLS-001", 1), ("TLS-001", 2)]),
                RuleViolation::DuplicateSku("TLS-001".into()),
            ),
        ];
        for (args, expected) in refused {
            assert_eq!(check_order(&args).unwrap_err(), expected);
        }
        assert!(check_order(&order(1, &[("TLS-001", MAX_LINE_QUANTITY)])).is_ok());
        assert_eq!(
            check_cancellation(&cancel(7, "")).unwrap_err(),
            RuleViolation::BadReason
        );
    }

    #[test]
    fn stock_may_go_to_zero_and_not_below() {
        assert_eq!(stock_after("TLS-002", 3, -3), Ok(0));
        assert_eq!(
            stock_after("TLS-002", 3, -4),
            Err(RuleViolation::NegativeStock {
                sku: "TLS-002".into(),
                stock: 3,
                delta: -4
            })
        );
        assert_eq!(
            stock_after("TLS-002", i64::MAX, 1),
            Err(RuleViolation::Overflow)
        );
        let args = adjust("TLS-002", -2, "damaged in transit");
        let plan = plan_adjustment(
            check_adjustment(&args).unwrap(),
            product("TLS-002", 10999, 3),
        );
        assert_eq!(
            plan.unwrap(),
            StockAdjustment {
                sku: "TLS-002".into(),
                name: "TLS-002 name".into(),
                delta: -2,
                reason: "damaged in transit".into(),
                previous_stock: 3,
                new_stock: 1,
            }
        );
    }

    #[test]
    fn an_order_is_priced_and_takes_only_what_is_in_stock() {
        let products = catalogue(&[product("TLS-002", 10999, 3), product("TLS-003", 2499, 40)]);
        let args = order(1, &[("TLS-002", 2), ("TLS-003", 4)]);
        let plan = plan_order(check_order(&args).unwrap(), "Harbor".into(), &products).unwrap();
        assert_eq!(plan.order_id, None);
        assert_eq!(plan.status, OrderStatus::Pending);
        assert_eq!(plan.total_cents, 2 * 10999 + 4 * 2499);
        assert_eq!(plan.total, "$319.94");
        let stock: Vec<_> = plan
            .lines
            .iter()
            .map(|l| {
                (
                    l.sku.as_str(),
                    l.previous_stock,
                    l.new_stock,
                    l.line_total_cents,
                )
            })
            .collect();
        assert_eq!(stock, [("TLS-002", 3, 1, 21998), ("TLS-003", 40, 36, 9996)]);

        let args = order(1, &[("TLS-003", 1), ("TLS-002", 4)]);
        assert_eq!(
            plan_order(check_order(&args).unwrap(), "Harbor".into(), &products).unwrap_err(),
            RuleViolation::InsufficientStock {
                sku: "TLS-002".into(),
                available: 3,
                requested: 4
            }
        );
        let args = order(1, &[("TLS-999", 1)]);
        assert_eq!(
            plan_order(check_order(&args).unwrap(), "Harbor".into(), &products).unwrap_err(),
            RuleViolation::UnknownSku("TLS-999".into())
        );
        let dear = catalogue(&[product("GOLD", i64::MAX / 2, 10)]);
        let args = order(1, &[("GOLD", 3)]);
        assert_eq!(
            plan_order(check_order(&args).unwrap(), "Harbor".into(), &dear).unwrap_err(),
            RuleViolation::Overflow
        );
    }

    #[test]
    fn only_a_pending_order_is_cancelled() {
        let stocks = BTreeMap::from([("TLS-002".to_owned(), 2)]);
        let args = cancel(7, "customer changed their mind");
        let checked = check_cancellation(&args).unwrap();
        let plan = plan_cancellation(
            checked,
            stored_order(OrderStatus::Pending, &[("TLS-002", 1)]),
            &stocks,
        )
        .unwrap();
        assert_eq!(
            (plan.previous_status, plan.status),
            (OrderStatus::Pending, OrderStatus::Cancelled)
        );
        assert_eq!(
            plan.lines,
            [RestockedLine {
                sku: "TLS-002".into(),
                quantity: 1,
                previous_stock: 2,
                new_stock: 3
            }]
        );
        let refused = plan_cancellation(
            checked,
            stored_order(OrderStatus::Cancelled, &[("TLS-002", 1)]),
            &stocks,
        )
        .unwrap_err();
        assert_eq!(
            refused,
            RuleViolation::OrderNotPending {
                order_id: 7,
                status: OrderStatus::Cancelled
            }
        );
        assert_eq!(
            refused.to_string(),
            "order 7 is cancelled, only a pending order can be cancelled"
        );
        // A line whose product row is missing is refused, not restocked from nothing.
        assert_eq!(
            plan_cancellation(
                checked,
                stored_order(OrderStatus::Pending, &[("TLS-404", 1)]),
                &stocks
            )
            .unwrap_err(),
            RuleViolation::UnknownSku("TLS-404".into())
        );
    }

    proptest! {
        /// For any sequence of movements on any starting stock, the stock never goes below
        /// zero, a refused movement leaves it where it was, and a movement is accepted exactly
        /// when the request is well formed and the result is at least zero.
        #[test]
        fn stock_never_goes_negative(
            start in 0i64..1_000,
            deltas in proptest::collection::vec(
                prop_oneof![-60i64..60, any::<i64>(), Just(0i64)], 0..40),
        ) {
            let mut stock = start;
            for delta in deltas {
                let args = adjust("TLS-002", delta, "count");
                let planned = check_adjustment(&args)
                    .and_then(|checked| plan_adjustment(checked, product("TLS-002", 1, stock)));
                let well_formed = delta != 0 && delta.unsigned_abs() <= MAX_ABS_DELTA.unsigned_abs();
                let expected = i128::from(stock) + i128::from(delta);
                match planned {
                    Ok(plan) => {
                        prop_assert!(well_formed && expected >= 0);
                        prop_assert_eq!(plan.previous_stock, stock);
                        prop_assert_eq!(i128::from(plan.new_stock), expected);
                        stock = plan.new_stock;
                    }
                    Err(_) => prop_assert!(!well_formed || expected < 0),
                }
                prop_assert!(stock >= 0);
            }
        }

        /// Only a pending order can be cancelled, whatever it holds.
        #[test]
        fn only_pending_cancels(
            pending in any::<bool>(),
            quantities in proptest::collection::vec(1i64..100, 1..5),
            stock in 0i64..1_000,
        ) {
            let status = if pending { OrderStatus::Pending } else { OrderStatus::Cancelled };
            let skus: Vec<String> = (0..quantities.len()).map(|i| format!("SKU-{i}")).collect();
            let lines: Vec<(&str, i64)> =
                skus.iter().map(String::as_str).zip(quantities.iter().copied()).collect();
            let stocks = skus.iter().map(|s| (s.clone(), stock)).collect();
            let args = cancel(7, "r");
            let planned = plan_cancellation(
                check_cancellation(&args).unwrap(),
                stored_order(status, &lines),
                &stocks,
            );
            match planned {
                Ok(plan) => {
                    prop_assert!(pending);
                    for (line, quantity) in plan.lines.iter().zip(&quantities) {
                        prop_assert_eq!(line.new_stock, stock + quantity);
                    }
                }
                Err(err) => {
                    prop_assert!(!pending);
                    let is_not_pending = matches!(err, RuleViolation::OrderNotPending { .. });
                    prop_assert!(is_not_pending, "{err}");
                }
            }
        }

        /// An order's total is the sum of quantity times price over its lines, computed without
        /// wrapping: when any product or the sum does not fit, the order is refused.
        #[test]
        fn totals_are_exact_or_refused(
            lines in proptest::collection::vec(
                (prop_oneof![0i64..100_000, 0i64..=i64::MAX], 1..=MAX_LINE_QUANTITY),
                1..8),
        ) {
            let products: Vec<Product> = lines
                .iter()
                .enumerate()
                .map(|(i, (price, _))| product(&format!("SKU-{i}"), *price, MAX_LINE_QUANTITY))
                .collect();
            let args = CreateOrderArgs {
                customer_id: 1,
                lines: lines
                    .iter()
                    .enumerate()
                    .map(|(i, (_, quantity))| OrderLineArgs { sku: format!("SKU-{i}"), quantity: *quantity })
                    .collect(),
            };
            let exact = lines
                .iter()
                .map(|(price, quantity)| i128::from(*price) * i128::from(*quantity))
                .try_fold(0i128, |sum, line| {
                    i64::try_from(line).ok()?;
                    i64::try_from(sum + line).ok().map(|_| sum + line)
                });
            let planned = plan_order(check_order(&args).unwrap(), "c".into(), &catalogue(&products));
            match (planned, exact) {
                (Ok(plan), Some(exact)) => {
                    prop_assert_eq!(i128::from(plan.total_cents), exact);
                    prop_assert_eq!(plan.total, format_cents(plan.total_cents));
                }
                (Err(err), None) => prop_assert_eq!(err, RuleViolation::Overflow),
                (planned, exact) => prop_assert!(false, "{:?} but exact {:?}", planned, exact),
            }
        }
    }
}
