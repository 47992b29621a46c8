//! This process's stdin and stdout, each served the way its kind of file allows.
//!
//! Each end is looked at (`fstat` of a duplicate) before either is changed, so no end is ever
//! left half set up: a pipe or a socket is made non-blocking and put on the event loop; anything
//! else is left as it is and read or written through tokio's stdin or stdout. An end that is a
//! pipe or a socket but cannot be put on the event loop is an error, never a fall-back to a
//! blocking reader of a file that is non-blocking now (which would read "would block" as a
//! failure and end the session at the client's first pause).
//!
//! Non-blocking is a flag of the open file, which the process that started this one shares:
//! MCP clients start a server on pipes or socketpairs of its own, so nobody else reads them.

use std::io;

use tokio::io::{AsyncRead, AsyncWrite};

use crate::JsonLines;

/// What [`stdio`] reads stdin through.
pub type Input = Box<dyn AsyncRead + Send + Unpin>;
/// What [`stdio`] writes stdout through.
pub type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// [`JsonLines`] on this process's stdin and stdout (see the module docs for how each end is
/// served). Logs at debug level how (`stdin="pipe"`, `"socket"` or `"blocking"`, the same for
/// stdout).
///
/// # Errors
///
/// When an end is a pipe or a socket that cannot be put on the event loop (no tokio runtime
/// with IO enabled, or a pipe opened the wrong way round).
pub fn stdio() -> io::Result<JsonLines<Input, Output>> {
    let (input, read_on) = input().map_err(|e| context("stdin", e))?;
    let (output, write_on) = output().map_err(|e| context("stdout", e))?;
    tracing::debug!(stdin = read_on, stdout = write_on, "serving MCP on stdio");
    Ok(JsonLines::new(input, output))
}

fn context(end: &str, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{end}: {error}"))
}

/// Stdin, and how it is read.
fn input() -> io::Result<(Input, &'static str)> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let stdin = io::stdin();
        match unix::kind(stdin.as_fd())? {
            unix::Kind::Pipe => {
                let file = std::fs::File::from(stdin.as_fd().try_clone_to_owned()?);
                let pipe = tokio::net::unix::pipe::Receiver::from_file(file)?;
                return Ok((Box::new(pipe), "pipe"));
            }
            unix::Kind::Socket => return Ok((Box::new(unix::socket(stdin.as_fd())?), "socket")),
            unix::Kind::Other => {}
        }
    }
    Ok((Box::new(tokio::io::stdin()), "blocking"))
}

/// Stdout, and how it is written.
fn output() -> io::Result<(Output, &'static str)> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let stdout = io::stdout();
        match unix::kind(stdout.as_fd())? {
            unix::Kind::Pipe => {
                let file = std::fs::File::from(stdout.as_fd().try_clone_to_owned()?);
                let pipe = tokio::net::unix::pipe::Sender::from_file(file)?;
                return Ok((Box::new(pipe), "pipe"));
            }
            unix::Kind::Socket => return Ok((Box::new(unix::socket(stdout.as_fd())?), "socket")),
            unix::Kind::Other => {}
        }
    }
    Ok((Box::new(tokio::io::stdout()), "blocking"))
}

#[cfg(unix)]
mod unix {
    use std::os::{fd::BorrowedFd, unix::fs::FileTypeExt};

    /// What kind of file an end of stdio is.
    pub(super) enum Kind {
        Pipe,
        Socket,
        Other,
    }

    /// The kind of `fd`'s file (`fstat` of a duplicate; nothing is changed).
    pub(super) fn kind(fd: BorrowedFd<'_>) -> std::io::Result<Kind> {
        let file_type = std::fs::File::from(fd.try_clone_to_owned()?)
            .metadata()?
            .file_type();
        Ok(if file_type.is_fifo() {
            Kind::Pipe
        } else if file_type.is_socket() {
            Kind::Socket
        } else {
            Kind::Other
        })
    }

    /// A duplicate of the socket `fd`, non-blocking, on the event loop.
    pub(super) fn socket(fd: BorrowedFd<'_>) -> std::io::Result<tokio::net::UnixStream> {
        let socket = std::os::unix::net::UnixStream::from(fd.try_clone_to_owned()?);
        socket.set_nonblocking(true)?;
        tokio::net::UnixStream::from_std(socket)
    }
}
