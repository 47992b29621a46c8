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
    /// use write_policy::{SurfaceContract, SurfaceReport, ToolFacts};
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
