//! One node's watch stream: a cursor into the hub.
//!
//! The stream holds no copy of the registry, only the `(epoch, revision)` the
//! node has and a queue of frames the hub already encoded. It is polled by the
//! gRPC body as fast as the node reads; a node that stops reading simply stops
//! being polled, and when it reads again it gets deltas if the ring still has
//! them, or a fresh snapshot if not.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::Stream;
use spear_proto::frame::EncodedEvent;
use spear_proto::v1::WatchRequest;
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::Status;
use tracing::debug;

use super::encode;
use super::hub::Hub;
use crate::store::{Epoch, Revision};

/// When an idle stream's next progress frame is due: `interval` from now,
/// rounded up to a tick shared by every stream (a 32nd of the interval, at
/// most 2 s). Streams' frames then go out together, a few hundred per
/// wake-up at 10,000 nodes, instead of each waking SMS's one worker on its
/// own: coalesced timers, as the kernel's timer slack does.
fn progress_due(interval: Duration) -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    let due = Instant::now() + interval;
    let tick = (interval / 32).min(Duration::from_secs(2));
    let tick_nanos = tick.as_nanos();
    if tick_nanos == 0 {
        return due;
    }
    let past = due.saturating_duration_since(epoch).as_nanos() % tick_nanos;
    if past == 0 {
        return due;
    }
    // `tick_nanos - past` is below `tick`, which fits a u64 of nanoseconds.
    due + Duration::from_nanos((tick_nanos - past) as u64)
}

/// The stream of frames sent to one watching node.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<EncodedEvent, Status>> + Send>>;

impl Hub {
    /// Opens a stream for a node that already has `request.(epoch, revision)`.
    pub fn watch(self: &Arc<Self>, request: WatchRequest) -> WatchStream {
        let position = (request.epoch != 0).then_some((request.epoch, request.revision));
        self.stats.streams.fetch_add(1, Ordering::Relaxed);
        let cursor = Cursor {
            rx: self.changed.subscribe(),
            closing: self.closing.subscribe(),
            hub: Arc::clone(self),
            node_id: request.node_id,
            position,
            pending: VecDeque::new(),
            next_progress: Instant::now(),
            waited_for_load: false,
        };
        Box::pin(futures::stream::unfold(cursor, |mut cursor| async move {
            let frame = cursor.next_frame().await?;
            Some((Ok(frame), cursor))
        }))
    }
}

struct Cursor {
    hub: Arc<Hub>,
    node_id: String,
    position: Option<(Epoch, Revision)>,
    pending: VecDeque<EncodedEvent>,
    rx: watch::Receiver<(Epoch, Revision)>,
    closing: watch::Receiver<bool>,
    next_progress: Instant,
    waited_for_load: bool,
}

impl Drop for Cursor {
    fn drop(&mut self) {
        self.hub.stats.streams.fetch_sub(1, Ordering::Relaxed);
        debug!(node_id = %self.node_id, "watch stream closed");
    }
}

impl Cursor {
    /// The next frame, or `None` once SMS is shutting down.
    async fn next_frame(&mut self) -> Option<EncodedEvent> {
        if !self.waited_for_load {
            tokio::select! {
                _ = self.hub.wait_loaded() => {}
                _ = self.closing.wait_for(|closing| *closing) => return None,
            }
            self.waited_for_load = true;
        }
        loop {
            if *self.closing.borrow() {
                return None;
            }
            if let Some(frame) = self.pending.pop_front() {
                return Some(frame);
            }
            self.rx.borrow_and_update();
            self.refill();
            if !self.pending.is_empty() {
                continue;
            }
            tokio::select! {
                _ = self.rx.changed() => {}
                _ = self.closing.changed() => {}
                _ = tokio::time::sleep_until(self.next_progress) => {
                    let (epoch, revision) = self.hub.position();
                    self.next_progress = progress_due(self.hub.config.progress_interval);
                    return Some(encode::progress_frame(epoch, revision));
                }
            }
        }
    }

    /// Queues what the node is missing: deltas when the ring has all of
    /// them, otherwise the current snapshot.
    fn refill(&mut self) {
        let state = self.hub.state.read();
        if let Some((epoch, revision)) = self.position {
            if epoch == state.epoch {
                if revision >= state.revision {
                    // Up to date, or ahead of this replica: wait for more.
                    return;
                }
                if let Some(deltas) = state.deltas_after(revision) {
                    if let Some(last) = deltas.last() {
                        self.position = Some((epoch, last.revision));
                    }
                    self.hub
                        .stats
                        .deltas_sent
                        .fetch_add(deltas.len() as u64, Ordering::Relaxed);
                    let node_id = &self.node_id;
                    self.pending
                        .extend(deltas.iter().map(|d| d.for_node(epoch, node_id)));
                    self.next_progress = progress_due(self.hub.config.progress_interval);
                    return;
                }
            }
        }
        drop(state);
        let snapshot = self.hub.snapshot_for(&self.node_id);
        debug!(
            node_id = %self.node_id,
            epoch = snapshot.epoch,
            revision = snapshot.revision,
            frames = snapshot.frames.len(),
            "sending snapshot"
        );
        self.hub
            .stats
            .snapshots_sent
            .fetch_add(1, Ordering::Relaxed);
        self.position = Some((snapshot.epoch, snapshot.revision));
        self.pending.extend(snapshot.frames.iter().cloned());
        self.next_progress = progress_due(self.hub.config.progress_interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams whose frames fall due within one tick of each other get
    /// the same due time, never sooner than the interval.
    #[tokio::test(start_paused = true)]
    async fn progress_falls_due_on_a_shared_tick_never_before_the_interval() {
        let interval = Duration::from_secs(60);
        let tick = interval / 32;
        let mut dues = Vec::new();
        for step_ms in [0u64, 7, 130, 401, 999, 1_500, 2_999, 50_000] {
            tokio::time::advance(Duration::from_millis(step_ms)).await;
            let now = Instant::now();
            let due = progress_due(interval);
            assert!(due >= now + interval, "due before the interval");
            assert!(due < now + interval + tick, "due later than one tick");
            dues.push(due);
        }
        let distinct: std::collections::BTreeSet<_> = dues.iter().collect();
        assert!(
            distinct.len() < dues.len() - 2,
            "no frames shared a tick: {dues:?}"
        );
        // Each due time is a whole number of ticks from every other.
        for due in &dues {
            let apart = due.saturating_duration_since(dues[0]).as_nanos();
            assert_eq!(apart % tick.as_nanos(), 0);
        }
    }
}
