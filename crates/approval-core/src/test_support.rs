//! Helpers for this crate's unit tests.

use futures_util::FutureExt as _;
use std::future::Future;

use time::OffsetDateTime;

use crate::ids::Principal;
use crate::store::{BoxFuture, Record, Store, StoreError, StoreKey};

/// Polls a future once and returns its output: the memory store's futures are ready at once,
/// and a future that is not is a bug in the test.
pub(crate) fn ready<F: Future>(f: F) -> F::Output {
    f.now_or_never().expect("future was not ready")
}

/// A store whose every call fails, or whose takes and reads find the JSON text `Garbage` holds
/// under whatever key is asked (what a backend that keeps text would read back after someone
/// changed it).
#[derive(Debug)]
pub(crate) enum BrokenStore {
    Unavailable,
    Garbage(String),
}

impl Store for BrokenStore {
    fn insert<'a>(
        &'a self,
        _key: StoreKey,
        _principal: &'a Principal,
        _record: Record,
        _expires_at: OffsetDateTime,
        _now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.answer(|_| Ok(()))
    }

    fn take<'a>(
        &'a self,
        key: &'a StoreKey,
        _now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Record>, StoreError>> {
        self.answer(|text| Record::from_json(key, text).map(Some))
    }

    fn get<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Record>, StoreError>> {
        self.take(key, now)
    }

    fn purge_expired(&self, _now: OffsetDateTime) -> BoxFuture<'_, Result<usize, StoreError>> {
        Self::Unavailable.answer(|_| Ok(0))
    }
}

impl BrokenStore {
    /// What a call answers at once: [`StoreError::Unavailable`] from a store that is down, or
    /// `read` of the text a garbled one holds.
    fn answer<'a, T: Send + 'a>(
        &self,
        read: impl FnOnce(&str) -> Result<T, StoreError>,
    ) -> BoxFuture<'a, Result<T, StoreError>> {
        let result = match self {
            Self::Unavailable => Err(StoreError::Unavailable("down".into())),
            Self::Garbage(text) => read(text),
        };
        Box::pin(std::future::ready(result))
    }
}

/// A [`MemoryStore`](crate::MemoryStore) that passes every record through its JSON text on the
/// way in ([`Record::to_json`], then [`Record::from_json`] under its key): what a backend that
/// keeps text does. Clones share the same store.
#[derive(Debug, Clone, Default)]
pub(crate) struct ThroughJson(pub(crate) std::sync::Arc<crate::MemoryStore>);

impl ThroughJson {
    fn through(key: &StoreKey, record: &Record) -> Result<Record, StoreError> {
        Record::from_json(key, &record.to_json()?)
    }

    /// `next` with the record back from its JSON text, or at once the error its trip met.
    fn then<'a>(
        through: Result<Record, StoreError>,
        next: impl FnOnce(Record) -> BoxFuture<'a, Result<(), StoreError>>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        match through {
            Ok(record) => next(record),
            Err(error) => Box::pin(std::future::ready(Err(error))),
        }
    }
}

impl Store for ThroughJson {
    fn insert<'a>(
        &'a self,
        key: StoreKey,
        principal: &'a Principal,
        record: Record,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Self::then(Self::through(&key, &record), |record| {
            self.0.insert(key, principal, record, expires_at, now)
        })
    }

    fn insert_tombstone<'a>(
        &'a self,
        key: StoreKey,
        principal: &'a Principal,
        record: Record,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Self::then(Self::through(&key, &record), |record| {
            self.0
                .insert_tombstone(key, principal, record, expires_at, now)
        })
    }

    fn take<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Record>, StoreError>> {
        self.0.take(key, now)
    }

    fn get<'a>(
        &'a self,
        key: &'a StoreKey,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<Record>, StoreError>> {
        self.0.get(key, now)
    }

    fn purge_expired(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<usize, StoreError>> {
        self.0.purge_expired(now)
    }
}

/// The digest of a tool definition, for records whose definition the test does not change.
pub(crate) fn definition() -> crate::ids::DefinitionDigest {
    crate::ids::DefinitionDigest::from_bytes([0xd1; 32])
}

/// The digest of another definition of the same tool.
pub(crate) fn other_definition() -> crate::ids::DefinitionDigest {
    crate::ids::DefinitionDigest::from_bytes([0xd2; 32])
}

/// A token's text, parsed as it is at the adapter's edge.
pub(crate) fn tid(text: &str) -> crate::ids::TokenId {
    text.parse().expect("a token's one spelling")
}

/// A round-trip state's text, parsed as it is at the adapter's edge.
pub(crate) fn sid(text: &str) -> crate::ids::StateId {
    text.parse().expect("a state's one spelling")
}

/// Alice's approval of `adjust_stock` (`{"sku": "A-1", "delta": 20}`, stock 5 to 25), asked at
/// `now` under `policy`: the approval most tests ask about.
pub(crate) fn adjust_stock(
    now: OffsetDateTime,
    policy: &crate::ApprovalPolicy,
) -> crate::PendingApproval {
    let args = crate::CapturedArgs::capture_value(
        &serde_json::json!({"sku": "A-1", "delta": 20}),
        &crate::canonical::ArgLimits::default(),
    )
    .expect("small arguments");
    crate::PendingApproval::new(
        Principal::new("alice"),
        crate::ToolName::new("adjust_stock"),
        definition(),
        args,
        serde_json::json!({"before": 5, "after": 25}),
        now,
        policy,
    )
}

/// Asserts that no two of `all` share a name.
pub(crate) fn assert_names_distinct<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) {
    let names: std::collections::HashSet<_> = all.iter().copied().map(name).collect();
    assert_eq!(names.len(), all.len(), "two share a name");
}

/// What the page and round-trip tests work on: an empty memory store, a manual clock, and the
/// [`adjust_stock`] approval asked when the clock starts.
pub(crate) struct Fixture {
    pub(crate) store: crate::MemoryStore,
    pub(crate) clock: crate::clock::ManualClock,
    pub(crate) pending: crate::PendingApproval,
}

/// A fresh [`Fixture`].
pub(crate) fn fixture() -> Fixture {
    use crate::clock::Clock as _;
    let clock = crate::clock::ManualClock::default();
    let pending = adjust_stock(clock.now(), &crate::ApprovalPolicy::default());
    Fixture {
        store: crate::MemoryStore::new(),
        clock,
        pending,
    }
}

/// Small JSON scalars: null, booleans, `i32`s, and strings matching the regex `text`.
pub(crate) fn small_leaf(
    text: &'static str,
) -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    use serde_json::Value;
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| serde_json::json!(n)),
        text.prop_map(Value::String),
    ]
}

/// Small JSON values over [`small_leaf`]: up to three levels of arrays and of objects whose keys
/// match `[a-c]{1,2}`.
pub(crate) fn small_json(
    text: &'static str,
) -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    use serde_json::Value;
    small_leaf(text).prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]{1,2}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The JSON text of `v` with every object's keys written in reverse order.
pub(crate) fn reversed_text(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            let members: Vec<String> = map
                .iter()
                .rev()
                .map(|(k, v)| format!("{}:{}", Value::String(k.clone()), reversed_text(v)))
                .collect();
            format!("{{{}}}", members.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(reversed_text).collect();
            format!("[{}]", items.join(","))
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => v.to_string(),
    }
}

/// `v` captured as a call's arguments under the default limits.
pub(crate) fn args(v: serde_json::Value) -> crate::CapturedArgs {
    crate::CapturedArgs::capture_value(&v, &crate::canonical::ArgLimits::default())
        .expect("arguments within the default limits")
}

/// The object `value` is.
///
/// # Panics
/// When `value` is not an object.
pub(crate) fn object(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map,
        _ => panic!("not an object"),
    }
}

/// Cc, Cf, Zl, Zp: the categories no rendered text or change row may carry.
pub(crate) fn forbidden(c: char) -> bool {
    use unicode_general_category::{GeneralCategory, get_general_category};
    matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}
