//! [`WebhookNotifier`]: the HTTP delivery, its bounds and its retries.

use std::{error::Error as _, path::Path, sync::Arc, time::Duration};

use mcp_write_guard_rmcp::approval::{Clock, SystemClock, store::BoxFuture};
use mcp_write_guard_rmcp::notify::{Notice, Notifier, NotifyError};
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use url::Url;

use crate::error::WebhookError;
use crate::payload;
use crate::policy::{self, Verdict};
use crate::signature::{self, HmacSha256, SIGNATURE_HEADER};

/// How long one attempt may take by default: connecting, sending, and the answer's status line
/// and headers.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// How many more attempts follow a failed first one by default.
pub const DEFAULT_RETRIES: u32 = 2;

/// The most retries [`WebhookNotifier::retries`] takes: the call that opened the question waits
/// for the delivery.
pub const MAX_RETRIES: u32 = 10;

/// The `User-Agent` of every delivery.
const USER_AGENT: &str = concat!("mcp-write-guard-webhook/", env!("CARGO_PKG_VERSION"));

/// The longest reason kept from an error's source, in characters.
const MAX_DETAIL_CHARS: usize = 200;

/// A [`Notifier`] that POSTs each notice as signed JSON to one URL.
///
/// Built with [`WebhookNotifier::new`], tuned with [`timeout`](WebhookNotifier::timeout),
/// [`retries`](WebhookNotifier::retries) and [`clock`](WebhookNotifier::clock). `Debug` shows
/// the scheme, host and port only: the secret never, and not the URL's path or query, which
/// may carry a token (Slack's incoming webhooks keep theirs in the path).
///
/// [`notify`](Notifier::notify) runs on the caller's Tokio runtime, which must have its timer
/// enabled (rmcp servers' runtimes do).
#[derive(Clone, derive_more::Debug)]
pub struct WebhookNotifier {
    #[debug(skip)]
    client: reqwest::Client,
    /// Its path or query may carry a token: not in `Debug`.
    #[debug(skip)]
    url: Url,
    /// `scheme://host:port`, for `Debug` and failure reasons.
    endpoint: String,
    /// Keyed with the secret: not in `Debug`.
    #[debug(skip)]
    mac: HmacSha256,
    timeout: Duration,
    retries: u32,
    #[debug(skip)]
    clock: Arc<dyn Clock>,
}

impl WebhookNotifier {
    /// A notifier that POSTs to `url`, signing each body with `secret`.
    ///
    /// `url` must be `http` or `https`, written exactly as it is sent (as the `url` crate
    /// writes it: lowercase scheme and host, at least `/` after the host). `secret` must not be
    /// empty; use at least 32 random bytes. Defaults: [`DEFAULT_TIMEOUT`] per attempt,
    /// [`DEFAULT_RETRIES`], the system clock.
    ///
    /// # Errors
    ///
    /// [`WebhookError`] for a URL that cannot be parsed, is not `http`/`https` or is not
    /// written as sent, an empty secret, or an HTTP client that cannot be built.
    pub fn new(url: &str, secret: impl Into<Vec<u8>>) -> Result<Self, WebhookError> {
        let parsed = Url::parse(url)?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(WebhookError::Scheme {
                scheme: parsed.scheme().to_owned(),
            });
        }
        if parsed.as_str() != url {
            return Err(WebhookError::NotCanonical);
        }
        let secret = secret.into();
        if signature::is_empty_key(&secret) {
            return Err(WebhookError::EmptySecret);
        }
        let mac = signature::keyed(&secret).ok_or(WebhookError::Key)?;
        drop(secret);

        let client = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .redirect(reqwest::redirect::Policy::none())
            // Attempts are counted here, not inside the client.
            .retry(reqwest::retry::never())
            .build()
            .map_err(WebhookError::Client)?;
        let endpoint = endpoint(&parsed);
        Ok(Self {
            client,
            url: parsed,
            endpoint,
            mac,
            timeout: DEFAULT_TIMEOUT,
            retries: DEFAULT_RETRIES,
            clock: Arc::new(SystemClock),
        })
    }

    /// Reads a secret from the file at `path`, without one trailing line break (`\n` or
    /// `\r\n`), so that `echo "$SECRET" > file` works.
    ///
    /// # Errors
    ///
    /// [`WebhookError::SecretFile`] if the file cannot be read, [`WebhookError::EmptySecret`]
    /// if nothing is left.
    pub fn secret_from_file(path: impl AsRef<Path>) -> Result<Vec<u8>, WebhookError> {
        let path = path.as_ref();
        let mut secret = std::fs::read(path).map_err(|source| WebhookError::SecretFile {
            path: path.to_owned(),
            source,
        })?;
        if secret.last() == Some(&b'\n') {
            secret.pop();
            if secret.last() == Some(&b'\r') {
                secret.pop();
            }
        }
        if signature::is_empty_key(&secret) {
            return Err(WebhookError::EmptySecret);
        }
        Ok(secret)
    }

    /// How long one attempt may take (connecting, sending, and the answer's status line and
    /// headers); [`DEFAULT_TIMEOUT`] unless set.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How many more attempts may follow a failed one (no answer, a timeout, a 5xx), at most
    /// [`MAX_RETRIES`] (a larger number is taken as [`MAX_RETRIES`]); [`DEFAULT_RETRIES`]
    /// unless set. `0` tries once.
    #[must_use]
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries.min(MAX_RETRIES);
        self
    }

    /// Where `sentAt` comes from; the system clock unless set.
    #[must_use]
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The longest a [`notify`](Notifier::notify) can take: every attempt timing out, with the
    /// pauses between them.
    pub fn max_delivery_time(&self) -> Duration {
        (1..=self.retries).fold(self.timeout, |total, retry| {
            total
                .saturating_add(policy::backoff(retry))
                .saturating_add(self.timeout)
        })
    }

    /// Delivers `notice`, retrying as the policy says.
    async fn deliver(&self, notice: &Notice) -> Result<(), NotifyError> {
        let body = payload::body(notice, self.clock.now())
            .map_err(|e| NotifyError::new(format!("no webhook was sent: {}", e.0)))?;
        let signature = signature::header_value(&self.mac, &body);
        let attempts = self.retries.saturating_add(1);
        let mut last = String::new();
        for attempt in 1..=attempts {
            if attempt > 1 {
                tokio::time::sleep(policy::backoff(attempt - 1)).await;
            }
            let (verdict, reason) = self.attempt(&body, &signature).await;
            match verdict {
                Verdict::Delivered => return Ok(()),
                Verdict::Final => {
                    return Err(NotifyError::new(format!(
                        "webhook to {} refused on attempt {attempt} of {attempts}: {reason}",
                        self.endpoint
                    )));
                }
                Verdict::Retry => last = reason,
            }
        }
        let plural = if attempts == 1 { "" } else { "s" };
        Err(NotifyError::new(format!(
            "webhook to {} not delivered after {attempts} attempt{plural}; the last: {last}",
            self.endpoint
        )))
    }

    /// One POST, bounded by the timeout: its verdict, and what happened in words.
    async fn attempt(&self, body: &[u8], signature: &str) -> (Verdict, String) {
        let send = self
            .client
            .post(self.url.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(SIGNATURE_HEADER, signature)
            .body(body.to_vec())
            .send();
        match tokio::time::timeout(self.timeout, send).await {
            Err(_elapsed) => (
                Verdict::Retry,
                format!("no answer within {:?}", self.timeout),
            ),
            Ok(Err(error)) => (Verdict::Retry, describe(&error)),
            Ok(Ok(response)) => {
                let status = response.status();
                let verdict = policy::on_status(status.as_u16());
                let reason = match verdict {
                    Verdict::Delivered => format!("delivered ({status})"),
                    Verdict::Retry => format!("the receiver answered {status}"),
                    Verdict::Final if status.is_redirection() => {
                        format!("the receiver answered {status}, a redirect, which is not followed")
                    }
                    Verdict::Final => format!("the receiver answered {status}"),
                };
                (verdict, reason)
            }
        }
    }
}

impl Notifier for WebhookNotifier {
    fn channel(&self) -> &str {
        "webhook"
    }

    fn notify<'a>(&'a self, notice: &'a Notice) -> BoxFuture<'a, Result<(), NotifyError>> {
        Box::pin(self.deliver(notice))
    }
}

/// `scheme://host:port` of `url`: what may be shown of it.
fn endpoint(url: &Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port_or_known_default() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

/// A request error in words, without the URL: reqwest's own message names the URL (which may
/// carry a token), so this names the kind of failure and the innermost cause only.
fn describe(error: &reqwest::Error) -> String {
    let kind = if error.is_connect() {
        "could not connect"
    } else if error.is_timeout() {
        "timed out"
    } else if error.is_builder() {
        "the request could not be built"
    } else {
        "the request failed"
    };
    let mut innermost = None;
    let mut source = error.source();
    while let Some(cause) = source {
        innermost = Some(cause);
        source = cause.source();
    }
    match innermost {
        Some(cause) => {
            let detail: String = cause.to_string().chars().take(MAX_DETAIL_CHARS).collect();
            format!("{kind}: {detail}")
        }
        None => kind.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"correct horse battery staple";

    #[test]
    fn urls_are_refused_unless_http_and_written_as_sent() {
        for good in [
            "https://hooks.example.com/services/T0/B0/xyz",
            "http://127.0.0.1:8080/",
            "https://ntfy.example/approvals?auth=abc",
        ] {
            assert!(WebhookNotifier::new(good, SECRET).is_ok(), "{good}");
        }
        type Check = fn(&WebhookError) -> bool;
        let cases: [(&str, Check); 7] = [
            ("not a url", |e| matches!(e, WebhookError::Url(_))),
            ("ftp://example.com/", |e| {
                matches!(e, WebhookError::Scheme { .. })
            }),
            ("file:///etc/passwd", |e| {
                matches!(e, WebhookError::Scheme { .. })
            }),
            ("https://example.com", |e| {
                matches!(e, WebhookError::NotCanonical)
            }),
            ("HTTPS://example.com/", |e| {
                matches!(e, WebhookError::NotCanonical)
            }),
            (" https://example.com/", |e| {
                matches!(e, WebhookError::NotCanonical)
            }),
            ("https://example.com:443/", |e| {
                matches!(e, WebhookError::NotCanonical)
            }),
        ];
        for (url, expected) in cases {
            let error = WebhookNotifier::new(url, SECRET).unwrap_err();
            assert!(expected(&error), "{url}: {error:?}");
        }
    }

    #[test]
    fn an_empty_secret_is_refused() {
        for secret in [&b""[..], &[0u8; 4][..]] {
            assert!(matches!(
                WebhookNotifier::new("https://example.com/", secret),
                Err(WebhookError::EmptySecret)
            ));
        }
    }

    #[test]
    fn debug_shows_neither_secret_nor_path_nor_query() {
        let notifier = WebhookNotifier::new(
            "https://hooks.example.com/services/T0/B0/pathtoken?token=querytoken",
            SECRET,
        )
        .unwrap();
        let shown = format!("{notifier:?}");
        assert_eq!(
            shown,
            "WebhookNotifier { endpoint: \"https://hooks.example.com:443\", timeout: 5s, \
             retries: 2, .. }"
        );
        for hidden in ["correct horse", "pathtoken", "querytoken", "services"] {
            assert!(!shown.contains(hidden), "{shown}");
        }
    }

    #[test]
    fn retries_are_capped_and_the_bound_adds_up() {
        let notifier = WebhookNotifier::new("http://127.0.0.1:9/", SECRET).unwrap();
        assert_eq!(notifier.max_delivery_time(), Duration::from_millis(15_600));
        let once = notifier.clone().retries(0);
        assert_eq!(once.max_delivery_time(), DEFAULT_TIMEOUT);
        let many = notifier.retries(1000).timeout(Duration::from_secs(1));
        assert_eq!(many.retries, MAX_RETRIES);
        // 11 attempts of 1 s, pauses 0.2 + 0.4 + 0.8 + 1.6 + 6 × 2 s.
        assert_eq!(many.max_delivery_time(), Duration::from_millis(26_000));
    }

    #[test]
    fn secret_files_lose_one_line_break() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        for (content, expected) in [
            (&b"abc\n"[..], &b"abc"[..]),
            (b"abc\r\n", b"abc"),
            (b"abc\n\n", b"abc\n"),
            (b"abc", b"abc"),
            (b" abc ", b" abc "),
        ] {
            std::fs::write(&path, content).unwrap();
            assert_eq!(WebhookNotifier::secret_from_file(&path).unwrap(), expected);
        }
        for empty in [&b""[..], b"\n", b"\r\n"] {
            std::fs::write(&path, empty).unwrap();
            assert!(matches!(
                WebhookNotifier::secret_from_file(&path),
                Err(WebhookError::EmptySecret)
            ));
        }
        let missing = WebhookNotifier::secret_from_file(dir.path().join("missing")).unwrap_err();
        assert!(matches!(missing, WebhookError::SecretFile { .. }));
        assert!(
            missing.to_string().starts_with("the webhook secret file "),
            "{missing}"
        );
    }
}
