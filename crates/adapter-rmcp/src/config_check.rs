//! Builder mistakes, found when the guard first reads the inner server's whole tool list.
//!
//! A name given to [`crate::WriteGuardBuilder::preview`], [`crate::WriteGuardBuilder::prompt`] or
//! [`crate::WriteGuardBuilder::trust_read`] that matches no tool, or a tool of the wrong kind,
//! changes nothing at run time, and silently: a misspelt `.preview("add_notes")` leaves the real
//! `add_note` without compare-and-apply ([`crate::WriteStep::Direct`]). The guard logs each
//! mistake as a warning once and keeps them for [`crate::WriteGuard::config_mistakes`], so a
//! team's test can assert there are none.

use std::fmt;

use mcp_write_guard_policy::ToolClass;

/// One builder setting that matches no tool, or a tool it cannot apply to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ConfigMistake {
    /// `.preview(name)` for a tool the inner server does not have.
    PreviewForUnknownTool(String),
    /// `.preview(name)` for a read: reads are never previewed.
    PreviewForRead(String),
    /// `.prompt(name, ..)` for a tool the inner server does not have.
    PromptForUnknownTool(String),
    /// `.prompt(name, ..)` for a read: nobody is asked about reads.
    PromptForRead(String),
    /// `.trust_read(name)` for a tool the inner server does not have.
    TrustedReadUnknown(String),
    /// `.trust_read(name)` for a write: write results are always wrapped.
    TrustedReadIsWrite(String),
}

impl fmt::Display for ConfigMistake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PreviewForUnknownTool(name) => write!(
                f,
                "preview({name:?}) names no tool of the inner server: no tool gets a preview or \
                 a compare-and-apply from it"
            ),
            Self::PreviewForRead(name) => write!(
                f,
                "preview({name:?}) names a read tool: reads are never previewed"
            ),
            Self::PromptForUnknownTool(name) => write!(
                f,
                "prompt({name:?}, ..) names no tool of the inner server: its wording is never used"
            ),
            Self::PromptForRead(name) => write!(
                f,
                "prompt({name:?}, ..) names a read tool: nobody is asked about reads"
            ),
            Self::TrustedReadUnknown(name) => {
                write!(f, "trust_read({name:?}) names no tool of the inner server")
            }
            Self::TrustedReadIsWrite(name) => write!(
                f,
                "trust_read({name:?}) names a write tool: write results are always wrapped"
            ),
        }
    }
}

/// The mistakes in a configuration, given every tool of the inner server and its class; sorted.
pub(crate) fn mistakes<'a>(
    tools: &[(String, ToolClass)],
    previews: impl IntoIterator<Item = &'a str>,
    prompts: impl IntoIterator<Item = &'a str>,
    trusted_reads: impl IntoIterator<Item = &'a str>,
) -> Vec<ConfigMistake> {
    let class = |name: &str| {
        tools
            .iter()
            .find(|(tool, _)| tool == name)
            .map(|(_, class)| *class)
    };
    let mut found = Vec::new();
    for name in previews {
        match class(name) {
            None => found.push(ConfigMistake::PreviewForUnknownTool(name.to_owned())),
            Some(c) if !c.is_write() => found.push(ConfigMistake::PreviewForRead(name.to_owned())),
            Some(_) => {}
        }
    }
    for name in prompts {
        match class(name) {
            None => found.push(ConfigMistake::PromptForUnknownTool(name.to_owned())),
            Some(c) if !c.is_write() => found.push(ConfigMistake::PromptForRead(name.to_owned())),
            Some(_) => {}
        }
    }
    for name in trusted_reads {
        match class(name) {
            None => found.push(ConfigMistake::TrustedReadUnknown(name.to_owned())),
            Some(c) if c.is_write() => {
                found.push(ConfigMistake::TrustedReadIsWrite(name.to_owned()));
            }
            Some(_) => {}
        }
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_mistake_is_found_and_nothing_else() {
        let tools = [
            ("add_note".to_owned(), ToolClass::AdditiveWrite),
            ("delete_note".to_owned(), ToolClass::DestructiveWrite),
            ("list_notes".to_owned(), ToolClass::Read),
        ];
        let found = mistakes(
            &tools,
            ["add_notes", "list_notes", "add_note"],
            ["delete_note", "nope", "list_notes"],
            ["list_notes", "add_note", "gone"],
        );
        assert_eq!(
            found,
            [
                ConfigMistake::PreviewForUnknownTool("add_notes".into()),
                ConfigMistake::PreviewForRead("list_notes".into()),
                ConfigMistake::PromptForUnknownTool("nope".into()),
                ConfigMistake::PromptForRead("list_notes".into()),
                ConfigMistake::TrustedReadUnknown("gone".into()),
                ConfigMistake::TrustedReadIsWrite("add_note".into()),
            ]
        );
        let right = mistakes(&tools, ["add_note"], ["delete_note"], ["list_notes"]);
        assert!(right.is_empty(), "{right:?}");
        for mistake in found {
            assert!(!mistake.to_string().is_empty());
        }
    }
}
