//! A server that answers every `tools/call` with a copy of one fixed result: what a read costs
//! for the bytes of its answer alone, whoever made them.

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
};

/// Answers every `tools/call` with a copy of `result`.
pub(crate) struct Canned {
    result: CallToolResult,
}

impl ServerHandler for Canned {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self.result.clone().into())
    }
}

/// A server answering with exactly what `server` answers to one `get_counter` read: for a
/// `WriteGuard`, the envelope in `structuredContent` and in the text twin.
pub(crate) async fn canned<S: ServerHandler>(server: S) -> Canned {
    let client = crate::setup::connect(server).await;
    let result = client
        .call_tool(CallToolRequestParams::new("get_counter"))
        .await
        .unwrap_or_else(|error| panic!("read failed: {error}"));
    Canned { result }
}
