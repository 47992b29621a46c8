//! What the guard shows and passes through: server info, prompts, resources and completions
//! unchanged; `tools/list` rewritten; results wrapped unless the read is trusted; a server built
//! with `#[tool_router]`; malformed requests refused without panicking.

use std::sync::{Arc, atomic::Ordering};

use mcp_write_guard_core::ManualClock;
use mcp_write_guard_rmcp::{MemorySink, Outcome, PREPARE_ADMIN_ACTION, WriteGuard};
use rmcp::{
    ServerHandler, ServiceExt,
    model::{GetPromptRequestParams, ReadResourceRequestParams, ResourceContents, Tool},
};
use rstest_reuse::apply;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::common::{
    Client, ERAS, Era, Fixture, Harness, Options, Reply, ScriptedClient, both_eras, connect,
    fixture::INJECTION, notes::Notes, start_time, text_of, unwrapped,
};
use crate::wrapped::Wrapped;

/// The guarded fixture and, to compare with, a client of a bare fixture in the same era.
async fn guarded_and_bare(era: Era) -> (Harness, Client) {
    let h = Harness::start(era).await;
    let bare = connect(Fixture::default(), era, ScriptedClient::new())
        .await
        .unwrap();
    (h, bare)
}

#[apply(both_eras)]
async fn server_info_prompts_resources_and_completions_pass_through(era: Era) {
    let (h, bare) = guarded_and_bare(era).await;

    let guarded_info = h.client.peer_info().unwrap();
    let bare_info = bare.peer_info().unwrap();
    let server = guarded_info.server_info.clone().unwrap();
    assert_eq!(server.name, "fixture");
    assert_eq!(server.version, "1.2.3");
    assert_eq!(
        guarded_info.instructions.as_deref(),
        Some("fixture instructions")
    );
    assert_eq!(guarded_info.server_info, bare_info.server_info);
    assert_eq!(guarded_info.capabilities, bare_info.capabilities);
    assert!(guarded_info.capabilities.prompts.is_some());
    assert!(guarded_info.capabilities.completions.is_some());
    assert_eq!(guarded_info.protocol_version, bare_info.protocol_version);
    match era {
        Era::Legacy => assert!(guarded_info.protocol_version.as_str() < "2026-07-28"),
        Era::InputRounds => assert_eq!(guarded_info.protocol_version.as_str(), "2026-07-28"),
        other => unreachable!("no test written for {other:?}"),
    }

    let prompts = h.client.list_prompts(None).await.unwrap();
    assert_eq!(prompts.prompts.len(), 1);
    assert_eq!(prompts.prompts[0].name, "greeting");
    assert_eq!(
        prompts.prompts,
        bare.list_prompts(None).await.unwrap().prompts
    );

    let prompt = h
        .client
        .get_prompt(GetPromptRequestParams::new("greeting"))
        .await
        .unwrap();
    assert_eq!(prompt.description.as_deref(), Some("a greeting"));
    assert_eq!(
        serde_json::to_value(&prompt.messages).unwrap(),
        serde_json::to_value(
            &bare
                .get_prompt(GetPromptRequestParams::new("greeting"))
                .await
                .unwrap()
                .messages
        )
        .unwrap()
    );

    let resources = h.client.list_resources(None).await.unwrap();
    assert_eq!(resources.resources.len(), 1);
    assert_eq!(resources.resources[0].uri, "fixture://readme");

    let templates = h.client.list_resource_templates(None).await.unwrap();
    assert_eq!(templates.resource_templates.len(), 1);
    assert_eq!(
        templates.resource_templates[0].uri_template,
        "fixture://rows/{name}"
    );

    let read = h
        .client
        .read_resource(ReadResourceRequestParams::new("fixture://readme"))
        .await
        .unwrap();
    match &read.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => {
            assert_eq!(text, "the fixture's readme");
        }
        other => panic!("unexpected contents {other:?}"),
    }
    // Errors pass through too.
    assert!(
        h.client
            .read_resource(ReadResourceRequestParams::new("fixture://nothing"))
            .await
            .is_err()
    );

    let completions = h
        .client
        .complete_prompt_simple("greeting", "name", "a")
        .await
        .unwrap();
    assert_eq!(completions, vec!["alpha".to_owned(), "beta".to_owned()]);
}

fn tool<'a>(tools: &'a [Tool], name: &str) -> &'a Tool {
    tools.iter().find(|t| t.name == name).unwrap()
}

#[apply(both_eras)]
async fn tools_list_is_rewritten(era: Era) {
    let (h, bare) = guarded_and_bare(era).await;
    let guarded = h.client.list_all_tools().await.unwrap();
    let original = bare.list_all_tools().await.unwrap();
    assert_eq!(guarded.len(), original.len() + 1);

    // The token-gated tool claims to be read-only; the guard advertises it as destructive.
    let lying = tool(&original, "delete_row").annotations.clone().unwrap();
    assert_eq!(lying.read_only_hint, Some(true));
    let delete = tool(&guarded, "delete_row").annotations.clone().unwrap();
    assert_eq!(delete.read_only_hint, Some(false));
    assert_eq!(delete.destructive_hint, Some(true));

    // prepare_admin_action: a write that only adds, in a closed world.
    let prepare = tool(&guarded, PREPARE_ADMIN_ACTION);
    let a = prepare.annotations.clone().unwrap();
    assert_eq!(
        (
            a.read_only_hint,
            a.destructive_hint,
            a.idempotent_hint,
            a.open_world_hint
        ),
        (Some(false), Some(false), Some(false), Some(false))
    );
    let input = Value::Object((*prepare.input_schema).clone());
    assert_eq!(input["required"], json!(["tool", "arguments"]));

    // A wrapped read advertises the schema of the wrapped result.
    let schema = tool(&guarded, "get_counter").output_schema.clone().unwrap();
    let original_schema = tool(&original, "get_counter")
        .output_schema
        .clone()
        .unwrap();
    assert_eq!(
        *schema,
        mcp_write_guard_envelope::wrap_output_schema(&original_schema)
    );

    // Tools that need no rewrite are advertised as they are.
    for name in ["add_row", "set_counter", "list_rows"] {
        assert_eq!(tool(&guarded, name), tool(&original, name), "{name}");
    }

    // get_tool agrees with tools/list.
    assert_eq!(
        h.guard.get_tool("delete_row").as_ref(),
        Some(tool(&guarded, "delete_row"))
    );
    assert_eq!(
        h.guard.get_tool("get_counter").as_ref(),
        Some(tool(&guarded, "get_counter"))
    );
    assert!(h.guard.get_tool(PREPARE_ADMIN_ACTION).is_some());
}

#[apply(both_eras)]
async fn reads_are_wrapped_and_trusted_reads_are_not(era: Era) {
    let h = Harness::start(era).await;
    h.fixture.state.lock().counter = 4;
    let read = h.call("get_counter", json!({})).await;
    assert_eq!(unwrapped(&read), json!({"counter": 4}));
    let source = mcp_write_guard_envelope::source(read.structured_content.as_ref().unwrap());
    assert_eq!(source, Some("fixture/get_counter"));

    let rows = h.call("list_rows", json!({})).await;
    let text = text_of(&rows);
    assert!(
        text.starts_with(mcp_write_guard_envelope::NOTICE_PREFIX),
        "{text}"
    );
    let parsed = mcp_write_guard_envelope::parse_text(&text).unwrap();
    assert!(
        mcp_write_guard_envelope::unwrap(&parsed)
            .unwrap()
            .as_str()
            .unwrap()
            .contains(INJECTION)
    );
    assert!(h.audit.records().is_empty(), "reads are not decisions");

    let trusting = Harness::custom(era, Options::default(), |b| b.trust_read("list_rows")).await;
    let rows = trusting.call("list_rows", json!({})).await;
    assert!(text_of(&rows).starts_with("rows: "), "{}", text_of(&rows));
    // Trust covers exactly the named read.
    let counter = trusting.call("get_counter", json!({})).await;
    assert_eq!(unwrapped(&counter), json!({"counter": 0}));
}

#[apply(both_eras)]
async fn the_text_prefix_can_be_turned_off(era: Era) {
    let h = Harness::custom(era, Options::default(), |b| b.text_prefix(false)).await;
    let rows = h.call("list_rows", json!({})).await;
    let text = text_of(&rows);
    assert!(
        !text.starts_with(mcp_write_guard_envelope::NOTICE_PREFIX),
        "{text}"
    );
    let parsed: Value = serde_json::from_str(&text).unwrap();
    assert!(mcp_write_guard_envelope::unwrap(&parsed).is_some());
}

#[apply(both_eras)]
async fn a_tool_router_server_is_guarded(era: Era) {
    let notes = Notes::default();
    let audit = MemorySink::new();
    let guard = WriteGuard::builder(notes.clone())
        .writes_enabled(true)
        .preview("add_note")
        .trust_read("list_notes")
        .audit(Arc::new(audit.clone()))
        .clock(Arc::new(ManualClock::new(start_time())))
        .prompt("add_note", |input| {
            format!(
                "Add the note {} to your notes?",
                input
                    .argument("text")
                    .map_or_else(|| "?".to_owned(), |t| t.to_string())
            )
        })
        .build();
    let scripted = ScriptedClient::new();
    let client = connect(guard, era, scripted.clone()).await.unwrap();
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "notes");

    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(
        tools.len(),
        2,
        "no token-gated tool, no prepare_admin_action"
    );

    scripted.script([Reply::Decline, Reply::Approve]);
    let call = |text: &str| {
        rmcp::model::CallToolRequestParams::new("add_note")
            .with_arguments(json!({"text": text}).as_object().cloned().unwrap())
    };
    let declined = client.call_tool(call("milk")).await.unwrap();
    assert_eq!(declined.is_error, Some(true));
    assert!(notes.notes.lock().is_empty(), "the preview wrote nothing");
    let added = client.call_tool(call("eggs")).await.unwrap();
    assert_ne!(added.is_error, Some(true), "{added:?}");
    assert_eq!(*notes.notes.lock(), vec!["eggs".to_owned()]);
    assert_eq!(
        scripted.asked(),
        vec![
            "Add the note \"milk\" to your notes?".to_owned(),
            "Add the note \"eggs\" to your notes?".to_owned()
        ]
    );
    assert_eq!(
        audit.outcomes(),
        vec![
            Outcome::Asked,
            Outcome::Declined,
            Outcome::Asked,
            Outcome::Approved,
            Outcome::Applied
        ]
    );

    let list = client
        .call_tool(rmcp::model::CallToolRequestParams::new("list_notes"))
        .await
        .unwrap();
    assert_eq!(text_of(&list), "eggs", "a trusted read is not wrapped");
}

#[apply(both_eras)]
async fn unknown_tools_are_protocol_errors(era: Era) {
    let h = Harness::start(era).await;
    let before = h.state();
    h.script([Reply::Approve]);
    assert!(h.try_call("no_such_tool", json!({})).await.is_err());
    assert_eq!(h.state(), before);
    assert!(h.asked().is_empty());
}

/// A raw JSON-RPC client on the legacy handshake, for requests rmcp's typed client cannot send:
/// each of `requests` (`{"method", "params"}`) gets the next id, and its reply is returned. A
/// request's `notification` member, if any, is sent as it is just before it.
async fn raw_exchange<S: ServerHandler>(server: S, requests: &[Value]) -> Vec<Value> {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let (read, mut write) = tokio::io::split(client_io);
    let mut lines = BufReader::new(read).lines();
    let mut send = async |value: Value| {
        let mut line = value.to_string();
        line.push('\n');
        write.write_all(line.as_bytes()).await.unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "raw", "version": "0"}
        }}),
    )
    .await;
    let _init = lines.next_line().await.unwrap().unwrap();
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    let mut replies = Vec::new();
    for (i, request) in requests.iter().enumerate() {
        let mut request = request.clone();
        if let Some(notification) = request.as_object_mut().unwrap().remove("notification") {
            send(notification).await;
        }
        let mut message = json!({"jsonrpc": "2.0", "id": i + 1});
        message
            .as_object_mut()
            .unwrap()
            .extend(request.as_object().unwrap().clone());
        send(message).await;
        let line = lines.next_line().await.unwrap().unwrap();
        replies.push(serde_json::from_str(&line).unwrap());
    }
    replies
}

#[tokio::test]
async fn non_object_arguments_are_refused_without_a_panic() {
    let fixture = Fixture::default();
    let audit = MemorySink::new();
    let clock = ManualClock::new(start_time());
    let guard = crate::common::guard(fixture.clone(), &audit, &clock, &Options::default());
    let calls = [
        json!({"name": "add_row", "arguments": 5}),
        json!({"name": "add_row", "arguments": "name=a"}),
        json!({"name": "add_row", "arguments": [1, 2]}),
        json!({"name": "add_row", "arguments": true}),
    ];
    let mut deep = json!(1);
    for _ in 0..(mcp_write_guard_core::canonical::DEFAULT_MAX_DEPTH + 5) {
        deep = json!([deep]);
    }
    // A control over the same connection: object arguments do reach the guard, which refuses
    // these (too deep) and records it.
    let control = json!({"name": "add_row", "arguments": {"name": "a", "value": deep}});
    let mut all: Vec<Value> = calls.iter().map(tools_call).collect();
    all.push(tools_call(&control));
    let replies = raw_exchange(guard, &all).await;
    for (call, reply) in calls.iter().zip(&replies) {
        // rmcp reads these as custom requests named `tools/call`; the guard answers them as
        // invalid params and they reach neither the write path nor the inner server.
        assert_eq!(reply["error"]["code"], json!(-32602), "{call} -> {reply}");
        assert!(reply.get("result").is_none(), "{call} -> {reply}");
    }
    let control_reply = &replies[calls.len()];
    assert_eq!(
        control_reply["result"]["isError"],
        json!(true),
        "{control_reply}"
    );
    assert_eq!(fixture.snapshot(), crate::common::State::default());
    // Nothing but the control reached the guard's write path.
    assert_eq!(audit.outcomes(), vec![Outcome::BadArguments]);
}

fn tools_call(params: &Value) -> Value {
    json!({"method": "tools/call", "params": params})
}

/// The fixture behind a wrapper that runs any custom request or notification named
/// `tools/call` as a tool call (a server that would be written through if a misfit
/// `tools/call` reached it), the audit sink its guard writes to, and the guard (writes on).
fn dispatching() -> (Wrapped, MemorySink, WriteGuard<Wrapped>) {
    let inner = Wrapped::default();
    inner.knobs.dispatch_custom.store(true, Ordering::SeqCst);
    let audit = MemorySink::new();
    let guard = WriteGuard::builder(inner.clone())
        .writes_enabled(true)
        .audit(Arc::new(audit.clone()))
        .build();
    (inner, audit, guard)
}

#[tokio::test]
async fn known_methods_whose_params_do_not_fit_never_reach_the_inner_server() {
    let (inner, audit, guard) = dispatching();
    let add = json!({"name": "add", "value": 1});
    let requests = [
        tools_call(&json!({"name": "add_row", "arguments": [1]})),
        tools_call(&json!({"name": "add_row", "arguments": add, "requestState": 123})),
        tools_call(&json!({"name": "add_row", "arguments": add, "inputResponses": [true]})),
        json!({"method": "resources/read", "params": {"uri": ["fixture://readme"]}}),
        json!({"method": "prompts/get", "params": {"name": 1}}),
        // A notification's method with an id: not a request at all.
        json!({"method": "notifications/cancelled", "params": {"name": "add_row", "requestId": 1}}),
        // A custom request proper passes through, as before.
        json!({"method": "acme/echo", "params": {"name": "add_row", "arguments": add}}),
    ];
    let replies = raw_exchange(guard, &requests).await;
    let misfits = requests.len() - 1;
    for (request, reply) in requests.iter().zip(&replies).take(misfits) {
        let message = reply["error"]["message"].as_str().unwrap();
        let method = request["method"].as_str().unwrap();
        let (code, start) = if method.starts_with("notifications/") {
            (
                -32600,
                format!("Invalid Request: {method} is a notification"),
            )
        } else {
            (-32602, format!("Invalid params for {method}"))
        };
        assert_eq!(reply["error"]["code"], json!(code), "{request} -> {reply}");
        assert!(message.starts_with(&start), "{message}");
    }
    assert_eq!(replies[misfits]["result"], json!({"echo": "acme/echo"}));
    // Only the custom request proper reached the inner server (which ran it as a call: the
    // one write in the fixture). Nothing else was written, previewed or recorded.
    assert_eq!(*inner.knobs.custom.lock(), vec!["acme/echo".to_owned()]);
    let state = inner.fixture.snapshot();
    assert_eq!(state.rows.get("add"), Some(&1), "{state:?}");
    assert_eq!((state.applies, state.previews), (1, 0), "{state:?}");
    assert!(audit.outcomes().is_empty(), "{:?}", audit.outcomes());
}

/// A `tools/call` sent without an id, which rmcp reads as a custom notification of that name,
/// and a misfit known notification: dropped by the guard, never passed to the inner server;
/// a custom notification proper still is.
#[tokio::test]
async fn notifications_named_after_rmcp_methods_never_reach_the_inner_server() {
    let (inner, audit, guard) = dispatching();
    let add = json!({"name": "x", "value": 1});
    let notifications = [
        json!({"jsonrpc": "2.0", "method": "tools/call",
               "params": {"name": "add_row", "arguments": add}}),
        json!({"jsonrpc": "2.0", "method": "initialize", "params": {"name": "add_row"}}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"name": "add_row", "requestId": [1]}}),
        json!({"jsonrpc": "2.0", "method": "acme/ping", "params": {"name": "add_row"}}),
    ];
    // Each notification, then a request whose answer shows the notification was handled.
    let requests: Vec<Value> = notifications
        .iter()
        .map(|n| json!({"notification": n, "method": "tools/list"}))
        .collect();
    let replies = raw_exchange(guard, &requests).await;
    assert!(replies.iter().all(|r| r["result"]["tools"].is_array()));
    assert_eq!(
        *inner.knobs.custom.lock(),
        vec!["acme/ping".to_owned(), "would run add_row".to_owned()]
    );
    assert_eq!(inner.fixture.snapshot(), crate::common::State::default());
    assert!(audit.outcomes().is_empty(), "{:?}", audit.outcomes());
}

#[tokio::test]
async fn every_era_reaches_the_same_fixture_state() {
    // The same approved change in both eras leaves the fixture in the same state.
    let mut states = Vec::new();
    for era in ERAS {
        let h = Harness::start(era).await;
        h.script([Reply::Approve, Reply::Approve]);
        h.call("set_counter", json!({"value": 9})).await;
        h.call("add_row", json!({"name": "x", "value": 1})).await;
        states.push(h.state());
    }
    assert_eq!(states[0], states[1]);
}
