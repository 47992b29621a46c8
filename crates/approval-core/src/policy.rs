//! The tunable numbers of the policy, with their defaults.

use time::Duration;

use crate::canonical::ArgLimits;

/// Default [`ApprovalPolicy::approval_ttl`]: 120 seconds.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::seconds(120);
/// Default [`ApprovalPolicy::token_ttl`]: 300 seconds.
pub const DEFAULT_TOKEN_TTL: Duration = Duration::seconds(300);
/// Default [`ApprovalPolicy::per_principal_cap`]: 64 live store entries per principal.
pub const DEFAULT_PER_PRINCIPAL_CAP: usize = 64;

/// The policy's numbers. Build with [`Default`] and adjust fields or use the `with_` methods.
///
/// A lifetime that is zero, negative, or so large that the expiry would overflow the calendar
/// makes approvals and tokens expire at once (fail closed).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApprovalPolicy {
    /// How long an approval (and its round-trip state) is open: an answer or use at or after
    /// `asked_at + approval_ttl` is expired. Default 120 s.
    pub approval_ttl: Duration,
    /// How long a confirmation token can be spent: at or after `issued_at + token_ttl` it is
    /// expired. Default 300 s.
    pub token_ttl: Duration,
    /// Live store entries allowed per principal (used by [`MemoryStore::for_policy`](crate::MemoryStore::for_policy)).
    /// An approval, round trip or token holds its place only while it is live: until it is
    /// taken, or for exactly its lifetime. Default 64.
    pub per_principal_cap: usize,
    /// Limits on tool arguments. Default 1 MiB and depth 64.
    pub limits: ArgLimits,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        Self {
            approval_ttl: DEFAULT_APPROVAL_TTL,
            token_ttl: DEFAULT_TOKEN_TTL,
            per_principal_cap: DEFAULT_PER_PRINCIPAL_CAP,
            limits: ArgLimits::default(),
        }
    }
}

impl ApprovalPolicy {
    /// Sets [`approval_ttl`](Self::approval_ttl).
    pub fn with_approval_ttl(mut self, ttl: Duration) -> Self {
        self.approval_ttl = ttl;
        self
    }

    /// Sets [`token_ttl`](Self::token_ttl).
    pub fn with_token_ttl(mut self, ttl: Duration) -> Self {
        self.token_ttl = ttl;
        self
    }

    /// Sets [`per_principal_cap`](Self::per_principal_cap).
    pub fn with_per_principal_cap(mut self, cap: usize) -> Self {
        self.per_principal_cap = cap;
        self
    }

    /// Sets [`limits`](Self::limits).
    pub fn with_limits(mut self, limits: ArgLimits) -> Self {
        self.limits = limits;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setter_sets_its_field_and_only_it() {
        let default = ApprovalPolicy::default();
        let limits = ArgLimits::new(2048, 3);
        let policy = default.clone().with_limits(limits);
        assert_eq!(policy.limits, limits);
        assert_ne!(default.limits, limits);
        assert_eq!(
            ApprovalPolicy {
                limits: default.limits,
                ..policy
            },
            default
        );
    }
}
