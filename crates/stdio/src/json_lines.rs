//! [`JsonLines`]: an rmcp server transport over any byte stream (stdio, a pipe, a socket) that
//! answers bad frames instead of dropping them, and never ends a session because of one.

use std::{
    borrow::Cow,
    collections::HashSet,
    io,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use mcp_write_guard_rmcp::methods;
use rmcp::{
    RoleServer,
    model::{
        ClientJsonRpcMessage, ClientNotification, ClientRequest, ErrorCode, ErrorData,
        JsonRpcError, JsonRpcMessage, JsonRpcResponse, RequestId, ServerJsonRpcMessage,
        ServerResult,
    },
    transport::Transport,
};
use serde::Serialize;
use serde_json::{Value, error::Category};
use tokio::{
    io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader},
    sync::Mutex,
};

/// The most requests of one client that may be in flight (read, not yet answered) by default;
/// see [`JsonLines::with_max_in_flight`].
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;

/// How long closing the transport waits for the last messages to be written.
const CLOSE_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// The longest line [`JsonLines`] reads, in bytes, without its line break: 16 MiB, the limit
/// of rmcp's own line transport (`rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH`). A
/// longer line is answered with a parse error and skipped; at most this much of it is ever
/// held in memory.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The most messages [`JsonLines`] lets wait to be written before it stops reading: 64. A
/// client that sends requests and does not read the answers then finds its writes blocked
/// (the pipe or socket fills up) instead of the server holding every answer in memory. See
/// [`JsonLines::with_max_unwritten`].
pub const DEFAULT_MAX_UNWRITTEN: usize = 64;

/// The most bytes [`JsonLines`] lets wait to be written before it stops reading: 8 MiB. Answers
/// can repeat what the client sent (an id, a tool's name), so the count of messages alone does
/// not bound their size. A single larger message is still written; reading waits until it was.
/// See [`JsonLines::with_max_unwritten_bytes`].
pub const DEFAULT_MAX_UNWRITTEN_BYTES: usize = 8 * 1024 * 1024;

/// A line buffer larger than this is given back after its line, so that one large message
/// does not keep its memory for the rest of the session.
const KEEP_LINE_CAPACITY: usize = 1024 * 1024;

/// An rmcp server transport that reads and writes one JSON-RPC message per line, answers the
/// lines rmcp's own transport would drop or misread, and never ends a session because of one.
///
/// `R` and `W` are the two halves of the stream: `tokio::io::stdin()` and `tokio::io::stdout()`,
/// non-blocking pipes, or the halves of `tokio::io::split`. Serve a handler on it as on any rmcp
/// transport: `handler.serve(JsonLines::new(read, write)).await?`.
///
/// # What it decides, and what it does not
///
/// It decides what happens to each line a client sends before rmcp sees it:
///
/// | the line | answer | then |
/// |---|---|---|
/// | empty, or only whitespace | none | read on |
/// | not JSON (`NaN`, nesting deeper than serde_json's 128, invalid UTF-8, cut short) | `-32700` Parse error, `id: null` | read on |
/// | longer than the limit ([`DEFAULT_MAX_LINE_BYTES`]) | `-32700`, `id: null`, as soon as the limit is crossed | the rest of the line is skipped without being kept |
/// | JSON, not an object (a number, a string, a batch array) | `-32600` Invalid Request, `id: null` | read on |
/// | a request for a method rmcp knows whose params do not fit (`tools/call` with `arguments: [1]`, `initialize` with `capabilities.elicitation: true`) | `-32602` Invalid params, with the request's `id` | read on (a bad `initialize` leaves the server waiting for a good one) |
/// | any other request rmcp cannot read (no `jsonrpc: "2.0"`, an `id` that is not a string or an integer) | `-32600`, with the `id` when it is a string or an integer, else `null` | read on |
/// | a notification rmcp cannot read, a notification named after one of rmcp's methods (a request sent without an `id`), or a malformed response | none (logged) | read on |
/// | any line, once a write to the client has failed | none | the session ends (nobody reads the answers) |
/// | the next line, while [`DEFAULT_MAX_UNWRITTEN`] messages wait to be written (the client does not read) | none | not read until one was written ([`JsonLines::with_max_unwritten`]) |
/// | a request while [`DEFAULT_MAX_IN_FLIGHT`] of the client's requests are read and not yet answered | `-32000` too many requests at once, with the request's `id` | read on ([`JsonLines::with_max_in_flight`]) |
/// | a request whose `id` is still in flight | `-32600`, with the `id` | read on |
/// | a notification, a response or an error before the session has started | none (logged) | read on |
/// | anything else | rmcp's own | |
///
/// rmcp 3.x's own line transport (`rmcp::transport::async_rw`) drops the first kinds without a
/// word, so the client waits for its own timeout; answers a request whose params do not fit
/// as an unknown method (`-32601`), because the request falls through to
/// [`CustomRequest`](rmcp::model::CustomRequest); and its handshake (`serve_server`) ends the
/// session on a notification or a response that arrives before `initialize`.
///
/// It does not decide anything about tools or writes: a frame it answers never reaches the
/// handler, and a frame it passes on is exactly what rmcp's own transport would have passed on,
/// parsed once. It does not check protocol versions, capabilities or `_meta`: rmcp does.
///
/// Every message is one line: each answer, and each message the server sends, is written whole
/// before the next one starts, even when a write is interrupted (rmcp polls its transport in a
/// `select!`, which can drop a write half-way; what is left of the line goes out first on the
/// next write).
///
/// # Example
///
/// ```
/// use mcp_write_guard_stdio::JsonLines;
/// use rmcp::{ServerHandler, ServiceExt};
/// use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
///
/// #[derive(Clone)]
/// struct Empty;
/// impl ServerHandler for Empty {}
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (server_io, client_io) = tokio::io::duplex(64 * 1024);
/// let (read, write) = tokio::io::split(server_io);
/// // On stdio: mcp_write_guard_stdio::stdio()?
/// tokio::spawn(async move {
///     let running = Empty.serve(JsonLines::new(read, write)).await?;
///     running.waiting().await?;
///     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
/// });
///
/// let (client_read, mut client_write) = tokio::io::split(client_io);
/// let mut answers = BufReader::new(client_read).lines();
/// client_write.write_all(b"NaN\n").await?;
/// assert_eq!(
///     answers.next_line().await?.as_deref(),
///     Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#)
/// );
/// # Ok(())
/// # }
/// ```
#[derive(derive_more::Debug)]
pub struct JsonLines<R, W> {
    #[debug(skip)]
    read: BufReader<R>,
    /// The line being read, without its line break. It survives a cancelled `receive`, which
    /// then resumes the same line.
    #[debug(skip)]
    line: Vec<u8>,
    max_line_bytes: usize,
    /// Skipping the rest of a line that was too long, up to its line break.
    #[debug(skip)]
    skipping: bool,
    /// An error answer decided but not yet handed to the writer.
    #[debug(skip)]
    answer: Option<Vec<u8>>,
    /// An answer was handed to the writer but not yet flushed.
    #[debug(skip)]
    flush_owed: bool,
    lifecycle: Lifecycle,
    #[debug(skip)]
    write: Arc<Mutex<Writer<W>>>,
    /// Set when a write failed: nobody reads what the server sends any more.
    #[debug(skip)]
    broken: Arc<AtomicBool>,
    /// Messages handed to [`Transport::send`] and not yet written.
    #[debug(skip)]
    unwritten: Arc<Unwritten>,
    max_unwritten: usize,
    max_unwritten_bytes: usize,
    /// The ids of the requests passed to rmcp and not yet answered (nor cancelled).
    #[debug(skip)]
    in_flight: HashSet<RequestId>,
    #[debug(skip)]
    max_in_flight: usize,
    /// The ids of the last [`REMEMBERED_CANCELLED`] cancelled requests, oldest first: rmcp
    /// answers a request by its id, so a new request with the id of a cancelled one whose
    /// handler still runs could be given the old one's answer.
    #[debug(skip)]
    cancelled: HashSet<RequestId>,
    /// The same ids, oldest first, to forget the oldest.
    #[debug(skip)]
    cancelled_order: std::collections::VecDeque<RequestId>,
}

/// How many cancelled requests' ids are refused when used again.
const REMEMBERED_CANCELLED: usize = 1024;

/// Counts the messages waiting to be written, and wakes the reading side when one was.
#[derive(Debug, Default)]
struct Unwritten {
    count: std::sync::atomic::AtomicUsize,
    bytes: std::sync::atomic::AtomicUsize,
    written: tokio::sync::Notify,
}

/// One message of `.1` bytes waiting to be written, counted in [`Unwritten`] until dropped
/// (written, failed, or the send abandoned).
struct Waiting(Arc<Unwritten>, usize);

impl Waiting {
    fn enter(unwritten: &Arc<Unwritten>, bytes: usize) -> Self {
        unwritten.count.fetch_add(1, Ordering::AcqRel);
        unwritten.bytes.fetch_add(bytes, Ordering::AcqRel);
        Self(Arc::clone(unwritten), bytes)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
        self.0.bytes.fetch_sub(self.1, Ordering::AcqRel);
        self.0.written.notify_waiters();
    }
}

impl Unwritten {
    /// Returns once fewer than `max` messages and fewer than `max_bytes` bytes wait to be
    /// written. Cancel-safe.
    async fn below(&self, max: usize, max_bytes: usize) {
        loop {
            let written = self.written.notified();
            tokio::pin!(written);
            written.as_mut().enable();
            if self.count.load(Ordering::Acquire) < max
                && self.bytes.load(Ordering::Acquire) < max_bytes
            {
                return;
            }
            written.await;
        }
    }
}

impl<R: AsyncRead, W: AsyncWrite> JsonLines<R, W> {
    /// A transport reading lines from `read` and writing lines to `write`, with lines of at
    /// most [`DEFAULT_MAX_LINE_BYTES`].
    pub fn new(read: R, write: W) -> Self {
        let broken = Arc::new(AtomicBool::new(false));
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            skipping: false,
            answer: None,
            flush_owed: false,
            lifecycle: Lifecycle::default(),
            write: Arc::new(Mutex::new(Writer {
                io: write,
                out: Vec::new(),
                written: 0,
                closed: false,
                broken: Arc::clone(&broken),
            })),
            broken,
            unwritten: Arc::default(),
            max_unwritten: DEFAULT_MAX_UNWRITTEN,
            max_unwritten_bytes: DEFAULT_MAX_UNWRITTEN_BYTES,
            in_flight: HashSet::new(),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            cancelled: HashSet::new(),
            cancelled_order: std::collections::VecDeque::new(),
        }
    }

    /// Answers a request at once with an error (`-32000`, "too many requests at once", nothing
    /// done) while `max_in_flight` of the client's requests are read and not yet answered or
    /// cancelled, and a request whose id is still in flight with `-32600`: memory stays flat
    /// when a client sends faster than the server answers, however slow the handlers are.
    /// Reading goes on, so the client's answers to the server's own questions still arrive.
    /// At least 1; default [`DEFAULT_MAX_IN_FLIGHT`]. A cancelled request frees its place at
    /// once (rmcp sends no answer for it), so a handler should stop when its request is
    /// cancelled (`RequestContext::ct`; the write guard drops a cancelled read's inner call);
    /// the id of one of the last 1,024 cancelled requests is refused when used again.
    #[must_use]
    pub fn with_max_in_flight(mut self, max_in_flight: usize) -> Self {
        self.max_in_flight = max_in_flight.max(1);
        self
    }

    /// Stops reading while `max_unwritten_bytes` bytes wait to be written (as for
    /// [`Self::with_max_unwritten`]). At least 1; default [`DEFAULT_MAX_UNWRITTEN_BYTES`].
    #[must_use]
    pub fn with_max_unwritten_bytes(mut self, max_unwritten_bytes: usize) -> Self {
        self.max_unwritten_bytes = max_unwritten_bytes.max(1);
        self
    }

    /// Stops reading while `max_unwritten` messages (answers, notifications, the server's own
    /// requests) wait to be written, and reads on once one was: memory stays flat when the
    /// client does not read. At least 1; default [`DEFAULT_MAX_UNWRITTEN`]. Requests still being
    /// worked on (a call waiting for the person's answer) do not count: the answers the client
    /// sends to the server's questions keep being read.
    #[must_use]
    pub fn with_max_unwritten(mut self, max_unwritten: usize) -> Self {
        self.max_unwritten = max_unwritten.max(1);
        self
    }

    /// Lines longer than `max_line_bytes` are answered with a parse error and skipped without
    /// being kept. The line break (`\n` or `\r\n`) does not count; every other byte does, a
    /// byte order mark included.
    #[must_use]
    pub fn with_max_line_bytes(mut self, max_line_bytes: usize) -> Self {
        self.max_line_bytes = max_line_bytes;
        self
    }
}

impl<R, W> Transport<RoleServer> for JsonLines<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.lifecycle.sent(&item);
        if let JsonRpcMessage::Response(JsonRpcResponse { id, .. })
        | JsonRpcMessage::Error(JsonRpcError { id: Some(id), .. }) = &item
        {
            self.in_flight.remove(id);
        }
        let write = Arc::clone(&self.write);
        // Written out now, so that what waits is counted in bytes.
        let line = serde_json::to_vec(&item).map(|mut line| {
            line.push(b'\n');
            line
        });
        drop(item);
        let waiting = Waiting::enter(&self.unwritten, line.as_ref().map_or(0, Vec::len));
        async move {
            let sent = write.lock().await.send_line(&line?).await;
            drop(waiting);
            sent
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            // A client that does not read what it asked for is not read either.
            self.unwritten
                .below(self.max_unwritten, self.max_unwritten_bytes)
                .await;
            // Once a write failed, answers would only pile up: the session ends.
            if self.broken.load(Ordering::Acquire) || !self.answer_flushed().await {
                return None;
            }
            let verdict = match self.read_line().await {
                Read::Line => {
                    let verdict = judge(&self.line);
                    self.line.clear();
                    if self.line.capacity() > KEEP_LINE_CAPACITY {
                        self.line = Vec::new();
                    }
                    verdict
                }
                Read::TooLong => Verdict::Answer(Refusal::too_long(self.max_line_bytes)),
                Read::End => return None,
                Read::Failed(error) => {
                    tracing::error!(%error, "reading the client's messages failed; closing");
                    return None;
                }
            };
            match verdict {
                Verdict::Empty => {}
                // Refused before the lifecycle sees it: rmcp never does.
                Verdict::Pass(message) => match self.admit(&message) {
                    Some(refusal) => self.answer = Some(refusal.to_line()),
                    None => match self.lifecycle.received(&message) {
                        Admit::Pass => return Some(message),
                        Admit::Drop(why) => {
                            tracing::warn!(why, "dropped a message from the client");
                        }
                    },
                },
                Verdict::Answer(refusal) => {
                    tracing::debug!(
                        code = refusal.code.0,
                        message = %refusal.message,
                        "answered a frame rmcp cannot read"
                    );
                    self.answer = Some(refusal.to_line());
                }
                Verdict::Drop(why) => tracing::warn!(?why, "dropped a message from the client"),
            }
        }
    }

    /// Writes what is left and shuts the output down, for at most 5 seconds: a client
    /// that stopped reading does not keep the server from ending.
    async fn close(&mut self) -> Result<(), Self::Error> {
        let closing = async {
            let mut writer = self.write.lock().await;
            writer.closed = true;
            let flushed = writer.drain().await;
            let shut = writer.io.shutdown().await;
            flushed.and(shut)
        };
        tokio::time::timeout(CLOSE_WITHIN, closing)
            .await
            .unwrap_or_else(|_| {
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client did not read the last answers",
                ))
            })
    }
}

/// What one bounded line read found.
enum Read {
    /// A whole line is in `line` (the last one may end at the end of input instead of a line
    /// break).
    Line,
    /// The line crossed the limit; what was read of it is gone, and the rest is skipped.
    TooLong,
    /// The input ended.
    End,
    /// Reading failed.
    Failed(io::Error),
}

impl<R, W> JsonLines<R, W> {
    /// Counts a request in flight, or refuses it (too many in flight, or its id is); a
    /// cancellation frees the request's place.
    fn admit(&mut self, message: &ClientJsonRpcMessage) -> Option<Refusal> {
        match message {
            JsonRpcMessage::Request(request) => {
                if self.in_flight.contains(&request.id) || self.cancelled.contains(&request.id) {
                    return Some(Refusal::invalid_request(
                        Some(request.id.clone()),
                        "a request with this id is still being answered, or was cancelled; \
                         give each request its own id",
                    ));
                }
                if self.in_flight.len() >= self.max_in_flight {
                    tracing::warn!(
                        max = self.max_in_flight,
                        "refused a request: too many in flight"
                    );
                    return Some(Refusal::busy(request.id.clone(), self.max_in_flight));
                }
                self.in_flight.insert(request.id.clone());
            }
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                    && self.in_flight.remove(id)
                {
                    if self.cancelled_order.len() >= REMEMBERED_CANCELLED
                        && let Some(oldest) = self.cancelled_order.pop_front()
                    {
                        self.cancelled.remove(&oldest);
                    }
                    self.cancelled.insert(id.clone());
                    self.cancelled_order.push_back(id.clone());
                }
            }
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {}
        }
        None
    }
}

impl<R: AsyncRead, W: AsyncWrite + Unpin> JsonLines<R, W> {
    /// Hands a decided answer to the writer and flushes it. `false` when the writer is gone.
    ///
    /// Cancel-safe: until the writer is locked the answer stays here; once handed over, it
    /// is whole in the writer's buffer, which every later write drains first.
    async fn answer_flushed(&mut self) -> bool {
        if self.answer.is_none() && !self.flush_owed {
            return true;
        }
        let mut writer = self.write.lock().await;
        if let Some(answer) = self.answer.take() {
            writer.out.extend_from_slice(&answer);
            self.flush_owed = true;
        }
        let result = writer.drain().await;
        self.flush_owed = false;
        if let Err(error) = result {
            tracing::error!(%error, "writing an error answer failed; closing");
            return false;
        }
        true
    }
}

impl<R: AsyncRead + Unpin, W> JsonLines<R, W> {
    /// Reads one line into `self.line`, never holding more than `max_line_bytes` of it.
    ///
    /// Cancel-safe: `fill_buf` takes nothing when dropped, and each chunk is copied and
    /// consumed with no await in between, so a dropped read leaves its part of the line in
    /// `self.line` (or its skipping state) for the next call.
    async fn read_line(&mut self) -> Read {
        loop {
            let available = match self.read.fill_buf().await {
                Ok(available) => available,
                Err(error) => return Read::Failed(error),
            };
            if available.is_empty() {
                self.skipping = false;
                return if self.line.is_empty() {
                    Read::End
                } else {
                    // A last line without a line break is still a line.
                    Read::Line
                };
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let content = newline.map_or(available, |at| available.get(..at).unwrap_or_default());
            let taken = newline.map_or(available.len(), |at| at + 1);
            let read = if self.skipping {
                self.skipping = newline.is_none();
                None
            } else if over_limit(&self.line, content, newline.is_some(), self.max_line_bytes) {
                self.line.clear();
                self.skipping = newline.is_none();
                Some(Read::TooLong)
            } else {
                self.line.extend_from_slice(content);
                newline.map(|_| Read::Line)
            };
            self.read.consume(taken);
            if let Some(read) = read {
                return read;
            }
        }
    }
}

/// Whether `line`, the line read so far, then `content` is longer than `max` bytes. A `\r`
/// before the `\n` belongs to the line break: a line may hold one byte more while its last
/// byte is a `\r` that may turn out to be one.
fn over_limit(line: &[u8], content: &[u8], ends_here: bool, max: usize) -> bool {
    let len = line.len().saturating_add(content.len());
    let last_is_cr = content.last().or(line.last()) == Some(&b'\r');
    if ends_here {
        len - usize::from(last_is_cr) > max
    } else {
        len > max.saturating_add(1) || (len > max && !last_is_cr)
    }
}

/// The write half: whole lines, in order, even when a write is dropped half-way.
struct Writer<W> {
    io: W,
    /// Bytes of whole lines not yet written; `out[..written]` are written.
    out: Vec<u8>,
    written: usize,
    closed: bool,
    /// Set, with `closed`, when a write fails; shared with the reading side.
    broken: Arc<AtomicBool>,
}

impl<W: AsyncWrite + Unpin> Writer<W> {
    /// Writes `line` (one message and its line break).
    async fn send_line(&mut self, line: &[u8]) -> io::Result<()> {
        if self.closed {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the transport is closed",
            ));
        }
        self.out.extend_from_slice(line);
        self.drain().await
    }

    /// Writes and flushes everything in `out`. A failed write closes the writer and drops what
    /// it held: later sends fail at once, and the reading side ends the session, instead of
    /// keeping every later message for a reader that is gone.
    async fn drain(&mut self) -> io::Result<()> {
        let result = self.write_out().await;
        if result.is_err() {
            self.closed = true;
            self.broken.store(true, Ordering::Release);
            self.out = Vec::new();
            self.written = 0;
        }
        result
    }

    async fn write_out(&mut self) -> io::Result<()> {
        while let Some(rest) = self.out.get(self.written..).filter(|rest| !rest.is_empty()) {
            let n = self.io.write(rest).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.written += n;
        }
        self.out.clear();
        self.written = 0;
        if self.out.capacity() > KEEP_LINE_CAPACITY {
            self.out = Vec::new();
        }
        self.io.flush().await
    }
}

/// What to do with one line.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "one verdict per line, moved once: boxing the message would allocate per message"
)]
enum Verdict {
    /// Nothing in it.
    Empty,
    /// A message rmcp reads as it is.
    Pass(ClientJsonRpcMessage),
    /// Answer with this error, pass nothing.
    Answer(Refusal),
    /// Pass nothing, answer nothing (a notification or a response: no one waits for an answer).
    Drop(Cow<'static, str>),
}

/// An error answer: JSON-RPC's own `id: null` when the request's id cannot be read.
#[derive(Debug, PartialEq)]
struct Refusal {
    id: Option<RequestId>,
    code: ErrorCode,
    message: Cow<'static, str>,
}

impl Refusal {
    fn parse_error() -> Self {
        Self {
            id: None,
            code: ErrorCode::PARSE_ERROR,
            message: Cow::Borrowed("Parse error"),
        }
    }

    fn too_long(max_line_bytes: usize) -> Self {
        Self {
            id: None,
            code: ErrorCode::PARSE_ERROR,
            message: Cow::Owned(format!(
                "Parse error: message longer than {max_line_bytes} bytes, skipped"
            )),
        }
    }

    fn invalid_request(id: Option<RequestId>, why: &str) -> Self {
        Self {
            id,
            code: ErrorCode::INVALID_REQUEST,
            message: Cow::Owned(format!("Invalid Request: {why}")),
        }
    }

    fn busy(id: RequestId, max_in_flight: usize) -> Self {
        Self {
            id: Some(id),
            code: ErrorCode(-32000),
            message: Cow::Owned(format!(
                "Too many requests at once: at most {max_in_flight} may wait for an answer. \
                 Nothing was done; send this request again once an answer has arrived."
            )),
        }
    }

    fn invalid_params(id: RequestId, message: String) -> Self {
        Self {
            id: Some(id),
            code: ErrorCode::INVALID_PARAMS,
            message: Cow::Owned(message),
        }
    }

    /// The answer as one line, `"id": null` included when there is no id (rmcp's own error
    /// messages leave `id` out then).
    fn to_line(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Wire<'a> {
            jsonrpc: &'static str,
            id: Option<&'a RequestId>,
            error: ErrorData,
        }
        let wire = Wire {
            jsonrpc: "2.0",
            id: self.id.as_ref(),
            error: ErrorData::new(self.code, self.message.clone(), None),
        };
        // Strings, integers and a code: serializing cannot fail; an empty line would be skipped.
        let mut line = serde_json::to_vec(&wire).unwrap_or_default();
        line.push(b'\n');
        line
    }
}

/// Decides what one line (without its line break) is. Parses it once when it is a message
/// rmcp can read; only a line that is not parses it a second time, as plain JSON, to find its
/// id and method.
fn judge(line: &[u8]) -> Verdict {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Empty;
    }
    match serde_json::from_slice::<ClientJsonRpcMessage>(line) {
        Ok(message) => judge_message(message),
        Err(error) if matches!(error.classify(), Category::Syntax | Category::Eof) => {
            Verdict::Answer(Refusal::parse_error())
        }
        Err(_) => match serde_json::from_slice::<Value>(line) {
            Ok(value) => judge_value(&value),
            Err(_) => Verdict::Answer(Refusal::parse_error()),
        },
    }
}

/// A message rmcp read: a known method whose params did not fit came through as a custom
/// request or notification.
fn judge_message(message: ClientJsonRpcMessage) -> Verdict {
    match &message {
        JsonRpcMessage::Request(request) => {
            if let ClientRequest::CustomRequest(custom) = &request.request
                && let Some(message) = methods::misfit(&custom.method, custom.params.as_ref())
            {
                return Verdict::Answer(Refusal::invalid_params(request.id.clone(), message));
            }
            Verdict::Pass(message)
        }
        JsonRpcMessage::Notification(notification) => {
            if let ClientNotification::CustomNotification(custom) = &notification.notification
                && methods::is_rmcp_method(&custom.method)
            {
                return Verdict::Drop(Cow::Owned(format!(
                    "a {} notification that rmcp could not read as one",
                    custom.method
                )));
            }
            Verdict::Pass(message)
        }
        JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => Verdict::Pass(message),
    }
}

/// JSON that rmcp cannot read as a message.
fn judge_value(value: &Value) -> Verdict {
    let Some(object) = value.as_object() else {
        return Verdict::Answer(Refusal::invalid_request(
            None,
            if value.is_array() {
                "batches are not supported; send one message per line"
            } else {
                "a message is a JSON object"
            },
        ));
    };
    let method = object.get("method");
    if method.is_none() && (object.contains_key("result") || object.contains_key("error")) {
        // Never answer a response: two peers answering each other's bad answers never stop.
        return Verdict::Drop(Cow::Borrowed("a malformed response"));
    }
    let Some(id) = object.get("id") else {
        return match method {
            Some(_) => Verdict::Drop(Cow::Borrowed("a malformed notification")),
            None => Verdict::Answer(Refusal::invalid_request(None, "no method")),
        };
    };
    let id = match id {
        Value::String(id) => RequestId::String(id.as_str().into()),
        Value::Number(id) => match id.as_i64() {
            Some(id) => RequestId::Number(id),
            None => {
                return Verdict::Answer(Refusal::invalid_request(
                    None,
                    "the id is not an integer or a string",
                ));
            }
        },
        _ => {
            return Verdict::Answer(Refusal::invalid_request(
                None,
                "the id is not an integer or a string",
            ));
        }
    };
    let Some(method) = method.and_then(Value::as_str) else {
        return Verdict::Answer(Refusal::invalid_request(
            Some(id),
            "the method is not a string",
        ));
    };
    if let Some(message) = methods::params_misfit(method, object.get("params")) {
        return Verdict::Answer(Refusal::invalid_params(id, message));
    }
    let why = if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        "jsonrpc must be \"2.0\""
    } else {
        "not a request this server can read"
    };
    Verdict::Answer(Refusal::invalid_request(Some(id), why))
}

/// Where rmcp's session is, as far as the transport can tell from what passes through it.
///
/// Until a session starts, rmcp's `serve_server` waits for `initialize` (or, from 2026-07-28, a
/// request carrying its protocol version in `_meta`), answers `ping` and `server/discover`,
/// answers a request without usable `_meta` with an error and keeps waiting, and **ends** on
/// anything else: a notification, a response or an error. So until then only requests pass.
#[derive(Debug, Default)]
struct Lifecycle {
    started: bool,
    /// A request that rmcp may have started a session with, unless it refuses it.
    maybe_started_by: Option<RequestId>,
}

/// Whether a message may reach rmcp now.
#[derive(Debug, PartialEq)]
enum Admit {
    Pass,
    Drop(&'static str),
}

impl Lifecycle {
    /// Called with each message about to be passed to rmcp.
    fn received(&mut self, message: &ClientJsonRpcMessage) -> Admit {
        if self.started {
            return Admit::Pass;
        }
        if self.maybe_started_by.take().is_some() {
            // rmcp asks for the next message before answering that request only when it
            // started a session with it: a refusal is sent before it reads on.
            self.started = true;
            return Admit::Pass;
        }
        match message {
            JsonRpcMessage::Request(request) => {
                match request.request {
                    ClientRequest::PingRequest(_)
                    | ClientRequest::InitializeRequest(_)
                    | ClientRequest::DiscoverRequest(_) => {}
                    _ => self.maybe_started_by = Some(request.id.clone()),
                }
                Admit::Pass
            }
            JsonRpcMessage::Notification(_) => {
                Admit::Drop("a notification before the session started")
            }
            JsonRpcMessage::Response(_) => Admit::Drop("a response before the session started"),
            JsonRpcMessage::Error(_) => Admit::Drop("an error before the session started"),
        }
    }

    /// Called with each message rmcp sends.
    fn sent(&mut self, message: &ServerJsonRpcMessage) {
        if self.started {
            return;
        }
        match message {
            JsonRpcMessage::Response(response)
                if matches!(response.result, ServerResult::InitializeResult(_)) =>
            {
                self.started = true;
            }
            JsonRpcMessage::Error(error)
                if error.id.is_some() && error.id == self.maybe_started_by =>
            {
                self.maybe_started_by = None;
                // rmcp's refusals before a session: no usable `_meta`, or a version it does
                // not serve. Any other error comes from the handler, in a started session.
                let refused = error.error.code == ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
                    || (error.error.code == ErrorCode::INVALID_PARAMS
                        && error.error.message.starts_with("request _meta is missing"));
                self.started = !refused;
            }
            JsonRpcMessage::Response(response)
                if Some(&response.id) == self.maybe_started_by.as_ref() =>
            {
                self.maybe_started_by = None;
                self.started = true;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rmcp::{ServerHandler, ServiceExt};
    use serde_json::json;
    use tokio::io::{
        AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
    };

    use super::*;

    const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

    fn answer_of(line: &str) -> Value {
        match judge(line.as_bytes()) {
            Verdict::Answer(refusal) => serde_json::from_slice(&refusal.to_line()).unwrap(),
            other => panic!("{line}: expected an answer, got {other:?}"),
        }
    }

    fn code_and_id(line: &str) -> (i64, Value) {
        let answer = answer_of(line);
        assert_eq!(answer["jsonrpc"], "2.0");
        assert!(answer.as_object().unwrap().contains_key("id"), "{answer}");
        (
            answer["error"]["code"].as_i64().unwrap(),
            answer["id"].clone(),
        )
    }

    #[test]
    fn each_bad_frame_gets_its_code_and_id() {
        let deep = format!("{}{}", "[".repeat(130), "]".repeat(130));
        let deep_params =
            format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{{"a":{deep}}}}}"#);
        let table: Vec<(&str, String, i64, Value)> = vec![
            ("NaN", "NaN".into(), -32700, Value::Null),
            ("130 levels", deep.clone(), -32700, Value::Null),
            ("130 levels inside a request", deep_params, -32700, Value::Null),
            ("cut short", r#"{"jsonrpc":"2.0","id":1,"#.into(), -32700, Value::Null),
            ("a number", "42".into(), -32600, Value::Null),
            ("a bare string", r#""tools/list""#.into(), -32600, Value::Null),
            ("null", "null".into(), -32600, Value::Null),
            ("a batch", r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#.into(), -32600, Value::Null),
            ("an empty batch", "[]".into(), -32600, Value::Null),
            ("an empty object", "{}".into(), -32600, Value::Null),
            (
                "arguments [1]",
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get","arguments":[1]}}"#.into(),
                -32602,
                json!(7),
            ),
            (
                "requestState 123",
                r#"{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"get","arguments":{},"requestState":123}}"#.into(),
                -32602,
                json!("s"),
            ),
            (
                "tools/call without params",
                r#"{"jsonrpc":"2.0","id":8,"method":"tools/call"}"#.into(),
                -32602,
                json!(8),
            ),
            (
                "elicitation: true",
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":true},"clientInfo":{"name":"t","version":"0"}}}"#.into(),
                -32602,
                json!(1),
            ),
            (
                "tools/list params 5",
                r#"{"jsonrpc":"2.0","id":9,"method":"tools/list","params":5}"#.into(),
                -32602,
                json!(9),
            ),
            ("no jsonrpc", r#"{"id":4,"method":"ping"}"#.into(), -32600, json!(4)),
            ("jsonrpc 1.0", r#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#.into(), -32600, json!(4)),
            ("a method that is a number", r#"{"jsonrpc":"2.0","id":5,"method":5}"#.into(), -32600, json!(5)),
            ("an id that is an object", r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#.into(), -32600, Value::Null),
            ("an id that is null", r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.into(), -32600, Value::Null),
            ("an id that is a fraction", r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#.into(), -32600, Value::Null),
        ];
        for (name, line, code, id) in table {
            assert_eq!(code_and_id(&line), (code, id), "{name}");
        }
    }

    #[test]
    fn invalid_utf8_is_a_parse_error() {
        let line =
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xff\xfe\"}}";
        let Verdict::Answer(refusal) = judge(line) else {
            panic!()
        };
        assert_eq!(refusal, Refusal::parse_error());
    }

    #[test]
    fn the_parse_error_is_the_json_rpc_one_with_a_null_id() {
        assert_eq!(
            String::from_utf8(Refusal::parse_error().to_line()).unwrap(),
            "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error\"}}\n"
        );
    }

    #[test]
    fn invalid_params_say_what_did_not_fit_within_bounds() {
        let long = "x".repeat(10_000);
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{{"level":"{long}"}}}}"#
        );
        let answer = answer_of(&line);
        assert_eq!(answer["error"]["code"], -32602);
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("Invalid params for logging/setLevel: "),
            "{message}"
        );
        assert!(message.chars().count() < 300, "{message}");
    }

    #[test]
    fn nothing_to_read_and_nobody_to_answer_is_dropped_or_skipped() {
        for line in ["", "   ", "\r", "\t \r"] {
            assert!(matches!(judge(line.as_bytes()), Verdict::Empty), "{line:?}");
        }
        for line in [
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":5}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":"x"}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":7}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"x"}}"#,
            // A request sent without an id, params that fit and all: rmcp reads it as a
            // custom notification named after the request.
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","method":"ping"}"#,
        ] {
            assert!(matches!(judge(line.as_bytes()), Verdict::Drop(_)), "{line}");
        }
        // A custom notification proper passes.
        let custom = r#"{"jsonrpc":"2.0","method":"acme/tick","params":{"name":"add"}}"#;
        assert!(matches!(judge(custom.as_bytes()), Verdict::Pass(_)));
    }

    #[test]
    fn good_messages_pass_as_rmcp_reads_them() {
        for line in [
            INITIALIZE,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get","arguments":{"sku":"A"}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"vendor/thing","params":{"a":[1]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","method":"vendor/notice","params":{"a":5}}"#,
            r#"{"jsonrpc":"2.0","id":5,"result":{}}"#,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}\r",
        ] {
            let Verdict::Pass(message) = judge(line.as_bytes()) else {
                panic!("{line}: expected to pass");
            };
            let direct = line.trim_start_matches('\u{feff}').trim_end_matches('\r');
            let direct: ClientJsonRpcMessage = serde_json::from_str(direct).unwrap();
            assert_eq!(
                serde_json::to_value(&message).unwrap(),
                serde_json::to_value(&direct).unwrap(),
                "{line}"
            );
        }
    }

    #[test]
    fn before_the_session_only_requests_pass() {
        let message = |line: &str| serde_json::from_str::<ClientJsonRpcMessage>(line).unwrap();
        let mut lifecycle = Lifecycle::default();
        for line in [
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":9,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}"#,
        ] {
            assert!(
                matches!(lifecycle.received(&message(line)), Admit::Drop(_)),
                "{line}"
            );
        }
        let ping = message(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert_eq!(lifecycle.received(&ping), Admit::Pass);
        // A request without `_meta` that rmcp refuses leaves it waiting.
        let list = message(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
        assert_eq!(lifecycle.received(&list), Admit::Pass);
        lifecycle.sent(&ServerJsonRpcMessage::error(
            ErrorData::invalid_params(
                "request _meta is missing or has malformed required fields: x",
                None,
            ),
            Some(RequestId::Number(2)),
        ));
        let notification = message(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(matches!(lifecycle.received(&notification), Admit::Drop(_)));
        // `initialize` answered: the session has started.
        assert_eq!(lifecycle.received(&message(INITIALIZE)), Admit::Pass);
        lifecycle.sent(&ServerJsonRpcMessage::response(
            ServerResult::InitializeResult(rmcp::model::InitializeResult::new(
                rmcp::model::ServerCapabilities::default(),
            )),
            RequestId::Number(1),
        ));
        assert_eq!(lifecycle.received(&notification), Admit::Pass);
    }

    #[test]
    fn a_request_rmcp_starts_a_session_with_lets_everything_through_after_it() {
        let message = |line: &str| serde_json::from_str::<ClientJsonRpcMessage>(line).unwrap();
        let mut lifecycle = Lifecycle::default();
        let call = message(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#);
        assert_eq!(lifecycle.received(&call), Admit::Pass);
        // rmcp reads on before answering: it serves that request in a session.
        let notification = message(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#,
        );
        assert_eq!(lifecycle.received(&notification), Admit::Pass);
    }

    // The transport itself, over tokio duplex pipes.

    #[derive(Clone)]
    struct Empty;
    impl ServerHandler for Empty {}

    struct Peer {
        lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
        write: WriteHalf<DuplexStream>,
    }

    impl Peer {
        async fn send(&mut self, bytes: &[u8]) {
            self.write.write_all(bytes).await.unwrap();
        }
        async fn next(&mut self) -> Value {
            let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
                .await
                .expect("an answer within 10 s")
                .unwrap()
                .expect("a line, not the end");
            serde_json::from_str(&line).unwrap()
        }
        /// Sends a ping with `id` and asserts that the answer is its empty result.
        async fn assert_ping_answered(&mut self, id: u64) {
            self.send(ping(id).as_bytes()).await;
            assert_eq!(
                self.next().await,
                json!({"jsonrpc":"2.0","id":id,"result":{}})
            );
        }

        async fn nothing_for_a_moment(&mut self) {
            let next =
                tokio::time::timeout(Duration::from_millis(200), self.lines.next_line()).await;
            assert!(next.is_err(), "expected no answer, got {next:?}");
        }
    }

    /// A ping with `id`, as a line.
    fn ping(id: u64) -> String {
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n")
    }

    fn serve(max_line_bytes: usize) -> (Peer, tokio::task::JoinHandle<bool>) {
        let (server, client) = tokio::io::duplex(4096);
        let (read, write) = tokio::io::split(server);
        let transport = JsonLines::new(read, write).with_max_line_bytes(max_line_bytes);
        let task = tokio::spawn(async move {
            match Empty.serve(transport).await {
                Ok(running) => running.waiting().await.is_ok(),
                Err(_) => false,
            }
        });
        let (read, write) = tokio::io::split(client);
        (
            Peer {
                lines: BufReader::new(read).lines(),
                write,
            },
            task,
        )
    }

    #[tokio::test]
    async fn answers_bad_frames_and_serves_on_over_a_pipe() {
        let (mut peer, task) = serve(1024);
        // Before initialize: junk, a notification and a response must not end the session.
        peer.send(b"NaN\n").await;
        assert_eq!(
            peer.next().await,
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}})
        );
        peer.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await;
        peer.send(b"{\"jsonrpc\":\"2.0\",\"id\":77,\"result\":{}}\n")
            .await;
        peer.nothing_for_a_moment().await;
        peer.send(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":true},"clientInfo":{"name":"t","version":"0"}}}"#).await;
        peer.send(b"\n").await;
        let refused = peer.next().await;
        assert_eq!(
            (refused["id"].clone(), refused["error"]["code"].clone()),
            (json!(1), json!(-32602))
        );
        peer.send(format!("{INITIALIZE}\n").as_bytes()).await;
        let initialized = peer.next().await;
        assert_eq!(initialized["id"], 1);
        assert!(
            initialized["result"]["protocolVersion"].is_string(),
            "{initialized}"
        );
        peer.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await;

        // A line far over the limit, sent in pieces: one answer, then the next line is read.
        peer.send(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"params\":{\"x\":\"")
            .await;
        for _ in 0..64 {
            peer.send(&[b'a'; 1024]).await;
        }
        let too_long = peer.next().await;
        assert_eq!(
            (too_long["id"].clone(), too_long["error"]["code"].clone()),
            (Value::Null, json!(-32700))
        );
        peer.send(b"\"}}\n").await;
        peer.assert_ping_answered(6).await;

        peer.send(b"[1,2]\n\n42\n").await;
        assert_eq!(peer.next().await["error"]["code"], -32600);
        assert_eq!(peer.next().await["error"]["code"], -32600);
        peer.send(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}")
            .await;
        peer.write.shutdown().await.unwrap();
        assert_eq!(
            peer.lines
                .next_line()
                .await
                .unwrap()
                .map(|l| serde_json::from_str::<Value>(&l).unwrap()),
            Some(json!({"jsonrpc":"2.0","id":7,"result":{}}))
        );
        assert!(
            task.await.unwrap(),
            "the session ends cleanly at the end of input"
        );
    }

    #[tokio::test]
    async fn an_endless_line_costs_at_most_the_limit() {
        let (server, mut client) = tokio::io::duplex(64 * 1024);
        let (read, write) = tokio::io::split(server);
        let mut transport = JsonLines::new(read, write).with_max_line_bytes(1000);
        let receiver = tokio::spawn(async move {
            let message = Transport::<RoleServer>::receive(&mut transport).await;
            (message.is_some(), transport.line.capacity())
        });
        // 8 MiB without a line break, then a good line.
        let chunk = vec![b' '; 64 * 1024];
        for _ in 0..128 {
            client.write_all(&chunk).await.unwrap();
        }
        client
            .write_all(b"\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
            .await
            .unwrap();
        let (got, capacity) = receiver.await.unwrap();
        assert!(got, "the line after the long one is read");
        assert!(
            capacity <= 64 * 1024,
            "the long line was not kept: capacity {capacity}"
        );
        let mut answer = String::new();
        let mut reader = BufReader::new(&mut client);
        reader.read_line(&mut answer).await.unwrap();
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["error"]["code"], -32700);
        assert_eq!(answer["id"], Value::Null);
    }

    #[tokio::test]
    async fn a_write_dropped_half_way_is_finished_before_the_next_line() {
        // A pipe with room for 10 bytes: the first write stalls part-way and is dropped.
        let (server, client) = tokio::io::duplex(10);
        let (_read, write) = tokio::io::split(server);
        let mut transport = JsonLines::new(tokio::io::empty(), write);
        let first = ServerJsonRpcMessage::response(ServerResult::empty(()), RequestId::Number(1));
        let stalled = tokio::time::timeout(
            Duration::from_millis(50),
            Transport::<RoleServer>::send(&mut transport, first),
        )
        .await;
        assert!(stalled.is_err(), "the first write could not finish");
        let second = ServerJsonRpcMessage::response(ServerResult::empty(()), RequestId::Number(2));
        let send = tokio::spawn(Transport::<RoleServer>::send(&mut transport, second));
        let mut lines = BufReader::new(client).lines();
        assert_eq!(
            lines.next_line().await.unwrap().unwrap(),
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
        );
        assert_eq!(
            lines.next_line().await.unwrap().unwrap(),
            r#"{"jsonrpc":"2.0","id":2,"result":{}}"#
        );
        send.await.unwrap().unwrap();
    }

    #[test]
    fn the_line_break_does_not_count_against_the_limit() {
        // (line so far, content, a line break ends this chunk, over a limit of 4?)
        for (line, content, ends_here, over) in [
            (&b""[..], &b"abcd"[..], true, false),
            (b"", b"abcd\r", true, false),
            (b"", b"abcde", true, true),
            (b"", b"abcde\r", true, true),
            // A `\r` at the end of a chunk may be the first byte of the line break.
            (b"", b"abcd\r", false, false),
            (b"abcd\r", b"", true, false),
            (b"abcd\r", b"x", false, true),
            (b"", b"abcde", false, true),
            (b"ab", b"cd", false, false),
            (b"abc", b"de", true, true),
        ] {
            assert_eq!(
                over_limit(line, content, ends_here, 4),
                over,
                "{line:?} + {content:?}, line break: {ends_here}"
            );
        }
    }

    #[tokio::test]
    async fn a_line_exactly_at_the_limit_is_read_whatever_its_line_break() {
        let ping = br#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#;
        for (ending, split) in [(&b"\n"[..], false), (b"\r\n", false), (b"\r\n", true)] {
            let (server, client) = tokio::io::duplex(1 << 16);
            let (read, write) = tokio::io::split(server);
            let mut transport = JsonLines::new(read, write).with_max_line_bytes(ping.len());
            let (client_read, mut client_write) = tokio::io::split(client);
            let mut line = ping.to_vec();
            line.extend_from_slice(ending);
            let received = if split {
                // The `\r` arrives at the end of one read, the `\n` in the next.
                client_write
                    .write_all(&line[..line.len() - 1])
                    .await
                    .unwrap();
                let first = tokio::time::timeout(
                    Duration::from_millis(100),
                    Transport::<RoleServer>::receive(&mut transport),
                )
                .await;
                assert!(first.is_err(), "nothing is read before the line ends");
                client_write.write_all(b"\n").await.unwrap();
                Transport::<RoleServer>::receive(&mut transport).await
            } else {
                client_write.write_all(&line).await.unwrap();
                Transport::<RoleServer>::receive(&mut transport).await
            };
            assert!(
                matches!(received, Some(JsonRpcMessage::Request(_))),
                "{ending:?} (split: {split}): {received:?}"
            );
            // Nothing was answered.
            drop(transport);
            let mut rest = String::new();
            tokio::io::AsyncReadExt::read_to_string(&mut { client_read }, &mut rest)
                .await
                .unwrap();
            assert_eq!(rest, "", "{ending:?} (split: {split})");
        }
    }

    /// A write half that works until `broken` is set, then fails every write with a broken
    /// pipe (the client closed the server's stdout), counting the bytes each attempt offers.
    #[derive(Clone, Default)]
    struct Breakable {
        broken: Arc<AtomicBool>,
        written: Arc<parking_lot::Mutex<Vec<u8>>>,
        offered: Arc<parking_lot::Mutex<Vec<usize>>>,
    }

    impl AsyncWrite for Breakable {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<io::Result<usize>> {
            if self.broken.load(Ordering::SeqCst) {
                self.offered.lock().push(buf.len());
                return std::task::Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
            }
            self.written.lock().extend_from_slice(buf);
            std::task::Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn after_a_failed_write_sends_fail_at_once_and_keep_nothing() {
        let out = Breakable::default();
        out.broken.store(true, Ordering::SeqCst);
        let mut transport = JsonLines::new(tokio::io::empty(), out.clone());
        for i in 0..1_000 {
            let message =
                ServerJsonRpcMessage::response(ServerResult::empty(()), RequestId::Number(i));
            let sent = Transport::<RoleServer>::send(&mut transport, message).await;
            let kind = sent.unwrap_err().kind();
            let expected = if i == 0 {
                io::ErrorKind::BrokenPipe
            } else {
                io::ErrorKind::NotConnected
            };
            assert_eq!(kind, expected, "send {i}");
        }
        // Only the first message was offered to the pipe; nothing was kept for later.
        assert_eq!(out.offered.lock().len(), 1);
        assert!(transport.write.lock().await.out.is_empty());
        // And the reading side ends the session.
        assert!(
            Transport::<RoleServer>::receive(&mut transport)
                .await
                .is_none()
        );
    }

    #[tokio::test]
    async fn a_closed_stdout_ends_the_session_instead_of_keeping_every_answer() {
        let out = Breakable::default();
        let (server_read, mut client_write) = tokio::io::duplex(1 << 16);
        // Room for every ping in flight: only rmcp's answers (about 40 bytes each) are written.
        let transport = JsonLines::new(server_read, out.clone()).with_max_in_flight(10_000);
        let task = tokio::spawn(async move {
            if let Ok(running) = Empty.serve(transport).await {
                let _ = running.waiting().await;
            }
        });
        client_write
            .write_all(format!("{INITIALIZE}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\n").as_bytes())
            .await
            .unwrap();
        for _ in 0..100 {
            if !out.written.lock().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!out.written.lock().is_empty(), "initialize was answered");
        out.broken.store(true, Ordering::SeqCst);
        let mut pings = String::new();
        for id in 2..=1_000 {
            pings.push_str(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n"
            ));
        }
        // The server may stop reading before all of them are written.
        let _ = client_write.write_all(pings.as_bytes()).await;
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the session ends")
            .unwrap();
        let largest = out.offered.lock().iter().copied().max().unwrap_or(0);
        assert!(largest < 100, "a failed write offered {largest} bytes");
    }

    /// A server whose `tools/list` answers only when the request is cancelled (never, then:
    /// rmcp sends no answer for a cancelled request).
    #[derive(Clone)]
    struct Stuck;
    impl ServerHandler for Stuck {
        async fn list_tools(
            &self,
            _request: Option<rmcp::model::PaginatedRequestParams>,
            context: rmcp::service::RequestContext<RoleServer>,
        ) -> Result<rmcp::model::ListToolsResult, ErrorData> {
            context.ct.cancelled().await;
            Err(ErrorData::internal_error("cancelled", None))
        }
    }

    /// A started session with [`Stuck`], at most `max_in_flight` requests in flight.
    async fn stuck(max_in_flight: usize) -> Peer {
        let (server, client) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server);
        let transport = JsonLines::new(read, write).with_max_in_flight(max_in_flight);
        tokio::spawn(async move {
            if let Ok(running) = Stuck.serve(transport).await {
                let _ = running.waiting().await;
            }
        });
        let (read, write) = tokio::io::split(client);
        let mut peer = Peer {
            lines: BufReader::new(read).lines(),
            write,
        };
        peer.send(format!("{INITIALIZE}\n").as_bytes()).await;
        assert_eq!(peer.next().await["id"], 1);
        peer.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await;
        peer
    }

    fn list_tools(id: u64) -> String {
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/list\"}}\n")
    }

    #[tokio::test]
    async fn requests_beyond_the_in_flight_bound_are_refused_at_once_and_reading_goes_on() {
        let mut peer = stuck(4).await;
        for id in 10..14 {
            peer.send(list_tools(id).as_bytes()).await;
        }
        peer.nothing_for_a_moment().await;
        // Full: the next request is answered by the transport, with its id; so is a ping.
        peer.send(list_tools(20).as_bytes()).await;
        let busy = peer.next().await;
        assert_eq!(
            (busy["id"].clone(), busy["error"]["code"].clone()),
            (json!(20), json!(-32000))
        );
        let message = busy["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("at most 4") && message.contains("Nothing was done"),
            "{message}"
        );
        peer.send(ping(21).as_bytes()).await;
        assert_eq!(peer.next().await["error"]["code"], -32000);
        // An id still in flight is refused as such, whatever the room.
        peer.send(list_tools(10).as_bytes()).await;
        let again = peer.next().await;
        assert_eq!(
            (again["id"].clone(), again["error"]["code"].clone()),
            (json!(10), json!(-32600))
        );
        // A cancellation frees a place: the next ping is rmcp's to answer.
        peer.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":11}}\n").await;
        peer.assert_ping_answered(22).await;
        // Answered requests leave: pings one after another never fill it.
        for id in 30..40 {
            peer.send(ping(id).as_bytes()).await;
            assert_eq!(peer.next().await["id"], id);
        }
        // The cancelled id may not be used again: its handler may still answer by it.
        peer.send(list_tools(11).as_bytes()).await;
        let reused = peer.next().await;
        assert_eq!(
            (reused["id"].clone(), reused["error"]["code"].clone()),
            (json!(11), json!(-32600))
        );
        // Room for one more (10, 12 and 13 still wait), then full again.
        peer.send(list_tools(40).as_bytes()).await;
        peer.nothing_for_a_moment().await;
        peer.send(list_tools(41).as_bytes()).await;
        assert_eq!(peer.next().await["error"]["code"], -32000);
    }

    #[tokio::test]
    async fn a_flood_that_the_handler_never_answers_holds_at_most_the_bound() {
        let mut peer = stuck(DEFAULT_MAX_IN_FLIGHT).await;
        let flood = 5_000_u64;
        let Peer {
            mut lines,
            mut write,
        } = peer;
        let writer = tokio::spawn(async move {
            for id in 100..100 + flood {
                write.write_all(list_tools(id).as_bytes()).await.unwrap();
            }
            write
        });
        // Every request beyond the first DEFAULT_MAX_IN_FLIGHT is refused, in order; those
        // stay in flight, unanswered.
        for id in 100 + DEFAULT_MAX_IN_FLIGHT as u64..100 + flood {
            let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
                .await
                .expect("an answer within 10 s")
                .unwrap()
                .expect("a line");
            let answer: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(
                (answer["id"].clone(), answer["error"]["code"].clone()),
                (json!(id), json!(-32000))
            );
        }
        let write = writer.await.unwrap();
        peer = Peer { lines, write };
        peer.nothing_for_a_moment().await;
    }
}
