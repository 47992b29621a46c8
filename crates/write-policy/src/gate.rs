//! The writes gate.

/// The environment variable a server reads for the writes gate unless it chooses another name.
pub const DEFAULT_WRITES_ENV: &str = "MCP_WRITES_ENABLED";

/// Whether writes are enabled, from the value of the writes environment variable.
///
/// Only the exact value `"true"` enables writes. Anything else leaves them off: `None` (unset),
/// the empty string, `"TRUE"`, `" true"`, `"true\n"`, `"1"`, `"yes"`. Reading the environment is
/// the caller's business; this is a pure function of the value.
///
/// ```
/// use write_policy::writes_enabled;
/// assert!(writes_enabled(Some("true")));
/// assert!(!writes_enabled(Some("True")));
/// assert!(!writes_enabled(None));
/// ```
pub fn writes_enabled(value: Option<&str>) -> bool {
    value == Some("true")
}
