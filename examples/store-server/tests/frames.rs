//! Bad frames against the built `store-server` binary over stdio, raw lines on its stdin: each
//! gets its exact JSON-RPC error (or, where nobody waits for one, nothing), the process stays
//! up, the next good request is answered, and nothing is written to the database. Before the
//! handshake as well as after it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, Command, Stdio},
    sync::{
        Arc, Mutex,
        mpsc::{self, Receiver, RecvTimeoutError},
    },
    time::Duration,
};

use common::EXE;
use proptest::{
    prelude::*,
    test_runner::{Config, TestRunner},
};
use serde_json::{Value, json};
use workspace_tests::{FileView, Snapshot};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"frames","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// The server as a child process, its stdout read line by line on a thread.
struct Server {
    child: Child,
    /// `None` once the input was closed.
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    log: Arc<Mutex<Vec<String>>>,
    file: FileView,
    before: Snapshot,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Writes enabled: a write could only be refused for want of an approval.
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        let mut child = Command::new(EXE)
            .arg("--db")
            .arg(&db)
            .env("MCP_WRITES_ENABLED", "true")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        let mut server = Self {
            child,
            stdin: Some(stdin),
            lines,
            log,
            file: FileView::new(&db),
            before: Snapshot::new(),
            _dir: dir,
        };
        // The database exists once the server answers.
        server.send(br#"{"jsonrpc":"2.0","id":"first","method":"ping"}"#);
        assert_eq!(server.next()["id"], "first");
        server.before = server.file.snapshot().unwrap();
        server
    }

    /// Sends `line` and its line break.
    fn send(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line the server writes, as JSON (it writes nothing else).
    fn next(&self) -> Value {
        match self.lines.recv_timeout(Duration::from_secs(20)) {
            Ok(line) => serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {line}\n{}", self.log())),
            Err(e) => panic!("no answer ({e})\n{}", self.log()),
        }
    }

    /// Nothing more is written for a moment.
    fn quiet(&self) {
        match self.lines.recv_timeout(Duration::from_millis(300)) {
            Err(RecvTimeoutError::Timeout) => {}
            other => panic!("expected no answer, got {other:?}\n{}", self.log()),
        }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    fn initialize(&mut self) {
        self.send(INITIALIZE.as_bytes());
        let answer = self.next();
        assert_eq!(answer["id"], "init", "{answer}");
        assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
        self.send(INITIALIZED.as_bytes());
    }

    /// A read is answered normally: `get_product` TLS-002 at its seeded stock.
    fn reads(&mut self, id: &str) {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "get_product", "arguments": {"sku": "TLS-002"}}});
        self.send(call.to_string().as_bytes());
        let answer = self.next();
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        let text = answer["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("\"stock\":3"), "{text}");
    }

    /// Nothing in the database changed since the server started.
    fn unchanged(&self) {
        assert_eq!(
            self.file.snapshot().unwrap(),
            self.before,
            "the database changed"
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the server must answer to a frame: an error with this code and id, or nothing.
enum Expect {
    Error(i64, Value),
    Nothing,
}

/// The bad frames of the issue, each with what it must get.
fn bad_frames() -> Vec<(&'static str, Vec<u8>, Expect)> {
    let deep = format!("{}{}", "[".repeat(130), "]".repeat(130));
    let mut huge = br#"{"jsonrpc":"2.0","id":"huge","method":"ping","params":{"x":""#.to_vec();
    huge.extend(std::iter::repeat_n(b'a', 17 * 1024 * 1024));
    huge.extend_from_slice(br#""}}"#);
    vec![
        ("NaN", b"NaN".to_vec(), Expect::Error(-32700, Value::Null)),
        ("130 levels of nesting", deep.into_bytes(), Expect::Error(-32700, Value::Null)),
        ("a 17 MiB line", huge, Expect::Error(-32700, Value::Null)),
        (
            "arguments: [1]",
            br#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"adjust_stock","arguments":[1]}}"#.to_vec(),
            Expect::Error(-32602, json!(11)),
        ),
        (
            "requestState: 123",
            br#"{"jsonrpc":"2.0","id":"rs","method":"tools/call","params":{"name":"adjust_stock","arguments":{"sku":"TLS-002","delta":1,"reason":"x"},"requestState":123}}"#.to_vec(),
            Expect::Error(-32602, json!("rs")),
        ),
        (
            "capabilities.elicitation: true",
            br#"{"jsonrpc":"2.0","id":12,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":true},"clientInfo":{"name":"x","version":"0"}}}"#.to_vec(),
            Expect::Error(-32602, json!(12)),
        ),
        ("a number", b"42".to_vec(), Expect::Error(-32600, Value::Null)),
        ("a bare string", br#""tools/list""#.to_vec(), Expect::Error(-32600, Value::Null)),
        ("an empty line", Vec::new(), Expect::Nothing),
        (
            "invalid UTF-8",
            b"{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"ping\",\"params\":{\"x\":\"\xff\xfe\"}}".to_vec(),
            Expect::Error(-32700, Value::Null),
        ),
        (
            "a batch",
            br#"[{"jsonrpc":"2.0","id":14,"method":"ping"},{"jsonrpc":"2.0","id":15,"method":"tools/list"}]"#.to_vec(),
            Expect::Error(-32600, Value::Null),
        ),
        (
            "a request without jsonrpc",
            br#"{"id":16,"method":"ping"}"#.to_vec(),
            Expect::Error(-32600, json!(16)),
        ),
        (
            "a response nobody asked for",
            br#"{"jsonrpc":"2.0","id":17,"result":{}}"#.to_vec(),
            Expect::Nothing,
        ),
        (
            "an error with a null id",
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#.to_vec(),
            Expect::Nothing,
        ),
        (
            "a notification with params that do not fit",
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":[1]}"#.to_vec(),
            Expect::Nothing,
        ),
    ]
}

fn answered_as_expected(server: &Server, name: &str, expect: &Expect) {
    match expect {
        Expect::Error(code, id) => {
            let answer = server.next();
            assert_eq!(answer["jsonrpc"], "2.0", "{name}: {answer}");
            assert_eq!(&answer["error"]["code"], code, "{name}: {answer}");
            assert!(
                answer.as_object().unwrap().contains_key("id"),
                "{name}: {answer}"
            );
            assert_eq!(&answer["id"], id, "{name}: {answer}");
        }
        Expect::Nothing => server.quiet(),
    }
}

#[test]
fn each_bad_frame_after_the_handshake_gets_its_error_and_the_session_goes_on() {
    let mut server = Server::start();
    server.initialize();
    for (n, (name, frame, expect)) in bad_frames().iter().enumerate() {
        server.send(frame);
        answered_as_expected(&server, name, expect);
        assert!(
            server.alive(),
            "{name}: the server exited\n{}",
            server.log()
        );
        server.reads(&format!("after-{n}"));
    }
    server.unchanged();
}

#[test]
fn each_bad_frame_before_the_handshake_leaves_the_server_waiting_for_a_good_one() {
    let mut server = Server::start();
    for (name, frame, expect) in bad_frames() {
        server.send(&frame);
        answered_as_expected(&server, name, &expect);
        assert!(
            server.alive(),
            "{name}: the server exited\n{}",
            server.log()
        );
    }
    // A notification and a response before `initialize` ended rmcp's handshake; no longer.
    server.send(INITIALIZED.as_bytes());
    server.quiet();
    assert!(server.alive(), "{}", server.log());
    server.initialize();
    server.send(br#"{"jsonrpc":"2.0","id":"list","method":"tools/list"}"#);
    let tools = server.next();
    assert_eq!(tools["id"], "list");
    assert!(
        tools["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{tools}"
    );
    server.reads("read");
    server.unchanged();
}

#[test]
fn the_end_of_input_is_a_clean_exit_even_after_bad_frames() {
    let mut server = Server::start();
    server.send(b"NaN");
    assert_eq!(server.next()["error"]["code"], -32700);
    server.stdin = None;
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}\n{}", server.log());
}

/// Lines a client could send: bytes, JSON of any shape, and near-misses of real requests
/// (every method, ids of every type, tool calls with any arguments, including writes).
fn any_line() -> impl Strategy<Value = Vec<u8>> {
    let json = any_json();
    let id = prop_oneof![
        Just(None),
        any::<i64>().prop_map(|n| Some(json!(n))),
        "[a-z0-9-]{0,8}".prop_map(|s| Some(json!(s))),
        Just(Some(Value::Null)),
        Just(Some(json!(1.5))),
        Just(Some(json!({}))),
    ];
    let method = prop_oneof![
        Just("initialize"),
        Just("ping"),
        Just("tools/list"),
        Just("tools/call"),
        Just("prompts/get"),
        Just("resources/read"),
        Just("logging/setLevel"),
        Just("server/discover"),
        Just("notifications/initialized"),
        Just("notifications/cancelled"),
        Just("notifications/progress"),
        Just("vendor/thing"),
    ];
    let tool = prop_oneof![
        Just("adjust_stock"),
        Just("create_order"),
        Just("cancel_order"),
        Just("prepare_admin_action"),
        Just("get_product"),
        Just("nope"),
    ];
    let call_params = (tool, any_json(), any_json()).prop_map(|(name, arguments, extra)| {
        json!({"name": name, "arguments": arguments, "requestState": extra})
    });
    let write_params = (-5i64..5, "[ -~]{0,20}").prop_map(|(delta, reason)| {
        json!({"name": "adjust_stock", "arguments": {"sku": "TLS-002", "delta": delta, "reason": reason}})
    });
    let params = prop_oneof![
        Just(None),
        json.clone().prop_map(Some),
        call_params.prop_map(Some),
        write_params.prop_map(Some),
    ];
    let message = (id, method, params, any::<bool>()).prop_map(|(id, method, params, jsonrpc)| {
        let mut message = serde_json::Map::new();
        if jsonrpc {
            message.insert("jsonrpc".into(), json!("2.0"));
        }
        if let Some(id) = id {
            message.insert("id".into(), id);
        }
        message.insert("method".into(), json!(method));
        if let Some(params) = params {
            message.insert("params".into(), params);
        }
        Value::Object(message).to_string().into_bytes()
    });
    prop_oneof![
        prop::collection::vec(any::<u8>().prop_filter("one line", |b| *b != b'\n'), 0..200),
        json.prop_map(|v| v.to_string().into_bytes()),
        message.clone(),
        // A real message cut short.
        (message, any::<prop::sample::Index>()).prop_map(|(line, at)| {
            let at = at.index(line.len().max(1));
            line[..at.min(line.len())].to_vec()
        }),
    ]
}

fn any_json() -> impl Strategy<Value = Value> + Clone {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(|x| json!(x)),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z_]{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[test]
fn any_line_is_answered_or_ignored_and_never_ends_the_server_or_writes() {
    let server = Mutex::new(Server::start());
    server.lock().unwrap().initialize();
    let probe = std::sync::atomic::AtomicU64::new(0);
    let mut runner = TestRunner::new(Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&any_line(), |line| {
            let mut server = server.lock().unwrap();
            server.send(&line);
            // A ping after it: every line before the ping's answer is valid JSON (checked in
            // `next`), and the ping is answered.
            let id = format!(
                "probe-{}",
                probe.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            );
            server.send(
                json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
                    .to_string()
                    .as_bytes(),
            );
            loop {
                let answer = server.next();
                if answer["id"] == id.as_str() {
                    prop_assert_eq!(&answer["result"], &json!({}));
                    break;
                }
            }
            prop_assert!(server.alive(), "the server exited\n{}", server.log());
            server.unchanged();
            Ok(())
        })
        .unwrap();
    let mut server = server.lock().unwrap();
    server.reads("after-all");
    server.unchanged();
}
