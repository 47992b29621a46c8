//! [`Binding`]: what every record in the store is bound to. Below the store's records and the
//! handle that reaches them.

use crate::args::CapturedArgs;
use crate::ids::{Principal, ToolName};

/// Who calls which tool with which exact arguments: what every token, approval, round trip and
/// question is bound to, and what each take checks the record against.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    /// The caller.
    pub principal: &'a Principal,
    /// The tool called.
    pub tool: &'a ToolName,
    /// The call's arguments, as captured.
    pub args: &'a CapturedArgs,
}

impl<'a> Binding<'a> {
    /// `principal` calling `tool` with `args`.
    pub fn new(principal: &'a Principal, tool: &'a ToolName, args: &'a CapturedArgs) -> Self {
        Self {
            principal,
            tool,
            args,
        }
    }
}
