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
use std::sync::Arc;

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
                    self.next_progress = Instant::now() + self.hub.config.progress_interval;
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
                    self.next_progress = Instant::now() + self.hub.config.progress_interval;
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
        self.next_progress = Instant::now() + self.hub.config.progress_interval;
    }
}
