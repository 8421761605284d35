//! Every store behaviour, checked once against the embedded store and once
//! against a real etcd: the two implementations of one interface.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use spear_proto::v1::{ServerRecord, ServerSpec, TaskSpec};
use spear_sms::store::{
    Change, Committed, EtcdStore, EtcdStoreConfig, MemoryStore, RegistryStore, StoreError,
};
use spear_sms::tasks::{EtcdTaskStore, MemoryTaskStore, TaskError, TaskStore};
use spear_tests::etcd::EtcdServer;

fn record(id: &str, description: &str) -> ServerRecord {
    ServerRecord {
        spec: Some(ServerSpec {
            id: id.into(),
            description: description.into(),
            enabled: true,
            ..Default::default()
        }),
        source: None,
        mod_revision: 0,
        pins: None,
    }
}

fn upsert(ids: &[&str]) -> Change {
    Change {
        upserts: ids.iter().map(|id| record(id, "x")).collect(),
        deletes: vec![],
    }
}

async fn etcd_store(etcd: &EtcdServer) -> Arc<dyn RegistryStore> {
    Arc::new(connect(etcd).await)
}

async fn connect(etcd: &EtcdServer) -> EtcdStore {
    EtcdStore::connect(EtcdStoreConfig {
        endpoints: vec![etcd.endpoint()],
        prefix: "/spear-test".into(),
        connect_timeout: Duration::from_secs(5),
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| panic!("connect: {e}"))
}

async fn next(stream: &mut spear_sms::store::CommittedStream) -> Committed {
    match tokio::time::timeout(Duration::from_secs(10), stream.next()).await {
        Ok(Some(Ok(c))) => c,
        other => panic!("expected a committed change, got {other:?}"),
    }
}

/// Runs one conformance check against both stores.
macro_rules! conformance {
    ($name:ident, $check:ident) => {
        mod $name {
            use super::*;

            #[tokio::test]
            async fn memory() {
                $check(Arc::new(MemoryStore::new())).await;
            }

            #[tokio::test]
            async fn etcd() {
                let etcd = EtcdServer::start();
                $check(etcd_store(&etcd).await).await;
            }
        }
    };
}

async fn load_empty_commit_and_load(store: Arc<dyn RegistryStore>) {
    let empty = store.load().await.unwrap();
    assert_eq!(empty.revision, 0);
    assert!(empty.servers.is_empty());
    assert_ne!(empty.epoch, 0);
    let r1 = store.commit(0, upsert(&["a", "b"])).await.unwrap();
    assert!(r1 > 0);
    let r2 = store
        .commit(
            r1,
            Change {
                upserts: vec![record("a", "changed")],
                deletes: vec!["b".into()],
            },
        )
        .await
        .unwrap();
    assert!(r2 > r1);
    let loaded = store.load().await.unwrap();
    assert_eq!((loaded.epoch, loaded.revision), (empty.epoch, r2));
    let ids: Vec<&str> = loaded.servers.keys().map(String::as_str).collect();
    assert_eq!(ids, ["a"]);
    assert_eq!(loaded.servers["a"].mod_revision, r2);
    assert_eq!(
        loaded.servers["a"].spec.as_ref().unwrap().description,
        "changed"
    );
}
conformance!(load_and_commit, load_empty_commit_and_load);

async fn conflicts_change_nothing(store: Arc<dyn RegistryStore>) {
    let r1 = store.commit(0, upsert(&["a"])).await.unwrap();
    match store.commit(0, upsert(&["b"])).await {
        Err(StoreError::Conflict {
            expected: 0,
            actual,
        }) => assert_eq!(actual, r1),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let loaded = store.load().await.unwrap();
    assert_eq!(loaded.revision, r1);
    assert_eq!(loaded.servers.len(), 1);
    assert_eq!(
        store.commit(r1, Change::default()).await.unwrap(),
        r1,
        "an empty change commits nothing"
    );
    assert_eq!(store.load().await.unwrap().revision, r1);
}
conformance!(conflicts, conflicts_change_nothing);

async fn concurrent_writers_one_wins(store: Arc<dyn RegistryStore>) {
    let r1 = store.commit(0, upsert(&["seed"])).await.unwrap();
    let (a, b) = tokio::join!(
        store.commit(r1, upsert(&["a"])),
        store.commit(r1, upsert(&["b"]))
    );
    let wins = [a.is_ok(), b.is_ok()].iter().filter(|w| **w).count();
    assert_eq!(wins, 1, "{a:?} {b:?}");
    assert_eq!(store.load().await.unwrap().servers.len(), 2);
}
conformance!(concurrent_writers, concurrent_writers_one_wins);

async fn watch_sees_every_change_in_order(store: Arc<dyn RegistryStore>) {
    let r1 = store.commit(0, upsert(&["a"])).await.unwrap();
    let r2 = store.commit(r1, upsert(&["b"])).await.unwrap();
    let r3 = store
        .commit(
            r2,
            Change {
                upserts: vec![],
                deletes: vec!["a".into()],
            },
        )
        .await
        .unwrap();

    let mut from_start = store.watch(0).await.unwrap();
    let c1 = next(&mut from_start).await;
    assert_eq!((c1.prev_revision, c1.revision), (0, r1));
    assert_eq!(c1.upserts[0].mod_revision, r1);
    let c2 = next(&mut from_start).await;
    assert_eq!((c2.prev_revision, c2.revision), (r1, r2));
    let c3 = next(&mut from_start).await;
    assert_eq!(
        (c3.prev_revision, c3.revision, c3.deletes.clone()),
        (r2, r3, vec!["a".to_string()])
    );

    let mut from_middle = store.watch(r2).await.unwrap();
    assert_eq!(next(&mut from_middle).await.revision, r3);

    // Live changes reach both.
    let r4 = store.commit(r3, upsert(&["c"])).await.unwrap();
    for stream in [&mut from_start, &mut from_middle] {
        let live = next(stream).await;
        assert_eq!((live.prev_revision, live.revision), (r3, r4));
    }
}
conformance!(watch_in_order, watch_sees_every_change_in_order);

async fn ten_thousand_servers_round_trip(store: Arc<dyn RegistryStore>) {
    let ids: Vec<String> = (0..10_000).map(|i| format!("server-{i:05}")).collect();
    let mut revision = 0;
    for chunk in ids.chunks(2_000) {
        let change = Change {
            upserts: chunk.iter().map(|id| record(id, "bulk")).collect(),
            deletes: vec![],
        };
        revision = store.commit(revision, change).await.unwrap();
    }
    let loaded = store.load().await.unwrap();
    assert_eq!(loaded.servers.len(), 10_000);
    assert_eq!(loaded.revision, revision);
}
conformance!(ten_thousand, ten_thousand_servers_round_trip);

#[tokio::test]
async fn memory_history_limit_reports_compaction() {
    let store = MemoryStore::with_history_limit(2);
    let mut revision = 0;
    for id in ["a", "b", "c", "d"] {
        revision = store.commit(revision, upsert(&[id])).await.unwrap();
    }
    match store.watch(0).await {
        Err(StoreError::Compacted { compacted }) => {
            assert_eq!(compacted, 2);
            let mut resumed = store.watch(compacted).await.unwrap();
            assert_eq!(next(&mut resumed).await.prev_revision, 2);
        }
        Ok(_) => panic!("expected compaction"),
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn etcd_compaction_is_reported() {
    let etcd = EtcdServer::start();
    let store = connect(&etcd).await;
    let mut revision = 0;
    for id in ["a", "b", "c"] {
        revision = store.commit(revision, upsert(&[id])).await.unwrap();
    }
    etcd.compact(revision);
    let error = match store.watch(0).await {
        Err(e) => e,
        Ok(mut stream) => {
            match tokio::time::timeout(Duration::from_secs(10), stream.next()).await {
                Ok(Some(Err(e))) => e,
                other => panic!("expected compaction, got {other:?}"),
            }
        }
    };
    assert!(
        matches!(error, StoreError::Compacted { compacted } if compacted == revision),
        "{error}"
    );
}

#[tokio::test]
async fn etcd_replicas_share_epoch_revisions_and_survive_an_etcd_restart() {
    let mut etcd = EtcdServer::start();
    let a = connect(&etcd).await;
    let b = connect(&etcd).await;
    let r1 = a.commit(0, upsert(&["a"])).await.unwrap();
    let r2 = b.commit(r1, upsert(&["b"])).await.unwrap();
    let (la, lb) = (a.load().await.unwrap(), b.load().await.unwrap());
    assert_eq!((la.epoch, la.revision), (lb.epoch, lb.revision));
    assert_eq!(la.revision, r2);
    // A stale replica's write is refused, not merged.
    assert!(matches!(
        a.commit(r1, upsert(&["c"])).await,
        Err(StoreError::Conflict { .. })
    ));

    etcd.restart();
    let c = connect(&etcd).await;
    let lc = c.load().await.unwrap();
    assert_eq!(
        (lc.epoch, lc.revision),
        (la.epoch, r2),
        "an etcd restart keeps the epoch and history"
    );
    let mut stream = c.watch(r1).await.unwrap();
    let resumed = next(&mut stream).await;
    assert_eq!((resumed.prev_revision, resumed.revision), (r1, r2));
}

/// Tasks behave the same in memory and in etcd, where a second SMS replica
/// (a second connection) sees them too.
async fn tasks_put_get_list_delete(store: Arc<dyn TaskStore>, other: Arc<dyn TaskStore>) {
    let task = |id: &str, description: &str| TaskSpec {
        id: id.into(),
        module_uri: "file:///srv/a.wasm".into(),
        module_sha256: "a".repeat(64),
        config_json: "{}".into(),
        description: description.into(),
    };
    assert!(matches!(store.get("a").await, Err(TaskError::NotFound(_))));
    store.put(task("b", "first")).await.unwrap();
    store.put(task("a", "first")).await.unwrap();
    store.put(task("b", "second")).await.unwrap();
    let ids: Vec<String> = other
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(ids, vec!["a", "b"]);
    assert_eq!(other.get("b").await.unwrap().description, "second");
    store.delete("a").await.unwrap();
    assert!(matches!(
        other.delete("a").await,
        Err(TaskError::NotFound(_))
    ));
    assert_eq!(other.list().await.unwrap().len(), 1);
}

#[tokio::test]
async fn task_store_memory() {
    let store = Arc::new(MemoryTaskStore::default());
    tasks_put_get_list_delete(store.clone(), store).await;
}

#[tokio::test]
async fn task_store_etcd() {
    let etcd = EtcdServer::start();
    let one = Arc::new(EtcdTaskStore::new(
        connect(&etcd).await.client(),
        "/spear-test",
    ));
    let two = Arc::new(EtcdTaskStore::new(
        connect(&etcd).await.client(),
        "/spear-test",
    ));
    tasks_put_get_list_delete(one, two).await;
}
