//! A server built with `#[tool_router]`: a notes list with a read, and a write that supports
//! previews by taking the request context.

use std::sync::Arc;

use mcp_write_guard_rmcp::{WriteStep, write_step};
use parking_lot::Mutex;
use rmcp::{
    ErrorData, ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{CallToolResult, ContentBlock},
    service::{RequestContext, RoleServer},
    tool, tool_handler, tool_router,
};
use serde_json::json;

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct AddNote {
    pub text: String,
}

#[derive(Clone)]
pub struct Notes {
    pub notes: Arc<Mutex<Vec<String>>>,
    tool_router: ToolRouter<Self>,
}

impl Default for Notes {
    fn default() -> Self {
        Self {
            notes: Arc::default(),
            tool_router: Self::tool_router(),
        }
    }
}

#[tool_router]
impl Notes {
    #[tool(description = "List the notes", annotations(read_only_hint = true))]
    async fn list_notes(&self) -> String {
        self.notes.lock().join("\n")
    }

    #[tool(
        description = "Add a note",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            open_world_hint = false
        )
    )]
    async fn add_note(
        &self,
        Parameters(AddNote { text }): Parameters<AddNote>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut notes = self.notes.lock();
        let change = json!({"before": notes.len(), "after": notes.len() + 1, "text": text});
        match write_step(&context) {
            WriteStep::Preview => {}
            WriteStep::Apply(approved) => {
                if let Err(stale) = approved.check(&change) {
                    return Ok(CallToolResult::error(vec![ContentBlock::text(
                        stale.to_string(),
                    )]));
                }
                notes.push(text);
            }
            WriteStep::Direct => notes.push(text),
        }
        Ok(CallToolResult::structured(change))
    }
}

#[tool_handler(router = self.tool_router, name = "notes", version = "0.1.0")]
impl ServerHandler for Notes {}
