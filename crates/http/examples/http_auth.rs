//! A team's own MCP server over streamable HTTP, guarded and behind bearer-token auth.
//!
//! ```text
//! MCP_WRITES_ENABLED=true cargo run -p mcp-write-guard-http --example http_auth -- \
//!     ISSUER AUDIENCE JWKS_FILE_OR_URL [ADDR]
//! ```
//!
//! Every request to `http://ADDR/mcp` needs `Authorization: Bearer <JWT>` from ISSUER for
//! AUDIENCE, signed by a key in the JWKS; each verified subject is its own principal; writes need
//! the `counter:write` scope and the person's approval. The protected-resource metadata is at
//! `http://ADDR/.well-known/oauth-protected-resource`. ADDR defaults to `127.0.0.1:8080`.

use std::{net::SocketAddr, sync::Arc};

use mcp_write_guard_http::{
    AuthConfig, BearerAuth, BoundedSessions, DEFAULT_MAX_SESSIONS, JwksSource,
};
use mcp_write_guard_rmcp::{FromAuthenticatedSubject, WriteGuard, WriteStep, write_step};
use parking_lot::Mutex;
use rmcp::{
    ErrorData, ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{CallToolResult, ContentBlock},
    schemars,
    service::{RequestContext, RoleServer},
    tool, tool_handler, tool_router,
    transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService},
};

/// The scope writes need.
const WRITE_SCOPE: &str = "counter:write";

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Add {
    /// How much to add.
    n: i64,
}

/// The team's server: one counter.
#[derive(Clone)]
struct Counter {
    value: Arc<Mutex<i64>>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Counter {
    #[tool(description = "Read the counter", annotations(read_only_hint = true))]
    async fn get(&self) -> String {
        self.value.lock().to_string()
    }

    #[tool(
        description = "Add to the counter",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            open_world_hint = false
        )
    )]
    async fn add(
        &self,
        Parameters(Add { n }): Parameters<Add>,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        // Read, compute, and preview or compare-and-apply under one lock.
        let mut value = self.value.lock();
        let change = serde_json::json!({"before": *value, "after": *value + n});
        match write_step(&cx) {
            WriteStep::Preview => {}
            WriteStep::Apply(approved) => {
                if let Err(stale) = approved.check(&change) {
                    return Ok(CallToolResult::error(vec![ContentBlock::text(
                        stale.to_string(),
                    )]));
                }
                *value += n;
            }
            WriteStep::Direct => *value += n,
        }
        Ok(CallToolResult::structured(change))
    }
}

#[tool_handler(router = self.tool_router, name = "counter", version = "0.1.0")]
impl ServerHandler for Counter {}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [issuer, audience, jwks, rest @ ..] = args.as_slice() else {
        return Err("usage: http_auth ISSUER AUDIENCE JWKS_FILE_OR_URL [ADDR]".into());
    };
    let addr: SocketAddr = rest
        .first()
        .map_or("127.0.0.1:8080", String::as_str)
        .parse()?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let resource = format!("http://{}/mcp", listener.local_addr()?);

    // 1. The bearer-token layer: JWKS, issuer, audience; the scope writes need.
    let auth = BearerAuth::new(
        AuthConfig::new(issuer, audience, JwksSource::parse(jwks)?, &resource)
            .with_write_scope(WRITE_SCOPE),
    )
    .await?;

    // 2. The guard: the principal is the verified subject; writes need the scope.
    let counter = Counter {
        value: Arc::default(),
        tool_router: Counter::tool_router(),
    };
    let guard = WriteGuard::builder(counter)
        .preview("add")
        .trust_read("get")
        .principal(Arc::new(FromAuthenticatedSubject))
        .write_scope(WRITE_SCOPE)
        .build();

    // 3. rmcp's streamable-HTTP service, with bounded sessions and checked origins, behind the
    //    layer, plus the metadata routes.
    let config = StreamableHttpServerConfig::default()
        .with_allowed_origins(mcp_write_guard_http::LOOPBACK_ORIGINS);
    //    Each session belongs to the subject whose token opened it.
    let sessions = Arc::new(BoundedSessions::new(DEFAULT_MAX_SESSIONS));
    let service =
        StreamableHttpService::new(move || Ok(guard.clone()), Arc::clone(&sessions), config);
    let app = auth.protect(axum::Router::new().nest_service("/mcp", service), sessions);

    tracing::info!("serving {resource}");
    axum::serve(listener, app).await?;
    Ok(())
}
