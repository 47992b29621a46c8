//! This process's stdin and stdout, each served the way its kind of file allows.
//!
//! Both ends are looked at first (`fstat` and the open file's flags, through duplicates), and
//! nothing is changed unless both can be served: a pipe open the wrong way round is an error
//! before either end is touched. Then a pipe or a socket is made non-blocking and put on the
//! event loop; anything else (a terminal, a file, `/dev/null`) is left as it is and read or
//! written through tokio's stdin or stdout, on a blocking thread.
//!
//! Non-blocking is a flag of the open file, which the process that started this one shares (a
//! wrapper such as `sh -c`, `npx` or `docker run -i` may go on using the same pipe after this
//! server ends). Each end changed here puts its original flags back when the transport is
//! dropped, or at once if the other end could not be set up.

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
/// When an end is a pipe open the wrong way round (stdin not readable, stdout not writable), or
/// a pipe or socket that cannot be put on the event loop (no tokio runtime with IO enabled).
/// Neither end is left changed.
pub fn stdio() -> io::Result<JsonLines<Input, Output>> {
    #[cfg(unix)]
    let ((input, read_on), (output, write_on)) = {
        use std::os::fd::AsFd;
        let (stdin, stdout) = (io::stdin(), io::stdout());
        let read = unix::End::look(stdin.as_fd(), unix::Way::Read).map_err(context("stdin"))?;
        let write = unix::End::look(stdout.as_fd(), unix::Way::Write).map_err(context("stdout"))?;
        let input = read.reader().map_err(context("stdin"))?;
        // On failure `input` is dropped here, which puts stdin's flags back.
        let output = write.writer().map_err(context("stdout"))?;
        (input, output)
    };
    #[cfg(not(unix))]
    let ((input, read_on), (output, write_on)): ((Input, &str), (Output, &str)) = (
        (Box::new(tokio::io::stdin()), "blocking"),
        (Box::new(tokio::io::stdout()), "blocking"),
    );
    tracing::debug!(stdin = read_on, stdout = write_on, "serving MCP on stdio");
    Ok(JsonLines::new(input, output))
}

fn context(end: &'static str) -> impl Fn(io::Error) -> io::Error {
    move |error| io::Error::new(error.kind(), format!("{end}: {error}"))
}

#[cfg(unix)]
mod unix {
    use std::{
        io,
        os::{
            fd::{BorrowedFd, OwnedFd},
            unix::fs::FileTypeExt,
        },
        pin::Pin,
        task::{Context, Poll},
    };

    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

    use super::{Input, Output};

    /// Which way an end carries bytes.
    #[derive(Clone, Copy)]
    pub(super) enum Way {
        Read,
        Write,
    }

    /// What kind of file an end of stdio is.
    #[derive(Clone, Copy)]
    enum Kind {
        Pipe,
        Socket,
        Other,
    }

    /// One end, looked at and not yet changed: a duplicate of its descriptor, its kind and its
    /// open file's flags as they were.
    pub(super) struct End {
        fd: OwnedFd,
        kind: Kind,
        flags: OFlag,
    }

    impl End {
        /// Looks at `fd` (`fstat`, `F_GETFL` of a duplicate); changes nothing. A pipe or a
        /// socket that cannot carry bytes `way` is an error.
        pub(super) fn look(fd: BorrowedFd<'_>, way: Way) -> io::Result<Self> {
            let fd = fd.try_clone_to_owned()?;
            let file_type = std::fs::File::from(fd.try_clone()?).metadata()?.file_type();
            let kind = if file_type.is_fifo() {
                Kind::Pipe
            } else if file_type.is_socket() {
                Kind::Socket
            } else {
                Kind::Other
            };
            let flags = OFlag::from_bits_retain(fcntl(&fd, FcntlArg::F_GETFL)?);
            let access = flags & OFlag::O_ACCMODE;
            let usable = match way {
                Way::Read => access == OFlag::O_RDONLY || access == OFlag::O_RDWR,
                Way::Write => access == OFlag::O_WRONLY || access == OFlag::O_RDWR,
            };
            if !matches!(kind, Kind::Other) && !usable {
                let needed = match way {
                    Way::Read => "open for reading",
                    Way::Write => "open for writing",
                };
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("a pipe or socket that is not {needed}"),
                ));
            }
            Ok(Self { fd, kind, flags })
        }

        /// Stdin as it will be read, and how.
        pub(super) fn reader(self) -> io::Result<(Input, &'static str)> {
            let restore = self.restore()?;
            Ok(match self.kind {
                Kind::Pipe => {
                    let pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(self.fd)?;
                    (Box::new(Restoring::new(pipe, restore)), "pipe")
                }
                Kind::Socket => (
                    Box::new(Restoring::new(socket(self.fd)?, restore)),
                    "socket",
                ),
                Kind::Other => (Box::new(tokio::io::stdin()), "blocking"),
            })
        }

        /// Stdout as it will be written, and how.
        pub(super) fn writer(self) -> io::Result<(Output, &'static str)> {
            let restore = self.restore()?;
            Ok(match self.kind {
                Kind::Pipe => {
                    let pipe = tokio::net::unix::pipe::Sender::from_owned_fd(self.fd)?;
                    (Box::new(Restoring::new(pipe, restore)), "pipe")
                }
                Kind::Socket => (
                    Box::new(Restoring::new(socket(self.fd)?, restore)),
                    "socket",
                ),
                Kind::Other => (Box::new(tokio::io::stdout()), "blocking"),
            })
        }

        /// What puts this end's flags back, made before anything changes them.
        fn restore(&self) -> io::Result<Restore> {
            Ok(Restore {
                fd: self.fd.try_clone()?,
                flags: self.flags,
            })
        }
    }

    /// A unix socket on the event loop (non-blocking).
    fn socket(fd: OwnedFd) -> io::Result<tokio::net::UnixStream> {
        let socket = std::os::unix::net::UnixStream::from(fd);
        socket.set_nonblocking(true)?;
        tokio::net::UnixStream::from_std(socket)
    }

    /// Puts an open file's flags back as they were when dropped.
    struct Restore {
        fd: OwnedFd,
        flags: OFlag,
    }

    impl Drop for Restore {
        fn drop(&mut self) {
            // Best effort: the other end of the pipe may be gone already.
            let _ = fcntl(&self.fd, FcntlArg::F_SETFL(self.flags));
        }
    }

    /// `T`, then its end's flags put back (fields drop in order: the stream leaves the event
    /// loop first).
    struct Restoring<T> {
        inner: T,
        _restore: Restore,
    }

    impl<T> Restoring<T> {
        fn new(inner: T, restore: Restore) -> Self {
            Self {
                inner,
                _restore: restore,
            }
        }
    }

    impl<T: AsyncRead + Unpin> AsyncRead for Restoring<T> {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
        }
    }

    impl<T: AsyncWrite + Unpin> AsyncWrite for Restoring<T> {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_flush(cx)
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
        }
    }
}
