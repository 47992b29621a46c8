//! [`init_logging`]: the log on stderr, one line per event, in a form no client text can imitate;
//! [`run_logged`]: a serving binary's `main` around it.

use std::{fmt, process::ExitCode};

use tracing_subscriber::{EnvFilter, util::SubscriberInitExt as _};

/// A serving binary's `main` once its flags are parsed: [`init_logging`], then `serve`; an
/// error `serve` returns is logged and the exit code is failure. When the log cannot be set
/// up, says so on stderr after `binary` (the binary's name) and does not serve.
pub fn run_logged<E: fmt::Display>(
    binary: &str,
    serve: impl FnOnce() -> Result<(), E>,
) -> ExitCode {
    if let Err(err) = init_logging() {
        eprintln!("{binary}: {err}");
        return ExitCode::FAILURE;
    }
    match serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err}");
            ExitCode::FAILURE
        }
    }
}

/// Sends every log event to stderr as one line, `TIME LEVEL TARGET: MESSAGE FIELDS`, without
/// colours, at the level `RUST_LOG` names (default `info`). Call it once, first thing in
/// `main`: over stdio, stdout carries protocol messages only.
///
/// Each field is written in its escaped `Debug` form (strings quoted) and any control
/// character left in a value is written as an escape (`\n`, `\u{1b}`), so no text a client
/// sends can start a line of its own; and the target is always the third token, so a reader
/// tells an audit record (target `mcp_write_guard_rmcp::audit`) from any other line by its
/// position (README, "Reading the audit records in the log").
///
/// # Errors
///
/// When a global subscriber was set already.
pub fn init_logging() -> Result<(), tracing_subscriber::util::TryInitError> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .event_format(OneLine)
        .fmt_fields(one_line_fields())
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .finish()
        .try_init()
}

/// Fields written so that every event is one line whatever it carries: each value as its `Debug`
/// form (strings quoted and escaped), and any control character left in it (from a value
/// logged with `Display`, by the server or a library, such as a request id a client chose)
/// written as an escape (`\n`, `\u{1b}`). So no text a client sends can start a line of its
/// own, and a line that passes for an audit record can only come from the audit sink (README,
/// "Reading the audit records in the log").
fn one_line_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + 'static {
    use std::fmt::Write as _;
    use tracing_subscriber::field::MakeExt as _;
    tracing_subscriber::fmt::format::debug_fn(|writer, field, value| {
        if field.name() != "message" {
            write!(writer, "{}=", field.name())?;
        }
        write!(NoControl(writer), "{value:?}")
    })
    .delimited(" ")
}

/// Writes what it is given to the inner writer, each control character as its escape (`\n`,
/// `\u{1b}`, as [`char::escape_default`] writes it) and everything else as it is: no copy of the
/// value in between.
struct NoControl<'a, W>(&'a mut W);

impl<W: fmt::Write> fmt::Write for NoControl<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut plain = 0;
        for (at, c) in s.char_indices().filter(|(_, c)| c.is_control()) {
            self.0.write_str(&s[plain..at])?;
            write!(self.0, "{}", c.escape_default())?;
            plain = at + c.len_utf8();
        }
        self.0.write_str(&s[plain..])
    }
}

/// Each event as `TIME LEVEL TARGET: MESSAGE FIELDS`, one line, without the span list (whose
/// fields would come before the target): the target is always the third token, so a reader
/// tells an audit record (`mcp_write_guard_rmcp::audit:`) from any other line by position.
struct OneLine;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for OneLine
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'w> tracing_subscriber::fmt::FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        use tracing_subscriber::fmt::time::FormatTime as _;
        tracing_subscriber::fmt::time::SystemTime.format_time(&mut writer)?;
        let meta = event.metadata();
        write!(writer, " {:>5} {}: ", meta.level(), meta.target())?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use proptest::prelude::*;

    use super::NoControl;

    fn no_control(text: &str) -> String {
        let mut out = String::new();
        write!(NoControl(&mut out), "{text}").unwrap();
        out
    }

    #[test]
    fn control_characters_are_written_as_escapes() {
        assert_eq!(
            no_control("a\nb\u{1b}[2K\tc\r\u{7f}\u{85}é"),
            r"a\nb\u{1b}[2K\tc\r\u{7f}\u{85}é"
        );
        assert_eq!(no_control(""), "");
        assert_eq!(no_control("\n"), r"\n");
    }

    proptest! {
        /// Whatever a value holds, it is written on one line, and exactly as escaping each
        /// control character one by one writes it.
        #[test]
        fn any_text_is_written_on_one_line_with_its_control_characters_escaped(
            text in any::<String>(),
            cut in any::<prop::sample::Index>(),
        ) {
            let expected: String = text
                .chars()
                .flat_map(|c| {
                    if c.is_control() { c.escape_default().collect() } else { vec![c] }
                })
                .collect();
            // Written in two pieces, as a `Debug` implementation writes a value in several.
            let boundaries: Vec<usize> =
                text.char_indices().map(|(at, _)| at).chain([text.len()]).collect();
            let (head, tail) = text.split_at(boundaries[cut.index(boundaries.len())]);
            let mut out = String::new();
            let mut writer = NoControl(&mut out);
            writer.write_str(head).unwrap();
            writer.write_str(tail).unwrap();
            prop_assert_eq!(&out, &expected);
            prop_assert!(!out.chars().any(char::is_control));
        }
    }
}
