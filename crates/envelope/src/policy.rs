//! Which results get wrapped.

use std::collections::BTreeSet;

use mcp_write_guard_policy::ToolClass;

/// Which tool results get wrapped, and how the text form looks.
///
/// Every write result is wrapped. Every read result is wrapped unless that read tool was
/// explicitly trusted with [`EnvelopePolicy::trust_read`]; a tool nobody configured is wrapped.
/// Trusting a tool that classifies as a write has no effect.
///
/// ```
/// use mcp_write_guard_envelope::EnvelopePolicy;
/// use mcp_write_guard_policy::ToolClass;
/// let policy = EnvelopePolicy::new().trust_read("list_categories");
/// assert!(!policy.should_wrap("list_categories", ToolClass::Read));
/// assert!(policy.should_wrap("list_products", ToolClass::Read));
/// assert!(policy.should_wrap("list_categories", ToolClass::AdditiveWrite));
/// assert!(policy.text_prefix());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopePolicy {
    trusted_reads: BTreeSet<String>,
    text_prefix: bool,
}

impl Default for EnvelopePolicy {
    fn default() -> Self {
        Self::new()
    }
}

impl EnvelopePolicy {
    /// Wrap everything; text form with the [`NOTICE_PREFIX`](crate::NOTICE_PREFIX).
    pub fn new() -> Self {
        Self {
            trusted_reads: BTreeSet::new(),
            text_prefix: true,
        }
    }

    /// Marks a read tool as trusted: its results are passed through unwrapped. Only do this for
    /// tools whose output contains nothing that others can write (for example a fixed list of
    /// categories).
    #[must_use]
    pub fn trust_read(mut self, tool: impl Into<String>) -> Self {
        self.trusted_reads.insert(tool.into());
        self
    }

    /// Whether the text form starts with the [`NOTICE_PREFIX`](crate::NOTICE_PREFIX)
    /// (default `true`); `false` renders the envelope structure alone.
    #[must_use]
    pub fn with_text_prefix(mut self, on: bool) -> Self {
        self.text_prefix = on;
        self
    }

    /// Whether the result of `tool`, classified `class`, must be wrapped.
    pub fn should_wrap(&self, tool: &str, class: ToolClass) -> bool {
        class.is_write() || !self.trusted_reads.contains(tool)
    }

    /// Whether the text form carries the prefix.
    pub fn text_prefix(&self) -> bool {
        self.text_prefix
    }

    /// The read tools configured as trusted, in name order.
    pub fn trusted_reads(&self) -> impl Iterator<Item = &str> {
        self.trusted_reads.iter().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CLASSES: [ToolClass; 3] = [
        ToolClass::Read,
        ToolClass::AdditiveWrite,
        ToolClass::DestructiveWrite,
    ];

    #[test]
    fn default_wraps_everything_with_prefix() {
        for policy in [EnvelopePolicy::new(), EnvelopePolicy::default()] {
            for class in CLASSES {
                assert!(policy.should_wrap("anything", class));
                assert!(policy.should_wrap("", class));
            }
            assert!(policy.text_prefix());
            assert_eq!(policy.trusted_reads().count(), 0);
        }
    }

    #[test]
    fn trust_applies_to_reads_only_and_only_to_the_named_tool() {
        let policy = EnvelopePolicy::new()
            .trust_read("list_categories")
            .trust_read("health");
        assert!(!policy.should_wrap("list_categories", ToolClass::Read));
        assert!(!policy.should_wrap("health", ToolClass::Read));
        assert!(policy.should_wrap("list_categories", ToolClass::AdditiveWrite));
        assert!(policy.should_wrap("list_categories", ToolClass::DestructiveWrite));
        assert!(policy.should_wrap("List_categories", ToolClass::Read));
        assert!(policy.should_wrap("list_categories ", ToolClass::Read));
        assert!(policy.should_wrap("new_tool", ToolClass::Read));
        assert_eq!(
            policy.trusted_reads().collect::<Vec<_>>(),
            ["health", "list_categories"]
        );
    }

    #[test]
    fn text_prefix_option() {
        let policy = EnvelopePolicy::new().with_text_prefix(false);
        assert!(!policy.text_prefix());
        assert!(policy.should_wrap("t", ToolClass::Read));
        assert!(policy.with_text_prefix(true).text_prefix());
    }

    proptest! {
        #[test]
        fn wraps_unless_a_trusted_read(
            trusted in prop::collection::btree_set("[a-z]{1,4}", 0..6),
            tool in "[a-z]{1,4}",
            class in prop::sample::select(CLASSES.to_vec()),
        ) {
            let policy = trusted.iter().cloned().fold(EnvelopePolicy::new(), EnvelopePolicy::trust_read);
            let trusted_read = class == ToolClass::Read && trusted.contains(&tool);
            prop_assert_eq!(policy.should_wrap(&tool, class), !trusted_read);
        }
    }
}
