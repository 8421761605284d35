//! Invocable nodes shared between SMS replicas through etcd, so an
//! invocation sent to any replica can reach a node that heartbeats to
//! another one.
//!
//! A node that accepts invocations is written to `<prefix>/nodes/<node id>`
//! under an etcd lease of [`NODE_TTL`], one lease per node: each heartbeat
//! keeps it alive, and the record is rewritten only when it changes. The
//! record disappears by itself when the node stops heartbeating (or its SMS
//! goes away), with no clock compared across machines.

use std::collections::HashMap;
use std::time::Instant;

use etcd_client::{Client, GetOptions, PutOptions};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use spear_proto::v1::{HeartbeatRequest, SyncState};

use super::{Invocable, NODE_TTL};

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    node_id: String,
    invoke_addr: String,
    synced: bool,
    running: u32,
    #[serde(default)]
    failed_servers: Vec<String>,
    /// Shutting down: routed to by no replica.
    #[serde(default)]
    draining: bool,
}

/// The shared directory of invocable nodes.
pub struct SharedNodes {
    client: Client,
    prefix: String,
    /// Each published node's lease and the record written under it.
    leases: Mutex<HashMap<String, Lease>>,
}

#[derive(Clone)]
struct Lease {
    id: i64,
    record: Vec<u8>,
    kept: Instant,
}

/// Leases remembered before the ones of long-gone nodes are dropped.
const SWEEP_ABOVE: usize = 10_000;

impl SharedNodes {
    /// Shares the registry store's etcd connection.
    pub fn new(client: Client, prefix: &str) -> Self {
        Self {
            client,
            prefix: format!("{}/nodes/", prefix.trim_end_matches('/')),
            leases: Mutex::default(),
        }
    }

    /// Refreshes `lease`; false when etcd says it has expired.
    async fn keep_alive(&self, lease: i64) -> Result<bool, etcd_client::Error> {
        let mut client = self.client.clone();
        let (mut keeper, mut responses) = client.lease_keep_alive(lease).await?;
        keeper.keep_alive().await?;
        Ok(responses.message().await?.is_some_and(|r| r.ttl() > 0))
    }

    /// Publishes a heartbeat of a node that accepts invocations.
    pub async fn publish(&self, report: &HeartbeatRequest) -> Result<(), etcd_client::Error> {
        if report.invoke_addr.is_empty() {
            return Ok(());
        }
        let record = Record {
            node_id: report.node_id.clone(),
            invoke_addr: report.invoke_addr.clone(),
            synced: report.sync_state == SyncState::Synced as i32,
            running: report.running,
            draining: report.draining,
            failed_servers: report
                .problems
                .iter()
                .filter(|p| p.failed)
                .map(|p| p.server_id.clone())
                .collect(),
        };
        let value = serde_json::to_vec(&record).unwrap_or_default();
        let key = format!("{}{}", self.prefix, report.node_id);
        let mut client = self.client.clone();
        let known = self.leases.lock().get(&report.node_id).cloned();
        let lease = match known {
            Some(lease) if self.keep_alive(lease.id).await? => {
                if lease.record == value {
                    self.remember(&report.node_id, lease.id, value);
                    return Ok(());
                }
                lease.id
            }
            _ => client
                .lease_grant(NODE_TTL.as_secs() as i64, None)
                .await?
                .id(),
        };
        client
            .put(
                key,
                value.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )
            .await?;
        self.remember(&report.node_id, lease, value);
        Ok(())
    }

    fn remember(&self, node_id: &str, id: i64, record: Vec<u8>) {
        let now = Instant::now();
        let mut leases = self.leases.lock();
        leases.insert(
            node_id.to_string(),
            Lease {
                id,
                record,
                kept: now,
            },
        );
        if leases.len() > SWEEP_ABOVE {
            leases.retain(|_, l| now.duration_since(l.kept) < NODE_TTL);
        }
    }

    /// Every node some replica heard from within the TTL.
    pub async fn invocable(&self) -> Result<Vec<Invocable>, etcd_client::Error> {
        let mut client = self.client.clone();
        let response = client
            .get(self.prefix.clone(), Some(GetOptions::new().with_prefix()))
            .await?;
        Ok(response
            .kvs()
            .iter()
            .filter_map(|kv| serde_json::from_slice::<Record>(kv.value()).ok())
            .filter(|r| !r.draining)
            .map(|r| Invocable {
                node_id: r.node_id,
                addr: r.invoke_addr,
                synced: r.synced,
                running: r.running,
                failed_servers: r.failed_servers,
            })
            .collect())
    }
}
