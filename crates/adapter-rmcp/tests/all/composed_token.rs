//! A tool that declares `confirmationToken` through a composed schema (`allOf`, a local `$ref`)
//! rather than top-level `properties` is token-gated end to end: without a token nothing runs and
//! nobody is asked; with a token from `prepare_admin_action` it runs once.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use mcp_write_guard_rmcp::{Outcome, PREPARE_ADMIN_ACTION};
use rmcp::{
    ErrorData, ServerHandler,
    model::*,
    service::{RequestContext, RoleServer},
};
use serde_json::{Value, json};

use crate::common::{Connected, ERAS, Reply, call_on, fixture::closed_write, prepare_token_on};

/// One destructive tool, `purge {scope}`, whose token is declared inside `allOf` (or behind a
/// local `$ref`), and a count of the times it ran.
#[derive(Clone)]
struct Composed {
    schema: Value,
    runs: Arc<AtomicUsize>,
}

impl Composed {
    fn new(schema: Value) -> Self {
        Self {
            schema,
            runs: Arc::default(),
        }
    }

    fn tool(&self) -> Tool {
        let Value::Object(schema) = self.schema.clone() else {
            unreachable!("schemas are objects")
        };
        Tool::new("purge", "Delete everything in a scope", schema)
            .with_annotations(closed_write(true))
    }
}

impl ServerHandler for Composed {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![self.tool()]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(CallToolResult::success(vec![ContentBlock::text("purged")]).into())
    }
}

fn composed_schemas() -> [Value; 2] {
    let token = json!({"type": "string"});
    [
        json!({
            "type": "object",
            "allOf": [
                {"properties": {"scope": {"type": "string"}}, "required": ["scope"]},
                {"properties": {"confirmationToken": token}}
            ]
        }),
        json!({
            "type": "object",
            "$ref": "#/$defs/purge",
            "$defs": {"purge": {"properties": {"scope": {"type": "string"}, "confirmationToken": token}}}
        }),
    ]
}

#[tokio::test]
async fn a_token_declared_in_a_composed_schema_gates_the_tool() {
    for era in ERAS {
        for schema in composed_schemas() {
            let server = Composed::new(schema.clone());
            let h = Connected::guarded(era, server.clone(), |b| b).await;
            let tools = h.client.list_all_tools().await.unwrap();
            assert!(
                tools.iter().any(|t| t.name == PREPARE_ADMIN_ACTION),
                "{era:?} {schema}: the gated tool brings prepare_admin_action"
            );

            let refused = h.call("purge", json!({"scope": "all"})).await;
            assert_eq!(refused.is_error, Some(true), "{era:?} {schema}");
            assert_eq!(server.runs.load(Ordering::SeqCst), 0, "nothing ran");
            assert!(h.scripted.asked().is_empty(), "nobody was asked");
            assert_eq!(h.audit.outcomes(), [Outcome::TokenRejected]);

            let token =
                prepare_token_on(&h.client, &h.scripted, "purge", json!({"scope": "all"})).await;
            assert_eq!(
                server.runs.load(Ordering::SeqCst),
                0,
                "the token runs nothing"
            );
            // `purge {scope: all}` with the token.
            let purge_with_token = || {
                call_on(
                    &h.client,
                    "purge",
                    json!({"scope": "all", "confirmationToken": token}),
                )
            };
            h.scripted.script([Reply::Approve]);
            let applied = purge_with_token().await.unwrap();
            assert_ne!(
                applied.is_error,
                Some(true),
                "{era:?} {schema}: {applied:?}"
            );
            assert_eq!(server.runs.load(Ordering::SeqCst), 1, "ran once");
            // Spent: the same token again runs nothing.
            let again = purge_with_token().await.unwrap();
            assert_eq!(again.is_error, Some(true));
            assert_eq!(server.runs.load(Ordering::SeqCst), 1);
        }
    }
}
