//! The decisive case: the model asks for a stock change, the user says no, and the database
//! file shows that nothing happened.

use mcp_write_guard_rmcp::Outcome;
use mcp_write_guard_rmcp::test_util::{ERAS, Reply};
use serde_json::json;
use workspace_tests::{DAMAGED_TLS_002_QUESTION, Failure, assert_refused, call, is_error};

use crate::store::Store;

#[tokio::test]
async fn declined_stock_change_leaves_the_file_untouched() -> Result<(), Failure> {
    for era in ERAS {
        let (store, _, before) = Store::with_snapshot()?;
        let (user, client) = store.person(era, [Reply::Decline]).await?;

        let result = call(
            &client,
            "adjust_stock",
            json!({"sku": "TLS-002", "delta": -2, "reason": "damaged in transit"}),
        )
        .await?;

        assert_refused(&result, "nothing was saved", &format!("{era:?}"));
        // The user saw exactly the change, computed by the database.
        assert_eq!(user.asked(), [DAMAGED_TLS_002_QUESTION], "{era:?}");
        // Read from the SQLite file through a connection of our own.
        store.assert_stock_untouched(&before, &[Outcome::Declined], &format!("{era:?}"))?;
        client.cancel().await?;
    }
    Ok(())
}

#[tokio::test]
async fn approved_stock_change_lands_exactly_once() -> Result<(), Failure> {
    for era in ERAS {
        let (store, user, client, result) = Store::called(
            era,
            [Reply::Approve],
            "adjust_stock",
            json!({"sku": "TLS-002", "delta": -2, "reason": "damaged in transit"}),
        )
        .await?;
        let file = store.file();

        assert!(!is_error(&result), "{era:?}: {result:?}");
        assert_eq!(user.asked().len(), 1, "{era:?}");
        assert_eq!(file.stock("TLS-002")?, 1, "{era:?}");
        let movements = file.movements()?;
        assert_eq!(movements.len(), 1, "{era:?}");
        assert_eq!(
            (
                movements[0].sku.as_str(),
                movements[0].delta,
                movements[0].reason.as_str()
            ),
            ("TLS-002", -2, "damaged in transit")
        );
        // The other products did not move.
        assert_eq!(file.stock("TLS-001")?, 12);
        assert_eq!(file.stock("TLS-003")?, 40);
        assert_eq!(
            store.audit.decisions(),
            [Outcome::Approved, Outcome::Applied],
            "{era:?}"
        );
        client.cancel().await?;
    }
    Ok(())
}
