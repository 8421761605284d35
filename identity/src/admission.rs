//! Who gets a connection slot: the bounds [`crate::incoming`] keeps on
//! handshakes in progress and on connections without an identity, in total
//! and per source address.
//!
//! A handshake in progress costs the attacker nothing (a silent TCP
//! connection), so a full table must never lock newcomers out: when a source
//! or the whole table is at its bound, the oldest handshake of that source
//! (when the whole table is full: of the source holding the most) is
//! dropped to make room — the oldest **silent** one first: a real client
//! speaks at once (its ClientHello) and finishes in milliseconds, so silent
//! connections, however fast they are reopened, only ever push out each
//! other.
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
    pub handshakes: usize,
    pub handshakes_per_source: usize,
    pub anonymous: usize,
    pub anonymous_per_source: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
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

/// One source's handshakes in progress, each by age (its id), apart by
/// whether the client has spoken; dropping a sender ends that handshake.
#[derive(Default)]
struct Source {
    silent: BTreeMap<u64, oneshot::Sender<()>>,
    speaking: BTreeMap<u64, oneshot::Sender<()>>,
}

impl Source {
    fn len(&self) -> usize {
        self.silent.len() + self.speaking.len()
    }

    /// Drops the oldest silent handshake, else the oldest.
    fn evict_one(&mut self) -> bool {
        self.silent.pop_first().is_some() || self.speaking.pop_first().is_some()
    }
}

#[derive(Default)]
struct Table {
    next: u64,
    /// Handshakes in progress.
    pending: usize,
    by_source: HashMap<IpAddr, Source>,
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

impl Table {
    /// Drops one handshake of `source` for room; every step is a map
    /// operation, so a flood of connections costs little each.
    fn evict_from(&mut self, source: IpAddr) {
        let Some(entry) = self.by_source.get_mut(&source) else {
            return;
        };
        if entry.evict_one() {
            self.pending -= 1;
        }
        if entry.len() == 0 {
            self.by_source.remove(&source);
        }
    }

    /// The slot `id` of `source` is done.
    fn release(&mut self, source: IpAddr, id: u64) {
        let Some(entry) = self.by_source.get_mut(&source) else {
            return;
        };
        if entry.silent.remove(&id).is_some() || entry.speaking.remove(&id).is_some() {
            self.pending -= 1;
        }
        if entry.len() == 0 {
            self.by_source.remove(&source);
        }
    }
}

/// A handshake's slot; dropping it frees it.
pub struct HandshakeSlot {
    id: u64,
    source: IpAddr,
    table: Arc<Mutex<Table>>,
}

/// Resolves (with an error) when a newer connection took the slot.
pub type Evicted = oneshot::Receiver<()>;

impl HandshakeSlot {
    /// The client sent its first bytes: it is evicted only after every
    /// silent handshake of its source.
    pub fn speaking(&self) {
        let mut table = self.table.lock();
        if let Some(entry) = table.by_source.get_mut(&self.source) {
            if let Some(sender) = entry.silent.remove(&self.id) {
                entry.speaking.insert(self.id, sender);
            }
        }
    }
}

impl Drop for HandshakeSlot {
    fn drop(&mut self) {
        self.table.lock().release(self.source, self.id);
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

    /// A slot for a new connection's handshake, evicting the oldest one of
    /// its source, or of all, when either is at its bound.
    pub fn handshake(&self, source: IpAddr) -> (HandshakeSlot, Evicted) {
        let mut table = self.inner.lock();
        let from_source = table.by_source.get(&source).map_or(0, Source::len);
        if from_source >= self.bounds.handshakes_per_source {
            table.evict_from(source);
        }
        if table.pending >= self.bounds.handshakes {
            // From the source holding the most: a flood, not a bystander
            // whose ClientHello is merely not read yet.
            let heaviest = table
                .by_source
                .iter()
                .max_by_key(|(_, entry)| entry.len())
                .map(|(ip, _)| *ip);
            if let Some(ip) = heaviest {
                table.evict_from(ip);
            }
        }
        let id = table.next;
        table.next += 1;
        let (tx, rx) = oneshot::channel();
        table
            .by_source
            .entry(source)
            .or_default()
            .silent
            .insert(id, tx);
        table.pending += 1;
        let slot = HandshakeSlot {
            id,
            source,
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
            handshakes: 4,
            handshakes_per_source: 2,
            anonymous: 3,
            anonymous_per_source: 2,
        })
    }

    #[test]
    fn a_flooding_source_evicts_its_own_oldest_handshake_not_others() {
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
    fn silent_handshakes_go_before_one_that_speaks() {
        let admission = small();
        let (admin, mut evicted) = admission.handshake(ip(1));
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
    fn finished_handshakes_free_their_slot() {
        let admission = small();
        for _ in 0..100 {
            let _slot = admission.handshake(ip(1));
        }
        assert_eq!(admission.inner.lock().pending, 0);
        assert!(admission.inner.lock().by_source.is_empty());
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
