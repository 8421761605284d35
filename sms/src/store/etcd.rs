//! The etcd store: one registry shared by every SMS replica.
//!
//! Layout under the prefix (default `/spear`):
//! - `registry/servers/<id>`: a protobuf `ServerRecord`;
//! - `registry/head`: the registry revision the last change was applied on
//!   top of, as decimal text.
//!
//! Every change is one etcd transaction that compares the head's
//! `mod_revision` with the writer's expected revision and rewrites the head,
//! so registry writes are serialised across replicas, the registry revision
//! is simply etcd's revision of that transaction (comparable everywhere), and
//! each change carries the exact revision it followed, which lets readers
//! prove they missed nothing. The epoch is the etcd cluster id.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, KeyValue, Txn, TxnOp,
    WatchOptions,
};
use prost::Message;
use spear_identity::{ServiceTls, ServiceTlsFiles};
use spear_proto::v1::ServerRecord;
use tracing::debug;

use super::{
    Change, Committed, CommittedStream, Epoch, RegistryStore, Revision, Snapshot, StoreError,
};

/// Responses as large as a 10,000-server registry must decode.
const MAX_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

/// Where the etcd cluster is.
#[derive(Debug, Clone)]
pub struct EtcdStoreConfig {
    /// `http://host:port` or `host:port`, several for a cluster.
    pub endpoints: Vec<String>,
    /// Key prefix, so several Spear installations can share one etcd.
    pub prefix: String,
    pub connect_timeout: Duration,
    /// TLS to etcd (`--etcd-ca`, and `--etcd-cert`/`--etcd-key` for client
    /// certificate authentication); endpoints without a scheme become https.
    pub tls: Option<EtcdTls>,
    /// etcd user authentication (`--etcd-user`, password from a file or
    /// `SMS_ETCD_PASSWORD`).
    pub user: Option<EtcdUser>,
}

/// The PEM files for TLS to etcd, re-read when they change (a rotated
/// certificate is used from the next connection on).
#[derive(Clone, Debug)]
pub struct EtcdTls {
    pub ca: PathBuf,
    /// Certificate and key, when etcd asks for client certificates.
    pub identity: Option<(PathBuf, PathBuf)>,
}

/// An etcd user; Debug never shows the password.
#[derive(Clone)]
pub struct EtcdUser {
    pub name: String,
    pub password: String,
}

impl std::fmt::Debug for EtcdUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EtcdUser({}, <password>)", self.name)
    }
}

impl Default for EtcdStoreConfig {
    fn default() -> Self {
        Self {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            prefix: "/spear".into(),
            connect_timeout: Duration::from_secs(5),
            tls: None,
            user: None,
        }
    }
}

/// The etcd-backed registry store.
pub struct EtcdStore {
    client: Client,
    epoch: Epoch,
    prefix: String,
    keys: Keys,
}

struct Keys {
    registry: String,
    servers: String,
    head: String,
}

impl Keys {
    fn new(prefix: &str) -> Self {
        let prefix = prefix.trim_end_matches('/');
        Self {
            registry: format!("{prefix}/registry/"),
            servers: format!("{prefix}/registry/servers/"),
            head: format!("{prefix}/registry/head"),
        }
    }

    fn server(&self, id: &str) -> String {
        format!("{}{id}", self.servers)
    }
}

fn unavailable(what: &str, error: etcd_client::Error) -> StoreError {
    let text = error.to_string();
    let hint = hint(&text, false);
    StoreError::Unavailable(format!("etcd {what} failed: {text}{hint}"))
}

/// What to do about an etcd error, from its text; `no_client_cert`: SMS
/// speaks TLS to etcd without a certificate of its own.
fn hint(text: &str, no_client_cert: bool) -> &'static str {
    if text.contains("too many operations") {
        "; start etcd with a larger --max-txn-ops (at least the servers of the largest file, plus one)"
    } else if text.contains("too large") {
        "; start etcd with a larger --max-request-bytes"
    } else if text.contains("BadCertificate") || text.contains("CertificateRequired") {
        "; etcd refused SMS's client certificate: give --etcd-cert and --etcd-key from a CA etcd trusts"
    } else if text.contains("invalid peer certificate") {
        "; etcd's certificate does not chain to --etcd-ca, or does not name the endpoint's host or address"
    } else if text.contains("authentication failed") {
        "; check --etcd-user and the password in --etcd-password-file (or SMS_ETCD_PASSWORD)"
    } else if no_client_cert && text.contains("ransport") {
        // A server that wants a client certificate may just close the
        // connection (a reset, a broken pipe) instead of saying so.
        "; if etcd requires client certificates, give --etcd-cert and --etcd-key"
    } else {
        ""
    }
}

impl EtcdStore {
    /// Connects and learns the cluster id (the epoch).
    pub async fn connect(config: EtcdStoreConfig) -> Result<EtcdStore, StoreError> {
        let mut options = ConnectOptions::new()
            .with_connect_timeout(config.connect_timeout)
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5));
        if let Some(user) = &config.user {
            options = options.with_user(user.name.clone(), user.password.clone());
        }
        let no_client_cert = config.tls.as_ref().is_some_and(|t| t.identity.is_none());
        let connected = match &config.tls {
            // Our own TLS, so the files can change under a running SMS.
            Some(tls) => {
                let tls = ServiceTls::load(ServiceTlsFiles {
                    ca: tls.ca.clone(),
                    identity: tls.identity.clone(),
                })
                .map_err(|e| StoreError::Unavailable(format!("TLS to etcd: {e}")))?;
                let channel = tls
                    .channel(&config.endpoints, config.connect_timeout)
                    .map_err(|e| StoreError::Unavailable(format!("--etcd-endpoints: {e}")))?;
                Client::from_channel(etcd_client::Channel::Tonic(channel), Some(options)).await
            }
            None => Client::connect(&config.endpoints, Some(options)).await,
        };
        let client = connected.map_err(|e| {
            // The transport error's reason is in its Debug form only.
            let text = format!("{e}: {e:?}");
            let hint = hint(&text, no_client_cert);
            let endpoints = config.endpoints.join(",");
            StoreError::Unavailable(format!("etcd connect to {endpoints} failed: {e}{hint}"))
        })?;
        let keys = Keys::new(&config.prefix);
        let mut store = EtcdStore {
            client,
            epoch: 0,
            prefix: config.prefix.clone(),
            keys,
        };
        let response = store
            .client
            .get(store.keys.head.clone(), None)
            .await
            .map_err(|e| unavailable("read", e))?;
        store.epoch = response
            .header()
            .map(|h| h.cluster_id())
            .unwrap_or(0)
            .max(1);
        Ok(store)
    }

    /// The connection, shared with the task store.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    fn decode(&self, kv: &KeyValue) -> Result<ServerRecord, StoreError> {
        let key = String::from_utf8_lossy(kv.key()).into_owned();
        let mut record = ServerRecord::decode(kv.value()).map_err(|e| StoreError::Corrupt {
            key: key.clone(),
            reason: e.to_string(),
        })?;
        record.mod_revision = kv.mod_revision() as u64;
        Ok(record)
    }

    fn server_id<'a>(&self, key: &'a [u8]) -> Option<&'a str> {
        std::str::from_utf8(key)
            .ok()?
            .strip_prefix(self.keys.servers.as_str())
    }
}

#[async_trait]
impl RegistryStore for EtcdStore {
    fn kind(&self) -> &'static str {
        "etcd"
    }

    async fn load(&self) -> Result<Snapshot, StoreError> {
        let mut kv = self
            .client
            .kv_client()
            .max_decoding_message_size(MAX_MESSAGE_BYTES);
        let response = kv
            .get(
                self.keys.registry.clone(),
                Some(GetOptions::new().with_prefix()),
            )
            .await
            .map_err(|e| unavailable("read", e))?;
        let mut snapshot = Snapshot {
            epoch: self.epoch,
            ..Default::default()
        };
        for kv in response.kvs() {
            if kv.key() == self.keys.head.as_bytes() {
                snapshot.revision = kv.mod_revision() as u64;
            } else if let Some(id) = self.server_id(kv.key()) {
                snapshot.servers.insert(id.to_string(), self.decode(kv)?);
            }
        }
        Ok(snapshot)
    }

    async fn commit(&self, expected: Revision, change: Change) -> Result<Revision, StoreError> {
        if change.is_empty() {
            return Ok(expected);
        }
        let guard = if expected == 0 {
            Compare::version(self.keys.head.clone(), CompareOp::Equal, 0)
        } else {
            Compare::mod_revision(self.keys.head.clone(), CompareOp::Equal, expected as i64)
        };
        let mut ops = vec![TxnOp::put(
            self.keys.head.clone(),
            expected.to_string(),
            None,
        )];
        for id in &change.deletes {
            ops.push(TxnOp::delete(self.keys.server(id), None));
        }
        for record in &change.upserts {
            let Some(spec) = &record.spec else { continue };
            let mut stored = record.clone();
            stored.mod_revision = 0;
            ops.push(TxnOp::put(
                self.keys.server(&spec.id),
                stored.encode_to_vec(),
                None,
            ));
        }
        let mut client = self.client.clone();
        let response = client
            .txn(Txn::new().when(vec![guard]).and_then(ops))
            .await
            .map_err(|e| unavailable("write", e))?;
        if response.succeeded() {
            return Ok(response.header().map(|h| h.revision() as u64).unwrap_or(0));
        }
        let head = client
            .get(self.keys.head.clone(), None)
            .await
            .map_err(|e| unavailable("read", e))?;
        let actual = head
            .kvs()
            .first()
            .map(|kv| kv.mod_revision() as u64)
            .unwrap_or(0);
        Err(StoreError::Conflict { expected, actual })
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.client
            .clone()
            .get(
                self.keys.head.clone(),
                Some(GetOptions::new().with_keys_only()),
            )
            .await
            .map(|_| ())
            .map_err(|e| unavailable("read", e))
    }

    async fn watch(&self, after: Revision) -> Result<CommittedStream, StoreError> {
        let mut client = self.client.clone();
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(after as i64 + 1)
            .with_prev_key();
        let stream = client
            .watch(self.keys.registry.clone(), Some(options))
            .await
            .map_err(|e| unavailable("watch", e))?;
        let reader = Reader {
            stream,
            keys: Keys::new(&self.prefix),
            pending: std::collections::VecDeque::new(),
            done: false,
        };
        Ok(Box::pin(futures::stream::unfold(
            reader,
            |mut reader| async move {
                if reader.done {
                    return None;
                }
                let item = reader.next().await;
                if matches!(item, Some(Err(_)) | None) {
                    reader.done = true;
                }
                item.map(|item| (item, reader))
            },
        )))
    }
}

/// Turns etcd watch responses into registry changes, one per revision.
struct Reader {
    stream: etcd_client::WatchStream,
    keys: Keys,
    pending: std::collections::VecDeque<Committed>,
    done: bool,
}

impl Reader {
    async fn next(&mut self) -> Option<Result<Committed, StoreError>> {
        loop {
            if let Some(next) = self.pending.pop_front() {
                return Some(Ok(next));
            }
            let response = match self.stream.message().await {
                Ok(Some(response)) => response,
                Ok(None) => {
                    return Some(Err(StoreError::Unavailable("etcd closed the watch".into())))
                }
                Err(e) => return Some(Err(unavailable("watch", e))),
            };
            if response.canceled() {
                if response.compact_revision() > 0 {
                    return Some(Err(StoreError::Compacted {
                        compacted: response.compact_revision() as u64,
                    }));
                }
                return Some(Err(StoreError::Unavailable(format!(
                    "etcd canceled the watch: {}",
                    response.cancel_reason()
                ))));
            }
            for event in response.events() {
                let Some(kv) = event.kv() else { continue };
                let revision = kv.mod_revision() as u64;
                if self.pending.back().is_none_or(|c| c.revision != revision) {
                    // prev_revision 0 until the head's event of this revision says it.
                    self.pending.push_back(Committed {
                        revision,
                        prev_revision: 0,
                        upserts: vec![],
                        deletes: vec![],
                    });
                }
                let Some(change) = self.pending.back_mut() else {
                    continue;
                };
                let key = kv.key();
                if key == self.keys.head.as_bytes() {
                    match std::str::from_utf8(kv.value())
                        .ok()
                        .and_then(|v| v.parse().ok())
                    {
                        Some(prev) => change.prev_revision = prev,
                        None => {
                            return Some(Err(StoreError::Corrupt {
                                key: self.keys.head.clone(),
                                reason: "not a revision number".into(),
                            }))
                        }
                    }
                    continue;
                }
                let Some(id) = std::str::from_utf8(key)
                    .ok()
                    .and_then(|k| k.strip_prefix(self.keys.servers.as_str()))
                else {
                    continue;
                };
                match event.event_type() {
                    EventType::Delete => change.deletes.push(id.to_string()),
                    EventType::Put => match ServerRecord::decode(kv.value()) {
                        Ok(mut record) => {
                            record.mod_revision = revision;
                            change.upserts.push(record);
                        }
                        Err(e) => {
                            return Some(Err(StoreError::Corrupt {
                                key: String::from_utf8_lossy(key).into_owned(),
                                reason: e.to_string(),
                            }))
                        }
                    },
                }
            }
            debug!(changes = self.pending.len(), "etcd watch response");
        }
    }
}

impl EtcdStore {
    /// Compacts etcd's history up to `revision` (operators and tests).
    pub async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        let mut client = self.client.clone();
        client
            .compact(revision as i64, None)
            .await
            .map_err(|e| unavailable("compact", e))?;
        Ok(())
    }
}
