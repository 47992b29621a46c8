//! The clients the proxy serves, as far as the upstream's own messages need them: which
//! client a request from the upstream (an elicitation, a sampling request, `roots/list`) goes
//! to, and where the upstream's notifications and progress go.
//!
//! JSON-RPC over one upstream connection does not say which downstream call an upstream request
//! belongs to. So the proxy forwards one only where the answer is certain: to the client of the
//! one downstream request in flight, or, over stdio (one connection, one client), to that
//! client. Otherwise the upstream gets an error: a question shown to the wrong person would be
//! worse than no question.

use std::{
    collections::HashMap,
    sync::atomic::{AtomicU64, Ordering},
};

use parking_lot::Mutex;
use rmcp::{
    Peer, RoleServer,
    model::{NumberOrString, ProgressToken},
};

/// A key of the registry: one connected client, or one request in flight.
type Key = u64;

/// The downstream clients and their requests in flight.
#[derive(Debug, Default)]
pub(crate) struct Downstream {
    next: AtomicU64,
    /// Clients that finished their handshake (legacy protocol era), for notifications and for
    /// the upstream's requests.
    clients: Mutex<Vec<(Key, Peer<RoleServer>)>>,
    /// Requests forwarded upstream and not yet answered, with the client that sent each.
    in_flight: Mutex<HashMap<Key, Peer<RoleServer>>>,
    /// The progress token the proxy sent upstream, to the client and token of the request.
    progress: Mutex<HashMap<ProgressToken, (Peer<RoleServer>, ProgressToken)>>,
}

/// Why no client can take a request from the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoTarget {
    /// No client is connected, and nothing is in flight.
    Nobody,
    /// Several clients, and not exactly one request in flight: which one is meant is unknown.
    Ambiguous,
}

impl NoTarget {
    /// Why, as the upstream's error message says it.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Self::Nobody => "no client is connected to the proxy",
            Self::Ambiguous => {
                "several clients are connected and the proxy cannot tell which one this request \
                 is for"
            }
        }
    }
}

/// Removes a request from [`Downstream`] when dropped (answered, failed or cancelled).
pub(crate) struct InFlight<'a> {
    downstream: &'a Downstream,
    key: Key,
    progress: Option<ProgressToken>,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.downstream.in_flight.lock().remove(&self.key);
        if let Some(token) = self.progress.take() {
            self.downstream.progress.lock().remove(&token);
        }
    }
}

impl InFlight<'_> {
    /// The upstream's progress on this request (sent with `upstream_token`) goes to the client
    /// as progress on `downstream_token`.
    pub(crate) fn forward_progress(
        &mut self,
        upstream_token: ProgressToken,
        peer: &Peer<RoleServer>,
        downstream_token: ProgressToken,
    ) {
        self.downstream
            .progress
            .lock()
            .insert(upstream_token.clone(), (peer.clone(), downstream_token));
        self.progress = Some(upstream_token);
    }
}

impl Downstream {
    fn key(&self) -> Key {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// A client finished its handshake.
    pub(crate) fn connected(&self, peer: Peer<RoleServer>) {
        let key = self.key();
        let mut clients = self.clients.lock();
        clients.retain(|(_, p)| !p.is_transport_closed());
        clients.push((key, peer));
    }

    /// A request of `peer` is about to be forwarded upstream; it counts until the guard drops.
    pub(crate) fn begin(&self, peer: &Peer<RoleServer>) -> InFlight<'_> {
        let key = self.key();
        self.in_flight.lock().insert(key, peer.clone());
        InFlight {
            downstream: self,
            key,
            progress: None,
        }
    }

    /// The client a request from the upstream goes to: the client of the one request in
    /// flight; with none in flight, the one connected client when the proxy serves a single
    /// connection (stdio, `single_client`). Anything else is refused.
    pub(crate) fn target(&self, single_client: bool) -> Result<Peer<RoleServer>, NoTarget> {
        {
            let in_flight = self.in_flight.lock();
            let mut calls = in_flight.values();
            match (calls.next(), calls.next()) {
                (Some(only), None) => return Ok(only.clone()),
                (Some(_), Some(_)) if !single_client => return Err(NoTarget::Ambiguous),
                _ => {}
            }
        }
        let clients = self.everyone();
        match clients.as_slice() {
            [only] if single_client => Ok(only.clone()),
            [] => Err(NoTarget::Nobody),
            _ => Err(NoTarget::Ambiguous),
        }
    }

    /// Every connected client, for a notification that concerns them all (a list changed, a
    /// log message).
    pub(crate) fn everyone(&self) -> Vec<Peer<RoleServer>> {
        let mut clients = self.clients.lock();
        clients.retain(|(_, p)| !p.is_transport_closed());
        clients.iter().map(|(_, p)| p.clone()).collect()
    }

    /// Where the upstream's progress on `token` goes.
    pub(crate) fn progress_target(
        &self,
        token: &ProgressToken,
    ) -> Option<(Peer<RoleServer>, ProgressToken)> {
        self.progress.lock().get(token).cloned()
    }
}

/// A progress token as a log field.
pub(crate) fn token_text(token: &ProgressToken) -> String {
    match &token.0 {
        NumberOrString::Number(n) => n.to_string(),
        NumberOrString::String(s) => format!("{s:?}"),
    }
}
