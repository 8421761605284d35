//! The history checker: proves from a node's `applied.log` that it applied
//! registry revisions in order, with no gap and no duplicate, and compares
//! its final registry with SMS's.

use std::collections::HashMap;

use spear_identity::{dial, Identity};
use spear_proto::v1::registry_client::RegistryClient;
use spear_proto::v1::ListServersRequest;

use crate::certs::TlsSet;
use crate::procs::{SmsProc, SpearletProc};
use crate::wait::eventually;

pub use spearlet::persist::Applied;

/// Parses `applied.log` lines with the node's own grammar.
pub fn parse(lines: &[String]) -> Result<Vec<Applied>, String> {
    lines
        .iter()
        .map(|line| line.parse::<Applied>().map_err(|e| e.to_string()))
        .collect()
}

/// Checks the rules of the watch protocol over a node's whole history, and
/// says which entry broke which rule:
/// - the history is not empty (a node that applied nothing proves nothing);
/// - it starts with a snapshot, and every delta applies exactly on top of
///   the previous position, in the same epoch, moving forward (no gap, no
///   duplicate);
/// - a snapshot never repeats the position the node already holds (that is
///   a duplicate apply) and never goes back within an epoch;
/// - an epoch, once left, is never returned to: a new SMS epoch replaces the
///   old one for good;
/// - a `restored` line (a node starting from its persisted registry) names
///   a position the node had applied before, and the history goes on from
///   there, as it stood then: a node that crashed before persisting may
///   apply again what it had applied, never anything it skips. `restored
///   0 0` is a start with nothing persisted: a snapshot must come first.
pub fn check(history: &[Applied]) -> Result<(), String> {
    if history
        .iter()
        .all(|a| matches!(a, Applied::Restored { .. }))
    {
        return Err("the applied history is empty: the node applied nothing".into());
    }
    let mut position: Option<(u64, u64)> = None;
    let mut left_epochs: Vec<u64> = Vec::new();
    // Every position reached, with the epochs left by then.
    let mut reached: HashMap<(u64, u64), Vec<u64>> = HashMap::new();
    for (i, entry) in history.iter().enumerate() {
        if let Some(at) = position {
            reached.entry(at).or_insert_with(|| left_epochs.clone());
        }
        match *entry {
            // A start with nothing persisted: the node begins again.
            Applied::Restored {
                epoch: 0,
                revision: 0,
            } => position = None,
            Applied::Restored { epoch, revision } => {
                let Some(left) = reached.get(&(epoch, revision)) else {
                    return Err(format!(
                        "entry {i}: restored {epoch}/{revision}, a position the node never applied"
                    ));
                };
                left_epochs = left.clone();
                position = Some((epoch, revision));
            }
            Applied::Snapshot { epoch, revision } => {
                if let Some((e, r)) = position {
                    if e == epoch && revision == r {
                        return Err(format!(
                            "entry {i}: snapshot {epoch}/{revision} repeats the position already applied"
                        ));
                    }
                    if e == epoch && revision < r {
                        return Err(format!(
                            "entry {i}: snapshot at {revision} is lower than applied {r} in epoch {epoch}"
                        ));
                    }
                    if e != epoch {
                        left_epochs.push(e);
                    }
                }
                if left_epochs.contains(&epoch) {
                    return Err(format!(
                        "entry {i}: snapshot returns to epoch {epoch}, which the node had left"
                    ));
                }
                position = Some((epoch, revision));
            }
            Applied::Delta {
                epoch,
                prev,
                revision,
            } => {
                let Some((e, r)) = position else {
                    return Err(format!("entry {i}: delta {revision} before any snapshot"));
                };
                if e != epoch {
                    return Err(format!(
                        "entry {i}: delta of epoch {epoch} applied on epoch {e}"
                    ));
                }
                if prev != r {
                    return Err(format!(
                        "entry {i}: delta {prev}->{revision} applied at {r} (gap or duplicate)"
                    ));
                }
                if revision <= prev {
                    return Err(format!(
                        "entry {i}: delta {prev}->{revision} does not move forward"
                    ));
                }
                position = Some((epoch, revision));
            }
        }
    }
    Ok(())
}

/// Waits until `node` serves exactly SMS's registry, then checks the node's
/// whole applied history; returns it. Every test that moves the registry
/// ends with this.
pub fn converged(sms: &SmsProc, node: &SpearletProc) -> Vec<Applied> {
    eventually("the node to converge on SMS's registry", SOON, || {
        let expected = sms_registry_as(&sms.grpc, sms.options.client_tls.as_ref())?;
        let got = node_registry(&node.registry()?)?;
        if got == expected {
            Ok(())
        } else {
            Err(format!("node {got:?}\nsms {expected:?}"))
        }
    });
    let history = parse(&node.applied_log()).unwrap_or_else(|e| panic!("{e}"));
    check(&history).unwrap_or_else(|e| panic!("history of {}: {e}\n{history:?}", node.node_id));
    history
}

/// How long a converging node may take.
const SOON: std::time::Duration = std::time::Duration::from_secs(20);

/// A registry as `(epoch, revision, [(id, mod_revision)])`, sorted by id.
pub type Position = (u64, u64, Vec<(String, u64)>);

/// SMS's registry as `(epoch, revision, [(id, mod_revision)])`, sorted.
pub fn sms_registry(grpc: &str) -> Result<Position, String> {
    sms_registry_as(grpc, None)
}

/// [`sms_registry`] over TLS as `tls`'s identity, when given.
pub fn sms_registry_as(grpc: &str, tls: Option<&TlsSet>) -> Result<Position, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(sms_registry_async_as(grpc, tls))
}

/// [`sms_registry`] for async callers.
pub async fn sms_registry_async(grpc: &str) -> Result<Position, String> {
    sms_registry_async_as(grpc, None).await
}

/// [`sms_registry_async`] over TLS as `tls`'s identity, when given.
pub async fn sms_registry_async_as(grpc: &str, tls: Option<&TlsSet>) -> Result<Position, String> {
    {
        let tls = tls.map(TlsSet::identity).transpose()?;
        let (endpoint, dialer) =
            dial(grpc, tls.as_ref(), Identity::Sms).map_err(|e| e.to_string())?;
        let channel = dialer.connect(endpoint).await.map_err(|e| e.to_string())?;
        let mut client = RegistryClient::new(channel);
        let list = client
            .list_servers(ListServersRequest {})
            .await
            .map_err(|e| e.to_string())?
            .into_inner();
        let mut servers: Vec<(String, u64)> = list
            .servers
            .iter()
            .filter_map(|r| r.spec.as_ref().map(|s| (s.id.clone(), r.mod_revision)))
            .collect();
        servers.sort();
        Ok((list.epoch, list.revision, servers))
    }
}

/// A node's registry view (`GET /registry`) in the same form.
pub fn node_registry(view: &serde_json::Value) -> Result<Position, String> {
    let epoch = view["epoch"]
        .as_u64()
        .ok_or(format!("no epoch in {view}"))?;
    let revision = view["revision"]
        .as_u64()
        .ok_or(format!("no revision in {view}"))?;
    let mut servers: Vec<(String, u64)> = view["servers"]
        .as_array()
        .ok_or(format!("no servers in {view}"))?
        .iter()
        .map(|s| {
            (
                s["spec"]["id"].as_str().unwrap_or_default().to_string(),
                s["mod_revision"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    servers.sort();
    Ok((epoch, revision, servers))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn restored(epoch: u64, revision: u64) -> Applied {
        Applied::Restored { epoch, revision }
    }

    fn snap(epoch: u64, revision: u64) -> Applied {
        Applied::Snapshot { epoch, revision }
    }

    fn delta(epoch: u64, prev: u64, revision: u64) -> Applied {
        Applied::Delta {
            epoch,
            prev,
            revision,
        }
    }

    #[test]
    fn a_good_history_passes() {
        let ok = [
            snap(1, 5),
            delta(1, 5, 7),
            delta(1, 7, 8),
            snap(1, 12),
            snap(2, 1),
        ];
        assert_eq!(check(&ok), Ok(()));
    }

    #[test]
    fn each_broken_rule_is_caught_and_named() {
        let cases: [(&[Applied], &str); 9] = [
            (&[snap(1, 1), restored(1, 5)], "never applied"),
            (
                &[snap(1, 5), delta(1, 5, 7), restored(1, 6)],
                "never applied",
            ),
            (&[], "empty"),
            (&[delta(1, 0, 1)], "before any snapshot"),
            (&[snap(1, 5), delta(1, 6, 7)], "gap or duplicate"),
            (
                &[snap(1, 5), delta(1, 5, 7), delta(1, 5, 7)],
                "gap or duplicate",
            ),
            (&[snap(1, 5), snap(1, 5)], "repeats the position"),
            (&[snap(1, 5), snap(1, 4)], "lower than applied"),
            (&[snap(1, 5), snap(2, 1), snap(1, 9)], "returns to epoch 1"),
        ];
        for (history, rule) in cases {
            let err = check(history).expect_err(rule);
            assert!(err.contains(rule), "{history:?}: {err}");
        }
    }

    #[test]
    fn a_crash_before_persisting_may_reapply_never_skip() {
        // Persisted at 5, applied to 9, crashed, restored 5, applies again.
        let again = [
            snap(1, 5),
            delta(1, 5, 7),
            delta(1, 7, 9),
            restored(1, 5),
            delta(1, 5, 7),
            delta(1, 7, 9),
        ];
        assert_eq!(check(&again), Ok(()));
        // Persisted in epoch 1, moved to epoch 2, crashed: back in 1, then 2.
        let epochs = [snap(1, 5), snap(2, 3), restored(1, 5), snap(2, 4)];
        assert_eq!(check(&epochs), Ok(()));
        // Skipping after a restore is still a gap.
        let skip = [snap(1, 5), delta(1, 5, 7), restored(1, 5), delta(1, 7, 9)];
        assert!(check(&skip).unwrap_err().contains("gap or duplicate"));
        // Crashed before persisting anything: starts again from a snapshot.
        let fresh = [
            restored(0, 0),
            snap(1, 1),
            delta(1, 1, 2),
            restored(0, 0),
            snap(1, 2),
        ];
        assert_eq!(check(&fresh), Ok(()));
        let no_snapshot = [snap(1, 1), restored(0, 0), delta(1, 1, 2)];
        assert!(check(&no_snapshot)
            .unwrap_err()
            .contains("before any snapshot"));
        assert!(check(&[restored(0, 0)]).unwrap_err().contains("empty"));
    }

    #[test]
    fn lines_are_parsed_with_the_nodes_grammar() {
        let lines = vec!["snapshot 3 9".to_string(), "delta 3 9 10".to_string()];
        assert_eq!(parse(&lines), Ok(vec![snap(3, 9), delta(3, 9, 10)]));
        assert!(parse(&["snapshot 3".to_string()]).is_err());
    }
}
