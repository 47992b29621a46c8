//! Whatever the client answers, the stock changes only for `accept` with `approve` exactly
//! `true`, and then exactly once.

use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::test_util::{Reply, ScriptedClient};
use proptest::prelude::*;
use rmcp::model::ElicitationAction;
use serde_json::{Map, Value, json};
use workspace_tests::{call, is_error};

use crate::store::{Store, connect};

fn any_action() -> impl Strategy<Value = ElicitationAction> {
    prop_oneof![
        2 => Just(ElicitationAction::Accept),
        1 => Just(ElicitationAction::Decline),
        1 => Just(ElicitationAction::Cancel),
    ]
}

/// JSON values, with `true` and near misses of it well represented.
fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!(true)),
        Just(json!(false)),
        Just(json!("true")),
        Just(json!(1)),
        Just(json!([true])),
        Just(json!({"approve": true})),
        Just(Value::Null),
        any::<i64>().prop_map(Value::from),
        ".{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            proptest::collection::btree_map("[a-z]{1,7}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The form content: absent, or an object with or without `approve`, plus other fields.
fn any_content() -> impl Strategy<Value = Option<Value>> {
    // `approve: true` often enough that approvals are well exercised too.
    let approve = prop_oneof![
        2 => Just(Some(json!(true))),
        3 => proptest::option::of(any_value()),
    ];
    let object = (
        approve,
        proptest::collection::btree_map("[a-z]{1,7}", any_value(), 0..3),
    )
        .prop_map(|(approve, extra)| {
            let mut map: Map<String, Value> = extra.into_iter().collect();
            map.remove("approve");
            if let Some(approve) = approve {
                map.insert("approve".to_owned(), approve);
            }
            Value::Object(map)
        });
    prop_oneof![
        1 => Just(None),
        1 => any_value().prop_map(Some),
        4 => object.prop_map(Some),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn only_accept_with_approve_true_writes(
        action in any_action(),
        content in any_content(),
        rounds in any::<bool>(),
    ) {
        let approves = action == ElicitationAction::Accept
            && content.as_ref().and_then(|c| c.get("approve")) == Some(&json!(true));
        let era = if rounds { Era::InputRounds } else { Era::Legacy };
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let (is_err, stock, movements, changed) = runtime.block_on(async {
            let store = Store::new().unwrap();
            let before = store.file().snapshot().unwrap();
            let user = ScriptedClient::answering([Reply::Raw(action, content.clone())]);
            let client = connect(store.guard(true), &user, era).await.unwrap();
            let result = call(
                &client,
                "adjust_stock",
                json!({"sku": "TLS-002", "delta": -2, "reason": "damaged in transit"}),
            )
            .await
            .unwrap();
            let file = store.file();
            (
                is_error(&result),
                file.stock("TLS-002").unwrap(),
                file.movements().unwrap().len(),
                file.snapshot().unwrap() != before,
            )
        });
        prop_assert_eq!(is_err, !approves);
        prop_assert_eq!(changed, approves);
        prop_assert_eq!(stock, if approves { 1 } else { 3 });
        prop_assert_eq!(movements, usize::from(approves));
    }
}
