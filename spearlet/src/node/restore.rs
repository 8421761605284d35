//! The registry a node serves from its first moment: the one it persisted
//! before it stopped, until SMS answers. Every start says in the applied
//! log what it took up (`restored 0 0`: nothing), so the log stays
//! checkable across a crash that lost recent changes.

use tracing::info;

use crate::persist::{Applied, AppliedLog, StateDir};
use crate::registry::RegistryHandle;

/// The registry as restored, and what the persister and sync need of it.
pub struct Restored {
    pub registry: RegistryHandle,
    /// What is on disk now; the persister compares against this, not
    /// against whatever sync may already have applied.
    pub on_disk: (u64, u64),
    /// The applied log, which sync goes on writing.
    pub applied_log: AppliedLog,
}

pub fn restore(state: &StateDir) -> Restored {
    let initial = state.load_registry();
    let on_disk = initial.position();
    if initial.epoch != 0 {
        info!(
            epoch = initial.epoch,
            revision = initial.revision,
            servers = initial.servers.len(),
            "serving the persisted registry until SMS answers"
        );
    }
    let mut applied_log = AppliedLog::open(state.applied_log_file());
    let (epoch, revision) = on_disk;
    applied_log.append(&Applied::Restored { epoch, revision });
    Restored {
        registry: RegistryHandle::new(initial),
        on_disk,
        applied_log,
    }
}
