//! A node's follow stream (issue 41, liveness on the watch) against the
//! real `sms` binary over mutual TLS, driven as an attacker would drive
//! it with a real gRPC client: a certificate opening another node's
//! stream, a stream carrying another node's report, a stream that starts
//! with a report or sends a second watch. Each is refused with a
//! sentence, and the other node is never in SMS's table. And what a node
//! that follows is to SMS: alive while its stream is open and silent,
//! "left" the moment it ends its side, still alive (on its way back) when
//! its connection is cut. And a node flooding its stream with reports:
//! slowed to SMS's pace, nothing dropped, nothing refused.

use serde_json::Value;
use spear_identity::{dial, Identity};
use spear_proto::v1::follow_request::Message;
use spear_proto::v1::registry_client::RegistryClient;
use spear_proto::v1::{FollowRequest, HeartbeatRequest, SyncState, WatchEvent, WatchRequest};
use spear_tests::certs::{Certs, TlsSet};
use spear_tests::procs::{SmsOptions, SmsProc};
use spear_tests::runtime;
use spear_tests::wait::eventually;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

fn watch(node_id: &str) -> FollowRequest {
    FollowRequest {
        message: Some(Message::Watch(WatchRequest {
            node_id: node_id.into(),
            ..Default::default()
        })),
    }
}

fn report(node_id: &str) -> FollowRequest {
    FollowRequest {
        message: Some(Message::Report(HeartbeatRequest {
            node_id: node_id.into(),
            version: "attacker".into(),
            sync_state: SyncState::Synced as i32,
            ..Default::default()
        })),
    }
}

/// `node_id`'s report that it applied `revision`.
fn report_at(node_id: &str, revision: u64) -> FollowRequest {
    let mut request = report(node_id);
    if let Some(Message::Report(report)) = &mut request.message {
        report.applied_revision = revision;
    }
    request
}

/// One follow stream, opened with `as_cert`'s certificate: the sender of
/// its node side and SMS's answer.
struct Follow {
    outbound: mpsc::Sender<FollowRequest>,
    answer: Result<Streaming<WatchEvent>, tonic::Status>,
}

async fn follow(sms: &str, as_cert: &TlsSet, first: FollowRequest) -> Follow {
    let tls = as_cert.identity().unwrap();
    let (endpoint, dialer) = dial(sms, Some(&tls), Identity::Sms).unwrap();
    let channel = dialer.connect(endpoint).await.unwrap();
    let (outbound, rx) = mpsc::channel(8);
    outbound.send(first).await.unwrap();
    let answer = RegistryClient::new(channel)
        .follow(ReceiverStream::new(rx))
        .await
        .map(|r| r.into_inner());
    Follow { outbound, answer }
}

/// How SMS's stream ended: the status it ended with (`None`: cleanly).
async fn end_of(stream: &mut Streaming<WatchEvent>) -> Option<tonic::Status> {
    loop {
        match tokio::time::timeout(Duration::from_secs(30), stream.message()).await {
            Ok(Ok(Some(_))) => continue,
            Ok(Ok(None)) => return None,
            Ok(Err(status)) => return Some(status),
            Err(_) => panic!("SMS kept the stream open"),
        }
    }
}

fn tls_sms() -> (Certs, SmsProc) {
    let certs = Certs::new("spear.test");
    let sms = SmsProc::start(SmsOptions {
        tls: Some(certs.sms()),
        client_tls: Some(certs.admin("ops")),
        ..Default::default()
    });
    (certs, sms)
}

#[test]
fn a_follow_stream_carries_its_own_nodes_reports_and_nothing_else() {
    let (certs, sms) = tls_sms();
    let node_a = certs.node("node-a");
    let rt = runtime();

    // node-a's certificate opening node-b's stream.
    let opened = rt.block_on(follow(&sms.grpc, &node_a, watch("node-b")));
    let refused = opened
        .answer
        .err()
        .expect("another node's stream is refused");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");

    // A watch request far over its bound (the stream decodes messages up
    // to a report's size).
    let opened = rt.block_on(follow(&sms.grpc, &node_a, watch(&"x".repeat(100 * 1024))));
    let refused = opened.answer.err().expect("an oversized watch is refused");
    assert_eq!(refused.code(), tonic::Code::OutOfRange, "{refused:?}");

    // A stream that starts with a report instead of where the node stands.
    let opened = rt.block_on(follow(&sms.grpc, &node_a, report("node-a")));
    let refused = opened.answer.err().expect("a report first is refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(
        refused.message().contains("starts with a watch request"),
        "{refused:?}"
    );

    // node-a's own stream, then node-b's report on it: the stream ends
    // with the refusal, and node-b never enters SMS's table.
    let own = rt.block_on(follow(&sms.grpc, &node_a, watch("node-a")));
    let mut frames = own.answer.expect("its own stream opens");
    rt.block_on(own.outbound.send(report("node-a"))).unwrap();
    eventually(
        "SMS to take node-a's report",
        Duration::from_secs(10),
        || {
            let entry = sms.node("node-a");
            (entry["alive"] == true)
                .then_some(())
                .ok_or(entry.to_string())
        },
    );
    rt.block_on(own.outbound.send(report("node-b"))).unwrap();
    let end = rt
        .block_on(end_of(&mut frames))
        .expect("ended with a refusal");
    assert_eq!(end.code(), tonic::Code::PermissionDenied, "{end:?}");
    assert!(
        end.message().contains("carries no report of 'node-b'"),
        "{end:?}"
    );
    assert_eq!(sms.node("node-b"), Value::Null);
    // Refused, not left: node-a may be on its way back.
    let entry = sms.node("node-a");
    assert_eq!(entry["left"], false, "{entry}");

    // A second watch on a stream.
    let twice = rt.block_on(follow(&sms.grpc, &node_a, watch("node-a")));
    let mut frames = twice.answer.expect("opens");
    rt.block_on(twice.outbound.send(watch("node-a"))).unwrap();
    let end = rt
        .block_on(end_of(&mut frames))
        .expect("ended with a refusal");
    assert_eq!(end.code(), tonic::Code::InvalidArgument, "{end:?}");
    drop(twice.outbound);
    drop(own.outbound);
}

#[test]
fn a_following_node_is_alive_while_silent_and_left_the_moment_it_ends_its_stream() {
    let (certs, sms) = tls_sms();
    let node_a = certs.node("node-a");
    let rt = runtime();

    let opened = rt.block_on(follow(&sms.grpc, &node_a, watch("node-a")));
    let mut frames = opened.answer.expect("opens");
    rt.block_on(opened.outbound.send(report("node-a"))).unwrap();
    let entry = eventually("SMS to take the report", Duration::from_secs(10), || {
        let entry = sms.node("node-a");
        (entry["alive"] == true)
            .then_some(entry.clone())
            .ok_or(entry.to_string())
    });
    // While the stream is open, SMS has heard of the node just now.
    assert_eq!(entry["last_seen_ms"], 0, "{entry}");

    // The node ends its side (as a stopping node does): SMS closes its
    // side cleanly and shows the node left, not alive, at once.
    drop(opened.outbound);
    assert!(rt.block_on(end_of(&mut frames)).is_none(), "a clean end");
    let entry = sms.node("node-a");
    assert_eq!(entry["alive"], false, "{entry}");
    assert_eq!(entry["left"], true, "{entry}");
    let (code, out, err) = sms.client(&["status"]);
    assert_eq!(code, 0, "{err}");
    let row = out.lines().find(|l| l.starts_with("node-a")).unwrap_or("");
    assert!(row.split_whitespace().any(|w| w == "left"), "{out}");

    // Back, then its connection cut (a crash, a network): not left, and
    // alive for the TTL, as it may come back.
    let back = rt.block_on(follow(&sms.grpc, &node_a, watch("node-a")));
    let frames = back.answer.expect("opens");
    rt.block_on(back.outbound.send(report("node-a"))).unwrap();
    eventually("SMS to see the node back", Duration::from_secs(10), || {
        let entry = sms.node("node-a");
        (entry["alive"] == true && entry["left"] == false)
            .then_some(())
            .ok_or(entry.to_string())
    });
    // Dropping the answer resets the stream, and dropping the runtime
    // the connection, with the node's side never ended (its sender is
    // still held).
    drop(frames);
    drop(rt);
    drop(back.outbound);
    let entry = eventually("SMS to see the stream end", Duration::from_secs(30), || {
        let entry = sms.node("node-a");
        (entry["last_seen_ms"].as_u64() > Some(0))
            .then_some(entry.clone())
            .ok_or(entry.to_string())
    });
    assert_eq!(entry["left"], false, "{entry}");
    assert_eq!(entry["alive"], true, "{entry}");
}

/// A node (or someone holding its certificate) sending reports as fast as
/// it can, each rewriting its record: SMS takes them in order, the last
/// one included, no faster than one per 80 ms (an identity's four streams
/// together no faster than its heartbeat calls could), and keeps the
/// stream open: the flood is slowed through HTTP/2's flow control, not
/// refused and not dropped.
#[test]
fn a_flood_of_reports_is_taken_in_order_at_sms_pace_and_none_is_lost() {
    const FLOOD: u64 = 30;
    let (certs, sms) = tls_sms();
    let node_a = certs.node("node-a");
    let rt = runtime();
    let opened = rt.block_on(follow(&sms.grpc, &node_a, watch("node-a")));
    let _frames = opened.answer.expect("opens");
    let started = Instant::now();
    for revision in 1..=FLOOD {
        rt.block_on(opened.outbound.send(report_at("node-a", revision)))
            .unwrap();
    }
    let entry = eventually(
        "SMS to take the flood's last report",
        Duration::from_secs(60),
        || {
            let entry = sms.node("node-a");
            (entry["applied_revision"] == FLOOD)
                .then_some(entry.clone())
                .ok_or(entry.to_string())
        },
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(80) * (FLOOD as u32 - 1),
        "{FLOOD} reports taken in {took:?}: faster than one per 80 ms"
    );
    assert_eq!(entry["alive"], true, "{entry}");
    assert_eq!(entry["left"], false, "{entry}");
}
