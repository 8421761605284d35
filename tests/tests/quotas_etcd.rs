//! Quota counters on a real etcd (issue 54): every window's counters are
//! written under a lease that ends soon after the window, so made-up keys
//! cannot pile up in etcd; and etcd stopped mid-window loses nothing and
//! counts nothing twice when it returns.

use std::time::Duration;

use spear_sms::quotas::{CounterError, Counters, EtcdCounters, Take, Want};
use spear_sms::store::{EtcdStore, EtcdStoreConfig};
use spear_tests::etcd::EtcdServer;

async fn counters(etcd: &EtcdServer) -> EtcdCounters {
    let store = EtcdStore::connect(EtcdStoreConfig {
        endpoints: vec![etcd.endpoint()],
        prefix: "/spear-test".into(),
        connect_timeout: Duration::from_secs(5),
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| panic!("connect: {e}"));
    EtcdCounters::new(store.client(), "/spear-test")
}

/// The lease id and its granted TTL of `key`, as etcdctl says.
fn lease_of(etcd: &EtcdServer, key: &str) -> (i64, i64) {
    let got = etcd.etcdctl(&["get", key, "-w", "json"]).unwrap();
    let got: serde_json::Value = serde_json::from_str(&got).unwrap();
    let lease = got["kvs"][0]["lease"].as_i64().unwrap_or(0);
    assert_ne!(lease, 0, "{key} has no lease: {got}");
    let ttl = etcd
        .etcdctl(&["lease", "timetolive", &format!("{lease:x}"), "-w", "json"])
        .unwrap();
    let ttl: serde_json::Value = serde_json::from_str(&ttl).unwrap();
    (lease, ttl["granted-ttl"].as_i64().unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread")]
async fn every_windows_counters_live_under_one_lease_that_ends_after_the_window() {
    let etcd = EtcdServer::start();
    let counters = counters(&etcd).await;
    let window_end = spear_common::clock::now_ms() + 30_000;
    for key in ["task/notes/tool_calls/aaaa", "task/notes/tool_calls/bbbb"] {
        let taken = counters
            .take(key, &Take::of(window_end, 10, Want::Units(1)))
            .await
            .unwrap();
        assert_eq!(taken.granted, 1);
    }
    let (a, ttl) = lease_of(&etcd, "/spear-test/quotas/task/notes/tool_calls/aaaa");
    let (b, _) = lease_of(&etcd, "/spear-test/quotas/task/notes/tool_calls/bbbb");
    assert_eq!(a, b, "one lease per window end");
    assert!(
        (30..=91).contains(&ttl),
        "the lease lasts the window and a minute: {ttl} s"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_stopped_mid_window_loses_nothing_and_counts_nothing_twice() {
    let mut etcd = EtcdServer::start();
    let counters = counters(&etcd).await;
    let window_end = spear_common::clock::now_ms() + 600_000;
    let take = |want| Take::of(window_end, 10, Want::Units(want));
    assert_eq!(counters.take("k", &take(3)).await.unwrap().used, 3);
    etcd.stop();
    let refused = tokio::time::timeout(Duration::from_secs(30), counters.take("k", &take(2)))
        .await
        .expect("a take while etcd is down answers");
    assert!(
        matches!(refused, Err(CounterError::Unavailable(_))),
        "{refused:?}"
    );
    etcd.resume();
    // The take that failed granted nothing; the next counts on from 3.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let after = loop {
        match counters.take("k", &take(2)).await {
            Ok(after) => break after,
            Err(e) if std::time::Instant::now() > deadline => panic!("etcd is not back: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    assert_eq!(after.used, 5, "{after:?}");
    let stored = etcd
        .etcdctl(&["get", "/spear-test/quotas/k", "--print-value-only"])
        .unwrap();
    assert_eq!(stored.trim(), format!("{window_end} 5"));
}
