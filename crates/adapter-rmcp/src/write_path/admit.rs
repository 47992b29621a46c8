//! Step 1 of a write: may this call go on at all?
//!
//! The adapter gathers the facts (who is asking, whether writes are on, the captured
//! arguments, whether the request could become a task, whether it is a retry, whether the
//! client can be asked, the token); the order in which they are weighed is mcp-write-guard-core's
//! [`admit`], a pure function with a truth table beside it.

use mcp_write_guard_core::{
    Binding, CapturedArgs, Principal,
    admission::{Admission, AdmissionFacts, Gate, TokenGate, admit},
    canonical::ArgsError,
    token::{TokenRejection, token_in},
};
use mcp_write_guard_policy::Classification;
use rmcp::{
    ServerHandler,
    model::{CallToolRequestParams, InputResponses},
    service::{RequestContext, RoleServer},
};

use std::sync::atomic::Ordering;

use super::{Call, Seen, refusal::Refusal};
use crate::{WriteGuard, audit::Outcome, elicit, principal::PrincipalRequest};

/// What an admitted call does next.
pub(super) enum Next {
    /// Ask the person.
    Ask,
    /// Nobody can be asked and the danger option lets the write go on unasked.
    WithoutAsking,
    /// A 2026-07-28 retry: finish the round trip its `requestState` names.
    Resume(Retry),
}

/// What a 2026-07-28 retry brings back.
pub(super) struct Retry {
    pub(super) state: String,
    pub(super) responses: Option<InputResponses>,
}

/// A call that passed every gate: the proof [`admit`](WriteGuard::admit) checked.
pub(super) struct Admitted {
    /// The call as its audit records name it from here on: the principal and the digest of
    /// the captured arguments.
    pub(super) call: Call,
    pub(super) principal: Principal,
    /// The arguments, captured once: every later step uses exactly these.
    pub(super) args: CapturedArgs,
    pub(super) next: Next,
}

/// What the guard knows of a call before its gates are weighed.
struct Gathered {
    principal: Option<Principal>,
    args: Result<CapturedArgs, ArgsError>,
    /// The call, as far as the audit records can name it now.
    call: Call,
    facts: AdmissionFacts,
    /// The retry's `requestState` and input responses, taken out of the request.
    retry: Option<Retry>,
}

impl<S: ServerHandler> WriteGuard<S> {
    /// Weighs the gates in mcp-write-guard-core's order. The guard's own round-trip fields are taken
    /// out of `request` here, so they never reach the inner tool, and so are the arguments, which
    /// only the capture holds from here on.
    pub(super) async fn admit(
        &self,
        call: &Call,
        request: &mut CallToolRequestParams,
        class: Classification,
        seen: &Seen,
        context: &RequestContext<RoleServer>,
    ) -> Result<Admitted, Refusal> {
        let gathered = self.gather(call, request, class, context);
        let call = gathered.call.clone();
        self.weigh(gathered, class, seen)
            .await
            .map_err(|refusal| refusal.at(&call))
    }

    /// The facts [`admit`] weighs: who is asking, may they write, the arguments captured once,
    /// a task or a retry, whether anyone can be asked.
    fn gather(
        &self,
        call: &Call,
        request: &mut CallToolRequestParams,
        class: Classification,
        context: &RequestContext<RoleServer>,
    ) -> Gathered {
        let responses = request.input_responses.take();
        let retry = request
            .request_state
            .take()
            .map(|state| Retry { state, responses });
        let who = PrincipalRequest::from_context(context, &self.connection)
            .with_handshake(self.handshake.load(Ordering::Acquire));
        let resolver = &*self.shared.principal;
        let principal = resolver.resolve(&who);
        if principal.is_none() && who.http_parts().is_some() {
            self.warn_stateless_once();
        }
        let scope_granted = match &self.shared.write_scope {
            None => true,
            Some(scope) => resolver.grants(&who, scope),
        };
        // The arguments move into the capture: from here on the request carries none, and the
        // preview and the apply are each handed a copy of the captured ones.
        let args =
            CapturedArgs::capture_owned(request.arguments.take(), &self.shared.policy.limits);
        let call = call.of(
            principal.as_ref(),
            args.as_ref().ok().map(CapturedArgs::digest),
        );
        let facts = AdmissionFacts {
            principal_known: principal.is_some(),
            scope_granted,
            writes_enabled: self.shared.writes_enabled,
            arguments_valid: bad_args(&args, class).is_none(),
            may_become_task: self.may_become_task(context),
            is_retry: retry.is_some(),
            can_ask: elicit::can_ask(context) || self.can_ask_on_page(context) || self.can_notify(),
            ask_bypass: self.shared.allow_without_elicitation,
            token: if class.token_gated {
                TokenGate::Unchecked
            } else {
                TokenGate::NotGated
            },
        };
        Gathered {
            principal,
            args,
            call,
            facts,
            retry,
        }
    }

    /// Asks mcp-write-guard-core's [`admit`] until it decides, checking the token when it says so.
    async fn weigh(
        &self,
        mut gathered: Gathered,
        class: Classification,
        seen: &Seen,
    ) -> Result<Admitted, Refusal> {
        let mut token_rejection = TokenRejection::Missing;
        let next = loop {
            match admit(&gathered.facts) {
                Admission::Refuse(gate) => {
                    let why = Why {
                        bad_args: bad_args(&gathered.args, class),
                        token: token_rejection,
                        scope: self.shared.write_scope.as_deref(),
                    };
                    return Err(refuse_at(gate, &why));
                }
                Admission::CheckToken => {
                    gathered.facts.token = match self.check_token(&gathered, seen).await {
                        Ok(()) => TokenGate::Accepted,
                        Err(rejection) => {
                            token_rejection = rejection;
                            TokenGate::Rejected
                        }
                    };
                }
                Admission::Resume => break gathered.retry.take().map_or(Next::Ask, Next::Resume),
                Admission::Ask => break Next::Ask,
                Admission::ProceedWithoutAsking => break Next::WithoutAsking,
            }
        };
        // admit() lets a call through only with a principal and captured arguments; anything
        // else (unreachable by its order) is refused all the same.
        let (Some(principal), Ok(args)) = (gathered.principal, gathered.args) else {
            let why = Why {
                bad_args: None,
                token: token_rejection,
                scope: None,
            };
            return Err(refuse_at(Gate::Principal, &why));
        };
        Ok(Admitted {
            call: gathered.call,
            principal,
            args,
            next,
        })
    }

    /// Whether the call's confirmation token would spend. Checking spends nothing: the token is
    /// spent, atomically, only after the person approved (the apply step). It was issued for the
    /// tool as it was defined then: a tool defined otherwise now (or whose definition has no
    /// digest) does not take it.
    async fn check_token(&self, gathered: &Gathered, seen: &Seen) -> Result<(), TokenRejection> {
        match (&gathered.principal, &gathered.args, seen) {
            (Some(principal), Ok(args), Some(Ok(definition))) => {
                let token = token_in(args)?;
                let call = Binding::new(principal, &gathered.call.tool, args);
                let now = self.shared.clock.now();
                self.shared
                    .approvals()
                    .check_token(&token, call, *definition, now)
                    .await
            }
            (Some(_), Ok(_), None | Some(Err(_))) => Err(TokenRejection::ToolChanged),
            // Unreachable by admit's order; refused all the same.
            (None, _, _) | (_, Err(_), _) => Err(TokenRejection::Missing),
        }
    }

    /// Whether the person can be asked on the approval page (one is configured, and the client
    /// can open it).
    fn can_ask_on_page(&self, context: &RequestContext<RoleServer>) -> bool {
        #[cfg(feature = "approval-page")]
        return self.shared.channels().page_for(context).is_some();
        #[cfg(not(feature = "approval-page"))]
        {
            let _ = context;
            false
        }
    }

    /// Whether a person can be reached through a notifier when the client cannot ask.
    fn can_notify(&self) -> bool {
        #[cfg(feature = "approval-page")]
        return self.shared.channels().notice_channel().is_some();
        #[cfg(not(feature = "approval-page"))]
        false
    }

    /// Logs, once per guard, why writes over stateless HTTP are refused.
    fn warn_stateless_once(&self) {
        if !self.shared.warned_stateless.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                server = %self.shared.server_name,
                "a write over streamable HTTP was refused: the request has no session this \
                 server issued and no verified credential, so nobody can be named as asking \
                 (every 2026-07-28 request is stateless). Put a verified credential in front \
                 (FromAuthenticatedSubject behind mcp_write_guard_http::BearerAuth) or, on a \
                 loopback-only server, use LocalMachine. Logged once."
            );
        }
    }

    /// Whether the inner server may answer this call with a task (SEP-2663): the request
    /// declares the tasks extension and the inner server supports it.
    fn may_become_task(&self, context: &RequestContext<RoleServer>) -> bool {
        let client = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        client && self.shared.inner.get_info().capabilities.supports_tasks()
    }
}

/// Why the arguments are not valid.
#[derive(Debug, Clone, Copy)]
enum BadArgs<'a> {
    /// They could not be captured.
    Invalid(&'a ArgsError),
    /// A top-level `confirmationToken` for a tool that is not token-gated. The question never
    /// shows that member (it is a token-gated tool's token, checked by the guard), so it would
    /// reach the tool without the person seeing it.
    UnshownToken,
}

/// Why the captured arguments are not valid, if they are not.
fn bad_args(args: &Result<CapturedArgs, ArgsError>, class: Classification) -> Option<BadArgs<'_>> {
    match args {
        Err(error) => Some(BadArgs::Invalid(error)),
        Ok(args) if !class.token_gated && args.has_confirmation_token() => {
            Some(BadArgs::UnshownToken)
        }
        Ok(_) => None,
    }
}

/// What the refusal of a gate names: why the arguments are not valid, why the token was
/// rejected, the scope writes need.
struct Why<'a> {
    bad_args: Option<BadArgs<'a>>,
    token: TokenRejection,
    /// The operator's setting, never text from the client.
    scope: Option<&'a str>,
}

/// The refusal for the first gate that said no.
fn refuse_at(gate: Gate, why: &Why<'_>) -> Refusal {
    match gate {
        Gate::Principal => Refusal::new(
            Outcome::RefusedNoPrincipal,
            "no principal",
            "This server cannot tell who is asking, so it accepts no changes from this \
             request; nothing was saved. Reconnect or sign in, then try again.",
        ),
        Gate::WritesEnabled => Refusal::new(
            Outcome::RefusedDisabled,
            "writes are disabled",
            "Changes are turned off on this server, so nothing was saved. If this change is \
             needed, ask the server's operator.",
        ),
        Gate::Arguments if matches!(why.bad_args, Some(BadArgs::UnshownToken)) => Refusal::new(
            Outcome::BadArguments,
            "a confirmationToken argument for a tool that takes none",
            "This tool takes no confirmationToken argument, so nothing was saved and nobody was \
             asked. Call it again without one.",
        ),
        Gate::Arguments => {
            let error = match why.bad_args {
                Some(BadArgs::Invalid(error)) => error.to_string(),
                _ => "not captured".to_owned(),
            };
            Refusal::new(
                Outcome::BadArguments,
                error.clone(),
                format!(
                    "The arguments were not accepted ({error}), so nothing was saved. Send the \
                     arguments as one JSON object within the size and nesting limits."
                ),
            )
        }
        Gate::Task => Refusal::new(
            Outcome::RefusedTask,
            "the request allows a task result",
            "Changes on this server cannot run as background tasks, and this request lets the \
             server start one, so nothing was saved and nobody was asked. Make the change from \
             a client or request that does not use tasks.",
        ),
        Gate::CanAsk => Refusal::new(
            Outcome::RefusedNoElicitation,
            "client has no form elicitation",
            "This change needs a person's approval, but this client cannot ask for it, so \
             nothing was saved. Use a client that supports approval requests (form \
             elicitation).",
        ),
        Gate::Token => Refusal::token(why.token),
        Gate::Scope => Refusal::scope(why.scope.unwrap_or_default()),
    }
}
