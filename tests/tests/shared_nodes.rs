//! The node directory SMS replicas share through a real etcd: what a
//! heartbeat costs etcd, and which records a replica removes (a node
//! following it stays, however long it says nothing).
//!
//! At 10,000 nodes heartbeating every 5 s, a replica sees 2,000
//! heartbeats a second; each one that changes nothing must cost etcd
//! nothing, or etcd (and SMS's CPU) pays for the fleet's pulse.

use std::time::Duration;

use spear_proto::v1::HeartbeatRequest;
use spear_sms::nodes::SharedNodes;
use spear_tests::etcd::EtcdServer;
use spear_tests::wait::eventually;

const NODES: usize = 100;

fn beat(node: usize) -> HeartbeatRequest {
    HeartbeatRequest {
        node_id: format!("node-{node}"),
        invoke_addr: format!("127.0.0.1:{}", 20_000 + node),
        ..Default::default()
    }
}

/// Requests etcd has received for `method` (Put, LeaseGrant, ...), from
/// its own Prometheus metrics.
fn received(etcd: &EtcdServer, method: &str) -> f64 {
    let text = spear_tests::http::get(etcd.endpoint().trim_start_matches("http://"), "/metrics")
        .unwrap_or_else(|e| panic!("etcd metrics: {e}"));
    let wanted = format!("grpc_method=\"{method}\"");
    text.lines()
        .filter(|l| l.starts_with("grpc_server_msg_received_total{") && l.contains(&wanted))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn record(etcd: &EtcdServer, node: &str) -> String {
    etcd.etcdctl(&["get", &format!("/t/nodes/{node}"), "--print-value-only"])
        .unwrap_or_else(|e| panic!("etcdctl: {e}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn unchanged_heartbeats_cost_etcd_nothing_and_a_replica_removes_only_its_own_records() {
    let etcd = tokio::task::block_in_place(EtcdServer::start);
    let connect = || etcd_client::Client::connect([etcd.endpoint()], None);
    let a = SharedNodes::start(connect().await.unwrap(), "/t");
    let count = |method| tokio::task::block_in_place(|| received(&etcd, method));
    let (puts, grants, keeps) = (count("Put"), count("LeaseGrant"), count("LeaseKeepAlive"));

    // First sight: one record per node, under one lease.
    for node in 0..NODES {
        a.publish(&beat(node)).await.unwrap();
    }
    assert_eq!(count("Put") - puts, NODES as f64, "one write per new node");
    assert_eq!(
        count("LeaseGrant") - grants,
        1.0,
        "one lease for the replica"
    );
    // Three more rounds of the same heartbeats: nothing sent to etcd.
    for _ in 0..3 {
        for node in 0..NODES {
            a.publish(&beat(node)).await.unwrap();
        }
    }
    assert_eq!(
        count("Put") - puts,
        NODES as f64,
        "an unchanged heartbeat was written"
    );
    assert!(
        count("LeaseKeepAlive") - keeps <= 2.0,
        "heartbeats kept the lease alive one by one"
    );
    // A changed record is written again.
    let mut busy = beat(7);
    busy.running = 3;
    a.publish(&busy).await.unwrap();
    assert_eq!(count("Put") - puts, NODES as f64 + 1.0);
    assert_eq!(a.invocable().await.unwrap().len(), NODES);

    // node-0 moves to replica B; A hears from nobody any more, but node-1
    // follows A (its stream open, reporting nothing since); node-2 followed
    // A and left. Once the TTL passes A removes its silent nodes' records,
    // but not node-0's, which is B's now, nor node-1's, whose stream is
    // open.
    a.stream_opened("node-1");
    a.stream_opened("node-2");
    a.stream_ended("node-2", true);
    let b = SharedNodes::start(connect().await.unwrap(), "/t");
    b.publish(&beat(0)).await.unwrap();
    let beating = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            b.publish(&beat(0)).await.unwrap();
        }
    });
    tokio::task::block_in_place(|| {
        eventually(
            "replica A to remove its silent nodes",
            Duration::from_secs(60),
            || {
                let keys = etcd
                    .etcdctl(&["get", "/t/nodes/", "--prefix", "--keys-only"])
                    .unwrap_or_else(|e| panic!("etcdctl: {e}"));
                match keys.split_whitespace().count() {
                    2 => Ok(()),
                    n => Err(format!("{n} records left")),
                }
            },
        )
    });
    assert!(
        record(&etcd, "node-0").contains("20000"),
        "A removed B's record"
    );
    let mut left: Vec<String> = a
        .invocable()
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.node_id)
        .collect();
    left.sort();
    assert_eq!(left, ["node-0", "node-1"]);
    beating.abort();

    // A thousand nodes open their streams at once (an SMS restart): their
    // reports are queued (publish_soon does not wait for etcd) and written
    // by the writer, every one of them.
    for node in 1000..2000 {
        a.publish_soon(&beat(node));
    }
    tokio::task::block_in_place(|| {
        eventually(
            "the writer to write every queued record",
            Duration::from_secs(60),
            || {
                let keys = etcd
                    .etcdctl(&["get", "/t/nodes/node-1", "--prefix", "--keys-only"])
                    .unwrap_or_else(|e| panic!("etcdctl: {e}"));
                // node-1 itself, and node-1000 ..= node-1999.
                match keys.split_whitespace().count() {
                    1001 => Ok(()),
                    n => Err(format!("{n} records")),
                }
            },
        )
    });
}
