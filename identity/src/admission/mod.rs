//! Who gets a connection slot: the bounds [`crate::incoming`] keeps on
//! connections before and during their handshake, and on connections
//! without an identity, in total and per source address.
//!
//! A new connection is **silent** until it sends its first bytes, and
//! **speaking** (its TLS handshake in progress) after. Both stages are
//! bounded per source and in all, and both make room by one rule:
//!
//! - **At a source's bound**, the source's oldest connection in that stage
//!   is dropped for its newcomer: one address cannot hold more.
//! - **At the port's bound**, the oldest connection of the source holding
//!   the most is dropped, when that source holds more than one: that is a
//!   flood, not a bystander. When every source holds one, nobody is
//!   dropped and the newcomer **waits** for a slot to free: a silent one
//!   in the kernel's accept queue (the port stops accepting), one that has
//!   spoken in the silent table, until its silent deadline.
//!
//! Why waiting and not dropping when every source holds one: that is a
//! fleet coming back at once (10,000 nodes after a restart, each its own
//! host), not an attacker. Dropping the oldest handshake then threw away
//! work half done, on both sides, and each node so dropped backed off and
//! came back to be dropped again: 16,458 drops while 10,000 nodes opened,
//! 1.7 per node, and 30 s before the last one was in. An attacker who
//! wants the port to wait must hold a connection from each of 4,096
//! addresses (512 to hold the handshakes, each of which it must speak and
//! SMS answers); from fewer, its own connections make the room.
//!
//! Silent connections cost the attacker nothing, so their bounds are wide
//! (256 per source, 4,096 in all): every drop is churn, a flooder reopens
//! at once. Within the bounds a silent connection just waits out its
//! deadline, costing a descriptor and no CPU. Speaking connections cost a
//! TLS handshake each, so they are bounded tighter (64 per source, 512 in
//! all). Silent ones never push them out.
//!
//! Connections that finished their handshake without an identity (a client
//! without a certificate, which may still carry the admin token; every
//! connection of a plaintext port) are bounded per source and in total;
//! past the bound new ones are closed at once. Connections with an identity
//! are not bounded here: a certificate of ours is the bound.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::pin;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{oneshot, Notify};

mod slots;

pub use slots::dropped_for_newer;
use slots::Slots;
use slots::{DROPPED_SILENT, DROPPED_SPEAKING};

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
    shared: Arc<Shared>,
}

/// The table, and a wake-up for whoever waits for each stage's slot.
#[derive(Default)]
struct Shared {
    table: Mutex<Table>,
    /// A silent slot freed: the accept loop may take the next connection.
    silent_freed: Notify,
    /// A speaking slot freed: the oldest waiting handshake may start.
    speaking_freed: Notify,
}

/// Which stage a connection is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Silent,
    Speaking,
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
    shared: Arc<Shared>,
}

/// Resolves (with an error) when a newer connection took the slot.
pub type Evicted = oneshot::Receiver<()>;

impl HandshakeSlot {
    /// The connection's number on its port, in order of arrival.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The stage the connection is in (for what a drop is logged as).
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// The client sent its first bytes: its handshake now counts against
    /// the tighter bounds, and silent connections can no longer push it
    /// out. Waits (still counted silent) while every handshake slot is
    /// held by a source holding one; the caller bounds the wait with the
    /// connection's silent deadline.
    pub async fn speaking(&mut self) {
        if self.stage == Stage::Speaking {
            return;
        }
        let shared = Arc::clone(&self.shared);
        loop {
            // Registered before the table is read, so a slot freed in
            // between still wakes this waiter.
            let mut freed = pin!(shared.speaking_freed.notified());
            freed.as_mut().enable();
            if self.try_speak() {
                return;
            }
            freed.await;
        }
    }

    /// Moves the connection from silent to speaking if there is room;
    /// true when it is speaking (or was dropped while it waited: its
    /// `Evicted` then ends it).
    fn try_speak(&mut self) -> bool {
        let mut table = self.shared.table.lock();
        if !table
            .silent
            .by_source
            .get(&self.source)
            .is_some_and(|e| e.contains_key(&self.id))
        {
            return true;
        }
        let bounds = self.bounds;
        let room = table.speaking.make_room(
            self.source,
            bounds.handshakes_per_source,
            bounds.handshakes,
            &DROPPED_SPEAKING,
        );
        if !room {
            return false;
        }
        let Some(sender) = table.silent.remove(self.source, self.id) else {
            return true;
        };
        table.speaking.insert(self.source, self.id, sender);
        self.stage = Stage::Speaking;
        drop(table);
        self.shared.silent_freed.notify_one();
        true
    }
}

impl Drop for HandshakeSlot {
    fn drop(&mut self) {
        let mut table = self.shared.table.lock();
        let (removed, freed) = match self.stage {
            Stage::Silent => (
                table.silent.remove(self.source, self.id),
                &self.shared.silent_freed,
            ),
            Stage::Speaking => (
                table.speaking.remove(self.source, self.id),
                &self.shared.speaking_freed,
            ),
        };
        drop(table);
        // A slot taken by a newer connection was not freed: the newcomer
        // holds it.
        if removed.is_some() {
            freed.notify_one();
        }
    }
}

/// An admitted connection without an identity; dropping it frees the slot.
pub struct AnonymousSlot {
    source: IpAddr,
    shared: Arc<Shared>,
}

impl Drop for AnonymousSlot {
    fn drop(&mut self) {
        let mut table = self.shared.table.lock();
        table.anonymous -= 1;
        decrement(&mut table.anonymous_per_source, self.source);
    }
}

impl Admission {
    pub fn new(bounds: Bounds) -> Self {
        Self {
            bounds,
            shared: Arc::default(),
        }
    }

    /// A slot for a new (silent) connection, by the module's rule; waits
    /// while the port is full of sources holding one silent connection
    /// each (the caller stops accepting meanwhile).
    pub async fn handshake(&self, source: IpAddr) -> (HandshakeSlot, Evicted) {
        loop {
            let mut freed = pin!(self.shared.silent_freed.notified());
            freed.as_mut().enable();
            if let Some(admitted) = self.try_handshake(source) {
                return admitted;
            }
            freed.await;
        }
    }

    fn try_handshake(&self, source: IpAddr) -> Option<(HandshakeSlot, Evicted)> {
        let mut table = self.shared.table.lock();
        let room = table.silent.make_room(
            source,
            self.bounds.silent_per_source,
            self.bounds.silent,
            &DROPPED_SILENT,
        );
        if !room {
            return None;
        }
        let id = table.next;
        table.next += 1;
        let (tx, rx) = oneshot::channel();
        table.silent.insert(source, id, tx);
        let slot = HandshakeSlot {
            id,
            source,
            bounds: self.bounds,
            stage: Stage::Silent,
            shared: Arc::clone(&self.shared),
        };
        Some((slot, rx))
    }

    /// A slot for a connection without an identity, or `None` when its
    /// source or the port is at its bound.
    pub fn anonymous(&self, source: IpAddr) -> Option<AnonymousSlot> {
        let mut table = self.shared.table.lock();
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
            shared: Arc::clone(&self.shared),
        })
    }
}

#[cfg(test)]
mod tests;
