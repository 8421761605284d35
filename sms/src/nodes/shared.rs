//! Invocable nodes shared between SMS replicas through etcd, so an
//! invocation sent to any replica can reach a node that heartbeats to
//! another one.
//!
//! A node that accepts invocations is written to `<prefix>/nodes/<node id>`
//! under **this replica's** etcd lease of [`NODE_TTL`]. A heartbeat costs
//! etcd nothing unless the node's record changed: the replica keeps its one
//! lease alive on a timer, and deletes the record of a node it has not
//! heard from within [`NODE_TTL`] (only while the record is still its own:
//! a node that moved to another replica keeps that replica's record). When
//! the replica itself goes away, its lease expires and every record it
//! wrote goes with it; no clock is compared across machines.
//!
//! A node that follows this replica (its stream open) is heard for as
//! long as the stream is; the time starts when the stream ends, or the
//! record goes at the next sweep when the node left.
//!
//! Reports on follow streams are written by one writer task
//! ([`SharedNodes::publish_soon`]): the latest record per node waits in a
//! queue and at most [`WRITERS`] puts are in flight, so 10,000 nodes
//! opening their streams at once (an SMS restart) are written as fast as
//! etcd takes them, in order per node, instead of 10,000 puts at once
//! that etcd refuses ("too many requests"); a report never waits for
//! etcd, and a write that fails is tried again.
//!
//! One lease per node, kept alive on every heartbeat, cost each heartbeat
//! an etcd keep-alive stream of its own: at 10,000 nodes, 2,000 a second.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Instant;

use etcd_client::{Client, Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp};
use futures::StreamExt;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use spear_proto::v1::{HeartbeatRequest, SyncState};
use tracing::warn;

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

impl Record {
    fn of(report: &HeartbeatRequest) -> Record {
        Record {
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
        }
    }
}

/// The shared directory of invocable nodes.
pub struct SharedNodes {
    client: Client,
    prefix: String,
    state: Mutex<State>,
    /// One grant at a time: heartbeats arriving before the lease exists
    /// wait for it rather than each granting their own.
    granting: tokio::sync::Mutex<()>,
    /// Wakes the writer when a record is queued (or the directory is
    /// dropped).
    wake: Arc<tokio::sync::Notify>,
}

impl Drop for SharedNodes {
    fn drop(&mut self) {
        self.wake.notify_one();
    }
}

#[derive(Default)]
struct State {
    /// This replica's lease; `None` until granted, and again once etcd
    /// says it expired (every record under it went with it).
    lease: Option<i64>,
    /// What this replica wrote for each node, under which lease, and when
    /// it last heard from the node.
    written: HashMap<String, Written>,
    /// Nodes whose follow streams to this replica are open, and how many.
    following: HashMap<String, u32>,
    /// Nodes written and not following: the only ones a sweep looks at.
    /// With 2,000 nodes following, a sweep of every record cost 3.5 µs a
    /// record in cold hash lookups (`perf`), 0.15 % of a core for nothing,
    /// more than linearly more at 10,000.
    quiet: HashSet<String>,
    /// Records waiting for the writer: the latest per node.
    queued: HashMap<String, Vec<u8>>,
}

impl State {
    /// Puts `node_id` among the nodes a sweep looks at when it has a
    /// record and no open stream, and takes it out otherwise.
    fn settle(&mut self, node_id: &str) {
        if self.written.contains_key(node_id) && !self.following.contains_key(node_id) {
            self.quiet.insert(node_id.to_string());
        } else {
            self.quiet.remove(node_id);
        }
    }
}

struct Written {
    record: Vec<u8>,
    lease: i64,
    heard: Instant,
}

/// Puts the writer has in flight at most.
const WRITERS: usize = 32;
/// How long the writer waits before trying failed writes again.
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// How often the lease is kept alive and silent nodes' records removed:
/// three times within the lease's life.
const KEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(NODE_TTL.as_secs() / 3);

impl SharedNodes {
    /// Shares the registry store's etcd connection. Keeps this replica's
    /// lease alive, and removes silent nodes' records, for as long as the
    /// returned directory is held.
    pub fn start(client: Client, prefix: &str) -> Arc<SharedNodes> {
        let shared = Arc::new(Self {
            client,
            prefix: format!("{}/nodes/", prefix.trim_end_matches('/')),
            state: Mutex::default(),
            granting: tokio::sync::Mutex::new(()),
            wake: Arc::default(),
        });
        tokio::spawn(keep(Arc::downgrade(&shared)));
        tokio::spawn(write_queued(
            Arc::downgrade(&shared),
            Arc::clone(&shared.wake),
        ));
        shared
    }

    /// Marks a join token's nonce spent, for every replica, until the
    /// token would have expired (`ttl_s` from now). `true`: this was its
    /// first use.
    pub async fn spend_join(&self, nonce: &str, ttl_s: i64) -> Result<bool, etcd_client::Error> {
        let key = format!("{}joins-spent/{nonce}", self.prefix);
        let mut client = self.client.clone();
        let lease = client.lease_grant(ttl_s.max(1), None).await?.id();
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key,
                "",
                Some(PutOptions::new().with_lease(lease)),
            )]);
        Ok(client.txn(txn).await?.succeeded())
    }

    /// Publishes a heartbeat of a node that accepts invocations: written
    /// to etcd only when the node's record changed (or this replica's
    /// lease did).
    /// The report's own record replaces any queued one.
    pub async fn publish(&self, report: &HeartbeatRequest) -> Result<(), etcd_client::Error> {
        match self.changed(report) {
            Some(value) => {
                self.state.lock().queued.remove(&report.node_id);
                self.write(&report.node_id, value).await
            }
            None => Ok(()),
        }
    }

    /// [`SharedNodes::publish`] by the writer task: queued when changed,
    /// written soon, without waiting.
    pub fn publish_soon(&self, report: &HeartbeatRequest) {
        if let Some(value) = self.changed(report) {
            self.state
                .lock()
                .queued
                .insert(report.node_id.clone(), value);
            self.wake.notify_one();
        }
    }

    /// The node's record when it must be written: it differs from what
    /// this replica wrote (or queued), or its lease changed. Notes that
    /// the node was heard.
    fn changed(&self, report: &HeartbeatRequest) -> Option<Vec<u8>> {
        if report.invoke_addr.is_empty() {
            return None;
        }
        let value = serde_json::to_vec(&Record::of(report)).unwrap_or_default();
        let mut state = self.state.lock();
        let lease = state.lease;
        if let Some(queued) = state.queued.get(&report.node_id) {
            return (*queued != value).then_some(value);
        }
        if let Some(written) = state.written.get_mut(&report.node_id) {
            written.heard = Instant::now();
            if written.record == value && Some(written.lease) == lease {
                return None;
            }
        }
        Some(value)
    }

    /// Writes `node_id`'s record under this replica's lease.
    async fn write(&self, node_id: &str, value: Vec<u8>) -> Result<(), etcd_client::Error> {
        let key = format!("{}{}", self.prefix, node_id);
        let lease = self.lease().await?;
        let lease = match self.put(&key, &value, lease).await {
            Err(etcd_client::Error::GRpcStatus(status))
                if status.code() == tonic::Code::NotFound =>
            {
                // The lease expired while etcd was out of reach: every
                // record under it is gone, so take a new one.
                self.expired(lease);
                let lease = self.lease().await?;
                self.put(&key, &value, lease).await?;
                lease
            }
            Err(error) => return Err(error),
            Ok(()) => lease,
        };
        let mut state = self.state.lock();
        state.written.insert(
            node_id.to_string(),
            Written {
                record: value,
                lease,
                heard: Instant::now(),
            },
        );
        state.settle(node_id);
        Ok(())
    }

    /// Writes what is queued, [`WRITERS`] at a time; failed writes go
    /// back in the queue (unless a newer record took their place), and
    /// `true` says some failed.
    async fn write_queued_once(&self) -> bool {
        let batch: Vec<(String, Vec<u8>)> = self.state.lock().queued.drain().collect();
        let failed = parking_lot::Mutex::new(Vec::new());
        futures::stream::iter(batch)
            .for_each_concurrent(WRITERS, |(node_id, value)| {
                let failed = &failed;
                async move {
                    if let Err(error) = self.write(&node_id, value.clone()).await {
                        failed.lock().push((node_id, value, error));
                    }
                }
            })
            .await;
        let failed = failed.into_inner();
        let Some((_, _, error)) = failed.first() else {
            return false;
        };
        warn!(nodes = failed.len(), %error, "cannot publish nodes to the other SMS replicas; trying again");
        let mut state = self.state.lock();
        for (node_id, value, _) in failed {
            state.queued.entry(node_id).or_insert(value);
        }
        true
    }

    /// A follow stream of `node_id` opened: the node is heard until it
    /// ends.
    pub fn stream_opened(&self, node_id: &str) {
        let mut state = self.state.lock();
        *state.following.entry(node_id.to_string()).or_default() += 1;
        state.settle(node_id);
    }

    /// A follow stream of `node_id` ended; `left`: the node ended it, and
    /// its record goes at the next sweep.
    pub fn stream_ended(&self, node_id: &str, left: bool) {
        let mut state = self.state.lock();
        let open = match state.following.get_mut(node_id) {
            Some(open) => {
                *open = open.saturating_sub(1);
                *open
            }
            None => 0,
        };
        if open > 0 {
            return;
        }
        state.following.remove(node_id);
        state.settle(node_id);
        let now = Instant::now();
        if let Some(written) = state.written.get_mut(node_id) {
            written.heard = match left {
                true => now.checked_sub(NODE_TTL).unwrap_or(now),
                false => now,
            };
        }
    }

    async fn put(&self, key: &str, value: &[u8], lease: i64) -> Result<(), etcd_client::Error> {
        let options = PutOptions::new().with_lease(lease);
        self.client.clone().put(key, value, Some(options)).await?;
        Ok(())
    }

    /// This replica's lease, granted on first use.
    async fn lease(&self) -> Result<i64, etcd_client::Error> {
        if let Some(lease) = self.state.lock().lease {
            return Ok(lease);
        }
        let _one = self.granting.lock().await;
        if let Some(lease) = self.state.lock().lease {
            return Ok(lease);
        }
        let ttl = NODE_TTL.as_secs() as i64;
        let lease = self.client.clone().lease_grant(ttl, None).await?.id();
        self.state.lock().lease = Some(lease);
        Ok(lease)
    }

    /// Forgets `lease` after etcd said it no longer exists.
    fn expired(&self, lease: i64) {
        let mut state = self.state.lock();
        if state.lease == Some(lease) {
            state.lease = None;
        }
    }

    /// Keeps the lease alive and removes the records of nodes this replica
    /// has not heard from within [`NODE_TTL`].
    async fn keep_once(&self) {
        let Some(lease) = self.state.lock().lease else {
            return;
        };
        match self.client.clone().lease_keep_alive(lease).await {
            Ok(_) => {}
            Err(etcd_client::Error::LeaseKeepAliveError(_)) => self.expired(lease),
            Err(error) => warn!(%error, "cannot keep this SMS's node records alive in etcd"),
        }
        let now = Instant::now();
        let silent: Vec<(String, i64)> = {
            let mut state = self.state.lock();
            let silent = state
                .quiet
                .iter()
                .filter_map(|id| state.written.get(id).map(|w| (id, w)))
                .filter(|(_, w)| now.duration_since(w.heard) >= NODE_TTL)
                .map(|(id, w)| (id.clone(), w.lease))
                .collect::<Vec<_>>();
            for (id, _) in &silent {
                state.written.remove(id);
                state.quiet.remove(id);
            }
            silent
        };
        for (node_id, lease) in silent {
            // Only while the record is still ours: a node that moved to
            // another replica has that replica's record under the key.
            let key = format!("{}{}", self.prefix, node_id);
            let txn = Txn::new()
                .when([Compare::lease(key.clone(), CompareOp::Equal, lease)])
                .and_then([TxnOp::delete(key, None)]);
            if let Err(error) = self.client.clone().txn(txn).await {
                warn!(%node_id, %error, "cannot remove a silent node's record from etcd; its lease will");
            }
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

/// The writer: writes what [`SharedNodes::publish_soon`] queued until the
/// directory is dropped.
async fn write_queued(shared: Weak<SharedNodes>, wake: Arc<tokio::sync::Notify>) {
    loop {
        wake.notified().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if shared.write_queued_once().await {
            tokio::time::sleep(RETRY_AFTER).await;
            shared.wake.notify_one();
        }
    }
}

/// The keeper: runs [`SharedNodes::keep_once`] every [`KEEP_EVERY`] until
/// the directory is dropped.
async fn keep(shared: Weak<SharedNodes>) {
    let mut every = tokio::time::interval(KEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        match shared.upgrade() {
            Some(shared) => shared.keep_once().await,
            None => return,
        }
    }
}
