//! One stage's table of connections (silent, or speaking) and the rule by
//! which it makes room; see [`super`] for why the rule is what it is.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::oneshot;

/// Connections dropped to make room for newer ones, since the process
/// started, on every port: how an operator sees a flood (or bounds too
/// small for the fleet) from the metrics.
pub(super) static DROPPED_SILENT: AtomicU64 = AtomicU64::new(0);
pub(super) static DROPPED_SPEAKING: AtomicU64 = AtomicU64::new(0);

/// Connections dropped for newer ones so far: (silent, speaking).
pub fn dropped_for_newer() -> (u64, u64) {
    (
        DROPPED_SILENT.load(Ordering::Relaxed),
        DROPPED_SPEAKING.load(Ordering::Relaxed),
    )
}

/// One stage's connections: each source's by age (the id), dropping a
/// sender ends that connection; and how many there are in all.
#[derive(Default)]
pub(super) struct Slots {
    pub(super) by_source: HashMap<IpAddr, BTreeMap<u64, oneshot::Sender<()>>>,
    pub(super) total: usize,
}

impl Slots {
    pub(super) fn count(&self, source: IpAddr) -> usize {
        self.by_source.get(&source).map_or(0, BTreeMap::len)
    }

    pub(super) fn insert(&mut self, source: IpAddr, id: u64, sender: oneshot::Sender<()>) {
        self.by_source.entry(source).or_default().insert(id, sender);
        self.total += 1;
    }

    pub(super) fn remove(&mut self, source: IpAddr, id: u64) -> Option<oneshot::Sender<()>> {
        let entries = self.by_source.get_mut(&source)?;
        let sender = entries.remove(&id)?;
        if entries.is_empty() {
            self.by_source.remove(&source);
        }
        self.total -= 1;
        Some(sender)
    }

    /// Drops the oldest connection of `source`; every step is a map
    /// operation, so a flood costs little each.
    pub(super) fn evict_oldest(&mut self, source: IpAddr, dropped: &AtomicU64) {
        let Some(entries) = self.by_source.get_mut(&source) else {
            return;
        };
        if entries.pop_first().is_some() {
            self.total -= 1;
            dropped.fetch_add(1, Ordering::Relaxed);
        }
        if entries.is_empty() {
            self.by_source.remove(&source);
        }
    }

    /// Makes room for one more from `source` within `per_source` and
    /// `total`, by the module's rule: at the source's bound its oldest
    /// goes; at the port's, the oldest of the source holding the most, if
    /// it holds more than one. False when the port is full of sources
    /// holding one each: the newcomer waits.
    pub(super) fn make_room(
        &mut self,
        source: IpAddr,
        per_source: usize,
        total: usize,
        dropped: &AtomicU64,
    ) -> bool {
        if self.count(source) >= per_source {
            self.evict_oldest(source, dropped);
        }
        if self.total < total {
            return true;
        }
        if self.by_source.len() == self.total {
            // Every source holds one (a fleet reconnecting, not a flood):
            // nobody to drop, known without going through them all.
            return false;
        }
        let heaviest = self
            .by_source
            .iter()
            .map(|(ip, entries)| (entries.len(), *ip))
            .max();
        match heaviest {
            Some((held, ip)) if held > 1 => {
                self.evict_oldest(ip, dropped);
                true
            }
            _ => false,
        }
    }
}
