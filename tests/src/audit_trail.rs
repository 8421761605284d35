//! The audit suites' reads of the trail: SMS's copy (`sms audit`,
//! `verify`), the node's own files, and waiting for SMS to route to a
//! restarted node.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::tasks::Cluster;
use crate::wait::eventually;

/// `sms audit --json` with `filters`: one record per line.
pub fn audit(c: &Cluster, filters: &[&str]) -> Vec<Value> {
    let mut args = vec!["audit", "--json"];
    args.extend_from_slice(filters);
    let (code, out, err) = c.sms.client(&args);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `sms audit verify`: its exit code and output.
pub fn verify(c: &Cluster) -> (i32, String) {
    let (code, out, err) = c.sms.client(&["audit", "verify"]);
    (code, format!("{out}{err}"))
}

/// The records in the node's state dir, as written (complete lines).
pub fn on_disk(state_dir: &Path) -> Vec<Value> {
    let mut files: Vec<_> = std::fs::read_dir(state_dir.join("audit"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "jsonl"));
    files.sort();
    let mut records = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        records.extend(
            complete
                .lines()
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}"))),
        );
    }
    records
}

/// Waits until SMS routes to node-a at its new address (after a restart).
pub fn routed_again(c: &Cluster) {
    eventually(
        "SMS to route to node-a again",
        Duration::from_secs(30),
        || {
            let addr = c.node.status()?["invoke_addr"].clone();
            let nodes = c.sms.status()["nodes"].clone();
            let known = nodes.as_array().into_iter().flatten().any(|n| {
                n["node_id"] == "node-a" && n["alive"] == true && n["invoke_addr"] == addr
            });
            known.then_some(()).ok_or(nodes.to_string())
        },
    );
}

/// The seqs of `records`.
pub fn seqs(records: &[Value]) -> BTreeSet<u64> {
    records.iter().filter_map(|r| r["seq"].as_u64()).collect()
}
