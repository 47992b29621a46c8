//! A headless chromium driven over WebDriver, for the pages a person sees (the approval page).
//!
//! [`Browser::start`] spawns `chromedriver` on a free loopback port and opens a session in a
//! headless chromium with a fresh profile. Dropping a [`Browser`] kills chromedriver and the
//! chromium it started, so a test that fails half-way leaves no process behind;
//! [`Browser::close`] ends the session first.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator, elements::Element};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Map, Value, json};
use tempfile::TempDir;
use tokio::process::{Child, Command};

use crate::Failure;

/// How long chromedriver may take to answer `GET /status` after it is spawned.
const DRIVER_START: Duration = Duration::from_secs(10);
/// How long a click may take to load the next page.
const PAGE_LOAD: Duration = Duration::from_secs(10);
/// How often the waits above look again.
const POLL: Duration = Duration::from_millis(50);

const INSTALL: &str = "install Debian's chromium and chromium-driver (.ci/run installs them)";

/// A headless chromium session behind a chromedriver this value owns.
#[derive(Debug)]
pub struct Browser {
    // Dropped in this order: the session, then chromedriver and chromium (killed), then the
    // profile they wrote to.
    client: Client,
    driver: Driver,
    _profile: TempDir,
}

/// chromedriver, leading a process group that also holds the chromium it starts: dropping this
/// kills the group, because chromium keeps running when only chromedriver is killed.
#[derive(Debug)]
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.0.id().and_then(|pid| i32::try_from(pid).ok()) {
            use nix::sys::signal::{Signal, killpg};
            // An error means the group is gone already; the child's own kill_on_drop reaps it.
            let _ = killpg(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

impl Browser {
    /// Spawns `chromedriver` (from `PATH`) on a free loopback port, waits until it is ready and
    /// opens a headless chromium session with a fresh profile directory.
    pub async fn start() -> Result<Self, Failure> {
        let port = std::net::TcpListener::bind(("127.0.0.1", 0))
            .and_then(|listener| listener.local_addr())
            .map_err(|e| format!("finding a free loopback port for chromedriver: {e}"))?
            .port();
        let mut command = Command::new("chromedriver");
        #[cfg(unix)]
        command.process_group(0);
        let mut driver = Driver(
            command
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => {
                        format!("chromedriver is not on PATH: {INSTALL}")
                    }
                    _ => format!("could not start chromedriver: {e}"),
                })?,
        );
        let webdriver = format!("http://127.0.0.1:{port}");
        wait_until_ready(&mut driver.0, &webdriver).await?;

        let profile = tempfile::tempdir()
            .map_err(|e| format!("creating a profile directory for chromium: {e}"))?;
        let args = [
            "--headless=new".to_owned(),
            // CI runs as root, where chromium refuses to start sandboxed.
            "--no-sandbox".to_owned(),
            // No calls home: this machine's network is closed, and chromium would otherwise try
            // (and fail) at every start.
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--window-size=1100,900".to_owned(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut capabilities = Map::new();
        capabilities.insert("goog:chromeOptions".to_owned(), json!({ "args": args }));
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&webdriver)
            .await
            .map_err(|e| {
                format!("chromedriver at {webdriver} could not start chromium ({INSTALL}): {e}")
            })?;
        Ok(Self {
            client,
            driver,
            _profile: profile,
        })
    }

    /// Loads `url` and waits until it has loaded.
    pub async fn open(&self, url: &str) -> Result<(), Failure> {
        self.client
            .goto(url)
            .await
            .map_err(|e| format!("opening {url}: {e}").into())
    }

    /// The text of every element that matches the CSS `selector`, in document order (none: empty).
    pub async fn texts(&self, selector: &str) -> Result<Vec<String>, Failure> {
        let found = self.client.find_all(Locator::Css(selector)).await;
        let elements = self.on_page(format!("finding `{selector}`"), found).await?;
        let mut texts = Vec::with_capacity(elements.len());
        for element in elements {
            let text = element.text().await;
            texts.push(
                self.on_page(format!("reading the text of `{selector}`"), text)
                    .await?,
            );
        }
        Ok(texts)
    }

    /// The text of the first element that matches the CSS `selector`.
    pub async fn text(&self, selector: &str) -> Result<String, Failure> {
        let text = self.find(selector).await?.text().await;
        self.on_page(format!("reading the text of `{selector}`"), text)
            .await
    }

    /// Clicks the first element that matches the CSS `selector`, then waits until the page it
    /// leads to has loaded (fails if no new page has loaded within ten seconds).
    pub async fn click(&self, selector: &str) -> Result<(), Failure> {
        let target = self.find(selector).await?;
        let old_page = self.find("html").await?;
        let from = self.url().await;
        let clicked = target.click().await;
        self.on_page(format!("clicking `{selector}`"), clicked)
            .await?;
        let deadline = tokio::time::Instant::now() + PAGE_LOAD;
        // The old page's root goes stale once the browser has moved on to the next document.
        // Asked while the document is being swapped, chromedriver may instead answer "unknown
        // error: ... Node with given id does not belong to the document": moved on, too.
        loop {
            match old_page.tag_name().await {
                Err(e) if e.is_stale_element_reference() || left_the_document(&e) => break,
                Err(e) => return Err(format!("after clicking `{selector}` on {from}: {e}").into()),
                Ok(_) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "clicking `{selector}` on {from} loaded no new page within {PAGE_LOAD:?}"
                )
                .into());
            }
            tokio::time::sleep(POLL).await;
        }
        loop {
            let state = self
                .client
                .execute("return document.readyState", Vec::new())
                .await;
            let state = self
                .on_page(
                    format!("waiting for the page after clicking `{selector}` on {from}"),
                    state,
                )
                .await?;
            if state == "complete" {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "the page after clicking `{selector}` on {from} did not finish loading \
                     within {PAGE_LOAD:?} (readyState {state})"
                )
                .into());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Writes a PNG of the window to `path`, creating its parent directories.
    pub async fn screenshot(&self, path: &Path) -> Result<(), Failure> {
        let png = self.client.screenshot().await;
        let png = self.on_page("taking a screenshot".to_owned(), png).await?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("creating {}: {e}", parent.display()))?;
        }
        std::fs::write(path, png).map_err(|e| format!("writing {}: {e}", path.display()).into())
    }

    /// The current page's HTML, as the browser serialises its document.
    pub async fn source(&self) -> Result<String, Failure> {
        let source = self.client.source().await;
        self.on_page("reading the page source".to_owned(), source)
            .await
    }

    /// Ends the session (chromium exits), then kills chromedriver.
    pub async fn close(self) -> Result<(), Failure> {
        let closed = self.client.close().await;
        drop(self.driver);
        closed.map_err(|e| format!("ending the browser session: {e}").into())
    }

    async fn find(&self, selector: &str) -> Result<Element, Failure> {
        let found = self.client.find(Locator::Css(selector)).await;
        self.on_page(format!("finding `{selector}`"), found).await
    }

    /// The current URL, for error messages.
    async fn url(&self) -> String {
        match self.client.current_url().await {
            Ok(url) => url.to_string(),
            Err(_) => "the current page".to_owned(),
        }
    }

    /// `result`, or an error that names what failed and on which page.
    async fn on_page<T>(
        &self,
        what: String,
        result: Result<T, fantoccini::error::CmdError>,
    ) -> Result<T, Failure> {
        let e = match result {
            Ok(value) => return Ok(value),
            Err(e) => e,
        };
        let page = self.url().await;
        Err(if e.is_no_such_element() {
            format!("{what} on {page}: no element matches").into()
        } else {
            format!("{what} on {page}: {e}").into()
        })
    }
}

/// Polls chromedriver's `GET /status` until it reports ready, it exits, or [`DRIVER_START`] passes.
async fn wait_until_ready(driver: &mut Child, webdriver: &str) -> Result<(), Failure> {
    let http = reqwest::Client::new();
    let status = format!("{webdriver}/status");
    let deadline = tokio::time::Instant::now() + DRIVER_START;
    loop {
        if let Some(exit) = driver.try_wait()? {
            return Err(format!("chromedriver exited ({exit}) before answering {status}").into());
        }
        if let Ok(response) = http.get(&status).send().await
            && let Ok(body) = response.text().await
            && let Ok(reply) = serde_json::from_str::<Value>(&body)
            && reply.pointer("/value/ready") == Some(&Value::Bool(true))
        {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(
                format!("chromedriver did not answer {status} within {DRIVER_START:?}").into(),
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Whether `error` says the element's document is gone: chromedriver's answer to a query that
/// lands while the browser swaps one document for the next.
fn left_the_document(error: &fantoccini::error::CmdError) -> bool {
    error
        .to_string()
        .contains("does not belong to the document")
}
