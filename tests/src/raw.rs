//! Raw streamable-HTTP requests, for what an rmcp client would never send: invented session
//! headers, foreign origins, round trips held open by the thousand.

use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use crate::Failure;

/// A streamable-HTTP endpoint spoken to by hand.
#[derive(Debug, Clone)]
pub struct RawHttp {
    client: reqwest::Client,
    url: String,
}

/// What the server answered.
#[derive(Debug)]
pub struct HttpReply {
    /// The HTTP status.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body as text (JSON, or an event stream).
    pub body: String,
}

impl HttpReply {
    /// A response header's value, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)?.to_str().ok()
    }

    /// The JSON-RPC message: the body itself, or the last `data:` line of an event stream.
    pub fn message(&self) -> Option<Value> {
        if let Ok(value) = serde_json::from_str(&self.body) {
            return Some(value);
        }
        self.body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .next_back()
    }

    /// The `requestState` of an input-required result.
    pub fn request_state(&self) -> Option<String> {
        let message = self.message()?;
        let result = message.get("result")?;
        (result.get("resultType")? == "input_required")
            .then(|| result.get("requestState")?.as_str().map(str::to_owned))?
    }

    /// The text of a complete tool result, and whether it is an error.
    pub fn tool_result(&self) -> Option<(bool, String)> {
        let message = self.message()?;
        let result = message.get("result")?;
        let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
        let text = result
            .get("content")?
            .as_array()?
            .iter()
            .filter_map(|c| c.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        Some((is_error, text))
    }
}

impl RawHttp {
    /// Requests to `url` (`http://127.0.0.1:PORT/mcp`).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            client: reqwest::Client::new(),
            url: url.into(),
        }
    }

    /// POSTs `body` with the streamable-HTTP headers and `extra` ones.
    pub async fn post(&self, extra: &[(&str, &str)], body: &Value) -> Result<HttpReply, Failure> {
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        let response = request.send().await?;
        Ok(HttpReply {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: response.text().await?,
        })
    }

    /// A 2026-07-28 `tools/call` (no session, per-request metadata, a client that can be asked
    /// with forms), optionally the retry that carries `request_state` and `answer`.
    pub async fn call_2026(
        &self,
        extra: &[(&str, &str)],
        tool: &str,
        arguments: &Value,
        retry: Option<(&str, Value)>,
    ) -> Result<HttpReply, Failure> {
        self.call_2026_asking(extra, &json!({"form": {}}), tool, arguments, retry)
            .await
    }

    /// [`RawHttp::call_2026`] from a client whose elicitation capabilities are `elicitation`
    /// (`{"url": {}}`: a client that can only be sent to a page).
    pub async fn call_2026_asking(
        &self,
        extra: &[(&str, &str)],
        elicitation: &Value,
        tool: &str,
        arguments: &Value,
        retry: Option<(&str, Value)>,
    ) -> Result<HttpReply, Failure> {
        let mut params = json!({
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "raw-http", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": elicitation},
            },
        });
        if let Some((state, answer)) = retry
            && let Some(params) = params.as_object_mut()
        {
            params.insert("requestState".into(), json!(state));
            params.insert(
                "inputResponses".into(),
                json!({"mcp-write-guard/approve": answer}),
            );
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        let mut headers = vec![
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", tool),
        ];
        headers.extend_from_slice(extra);
        self.post(&headers, &body).await
    }

    /// A legacy `initialize`; the reply carries the new session's `Mcp-Session-Id`.
    pub async fn initialize(&self, extra: &[(&str, &str)]) -> Result<HttpReply, Failure> {
        let body = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "raw-http", "version": "1"},
            },
        });
        self.post(extra, &body).await
    }

    /// Opens a legacy session (`initialize`, then `notifications/initialized`) with `extra`
    /// headers on both; the session's id.
    pub async fn open_session(&self, extra: &[(&str, &str)]) -> Result<String, Failure> {
        let init = self.initialize(extra).await?;
        if init.status != 200 {
            return Err(format!("initialize: {init:?}").into());
        }
        let session = init
            .header("mcp-session-id")
            .ok_or("no session")?
            .to_owned();
        let mut headers = vec![
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", "2025-06-18"),
        ];
        headers.extend_from_slice(extra);
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let reply = self.post(&headers, &initialized).await?;
        if reply.status != 202 {
            return Err(format!("notifications/initialized: {reply:?}").into());
        }
        Ok(session)
    }

    /// A legacy `tools/call` in session `session` (whether or not the server issued it).
    pub async fn call_legacy(
        &self,
        session: &str,
        tool: &str,
        arguments: &Value,
    ) -> Result<HttpReply, Failure> {
        let body = json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        });
        self.post(
            &[
                ("mcp-session-id", session),
                ("mcp-protocol-version", "2025-06-18"),
            ],
            &body,
        )
        .await
    }

    /// A legacy `tools/list` in session `session` with `extra` headers.
    pub async fn list_tools_legacy(
        &self,
        extra: &[(&str, &str)],
        session: &str,
    ) -> Result<HttpReply, Failure> {
        let body = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"});
        let mut headers = vec![
            ("mcp-session-id", session),
            ("mcp-protocol-version", "2025-06-18"),
        ];
        headers.extend_from_slice(extra);
        self.post(&headers, &body).await
    }
}

/// The approving answer to the guard's question.
pub fn approve() -> Value {
    json!({"action": "accept", "content": {"approve": true}})
}
