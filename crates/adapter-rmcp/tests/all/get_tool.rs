//! `get_tool` and `tools/list` agree on `prepare_admin_action`.

use mcp_write_guard_rmcp::{PREPARE_ADMIN_ACTION, WriteGuard};
use rmcp::{ServerHandler, model::Tool};

use crate::common::{ERAS, Era, Fixture, ScriptedClient, connect, notes::Notes};

/// A guard with writes enabled around `server`, and the tools a scripted client connected to
/// it in `era` is listed.
async fn guard_and_listed<S: ServerHandler + Clone>(
    server: S,
    era: Era,
) -> (WriteGuard<S>, Vec<Tool>) {
    let guard = WriteGuard::builder(server).writes_enabled(true).build();
    let client = connect(guard.clone(), era, ScriptedClient::new())
        .await
        .unwrap();
    let listed = client.list_all_tools().await.unwrap();
    (guard, listed)
}

#[tokio::test]
async fn without_token_gated_tools_neither_advertises_prepare_admin_action() {
    for era in ERAS {
        let (guard, listed) = guard_and_listed(Notes::default(), era).await;
        assert!(listed.iter().all(|t| t.name != PREPARE_ADMIN_ACTION));
        assert!(listed.iter().any(|t| t.name == "add_note"));
        assert!(guard.get_tool(PREPARE_ADMIN_ACTION).is_none(), "{era:?}");
        assert!(guard.get_tool("add_note").is_some());
    }
}

#[tokio::test]
async fn with_a_token_gated_tool_both_advertise_it() {
    for era in ERAS {
        let (guard, listed) = guard_and_listed(Fixture::default(), era).await;
        let prepare = listed
            .into_iter()
            .find(|t| t.name == PREPARE_ADMIN_ACTION)
            .expect("listed");
        assert_eq!(
            guard.get_tool(PREPARE_ADMIN_ACTION),
            Some(prepare),
            "{era:?}"
        );
    }
}
