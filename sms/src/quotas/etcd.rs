//! Quota counters on etcd under `<prefix>/quotas/<key>`, shared by every
//! SMS replica: the value is `<window end ms> <used>`, written only by a
//! transaction that checks the key's revision is the one the replica read,
//! so two replicas never grant the same unit. A replica remembers the
//! revision it last wrote, so an uncontended take is one etcd request.

use std::collections::HashMap;

use async_trait::async_trait;
use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp, TxnOpResponse};
use parking_lot::Mutex;

use super::counters::{apply, CounterError, Counters, Taken, Want};

/// Tries of one take against other writers before the node is told.
const MAX_TRIES: usize = 32;
/// Counters whose last revision a replica remembers.
const MAX_SEEN: usize = 100_000;

pub struct EtcdCounters {
    client: Client,
    prefix: String,
    /// Per key: the mod revision and value this replica last saw.
    seen: Mutex<HashMap<String, Seen>>,
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
        }
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
    async fn take(
        &self,
        key: &str,
        window_end: u64,
        max: u64,
        spent: u64,
        want: Want,
    ) -> Result<Taken, CounterError> {
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
            let taken = apply(used, max, spent, want);
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
            let response = client
                .txn(
                    Txn::new()
                        .when([guard])
                        .and_then([TxnOp::put(path.clone(), value, None)])
                        .or_else([TxnOp::get(path.clone(), None)]),
                )
                .await
                .map_err(unavailable)?;
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
