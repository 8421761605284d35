//! Records offered under a node's name that are not the node's own
//! (docs/trust.md, "Disputes"): refused at the door when they name
//! another node, and, when a holder of the node's credentials ships the
//! node's next seqs first, kept beside the node's real ones until an
//! admin resolves, on the real binaries.

use std::time::Duration;

use spear_proto::v1::{AuditLine, ShipAuditRequest, ShipAuditResponse};
use spear_tests::audit_trail::{audit, on_disk, seqs, verify};
use spear_tests::etcd::EtcdServer;
use spear_tests::procs::{SmsOptions, SmsProc};
use spear_tests::tasks::Cluster;
use spear_tests::trust::{invoke_on, trust_cluster, TrustSetup};
use spear_tests::wait::eventually;

/// Ships `records` as `node` through SMS's gRPC API, as a node would.
fn ship(c: &Cluster, node: &str, records: Vec<AuditLine>) -> Result<ShipAuditResponse, String> {
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let endpoint = format!("http://{}", c.sms.grpc);
        let mut client = spear_proto::v1::audit_client::AuditClient::connect(endpoint)
            .await
            .map_err(|e| e.to_string())?;
        client
            .ship_audit(ShipAuditRequest {
                node_id: node.into(),
                records,
            })
            .await
            .map(|r| r.into_inner())
            .map_err(|s| format!("{:?}: {}", s.code(), s.message()))
    })
}

/// Records `first..=last` as `node`, chained on `prev`, saying `rule`.
fn forge(node: &str, first: u64, last: u64, mut prev: String, rule: &str) -> Vec<AuditLine> {
    (first..=last)
        .map(|seq| {
            let mut record = spear_proto::audit::Record {
                node: node.into(),
                task: "echo".into(),
                tool: "echo".into(),
                rule: rule.into(),
                ..Default::default()
            };
            let json = record.seal(seq, &prev);
            prev = record.hash.clone();
            AuditLine { seq, json }
        })
        .collect()
}

/// Waits until SMS holds every record node-a wrote; the last seq.
fn all_at_sms(c: &Cluster) -> u64 {
    let state_dir = c.node.state_dir.clone();
    eventually("node-a's records at SMS", Duration::from_secs(20), || {
        let written = seqs(&on_disk(&state_dir));
        let held = seqs(&audit(c, &["--node", "node-a"]));
        (held == written && held.len() >= 3)
            .then(|| held.iter().max().copied().unwrap_or(0))
            .ok_or(format!("{held:?} vs {written:?}"))
    })
}

/// A shipment from node-a carrying a record that names node-b is refused
/// whole, with the sentence, and nothing of it is kept.
#[test]
fn a_record_naming_another_node_is_refused_at_ship() {
    let (c, _dir) = trust_cluster("audit-other-node", TrustSetup::default());
    assert_eq!(invoke_on(&c, "node-a")["ok"], true);
    let last = all_at_sms(&c);
    let mut records = forge("node-a", last + 1, last + 1, String::new(), "mine");
    records.extend(forge("node-b", last + 2, last + 2, String::new(), "yours"));
    let refused = ship(&c, "node-a", records).unwrap_err();
    assert!(
        refused.starts_with("PermissionDenied")
            && refused.contains(&format!(
                "record {} names node 'node-b', but the shipment comes from node 'node-a'",
                last + 2
            )),
        "{refused}"
    );
    let held = seqs(&audit(&c, &["--node", "node-a"]));
    assert_eq!(held.iter().max(), Some(&last), "{held:?}");
    assert!(audit(&c, &["--node", "node-b"]).is_empty());
    let (code, out) = verify(&c);
    assert_eq!(code, 0, "{out}");
}

/// A peer holding node-a's credentials ships the seqs node-a will write
/// next, before node-a does. node-a's real records are kept beside the
/// forged ones; `sms audit` shows both copies of each seq and `verify`
/// fails naming them, until an admin keeps node-a's copies with
/// `sms audit resolve`: then the chain is whole and shows node-a's runs.
#[test]
fn records_pre_empted_under_a_nodes_name_are_kept_beside_until_an_admin_resolves() {
    let (c, _dir) = trust_cluster("audit-preempt", TrustSetup::default());
    pre_empted_then_resolved(&c);
}

/// The same on etcd, where the copies live for every replica: a second
/// SMS on the same etcd shows the dispute, and sees it resolved.
#[test]
fn on_etcd_a_dispute_is_every_replicas_until_resolved() {
    let etcd = EtcdServer::start();
    let setup = TrustSetup {
        etcd: Some(&etcd),
        ..Default::default()
    };
    let (c, _dir) = trust_cluster("audit-preempt-etcd", setup);
    pre_empted_then_resolved(&c);
    let b = SmsProc::start(SmsOptions {
        etcd: Some(etcd.endpoint()),
        ..Default::default()
    });
    let (code, out, err) = b.client(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}{err}");
}

fn pre_empted_then_resolved(c: &Cluster) {
    assert_eq!(invoke_on(c, "node-a")["ok"], true);
    let state_dir = c.node.state_dir.clone();
    let last = all_at_sms(c);
    // Chained on node-a's last record as a real node would, so the chain
    // alone verifies as whole.
    let prev = on_disk(&state_dir)
        .iter()
        .find(|r| r["seq"] == last)
        .and_then(|r| r["hash"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no record {last} on disk"));
    let forged = forge("node-a", last + 1, last + 3, prev, "nothing happened here");
    // The plaintext test plane takes it (one credential acts as every
    // node there), as a stolen credential would.
    let answer = ship(c, "node-a", forged).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(answer.stored, 3);
    // node-a's next run writes those seqs for real and ships them.
    assert_eq!(invoke_on(c, "node-a")["ok"], true);
    let disputed: Vec<u64> = (last + 1..=last + 3).collect();
    let (code, out) = eventually(
        "verify to name the disputes",
        Duration::from_secs(20),
        || {
            let (code, out) = verify(c);
            out.contains("3 seq(s) were offered under this node's name")
                .then_some((code, out.clone()))
                .ok_or(out)
        },
    );
    assert_eq!(code, 1, "{out}");
    // Both copies of each disputed seq are listed, the node's own (copy 1)
    // with the SHA-256 that resolves to it.
    let (code, table, said) = c.sms.client(&["audit", "--node", "node-a"]);
    assert_eq!(code, 0, "{said}");
    let mut keep = Vec::new();
    for seq in &disputed {
        assert!(table.contains(&format!(" {seq}~0 ")), "{table}");
        assert!(table.contains(&format!(" {seq}~1 ")), "{table}");
        let lead = format!("disputed: node node-a seq {seq} copy 1 has SHA-256 ");
        let sha = said
            .lines()
            .find_map(|l| l.strip_prefix(lead.as_str()))
            .and_then(|rest| rest.split(';').next())
            .unwrap_or_else(|| panic!("no copy 1 of {seq}: {said}"));
        keep.push((*seq, sha.to_string()));
    }
    let copies = audit(c, &["--node", "node-a"]);
    let forged_left = copies
        .iter()
        .filter(|r| r["rule"] == "nothing happened here")
        .count();
    assert_eq!(forged_left, 3, "{copies:?}");
    // A copy nobody offered is refused, and changes nothing.
    let seq = disputed[0].to_string();
    let (code, _, err) = c.sms.client(&[
        "audit",
        "resolve",
        "--node",
        "node-a",
        "--seq",
        &seq,
        "--keep",
        &"0".repeat(64),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("has SHA-256"), "{err}");
    for (seq, sha) in &keep {
        let seq = seq.to_string();
        let (code, out, err) = c.sms.client(&[
            "audit", "resolve", "--node", "node-a", "--seq", &seq, "--keep", sha,
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains("the kept copy is now the chain's; 1 other copies dropped"),
            "{out}"
        );
    }
    let (code, out) = verify(c);
    assert_eq!(code, 0, "{out}");
    let records = audit(c, &["--node", "node-a"]);
    assert!(
        records.iter().all(|r| r["rule"] != "nothing happened here"),
        "{records:?}"
    );
    assert_eq!(seqs(&records), seqs(&on_disk(&state_dir)));
    // The resolutions are in SMS's own chain (`sms`, or `sms:<host>` on
    // etcd).
    let admin = audit(c, &[]);
    let by_sms = |r: &&serde_json::Value| r["node"].as_str().is_some_and(|n| n.starts_with("sms"));
    let resolved = admin
        .iter()
        .filter(by_sms)
        .filter(|r| r["action"] == "resolve_audit")
        .count();
    assert_eq!(resolved, 4, "{admin:?}");
}
