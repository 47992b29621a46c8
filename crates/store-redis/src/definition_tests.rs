//! Approvals and tokens kept in Redis carry the digest of their tool's definition, as the memory
//! store keeps them: it comes back with a stored approval, and a token spends only for the
//! definition it was issued for. A record without one (as written before definitions were
//! bound) grants nothing.

use mcp_write_guard_core::store_conformance::T0;
use mcp_write_guard_core::{
    ApprovalId, ApprovalPolicy, Approvals, Binding, CapturedArgs, PendingApproval, Principal,
    Store, ToolDefinition, ToolName,
    canonical::ArgLimits,
    ids::DefinitionDigest,
    page::PageSubject,
    round_trip::RoundTripRejection,
    store::{Record, RecordKind, StoreKey},
    token::TokenRejection,
};
use serde_json::{Value, json};

use crate::RedisStore;
use crate::test_util::redis_url;

/// A record's JSON, as Redis holds it.
fn as_json(record: &Record) -> Value {
    serde_json::from_str(&record.to_json().unwrap()).unwrap()
}

async fn fresh_store(url: &str) -> RedisStore {
    let prefix = format!("definition-{}", uuid::Uuid::new_v4().simple());
    match RedisStore::builder(url).prefix(prefix).connect().await {
        Ok(store) => store,
        Err(err) => panic!("{url}: {err}"),
    }
}

/// `delete_order` as the server defines it, with this description.
fn definition(description: &str) -> DefinitionDigest {
    let schema = json!({"type": "object", "properties": {"orderId": {"type": "integer"}}});
    let Some(schema) = schema.as_object() else {
        panic!("a schema object");
    };
    match ToolDefinition::new("delete_order", schema)
        .with_description(Some(description))
        .digest()
    {
        Ok(digest) => digest,
        Err(err) => panic!("{err}"),
    }
}

fn args() -> CapturedArgs {
    match CapturedArgs::capture_value(&json!({"orderId": 42}), &ArgLimits::default()) {
        Ok(args) => args,
        Err(err) => panic!("{err}"),
    }
}

/// Who asks, for which tool, with which arguments, in every test here.
fn alice_deletes() -> (Principal, ToolName, CapturedArgs) {
    (
        Principal::new("alice"),
        ToolName::new("delete_order"),
        args(),
    )
}

/// The id a token's or a page's key is given: `sha256-` and the bearer value's SHA-256, in hex.
fn sha256_hex(secret: &str) -> String {
    use sha2::{Digest, Sha256};
    format!("sha256-{}", hex::encode(Sha256::digest(secret.as_bytes())))
}

/// The record under `kind` and `id`, as the store reads it back from Redis.
async fn stored(store: &RedisStore, kind: RecordKind, id: &str) -> Record {
    let record = store.get(&StoreKey::new(kind, id), T0).await;
    let Ok(Some(record)) = record else {
        panic!("{record:?}");
    };
    record
}

/// Stores alice's approval of `delete_order` under `definition`, with this preview; returns it
/// and its id.
async fn store_approval(
    store: &RedisStore,
    definition: DefinitionDigest,
    preview: Value,
) -> (PendingApproval, ApprovalId) {
    let (alice, tool, args) = alice_deletes();
    let pending = PendingApproval::new(
        alice,
        tool,
        definition,
        args,
        preview,
        T0,
        &ApprovalPolicy::default(),
    );
    match Approvals::new(store).store_approval(&pending, T0).await {
        Ok(id) => (pending, id),
        Err(err) => panic!("{err}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_in_redis_spends_only_for_the_definition_it_was_issued_for() {
    let redis = redis_url();
    let store = fresh_store(redis.url()).await;
    let policy = ApprovalPolicy::default();
    let (alice, tool, args) = alice_deletes();
    let (issued_for, rewritten) = (definition("Delete one order."), definition("Delete all."));
    let token = match Approvals::new(&store)
        .issue_token(Binding::new(&alice, &tool, &args), issued_for, &policy, T0)
        .await
    {
        Ok(token) => token,
        Err(err) => panic!("{err}"),
    };
    // The record as Redis holds it names the definition.
    let record = stored(&store, RecordKind::Token, &sha256_hex(token.as_str())).await;
    assert_eq!(as_json(&record)["definition"], json!(issued_for.to_hex()));

    let id = token.id();
    let check = |definition| {
        Approvals::new(&store).check_token(&id, Binding::new(&alice, &tool, &args), definition, T0)
    };
    assert_eq!(check(rewritten).await, Err(TokenRejection::ToolChanged));
    assert_eq!(check(issued_for).await, Ok(()), "a check burns nothing");
    let spend = |definition| {
        Approvals::new(&store).spend_token(&id, Binding::new(&alice, &tool, &args), definition, T0)
    };
    assert_eq!(spend(rewritten).await, Err(TokenRejection::ToolChanged));
    assert_eq!(
        spend(issued_for).await,
        Err(TokenRejection::AlreadySpent),
        "the spend for another definition used the token up"
    );

    let other = match Approvals::new(&store)
        .issue_token(Binding::new(&alice, &tool, &args), issued_for, &policy, T0)
        .await
    {
        Ok(token) => token,
        Err(err) => panic!("{err}"),
    };
    let spent = Approvals::new(&store)
        .spend_token(
            &other.id(),
            Binding::new(&alice, &tool, &args),
            issued_for,
            T0,
        )
        .await;
    assert_eq!(spent, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_in_redis_comes_back_with_its_definition() {
    let redis = redis_url();
    let store = fresh_store(redis.url()).await;
    let (alice, tool, args) = alice_deletes();
    let asked_for = definition("Delete one order.");
    let (pending, id) =
        store_approval(&store, asked_for, json!({"before": "open", "after": null})).await;
    let record = stored(&store, RecordKind::Approval, &id.to_string()).await;
    assert_eq!(as_json(&record)["definition"], json!(asked_for.to_hex()));
    let taken = Approvals::new(&store)
        .take_approval(id, Binding::new(&alice, &tool, &args), T0)
        .await;
    let Ok(taken) = taken else {
        panic!("{taken:?}");
    };
    assert_eq!(taken.definition(), asked_for);
    assert_eq!(taken, pending, "everything the question bound comes back");
}

/// A live record without a definition (as a version before definitions were bound wrote it)
/// is not read: it grants nothing, and is refused as a record the store cannot read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_without_a_definition_grants_nothing() {
    let redis = redis_url();
    let store = fresh_store(redis.url()).await;
    let (alice, tool, args) = alice_deletes();
    let (_, id) = store_approval(&store, definition("Delete one order."), Value::Null).await;
    let record = stored(&store, RecordKind::Approval, &id.to_string()).await;
    let mut record = as_json(&record);
    let Some(fields) = record.as_object_mut() else {
        panic!("{record}");
    };
    assert!(fields.remove("definition").is_some());
    // The older record in its place: the same entry (expiry, owner), the record's text without
    // its definition.
    let redis_key = format!(
        "{}:{}:{}",
        store.prefix(),
        RecordKind::Approval.as_str(),
        id
    );
    let mut admin = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let replaced: u64 = redis::cmd("HSET")
        .arg(&redis_key)
        .arg("r")
        .arg(record.to_string())
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(replaced, 0, "the field was there and is overwritten");
    let taken = Approvals::new(&store)
        .take_approval(id, Binding::new(&alice, &tool, &args), T0)
        .await;
    assert_eq!(taken, Err(RoundTripRejection::Store));
}

/// Every key name under the store's prefix, as anyone who can list Redis's keys sees them (`KEYS`,
/// `SCAN`, keyspace notifications, the slow log): none holds a token's text or a page's id; the
/// token's, the page's and its receipt's records are under the values' SHA-256.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_in_redis_names_a_token_or_a_page() {
    let redis = redis_url();
    let prefix = format!("bearer-{}", uuid::Uuid::new_v4().simple());
    let store = match RedisStore::builder(redis.url())
        .prefix(prefix.clone())
        .connect()
        .await
    {
        Ok(store) => store,
        Err(err) => panic!("{err}"),
    };
    let (alice, tool, args) = alice_deletes();
    let issued_for = definition("Delete one order.");
    let token = match Approvals::new(&store)
        .issue_token(
            Binding::new(&alice, &tool, &args),
            issued_for,
            &ApprovalPolicy::default(),
            T0,
        )
        .await
    {
        Ok(token) => token,
        Err(err) => panic!("{err}"),
    };
    let (pending, _) =
        store_approval(&store, issued_for, json!({"before": 1, "after": null})).await;
    let subject = PageSubject::new(tool.clone(), args.arguments().clone(), None);
    let pending = match Approvals::new(&store).open_page(pending, subject, T0).await {
        Ok(pending) => pending,
        Err(err) => panic!("{err}"),
    };
    let Some(page) = pending.page().map(ToString::to_string) else {
        panic!("no page");
    };

    let client = match redis::Client::open(redis.url()) {
        Ok(client) => client,
        Err(err) => panic!("{err}"),
    };
    let mut connection = match client.get_multiplexed_async_connection().await {
        Ok(connection) => connection,
        Err(err) => panic!("{err}"),
    };
    let keys: Vec<String> = match redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query_async(&mut connection)
        .await
    {
        Ok(keys) => keys,
        Err(err) => panic!("{err}"),
    };
    // The principal's set lists its records' keys: its members are key names too.
    let mut names = keys.clone();
    for key in keys.iter().filter(|key| key.contains(":principal:")) {
        let members: Vec<String> = match redis::cmd("ZRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .query_async(&mut connection)
            .await
        {
            Ok(members) => members,
            Err(err) => panic!("{err}"),
        };
        names.extend(members);
    }
    for name in &names {
        assert!(!name.contains(token.as_str()), "{name}");
        assert!(!name.contains(&page), "{name}");
    }
    for expected in [
        format!("{prefix}:token:{}", sha256_hex(token.as_str())),
        format!("{prefix}:page:{}", sha256_hex(&page)),
        format!("{prefix}:page:{}.receipt", sha256_hex(&page)),
    ] {
        assert!(keys.contains(&expected), "{expected} not in {keys:?}");
    }
}
