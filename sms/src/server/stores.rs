//! Where SMS keeps what it must not lose, in memory or on etcd: the
//! registry, tasks, the node table shared by replicas, OAuth credentials,
//! revocations and the audit trail; and the key that seals credentials and
//! literal values.

use std::sync::Arc;

use super::{SmsConfig, StartError, StoreConfig};
use crate::approvals::etcd::EtcdApprovals;
use crate::approvals::ApprovalBook;
use crate::audit::{AuditBook, AuditStore, EtcdAudit, Retention};
use crate::nodes::SharedNodes;
use crate::oauth::{EtcdVault, MemoryVault, PerPrincipal, SealingKey, Vault, WorkloadIssuer};
use crate::quotas::{Counters, EtcdCounters, MemoryCounters};
use crate::revocations::{EtcdRevocations, MemoryRevocations, RevocationStore};
use crate::sealed::Sealer;
use crate::store::{EtcdStore, MemoryStore, RegistryStore};
use crate::tasks::{EtcdTaskStore, MemoryTaskStore, TaskStore};

/// SMS's stores, one per kind of record.
pub struct Stores {
    pub registry: Arc<dyn RegistryStore>,
    pub tasks: Arc<dyn TaskStore>,
    /// The node table replicas share; `None` in memory (one SMS).
    pub shared_nodes: Option<Arc<SharedNodes>>,
    pub vault: Arc<dyn Vault>,
    pub revoked: Arc<dyn RevocationStore>,
    /// The nodes' audit records and SMS's own.
    pub audit: Arc<AuditStore>,
    /// Fleet quotas' counters.
    pub quotas: Arc<dyn Counters>,
    /// Approvals bound to one call (on etcd: shared by every replica).
    pub approvals: Arc<ApprovalBook>,
}

impl Stores {
    pub async fn connect(store: &StoreConfig, retention: Retention) -> Result<Stores, StartError> {
        Ok(match store {
            StoreConfig::Memory => Stores {
                registry: Arc::new(MemoryStore::new()),
                tasks: Arc::new(MemoryTaskStore::default()),
                shared_nodes: None,
                vault: Arc::new(MemoryVault::default()),
                revoked: Arc::new(MemoryRevocations::default()),
                audit: Arc::new(AuditStore::Memory(AuditBook::new(retention))),
                quotas: Arc::new(MemoryCounters::default()),
                approvals: Arc::new(ApprovalBook::default()),
            },
            StoreConfig::Etcd(etcd) => {
                let store = EtcdStore::connect(etcd.clone()).await?;
                let client = store.client();
                Stores {
                    tasks: Arc::new(EtcdTaskStore::new(client.clone(), &etcd.prefix)),
                    shared_nodes: Some(SharedNodes::start(client.clone(), &etcd.prefix)),
                    vault: Arc::new(EtcdVault::new(client.clone(), &etcd.prefix)),
                    quotas: Arc::new(EtcdCounters::new(client.clone(), &etcd.prefix)),
                    approvals: crate::approvals::etcd::book(EtcdApprovals::new(
                        client.clone(),
                        &etcd.prefix,
                    ))
                    .await
                    .map_err(StartError::Approvals)?,
                    revoked: Arc::new(EtcdRevocations::new(client.clone(), &etcd.prefix)),
                    audit: Arc::new(AuditStore::Etcd(EtcdAudit::new(
                        client,
                        &etcd.prefix,
                        retention,
                    ))),
                    registry: Arc::new(store),
                }
            }
        })
    }
}

/// The sealing key (`--oauth-key-file`), the sealer of literal values, and
/// the workload key with what it serves (runs' delegations, nodes'
/// workload JWTs).
pub struct Keys {
    pub oauth: Option<Arc<SealingKey>>,
    pub sealer: Sealer,
    pub per_principal: Option<Arc<PerPrincipal>>,
}

impl Keys {
    /// Literal values of server files are sealed with the OAuth key; a
    /// registry in memory may have one of its own (see `sealed`), one on
    /// etcd may not (replicas must agree).
    pub fn load(config: &SmsConfig) -> Result<Keys, StartError> {
        let oauth = config
            .oauth_key_file
            .as_deref()
            .map(SealingKey::from_file)
            .transpose()?
            .map(Arc::new);
        let sealing = match (&oauth, &config.store) {
            (Some(key), _) => Some(Arc::clone(key)),
            (None, StoreConfig::Memory) => Some(Arc::new(
                SealingKey::ephemeral().map_err(|_| StartError::NoRandomness)?,
            )),
            (None, StoreConfig::Etcd(_)) => None,
        };
        let per_principal = per_principal(config, sealing.clone())?;
        Ok(Keys {
            oauth,
            sealer: Sealer::new(sealing),
            per_principal,
        })
    }
}

/// What serves servers that act per principal, whenever SMS can seal
/// (delegations are sealed with the key literal values are): with SMS's
/// workload identity when `--workload-issuer` names where it is published
/// (token exchange needs it; people's own logins do not).
fn per_principal(
    config: &SmsConfig,
    sealing: Option<Arc<SealingKey>>,
) -> Result<Option<Arc<PerPrincipal>>, StartError> {
    if sealing.is_none() {
        return Ok(None);
    }
    // The trust domain of SMS's certificate; on plaintext, a local one.
    let domain = config
        .tls
        .as_ref()
        .and_then(|tls| tls.identity())
        .map_or_else(
            || "spear.local".to_string(),
            |(domain, _)| domain.as_str().to_string(),
        );
    let workload = match (config.workload.issuer.clone(), &config.workload.key_file) {
        (None, _) => None,
        (Some(issuer), Some(path)) => Some(WorkloadIssuer::from_file(path, issuer, domain)?),
        (Some(issuer), None) => {
            if matches!(config.store, StoreConfig::Etcd(_)) {
                tracing::warn!("--workload-issuer without --workload-key-file: each replica signs nodes' workload JWTs with a key of its own, and authorization servers trust only the keys at the issuer's URL; give every replica the same --workload-key-file");
            }
            Some(WorkloadIssuer::ephemeral(issuer, domain)?)
        }
    };
    Ok(Some(Arc::new(PerPrincipal::new(workload, sealing))))
}
