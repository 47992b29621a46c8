//! The admission order of a write: which gate refuses a `tools/call` first, and what happens to a
//! call that every gate lets through.
//!
//! The caller (the adapter) computes plain facts about the call ([`AdmissionFacts`]); [`admit`]
//! decides. The gates, in order:
//!
//! | # | gate | refuses when |
//! |---|---|---|
//! | 1 | [`Gate::Principal`] | the caller's principal is not known |
//! | 2 | [`Gate::Scope`] | the server requires a scope for writes and the caller's credential lacks it |
//! | 3 | [`Gate::WritesEnabled`] | writes are not enabled |
//! | 4 | [`Gate::Arguments`] | the arguments are not valid |
//! | 5 | [`Gate::Task`] | the request lets the server answer with a task |
//! | – | (retry) | a retry carrying a `requestState` is [`Admission::Resume`]d: can-ask and the token were checked when the person was asked |
//! | 6 | [`Gate::CanAsk`] | the client cannot be asked and the danger opt-in is off |
//! | 7 | [`Gate::Token`] | the tool is token-gated and the token was rejected |
//!
//! A call that passes every gate is [`Admission::Ask`]ed, or, only when the client cannot be asked
//! and the danger opt-in is on, [`Admission::ProceedWithoutAsking`].

/// Plain facts about one `tools/call` to a write tool, computed by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AdmissionFacts {
    /// The caller's principal was established from something the client cannot choose.
    pub principal_known: bool,
    /// The caller may write: no scope is required for writes, or the caller's verified
    /// credential grants it. Checked on every call, retries included.
    pub scope_granted: bool,
    /// Writes are enabled for this server.
    pub writes_enabled: bool,
    /// The arguments passed the argument checks (an object, within the limits, canonical), and
    /// carry nothing the question leaves out (the adapter counts a `confirmationToken` for a
    /// tool that is not token-gated as invalid).
    pub arguments_valid: bool,
    /// The request lets the server answer with a task.
    pub may_become_task: bool,
    /// The call carries a `requestState`: the retry that finishes a 2026-07-28 round trip.
    pub is_retry: bool,
    /// The client can be asked (it supports elicitation).
    pub can_ask: bool,
    /// The danger opt-in is on: a client that cannot be asked may write without asking anyone.
    pub ask_bypass: bool,
    /// Where the tool's confirmation token stands.
    pub token: TokenGate,
}

/// Where a tool's confirmation token stands when [`admit`] is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenGate {
    /// The tool is not token-gated.
    NotGated,
    /// The tool is token-gated and the token has not been checked yet.
    Unchecked,
    /// The tool is token-gated and the token was checked and would spend.
    Accepted,
    /// The tool is token-gated and the token was refused (missing, malformed, unknown, expired,
    /// spent, or bound to something else).
    Rejected,
}

/// A gate of the admission order, named by the refusal it gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gate {
    /// The caller's principal is not known.
    Principal,
    /// The caller's credential lacks the scope the server requires for writes.
    Scope,
    /// Writes are not enabled.
    WritesEnabled,
    /// The arguments are not valid.
    Arguments,
    /// The request lets the server answer with a task.
    Task,
    /// The client cannot be asked, and the danger opt-in is off.
    CanAsk,
    /// The confirmation token was rejected.
    Token,
}

impl Gate {
    /// A stable, kebab-case name for the audit trail.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Principal => "principal",
            Self::Scope => "scope",
            Self::WritesEnabled => "writes-enabled",
            Self::Arguments => "arguments",
            Self::Task => "task",
            Self::CanAsk => "can-ask",
            Self::Token => "token",
        }
    }
}

/// What [`admit`] decided.
#[must_use = "an admission that is not looked at is a write that may go ahead unchecked"]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Admission {
    /// Refuse: the first gate that says no. Nothing reaches the tool, nobody is asked.
    Refuse(Gate),
    /// A retry: finish the round trip it carries (can-ask and the token were checked when the
    /// person was asked).
    Resume,
    /// Every earlier gate passed and the tool is token-gated with an unchecked token: check the
    /// token, then call [`admit`] again with [`TokenGate::Accepted`] or [`TokenGate::Rejected`].
    CheckToken,
    /// Ask the person.
    Ask,
    /// The client cannot be asked and the danger opt-in is on (and the token, if the tool is
    /// gated, was accepted): go ahead without asking anyone. See [`crate::danger`].
    ProceedWithoutAsking,
}

/// Decides the admission of a write from `facts`: the first gate that refuses, in the order
/// principal → scope → writes enabled → arguments → task → (retry) → can ask → token; otherwise what to
/// do next. Pure: the same facts always give the same answer.
///
/// ```
/// use mcp_write_guard_core::admission::{admit, Admission, AdmissionFacts, Gate, TokenGate};
///
/// let facts = AdmissionFacts {
///     principal_known: true,
///     scope_granted: true,
///     writes_enabled: true,
///     arguments_valid: true,
///     may_become_task: false,
///     is_retry: false,
///     can_ask: true,
///     ask_bypass: false,
///     token: TokenGate::Unchecked,
/// };
/// assert_eq!(admit(&facts), Admission::CheckToken);
/// let checked = AdmissionFacts { token: TokenGate::Accepted, ..facts };
/// assert_eq!(admit(&checked), Admission::Ask);
/// let off = AdmissionFacts { writes_enabled: false, ..facts };
/// assert_eq!(admit(&off), Admission::Refuse(Gate::WritesEnabled));
/// ```
pub fn admit(facts: &AdmissionFacts) -> Admission {
    if !facts.principal_known {
        return Admission::Refuse(Gate::Principal);
    }
    if !facts.scope_granted {
        return Admission::Refuse(Gate::Scope);
    }
    if !facts.writes_enabled {
        return Admission::Refuse(Gate::WritesEnabled);
    }
    if !facts.arguments_valid {
        return Admission::Refuse(Gate::Arguments);
    }
    if facts.may_become_task {
        return Admission::Refuse(Gate::Task);
    }
    if facts.is_retry {
        return Admission::Resume;
    }
    if !facts.can_ask && !facts.ask_bypass {
        return Admission::Refuse(Gate::CanAsk);
    }
    match facts.token {
        TokenGate::NotGated | TokenGate::Accepted => {}
        TokenGate::Unchecked => return Admission::CheckToken,
        TokenGate::Rejected => return Admission::Refuse(Gate::Token),
    }
    if facts.can_ask {
        Admission::Ask
    } else {
        Admission::ProceedWithoutAsking
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKENS: [TokenGate; 4] = [
        TokenGate::NotGated,
        TokenGate::Unchecked,
        TokenGate::Accepted,
        TokenGate::Rejected,
    ];

    /// Every combination of the facts: 2^8 × 4.
    fn all_facts() -> Vec<AdmissionFacts> {
        let mut out = Vec::new();
        for bits in 0u16..256 {
            for token in TOKENS {
                let bit = |i: u8| bits & (1 << i) != 0;
                out.push(AdmissionFacts {
                    principal_known: bit(0),
                    writes_enabled: bit(1),
                    arguments_valid: bit(2),
                    may_become_task: bit(3),
                    is_retry: bit(4),
                    can_ask: bit(5),
                    ask_bypass: bit(6),
                    scope_granted: bit(7),
                    token,
                });
            }
        }
        out
    }

    /// The admission order written a second way: each rule names every fact it depends on, so the
    /// rules do not rely on their order, and exactly one must hold for any facts.
    fn oracle(f: &AdmissionFacts) -> Admission {
        use Admission::*;
        // Who is asking, and may they write at all.
        let who = f.principal_known && f.scope_granted;
        // Every gate before the retry passed.
        let pre = who && f.writes_enabled && f.arguments_valid && !f.may_become_task;
        // A fresh call (not a retry) that may go on to the token, having passed can-ask.
        let fresh = pre && !f.is_retry && (f.can_ask || f.ask_bypass);
        let token_ok = f.token == TokenGate::NotGated || f.token == TokenGate::Accepted;
        let rules: [(bool, Admission); 11] = [
            (!f.principal_known, Refuse(Gate::Principal)),
            (f.principal_known && !f.scope_granted, Refuse(Gate::Scope)),
            (who && !f.writes_enabled, Refuse(Gate::WritesEnabled)),
            (
                who && f.writes_enabled && !f.arguments_valid,
                Refuse(Gate::Arguments),
            ),
            (
                who && f.writes_enabled && f.arguments_valid && f.may_become_task,
                Refuse(Gate::Task),
            ),
            (pre && f.is_retry, Resume),
            (
                pre && !f.is_retry && !f.can_ask && !f.ask_bypass,
                Refuse(Gate::CanAsk),
            ),
            (fresh && f.token == TokenGate::Unchecked, CheckToken),
            (fresh && f.token == TokenGate::Rejected, Refuse(Gate::Token)),
            (fresh && token_ok && f.can_ask, Ask),
            (fresh && token_ok && !f.can_ask, ProceedWithoutAsking),
        ];
        let holding: Vec<Admission> = rules
            .iter()
            .filter(|(holds, _)| *holds)
            .map(|(_, admission)| *admission)
            .collect();
        assert_eq!(holding.len(), 1, "{f:?}: {holding:?}");
        holding[0]
    }

    #[test]
    fn admit_agrees_with_the_oracle_on_every_combination() {
        let all = all_facts();
        assert_eq!(all.len(), 1024);
        let mut seen = std::collections::HashSet::new();
        for facts in &all {
            let got = admit(facts);
            assert_eq!(got, oracle(facts), "{facts:?}");
            seen.insert(got);
        }
        // Every outcome is reachable.
        assert_eq!(seen.len(), 7 + 4, "{seen:?}");
    }

    fn ok() -> AdmissionFacts {
        AdmissionFacts {
            principal_known: true,
            scope_granted: true,
            writes_enabled: true,
            arguments_valid: true,
            may_become_task: false,
            is_retry: false,
            can_ask: true,
            ask_bypass: false,
            token: TokenGate::NotGated,
        }
    }

    #[test]
    fn named_rows() {
        use Admission::*;
        let rows: [(&str, AdmissionFacts, Admission); 14] = [
            ("a plain write is asked", ok(), Ask),
            (
                "an unknown principal is refused before anything else",
                AdmissionFacts {
                    principal_known: false,
                    writes_enabled: false,
                    arguments_valid: false,
                    token: TokenGate::Rejected,
                    ..ok()
                },
                Refuse(Gate::Principal),
            ),
            (
                "a missing write scope is refused before writes-off and bad arguments",
                AdmissionFacts {
                    scope_granted: false,
                    writes_enabled: false,
                    arguments_valid: false,
                    ..ok()
                },
                Refuse(Gate::Scope),
            ),
            (
                "a retry without the write scope is refused, not resumed",
                AdmissionFacts {
                    scope_granted: false,
                    is_retry: true,
                    ..ok()
                },
                Refuse(Gate::Scope),
            ),
            (
                "writes off comes before bad arguments",
                AdmissionFacts {
                    writes_enabled: false,
                    arguments_valid: false,
                    ..ok()
                },
                Refuse(Gate::WritesEnabled),
            ),
            (
                "bad arguments come before a task request",
                AdmissionFacts {
                    arguments_valid: false,
                    may_become_task: true,
                    ..ok()
                },
                Refuse(Gate::Arguments),
            ),
            (
                "a task-able retry is refused, not resumed",
                AdmissionFacts {
                    may_become_task: true,
                    is_retry: true,
                    ..ok()
                },
                Refuse(Gate::Task),
            ),
            (
                "a retry resumes without asking again or checking the token",
                AdmissionFacts {
                    is_retry: true,
                    can_ask: false,
                    token: TokenGate::Rejected,
                    ..ok()
                },
                Resume,
            ),
            (
                "a client that cannot be asked is refused before its token is looked at",
                AdmissionFacts {
                    can_ask: false,
                    token: TokenGate::Unchecked,
                    ..ok()
                },
                Refuse(Gate::CanAsk),
            ),
            (
                "a gated tool checks its token first",
                AdmissionFacts {
                    token: TokenGate::Unchecked,
                    ..ok()
                },
                CheckToken,
            ),
            (
                "a rejected token is refused",
                AdmissionFacts {
                    token: TokenGate::Rejected,
                    ..ok()
                },
                Refuse(Gate::Token),
            ),
            (
                "the bypass does not skip asking a client that can be asked",
                AdmissionFacts {
                    ask_bypass: true,
                    ..ok()
                },
                Ask,
            ),
            (
                "the bypass lets a client that cannot be asked proceed",
                AdmissionFacts {
                    can_ask: false,
                    ask_bypass: true,
                    token: TokenGate::Accepted,
                    ..ok()
                },
                ProceedWithoutAsking,
            ),
            (
                "the bypass does not skip a rejected token",
                AdmissionFacts {
                    can_ask: false,
                    ask_bypass: true,
                    token: TokenGate::Rejected,
                    ..ok()
                },
                Refuse(Gate::Token),
            ),
        ];
        for (name, facts, want) in rows {
            assert_eq!(admit(&facts), want, "{name}");
        }
    }

    #[test]
    fn check_token_never_comes_back_once_the_token_was_checked() {
        for facts in all_facts() {
            let got = admit(&facts);
            match facts.token {
                TokenGate::Accepted | TokenGate::Rejected | TokenGate::NotGated => {
                    assert_ne!(got, Admission::CheckToken, "{facts:?}");
                }
                TokenGate::Unchecked => {}
            }
            if got == Admission::CheckToken {
                // Feeding the check's result back: accepted goes on as an ungated tool would,
                // rejected is refused at the token gate.
                let accepted = AdmissionFacts {
                    token: TokenGate::Accepted,
                    ..facts
                };
                let ungated = AdmissionFacts {
                    token: TokenGate::NotGated,
                    ..facts
                };
                let rejected = AdmissionFacts {
                    token: TokenGate::Rejected,
                    ..facts
                };
                assert_eq!(admit(&accepted), admit(&ungated), "{facts:?}");
                assert_eq!(admit(&rejected), Admission::Refuse(Gate::Token));
            }
        }
    }

    #[test]
    fn gate_names_are_distinct() {
        let all = [
            Gate::Principal,
            Gate::Scope,
            Gate::WritesEnabled,
            Gate::Arguments,
            Gate::Task,
            Gate::CanAsk,
            Gate::Token,
        ];
        let names: std::collections::HashSet<_> = all.iter().map(|g| g.as_str()).collect();
        assert_eq!(names.len(), all.len());
    }
}
