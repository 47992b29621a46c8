//! [`WriteGuardBuilder`]: everything a guard can be told, in one place.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU8},
    },
};

use mcp_write_guard_core::{
    ApprovalPolicy, Clock, MemoryStore, Store, SystemClock, canonical::ArgLimits,
};
use mcp_write_guard_envelope::EnvelopePolicy;
use mcp_write_guard_policy::DEFAULT_WRITES_ENV;
use rmcp::ServerHandler;

use crate::{
    WriteGuard,
    audit::{AuditSink, Redaction, TracingSink},
    danger::AllowWritesWithoutElicitation,
    guard::{GATED_UNKNOWN, Shared},
    principal::{ConnectionId, PerConnection, PrincipalResolver},
    prompt::{PromptFn, PromptInput},
};

/// Configures a [`WriteGuard`]. Start with [`WriteGuard::builder`], finish with
/// [`WriteGuardBuilder::build`].
///
/// Defaults: the server name from the inner server's `get_info`; writes enabled only when the
/// environment variable `MCP_WRITES_ENABLED` is exactly `true` (read once, in `build`); every
/// read wrapped; no previews; the default prompt; a 2-minute approval clock; 5-minute tokens;
/// an in-memory store; the system clock; the `tracing` audit sink; one principal per
/// connection; clients without elicitation refused.
#[derive(derive_more::Debug)]
pub struct WriteGuardBuilder<S> {
    #[debug(skip)]
    inner: S,
    server_name: Option<String>,
    writes_env: String,
    writes_enabled: Option<bool>,
    #[debug(skip)]
    envelope: EnvelopePolicy,
    previews: HashSet<String>,
    #[debug(skip)]
    prompts: HashMap<String, PromptFn>,
    policy: ApprovalPolicy,
    #[debug(skip)]
    store: Option<Arc<dyn Store>>,
    #[debug(skip)]
    clock: Arc<dyn Clock>,
    #[debug(skip)]
    audit: Arc<dyn AuditSink>,
    #[debug(skip)]
    redaction: Redaction,
    #[debug(skip)]
    principal: Arc<dyn PrincipalResolver>,
    #[debug(skip)]
    write_scope: Option<String>,
    allow_without_elicitation: bool,
    #[debug(skip)]
    check_dry_previews: bool,
    #[debug(skip)]
    refuse_calls: Option<crate::guard::RefuseCalls>,
    #[cfg(feature = "approval-page")]
    #[debug(skip)]
    approval_page: Option<crate::page::ApprovalPage>,
    #[cfg(feature = "approval-page")]
    #[debug(skip)]
    notifier: Option<Arc<dyn crate::notify::Notifier>>,
    #[debug(skip)]
    progress_every: std::time::Duration,
}

/// How often a call that waits for the person's answer sends `notifications/progress` by
/// default (when its request carried a `progressToken`).
pub const DEFAULT_PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

impl<S: ServerHandler> WriteGuard<S> {
    /// Starts configuring a guard around `inner`.
    pub fn builder(inner: S) -> WriteGuardBuilder<S> {
        WriteGuardBuilder::new(inner)
    }
}

impl<S: ServerHandler> WriteGuardBuilder<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            server_name: None,
            writes_env: DEFAULT_WRITES_ENV.to_owned(),
            writes_enabled: None,
            envelope: EnvelopePolicy::new(),
            previews: HashSet::new(),
            prompts: HashMap::new(),
            policy: ApprovalPolicy::default(),
            store: None,
            clock: Arc::new(SystemClock),
            audit: Arc::new(TracingSink),
            redaction: Redaction::default(),
            principal: Arc::new(PerConnection),
            write_scope: None,
            allow_without_elicitation: false,
            check_dry_previews: false,
            refuse_calls: None,
            #[cfg(feature = "approval-page")]
            approval_page: None,
            #[cfg(feature = "approval-page")]
            notifier: None,
            progress_every: DEFAULT_PROGRESS_EVERY,
        }
    }

    /// The server name used as the envelope's `source` (`<server>/<tool>`). Default: the name
    /// the inner server reports in `get_info`.
    #[must_use]
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// The environment variable that enables writes (default `MCP_WRITES_ENABLED`). Only the
    /// exact value `true` enables them. Read once, in [`Self::build`].
    #[must_use]
    pub fn writes_env(mut self, name: impl Into<String>) -> Self {
        self.writes_env = name.into();
        self
    }

    /// Enables or disables writes explicitly, ignoring the environment (for tests and for
    /// programs that read their own configuration).
    #[must_use]
    pub fn writes_enabled(mut self, enabled: bool) -> Self {
        self.writes_enabled = Some(enabled);
        self
    }

    /// Marks a read tool as trusted: its results are not wrapped. Has no effect on writes,
    /// whose results are always wrapped.
    #[must_use]
    pub fn trust_read(mut self, tool: impl Into<String>) -> Self {
        self.envelope = self.envelope.trust_read(tool);
        self
    }

    /// Whether wrapped text content starts with `SECURITY NOTICE: ` (default: yes).
    #[must_use]
    pub fn text_prefix(mut self, on: bool) -> Self {
        self.envelope = self.envelope.with_text_prefix(on);
        self
    }

    /// Keeps `argument` of `tool` out of the audit records: the `asked` record shows its
    /// SHA-256 instead, and no question text (which may quote it). For
    /// `prepare_admin_action`, the target tool's rules apply to the target's arguments. See
    /// the `audit` section of the crate docs for what is recorded by default.
    #[must_use]
    pub fn redact(mut self, tool: impl Into<String>, argument: impl Into<String>) -> Self {
        self.redaction.add(tool.into(), argument.into());
        self
    }

    /// Keeps every argument for which `rule(tool, argument)` is true out of the audit records,
    /// as [`redact`](Self::redact) does (for example every argument named `password`).
    #[must_use]
    pub fn redact_with<F>(mut self, rule: F) -> Self
    where
        F: Fn(&str, &str) -> bool + Send + Sync + 'static,
    {
        self.redaction.add_rule(Arc::new(rule));
        self
    }

    /// Declares that `tool` supports previews and compare-and-apply (see [`crate::WriteStep`]):
    /// on [`WriteStep::Preview`](crate::WriteStep::Preview) it returns the change without
    /// making it, and the guard shows that preview to the user; on
    /// [`WriteStep::Apply`](crate::WriteStep::Apply) it recomputes the preview inside the
    /// transaction that applies and commits only if
    /// [`ApprovedPreview::check`](crate::ApprovedPreview::check) says unchanged. An apply that
    /// returns success without that check is answered with an error and recorded as
    /// `apply-failed`.
    ///
    /// For a token-gated tool the preview also runs before `prepare_admin_action` asks the
    /// user, with the target arguments and **no** `confirmationToken`, so the tool's argument
    /// parsing must accept a missing token (for example an `Option` field).
    #[must_use]
    pub fn preview(mut self, tool: impl Into<String>) -> Self {
        self.previews.insert(tool.into());
        self
    }

    /// The question asked for `tool`, built from the tool name, the arguments (without the
    /// confirmation token) and the preview value. For a token-gated tool the same wording is the
    /// body of `prepare_admin_action`'s question, after a sentence saying that a one-time token
    /// is being prepared and that the action will ask again.
    #[must_use]
    pub fn prompt<F>(mut self, tool: impl Into<String>, prompt: F) -> Self
    where
        F: Fn(&PromptInput<'_>) -> String + Send + Sync + 'static,
    {
        self.prompts.insert(tool.into(), Arc::new(prompt));
        self
    }

    /// How long the user has to answer (default 120 s).
    #[must_use]
    pub fn approval_ttl(mut self, ttl: time::Duration) -> Self {
        self.policy = self.policy.with_approval_ttl(ttl);
        self
    }

    /// How long a confirmation token stays valid (default 300 s).
    #[must_use]
    pub fn token_ttl(mut self, ttl: time::Duration) -> Self {
        self.policy = self.policy.with_token_ttl(ttl);
        self
    }

    /// The size and nesting limits for arguments.
    #[must_use]
    pub fn arg_limits(mut self, limits: ArgLimits) -> Self {
        self.policy = self.policy.with_limits(limits);
        self
    }

    /// Where approvals, round-trip records and tokens live (default: in memory, this process
    /// only). Replicas behind a load balancer need a shared store.
    #[must_use]
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The clock for the approval and token lifetimes (default: the system clock).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Where decisions are recorded (default: [`TracingSink`]).
    #[must_use]
    pub fn audit(mut self, sink: Arc<dyn AuditSink>) -> Self {
        self.audit = sink;
        self
    }

    /// Who is asking (default: [`PerConnection`]). See [`crate::PrincipalResolver`] for which
    /// resolver fits which transport.
    #[must_use]
    pub fn principal(mut self, resolver: Arc<dyn PrincipalResolver>) -> Self {
        self.principal = resolver;
        self
    }

    /// Requires `scope` for every write: a caller whose verified credential does not grant it
    /// ([`crate::PrincipalResolver::grants`]) is refused before anyone is asked, with a message
    /// naming the scope, and nothing is saved. Reads are not affected. Default: no scope.
    #[must_use]
    pub fn write_scope(mut self, scope: impl Into<String>) -> Self {
        self.write_scope = Some(scope.into());
        self
    }

    /// Lets the inner server refuse calls to a tool before anyone is asked: before every
    /// `tools/call`, `refuse` reads the tool's current definition, and `Some(why)` answers the
    /// call with `why` as an error result (say what happened and what the user can do), with a
    /// `refused-by-server` audit record for a write. A proxy uses it for a tool that no longer
    /// matches its pinned surface, or an upstream that stopped. It can only refuse: a call it
    /// lets through goes through every gate as before.
    #[must_use]
    pub fn refuse_calls_when<F>(mut self, refuse: F) -> Self
    where
        F: Fn(&rmcp::model::Tool) -> Option<String> + Send + Sync + 'static,
    {
        self.refuse_calls = Some(std::sync::Arc::new(refuse));
        self
    }

    /// For tests: runs every preview twice and refuses the call (outcome `preview-failed`,
    /// logged as an error) when the two previews differ. That is the symptom of a tool that
    /// opted in with [`Self::preview`] but writes on [`crate::WriteStep::Preview`] (a forgotten
    /// `match write_step(..)`): its "preview" lands before anyone is asked, even if the person
    /// then declines. The check finds the mistake; it cannot undo the writes the previews made.
    /// It also refuses previews that are not deterministic (timestamps, generated ids), which
    /// compare-and-apply would refuse as stale anyway. Default: off (one preview per write).
    #[must_use]
    pub fn check_previews_are_dry(mut self) -> Self {
        self.check_dry_previews = true;
        self
    }

    /// Asks on the server's own approval page when the client supports URL-mode elicitation
    /// (feature `approval-page`; see [`crate::page`]). Serve the page's routes from
    /// `mcp_write_guard_page::router` ([`WriteGuard::approval_page_host`]) at `page`'s base URL. Clients with form elicitation
    /// only keep the form.
    #[cfg(feature = "approval-page")]
    #[must_use]
    pub fn approval_page(mut self, page: crate::page::ApprovalPage) -> Self {
        self.approval_page = Some(page);
        self
    }

    /// Reaches a person when the client cannot ask (no elicitation, or a URL-mode client that
    /// answers the page's link with an error): the question is opened on the approval page
    /// ([`Self::approval_page`], required), `notifier` sends the person its link, and the call
    /// is answered at once: a person was asked, nothing is saved yet, call
    /// again with the same arguments after they approve. The next such call within the clock
    /// applies the approved change once. Without an approval page the notifier is not used
    /// (and [`Self::build`] logs a warning). See [`crate::notify`].
    #[cfg(feature = "approval-page")]
    #[must_use]
    pub fn notifier(mut self, notifier: impl crate::notify::Notifier) -> Self {
        self.notifier = Some(Arc::new(notifier));
        self
    }

    /// How often a call that waits for the person's answer (below 2026-07-28) sends
    /// `notifications/progress`, when its request carried a `progressToken`: clients that reset
    /// their request timeout on progress then wait for the person instead of giving up.
    /// Default: [`DEFAULT_PROGRESS_EVERY`] (5 s); at least 100 ms.
    #[must_use]
    pub fn progress_every(mut self, every: std::time::Duration) -> Self {
        self.progress_every = every;
        self
    }

    /// Lets clients that cannot ask their user write without approval. Read the risk on
    /// [`AllowWritesWithoutElicitation`] first; [`Self::build`] logs a warning.
    #[must_use]
    pub fn danger(mut self, _option: AllowWritesWithoutElicitation) -> Self {
        self.allow_without_elicitation = true;
        self
    }

    /// Builds the guard. Reads the writes variable from the environment here, once, unless
    /// [`Self::writes_enabled`] was given.
    pub fn build(self) -> WriteGuard<S> {
        let writes_enabled = self.writes_enabled.unwrap_or_else(|| {
            let value = std::env::var(&self.writes_env).ok();
            mcp_write_guard_policy::writes_enabled(value.as_deref())
        });
        let server_name = self
            .server_name
            .unwrap_or_else(|| self.inner.get_info().server_info.name);
        if self.allow_without_elicitation {
            tracing::warn!(
                server = %server_name,
                "danger::AllowWritesWithoutElicitation is on: clients that cannot ask their user \
                 may write without anyone's approval"
            );
        }
        if !writes_enabled {
            tracing::info!(
                server = %server_name,
                env = %self.writes_env,
                "writes are disabled; write tools will be refused"
            );
        }
        #[cfg(feature = "approval-page")]
        if self.notifier.is_some() && self.approval_page.is_none() {
            tracing::warn!(
                server = %server_name,
                "a notifier is configured without an approval page; it is not used (the notice \
                 links to the page)"
            );
        }
        let store = self
            .store
            .unwrap_or_else(|| Arc::new(MemoryStore::for_policy(&self.policy)));
        WriteGuard {
            shared: Arc::new(Shared {
                inner: self.inner,
                server_name,
                writes_enabled,
                envelope: self.envelope,
                previews: self.previews,
                prompts: self.prompts,
                policy: self.policy,
                store,
                clock: self.clock,
                audit: self.audit,
                redaction: self.redaction,
                principal: self.principal,
                write_scope: self.write_scope,
                allow_without_elicitation: self.allow_without_elicitation,
                check_dry_previews: self.check_dry_previews,
                refuse_calls: self.refuse_calls,
                warned_stateless: AtomicBool::new(false),
                config_mistakes: std::sync::OnceLock::new(),
                any_gated: AtomicU8::new(GATED_UNKNOWN),
                known_tools: crate::tools::KnownTools::default(),
                #[cfg(feature = "approval-page")]
                notifier: self.notifier.filter(|_| self.approval_page.is_some()),
                #[cfg(feature = "approval-page")]
                pages: self
                    .approval_page
                    .map(|page| Arc::new(crate::page::Pages::new(page))),
                progress_every: self.progress_every,
                asked_now: Arc::default(),
                waiting_now: Arc::default(),
                #[cfg(feature = "approval-page")]
                notices_sent: crate::write_path::NoticesSent::default(),
            }),
            connection: ConnectionId::random(),
            handshake: AtomicBool::new(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::ServerHandler;

    use crate::WriteGuard;

    struct Plain;
    impl ServerHandler for Plain {}

    #[test]
    fn debug_shows_exactly_the_settings_that_hold_no_secret() {
        let builder = WriteGuard::builder(Plain)
            .server_name("shop")
            .preview("adjust_stock")
            .write_scope("shop:write");
        // Exactly these fields: one added later shows up here and has to be looked at.
        let policy = mcp_write_guard_core::ApprovalPolicy::default();
        assert_eq!(
            format!("{builder:?}"),
            format!(
                "WriteGuardBuilder {{ server_name: Some(\"shop\"), \
                 writes_env: \"MCP_WRITES_ENABLED\", writes_enabled: None, \
                 previews: {{\"adjust_stock\"}}, policy: {policy:?}, \
                 allow_without_elicitation: false, .. }}"
            )
        );
    }
}
