//! What the steps that call the inner server borrow of the guard ([`ToolCalls`]): the server,
//! which of its tools preview, whether a preview runs twice, the envelope results go in, and
//! the [`Books`]. Capture (the preview) and apply are its methods; so is reading the server's
//! tool list, which the guard's `tools/list` and `tools/call` share.

use std::collections::HashSet;

use mcp_write_guard_envelope::EnvelopePolicy;
use mcp_write_guard_policy::Classification;
use rmcp::{
    ErrorData, ServerHandler,
    model::{CallToolResult, PaginatedRequestParams, Tool},
    service::{RequestContext, RoleServer},
};

use super::{books::Books, wrap::wrap_result};
use crate::tools::KnownTools;

/// The most pages the guard reads from the inner server when it has to look through the whole
/// tool list (a server whose `get_tool` says nothing, or a paginated list).
const MAX_TOOL_PAGES: usize = 1024;

/// What the steps that call the inner server borrow of the guard.
pub(crate) struct ToolCalls<'g, S> {
    /// The inner server.
    pub(crate) server: &'g S,
    /// The tools that opted in to previews.
    pub(crate) previews: &'g HashSet<String>,
    /// Run every preview twice and refuse when the two differ.
    pub(crate) check_dry_previews: bool,
    pub(crate) envelope: &'g EnvelopePolicy,
    pub(crate) server_name: &'g str,
    pub(crate) books: Books<'g>,
    /// What the guard derived from the tools calls named (classification, definition digest).
    pub(crate) known_tools: &'g KnownTools,
}

impl<S: ServerHandler> ToolCalls<'_, S> {
    /// `result` of `tool` in the envelope, unless the envelope policy trusts it.
    pub(crate) fn wrap(
        &self,
        tool: &str,
        class: Classification,
        result: CallToolResult,
    ) -> CallToolResult {
        if !self.envelope.should_wrap(tool, class.class) {
            return result;
        }
        wrap_result(self.server_name, tool, result, self.envelope.text_prefix())
    }

    /// The inner server's definition of `name`: its `get_tool`, else a look through its tool
    /// list.
    pub(crate) async fn find_tool(
        &self,
        name: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<Tool>, ErrorData> {
        if let Some(tool) = self.server.get_tool(name) {
            return Ok(Some(tool));
        }
        let mut found = None;
        self.read_tool_pages(context, |tools| {
            found = tools.into_iter().find(|t| t.name == name);
            found.is_none()
        })
        .await?;
        Ok(found)
    }

    /// Every tool of the inner server, reading every page (at most [`MAX_TOOL_PAGES`]).
    pub(crate) async fn all_tools(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Vec<Tool>, ErrorData> {
        let mut all = Vec::new();
        self.read_tool_pages(context, |tools| {
            all.extend(tools);
            true
        })
        .await?;
        Ok(all)
    }

    /// Reads the inner server's tool list page by page (at most [`MAX_TOOL_PAGES`]), handing
    /// each page's tools to `more`, until the list ends or `more` says `false`.
    async fn read_tool_pages(
        &self,
        context: &RequestContext<RoleServer>,
        mut more: impl FnMut(Vec<Tool>) -> bool,
    ) -> Result<(), ErrorData> {
        let mut cursor = None;
        for _ in 0..MAX_TOOL_PAGES {
            let request = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page = self.server.list_tools(request, context.clone()).await?;
            if !more(page.tools) {
                return Ok(());
            }
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(()),
            }
        }
        Ok(())
    }
}
