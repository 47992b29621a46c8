//! The records this crate stores, as they are stored: [`Record`], what a [`Store`](crate::Store)
//! keeps under a [`StoreKey`] (the JSON a backend holds is their serde form), and the instants
//! they keep (Unix nanoseconds). Below the store and every module that stores something.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::answer::AnswerChannel;
use crate::ids::{ApprovalId, ArgsDigest, DefinitionDigest, Principal, ToolName};
use crate::key::{RecordKind, StoreError, StoreKey};
use crate::secret::CsrfToken;

/// A record as this crate stores it: what a [`Store`](crate::Store) keeps under a [`StoreKey`].
///
/// Its contents are this crate's own and opaque to a backend, which keeps the record as it is
/// (the memory store) or as its JSON ([`Record::to_json`], read back with
/// [`Record::from_json`]). Which variant a key holds follows from the key, so a record read back
/// under another kind of key, or JSON that is not the record's, is refused
/// ([`StoreError::Corrupt`]) rather than read as something else.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Record {
    /// Under a key of kind [`Approval`](RecordKind::Approval),
    /// [`RoundTrip`](RecordKind::RoundTrip) or [`Token`](RecordKind::Token): a confirmation token,
    /// a stored approval or a round trip's state (live, or used), or the receipt that one was
    /// stored.
    Bound(BoundRecord),
    /// Under a key of kind [`Page`](RecordKind::Page): an open approval page, the marker that it
    /// closed, its receipt, or the answer given on it.
    Page(PageRecord),
    /// Under a key of kind [`Question`](RecordKind::Question): a question's index, under the
    /// binding of its principal, tool and arguments.
    Question(QuestionIndex),
    /// Under a key of kind [`Question`](RecordKind::Question) whose id ends in `.answer`: the
    /// first answer to a question, whatever the channel it came through.
    Answer(AnswerRecord),
}

/// A token, stored approval or round trip's record ([`Record::Bound`]); opaque.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BoundRecord(pub(crate) Bound);

/// An approval page's record ([`Record::Page`]); opaque.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PageRecord(pub(crate) PageState);

/// The id suffix of the key of a question's answer ([`answer_key`]).
const ANSWER_SUFFIX: &str = ".answer";

impl Record {
    /// The record's JSON, as a backend that keeps text stores it.
    ///
    /// Object keys come out sorted (the text is that of the record's `serde_json::Value`), so
    /// the bytes are the ones this crate has always stored.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] if the record cannot be written (an instant out of range).
    pub fn to_json(&self) -> Result<String, StoreError> {
        serde_json::to_value(self)
            .and_then(|value| serde_json::to_string(&value))
            .map_err(corrupt)
    }

    /// The record stored as `json` under `key`: the variant `key` holds (see [`Record`]).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] if `json` is not a record of that variant.
    pub fn from_json(key: &StoreKey, json: &str) -> Result<Self, StoreError> {
        let record = match key.kind() {
            RecordKind::Approval | RecordKind::RoundTrip | RecordKind::Token => {
                serde_json::from_str(json).map(Self::Bound)
            }
            RecordKind::Page => serde_json::from_str(json).map(Self::Page),
            RecordKind::Question if key.id().ends_with(ANSWER_SUFFIX) => {
                serde_json::from_str(json).map(Self::Answer)
            }
            RecordKind::Question => serde_json::from_str(json).map(Self::Question),
        };
        record.map_err(corrupt)
    }

    /// The bound record held, if that is what this is.
    pub(crate) fn into_bound(self) -> Option<Bound> {
        match self {
            Self::Bound(BoundRecord(bound)) => Some(bound),
            _ => None,
        }
    }

    /// The page record held, if that is what this is.
    pub(crate) fn into_page(self) -> Option<PageState> {
        match self {
            Self::Page(PageRecord(page)) => Some(page),
            _ => None,
        }
    }

    /// The question's index held, if that is what this is.
    pub(crate) fn into_question(self) -> Option<QuestionIndex> {
        match self {
            Self::Question(index) => Some(index),
            _ => None,
        }
    }

    /// The answer held, if that is what this is.
    pub(crate) fn into_answer(self) -> Option<AnswerRecord> {
        match self {
            Self::Answer(answer) => Some(answer),
            _ => None,
        }
    }
}

impl From<Bound> for Record {
    fn from(bound: Bound) -> Self {
        Self::Bound(BoundRecord(bound))
    }
}

impl From<PageState> for Record {
    fn from(page: PageState) -> Self {
        Self::Page(PageRecord(page))
    }
}

impl std::fmt::Debug for StoredApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredApproval")
            .field("id", &self.id)
            .field("arguments", &crate::args::redacted(&self.arguments))
            .field("preview", &self.preview)
            .field("page", &self.page.as_ref().map(|_| ".."))
            .finish()
    }
}

impl std::fmt::Debug for QuestionIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuestionIndex")
            .field("approval", &self.approval)
            .field("asked_at_ns", &self.asked_at_ns)
            .field("expires_at_ns", &self.expires_at_ns)
            .field("page", &self.page.as_ref().map(|_| ".."))
            .finish()
    }
}

fn corrupt(error: serde_json::Error) -> StoreError {
    StoreError::Corrupt(error.to_string())
}

/// A token's, stored approval's or round trip's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "camelCase")]
pub(crate) enum Bound {
    /// Not yet used; under the record's own key until it expires.
    Live(LiveRecord),
    /// Taken (spent, or burned by a mismatched attempt); under the record's own key.
    Used(Tombstone),
    /// That the record was stored, and when it expires; under the receipt key.
    Receipt(Receipt),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Tombstone {
    pub(crate) owner: Principal,
    pub(crate) retain_until_ns: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Receipt {
    pub(crate) owner: Principal,
    pub(crate) expires_at_ns: i64,
    pub(crate) retain_until_ns: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LiveRecord {
    pub(crate) principal: Principal,
    pub(crate) tool: ToolName,
    pub(crate) digest: ArgsDigest,
    /// The tool's definition when the record was made (see
    /// [`ToolDefinition`](crate::ToolDefinition)). Required: a record written before
    /// definitions were bound cannot be read, and is refused like any record the store cannot
    /// read.
    pub(crate) definition: DefinitionDigest,
    pub(crate) issued_at_ns: i64,
    pub(crate) expires_at_ns: i64,
    pub(crate) retain_until_ns: i64,
    /// Boxed: most records (tokens) have none, and a record is moved about whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) approval: Option<Box<StoredApproval>>,
}

/// `Debug` does not print the page's id (the page URL's secret).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StoredApproval {
    pub(crate) id: String,
    pub(crate) arguments: Map<String, Value>,
    pub(crate) preview: Value,
    /// The approval page that asks about it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) page: Option<String>,
}

pub(crate) fn to_ns(t: OffsetDateTime) -> Result<i64, StoreError> {
    i64::try_from(t.unix_timestamp_nanos())
        .map_err(|_| StoreError::Corrupt("time out of range".into()))
}

pub(crate) fn from_ns(ns: i64) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns))
        .map_err(|_| StoreError::Corrupt("time out of range".into()))
}

/// When a record issued at `issued_at` and expiring at `expires_at` may be forgotten: one more
/// lifetime after its expiry (never before the expiry).
pub(crate) fn retain_until(
    issued_at: OffsetDateTime,
    expires_at: OffsetDateTime,
) -> OffsetDateTime {
    let lifetime = expires_at - issued_at;
    if lifetime <= time::Duration::ZERO {
        return expires_at;
    }
    expires_at.checked_add(lifetime).unwrap_or(expires_at)
}

/// The key of the receipt of the record under `key`. Record ids are canonical UUIDs or
/// `sha256-` and a hex digest, none of which holds a `.`, so a receipt key is never the key of a
/// record.
pub(crate) fn receipt_key(key: &StoreKey) -> StoreKey {
    key.with_suffix(".receipt")
}

/// The first answer to a question, under the question's approval id ([`Record::Answer`]);
/// opaque.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerRecord {
    pub(crate) action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) content: Option<Value>,
    pub(crate) channel: AnswerChannel,
    pub(crate) answered_at_ns: i64,
}

/// The key of the answer of the question about `approval`.
pub(crate) fn answer_key(approval: &ApprovalId) -> StoreKey {
    StoreKey::new(RecordKind::Question, format!("{approval}{ANSWER_SUFFIX}"))
}

/// A question's index, under the binding of its principal, tool and arguments
/// ([`Record::Question`]); opaque. `Debug` does not print its page's id (the page URL's secret).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionIndex {
    pub(crate) approval: ApprovalId,
    pub(crate) asked_at_ns: i64,
    pub(crate) expires_at_ns: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) page: Option<String>,
}

/// What a page shows the person: the change as the guard would ask about it in a form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PageSubject {
    /// The tool whose change is approved (for an admin-token request, the target tool).
    pub tool: ToolName,
    /// Its arguments, without the confirmation token.
    pub arguments: Map<String, Value>,
    /// The tool's preview of the change, if it has one.
    pub preview: Option<Value>,
    /// Approving issues a one-time confirmation token for `tool` rather than running it.
    pub issues_token: bool,
}

impl PageSubject {
    /// A page about running `tool` with `arguments`, showing `preview` if there is one.
    pub fn new(tool: ToolName, arguments: Map<String, Value>, preview: Option<Value>) -> Self {
        Self {
            tool,
            arguments,
            preview,
            issues_token: false,
        }
    }

    /// The page asks about issuing a confirmation token for the change, not the change itself.
    #[must_use]
    pub fn issuing_token(mut self) -> Self {
        self.issues_token = true;
        self
    }
}

/// An open page as the store holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct OpenPage {
    /// The approval it asks about.
    pub approval: ApprovalId,
    /// Who made the call: the only person who may answer where people sign in.
    pub principal: Principal,
    /// What it shows.
    pub subject: PageSubject,
    /// The end of the approval clock (exclusive).
    #[serde(with = "as_ns")]
    pub expires_at: OffsetDateTime,
    /// The token its form must carry.
    pub csrf: CsrfToken,
}

/// A time in the store: nanoseconds since the epoch, as the other records keep it.
mod as_ns {
    use serde::{Deserialize, Deserializer, Serializer};
    use time::OffsetDateTime;

    pub(super) fn serialize<S: Serializer>(
        t: &OffsetDateTime,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let ns = super::to_ns(*t).map_err(serde::ser::Error::custom)?;
        serializer.serialize_i64(ns)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<OffsetDateTime, D::Error> {
        super::from_ns(i64::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

/// What the store holds under a page's keys (see [`page`](crate::page)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "camelCase")]
pub(crate) enum PageState {
    Open(Box<OpenPage>),
    Closed { how: Closed },
    Receipt { expires_at_ns: i64 },
    Answer { approve: bool },
}

/// How a page was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Closed {
    Answered,
    Withdrawn,
}

#[cfg(any(test, feature = "test-util"))]
impl Record {
    /// A record of the variant `key` holds, carrying `value` (so records told apart by their
    /// values come back as themselves), for the store's contract tests.
    pub(crate) fn carrying(key: &StoreKey, value: Value) -> Self {
        let principal = Principal::new("conformance");
        let tool = ToolName::new("conformance");
        // Fixed, so that two records carrying the same value are equal.
        let approval = "00000000-0000-4000-8000-000000000000"
            .parse::<ApprovalId>()
            .unwrap_or_else(|_| ApprovalId::random());
        match key.kind() {
            RecordKind::Approval | RecordKind::RoundTrip | RecordKind::Token => {
                Self::from(Bound::Live(LiveRecord {
                    principal,
                    tool,
                    digest: ArgsDigest::from_bytes([0; 32]),
                    definition: DefinitionDigest::from_bytes([0; 32]),
                    issued_at_ns: 0,
                    expires_at_ns: 0,
                    retain_until_ns: 0,
                    approval: Some(Box::new(StoredApproval {
                        id: String::new(),
                        arguments: Map::new(),
                        preview: value,
                        page: None,
                    })),
                }))
            }
            RecordKind::Page => Self::from(PageState::Open(Box::new(OpenPage {
                approval,
                principal,
                subject: PageSubject::new(tool, Map::new(), Some(value)),
                expires_at: OffsetDateTime::UNIX_EPOCH,
                csrf: CsrfToken::fixed(),
            }))),
            RecordKind::Question if key.id().ends_with(ANSWER_SUFFIX) => {
                Self::Answer(AnswerRecord {
                    action: "accept".to_owned(),
                    content: Some(value),
                    channel: AnswerChannel::Form,
                    answered_at_ns: 0,
                })
            }
            RecordKind::Question => Self::Question(QuestionIndex {
                approval,
                asked_at_ns: 0,
                expires_at_ns: 0,
                page: Some(value.to_string()),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn keys() -> [StoreKey; 6] {
        [
            StoreKey::new(RecordKind::Token, "t"),
            StoreKey::new(RecordKind::Approval, "a.receipt"),
            StoreKey::new(RecordKind::RoundTrip, "r"),
            StoreKey::new(RecordKind::Page, "p.answer"),
            StoreKey::new(RecordKind::Question, "q"),
            StoreKey::new(RecordKind::Question, "q.answer"),
        ]
    }

    /// A live record of alice's call of `tool` holding its stored approval `a` of `arguments`
    /// and `preview` (digests of ones and twos, instants 1, 2 and 3).
    fn live_approval(
        tool: &str,
        arguments: serde_json::Value,
        preview: serde_json::Value,
    ) -> Record {
        Record::from(Bound::Live(LiveRecord {
            principal: Principal::new("alice"),
            tool: ToolName::new(tool),
            digest: ArgsDigest::from_bytes([1; 32]),
            definition: DefinitionDigest::from_bytes([2; 32]),
            issued_at_ns: 1,
            expires_at_ns: 2,
            retain_until_ns: 3,
            approval: Some(Box::new(StoredApproval {
                id: "a".to_owned(),
                arguments: arguments.as_object().unwrap().clone(),
                preview,
                page: None,
            })),
        }))
    }

    /// A stored approval of a token-gated call holds the unspent token in its arguments until
    /// the apply spends it: `Debug` of the record (and of a store that holds it) hides it.
    #[test]
    fn debug_of_a_stored_approval_hides_its_confirmation_token() {
        let record = live_approval(
            "delete_order",
            json!({"order": 7, "confirmationToken": "tok-secret"}),
            json!({"order": 7}),
        );
        let shown = format!("{record:?}");
        assert!(!shown.contains("tok-secret"), "{shown}");
        assert!(
            shown.contains("<redacted>") && shown.contains("order"),
            "{shown}"
        );
        assert!(
            record.to_json().unwrap().contains("tok-secret"),
            "the store keeps the token"
        );
    }

    /// The JSON a text backend holds for each kind of record, pinned: keys sorted, instants in
    /// nanoseconds, names as this crate has always written them (camelCase, except the fields
    /// of the page's tagged variants, which serde leaves as they are: `expires_at_ns`). A
    /// record already stored must read back, so none of this may change.
    #[test]
    fn the_json_of_each_record_is_pinned() {
        let live = live_approval(
            "adjust_stock",
            json!({"sku": "A-1", "delta": 2}),
            json!({"before": 1, "after": 3}),
        );
        let ones = "01".repeat(32);
        let twos = "02".repeat(32);
        assert_eq!(
            live.to_json().unwrap(),
            format!(
                r#"{{"approval":{{"arguments":{{"delta":2,"sku":"A-1"}},"id":"a","preview":{{"after":3,"before":1}}}},"definition":"{twos}","digest":"{ones}","expiresAtNs":2,"issuedAtNs":1,"principal":"alice","retainUntilNs":3,"status":"live","tool":"adjust_stock"}}"#
            )
        );
        let used = Record::from(Bound::Used(Tombstone {
            owner: Principal::new("alice"),
            retain_until_ns: 3,
        }));
        assert_eq!(
            used.to_json().unwrap(),
            r#"{"owner":"alice","retainUntilNs":3,"status":"used"}"#
        );
        let closed = Record::from(PageState::Closed {
            how: Closed::Withdrawn,
        });
        assert_eq!(
            closed.to_json().unwrap(),
            r#"{"how":"withdrawn","status":"closed"}"#
        );
        let answer = Record::Answer(AnswerRecord {
            action: "accept".to_owned(),
            content: Some(json!({"approve": true})),
            channel: AnswerChannel::Page,
            answered_at_ns: 4,
        });
        assert_eq!(
            answer.to_json().unwrap(),
            r#"{"action":"accept","answeredAtNs":4,"channel":"page","content":{"approve":true}}"#
        );
        let index = Record::Question(QuestionIndex {
            approval: "00000000-0000-4000-8000-000000000000".parse().unwrap(),
            asked_at_ns: 1,
            expires_at_ns: 2,
            page: None,
        });
        assert_eq!(
            index.to_json().unwrap(),
            r#"{"approval":"00000000-0000-4000-8000-000000000000","askedAtNs":1,"expiresAtNs":2}"#
        );
        let receipt = Record::from(Bound::Receipt(Receipt {
            owner: Principal::new("alice"),
            expires_at_ns: 2,
            retain_until_ns: 3,
        }));
        assert_eq!(
            receipt.to_json().unwrap(),
            r#"{"expiresAtNs":2,"owner":"alice","retainUntilNs":3,"status":"receipt"}"#
        );
        let open = Record::from(PageState::Open(Box::new(OpenPage {
            approval: "00000000-0000-4000-8000-000000000000".parse().unwrap(),
            principal: Principal::new("alice"),
            subject: PageSubject::new(
                ToolName::new("adjust_stock"),
                json!({"sku": "A-1"}).as_object().unwrap().clone(),
                Some(json!({"before": 1, "after": 3})),
            )
            .issuing_token(),
            expires_at: OffsetDateTime::UNIX_EPOCH + time::Duration::nanoseconds(5),
            csrf: CsrfToken::fixed(),
        })));
        let csrf = "5a".repeat(32);
        assert_eq!(
            open.to_json().unwrap(),
            format!(
                r#"{{"approval":"00000000-0000-4000-8000-000000000000","csrf":"{csrf}","expiresAt":5,"principal":"alice","status":"open","subject":{{"arguments":{{"sku":"A-1"}},"issuesToken":true,"preview":{{"after":3,"before":1}},"tool":"adjust_stock"}}}}"#
            )
        );
        let page_receipt = Record::from(PageState::Receipt { expires_at_ns: 5 });
        assert_eq!(
            page_receipt.to_json().unwrap(),
            r#"{"expires_at_ns":5,"status":"receipt"}"#
        );
        let page_answer = Record::from(PageState::Answer { approve: true });
        assert_eq!(
            page_answer.to_json().unwrap(),
            r#"{"approve":true,"status":"answer"}"#
        );
        // Debug shows no secret: neither the CSRF token nor a page's id.
        let index_with_page = QuestionIndex {
            approval: "00000000-0000-4000-8000-000000000000".parse().unwrap(),
            asked_at_ns: 1,
            expires_at_ns: 2,
            page: Some("ab".repeat(32)),
        };
        for shown in [format!("{open:?}"), format!("{index_with_page:?}")] {
            assert!(
                !shown.contains(&csrf) && !shown.contains(&"ab".repeat(32)),
                "{shown}"
            );
        }
        // Each reads back as itself under the key it is stored under.
        let under = [
            (receipt, "token:t.receipt"),
            (open, "page:p"),
            (page_receipt, "page:p.receipt"),
            (page_answer, "page:p.answer"),
            (live, "token:t"),
            (used, "approval:a"),
            (closed, "page:p"),
            (answer, "question:q.answer"),
            (index, "question:q"),
        ];
        for (record, key) in under {
            let (kind, id) = key.split_once(':').unwrap();
            let kind = keys()
                .into_iter()
                .find(|k| k.kind().as_str() == kind)
                .unwrap()
                .kind();
            let key = StoreKey::new(kind, id);
            assert_eq!(
                Record::from_json(&key, &record.to_json().unwrap()),
                Ok(record)
            );
        }
    }

    /// What a key holds follows from the key: the JSON of a record of another variant, or text
    /// that is no record at all, is refused as corrupt rather than read as something else.
    #[test]
    fn a_record_under_a_key_of_another_variant_is_refused() {
        for stored in keys() {
            let record = Record::carrying(&stored, json!("x"));
            let text = record.to_json().unwrap();
            for read in keys() {
                let same = Record::carrying(&read, json!("x")) == record;
                let back = Record::from_json(&read, &text);
                if same {
                    assert_eq!(back, Ok(record.clone()), "{stored} read as {read}");
                } else {
                    assert!(
                        matches!(back, Err(StoreError::Corrupt(_))),
                        "{stored} read as {read}: {back:?}"
                    );
                }
            }
            for junk in ["", "null", "{}", "[]", r#"{"status":"bogus"}"#, "{} {}"] {
                assert!(
                    matches!(
                        Record::from_json(&stored, junk),
                        Err(StoreError::Corrupt(_))
                    ),
                    "{junk:?} under {stored}"
                );
            }
        }
    }

    proptest! {
        /// Every record comes back from its JSON as it was, whatever it carries.
        #[test]
        fn every_record_comes_back_from_its_json(
            which in 0..6_usize,
            text in any::<String>(),
            number in any::<i64>(),
            float in any::<f64>().prop_filter("finite", |f| f.is_finite()),
        ) {
            let key = keys()[which].clone();
            let record = Record::carrying(&key, json!({"text": text, "n": number, "f": float}));
            prop_assert_eq!(Record::from_json(&key, &record.to_json().unwrap()), Ok(record));
        }
    }
}
