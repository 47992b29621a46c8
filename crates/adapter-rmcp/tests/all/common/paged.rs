//! The fixture's tools behind a server that does not answer `get_tool` and hands out its tool
//! list in pages, so that the guard has to look a tool up through `list_tools`.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use rmcp::{
    ErrorData, ServerHandler,
    model::*,
    service::{RequestContext, RoleServer},
};

use super::fixture::{Fixture, fixture_tools};

/// Serves [`Fixture`]'s tools `page_size` at a time (cursors `"1"`, `"2"`, …) and keeps the
/// default `get_tool`, which knows no tool.
#[derive(Clone)]
pub struct Paged {
    pub fixture: Fixture,
    page_size: usize,
    tools: Arc<Vec<Tool>>,
    list_calls: Arc<AtomicUsize>,
}

impl Paged {
    pub fn new(fixture: Fixture, page_size: usize) -> Self {
        Self::with_tools(fixture, page_size, fixture_tools())
    }

    /// Pages of `tools` (some or all of the fixture's, in any order) instead.
    pub fn with_tools(fixture: Fixture, page_size: usize, tools: Vec<Tool>) -> Self {
        assert!(page_size > 0);
        Self {
            fixture,
            page_size,
            tools: Arc::new(tools),
            list_calls: Arc::default(),
        }
    }

    /// How many times `list_tools` was called (one call per page).
    pub fn list_calls(&self) -> usize {
        self.list_calls.load(Ordering::SeqCst)
    }

    /// How many pages the tool list has.
    pub fn pages(&self) -> usize {
        self.tools.len().div_ceil(self.page_size)
    }
}

impl ServerHandler for Paged {
    fn get_info(&self) -> ServerConfig {
        self.fixture.get_info()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.list_calls.fetch_add(1, Ordering::SeqCst);
        let page = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .map_err(|_| ErrorData::invalid_params("bad cursor", None))?,
        };
        let tools = &self.tools;
        let start = page.saturating_mul(self.page_size);
        if start >= tools.len() {
            return Err(ErrorData::invalid_params("bad cursor", None));
        }
        let end = (start + self.page_size).min(tools.len());
        let page_tools = tools
            .iter()
            .skip(start)
            .take(end - start)
            .cloned()
            .collect();
        let mut result = ListToolsResult::with_all_items(page_tools);
        if end < tools.len() {
            result.next_cursor = Some((page + 1).to_string());
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.fixture.call_tool(request, context).await
    }
}
