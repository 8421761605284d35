//! Faults: SMS restarts (embedded and etcd), crashes (SIGKILL) of a node and
//! of SMS while changes stream, etcd compaction while a node is away, a node
//! restarted while SMS is down, a stalled watcher. Every node's
//! whole applied history is checked (in order, no gap, no duplicate) and its
//! final registry compared with SMS's.

use std::time::Duration;

use spear_tests::etcd::EtcdServer;
use spear_tests::fixtures::write_file;
use spear_tests::history::{converged, node_registry, sms_registry, Applied};
use spear_tests::http::metric;
use spear_tests::procs::{SmsOptions, SmsProc, SpearletProc};
use spear_tests::wait::eventually;

const SOON: Duration = Duration::from_secs(15);

fn server(id: &str, description: &str) -> String {
    serde_json::json!({"id": id, "description": description, "command": "true"}).to_string()
}

/// A file declaring `n` servers with long descriptions (a big delta).
fn big_file(prefix: &str, n: usize, version: usize) -> String {
    let servers: serde_json::Map<String, serde_json::Value> = (0..n)
        .map(|i| {
            let entry = serde_json::json!({
                "command": "true",
                "description": format!("v{version} {}", "x".repeat(400)),
            });
            (format!("{prefix}-{i}"), entry)
        })
        .collect();
    serde_json::json!({ "mcpServers": servers }).to_string()
}

/// Waits until the node's registry equals SMS's, then checks its history.
fn snapshots(history: &[Applied]) -> usize {
    history
        .iter()
        .filter(|a| matches!(a, Applied::Snapshot { .. }))
        .count()
}

#[test]
fn embedded_sms_restart_starts_a_new_epoch_and_the_node_resnapshots() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "a.json", &server("alpha", "one"));
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().into()),
        ..Default::default()
    });
    let state = tempfile::tempdir().unwrap();
    let node = SpearletProc::start("n1", &sms.grpc, &state.path().join("n1"));
    let before = converged(&sms, &node);
    let epoch_before = sms_registry(&sms.grpc).unwrap().0;

    let sms = sms.restart();
    write_file(dir.path(), "b.json", &server("beta", "two"));
    let after = converged(&sms, &node);
    assert_ne!(
        sms_registry(&sms.grpc).unwrap().0,
        epoch_before,
        "an embedded SMS restart is a new epoch"
    );
    assert_eq!(snapshots(&after), snapshots(&before) + 1, "{after:?}");
}

#[test]
fn etcd_sms_restart_resumes_with_deltas_and_no_gap() {
    let etcd = EtcdServer::start();
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "a.json", &server("alpha", "one"));
    let sms_a = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().into()),
        etcd: Some(etcd.endpoint()),
        ..Default::default()
    });
    // A second replica on the same etcd, used to write while A is down.
    let sms_b = SmsProc::start(SmsOptions {
        etcd: Some(etcd.endpoint()),
        ..Default::default()
    });
    let state = tempfile::tempdir().unwrap();
    let node = SpearletProc::start("n1", &sms_a.grpc, &state.path().join("n1"));
    let before = converged(&sms_a, &node);
    assert_eq!(snapshots(&before), 1);

    let mut sms_a = sms_a;
    sms_a.proc.stop();
    for i in 0..3 {
        let spec = sms_b.workdir().join(format!("s{i}.json"));
        std::fs::write(
            &spec,
            server(&format!("api-{i}"), "written while A was down"),
        )
        .unwrap();
        let (code, _, err) = sms_b.client(&["apply", &spec.to_string_lossy()]);
        assert_eq!(code, 0, "{err}");
    }
    let sms_a = sms_a.restart();
    let after = converged(&sms_a, &node);
    assert_eq!(
        snapshots(&after),
        1,
        "the node should resume with deltas: {after:?}"
    );
    assert!(after.len() >= before.len() + 3, "{after:?}");
    assert_eq!(
        sms_registry(&sms_a.grpc).unwrap(),
        sms_registry(&sms_b.grpc).unwrap()
    );
}

#[test]
fn etcd_compaction_while_a_node_is_away_gives_it_a_snapshot() {
    let etcd = EtcdServer::start();
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "a.json", &server("alpha", "one"));
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().into()),
        etcd: Some(etcd.endpoint()),
        ..Default::default()
    });
    let state = tempfile::tempdir().unwrap();
    let mut node = SpearletProc::start("n1", &sms.grpc, &state.path().join("n1"));
    converged(&sms, &node);
    node.proc.stop();

    for i in 0..5 {
        let before = sms_registry(&sms.grpc).unwrap().1;
        write_file(
            dir.path(),
            "a.json",
            &server("alpha", &format!("version {i}")),
        );
        // Each write is its own revision: wait for it before the next.
        eventually("SMS to apply the change", SOON, || {
            let revision = sms_registry(&sms.grpc)?.1;
            if revision > before {
                Ok(())
            } else {
                Err(format!("still at revision {revision}"))
            }
        });
    }
    let (_, revision, _) = sms_registry(&sms.grpc).unwrap();
    etcd.compact(revision);
    // A restarted SMS rebuilds its history from etcd, which no longer has it.
    let sms = sms.restart();

    let node = node.restart();
    let history = converged(&sms, &node);
    assert_eq!(snapshots(&history), 2, "{history:?}");
}

#[test]
fn a_node_restarted_while_sms_is_down_serves_its_persisted_registry() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "a.json", &server("alpha", "one"));
    write_file(dir.path(), "b.json", &server("beta", "two"));
    let mut sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().into()),
        ..Default::default()
    });
    let state = tempfile::tempdir().unwrap();
    let node = SpearletProc::start("n1", &sms.grpc, &state.path().join("n1"));
    let expected = sms_registry(&sms.grpc).unwrap();
    converged(&sms, &node);

    sms.proc.stop();
    let node = node.restart();
    let view = node_registry(&node.registry().unwrap()).unwrap();
    assert_eq!(
        view, expected,
        "a restarted node without SMS serves what it had"
    );
    let status = node.status().unwrap();
    assert_ne!(status["sync_state"], "synced", "{status}");
}

#[test]
fn a_stalled_watcher_does_not_delay_the_others_and_resumes_from_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "big.json", &big_file("big", 2000, 0));
    // A ring of 5 changes: the stalled node falls out of it.
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().into()),
        history_len: Some(5),
        ..Default::default()
    });
    let sent = |name: &str| metric(&sms.metrics, name).unwrap();
    let state = tempfile::tempdir().unwrap();
    let stalled = SpearletProc::start("stalled", &sms.grpc, &state.path().join("stalled"));
    let healthy = SpearletProc::start("healthy", &sms.grpc, &state.path().join("healthy"));
    converged(&sms, &stalled);
    converged(&sms, &healthy);

    // The stalled node stops reading; SMS keeps producing big deltas (well
    // past HTTP/2 flow-control windows and socket buffers).
    let history_before = stalled.applied_log().len();
    let (deltas_before, snapshots_before) = (
        sent("sms_deltas_sent_total"),
        sent("sms_snapshots_sent_total"),
    );
    stalled.proc.pause(true);
    for version in 1..=20 {
        let before = sms_registry(&sms.grpc).unwrap().1;
        write_file(dir.path(), "big.json", &big_file("big", 2000, version));
        eventually(
            "SMS and the healthy node to apply each change",
            SOON,
            || {
                let expected = sms_registry(&sms.grpc)?;
                let got = node_registry(&healthy.registry()?)?;
                if expected.1 > before && got == expected {
                    Ok(())
                } else {
                    Err(format!("at {}", got.1))
                }
            },
        );
    }
    converged(&sms, &healthy);
    // Backpressure: SMS stopped feeding the stream nobody read. The healthy
    // node took all 20 deltas (~1 MB each); the stalled one only what its
    // HTTP/2 windows and socket buffers hold.
    let deltas = sent("sms_deltas_sent_total") - deltas_before;
    assert!(
        (20.0..30.0).contains(&deltas),
        "{deltas} deltas sent during the stall"
    );

    // Past the ring, the stalled node resumes from a snapshot, not a gap.
    stalled.proc.pause(false);
    let history = converged(&sms, &stalled);
    assert!(
        history[history_before..]
            .iter()
            .any(|a| matches!(a, Applied::Snapshot { .. })),
        "{history:?}"
    );
    assert!(sent("sms_snapshots_sent_total") > snapshots_before);
}

/// An SMS serving a `big.json` of 200 servers from `dir`, and a node.
fn big_registry_and_a_node(
    dir: &std::path::Path,
    state: &std::path::Path,
) -> (SmsProc, SpearletProc) {
    write_file(dir, "big.json", &big_file("big", 200, 0));
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.into()),
        ..Default::default()
    });
    let node = SpearletProc::start("n1", &sms.grpc, &state.join("n1"));
    (sms, node)
}

/// Rewrites `big.json` `versions` times, each a big delta, and returns once
/// the node has applied at least `applied_before + 1` entries of the burst
/// (so a kill lands while changes are still streaming).
fn burst_until_the_node_is_mid_stream(dir: &std::path::Path, node: &SpearletProc, versions: usize) {
    let start = node.applied_log().len();
    let writer = {
        let dir = dir.to_path_buf();
        std::thread::spawn(move || {
            for v in 1..=versions {
                write_file(&dir, "big.json", &big_file("big", 200, v));
            }
        })
    };
    eventually("the node to apply part of the burst", SOON, || {
        let now = node.applied_log().len();
        if now > start {
            Ok(())
        } else {
            Err(format!("{now} entries"))
        }
    });
    writer.join().unwrap();
}

#[test]
fn a_node_killed_mid_stream_resumes_without_a_gap() {
    let (dir, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (sms, node) = big_registry_and_a_node(dir.path(), state.path());
    converged(&sms, &node);

    burst_until_the_node_is_mid_stream(dir.path(), &node, 20);
    let node = node.crash_restart();
    write_file(
        dir.path(),
        "after.json",
        &server("after", "written after the crash"),
    );
    let history = converged(&sms, &node);
    assert!(
        history
            .iter()
            .any(|a| matches!(a, Applied::Restored { .. })),
        "the restarted node says what it restored: {history:?}"
    );
}

#[test]
fn sms_killed_mid_stream_gives_the_node_a_new_epoch_without_a_gap() {
    let (dir, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (sms, node) = big_registry_and_a_node(dir.path(), state.path());
    let before = converged(&sms, &node);

    burst_until_the_node_is_mid_stream(dir.path(), &node, 20);
    let sms = sms.crash_restart();
    let after = converged(&sms, &node);
    assert!(
        snapshots(&after) > snapshots(&before),
        "a crashed embedded SMS is a new epoch, so a new snapshot: {after:?}"
    );
}
