//! Invocable nodes shared between SMS replicas through etcd, so an
//! invocation sent to any replica can reach a node that heartbeats to
//! another one.
//!
//! Each heartbeat of a node that accepts invocations is written to
//! `<prefix>/nodes/<node id>` under a fresh etcd lease of [`NODE_TTL`]: the
//! record disappears by itself when the node stops heartbeating (or its SMS
//! goes away), with no clock compared across machines.

use etcd_client::{Client, GetOptions, PutOptions};
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
}

/// The shared directory of invocable nodes.
pub struct SharedNodes {
    client: Client,
    prefix: String,
}

impl SharedNodes {
    /// Shares the registry store's etcd connection.
    pub fn new(client: Client, prefix: &str) -> Self {
        Self {
            client,
            prefix: format!("{}/nodes/", prefix.trim_end_matches('/')),
        }
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
            failed_servers: report
                .problems
                .iter()
                .filter(|p| p.failed)
                .map(|p| p.server_id.clone())
                .collect(),
        };
        let value = serde_json::to_vec(&record).unwrap_or_default();
        let mut client = self.client.clone();
        let lease = client
            .lease_grant(NODE_TTL.as_secs() as i64, None)
            .await?
            .id();
        client
            .put(
                format!("{}{}", self.prefix, report.node_id),
                value,
                Some(PutOptions::new().with_lease(lease)),
            )
            .await?;
        Ok(())
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
