//! Starting the `store-server` binary as a child process, over stdio or streamable HTTP, and
//! reading its log (stderr), where the default audit sink writes one line per decision.

#![allow(dead_code, unreachable_pub, missing_docs)]

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::Arc,
    time::{SystemTime, UNIX_EPOCH},
};

use mcp_write_guard_rmcp::Era;
use mcp_write_guard_rmcp::test_util::ScriptedClient;
use parking_lot::Mutex;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncRead, BufReader},
    process::{Child, Command},
};
use workspace_tests::{Client, Failure, FileView, connect_over, spawn_serving};

pub const EXE: &str = env!("CARGO_BIN_EXE_store-server");

/// The binary's stderr, line by line, collected in the background.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    /// Collects every line of `stream` until it closes.
    pub fn collect(stream: impl AsyncRead + Unpin + Send + 'static) -> Self {
        let log = Self::default();
        let lines = log.0.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stream).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                lines.lock().push(line);
            }
        });
        log
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().clone()
    }

    /// The audit decisions logged so far, in order: the `outcome=` field of each line the
    /// default audit sink (`mcp_write_guard_rmcp::audit`) wrote, except the `asked` records.
    pub fn outcomes(&self) -> Vec<String> {
        records(self)
            .into_iter()
            .map(|record| record.outcome)
            .filter(|outcome| outcome != mcp_write_guard_rmcp::Outcome::Asked.as_str())
            .collect()
    }

    /// The logged outcomes once there are at least `n` (the log is read in the background), or
    /// whatever was logged after a few seconds.
    pub async fn outcomes_when(&self, n: usize) -> Vec<String> {
        for _ in 0..100 {
            if self.outcomes().len() >= n {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        self.outcomes()
    }

    /// How many of the logged outcomes are `outcome`.
    pub fn count(&self, outcome: mcp_write_guard_rmcp::Outcome) -> usize {
        self.outcomes()
            .iter()
            .filter(|logged| logged.as_str() == outcome.as_str())
            .count()
    }
}

/// The binary command in `dir` with `args`, `MCP_WRITES_ENABLED` set to `writes` (or unset).
pub fn command(dir: &Path, args: &[&str], writes: Option<&str>) -> Command {
    let mut command = Command::new(EXE);
    command
        .current_dir(dir)
        .args(args)
        .env_remove("MCP_WRITES_ENABLED")
        .env("RUST_LOG", "info");
    if let Some(value) = writes {
        command.env("MCP_WRITES_ENABLED", value);
    }
    command
}

/// Starts the binary over stdio (see [`command`]) and connects `user` to it in `era`; its
/// stderr is collected in the returned [`Log`].
pub async fn launch_stdio(
    dir: &Path,
    args: &[&str],
    writes: Option<&str>,
    user: &ScriptedClient,
    era: Era,
) -> Result<(Client, Log), Failure> {
    let (transport, stderr) = TokioChildProcess::builder(command(dir, args, writes))
        .stderr(Stdio::piped())
        .spawn()?;
    let log = stderr.map(Log::collect).unwrap_or_default();
    Ok((connect_over(transport, user, era).await?, log))
}

/// A fresh temporary directory and the path of `store.db` in it: the database file the binary
/// creates and seeds when it is started there with `--db` on that path.
pub struct StoreFile {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
}

impl StoreFile {
    /// A new temporary directory; the database file is not created yet.
    pub fn new() -> Result<Self, Failure> {
        let dir = tempfile::tempdir()?;
        let db = dir.path().join("store.db");
        Ok(Self { dir, db })
    }

    /// The database file, read through a connection of the test's own.
    pub fn view(&self) -> FileView {
        FileView::new(&self.db)
    }

    /// Starts `store-server --db DB` over stdio in the directory, writes on, and connects `user`
    /// to it in `era` (see [`launch_stdio`]).
    pub async fn launch_stdio(
        &self,
        user: &ScriptedClient,
        era: Era,
    ) -> Result<(Client, Log), Failure> {
        let args = ["--db", self.db.to_str().ok_or("a non-UTF-8 path")?];
        launch_stdio(self.dir.path(), &args, Some("true"), user, era).await
    }

    /// Starts `store-server --http 127.0.0.1:0 --db DB` in the directory, writes on (see
    /// [`HttpChild::start`]).
    pub async fn serve_http(&self) -> Result<HttpChild, Failure> {
        let args = ["--db", self.db.to_str().ok_or("a non-UTF-8 path")?];
        HttpChild::start(self.dir.path(), &args, Some("true")).await
    }
}

/// The binary serving streamable HTTP on a free loopback port. Killed when dropped.
pub struct HttpChild {
    pub child: Child,
    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// Its stderr after the line that named the URL.
    pub log: Log,
}

impl HttpChild {
    /// Starts `store-server --http 127.0.0.1:0 ARGS` (see [`command`]) and waits until it says
    /// where it listens.
    pub async fn start(dir: &Path, args: &[&str], writes: Option<&str>) -> Result<Self, Failure> {
        let mut command = command(dir, &[&["--http", "127.0.0.1:0"], args].concat(), writes);
        let (child, stderr, url) = spawn_serving(command.stdout(Stdio::piped())).await?;
        let log = Log::collect(stderr);
        Ok(Self { child, url, log })
    }

    /// Connects `user` to the endpoint in `era`.
    pub async fn connect(&self, user: &ScriptedClient, era: Era) -> Result<Client, Failure> {
        let transport = StreamableHttpClientTransport::from_uri(self.url.clone());
        connect_over(transport, user, era).await
    }
}

/// A venv with the official Python SDK under the target directory ([`workspace_tests::python_sdk`]).
pub fn python() -> Result<PathBuf, Failure> {
    workspace_tests::python_sdk(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

/// What `tests/python/store_client.py` printed.
#[derive(Debug)]
pub struct PyResult {
    pub is_error: bool,
    pub text: String,
    pub elicitations: u64,
    /// The whole result as the SDK read it, as JSON.
    pub wire: String,
}

pub async fn python_adjust(
    url: &str,
    era: &str,
    answer: &str,
    reason: &str,
    headers: &[&str],
) -> Result<PyResult, Failure> {
    let python = tokio::task::spawn_blocking(python).await??;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/store_client.py");
    let output = tokio::process::Command::new(python)
        .arg(script)
        .args(["--url", url, "--era", era, "--answer", answer])
        .args(["--sku", "TLS-002", "--delta", "-1", "--reason", reason])
        .args(headers.iter().flat_map(|header| ["--header", header]))
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("store_client.py failed: {stdout}{stderr}").into());
    }
    let value: Value = serde_json::from_str(stdout.trim())?;
    Ok(PyResult {
        is_error: value["isError"].as_bool().ok_or("no isError")?,
        text: value["text"].as_str().ok_or("no text")?.to_owned(),
        elicitations: value["elicitations"].as_u64().ok_or("no elicitations")?,
        wire: value["wire"].as_str().ok_or("no wire")?.to_owned(),
    })
}

// ---------------------------------------------------------------------------------------------
// The audit records in the log
// ---------------------------------------------------------------------------------------------

/// One audit record the binary's default sink logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub outcome: String,
    pub principal: Option<String>,
    pub tool: Option<String>,
    pub reason: Option<String>,
}

/// The `key=value` fields of a log line; quoted values are unescaped (`\"`, `\\`).
pub fn fields(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    let mut word = String::new();
    while let Some(c) = chars.next() {
        if c.is_whitespace() {
            word.clear();
            continue;
        }
        if c != '=' {
            word.push(c);
            continue;
        }
        let key = std::mem::take(&mut word);
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        if let Some(escaped) = chars.next() {
                            value.push(escaped);
                        }
                    }
                    '"' => break,
                    other => value.push(other),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        out.push((key, value));
    }
    out
}

/// The fields of `line` if it is an audit record, read the one way the README gives
/// ("Reading the audit records in the log"): the token after the time and the level is the
/// target `mcp_write_guard_rmcp::audit:`, and the record has an `outcome`; every value is quoted.
/// Any other line is not a record, whatever text it holds.
pub fn audit_fields(line: &str) -> Option<Vec<(String, String)>> {
    let mut tokens = line.split_whitespace();
    let (_time, _level) = (tokens.next()?, tokens.next()?);
    if tokens.next()? != "mcp_write_guard_rmcp::audit:" {
        return None;
    }
    let fields = fields(line);
    fields
        .iter()
        .any(|(key, _)| key == "outcome")
        .then_some(fields)
}

/// Every audit record logged so far, `asked` included, in order.
pub fn records(log: &Log) -> Vec<Record> {
    log.lines()
        .iter()
        .filter_map(|line| audit_fields(line))
        .map(|fields| {
            let get = |k: &str| {
                fields
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.clone())
            };
            Record {
                outcome: get("outcome").unwrap_or_default(),
                principal: get("principal"),
                tool: get("tool"),
                reason: get("reason"),
            }
        })
        .collect()
}

/// The audit records once there are at least `n`, or whatever was logged after a few seconds.
pub async fn records_when(log: &Log, n: usize) -> Vec<Record> {
    for _ in 0..100 {
        if records(log).len() >= n {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    records(log)
}

// ---------------------------------------------------------------------------------------------
// Bearer tokens
// ---------------------------------------------------------------------------------------------

/// The token issuer the auth tests configure.
pub const ISSUER: &str = "https://issuer.test";
/// The audience the auth tests configure.
pub const AUDIENCE: &str = "store-api";
/// The scope writes need in the auth tests.
pub const WRITE_SCOPE: &str = "store:write";

/// Now, in seconds since the Unix epoch.
pub fn now() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

/// Claims of [`ISSUER`] for [`AUDIENCE`] that pass every check, for `sub`, granting `scope`.
pub fn claims(sub: &str, scope: &str) -> Value {
    let now = now();
    json!({
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": sub,
        "iat": now,
        "nbf": now - 5,
        "exp": now + 600,
        "scope": scope,
    })
}

/// Creates a pending order of two TLS-001 (stock 12 -> 10) directly in the file at `db`; its id.
pub fn place_order(db: &Path) -> Result<i64, Failure> {
    let placed = store_server::Db::open(db)?.create_order(
        &store_server::CreateOrderArgs {
            customer_id: 1,
            lines: vec![store_server::OrderLineArgs {
                sku: "TLS-001".into(),
                quantity: 2,
            }],
        },
        store_server::Mode::Apply,
    )?;
    placed.order_id.ok_or_else(|| "no order id".into())
}

// A webhook receiver for the notifier tests (headless.rs, replicas.rs).

/// One POST the receiver got: the signature header (if any) and the exact body bytes.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub signature: Option<String>,
    pub body: Vec<u8>,
}

impl Delivery {
    /// The body, after its signature was checked with `secret` (panics otherwise).
    pub fn verified_with(&self, secret: &[u8]) -> Value {
        let signature = self.signature.as_deref().expect("a signature header");
        assert!(
            mcp_write_guard_webhook::verify_signature(secret, &self.body, signature),
            "the delivery is signed with the shared secret: {signature}"
        );
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// A webhook receiver on a free loopback port; answers every POST to `/hook` with 204.
pub struct Receiver {
    /// `http://127.0.0.1:PORT/hook`.
    pub url: String,
    deliveries: Arc<Mutex<Vec<Delivery>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    pub async fn start() -> Result<Self, Failure> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hook", listener.local_addr()?);
        let deliveries = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&deliveries);
        let router = axum::Router::new().route(
            "/hook",
            axum::routing::post(
                move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                    let kept = Arc::clone(&kept);
                    async move {
                        let signature = headers
                            .get(mcp_write_guard_webhook::SIGNATURE_HEADER)
                            .and_then(|value| value.to_str().ok())
                            .map(str::to_owned);
                        kept.lock().push(Delivery {
                            signature,
                            body: body.to_vec(),
                        });
                        axum::http::StatusCode::NO_CONTENT
                    }
                },
            ),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Self {
            url,
            deliveries,
            task,
        })
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        self.deliveries.lock().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}
