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
/// use mcp_write_guard_policy::writes_enabled;
/// assert!(writes_enabled(Some("true")));
/// assert!(!writes_enabled(Some("True")));
/// assert!(!writes_enabled(None));
/// ```
pub fn writes_enabled(value: Option<&str>) -> bool {
    value == Some("true")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn only_exact_true_enables_writes() {
        assert!(writes_enabled(Some("true")));
        for off in [
            None,
            Some(""),
            Some("TRUE"),
            Some("True"),
            Some("tRue"),
            Some(" true"),
            Some("true "),
            Some("true\n"),
            Some("\ttrue"),
            Some("true\0"),
            Some("\u{feff}true"),
            Some("\"true\""),
            Some("1"),
            Some("yes"),
            Some("on"),
            Some("enabled"),
            Some("false"),
            Some("tru"),
            Some("truee"),
        ] {
            assert!(!writes_enabled(off), "{off:?}");
        }
        assert_eq!(DEFAULT_WRITES_ENV, "MCP_WRITES_ENABLED");
    }

    /// Strings around "true": every casing, surrounding whitespace, common truthy spellings.
    fn near_misses() -> impl Strategy<Value = String> {
        prop_oneof![
            "[tT][rR][uU][eE]",
            "[ \t\r\n]{0,2}true[ \t\r\n]{0,2}",
            "true.{0,2}",
            ".{0,2}true",
            "tru|rue|ture|1|0|yes|on|y|enabled|false|",
        ]
    }

    proptest! {
        #[test]
        fn writes_gate_is_on_for_exactly_one_value(
            s in prop_oneof![any::<String>(), near_misses()]
        ) {
            prop_assert_eq!(writes_enabled(Some(&s)), s == "true");
        }
    }
}
