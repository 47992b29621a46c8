//! What the steps that ask a person borrow of the guard ([`Channels`]): the ways to reach the
//! person (the client's form, the approval page, a notifier), the wording of the questions,
//! this process's count of the questions in front of a client and of the calls waiting for
//! them, the [`ToolCalls`] (a question about `prepare_admin_action` reads its target tool) and
//! the [`Books`]. Ask, settle, join and the 2026-07-28 retry are its methods.

use std::{collections::HashMap, sync::Arc, time::Duration};

use super::{PerQuestion, books::Books, tool_calls::ToolCalls};
use crate::prompt::PromptFn;

/// What the steps that ask a person borrow of the guard.
pub(crate) struct Channels<'g, S> {
    pub(crate) tool_calls: ToolCalls<'g, S>,
    /// The tools' own wording of their questions.
    pub(crate) prompts: &'g HashMap<String, PromptFn>,
    /// The name the person reads in a notice.
    #[cfg_attr(not(feature = "approval-page"), allow(dead_code))]
    pub(crate) server_name: &'g str,
    /// The questions a client of this process has in front of it now.
    pub(crate) asked_now: &'g Arc<PerQuestion>,
    /// The calls waiting for each question on this process.
    pub(crate) waiting_now: &'g Arc<PerQuestion>,
    /// How often a waiting call sends `notifications/progress`.
    pub(crate) progress_every: Duration,
    /// The approval page, when one is configured.
    #[cfg(feature = "approval-page")]
    pub(crate) pages: Option<&'g Arc<crate::page::Pages>>,
    /// Reaches a person when the client cannot ask (with the approval page).
    #[cfg(feature = "approval-page")]
    pub(crate) notifier: Option<&'g Arc<dyn crate::notify::Notifier>>,
    /// The questions a notice was delivered for on this process.
    #[cfg(feature = "approval-page")]
    pub(crate) notices_sent: &'g super::NoticesSent,
}

impl<'g, S> Channels<'g, S> {
    /// The books, the ones the tool calls keep.
    pub(crate) fn books(&self) -> Books<'g> {
        self.tool_calls.books
    }
}
