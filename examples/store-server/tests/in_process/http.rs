//! The store over streamable HTTP, served by the same router the binary serves with
//! `--http`, driven by rmcp's HTTP client playing the user.

use std::sync::Arc;

use mcp_write_guard_core::Principal;
use mcp_write_guard_rmcp::test_util::{ERAS, Reply, ScriptedClient};
use mcp_write_guard_rmcp::{Outcome, PrincipalRequest, WriteGuard};
use rmcp::{ServiceExt, transport::StreamableHttpClientTransport};
use serde_json::json;
use store_server::StoreServer;
use workspace_tests::{
    Client, DAMAGED_TLS_002_QUESTION, Failure, FileView, call, cancel_args, cancel_order_token,
    connect_over, enveloped_data, is_error, message,
};

use crate::store::Store;

/// Stops a server [`serve`] started when dropped.
type Stop = tokio::sync::oneshot::Sender<()>;

/// Serves `store`'s guard (writes on) on an ephemeral loopback port; returns the endpoint and
/// a handle that stops the server when dropped.
async fn serve(store: &Store) -> Result<(String, Stop), Failure> {
    serve_guard(store.guard(true)).await
}

/// A fresh store [`serve`]d: the store, an outside view of its file, the endpoint and the
/// handle that stops the server.
async fn fresh_served() -> Result<(Store, FileView, String, Stop), Failure> {
    let store = Store::new()?;
    let file = store.file();
    let (url, stop) = serve(&store).await?;
    Ok((store, file, url, stop))
}

/// Serves `guard` as [`serve`] does.
async fn serve_guard(guard: WriteGuard<StoreServer>) -> Result<(String, Stop), Failure> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!(
        "http://{}{}",
        listener.local_addr()?,
        store_server::HTTP_PATH
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        let _ = store_server::serve_http(listener, guard, shutdown).await;
    });
    Ok((url, stop))
}

async fn connect_http(url: &str, user: &ScriptedClient) -> Result<Client, Failure> {
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    Ok(user.clone().serve(transport).await?)
}

#[tokio::test]
async fn over_http_a_declined_change_writes_nothing_and_an_approved_one_lands_once()
-> Result<(), Failure> {
    let (store, file, url, _stop) = fresh_served().await?;
    let user = ScriptedClient::answering([Reply::Decline, Reply::Approve]);
    let client = connect_http(&url, &user).await?;
    let arguments = json!({"sku": "TLS-002", "delta": -2, "reason": "damaged in transit"});

    let declined = call(&client, "adjust_stock", arguments.clone()).await?;
    assert!(is_error(&declined), "{declined:?}");
    file.assert_tls_002_unadjusted()?;

    let approved = call(&client, "adjust_stock", arguments).await?;
    assert!(!is_error(&approved), "{}", message(&approved));
    assert_eq!(enveloped_data(&approved)?["newStock"], 1);
    file.assert_tls_002_adjusted_once()?;

    assert_eq!(
        user.asked(),
        [DAMAGED_TLS_002_QUESTION, DAMAGED_TLS_002_QUESTION]
    );
    assert_eq!(
        store.audit.decisions(),
        [Outcome::Declined, Outcome::Approved, Outcome::Applied]
    );
    client.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn over_http_each_session_is_its_own_principal() -> Result<(), Failure> {
    let (store, file, url, _stop) = fresh_served().await?;
    let order = store.order("TLS-001", 3)?;
    let alice = ScriptedClient::answering([Reply::Approve]);
    let mallory = ScriptedClient::answering([Reply::Approve]);
    let alice_client = connect_http(&url, &alice).await?;
    let mallory_client = connect_http(&url, &mallory).await?;

    let token = cancel_order_token(&alice_client, order, "duplicate order").await?;
    let before = file.snapshot()?;

    let stolen = call(
        &mallory_client,
        "cancel_order",
        cancel_args(order, "duplicate order", &token),
    )
    .await?;

    assert!(is_error(&stolen));
    assert!(mallory.asked().is_empty());
    assert_eq!(file.snapshot()?, before);
    assert_eq!(file.order_status(order)?.as_deref(), Some("pending"));
    assert_eq!(
        store.audit.last().unwrap().reason.as_deref(),
        Some("other-principal")
    );
    Ok(())
}

#[tokio::test]
async fn over_http_ten_approvals_shown_on_one_stock_apply_exactly_once() -> Result<(), Failure> {
    const N: usize = 10;
    for era in ERAS {
        let store = Store::new()?;
        let file = store.file();
        // 2026-07-28 requests carry no HTTP session, so this deployment names the person the
        // way an authenticating layer would: every request here is the same signed-in person.
        let signed_in = |_: &PrincipalRequest<'_>| Some(Principal::new("subject:store-keeper"));
        let guard = store
            .guard_builder(true)
            .principal(Arc::new(signed_in))
            .build();
        let (url, _stop) = serve_guard(guard).await?;
        let user = ScriptedClient::answering([]);
        let transport = StreamableHttpClientTransport::from_uri(url);
        let client = connect_over(transport, &user, era).await?;
        workspace_tests::race_one_stock(&client, &user, era, &file, N).await?;

        let outcomes = store.audit.decisions();
        let count = |outcome| outcomes.iter().filter(|o| **o == outcome).count();
        assert_eq!(count(Outcome::Approved), N, "{era:?}: {outcomes:?}");
        assert_eq!(count(Outcome::Applied), 1, "{era:?}: {outcomes:?}");
        assert_eq!(count(Outcome::Stale), N - 1, "{era:?}: {outcomes:?}");
        client.cancel().await?;
    }
    Ok(())
}

/// Everything the process logs, for the one test that reads the log.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn lines_with(&self, needle: &str) -> usize {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter(|line| line.contains(needle))
            .count()
    }
}

/// The default principal, [`mcp_write_guard_rmcp::PerConnection`], over streamable HTTP: a 2026-07-28
/// request is stateless, and rmcp does not check its `Mcp-Session-Id`. An invented one names
/// nobody: the write is refused before anyone is asked, no round trip is opened, nothing saved,
/// and the server logs why, once. In the older era rmcp itself answers an invented session
/// with 404.
#[tokio::test]
async fn over_http_an_invented_session_header_names_nobody() -> Result<(), Failure> {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish(),
    )?;
    let (store, file, before) = Store::with_snapshot()?;
    let guard = store
        .guard_builder(true)
        .server_name("invented-session-test")
        .build();
    let (url, _stop) = serve_guard(guard).await?;
    let raw = workspace_tests::RawHttp::new(&url);
    let arguments = json!({"sku": "TLS-002", "delta": 1, "reason": "invented"});

    for session in ["made-up-by-client", "another-one"] {
        let reply = raw
            .call_2026(
                &[("mcp-session-id", session)],
                "adjust_stock",
                &arguments,
                None,
            )
            .await?;
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.request_state(), None, "{reply:?}");
        let (is_error, text) = reply.tool_result().ok_or("no tool result")?;
        assert!(is_error, "{text}");
        assert!(text.contains("cannot tell who is asking"), "{text}");
    }

    let legacy = raw
        .call_legacy("made-up-by-client", "adjust_stock", &arguments)
        .await?;
    assert_eq!(legacy.status, 404, "{legacy:?}");

    assert_eq!(file.snapshot()?, before);
    assert_eq!(
        store.audit.decisions(),
        [Outcome::RefusedNoPrincipal, Outcome::RefusedNoPrincipal]
    );
    assert!(store.audit.records().iter().all(|r| r.asked.is_none()));
    let warned = |c: &Captured| {
        c.lines_with("server=invented-session-test")
            .min(c.lines_with("no session this server issued"))
    };
    assert_eq!(warned(&captured), 1, "the warning is logged once per guard");
    Ok(())
}

/// A session id copied from another client's live session does not make a 2026-07-28 request
/// that client: the stateless request is refused for want of a principal, so it can neither
/// open a round trip in the other client's name nor finish one of theirs.
#[tokio::test]
async fn over_http_a_copied_session_header_cannot_act_for_its_session() -> Result<(), Failure> {
    let (store, file, url, _stop) = fresh_served().await?;
    let raw = workspace_tests::RawHttp::new(&url);
    // The victim: a legacy session the server issued.
    let init = raw.initialize(&[]).await?;
    assert_eq!(init.status, 200, "{init:?}");
    let session = init
        .headers
        .get("mcp-session-id")
        .ok_or("no session id")?
        .to_str()?
        .to_owned();
    let before = file.snapshot()?;

    let arguments = json!({"sku": "TLS-002", "delta": -2, "reason": "copied"});
    let opened = raw
        .call_2026(
            &[("mcp-session-id", &session)],
            "adjust_stock",
            &arguments,
            None,
        )
        .await?;
    assert_eq!(opened.request_state(), None, "{opened:?}");
    let (is_error, text) = opened.tool_result().ok_or("no tool result")?;
    assert!(
        is_error && text.contains("cannot tell who is asking"),
        "{text}"
    );
    // A retry with a forged state and an approval is refused at the same gate.
    let forged = raw
        .call_2026(
            &[("mcp-session-id", &session)],
            "adjust_stock",
            &arguments,
            Some((
                "00000000-0000-4000-8000-000000000000",
                workspace_tests::approve(),
            )),
        )
        .await?;
    let (is_error, text) = forged.tool_result().ok_or("no tool result")?;
    assert!(
        is_error && text.contains("cannot tell who is asking"),
        "{text}"
    );

    assert_eq!(file.snapshot()?, before);
    assert_eq!(
        store.audit.decisions(),
        [Outcome::RefusedNoPrincipal, Outcome::RefusedNoPrincipal]
    );
    Ok(())
}
