//! [`BearerAuth`]: an OAuth 2.1 resource server in front of an MCP endpoint.
//!
//! Every request to the protected routes must carry `Authorization: Bearer <JWT>`. The token's
//! signature is checked against a JWKS (a file, or an `https` URL fetched and cached), then its
//! `iss`, `aud`, `exp` and `nbf` (with a small leeway) and the presence of `sub`. A request that
//! passes gets an [`AuthenticatedSubject`] (issuer, subject, scopes) in its extensions, where
//! [`mcp_write_guard_rmcp::FromAuthenticatedSubject`] makes it the principal. One that does not gets HTTP 401
//! with `WWW-Authenticate: Bearer resource_metadata="<base>/.well-known/oauth-protected-resource"`
//! (and `error="invalid_token"` when a token was sent), and never reaches the MCP service.
//!
//! The RFC 9728 protected-resource metadata document is served, unprotected, at
//! `/.well-known/oauth-protected-resource` and at the same path followed by the endpoint's path.
//!
//! What it does not do: issue tokens, introspect opaque tokens, or accept symmetric (`HS*`) keys:
//! a resource server verifies an authorization server's signatures, it does not share a secret
//! with it.

use std::{
    fmt,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    Router,
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::get,
};
use jsonwebtoken::{
    Algorithm, DecodingKey, Validation,
    errors::ErrorKind,
    jwk::{AlgorithmParameters, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse},
};
use parking_lot::RwLock;
use serde::Deserialize;
use serde_json::{Value, json};

use super::sessions::{BoundedSessions, as_owner};
use mcp_write_guard_rmcp::AuthenticatedSubject;

/// The RFC 9728 well-known path.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The default leeway for `exp` and `nbf`.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);

/// How long a JWKS fetched from a URL is used before it is fetched again.
pub const DEFAULT_JWKS_REFRESH: Duration = Duration::from_secs(10 * 60);

/// By default, a token whose `kid` is not in the cached JWKS makes the cache refetch at most this
/// often.
pub const DEFAULT_UNKNOWN_KID_REFETCH: Duration = Duration::from_secs(30);

/// The largest JWKS document read.
const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// The asymmetric algorithms a token may be signed with.
const ALLOWED: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Where the signing keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// A JWKS document on disk, read once when the layer is built.
    File(PathBuf),
    /// A JWKS document fetched from this URL, cached, fetched again after the refresh interval
    /// or when a token names a key it does not hold. `https`, or `http` to a loopback host only.
    Url(String),
}

impl JwksSource {
    /// `https://…` or `http://` to a loopback host is a URL; anything else is a file path.
    ///
    /// The URL is read by `http::Uri`, the parser of the HTTP stack that fetches it, so the host
    /// checked here is the host connected to.
    ///
    /// # Errors
    ///
    /// A URL that does not parse or carries user info (`user@host`), and an `http://` URL to a
    /// host other than loopback: keys fetched in the clear can be swapped.
    pub fn parse(value: &str) -> Result<Self, AuthError> {
        let plain = value.starts_with("http://");
        if !plain && !value.starts_with("https://") {
            return Ok(Self::File(PathBuf::from(value)));
        }
        let refuse = |why: &str| Err(AuthError::Config(format!("the JWKS URL {value} {why}")));
        let Ok(uri) = value.parse::<http::Uri>() else {
            return refuse("is not a valid URL");
        };
        let Some(authority) = uri.authority() else {
            return refuse("names no host");
        };
        if authority.as_str().contains('@') {
            return refuse("carries user info; give the keys' URL without it");
        }
        let host = authority.host();
        let port = authority.as_str().get(host.len()..).unwrap_or_default();
        if !port.is_empty() && authority.port_u16().is_none_or(|p| p == 0) {
            return refuse("has an invalid port");
        }
        let name = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = name == "localhost"
            || name
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if plain && !loopback {
            return refuse("is plain http to another machine; use https");
        }
        Ok(Self::Url(value.to_owned()))
    }
}

/// What [`BearerAuth`] checks, and what its metadata document says.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AuthConfig {
    /// The required `iss`, and the authorization server listed in the metadata.
    pub issuer: String,
    /// The required `aud` (one of the token's audiences).
    pub audience: String,
    /// The signing keys.
    pub jwks: JwksSource,
    /// The public URL of the MCP endpoint (`https://mcp.example.com/mcp`): the metadata's
    /// `resource`, and the base of the metadata URL in `WWW-Authenticate`.
    pub resource: String,
    /// The scope writes need, listed in `scopes_supported`. Enforce it with
    /// [`mcp_write_guard_rmcp::WriteGuardBuilder::write_scope`]: the HTTP layer cannot tell a write from a read.
    pub write_scope: Option<String>,
    /// Leeway for `exp` and `nbf` (default [`DEFAULT_LEEWAY`]).
    pub leeway: Duration,
    /// How long a fetched JWKS is used (default [`DEFAULT_JWKS_REFRESH`]).
    pub jwks_refresh: Duration,
    /// The least time between two fetches caused by tokens naming a `kid` the cached JWKS does
    /// not hold (default [`DEFAULT_UNKNOWN_KID_REFETCH`]): key rotation is picked up at once,
    /// and invented `kid`s cannot make the server hammer the key endpoint.
    pub unknown_kid_refetch: Duration,
    /// PEM certificates of the CAs trusted for an `https` JWKS URL, instead of the public web
    /// roots (webpki-roots): for an issuer behind a private CA. Default: the public roots.
    pub jwks_roots: Option<Vec<u8>>,
}

impl AuthConfig {
    /// Tokens from `issuer` for `audience`, signed by a key in `jwks`, for the endpoint whose
    /// public URL is `resource`.
    pub fn new(
        issuer: impl Into<String>,
        audience: impl Into<String>,
        jwks: JwksSource,
        resource: impl Into<String>,
    ) -> Self {
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
            jwks,
            resource: resource.into(),
            write_scope: None,
            leeway: DEFAULT_LEEWAY,
            jwks_refresh: DEFAULT_JWKS_REFRESH,
            unknown_kid_refetch: DEFAULT_UNKNOWN_KID_REFETCH,
            jwks_roots: None,
        }
    }

    /// Trusts only the CA certificates in `pem` for an `https` JWKS URL (see
    /// [`Self::jwks_roots`]).
    #[must_use]
    pub fn with_jwks_roots(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.jwks_roots = Some(pem.into());
        self
    }

    /// The scope writes need (see [`Self::write_scope`]).
    #[must_use]
    pub fn with_write_scope(mut self, scope: impl Into<String>) -> Self {
        self.write_scope = Some(scope.into());
        self
    }

    /// Leeway for `exp` and `nbf`.
    #[must_use]
    pub fn with_leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// The origin (scheme, host and port) of [`Self::resource`].
    fn base(&self) -> &str {
        let after_scheme = self.resource.find("://").map_or(0, |i| i + 3);
        let end = self
            .resource
            .get(after_scheme..)
            .and_then(|rest| rest.find('/'))
            .map_or(self.resource.len(), |i| after_scheme + i);
        self.resource.get(..end).unwrap_or(&self.resource)
    }
}

/// Why [`BearerAuth`] could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// A setting is unusable.
    #[error("auth configuration: {0}")]
    Config(String),
    /// The JWKS could not be read or fetched.
    #[error("JWKS {source_name}: {message}")]
    Jwks {
        /// The file or URL.
        source_name: String,
        /// What went wrong.
        message: String,
    },
}

/// Why a request's credential was refused. The text goes into `error_description`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BearerRejection {
    /// No `Authorization: Bearer` header.
    Missing,
    /// Not a JWT, or a header the layer does not accept.
    Malformed,
    /// An algorithm other than the asymmetric ones (`none` and `HS*` included).
    Algorithm,
    /// No key in the JWKS verifies the signature.
    Signature,
    /// `exp` is past.
    Expired,
    /// `nbf` is in the future.
    NotYetValid,
    /// `iss` is not the configured issuer.
    Issuer,
    /// `aud` does not hold the configured audience.
    Audience,
    /// A required claim (`exp`, `iss`, `aud`, `sub`) is missing or of the wrong type.
    Claims,
}

impl BearerRejection {
    /// The `error_description`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "no bearer token",
            Self::Malformed => "the token is not a well-formed JWT",
            Self::Algorithm => "the token's signing algorithm is not accepted",
            Self::Signature => "the token's signature does not verify",
            Self::Expired => "the token has expired",
            Self::NotYetValid => "the token is not valid yet",
            Self::Issuer => "the token is from another issuer",
            Self::Audience => "the token is for another audience",
            Self::Claims => "the token lacks a required claim",
        }
    }
}

impl fmt::Display for BearerRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One usable verification key.
struct Key {
    kid: Option<String>,
    alg: Option<Algorithm>,
    decoding: DecodingKey,
    family: Family,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Rsa,
    Ec,
    Ed,
}

fn family_of(alg: Algorithm) -> Option<Family> {
    match alg {
        Algorithm::RS256
        | Algorithm::RS384
        | Algorithm::RS512
        | Algorithm::PS256
        | Algorithm::PS384
        | Algorithm::PS512 => Some(Family::Rsa),
        Algorithm::ES256 | Algorithm::ES384 => Some(Family::Ec),
        Algorithm::EdDSA => Some(Family::Ed),
        // HS* and anything newer.
        _ => None,
    }
}

fn key_algorithm(alg: KeyAlgorithm) -> Option<Algorithm> {
    let alg = match alg {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    };
    Some(alg)
}

/// The usable keys of a JWKS: public signature keys of the asymmetric families. Symmetric
/// keys, encryption keys, unknown key types and malformed keys are left out.
fn usable_keys(set: &JwkSet) -> Vec<Key> {
    set.keys.iter().filter_map(usable_key).collect()
}

fn usable_key(jwk: &Jwk) -> Option<Key> {
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return None;
    }
    let alg = match jwk.common.key_algorithm {
        Some(declared) => Some(key_algorithm(declared)?),
        None => None,
    };
    let family = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Family::Rsa,
        AlgorithmParameters::EllipticCurve(_) => Family::Ec,
        AlgorithmParameters::OctetKeyPair(params) => {
            // Ed25519 public keys are exactly 32 bytes; anything else is refused here rather
            // than handed to the verifier.
            let x = base64_url_len(&params.x)?;
            if x != 32 {
                return None;
            }
            Family::Ed
        }
        // Symmetric keys, unknown key types.
        _ => return None,
    };
    if alg.is_some_and(|a| family_of(a) != Some(family)) {
        return None;
    }
    let decoding = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key {
        kid: jwk.common.key_id.clone(),
        alg,
        decoding,
        family,
    })
}

/// The decoded length of unpadded base64url text, if it is well formed.
fn base64_url_len(text: &str) -> Option<usize> {
    let ok = text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ok || text.len() % 4 == 1 {
        return None;
    }
    Some(text.len() * 3 / 4)
}

struct Cache {
    keys: Arc<Vec<Key>>,
    fetched: Instant,
}

struct Inner {
    config: AuthConfig,
    cache: RwLock<Cache>,
    fetching: tokio::sync::Mutex<()>,
    client: Option<reqwest::Client>,
    metadata: Value,
    challenge: String,
}

/// The bearer-token layer and the metadata routes. Cheap to clone.
///
/// ```no_run
/// # async fn demo(mcp: axum::Router) -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use mcp_write_guard_http::{AuthConfig, BearerAuth, BoundedSessions, JwksSource};
///
/// let config = AuthConfig::new(
///     "https://auth.example.com",
///     "https://mcp.example.com/mcp",
///     JwksSource::parse("https://auth.example.com/.well-known/jwks.json")?,
///     "https://mcp.example.com/mcp",
/// )
/// .with_write_scope("store:write");
/// let auth = BearerAuth::new(config).await?;
/// let sessions = Arc::new(BoundedSessions::new(256)); // also the MCP service's session manager
/// let app = auth.protect(mcp, sessions); // 401 without a valid token; metadata served
/// // and in the guard: .principal(Arc::new(FromAuthenticatedSubject)).write_scope("store:write")
/// # let _ = app; Ok(()) }
/// ```
#[derive(Clone)]
pub struct BearerAuth {
    inner: Arc<Inner>,
}

impl fmt::Debug for BearerAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BearerAuth")
            .field("issuer", &self.inner.config.issuer)
            .field("audience", &self.inner.config.audience)
            .field("jwks", &self.inner.config.jwks)
            .finish_non_exhaustive()
    }
}

impl BearerAuth {
    /// Reads or fetches the JWKS and builds the layer.
    ///
    /// # Errors
    ///
    /// An empty issuer, audience or resource; a JWKS that cannot be read, fetched or parsed, or
    /// holds no usable signature key.
    pub async fn new(config: AuthConfig) -> Result<Self, AuthError> {
        for (name, value) in [
            ("issuer", &config.issuer),
            ("audience", &config.audience),
            ("resource", &config.resource),
        ] {
            if value.trim().is_empty() {
                return Err(AuthError::Config(format!("the {name} is empty")));
            }
        }
        if !super::is_plain_endpoint_url(&config.resource) {
            return Err(AuthError::Config(format!(
                "the resource {:?} is not a plain http(s) URL (scheme, host, optional port, a \
                 path of letters, digits and -._~/)",
                config.resource
            )));
        }
        let client = match &config.jwks {
            JwksSource::File(_) => None,
            JwksSource::Url(url) => Some(http_client(url, config.jwks_roots.as_deref())?),
        };
        let keys = load(&config.jwks, client.as_ref()).await?;
        let metadata_url = format!("{}{METADATA_PATH}", config.base());
        let mut scopes = Vec::new();
        scopes.extend(config.write_scope.clone());
        let metadata = json!({
            "resource": config.resource,
            "authorization_servers": [config.issuer],
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
        });
        let challenge = format!("Bearer resource_metadata=\"{metadata_url}\"");
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                cache: RwLock::new(Cache {
                    keys: Arc::new(keys),
                    fetched: Instant::now(),
                }),
                fetching: tokio::sync::Mutex::new(()),
                client,
                metadata,
                challenge,
            }),
        })
    }

    /// The RFC 9728 protected-resource metadata document.
    pub fn metadata(&self) -> &Value {
        &self.inner.metadata
    }

    /// `router` with every route behind the bearer check, plus the unprotected metadata routes.
    ///
    /// `sessions` is the session manager of the MCP service inside `router`: each session it
    /// creates belongs to the subject whose token opened it, every later request naming the
    /// session must carry a token for that subject (another subject's, or a session nobody
    /// claimed, gets 404 as an unknown session does), and one subject holds at most
    /// [`BoundedSessions::with_max_per_owner`] sessions (the next `initialize` gets 429).
    pub fn protect(&self, router: Router, sessions: Arc<BoundedSessions>) -> Router {
        let state = Layer {
            auth: self.clone(),
            sessions,
        };
        let protected = router.layer(middleware::from_fn_with_state(state, require));
        protected.merge(self.metadata_routes())
    }

    /// The metadata document at [`METADATA_PATH`] and at that path followed by the resource's
    /// path (RFC 9728 section 3.1).
    pub fn metadata_routes(&self) -> Router {
        let document = self.inner.metadata.clone();
        let serve = move || {
            let document = document.clone();
            async move {
                (
                    [(header::CACHE_CONTROL, "max-age=300")],
                    axum::Json(document),
                )
            }
        };
        let path = self
            .inner
            .config
            .resource
            .get(self.inner.config.base().len()..)
            .unwrap_or_default()
            .trim_end_matches('/');
        let mut routes = Router::new().route(METADATA_PATH, get(serve.clone()));
        if !path.is_empty() && path.starts_with('/') {
            routes = routes.route(&format!("{METADATA_PATH}{path}"), get(serve));
        }
        routes
    }

    /// Checks an `Authorization` header value: the subject it proves, or why not.
    pub async fn verify(
        &self,
        authorization: Option<&HeaderValue>,
    ) -> Result<AuthenticatedSubject, BearerRejection> {
        let value = authorization.ok_or(BearerRejection::Missing)?;
        let value = value.to_str().map_err(|_| BearerRejection::Malformed)?;
        let (scheme, token) = value.split_once(' ').ok_or(BearerRejection::Malformed)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(BearerRejection::Missing);
        }
        self.verify_token(token.trim()).await
    }

    /// Checks a bare JWT.
    pub async fn verify_token(&self, token: &str) -> Result<AuthenticatedSubject, BearerRejection> {
        let header = jsonwebtoken::decode_header(token).map_err(|error| match error.kind() {
            ErrorKind::InvalidAlgorithmName | ErrorKind::UnsupportedAlgorithm => {
                BearerRejection::Algorithm
            }
            _ if names_an_algorithm(token) => BearerRejection::Algorithm,
            _ => BearerRejection::Malformed,
        })?;
        let alg = header.alg;
        let family = family_of(alg).ok_or(BearerRejection::Algorithm)?;
        if !ALLOWED.contains(&alg) {
            return Err(BearerRejection::Algorithm);
        }
        let mut keys = self.keys().await;
        if let Some(kid) = &header.kid
            && !keys.iter().any(|k| k.kid.as_ref() == Some(kid))
        {
            keys = self.refetch_for_unknown_kid().await;
        }
        let candidates = keys.iter().filter(|k| {
            k.family == family
                && k.alg.is_none_or(|a| a == alg)
                && header
                    .kid
                    .as_ref()
                    .is_none_or(|kid| k.kid.as_ref() == Some(kid))
        });
        let validation = self.validation(alg);
        let mut rejection = BearerRejection::Signature;
        for key in candidates {
            match jsonwebtoken::decode::<Claims>(token, &key.decoding, &validation) {
                Ok(data) => return data.claims.into_subject(&self.inner.config.issuer),
                Err(error) => {
                    rejection = rejection_for(error.kind());
                    if rejection != BearerRejection::Signature {
                        // The signature verified and a claim is wrong: no other key changes that.
                        return Err(rejection);
                    }
                }
            }
        }
        Err(rejection)
    }

    fn validation(&self, alg: Algorithm) -> Validation {
        let config = &self.inner.config;
        let mut validation = Validation::new(alg);
        validation.set_issuer(&[&config.issuer]);
        validation.set_audience(&[&config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = config.leeway.as_secs();
        validation
    }

    /// The cached keys, fetched again first when a URL's copy is older than the refresh.
    async fn keys(&self) -> Arc<Vec<Key>> {
        let (keys, fetched) = {
            let cache = self.inner.cache.read();
            (Arc::clone(&cache.keys), cache.fetched)
        };
        if matches!(self.inner.config.jwks, JwksSource::Url(_))
            && fetched.elapsed() >= self.inner.config.jwks_refresh
        {
            return self.refetch(self.inner.config.jwks_refresh).await;
        }
        keys
    }

    async fn refetch_for_unknown_kid(&self) -> Arc<Vec<Key>> {
        match self.inner.config.jwks {
            JwksSource::Url(_) => self.refetch(self.inner.config.unknown_kid_refetch).await,
            JwksSource::File(_) => Arc::clone(&self.inner.cache.read().keys),
        }
    }

    /// Fetches the JWKS again unless a fetch happened within `min_age`. A failed fetch keeps the
    /// old keys (and is logged), so a flaky key endpoint does not lock everyone out at once.
    async fn refetch(&self, min_age: Duration) -> Arc<Vec<Key>> {
        let _one_at_a_time = self.inner.fetching.lock().await;
        {
            let cache = self.inner.cache.read();
            if cache.fetched.elapsed() < min_age {
                return Arc::clone(&cache.keys);
            }
        }
        match load(&self.inner.config.jwks, self.inner.client.as_ref()).await {
            Ok(keys) => {
                let keys = Arc::new(keys);
                let mut cache = self.inner.cache.write();
                cache.keys = Arc::clone(&keys);
                cache.fetched = Instant::now();
                keys
            }
            Err(error) => {
                tracing::warn!(%error, "could not refresh the JWKS; keeping the keys it had");
                let mut cache = self.inner.cache.write();
                // Try again after the unknown-kid interval, not on every request.
                cache.fetched = Instant::now()
                    .checked_sub(self.inner.config.jwks_refresh)
                    .and_then(|t| t.checked_add(self.inner.config.unknown_kid_refetch))
                    .unwrap_or_else(Instant::now);
                Arc::clone(&cache.keys)
            }
        }
    }

    fn unauthorized(&self, rejection: BearerRejection) -> Response {
        let challenge = if rejection == BearerRejection::Missing {
            self.inner.challenge.clone()
        } else {
            format!(
                "{}, error=\"invalid_token\", error_description=\"{}\"",
                self.inner.challenge,
                rejection.as_str()
            )
        };
        let body = json!({
            "error": if rejection == BearerRejection::Missing { "unauthorized" } else { "invalid_token" },
            "error_description": rejection.as_str(),
        });
        let mut response = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// The middleware's state.
#[derive(Clone)]
struct Layer {
    auth: BearerAuth,
    sessions: Arc<BoundedSessions>,
}

/// The header rmcp's streamable-HTTP server uses for the session id.
const SESSION_HEADER: &str = "mcp-session-id";

/// The middleware: verified requests go on with an [`AuthenticatedSubject`], into sessions of
/// their own subject only; others get 401 (no valid token) or 404 (another's session).
async fn require(State(layer): State<Layer>, mut request: Request, next: Next) -> Response {
    let Layer { auth, sessions } = layer;
    let headers = request.headers();
    let verified = if headers.get_all(header::AUTHORIZATION).iter().count() > 1 {
        Err(BearerRejection::Malformed)
    } else {
        auth.verify(headers.get(header::AUTHORIZATION)).await
    };
    let (subject, owner) = match verified.map(|s| (s.principal(), s)) {
        Ok((Some(principal), subject)) => (subject, principal.as_str().to_owned()),
        Ok((None, _)) => return auth.unauthorized(BearerRejection::Claims),
        Err(rejection) => {
            if rejection != BearerRejection::Missing {
                tracing::info!(reason = rejection.as_str(), "bearer token refused");
            }
            return auth.unauthorized(rejection);
        }
    };
    let mut named = request.headers().get_all(SESSION_HEADER).iter();
    let session = match (named.next(), named.next()) {
        (None, _) => None,
        (Some(value), None) => Some(value.to_str().unwrap_or_default().to_owned()),
        (Some(_), Some(_)) => return session_not_found(),
    };
    if let Some(id) = &session
        && sessions.owner(id).as_deref() != Some(owner.as_str())
    {
        tracing::info!("a request named a session its subject does not own");
        return session_not_found();
    }
    request.extensions_mut().insert(subject);
    let (response, refused) = as_owner(owner, next.run(request)).await;
    if refused {
        return too_many_sessions();
    }
    response
}

/// What rmcp answers for a session it does not hold.
fn session_not_found() -> Response {
    (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
}

fn too_many_sessions() -> Response {
    (
        StatusCode::TOO_MANY_REQUESTS,
        "Too Many Requests: this account holds the most sessions allowed; close one (HTTP \
         DELETE) or let an idle one expire",
    )
        .into_response()
}

fn rejection_for(kind: &ErrorKind) -> BearerRejection {
    match kind {
        ErrorKind::ExpiredSignature => BearerRejection::Expired,
        ErrorKind::ImmatureSignature => BearerRejection::NotYetValid,
        ErrorKind::InvalidIssuer => BearerRejection::Issuer,
        ErrorKind::InvalidAudience => BearerRejection::Audience,
        ErrorKind::MissingRequiredClaim(_) | ErrorKind::InvalidClaimFormat(_) => {
            BearerRejection::Claims
        }
        ErrorKind::InvalidToken
        | ErrorKind::Base64(_)
        | ErrorKind::Json(_)
        | ErrorKind::Utf8(_) => BearerRejection::Malformed,
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => BearerRejection::Algorithm,
        _ => BearerRejection::Signature,
    }
}

/// Whether a JWT the library could not read has a JSON header naming some `alg` (`none`, or one
/// the library does not know): then the algorithm is why it was refused.
fn names_an_algorithm(token: &str) -> bool {
    use base64::Engine;
    let Some(encoded) = token.split('.').next() else {
        return false;
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .is_some_and(|header| header.get("alg").is_some_and(Value::is_string))
}

/// The claims read after the library checked `exp`, `nbf`, `iss` and `aud`. `sub` and `iss` are
/// optional here so that a token without them is refused as lacking a claim (the library's
/// required-claims check), not as malformed.
#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<Value>,
    #[serde(default)]
    iss: Option<Value>,
    /// RFC 9068: space-separated.
    #[serde(default)]
    scope: Option<Value>,
    /// Some issuers: an array (or a string).
    #[serde(default)]
    scp: Option<Value>,
}

impl Claims {
    fn into_subject(self, issuer: &str) -> Result<AuthenticatedSubject, BearerRejection> {
        let Some(Value::String(sub)) = self.sub else {
            return Err(BearerRejection::Claims);
        };
        if sub.is_empty() || self.iss.as_ref().and_then(Value::as_str) != Some(issuer) {
            return Err(BearerRejection::Claims);
        }
        let mut scopes: Vec<String> = Vec::new();
        for claim in [self.scope, self.scp].into_iter().flatten() {
            match claim {
                Value::String(text) => scopes.extend(text.split(' ').map(str::to_owned)),
                Value::Array(items) => {
                    scopes.extend(items.into_iter().filter_map(|v| match v {
                        Value::String(s) => Some(s),
                        _ => None,
                    }));
                }
                _ => return Err(BearerRejection::Claims),
            }
        }
        scopes.retain(|s| !s.is_empty());
        Ok(AuthenticatedSubject::new(sub)
            .with_issuer(issuer)
            .with_scopes(scopes))
    }
}

/// The client that fetches the JWKS at `url`. A plain `http` URL (loopback, see
/// [`JwksSource::parse`]) is fetched directly, never through a proxy named in the environment:
/// keys that left the machine in the clear could be swapped on the way.
fn http_client(url: &str, roots: Option<&[u8]>) -> Result<reqwest::Client, AuthError> {
    let mut builder = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none());
    if let Some(pem) = roots {
        let certificates = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| AuthError::Config(format!("the JWKS CA certificates: {e}")))?;
        if certificates.is_empty() {
            return Err(AuthError::Config(
                "the JWKS CA file holds no PEM certificate".to_owned(),
            ));
        }
        builder = builder.tls_certs_only(certificates);
    }
    if url.starts_with("http://") {
        builder = builder.no_proxy();
    }
    builder
        .build()
        .map_err(|e| AuthError::Config(format!("the JWKS client: {e}")))
}

async fn load(
    source: &JwksSource,
    client: Option<&reqwest::Client>,
) -> Result<Vec<Key>, AuthError> {
    let (name, bytes) = match source {
        JwksSource::File(path) => {
            let name = path.display().to_string();
            let bytes = tokio::fs::read(path).await.map_err(|e| AuthError::Jwks {
                source_name: name.clone(),
                message: e.to_string(),
            })?;
            (name, bytes)
        }
        JwksSource::Url(url) => {
            let Some(client) = client else {
                return Err(AuthError::Config("no JWKS client".to_owned()));
            };
            (url.clone(), fetch(client.clone(), url.clone()).await?)
        }
    };
    if bytes.len() > MAX_JWKS_BYTES {
        return Err(AuthError::Jwks {
            source_name: name,
            message: format!("larger than {MAX_JWKS_BYTES} bytes"),
        });
    }
    let set: JwkSet = serde_json::from_slice(&bytes).map_err(|e| AuthError::Jwks {
        source_name: name.clone(),
        message: format!("not a JWKS document: {e}"),
    })?;
    let keys = usable_keys(&set);
    if keys.is_empty() {
        return Err(AuthError::Jwks {
            source_name: name,
            message: "no usable signature key (RSA, EC P-256/P-384 or Ed25519)".to_owned(),
        });
    }
    Ok(keys)
}

/// Fetches `url`, at most [`MAX_JWKS_BYTES`] of it (a longer body is refused as it arrives).
async fn fetch(client: reqwest::Client, url: String) -> Result<Vec<u8>, AuthError> {
    let failed = |message: String| AuthError::Jwks {
        source_name: url.clone(),
        message,
    };
    let mut response = client
        .get(&url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    if !response.status().is_success() {
        return Err(failed(format!("HTTP {}", response.status())));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| failed(e.to_string()))? {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(failed(format!("larger than {MAX_JWKS_BYTES} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwks_sources_refuse_plain_http_to_other_machines() {
        assert_eq!(
            JwksSource::parse("https://a.example/jwks.json").unwrap(),
            JwksSource::Url("https://a.example/jwks.json".into())
        );
        for local in [
            "http://127.0.0.1:9/jwks",
            "http://localhost/jwks",
            "http://[::1]:8080/jwks",
        ] {
            assert_eq!(
                JwksSource::parse(local).unwrap(),
                JwksSource::Url(local.into())
            );
        }
        for remote in [
            "http://a.example/jwks",
            "http://127.0.0.1.evil.example/jwks",
            "http://10.0.0.1/jwks",
            "http://u@a.example/jwks",
            // A parser that reads `\` as a path separator connects to evil.example.
            "http://evil.example\\@localhost/jwks",
            "http://user@localhost/jwks",
            "https://user:secret@a.example/jwks",
            "https://a.example:99999/jwks",
            "https:///jwks",
            // Spellings a resolver may take to loopback (or not): refused, never guessed.
            "http://[::ffff:127.0.0.1]/jwks",
            "http://0.0.0.0/jwks",
            "http://127.1/jwks",
            "http://0x7f.0.0.1/jwks",
            "http://2130706433/jwks",
            "http://localhost./jwks",
            "http://LOCALHOST/jwks",
            "http://localhost%2e/jwks",
            "http://localhost:0/jwks",
            "http://localhost:/jwks",
        ] {
            assert!(JwksSource::parse(remote).is_err(), "{remote}");
        }
        assert_eq!(
            JwksSource::parse("keys/jwks.json").unwrap(),
            JwksSource::File("keys/jwks.json".into())
        );
    }

    #[test]
    fn the_base_is_the_resource_origin() {
        let config =
            |resource: &str| AuthConfig::new("i", "a", JwksSource::File("f".into()), resource);
        assert_eq!(
            config("http://127.0.0.1:8080/mcp").base(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            config("https://mcp.example.com").base(),
            "https://mcp.example.com"
        );
        assert_eq!(config("https://h/a/b").base(), "https://h");
    }

    #[test]
    fn unusable_keys_are_left_out() {
        let set: JwkSet = serde_json::from_value(json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {"kty": "OKP", "crv": "Ed25519", "x": "AAAA", "kid": "short"},
            {"kty": "OKP", "crv": "Ed25519", "use": "enc",
             "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "kid": "enc"},
            {"kty": "OKP", "crv": "Ed25519", "alg": "RS256",
             "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "kid": "mismatch"},
            {"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA",
             "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "kid": "good"}
        ]}))
        .unwrap();
        let keys = usable_keys(&set);
        let kids: Vec<_> = keys.iter().filter_map(|k| k.kid.as_deref()).collect();
        assert_eq!(kids, ["good"]);
    }
}
