//! TODO crate doc
