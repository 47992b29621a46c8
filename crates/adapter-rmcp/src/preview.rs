//! The out-of-band preview signal.
//!
//! For a tool that opted in to previews ([`crate::WriteGuardBuilder::preview`]), the guard calls
//! the tool once as a dry run before asking the user, and again right before applying, with a
//! [`Preview`] marker in the request's extensions. The marker never travels on the wire, so the
//! model cannot set it, and an argument such as `dryRun: true` proves nothing.
//!
//! A tool that opted in **must** check [`is_preview`] and, when it is set, compute and return
//! the change without making it. The preview result's `structuredContent` (else its text) is
//! the preview value: it is shown to the user, stored with the approval, and compared with a
//! fresh preview before applying. A preview with `isError: true` (a business rule said no) is
//! returned to the model as it is and the user is not asked.
//!
//! For a token-gated tool, `prepare_admin_action` also runs its preview before asking, with the
//! target arguments and without a `confirmationToken`.

use rmcp::{
    model::Extensions,
    service::{RequestContext, RoleServer},
};

/// The marker the guard inserts into a request's extensions for a dry run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Preview;

/// Whether this call is a dry run: compute the change, do not make it.
pub fn is_preview(context: &RequestContext<RoleServer>) -> bool {
    is_preview_in(&context.extensions)
}

/// [`is_preview`] for tools that take rmcp's `Extensions` extractor instead of the whole
/// request context.
pub fn is_preview_in(extensions: &Extensions) -> bool {
    extensions.get::<Preview>().is_some()
}

pub(crate) fn mark_preview(extensions: &mut Extensions) {
    extensions.insert(Preview);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_seen_only_when_inserted() {
        let mut extensions = Extensions::new();
        assert!(!is_preview_in(&extensions));
        mark_preview(&mut extensions);
        assert!(is_preview_in(&extensions));
    }
}
