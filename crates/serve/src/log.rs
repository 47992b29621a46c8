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
    use tracing_subscriber::field::MakeExt as _;
    tracing_subscriber::fmt::format::debug_fn(|writer, field, value| {
        let shown = format!("{value:?}");
        let shown: String = shown
            .chars()
            .flat_map(|c| {
                let escaped: Vec<char> = if c.is_control() {
                    c.escape_default().collect()
                } else {
                    vec![c]
                };
                escaped
            })
            .collect();
        if field.name() == "message" {
            write!(writer, "{shown}")
        } else {
            write!(writer, "{}={shown}", field.name())
        }
    })
    .delimited(" ")
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
