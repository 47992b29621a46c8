//! Shared helpers for the workspace end-to-end tests in `tests/tests/`.
