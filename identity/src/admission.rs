//! Who gets a connection slot: the bounds [`crate::incoming`] keeps on
//! handshakes in progress and on connections without an identity, in total
//! and per source address.
//!
//! A handshake in progress costs the attacker nothing (a silent TCP
//! connection), so a full table must never lock newcomers out: when a source
//! or the whole table is at its bound, the **oldest** handshake of that
//! source (or of all) is dropped to make room. A real client finishes its
//! handshake in milliseconds; to evict it an attacker would have to open
//! more connections than the table holds within those milliseconds.
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

#[derive(Default)]
struct Table {
    next: u64,
    /// Handshakes in progress, oldest first; dropping the sender ends one.
    pending: BTreeMap<u64, (IpAddr, oneshot::Sender<()>)>,
    pending_per_source: HashMap<IpAddr, usize>,
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
    fn evict(&mut self, id: u64) {
        if let Some((source, _sender)) = self.pending.remove(&id) {
            decrement(&mut self.pending_per_source, source);
        }
    }
}

/// A handshake's slot: `evicted` resolves when a newer connection took it.
/// Dropping the slot frees it.
pub struct HandshakeSlot {
    id: u64,
    table: Arc<Mutex<Table>>,
    pub evicted: oneshot::Receiver<()>,
}

impl Drop for HandshakeSlot {
    fn drop(&mut self) {
        self.table.lock().evict(self.id);
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
    pub fn handshake(&self, source: IpAddr) -> HandshakeSlot {
        let mut table = self.inner.lock();
        if table.pending_per_source.get(&source).copied().unwrap_or(0)
            >= self.bounds.handshakes_per_source
        {
            let oldest = table
                .pending
                .iter()
                .find(|(_, (s, _))| *s == source)
                .map(|(id, _)| *id);
            if let Some(id) = oldest {
                table.evict(id);
            }
        }
        if table.pending.len() >= self.bounds.handshakes {
            if let Some(id) = table.pending.keys().next().copied() {
                table.evict(id);
            }
        }
        let id = table.next;
        table.next += 1;
        let (tx, rx) = oneshot::channel();
        table.pending.insert(id, (source, tx));
        *table.pending_per_source.entry(source).or_default() += 1;
        HandshakeSlot {
            id,
            table: Arc::clone(&self.inner),
            evicted: rx,
        }
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
        let mut other = admission.handshake(ip(2));
        let mut first = admission.handshake(ip(1));
        let mut second = admission.handshake(ip(1));
        let _third = admission.handshake(ip(1));
        assert!(first
            .evicted
            .try_recv()
            .is_err_and(|e| e == oneshot::error::TryRecvError::Closed));
        assert_eq!(
            second.evicted.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        );
        assert_eq!(
            other.evicted.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        );
    }

    #[test]
    fn a_full_table_makes_room_by_dropping_the_oldest_handshake() {
        let admission = small();
        let mut slots: Vec<_> = (1..=4).map(|i| admission.handshake(ip(i))).collect();
        let mut newest = admission.handshake(ip(9));
        assert_eq!(
            slots[0].evicted.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        );
        for slot in &mut slots[1..] {
            assert_eq!(
                slot.evicted.try_recv(),
                Err(oneshot::error::TryRecvError::Empty)
            );
        }
        assert_eq!(
            newest.evicted.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        );
    }

    #[test]
    fn finished_handshakes_free_their_slot() {
        let admission = small();
        for _ in 0..100 {
            let _slot = admission.handshake(ip(1));
        }
        assert!(admission.inner.lock().pending.is_empty());
        assert!(admission.inner.lock().pending_per_source.is_empty());
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
