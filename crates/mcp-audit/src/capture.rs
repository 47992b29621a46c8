//! What the server actually sent: the `tools/list` responses, taken from the transport before
//! rmcp parses them (rmcp's `Tool` type drops the fields it does not know, such as
//! `execution`, and re-serialising it would not give the bytes the server sent).
//!
//! Over stdio, both pipes are tapped line by line ([`LineTap`]). Over streamable HTTP, the
//! client sends every `tools/list` POST itself and records the JSON body or each SSE event's
//! data ([`TappedHttp`]); every other message goes through rmcp's reqwest client unchanged.
//! rmcp still drives the session, so both protocol eras work as rmcp speaks them.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures::StreamExt as _;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use sse_stream::{Sse, SseStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error::AuditError;
use crate::surface::ToolsList;

/// The messages sent and received, each as its raw bytes. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub(crate) struct Recorder(Arc<Mutex<Recorded>>);

#[derive(Debug, Default)]
struct Recorded {
    sent: Vec<Vec<u8>>,
    received: Vec<Vec<u8>>,
}

#[derive(Deserialize)]
struct Request {
    id: Value,
    method: String,
}

#[derive(Deserialize)]
struct Response<'a> {
    #[serde(default)]
    id: Value,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    /// Present on a request from the server, which is not an answer whatever its id.
    #[serde(default)]
    method: Option<serde::de::IgnoredAny>,
}

fn is_tools_list(message: &[u8]) -> Option<Value> {
    serde_json::from_slice::<Request>(message)
        .ok()
        .filter(|r| r.method == "tools/list")
        .map(|r| r.id)
}

impl Recorder {
    fn record(&self, sent: bool, message: Vec<u8>) {
        let mut recorded = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if sent {
            recorded.sent.push(message);
        } else {
            recorded.received.push(message);
        }
    }

    /// The tool list of every `tools/list` request sent, in the order sent, read from the
    /// response with the same id.
    ///
    /// # Errors
    ///
    /// [`AuditError::ListTools`] when a response was not seen or its result is malformed.
    pub(crate) fn tools_list(&self) -> Result<ToolsList, AuditError> {
        let recorded = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let responses: Vec<Response<'_>> = recorded
            .received
            .iter()
            .filter_map(|m| serde_json::from_slice::<Response<'_>>(m).ok())
            .filter(|r| r.method.is_none())
            .collect();
        let mut results = Vec::new();
        for id in recorded.sent.iter().filter_map(|m| is_tools_list(m)) {
            // rmcp takes the first answer to a pending request and drops the rest, even one that
            // came before the request: with more than one, what was recorded may not be what
            // rmcp parsed.
            let answers: Vec<&Response<'_>> = responses.iter().filter(|r| r.id == id).collect();
            let result = match answers.as_slice() {
                [answer] => answer.result,
                [] => None,
                more => {
                    return Err(AuditError::ListTools(format!(
                        "the server sent {} answers to tools/list request {id}",
                        more.len()
                    )));
                }
            }
            .ok_or_else(|| {
                AuditError::ListTools(format!(
                    "the answer to tools/list request {id} was not received as sent"
                ))
            })?;
            results.push(result);
        }
        ToolsList::from_results(results)
    }
}

/// A pipe end whose traffic is recorded one line (one stdio message) at a time.
#[derive(Debug)]
pub(crate) struct LineTap<T> {
    inner: T,
    recorder: Recorder,
    sent: bool,
    pending: Vec<u8>,
    /// Inside a line longer than rmcp reads, skipping to its end.
    discarding: bool,
}

/// rmcp's stdio transport drops a line (with its newline) longer than this; the tap drops the
/// same lines, so it records only what rmcp read and never holds more.
const MAX_LINE_LENGTH: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

impl<T> LineTap<T> {
    /// Records what is read from `inner` as received messages.
    pub(crate) fn reading(inner: T, recorder: Recorder) -> Self {
        Self {
            inner,
            recorder,
            sent: false,
            pending: Vec::new(),
            discarding: false,
        }
    }

    /// Records what is written to `inner` as sent messages.
    pub(crate) fn writing(inner: T, recorder: Recorder) -> Self {
        Self {
            sent: true,
            ..Self::reading(inner, recorder)
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        for piece in bytes.split_inclusive(|b| *b == b'\n') {
            let ends = piece.last() == Some(&b'\n');
            if self.discarding {
                self.discarding = !ends;
                continue;
            }
            if self.pending.len().saturating_add(piece.len()) > MAX_LINE_LENGTH {
                self.pending = Vec::new();
                self.discarding = !ends;
                continue;
            }
            self.pending.extend_from_slice(piece);
            if ends {
                let mut line = std::mem::take(&mut self.pending);
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if !line.is_empty() {
                    self.recorder.record(self.sent, line);
                }
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for LineTap<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            this.push(buf.filled().get(before..).unwrap_or_default());
        }
        poll
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for LineTap<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, data);
        if let Poll::Ready(Ok(n)) = poll {
            this.push(data.get(..n).unwrap_or_default());
        }
        poll
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// rmcp's reqwest client, except that `tools/list` POSTs are sent here and their answers
/// recorded as received.
#[derive(Debug, Clone)]
pub(crate) struct TappedHttp {
    client: reqwest::Client,
    recorder: Recorder,
}

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

impl TappedHttp {
    pub(crate) fn new(client: reqwest::Client, recorder: Recorder) -> Self {
        Self { client, recorder }
    }

    async fn post_tools_list(
        &self,
        uri: &str,
        body: Vec<u8>,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let mut request = self
            .client
            .post(uri)
            .header(ACCEPT, "text/event-stream, application/json")
            .header(CONTENT_TYPE, "application/json");
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        if let Some(session_id) = session_id {
            request = request.header("mcp-session-id", session_id.as_ref());
        }
        let response = request.body(body).send().await?;
        let status = response.status();
        let unexpected = |what: String| StreamableHttpError::UnexpectedServerResponse(what.into());
        if !status.is_success() {
            return Err(unexpected(format!("HTTP {status} to tools/list")));
        }
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let media = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase())
            .unwrap_or_default();
        match media.as_str() {
            "application/json" => {
                let mut body = Vec::new();
                let mut chunks = response.bytes_stream();
                while let Some(chunk) = chunks.next().await {
                    body.extend_from_slice(&chunk?);
                    if body.len() > limits.max_json_response_size {
                        return Err(unexpected(format!(
                            "the tools/list answer is larger than {} bytes",
                            limits.max_json_response_size
                        )));
                    }
                }
                let parsed = serde_json::from_slice(&body)
                    .map_err(|e| unexpected(format!("the tools/list answer: {e}")))?;
                self.recorder.record(false, body);
                Ok(StreamableHttpPostResponse::Json(parsed, session))
            }
            "text/event-stream" => {
                let recorder = self.recorder.clone();
                let events = SseStream::from_bytes_stream(response.bytes_stream()).map(
                    move |event: Result<Sse, SseError>| {
                        if let Ok(Sse {
                            data: Some(data), ..
                        }) = &event
                        {
                            recorder.record(false, data.clone().into_bytes());
                        }
                        event
                    },
                );
                Ok(StreamableHttpPostResponse::Sse(events.boxed(), session))
            }
            other => Err(unexpected(format!(
                "the tools/list answer has content type {other:?}"
            ))),
        }
    }
}

impl StreamableHttpClient for TappedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let body = serde_json::to_vec(&message)
            .map_err(|e| StreamableHttpError::UnexpectedServerResponse(e.to_string().into()))?;
        if is_tools_list(&body).is_none() {
            return self
                .client
                .post_message_with_response_limits(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    limits,
                )
                .await;
        }
        self.recorder.record(true, body.clone());
        self.post_tools_list(&uri, body, session_id, auth_header, custom_headers, limits)
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        self.client
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<futures::stream::BoxStream<'static, Result<Sse, SseError>>> {
        self.client
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<futures::stream::BoxStream<'static, Result<Sse, SseError>>> {
        self.client
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tap(sent: &[&str], received: &[&str]) -> Recorder {
        let recorder = Recorder::default();
        for m in sent {
            recorder.record(true, m.as_bytes().to_vec());
        }
        for m in received {
            recorder.record(false, m.as_bytes().to_vec());
        }
        recorder
    }

    #[test]
    fn the_answer_to_each_list_request_is_read_in_request_order() {
        let (tools1, tools2) = (r#"[{"name":"a","x":1}]"#, r#"[ {"name":"b"} ]"#);
        let page1 = format!(r#"{{"tools":{tools1},"nextCursor":"c"}}"#);
        let page2 = format!(r#"{{ "tools" : {tools2} }}"#);
        let recorder = tap(
            &[
                r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#,
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"c"}}"#,
            ],
            &[
                r#"{"jsonrpc":"2.0","id":0,"result":{"tools":[{"name":"not this"}]}}"#,
                r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
                &format!(r#"{{"result":{page2},"jsonrpc":"2.0","id":2}}"#),
                &format!(r#"{{"jsonrpc":"2.0","id":1,"result":{page1}}}"#),
                "not json",
            ],
        );
        let list = recorder.tools_list().unwrap();
        let names: Vec<&str> = list.tools.iter().map(|t| t.name()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(list.bytes, tools1.len() + tools2.len());
    }

    #[test]
    fn a_missing_answer_is_an_error() {
        let recorder = tap(&[r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#], &[]);
        assert!(matches!(
            recorder.tools_list(),
            Err(AuditError::ListTools(m)) if m.contains("request 7")
        ));
    }

    #[test]
    fn a_second_answer_to_a_list_request_is_an_error() {
        // rmcp takes the first answer with a pending id and drops the others, including one
        // sent before the request: a server that answers twice could show the audit one list
        // and the client another.
        let request = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        let safe = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"read"}]}}"#;
        let real = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"delete_all"}]}}"#;
        for received in [[safe, real], [real, safe]] {
            let recorder = tap(&[request], &received);
            assert!(matches!(
                recorder.tools_list(),
                Err(AuditError::ListTools(m)) if m.contains("2 answers") && m.contains("request 1")
            ));
        }
    }

    #[test]
    fn a_server_request_with_the_same_id_is_not_an_answer() {
        // Server and client number their requests independently.
        let recorder = tap(
            &[r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#],
            &[
                r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
                r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}]}}"#,
            ],
        );
        let list = recorder.tools_list().unwrap();
        let names: Vec<&str> = list.tools.iter().map(|t| t.name()).collect();
        assert_eq!(names, ["a"]);
    }

    #[tokio::test]
    async fn a_line_tap_records_whole_lines_across_reads_and_writes() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let recorder = Recorder::default();
        let (a, b) = tokio::io::duplex(8);
        let mut writer = LineTap::writing(a, recorder.clone());
        let mut reader = LineTap::reading(b, recorder.clone());
        let text =
            b"{\"id\":1,\"method\":\"tools/list\"}\r\n\n{\"id\":1,\"result\":{\"tools\":[]}}\n";
        let write = async {
            writer.write_all(text).await.unwrap();
            writer.shutdown().await.unwrap();
        };
        let mut got = Vec::new();
        let read = reader.read_to_end(&mut got);
        let (_, read) = tokio::join!(write, read);
        read.unwrap();
        assert_eq!(got, text);
        let recorded = recorder.0.lock().unwrap();
        assert_eq!(recorded.sent, recorded.received);
        assert_eq!(recorded.sent.len(), 2);
        assert_eq!(recorded.sent[0], br#"{"id":1,"method":"tools/list"}"#);
    }

    #[test]
    fn a_line_tap_drops_the_lines_rmcp_drops_and_holds_no_more() {
        use rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH as MAX;
        let recorder = Recorder::default();
        let mut tap = LineTap::reading((), recorder.clone());
        // A line of MAX bytes and its newline: one byte more than rmcp reads, so rmcp drops it.
        let dropped = vec![b'x'; MAX];
        tap.push(&dropped[..MAX / 2]);
        tap.push(&dropped[MAX / 2..]);
        tap.push(b"\n{\"id\":1}\n");
        // The longest line rmcp keeps.
        let kept = vec![b'y'; MAX - 1];
        tap.push(&kept);
        tap.push(b"\n");
        // A line that never ends is not held beyond the limit.
        for _ in 0..3 {
            tap.push(&dropped);
            assert!(tap.pending.len() <= MAX);
        }
        tap.push(b"\n{}\n");
        let recorded = recorder.0.lock().unwrap();
        assert_eq!(recorded.received.len(), 3);
        assert_eq!(recorded.received[0], br#"{"id":1}"#);
        assert_eq!(recorded.received[1], kept);
        assert_eq!(recorded.received[2], b"{}");
    }
}
