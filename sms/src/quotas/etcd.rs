//! Quota counters on etcd under `<prefix>/quotas/<key>`, shared by every
//! SMS replica: the value is `<window end ms> <used>`, written only by a
//! transaction that checks the key's revision is the one the replica read,
//! so two replicas never grant the same unit. A replica remembers the
//! revision it last wrote, so an uncontended take is one etcd request.
//!
//! Every key is written under a lease that ends a minute after its
//! window: windows are aligned to the epoch, so one lease serves every
//! key of a window end, and the counters of ended windows (a per-principal
//! quota makes one per principal) leave etcd by themselves.

use std::collections::HashMap;

use async_trait::async_trait;
use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp, TxnOpResponse};
use parking_lot::Mutex;

use super::counters::{apply, CounterError, Counters, Take, Taken};

/// Tries of one take against other writers before the node is told.
const MAX_TRIES: usize = 32;
/// Counters whose last revision a replica remembers.
const MAX_SEEN: usize = 100_000;
/// How long a window's counters outlive it (clocks of replicas differ).
const LEASE_AFTER_WINDOW_S: i64 = 60;
/// Window ends whose lease a replica remembers (one per quota period).
const MAX_LEASES: usize = 1_024;

pub struct EtcdCounters {
    client: Client,
    prefix: String,
    /// Per key: the mod revision and value this replica last saw.
    seen: Mutex<HashMap<String, Seen>>,
    /// Per window end (Unix ms): the lease its counters are written under.
    leases: Mutex<HashMap<u64, i64>>,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    /// 0: the key does not exist.
    revision: i64,
    window_end: u64,
    used: u64,
}

fn unavailable(error: etcd_client::Error) -> CounterError {
    CounterError::Unavailable(format!("etcd: {error}"))
}

impl EtcdCounters {
    /// Shares the registry store's connection.
    pub fn new(client: Client, prefix: &str) -> Self {
        Self {
            client,
            prefix: format!("{}/quotas/", prefix.trim_end_matches('/')),
            seen: Mutex::default(),
            leases: Mutex::default(),
        }
    }

    /// The lease for counters of the window ending at `window_end`,
    /// granted on first use.
    async fn lease(&self, window_end: u64) -> Result<i64, CounterError> {
        if let Some(id) = self.leases.lock().get(&window_end) {
            return Ok(*id);
        }
        let left_s = window_end.saturating_sub(spear_common::clock::now_ms()) / 1_000;
        let ttl = i64::try_from(left_s).unwrap_or(i64::MAX / 2) + LEASE_AFTER_WINDOW_S;
        let granted = self
            .client
            .clone()
            .lease_grant(ttl, None)
            .await
            .map_err(unavailable)?;
        let mut leases = self.leases.lock();
        if leases.len() >= MAX_LEASES {
            leases.clear();
        }
        leases.insert(window_end, granted.id());
        Ok(granted.id())
    }

    fn parse(key: &str, kv: Option<&etcd_client::KeyValue>) -> Result<Seen, CounterError> {
        let Some(kv) = kv else {
            return Ok(Seen {
                revision: 0,
                window_end: 0,
                used: 0,
            });
        };
        let corrupt = || CounterError::Corrupt {
            key: key.to_string(),
        };
        let text = std::str::from_utf8(kv.value()).map_err(|_| corrupt())?;
        let (end, used) = text.split_once(' ').ok_or_else(corrupt)?;
        Ok(Seen {
            revision: kv.mod_revision(),
            window_end: end.parse().map_err(|_| corrupt())?,
            used: used.parse().map_err(|_| corrupt())?,
        })
    }
}

#[async_trait]
impl Counters for EtcdCounters {
    async fn take(&self, key: &str, take: &Take) -> Result<Taken, CounterError> {
        let window_end = take.window_end;
        let path = format!("{}{key}", self.prefix);
        let mut client = self.client.clone();
        let remembered = self.seen.lock().get(key).copied();
        let mut seen = match remembered {
            Some(seen) => seen,
            None => Self::parse(
                &path,
                client
                    .get(path.clone(), None)
                    .await
                    .map_err(unavailable)?
                    .kvs()
                    .first(),
            )?,
        };
        for _ in 0..MAX_TRIES {
            let used = if seen.window_end == window_end {
                seen.used
            } else {
                0
            };
            let taken = apply(used, take);
            if taken.used == used && seen.revision != 0 && seen.window_end == window_end {
                // Nothing to write: the window is spent and nothing was.
                return Ok(taken);
            }
            let guard = if seen.revision == 0 {
                Compare::version(path.clone(), CompareOp::Equal, 0)
            } else {
                Compare::mod_revision(path.clone(), CompareOp::Equal, seen.revision)
            };
            let value = format!("{window_end} {}", taken.used);
            let lease = PutOptions::new().with_lease(self.lease(window_end).await?);
            let response = client
                .txn(
                    Txn::new()
                        .when([guard])
                        .and_then([TxnOp::put(path.clone(), value, Some(lease))])
                        .or_else([TxnOp::get(path.clone(), None)]),
                )
                .await
                .map_err(|error| {
                    // A lease etcd no longer has (it was revoked, or etcd
                    // lost it): the next take grants a new one.
                    self.leases.lock().remove(&window_end);
                    unavailable(error)
                })?;
            if response.succeeded() {
                let revision = response.header().map_or(0, |h| h.revision());
                let mut seen = self.seen.lock();
                if seen.len() >= MAX_SEEN {
                    // Forgetting only costs the next take a read.
                    seen.clear();
                }
                seen.insert(
                    key.to_string(),
                    Seen {
                        revision,
                        window_end,
                        used: taken.used,
                    },
                );
                return Ok(taken);
            }
            // Another replica wrote it: read what it wrote, and try again.
            let current = response.op_responses().into_iter().find_map(|op| match op {
                TxnOpResponse::Get(get) => Some(Self::parse(&path, get.kvs().first())),
                _ => None,
            });
            seen = current.unwrap_or(Ok(seen))?;
        }
        Err(CounterError::Contended {
            key: key.to_string(),
        })
    }
}
