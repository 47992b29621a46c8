//! The published-surface contract: pinned counts and a size limit for a server's tool list.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::surface::SurfaceReport;

/// A published-surface contract: the JSON file a team commits to pin its server's tool surface.
///
/// ```json
/// {"toolCount": 5, "destructiveToolCount": 2, "openWorldToolCount": 0, "maxToolsListBytes": 4096}
/// ```
///
/// Unknown fields are rejected, so a misspelt or newer field is an error rather than silently
/// unchecked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SurfaceContract {
    /// Exact number of tools.
    pub tool_count: usize,
    /// Exact number of destructive writes.
    pub destructive_tool_count: usize,
    /// Exact number of open-world tools.
    pub open_world_tool_count: usize,
    /// Maximum size in bytes of the serialised tool list.
    pub max_tools_list_bytes: usize,
}

/// One way a surface differs from its contract. `Display` names the contract field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Drift {
    /// `toolCount` differs.
    ToolCount {
        /// Pinned value.
        expected: usize,
        /// Current value.
        actual: usize,
    },
    /// `destructiveToolCount` differs.
    DestructiveToolCount {
        /// Pinned value.
        expected: usize,
        /// Current value.
        actual: usize,
    },
    /// `openWorldToolCount` differs.
    OpenWorldToolCount {
        /// Pinned value.
        expected: usize,
        /// Current value.
        actual: usize,
    },
    /// The serialised tool list is larger than `maxToolsListBytes`.
    ToolsListTooLarge {
        /// Pinned maximum.
        max: usize,
        /// Current size.
        actual: usize,
    },
}

impl Drift {
    /// The name of the contract field that drifted, as written in the JSON file.
    pub fn field(&self) -> &'static str {
        match self {
            Self::ToolCount { .. } => "toolCount",
            Self::DestructiveToolCount { .. } => "destructiveToolCount",
            Self::OpenWorldToolCount { .. } => "openWorldToolCount",
            Self::ToolsListTooLarge { .. } => "maxToolsListBytes",
        }
    }
}

impl std::fmt::Display for Drift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let field = self.field();
        match *self {
            Self::ToolCount { expected, actual }
            | Self::DestructiveToolCount { expected, actual }
            | Self::OpenWorldToolCount { expected, actual } => {
                write!(
                    f,
                    "{field} drifted: contract pins {expected}, surface has {actual}"
                )
            }
            Self::ToolsListTooLarge { max, actual } => write!(
                f,
                "{field} exceeded: the tool list is {actual} bytes, the contract allows {max}"
            ),
        }
    }
}

impl SurfaceContract {
    /// Pins the current surface: its counts, and its current tool-list size as the maximum.
    pub fn from_surface(report: &SurfaceReport, tools_list_bytes: usize) -> Self {
        Self {
            tool_count: report.total,
            destructive_tool_count: report.destructive,
            open_world_tool_count: report.open_world,
            max_tools_list_bytes: tools_list_bytes,
        }
    }

    /// Every way the surface differs from this contract, in field order; empty when none.
    ///
    /// Counts must match exactly; the tool list may be smaller than the maximum, not larger.
    ///
    /// ```
    /// use mcp_write_guard_policy::{SurfaceContract, SurfaceReport, ToolFacts};
    /// let schema = serde_json::Map::new();
    /// let report = SurfaceReport::from_tools([ToolFacts::new("delete_all", None, &schema)]);
    /// let contract = SurfaceContract::from_surface(&report, 200);
    /// assert!(contract.check(&report, 200).is_empty());
    /// let drifts = contract.check(&SurfaceReport::from_tools([]), 300);
    /// let fields: Vec<_> = drifts.iter().map(|d| d.field()).collect();
    /// assert_eq!(fields, ["toolCount", "destructiveToolCount", "openWorldToolCount", "maxToolsListBytes"]);
    /// ```
    pub fn check(&self, report: &SurfaceReport, tools_list_bytes: usize) -> Vec<Drift> {
        let mut drifts = Vec::new();
        if report.total != self.tool_count {
            drifts.push(Drift::ToolCount {
                expected: self.tool_count,
                actual: report.total,
            });
        }
        if report.destructive != self.destructive_tool_count {
            drifts.push(Drift::DestructiveToolCount {
                expected: self.destructive_tool_count,
                actual: report.destructive,
            });
        }
        if report.open_world != self.open_world_tool_count {
            drifts.push(Drift::OpenWorldToolCount {
                expected: self.open_world_tool_count,
                actual: report.open_world,
            });
        }
        if tools_list_bytes > self.max_tools_list_bytes {
            drifts.push(Drift::ToolsListTooLarge {
                max: self.max_tools_list_bytes,
                actual: tools_list_bytes,
            });
        }
        drifts
    }

    /// Parses a contract file.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidContract`] when the text is not JSON, a field is missing, has the wrong
    /// type or is unknown.
    pub fn from_json(s: &str) -> Result<Self, Error> {
        serde_json::from_str(s).map_err(Error::InvalidContract)
    }

    /// The contract as pretty-printed JSON (no trailing newline), readable by [`Self::from_json`].
    pub fn to_json_pretty(&self) -> String {
        let value = serde_json::json!({
            "toolCount": self.tool_count,
            "destructiveToolCount": self.destructive_tool_count,
            "openWorldToolCount": self.open_world_tool_count,
            "maxToolsListBytes": self.max_tools_list_bytes,
        });
        format!("{value:#}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn report(total: usize, destructive: usize, open_world: usize) -> SurfaceReport {
        SurfaceReport {
            total,
            destructive,
            open_world,
            ..SurfaceReport::default()
        }
    }

    const PINNED: SurfaceContract = SurfaceContract {
        tool_count: 7,
        destructive_tool_count: 3,
        open_world_tool_count: 2,
        max_tools_list_bytes: 5000,
    };

    #[test]
    fn no_drift_when_equal_or_smaller() {
        let r = report(7, 3, 2);
        assert_eq!(PINNED.check(&r, 5000), []);
        assert_eq!(PINNED.check(&r, 0), []);
        assert_eq!(SurfaceContract::from_surface(&r, 5000), PINNED);
    }

    #[test]
    fn each_field_drifting_alone_is_named() {
        let cases: [(SurfaceReport, usize, Drift, &str); 7] = [
            (
                report(8, 3, 2),
                5000,
                Drift::ToolCount {
                    expected: 7,
                    actual: 8,
                },
                "toolCount",
            ),
            (
                report(6, 3, 2),
                5000,
                Drift::ToolCount {
                    expected: 7,
                    actual: 6,
                },
                "toolCount",
            ),
            (
                report(7, 4, 2),
                5000,
                Drift::DestructiveToolCount {
                    expected: 3,
                    actual: 4,
                },
                "destructiveToolCount",
            ),
            (
                report(7, 2, 2),
                5000,
                Drift::DestructiveToolCount {
                    expected: 3,
                    actual: 2,
                },
                "destructiveToolCount",
            ),
            (
                report(7, 3, 3),
                5000,
                Drift::OpenWorldToolCount {
                    expected: 2,
                    actual: 3,
                },
                "openWorldToolCount",
            ),
            (
                report(7, 3, 0),
                5000,
                Drift::OpenWorldToolCount {
                    expected: 2,
                    actual: 0,
                },
                "openWorldToolCount",
            ),
            (
                report(7, 3, 2),
                5001,
                Drift::ToolsListTooLarge {
                    max: 5000,
                    actual: 5001,
                },
                "maxToolsListBytes",
            ),
        ];
        for (r, bytes, drift, field) in cases {
            let drifts = PINNED.check(&r, bytes);
            assert_eq!(drifts, [drift]);
            assert_eq!(drifts[0].field(), field);
            assert!(drifts[0].to_string().starts_with(field), "{}", drifts[0]);
        }
    }

    #[test]
    fn every_drift_is_reported_together() {
        let drifts = PINNED.check(&report(1, 1, 1), 9999);
        let fields: Vec<_> = drifts.iter().map(Drift::field).collect();
        assert_eq!(
            fields,
            [
                "toolCount",
                "destructiveToolCount",
                "openWorldToolCount",
                "maxToolsListBytes"
            ]
        );
    }

    #[test]
    fn display_says_what_changed() {
        assert_eq!(
            Drift::DestructiveToolCount {
                expected: 3,
                actual: 4
            }
            .to_string(),
            "destructiveToolCount drifted: contract pins 3, surface has 4"
        );
        assert_eq!(
            Drift::ToolsListTooLarge {
                max: 10,
                actual: 11
            }
            .to_string(),
            "maxToolsListBytes exceeded: the tool list is 11 bytes, the contract allows 10"
        );
    }

    #[test]
    fn json_round_trip_and_shape() {
        let text = PINNED.to_json_pretty();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            serde_json::json!({"toolCount": 7, "destructiveToolCount": 3,
                               "openWorldToolCount": 2, "maxToolsListBytes": 5000})
        );
        assert!(text.contains('\n'));
        assert_eq!(SurfaceContract::from_json(&text).unwrap(), PINNED);
    }

    #[test]
    fn malformed_contracts_are_errors() {
        for bad in [
            "",
            "[]",
            "{}",
            r#"{"toolCount": 7, "destructiveToolCount": 3, "openWorldToolCount": 2}"#,
            r#"{"toolCount": -1, "destructiveToolCount": 3, "openWorldToolCount": 2, "maxToolsListBytes": 1}"#,
            r#"{"toolCount": "7", "destructiveToolCount": 3, "openWorldToolCount": 2, "maxToolsListBytes": 1}"#,
            r#"{"toolCount": 7.5, "destructiveToolCount": 3, "openWorldToolCount": 2, "maxToolsListBytes": 1}"#,
            r#"{"toolCount": 7, "destructiveToolCount": 3, "openWorldToolCount": 2, "maxToolsListBytes": 1, "maxToolCount": 9}"#,
            r#"{"tool_count": 7, "destructiveToolCount": 3, "openWorldToolCount": 2, "maxToolsListBytes": 1}"#,
        ] {
            let err = SurfaceContract::from_json(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidContract(_)), "{bad}");
            assert!(err.to_string().starts_with("invalid surface contract: "));
        }
    }

    proptest! {
        #[test]
        fn any_single_field_drift_is_reported_alone_by_name(
            tool_count in 0usize..10_000,
            destructive_tool_count in 0usize..10_000,
            open_world_tool_count in 0usize..10_000,
            max_tools_list_bytes in 0usize..1_000_000,
            field in 0usize..4,
            delta in 1usize..1000,
            down in any::<bool>(),
        ) {
            let contract = SurfaceContract { tool_count, destructive_tool_count, open_world_tool_count, max_tools_list_bytes };
            let mut counts = [tool_count, destructive_tool_count, open_world_tool_count];
            let mut bytes = max_tools_list_bytes;
            prop_assert!(contract.check(&report(counts[0], counts[1], counts[2]), bytes).is_empty());
            let expected = match field {
                3 => {
                    bytes += delta;
                    Drift::ToolsListTooLarge { max: max_tools_list_bytes, actual: bytes }
                }
                i => {
                    let before = counts[i];
                    counts[i] = if down && before >= delta { before - delta } else { before + delta };
                    let actual = counts[i];
                    match i {
                        0 => Drift::ToolCount { expected: before, actual },
                        1 => Drift::DestructiveToolCount { expected: before, actual },
                        _ => Drift::OpenWorldToolCount { expected: before, actual },
                    }
                }
            };
            let names = ["toolCount", "destructiveToolCount", "openWorldToolCount", "maxToolsListBytes"];
            let drifts = contract.check(&report(counts[0], counts[1], counts[2]), bytes);
            prop_assert_eq!(&drifts, &vec![expected]);
            prop_assert_eq!(drifts[0].field(), names[field]);
            prop_assert!(drifts[0].to_string().contains(names[field]));
        }

        #[test]
        fn json_round_trip(
            tool_count in any::<usize>(),
            destructive_tool_count in any::<usize>(),
            open_world_tool_count in any::<usize>(),
            max_tools_list_bytes in any::<usize>(),
        ) {
            let c = SurfaceContract { tool_count, destructive_tool_count, open_world_tool_count, max_tools_list_bytes };
            prop_assert_eq!(SurfaceContract::from_json(&c.to_json_pretty()).unwrap(), c);
        }
    }
}
