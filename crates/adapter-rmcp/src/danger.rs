//! Options that weaken the write policy. Each one is named for what it gives up, logs a warning
//! when the guard is built, and is documented with its risk. None is on by default.

/// Lets a client that cannot ask its user (no form elicitation, neither through
/// `elicitation/create` nor through a 2026-07-28 input round) write **without any person's
/// approval**.
///
/// # Risk
///
/// With this option a prompt-injected model can write anything the inner tools allow, as often
/// as it likes: nobody sees the change before it happens. That includes destructive,
/// token-gated tools: [`PREPARE_ADMIN_ACTION`](crate::PREPARE_ADMIN_ACTION) is itself a write,
/// so for such a client it too issues confirmation tokens **without asking anyone**, and the
/// model can prepare a token and spend it on its own. Tokens are still required, bound and
/// spent once, but they no longer stand for a person's approval.
///
/// The other checks stay on (writes must be enabled, arguments are captured once, the apply
/// still compares the preview it was computed against, results are still wrapped, every
/// decision is recorded with the outcome `approved-without-elicitation`), but the human step
/// is gone. The guard makes the approval through [`mcp_write_guard_core::danger`], the one other way
/// than a person's answer to reach the apply.
///
/// Use it only for a client that cannot elicit and that a person drives directly (a test rig, a
/// local script whose arguments a person typed), never for a model-driven client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllowWritesWithoutElicitation;
