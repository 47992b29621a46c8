//! A throwaway `redis-server` for tests (feature `test-util`).
//!
//! [`RedisServer::start`] runs Debian's (or any) `redis-server` on a free loopback port, with
//! nothing saved to disk, and stops it when dropped; [`RedisServer::stop`] and
//! [`RedisServer::restart`] let a test take Redis away and bring it back on the same port.
//! [`redis_url`] is what most tests want: the Redis named by `MCP_WRITE_GUARD_REDIS_URL`, or
//! else one of their own.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable naming a running Redis for the tests (`redis://127.0.0.1:PORT`).
pub const REDIS_URL_VAR: &str = "MCP_WRITE_GUARD_REDIS_URL";

/// The environment variable naming the `redis-server` binary (default: `redis-server` on `PATH`).
pub const REDIS_SERVER_VAR: &str = "MCP_WRITE_GUARD_REDIS_SERVER";

/// What to do when no Redis can be found.
pub const HOW_TO_GET_REDIS: &str = "these tests need Redis: install redis-server (Debian: \
    `apt-get install redis-server`) so that they start their own, or start one \
    (`redis-server --port 6390 --save '' --appendonly no`) and set \
    MCP_WRITE_GUARD_REDIS_URL=redis://127.0.0.1:6390";

/// A `redis-server` process this test started, on a loopback port of its own.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    child: Option<Child>,
}

/// Where Redis is for a test: the shared one named by [`REDIS_URL_VAR`], or a server of its own
/// (kept alive by the returned guard).
#[derive(Debug)]
pub struct TestRedis {
    url: String,
    _own: Option<RedisServer>,
}

impl TestRedis {
    /// The Redis URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// The Redis a test should use: [`REDIS_URL_VAR`] if set, otherwise a new [`RedisServer`].
///
/// # Panics
/// When neither is available, with [`HOW_TO_GET_REDIS`]: a test that needs Redis fails rather
/// than skip.
pub fn redis_url() -> TestRedis {
    if let Ok(url) = std::env::var(REDIS_URL_VAR)
        && !url.is_empty()
    {
        return TestRedis { url, _own: None };
    }
    let server = RedisServer::start();
    TestRedis {
        url: server.url(),
        _own: Some(server),
    }
}

impl RedisServer {
    /// Starts `redis-server` on a free loopback port and waits until it answers.
    ///
    /// # Panics
    /// When the binary cannot be run or does not answer within ten seconds (with
    /// [`HOW_TO_GET_REDIS`]).
    pub fn start() -> Self {
        let port = free_port();
        let mut server = Self { port, child: None };
        server.restart();
        server
    }

    /// The server's URL, `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server (SIGKILL: gone at once, as a crash would be) and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port (empty: nothing is saved) and waits until it
    /// answers. Does nothing if it is running.
    ///
    /// # Panics
    /// As [`RedisServer::start`].
    #[allow(clippy::panic)]
    pub fn restart(&mut self) {
        if self.child.is_some() {
            return;
        }
        let binary = std::env::var_os(REDIS_SERVER_VAR)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("redis-server"));
        let child = Command::new(&binary)
            .args(["--bind", "127.0.0.1", "--port"])
            .arg(self.port.to_string())
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(err) => panic!("cannot run {}: {err}; {HOW_TO_GET_REDIS}", binary.display()),
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.answers() {
            if Instant::now() > deadline {
                self.stop();
                panic!(
                    "{} on port {} did not answer within 10 s; {HOW_TO_GET_REDIS}",
                    binary.display(),
                    self.port
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the server answers `PING` (a plain RESP exchange, no client needed).
    fn answers(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut reply = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A loopback port nothing listens on at this instant.
#[allow(clippy::panic)]
fn free_port() -> u16 {
    match TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(addr) => addr.port(),
        Err(err) => panic!("no free loopback port: {err}"),
    }
}

/// A store on `url` under `prefix` with at most `cap` live entries a principal, connected now.
///
/// # Panics
/// When it cannot connect.
#[cfg(test)]
pub(crate) async fn connect_store(url: &str, prefix: &str, cap: usize) -> crate::RedisStore {
    match crate::RedisStore::builder(url)
        .prefix(prefix)
        .per_principal_cap(cap)
        .connect()
        .await
    {
        Ok(store) => store,
        Err(err) => panic!("{url}: {err}"),
    }
}

/// Asserts that a take and a read of `key` at `now` both fail as
/// [`Unavailable`](mcp_write_guard_core::StoreError::Unavailable) (Redis is gone).
///
/// # Panics
/// When either does not.
#[cfg(test)]
pub(crate) async fn assert_take_and_get_unavailable(
    store: &crate::RedisStore,
    key: &mcp_write_guard_core::store::StoreKey,
    now: time::OffsetDateTime,
) {
    use mcp_write_guard_core::{Store as _, StoreError};
    let taken = store.take(key, now).await;
    assert!(
        matches!(taken, Err(StoreError::Unavailable(_))),
        "{taken:?}"
    );
    let read = store.get(key, now).await;
    assert!(matches!(read, Err(StoreError::Unavailable(_))), "{read:?}");
}
