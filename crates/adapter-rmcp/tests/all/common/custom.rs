//! Guards configured beyond [`Options`](super::Options): any builder setting (a principal
//! resolver, a store), and an audit sink that says when a record arrives.

use std::sync::Arc;

use mcp_write_guard_core::ManualClock;
use mcp_write_guard_rmcp::{AuditRecord, AuditSink, MemorySink, WriteGuard, WriteGuardBuilder};
use tokio::sync::Notify;

use super::{Fixture, Harness, Options, connect, start_time};

/// The builder [`super::guard`] uses, before `build`, so a test can change any setting.
pub fn guard_builder(
    fixture: Fixture,
    audit: &MemorySink,
    clock: &ManualClock,
    options: &Options,
) -> WriteGuardBuilder<Fixture> {
    WriteGuard::builder(fixture)
        .writes_enabled(options.writes)
        .preview("set_counter")
        .audit(Arc::new(audit.clone()))
        .clock(Arc::new(clock.clone()))
}

impl Harness {
    /// A harness whose guard is built from [`guard_builder`] changed by `customize`.
    pub async fn custom(
        era: super::Era,
        options: Options,
        customize: impl FnOnce(WriteGuardBuilder<Fixture>) -> WriteGuardBuilder<Fixture>,
    ) -> Self {
        let fixture = Fixture::default();
        let audit = MemorySink::new();
        let clock = ManualClock::new(start_time());
        let guard = customize(guard_builder(fixture.clone(), &audit, &clock, &options)).build();
        let scripted = super::scripted_client(options.elicitation);
        let client = connect(guard.clone(), era, scripted.clone()).await.unwrap();
        Self {
            era,
            client,
            scripted,
            fixture,
            audit,
            clock,
            guard,
        }
    }
}

/// Records into a [`MemorySink`] and wakes whoever waits for a record.
#[derive(Clone)]
pub struct NotifyingSink {
    pub memory: MemorySink,
    notify: Arc<Notify>,
}

impl NotifyingSink {
    pub fn new(memory: MemorySink) -> Self {
        Self {
            memory,
            notify: Arc::default(),
        }
    }

    /// Waits until the sink holds at least `n` records.
    pub async fn wait_for(&self, n: usize) {
        loop {
            let notified = self.notify.notified();
            if self.memory.records().len() >= n {
                return;
            }
            notified.await;
        }
    }
}

impl AuditSink for NotifyingSink {
    fn record(&self, record: &AuditRecord) {
        self.memory.record(record);
        self.notify.notify_waiters();
    }
}
