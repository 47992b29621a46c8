#![doc = include_str!("../README.md")]

use std::time::Duration;

use mcp_write_guard_core::{
    ApprovalPolicy, Principal, Store, StoreError,
    policy::DEFAULT_PER_PRINCIPAL_CAP,
    store::{BoxFuture, Record, StoreKey},
};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script};
use time::OffsetDateTime;

#[cfg(test)]
mod attack_tests;
#[cfg(test)]
mod conformance;
#[cfg(test)]
mod definition_tests;
#[cfg(test)]
mod expiry_tests;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;

/// The prefix keys get unless [`RedisStoreBuilder::prefix`] says otherwise.
pub const DEFAULT_PREFIX: &str = "mcp-write-guard";

/// How long an operation may take, connecting included, before it fails as unavailable.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// How much longer than its lifetime Redis keeps a record (a few replicas' clocks apart, a late
/// attempt is still told "expired" rather than "unknown").
pub const TTL_SLACK: Duration = Duration::from_secs(1);

/// Stores a record. KEYS: the record, its principal's set. ARGV: now, expires_at (milliseconds
/// since the epoch), TTL in milliseconds, "1" if counted, the cap, the record's JSON.
///
/// Replies `ok`, `exists` (a live record holds the key) or `cap` (the principal is full).
const INSERT: &str = r"
local now = tonumber(ARGV[1])
local ttl = tonumber(ARGV[3])
local counted = ARGV[4] == '1'
local held = redis.call('HGET', KEYS[1], 'e')
if held and not string.match(held, '^%-?%d+$') then
  return redis.error_reply('CORRUPT expiry is not a whole number')
end
if held and tonumber(held) > now then
  return 'exists'
end
if counted then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then
    return 'cap'
  end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'e', ARGV[2], 'z', counted and KEYS[2] or '', 'r', ARGV[6])
-- The record's TTL first: Redis may time each PEXPIRE from its own clock reading, and the
-- principal's set, timed after it, then never expires before its member.
redis.call('PEXPIRE', KEYS[1], ttl)
if counted then
  redis.call('ZADD', KEYS[2], ARGV[2], KEYS[1])
  if redis.call('PTTL', KEYS[2]) < ttl then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end
return 'ok'
";

/// Takes a record. KEYS: the record. ARGV: now (milliseconds since the epoch).
///
/// Deletes the record and frees its principal's place whether or not it is live; replies with the
/// record's JSON if it was live, nil otherwise, and an error (having deleted it) if its expiry is
/// not a whole number.
const TAKE: &str = r"
local v = redis.call('HMGET', KEYS[1], 'e', 'z', 'r')
if not v[1] then
  return false
end
redis.call('DEL', KEYS[1])
if v[2] and v[2] ~= '' then
  redis.call('ZREM', v[2], KEYS[1])
end
if not string.match(v[1], '^%-?%d+$') then
  return redis.error_reply('CORRUPT expiry is not a whole number')
end
if tonumber(v[1]) <= tonumber(ARGV[1]) then
  return false
end
return v[3]
";

/// A [`Store`] on one Redis server, shared by every replica that uses the same prefix.
///
/// Cloning is cheap: clones share one connection (multiplexed, reconnecting by itself).
#[derive(Clone, derive_more::Debug)]
pub struct RedisStore {
    #[debug(skip)]
    connection: ConnectionManager,
    prefix: String,
    per_principal_cap: usize,
    timeout: Duration,
    #[debug(skip)]
    replicas: Option<(usize, Duration)>,
    #[debug(skip)]
    insert: Script,
    #[debug(skip)]
    take: Script,
}

/// Why a [`RedisStore`] could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not a Redis URL (`redis://[USER:PASSWORD@]HOST[:PORT][/DB]`).
    #[error("not a Redis URL ({0}); expected redis://HOST[:PORT][/DB]")]
    InvalidUrl(String),
    /// The prefix is empty, too long, or holds a character other than ASCII letters, digits,
    /// `.`, `_` and `-`.
    #[error(
        "the key prefix {0:?} must be 1 to 64 ASCII letters, digits, '.', '_' or '-' (no ':', so \
         that no prefix's keys fall inside another's)"
    )]
    InvalidPrefix(String),
    /// Redis did not answer (only [`RedisStoreBuilder::connect`], not
    /// [`RedisStoreBuilder::connect_lazy`]).
    #[error("Redis did not answer: {0}")]
    Unreachable(String),
}

/// Configures a [`RedisStore`]; made by [`RedisStore::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct RedisStoreBuilder {
    url: String,
    prefix: String,
    per_principal_cap: usize,
    timeout: Duration,
    replicas: Option<(usize, Duration)>,
}

impl RedisStore {
    /// Starts configuring a store on the Redis at `url`
    /// (`redis://[USER:PASSWORD@]HOST[:PORT][/DB]`), with prefix [`DEFAULT_PREFIX`], the default
    /// per-principal cap (64) and timeout ([`DEFAULT_TIMEOUT`]).
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder {
            url: url.into(),
            prefix: DEFAULT_PREFIX.to_owned(),
            per_principal_cap: DEFAULT_PER_PRINCIPAL_CAP,
            timeout: DEFAULT_TIMEOUT,
            replicas: None,
        }
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Asks Redis for a `PONG`: whether the store can be used now.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let ping = redis::cmd("PING");
        let reply: String = self.run(ping.query_async(&mut connection)).await?;
        if reply == "PONG" {
            Ok(())
        } else {
            Err(StoreError::Unavailable(format!(
                "Redis answered PING with {reply:?}"
            )))
        }
    }

    fn record_key(&self, key: &StoreKey) -> String {
        format!("{}:{}:{}", self.prefix, key.kind().as_str(), key.id())
    }

    fn principal_key(&self, principal: &Principal) -> String {
        format!("{}:principal:{}", self.prefix, principal.as_str())
    }

    /// Runs one request within the timeout; every failure is a store failure.
    async fn run<T>(
        &self,
        request: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.timeout, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => Err(unavailable(&err)),
            Err(_) => Err(StoreError::Unavailable(format!(
                "Redis did not answer within {} ms",
                self.timeout.as_millis()
            ))),
        }
    }

    async fn insert_entry(
        &self,
        key: StoreKey,
        principal: &Principal,
        record: Record,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
        counted: bool,
    ) -> Result<(), StoreError> {
        let (now, expires) = (millis(now), millis(expires_at));
        if expires <= now {
            return Ok(());
        }
        let slack = i64::try_from(TTL_SLACK.as_millis()).unwrap_or(i64::MAX);
        let ttl = (expires - now).saturating_add(slack);
        let record = record.to_json()?;
        let mut connection = self.connection.clone();
        let mut invocation = self.insert.key(self.record_key(&key));
        invocation
            .key(self.principal_key(principal))
            .arg(now)
            .arg(expires)
            .arg(ttl)
            .arg(if counted { "1" } else { "0" })
            .arg(self.per_principal_cap)
            .arg(record);
        let reply: String = self.run(invocation.invoke_async(&mut connection)).await?;
        match reply.as_str() {
            "ok" => Ok(()),
            "exists" => Err(StoreError::KeyExists),
            "cap" => Err(StoreError::PrincipalCapReached {
                cap: self.per_principal_cap,
            }),
            other => Err(StoreError::Corrupt(format!(
                "unexpected reply to an insert: {other:?}"
            ))),
        }
    }

    async fn take_entry(
        &self,
        key: &StoreKey,
        now: OffsetDateTime,
    ) -> Result<Option<Record>, StoreError> {
        let mut connection = self.connection.clone();
        let mut invocation = self.take.key(self.record_key(key));
        invocation.arg(millis(now));
        let reply: Option<String> = self.run(invocation.invoke_async(&mut connection)).await?;
        if let (Some(_), Some((replicas, within))) = (&reply, self.replicas) {
            // Granted on the primary: grant only once enough replicas hold the take too, so that
            // a replica promoted after a failover cannot grant the record again.
            let mut wait = redis::cmd("WAIT");
            wait.arg(replicas)
                .arg(u64::try_from(within.as_millis()).unwrap_or(u64::MAX).max(1));
            let confirmed: usize = self.run(wait.query_async(&mut connection)).await?;
            if confirmed < replicas {
                return Err(StoreError::Unavailable(format!(
                    "the take reached {confirmed} of {replicas} Redis replicas in time"
                )));
            }
        }
        reply.map(|json| Record::from_json(key, &json)).transpose()
    }

    async fn get_entry(
        &self,
        key: &StoreKey,
        now: OffsetDateTime,
    ) -> Result<Option<Record>, StoreError> {
        let mut connection = self.connection.clone();
        let mut hmget = redis::cmd("HMGET");
        hmget.arg(self.record_key(key)).arg("e").arg("r");
        let (expires, record): (Option<String>, Option<String>) =
            self.run(hmget.query_async(&mut connection)).await?;
        let (Some(expires), Some(record)) = (expires, record) else {
            return Ok(None);
        };
        let expires: i64 = expires
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("expiry {expires:?} is not a number")))?;
        if expires <= millis(now) {
            return Ok(None);
        }
        Record::from_json(key, &record).map(Some)
    }
}

impl RedisStoreBuilder {
    /// The prefix of every key this store writes (default [`DEFAULT_PREFIX`]): 1 to 64 ASCII
    /// letters, digits, `.`, `_` or `-`. Replicas of one server use the same prefix; other
    /// servers sharing the Redis use others.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The most live approvals, round trips, pages and tokens one principal may hold at once
    /// (default 64).
    pub fn per_principal_cap(mut self, cap: usize) -> Self {
        self.per_principal_cap = cap;
        self
    }

    /// The per-principal cap of `policy` (pass the guard's policy, so that the two agree).
    pub fn for_policy(self, policy: &ApprovalPolicy) -> Self {
        self.per_principal_cap(policy.per_principal_cap)
    }

    /// How long one operation may take, reconnecting included, before it fails as unavailable
    /// (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Grants a take only once `replicas` Redis replicas hold it, waiting at most `within`
    /// (`WAIT` after each take that finds a live record); otherwise the take fails as
    /// unavailable, the record spent and not granted. Without it (the default), a failover to a
    /// replica that had not yet heard of a take can grant that record again. The wait is a
    /// request of its own, so keep `within` below the timeout.
    pub fn wait_for_replicas(mut self, replicas: usize, within: Duration) -> Self {
        self.replicas = (replicas > 0).then_some((replicas, within));
        self
    }

    /// Connects, and fails when Redis does not answer within the timeout.
    pub async fn connect(self) -> Result<RedisStore, ConnectError> {
        let store = self.connect_lazy()?;
        store
            .ping()
            .await
            .map_err(|err| ConnectError::Unreachable(err.to_string()))?;
        Ok(store)
    }

    /// Makes the store without waiting for Redis: the first operation connects, and until Redis
    /// answers every operation fails as unavailable (so the guard refuses writes). Use it when
    /// a server may start before its Redis; [`RedisStore::ping`] tells whether Redis answers.
    ///
    /// Must be called inside a tokio runtime.
    pub fn connect_lazy(self) -> Result<RedisStore, ConnectError> {
        if self.prefix.is_empty()
            || self.prefix.len() > 64
            || !self
                .prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(ConnectError::InvalidPrefix(self.prefix));
        }
        let client = redis::Client::open(self.url.as_str())
            .map_err(|err| ConnectError::InvalidUrl(err.to_string()))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(1));
        let connection = client
            .get_connection_manager_lazy(config)
            .map_err(|err| ConnectError::InvalidUrl(err.to_string()))?;
        Ok(RedisStore {
            connection,
            prefix: self.prefix,
            per_principal_cap: self.per_principal_cap,
            timeout: self.timeout,
            replicas: self.replicas,
            insert: Script::new(INSERT),
            take: Script::new(TAKE),
        })
    }
}

impl Store for RedisStore {
    fn insert<'a>(
        &'a self,
        key: StoreKey,
        principal: &'a Principal,
        record: Record,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.insert_entry(key, principal, record, expires_at, now, true))
    }

    fn insert_tombstone<'a>(
        &'a self,
        key: StoreKey,
        principal: &'a Principal,
        record: Record,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.insert_entry(key, principal, record, expires_at, now, false))
    }

    fn take<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Record>, StoreError>> {
        Box::pin(self.take_entry(key, now))
    }

    fn get<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Record>, StoreError>> {
        Box::pin(self.get_entry(key, now))
    }

    /// Does nothing: Redis expires every record by its TTL.
    fn purge_expired(&self, _now: OffsetDateTime) -> BoxFuture<'_, Result<usize, StoreError>> {
        Box::pin(async { Ok(0) })
    }
}

/// Milliseconds since the epoch, rounded down.
fn millis(t: OffsetDateTime) -> i64 {
    let ms = t.unix_timestamp_nanos().div_euclid(1_000_000);
    i64::try_from(ms).unwrap_or(if ms < 0 { i64::MIN } else { i64::MAX })
}

/// A Redis failure as the store's failure. The message names the kind of failure, never the
/// URL (which may hold a password).
fn unavailable(err: &RedisError) -> StoreError {
    if err.code() == Some("CORRUPT") {
        return StoreError::Corrupt(err.detail().unwrap_or("unreadable record").to_owned());
    }
    let what = if err.is_timeout() {
        "timed out"
    } else if err.is_connection_refusal() {
        "connection refused"
    } else if err.is_connection_dropped() || err.is_io_error() {
        "connection lost"
    } else {
        "request failed"
    };
    StoreError::Unavailable(format!("Redis {what}: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_write_guard_core::store::RecordKind;

    #[test]
    fn milliseconds_round_down() {
        let t = OffsetDateTime::from_unix_timestamp_nanos(1_500_999_999)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        assert_eq!(millis(t), 1_500);
        let before_epoch =
            OffsetDateTime::from_unix_timestamp_nanos(-1).unwrap_or(OffsetDateTime::UNIX_EPOCH);
        assert_eq!(millis(before_epoch), -1);
    }

    #[tokio::test]
    async fn a_prefix_with_a_separator_or_nothing_in_it_is_refused() {
        for prefix in ["", "a:b", "a b", "é", &"x".repeat(65)] {
            let made = RedisStore::builder("redis://127.0.0.1:1")
                .prefix(prefix)
                .connect_lazy();
            assert!(
                matches!(made, Err(ConnectError::InvalidPrefix(_))),
                "{prefix:?}: {made:?}"
            );
        }
        let made = RedisStore::builder("redis://127.0.0.1:1")
            .prefix("shop-1.eu_west")
            .connect_lazy();
        assert!(made.is_ok(), "{made:?}");
    }

    #[tokio::test]
    async fn debug_shows_neither_the_url_nor_its_password() {
        let made = RedisStore::builder("redis://shop:hunter2@127.0.0.1:1/2")
            .prefix("shop-eu")
            .per_principal_cap(8)
            .timeout(Duration::from_millis(300))
            .connect_lazy();
        let Ok(store) = made else {
            panic!("lazy connect failed: {made:?}");
        };
        assert_eq!(
            format!("{store:?}"),
            r#"RedisStore { prefix: "shop-eu", per_principal_cap: 8, timeout: 300ms, .. }"#
        );
        let alternate = format!("{store:#?}");
        for hidden in ["hunter2", "127.0.0.1"] {
            assert!(!alternate.contains(hidden), "{alternate}");
        }
    }

    #[tokio::test]
    async fn a_url_that_is_not_redis_is_refused() {
        let made = RedisStore::builder("http://127.0.0.1:6379").connect_lazy();
        assert!(matches!(made, Err(ConnectError::InvalidUrl(_))), "{made:?}");
    }

    #[tokio::test]
    async fn nobody_listening_is_unavailable_within_the_timeout() {
        // A port nothing listens on: bind one, then let it go.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(1);
        let store = RedisStore::builder(format!("redis://127.0.0.1:{port}"))
            .timeout(Duration::from_millis(300))
            .connect_lazy();
        let Ok(store) = store else {
            panic!("lazy connect failed: {store:?}");
        };
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        let key = StoreKey::new(RecordKind::Token, "t");
        let inserted = store
            .insert(
                key.clone(),
                &Principal::new("p"),
                mcp_write_guard_core::store_conformance::record(0),
                now + time::Duration::minutes(5),
                now,
            )
            .await;
        assert!(
            matches!(inserted, Err(StoreError::Unavailable(_))),
            "{inserted:?}"
        );
        crate::test_util::assert_take_and_get_unavailable(&store, &key, now).await;
        let connect = RedisStore::builder(format!("redis://127.0.0.1:{port}"))
            .timeout(Duration::from_millis(300))
            .connect()
            .await;
        assert!(
            matches!(connect, Err(ConnectError::Unreachable(_))),
            "{connect:?}"
        );
    }
}
