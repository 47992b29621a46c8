//! A team's own MCP server over stdio, guarded: one read, one write with a preview.
//!
//! ```text
//! MCP_WRITES_ENABLED=true cargo run -p mcp-write-guard-rmcp --example stdio_notes
//! ```
//!
//! Connect an MCP client that can show approval forms (form elicitation). `add_note` asks
//! "Add note 3: \"…\"?" and, once approved, adds exactly that note, provided nobody added
//! another meanwhile (compare-and-apply); `list_notes` is a trusted read.

use std::sync::Arc;

use mcp_write_guard_rmcp::{WriteGuard, WriteStep, default_prompt, write_step};
use parking_lot::Mutex;
use rmcp::{
    ErrorData, ServerHandler, ServiceExt,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{CallToolResult, ContentBlock},
    schemars,
    service::{RequestContext, RoleServer},
    tool, tool_handler, tool_router,
};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AddNote {
    /// The note's text.
    text: String,
}

/// The team's server: a list of notes. (`pub(crate)`: the crate's tests serve this same
/// server.)
#[derive(Clone)]
pub(crate) struct Notes {
    pub(crate) notes: Arc<Mutex<Vec<String>>>,
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
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        // One lock: compute the change, then preview it or compare-and-apply it.
        let mut notes = self.notes.lock();
        let change = serde_json::json!({"number": notes.len() + 1, "text": text});
        match write_step(&cx) {
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

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Logs go to stderr: stdout carries MCP messages only.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let guard = WriteGuard::builder(Notes::default())
        .preview("add_note")
        .prompt("add_note", |p| {
            match (p.preview_i64("/number"), p.argument("text")) {
                (Some(number), Some(text)) => format!("Add note {number}: {text}?"),
                _ => default_prompt(p),
            }
        })
        .trust_read("list_notes")
        .build(); // writes only with MCP_WRITES_ENABLED=true
    // rmcp's own stdio transport keeps this example within the adapter's dependencies. A server
    // of your own serves through `mcp_write_guard_stdio::stdio()?` instead (crate
    // mcp-write-guard-stdio: bad frames answered, backpressure), as the workspace README's
    // example does; docs/known-limits.md says what rmcp's transport drops.
    guard
        .serve(rmcp::transport::stdio())
        .await?
        .waiting()
        .await?;
    Ok(())
}
