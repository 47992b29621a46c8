//! What can go wrong while setting a notifier up.

use std::path::PathBuf;

/// A [`WebhookNotifier`](crate::WebhookNotifier) that could not be set up.
///
/// No message quotes the URL (its path or query may carry a token) or the secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// The URL could not be parsed.
    #[error("the webhook url could not be parsed: {0}")]
    Url(#[from] url::ParseError),
    /// The URL's scheme is not `http` or `https`.
    #[error("the webhook url must use http or https, not {scheme}")]
    Scheme {
        /// The scheme given.
        scheme: String,
    },
    /// The URL is not written as it is sent: parsing it changed it (a host in capitals, no `/`
    /// after the host, a character that is percent-encoded when sent, white space).
    #[error(
        "the webhook url is not written as it is sent (lowercase scheme and host, at least a `/` \
         after the host, percent-encoding as sent); write it in that form"
    )]
    NotCanonical,
    /// The secret is empty, or zero bytes only (which HMAC treats as empty): anyone can sign
    /// with an empty key.
    #[error("the webhook secret is empty (or zero bytes only, which hmac treats as empty)")]
    EmptySecret,
    /// The secret could not be used as an HMAC-SHA256 key.
    #[error("the webhook secret cannot key hmac-sha256")]
    Key,
    /// The secret file could not be read.
    #[error("the webhook secret file {} could not be read: {source}", path.display())]
    SecretFile {
        /// The file named.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP client could not be built (for example, no TLS roots could be loaded).
    #[error("the webhook http client could not be built: {0}")]
    Client(#[source] reqwest::Error),
}
