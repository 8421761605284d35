//! Who gets a connection slot: the bounds [`crate::incoming`] keeps on
//! connections before and during their handshake, and on connections
//! without an identity, in total and per source address.
//!
//! A new connection is **silent** until it sends its first bytes, and
//! **speaking** (its TLS handshake in progress) after. Both are bounded,
//! each its own way:
//!
//! - Silent connections cost the attacker nothing, so a full table must
//!   never lock newcomers out: at a source's bound (or the port's, then at
//!   the source holding the most) the oldest silent connection is dropped
//!   for the newcomer. The bounds are wide (256 per source, 4,096 in all),
//!   because every drop is churn: a flooder reopens at once, and each
//!   reopened connection is an accept, a task and a timer here. Within the
//!   bounds a silent connection just waits out its deadline, costing a
//!   descriptor and no CPU.
//! - Speaking connections cost a TLS handshake each, so they are bounded
//!   tighter (64 per source, 512 in all), the oldest of the source (or of
//!   the source holding the most) making room. Silent ones never push them
//!   out: a real client speaks at once (its ClientHello) and finishes in
//!   milliseconds.
//!
//! Connections that finished their handshake without an identity (a client
//! without a certificate, which may still carry the admin token; every
//! connection of a plaintext port) are bounded per source and in total;
//! past the bound new ones are closed at once. Connections with an identity
//! are not bounded here: a certificate of ours is the bound.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;

/// How many of each kind one port admits.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Connections that have not spoken yet.
    pub silent: usize,
    pub silent_per_source: usize,
    /// Handshakes in progress (the client has spoken).
    pub handshakes: usize,
    pub handshakes_per_source: usize,
    /// Connections without an identity, after their handshake.
    pub anonymous: usize,
    pub anonymous_per_source: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            silent: 4096,
            silent_per_source: 256,
            handshakes: 512,
            handshakes_per_source: 64,
            anonymous: 4096,
            anonymous_per_source: 256,
        }
    }
}

/// The table of one port.
#[derive(Clone)]
pub struct Admission {
    bounds: Bounds,
    inner: Arc<Mutex<Table>>,
}

/// Which stage a connection is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Silent,
    Speaking,
}

/// One stage's connections: each source's by age (the id), dropping a
/// sender ends that connection; and how many there are in all.
#[derive(Default)]
struct Slots {
    by_source: HashMap<IpAddr, BTreeMap<u64, oneshot::Sender<()>>>,
    total: usize,
}

impl Slots {
    fn count(&self, source: IpAddr) -> usize {
        self.by_source.get(&source).map_or(0, BTreeMap::len)
    }

    fn insert(&mut self, source: IpAddr, id: u64, sender: oneshot::Sender<()>) {
        self.by_source.entry(source).or_default().insert(id, sender);
        self.total += 1;
    }

    fn remove(&mut self, source: IpAddr, id: u64) -> Option<oneshot::Sender<()>> {
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
    fn evict_oldest(&mut self, source: IpAddr) {
        let Some(entries) = self.by_source.get_mut(&source) else {
            return;
        };
        if entries.pop_first().is_some() {
            self.total -= 1;
        }
        if entries.is_empty() {
            self.by_source.remove(&source);
        }
    }

    /// Makes room for one more from `source` within `per_source` and
    /// `total`: at the source's bound its oldest goes; at the port's, the
    /// oldest of the source holding the most (a flood, not a bystander).
    fn make_room(&mut self, source: IpAddr, per_source: usize, total: usize) {
        if self.count(source) >= per_source {
            self.evict_oldest(source);
        }
        if self.total >= total {
            let heaviest = self
                .by_source
                .iter()
                .max_by_key(|(_, entries)| entries.len())
                .map(|(ip, _)| *ip);
            if let Some(ip) = heaviest {
                self.evict_oldest(ip);
            }
        }
    }
}

#[derive(Default)]
struct Table {
    next: u64,
    silent: Slots,
    speaking: Slots,
    anonymous: usize,
    anonymous_per_source: HashMap<IpAddr, usize>,
}

fn decrement(counts: &mut HashMap<IpAddr, usize>, source: IpAddr) {
    if let Some(n) = counts.get_mut(&source) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&source);
        }
    }
}

/// A connection's slot until its handshake ends; dropping it frees it.
pub struct HandshakeSlot {
    id: u64,
    source: IpAddr,
    bounds: Bounds,
    stage: Stage,
    table: Arc<Mutex<Table>>,
}

/// Resolves (with an error) when a newer connection took the slot.
pub type Evicted = oneshot::Receiver<()>;

impl HandshakeSlot {
    /// The connection's number on its port, in order of arrival.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The client sent its first bytes: its handshake now counts against
    /// the tighter bounds, and silent connections can no longer push it out.
    pub fn speaking(&mut self) {
        if self.stage == Stage::Speaking {
            return;
        }
        let mut table = self.table.lock();
        let Some(sender) = table.silent.remove(self.source, self.id) else {
            return;
        };
        let bounds = self.bounds;
        table
            .speaking
            .make_room(self.source, bounds.handshakes_per_source, bounds.handshakes);
        table.speaking.insert(self.source, self.id, sender);
        self.stage = Stage::Speaking;
    }
}

impl Drop for HandshakeSlot {
    fn drop(&mut self) {
        let mut table = self.table.lock();
        match self.stage {
            Stage::Silent => table.silent.remove(self.source, self.id),
            Stage::Speaking => table.speaking.remove(self.source, self.id),
        };
    }
}

/// An admitted connection without an identity; dropping it frees the slot.
pub struct AnonymousSlot {
    source: IpAddr,
    table: Arc<Mutex<Table>>,
}

impl Drop for AnonymousSlot {
    fn drop(&mut self) {
        let mut table = self.table.lock();
        table.anonymous -= 1;
        decrement(&mut table.anonymous_per_source, self.source);
    }
}

impl Admission {
    pub fn new(bounds: Bounds) -> Self {
        Self {
            bounds,
            inner: Arc::default(),
        }
    }

    /// A slot for a new (silent) connection, evicting the oldest silent one
    /// of its source, or of the source holding the most, when either is at
    /// its bound.
    pub fn handshake(&self, source: IpAddr) -> (HandshakeSlot, Evicted) {
        let mut table = self.inner.lock();
        table
            .silent
            .make_room(source, self.bounds.silent_per_source, self.bounds.silent);
        let id = table.next;
        table.next += 1;
        let (tx, rx) = oneshot::channel();
        table.silent.insert(source, id, tx);
        let slot = HandshakeSlot {
            id,
            source,
            bounds: self.bounds,
            stage: Stage::Silent,
            table: Arc::clone(&self.inner),
        };
        (slot, rx)
    }

    /// A slot for a connection without an identity, or `None` when its
    /// source or the port is at its bound.
    pub fn anonymous(&self, source: IpAddr) -> Option<AnonymousSlot> {
        let mut table = self.inner.lock();
        let from_source = table
            .anonymous_per_source
            .get(&source)
            .copied()
            .unwrap_or(0);
        if from_source >= self.bounds.anonymous_per_source
            || table.anonymous >= self.bounds.anonymous
        {
            return None;
        }
        table.anonymous += 1;
        *table.anonymous_per_source.entry(source).or_default() += 1;
        Some(AnonymousSlot {
            source,
            table: Arc::clone(&self.inner),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oneshot::error::TryRecvError::{Closed, Empty};

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    fn small() -> Admission {
        Admission::new(Bounds {
            silent: 4,
            silent_per_source: 2,
            handshakes: 4,
            handshakes_per_source: 2,
            anonymous: 3,
            anonymous_per_source: 2,
        })
    }

    #[test]
    fn a_flooding_source_evicts_its_own_oldest_silent_connection_not_others() {
        let admission = small();
        let (_o, mut other) = admission.handshake(ip(2));
        let (_f, mut first) = admission.handshake(ip(1));
        let (_s, mut second) = admission.handshake(ip(1));
        let _third = admission.handshake(ip(1));
        assert_eq!(first.try_recv(), Err(Closed));
        assert_eq!(second.try_recv(), Err(Empty));
        assert_eq!(other.try_recv(), Err(Empty));
    }

    #[test]
    fn a_full_table_makes_room_at_the_source_holding_the_most() {
        let admission = small();
        let (_a, mut bystander) = admission.handshake(ip(1));
        let (_b, mut flood_1) = admission.handshake(ip(2));
        let (_c, mut flood_2) = admission.handshake(ip(2));
        let (_d, mut other) = admission.handshake(ip(3));
        let (_n, mut newest) = admission.handshake(ip(9));
        assert_eq!(flood_1.try_recv(), Err(Closed));
        for evicted in [&mut bystander, &mut flood_2, &mut other, &mut newest] {
            assert_eq!(evicted.try_recv(), Err(Empty));
        }
    }

    #[test]
    fn silent_connections_never_push_out_one_that_speaks() {
        let admission = small();
        let (mut admin, mut evicted) = admission.handshake(ip(1));
        admin.speaking();
        // A flood of silent connections, from the same source and others,
        // reopened as fast as they are dropped.
        let mut silent = Vec::new();
        for i in 0..100u8 {
            silent.push(admission.handshake(ip(1 + i % 3)));
        }
        assert_eq!(evicted.try_recv(), Err(Empty));
    }

    #[test]
    fn handshakes_in_progress_are_bounded_per_source_oldest_first() {
        let admission = small();
        let mut speaking = Vec::new();
        for _ in 0..3 {
            let (mut slot, evicted) = admission.handshake(ip(1));
            slot.speaking();
            speaking.push((slot, evicted));
        }
        let states: Vec<_> = speaking.iter_mut().map(|(_, e)| e.try_recv()).collect();
        assert_eq!(states, [Err(Closed), Err(Empty), Err(Empty)]);
        assert_eq!(admission.inner.lock().speaking.total, 2);
    }

    /// The flood of the benchmark: 100 silent connections from each of ten
    /// sources fit the default bounds, so none is dropped (and reopened).
    #[test]
    fn silent_connections_within_the_bounds_are_left_to_their_deadline() {
        let admission = Admission::new(Bounds::default());
        let mut held = Vec::new();
        for i in 0..1000usize {
            held.push(admission.handshake(ip((i % 10) as u8)));
        }
        assert!(held.iter_mut().all(|(_, e)| e.try_recv() == Err(Empty)));
    }

    #[test]
    fn finished_handshakes_free_their_slot() {
        let admission = small();
        for i in 0..100 {
            let (mut slot, _) = admission.handshake(ip(1));
            if i % 2 == 0 {
                slot.speaking();
            }
        }
        let table = admission.inner.lock();
        assert_eq!((table.silent.total, table.speaking.total), (0, 0));
        assert!(table.silent.by_source.is_empty() && table.speaking.by_source.is_empty());
    }

    #[test]
    fn anonymous_connections_are_bounded_per_source_and_in_total() {
        let admission = small();
        let a1 = admission.anonymous(ip(1));
        let a2 = admission.anonymous(ip(1));
        assert!(a1.is_some() && a2.is_some());
        assert!(admission.anonymous(ip(1)).is_none(), "per-source bound");
        let b = admission.anonymous(ip(2));
        assert!(b.is_some());
        assert!(admission.anonymous(ip(3)).is_none(), "total bound");
        drop(a1);
        assert!(
            admission.anonymous(ip(1)).is_some(),
            "a closed connection frees its slot"
        );
    }
}
