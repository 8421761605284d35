//! The history checker: proves from a node's `applied.log` that it applied
//! registry revisions in order, with no gap and no duplicate, and compares
//! its final registry with SMS's.

use spear_proto::v1::registry_client::RegistryClient;
use spear_proto::v1::ListServersRequest;

/// One line of `applied.log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    Snapshot {
        epoch: u64,
        revision: u64,
    },
    Delta {
        epoch: u64,
        prev: u64,
        revision: u64,
    },
}

/// Parses `applied.log` lines.
pub fn parse(lines: &[String]) -> Result<Vec<Applied>, String> {
    lines
        .iter()
        .map(|line| {
            let parts: Vec<&str> = line.split_whitespace().collect();
            let num = |i: usize| -> Result<u64, String> {
                parts
                    .get(i)
                    .and_then(|p| p.parse().ok())
                    .ok_or(format!("bad line {line:?}"))
            };
            match parts.first() {
                Some(&"snapshot") => Ok(Applied::Snapshot {
                    epoch: num(1)?,
                    revision: num(2)?,
                }),
                Some(&"delta") => Ok(Applied::Delta {
                    epoch: num(1)?,
                    prev: num(2)?,
                    revision: num(3)?,
                }),
                _ => Err(format!("bad line {line:?}")),
            }
        })
        .collect()
}

/// Checks the rules of the watch protocol over a node's whole history:
/// within an epoch the applied revision never goes down, every delta applies
/// exactly on top of the previous position (no gap, no duplicate).
pub fn check(history: &[Applied]) -> Result<(), String> {
    let mut position: Option<(u64, u64)> = None;
    for (i, entry) in history.iter().enumerate() {
        match *entry {
            Applied::Snapshot { epoch, revision } => {
                if let Some((e, r)) = position {
                    if e == epoch && revision < r {
                        return Err(format!("entry {i}: snapshot at {revision} is lower than applied {r} in epoch {epoch}"));
                    }
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

/// A registry as `(epoch, revision, [(id, mod_revision)])`, sorted by id.
pub type Position = (u64, u64, Vec<(String, u64)>);

/// SMS's registry as `(epoch, revision, [(id, mod_revision)])`, sorted.
pub fn sms_registry(grpc: &str) -> Result<Position, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(sms_registry_async(grpc))
}

/// [`sms_registry`] for async callers.
pub async fn sms_registry_async(grpc: &str) -> Result<Position, String> {
    {
        let mut client = RegistryClient::connect(format!("http://{grpc}"))
            .await
            .map_err(|e| e.to_string())?;
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

    #[test]
    fn the_checker_catches_gaps_duplicates_and_regressions() {
        let ok = [
            Applied::Snapshot {
                epoch: 1,
                revision: 5,
            },
            Applied::Delta {
                epoch: 1,
                prev: 5,
                revision: 7,
            },
            Applied::Delta {
                epoch: 1,
                prev: 7,
                revision: 8,
            },
            Applied::Snapshot {
                epoch: 2,
                revision: 1,
            },
        ];
        assert!(check(&ok).is_ok());
        let gap = [
            Applied::Snapshot {
                epoch: 1,
                revision: 5,
            },
            Applied::Delta {
                epoch: 1,
                prev: 6,
                revision: 7,
            },
        ];
        assert!(check(&gap).is_err());
        let dup = [
            Applied::Snapshot {
                epoch: 1,
                revision: 5,
            },
            Applied::Delta {
                epoch: 1,
                prev: 5,
                revision: 7,
            },
            Applied::Delta {
                epoch: 1,
                prev: 5,
                revision: 7,
            },
        ];
        assert!(check(&dup).is_err());
        let lower = [
            Applied::Snapshot {
                epoch: 1,
                revision: 5,
            },
            Applied::Snapshot {
                epoch: 1,
                revision: 4,
            },
        ];
        assert!(check(&lower).is_err());
    }
}
