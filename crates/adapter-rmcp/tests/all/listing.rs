//! `tools/list` through the guard over an inner server that pages its tools: the builder's
//! settings are checked against every page (and a single page is read once), and
//! `prepare_admin_action` is listed on the last page exactly when some page has a token-gated
//! tool. Also the guard's own accessors, and the handshake methods it leaves to the inner
//! server.

use std::borrow::Cow;

use mcp_write_guard_rmcp::{ConfigMistake, PREPARE_ADMIN_ACTION, WriteGuard};
use rmcp::{
    ServerHandler,
    model::{
        ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion, ServerConfig,
        SubscriptionFilter, Tool,
    },
};

use crate::common::{
    Connected, Era,
    fixture::{Fixture, fixture_tools},
    paged::Paged,
};

type Setup = Connected<Paged>;

async fn names(s: &Setup) -> Vec<String> {
    let tools = s.client.list_all_tools().await.unwrap();
    tools.iter().map(|t| t.name.to_string()).collect()
}

/// The fixture's tools in this order (by name).
fn tools(order: &[&str]) -> Vec<Tool> {
    let all = fixture_tools();
    order
        .iter()
        .map(|name| all.iter().find(|t| t.name == *name).unwrap().clone())
        .collect()
}

#[tokio::test]
async fn the_builders_settings_are_checked_against_every_page() {
    // Two a page: get_counter, list_rows | add_row, set_counter | delete_row.
    let paged = Paged::new(Fixture::default(), 2);
    let s = Setup::guarded(Era::Legacy, paged, |b| {
        b.preview("set_counter")
            .preview("get_counter")
            .preview("no_such_tool")
            .trust_read("list_rows")
            .trust_read("delete_row")
    })
    .await;
    assert_eq!(s.guard.config_mistakes(), None, "nothing was listed yet");
    names(&s).await;
    let mut found = s.guard.config_mistakes().unwrap().to_vec();
    found.sort_by_key(ToString::to_string);
    // set_counter (page 2) and list_rows (page 1) are as configured; delete_row claims to be
    // read-only, but its token makes it a write.
    let mut expected = vec![
        ConfigMistake::PreviewForRead("get_counter".into()),
        ConfigMistake::PreviewForUnknownTool("no_such_tool".into()),
        ConfigMistake::TrustedReadIsWrite("delete_row".into()),
    ];
    expected.sort_by_key(ToString::to_string);
    assert_eq!(found, expected);
}

#[tokio::test]
async fn a_single_page_is_read_once_and_checked() {
    let paged = Paged::new(Fixture::default(), 100);
    assert_eq!(paged.pages(), 1);
    let s = Setup::guarded(Era::Legacy, paged, |b| b.preview("get_counter")).await;
    let before = s.server.list_calls();
    names(&s).await;
    assert_eq!(s.server.list_calls() - before, 1);
    assert_eq!(
        s.guard.config_mistakes(),
        Some(&[ConfigMistake::PreviewForRead("get_counter".into())][..])
    );
}

#[tokio::test]
async fn prepare_admin_action_ends_the_list_when_any_page_has_a_token_gated_tool() {
    let orders: [(&[&str], bool); 3] = [
        // The token-gated tool on the last page, on the first, or on none.
        (
            &[
                "get_counter",
                "list_rows",
                "add_row",
                "set_counter",
                "delete_row",
            ],
            true,
        ),
        (
            &[
                "delete_row",
                "get_counter",
                "list_rows",
                "add_row",
                "set_counter",
            ],
            true,
        ),
        (
            &["get_counter", "list_rows", "add_row", "set_counter"],
            false,
        ),
    ];
    for (order, gated) in orders {
        let paged = Paged::with_tools(Fixture::default(), 2, tools(order));
        assert!(paged.pages() > 1);
        let s = Setup::guarded(Era::Legacy, paged, |b| b).await;
        let listed = names(&s).await;
        let mut expected: Vec<String> = order.iter().map(|n| (*n).to_owned()).collect();
        if gated {
            expected.push(PREPARE_ADMIN_ACTION.to_owned());
        }
        assert_eq!(listed, expected, "{order:?}");
        // get_tool agrees with the list just read.
        assert_eq!(
            ServerHandler::get_tool(&s.guard, PREPARE_ADMIN_ACTION).is_some(),
            gated,
            "{order:?}"
        );
    }
}

#[test]
fn the_guard_says_whether_writes_are_on_and_shows_it_in_debug() {
    for on in [true, false] {
        let guard = WriteGuard::builder(Fixture::default())
            .server_name("shop")
            .writes_enabled(on)
            .build();
        assert_eq!(guard.writes_enabled(), on);
        let debug = format!("{guard:?}");
        assert!(debug.starts_with("WriteGuard {"), "{debug}");
        assert!(debug.contains("\"shop\""), "{debug}");
        assert!(debug.contains(&format!("writes_enabled: {on}")), "{debug}");
    }
}

/// An inner server with a handshake of its own: one protocol version, a subscription filter
/// it narrows, an `initialize` it answers with its own info.
#[derive(Clone, Default)]
struct Handshake(Fixture);

impl ServerHandler for Handshake {
    fn get_info(&self) -> ServerConfig {
        self.0.get_info()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Owned(vec![ProtocolVersion::V_2025_06_18])
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut narrowed = requested.clone();
        narrowed.tools_list_changed = None;
        Some(narrowed)
    }
}

#[test]
fn the_handshake_is_the_inner_servers() {
    let inner = Handshake::default();
    let guard = WriteGuard::builder(inner.clone()).build();
    assert_eq!(
        serde_json::to_value(guard.get_info()).unwrap(),
        serde_json::to_value(inner.get_info()).unwrap()
    );
    assert_eq!(
        guard.supported_protocol_versions(),
        inner.supported_protocol_versions()
    );
    let requested: SubscriptionFilter = serde_json::from_value(
        serde_json::json!({"toolsListChanged": true, "promptsListChanged": true}),
    )
    .unwrap();
    let accepted = guard.accepted_subscription_filter(&requested);
    assert_eq!(accepted, inner.accepted_subscription_filter(&requested));
    // Narrowed by the inner server: prompts only.
    assert_eq!(accepted.unwrap().prompts_list_changed, Some(true));
    let request = InitializeRequestParams::new(
        ClientCapabilities::default(),
        Implementation::new("client", "1"),
    )
    .with_protocol_version(ProtocolVersion::V_2025_06_18);
    let negotiated = guard.negotiate_initialize(&request).unwrap();
    assert_eq!(
        serde_json::to_value(&negotiated).unwrap(),
        serde_json::to_value(inner.negotiate_initialize(&request).unwrap()).unwrap()
    );
    assert_eq!(negotiated.server_info.name, "fixture");
}
