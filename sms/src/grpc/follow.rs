//! `Registry.Follow`: a node's one stream to SMS. The node's side says
//! first where it stands (a `WatchRequest`), then carries its report
//! whenever something in it changed; SMS's side is the watch stream.
//! The open stream is the node's liveness: no heartbeat call every few
//! seconds: an idle node costs SMS a progress frame a minute and an
//! HTTP/2 ping every two.
//!
//! [`first_watch`] reads where the node stands; [`serve`] returns SMS's
//! side, a [`Follow`] that takes the node's reports whenever it is
//! polled for frames: one task per stream, the one HTTP/2 already runs
//! for the response. The two sides end together: the node ending its
//! side (it left), a report SMS refuses (the frames end with the
//! refusal), the connection breaking, or SMS ending the frames (shutting
//! down, the node's certificate revoked).
//!
//! The node's side is read in states: open, taking a report at a time;
//! paced for [`REPORT_EVERY`] after each report taken; ended (left,
//! broken or refused), after which SMS's side ends too.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use spear_proto::frame::EncodedEvent;
use spear_proto::v1::follow_request::Message;
use spear_proto::v1::{FollowRequest, HeartbeatRequest, WatchRequest};
use tokio::time::Sleep;
use tonic::{Status, Streaming};
use tracing::{debug, warn};

use super::nodes::refused_report;
use super::reports::{Presence, Reports};
use crate::nodes::Via;
use crate::watch::WatchStream;

/// A follow stream that has not said where its node stands within this
/// long is closed.
const FIRST_WITHIN: Duration = Duration::from_secs(10);

/// Reports on one stream are taken at most this often: a node identity's
/// four streams (`MAX_WATCHES_PER_NODE`) together carry at most one report
/// per [`crate::nodes::MIN_HEARTBEAT_GAP`], as its heartbeat calls may (a compromised
/// node flipping a field on every report rewrites its etcd record no
/// faster than that). A node reports when something changed, settling
/// bursts for 50 ms, so this delays a real node's report at most a little.
const REPORT_EVERY: Duration = Duration::from_millis(80);

/// The stream's first message: where the node stands.
pub(super) async fn first_watch(
    inbound: &mut Streaming<FollowRequest>,
) -> Result<WatchRequest, Status> {
    let first = tokio::time::timeout(FIRST_WITHIN, inbound.message())
        .await
        .map_err(|_| {
            Status::deadline_exceeded(format!(
                "no watch request within {FIRST_WITHIN:?}: a follow stream starts with where the node stands"
            ))
        })??;
    match first.and_then(|f| f.message) {
        Some(Message::Watch(watch)) => Ok(watch),
        _ => Err(Status::invalid_argument(
            "a follow stream starts with a watch request (where the node stands), then reports",
        )),
    }
}

/// Answers a follow stream of `node_id`: `frames`, ended with the
/// refusal of a report when SMS refuses one, while the node's reports
/// are taken from `inbound`.
pub(super) fn serve(
    frames: WatchStream,
    reports: Arc<Reports>,
    node_id: String,
    inbound: Streaming<FollowRequest>,
) -> WatchStream {
    Box::pin(Follow {
        frames,
        inbound,
        reports,
        node_id,
        presence: None,
        paced: None,
        ended: false,
    })
}

type Item = Result<EncodedEvent, Status>;

/// SMS's side of a follow stream, which reads the node's side as it is
/// polled. Nothing else holds the node's side: a report waits in HTTP/2's
/// flow-control window until this side is polled, which is whenever a
/// frame, a report or the end of either arrives.
struct Follow {
    frames: WatchStream,
    inbound: Streaming<FollowRequest>,
    reports: Arc<Reports>,
    node_id: String,
    /// The node's place in the node table, from its first report taken.
    presence: Option<Presence>,
    /// No report is read before this fires (a report was just taken).
    paced: Option<Pin<Box<Sleep>>>,
    ended: bool,
}

/// How the node's side of a follow stream ended.
enum End {
    /// The node ended it: it left.
    Left,
    /// Broken.
    Broken,
    /// SMS refused what the node sent.
    Refused(Status),
}

impl Stream for Follow {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        if let Poll::Ready(end) = this.poll_node(cx) {
            this.ended = true;
            return Poll::Ready(this.finish(end).map(Err));
        }
        let frame = ready!(this.frames.poll_next_unpin(cx));
        this.ended = frame.is_none();
        Poll::Ready(frame)
    }
}

impl Follow {
    /// Takes the node's reports, one at a time and at most one per
    /// [`REPORT_EVERY`] (a flood is slowed through HTTP/2's flow control,
    /// and nothing is dropped); ready once the node's side ended.
    fn poll_node(&mut self, cx: &mut Context<'_>) -> Poll<End> {
        loop {
            if let Some(paced) = &mut self.paced {
                ready!(paced.as_mut().poll(cx));
                self.paced = None;
            }
            let report = match ready!(self.inbound.poll_next_unpin(cx)) {
                Some(Ok(FollowRequest {
                    message: Some(Message::Report(report)),
                })) => report,
                Some(Ok(_)) => {
                    return Poll::Ready(End::Refused(Status::invalid_argument(
                        "a follow stream carries one watch request, first, then reports only",
                    )))
                }
                Some(Err(_)) => return Poll::Ready(End::Broken),
                None => return Poll::Ready(End::Left),
            };
            if let Err(end) = self.take(report) {
                return Poll::Ready(end);
            }
            self.paced = Some(Box::pin(tokio::time::sleep(REPORT_EVERY)));
        }
    }

    /// Takes one report of this stream's node; the node counts as
    /// present from its first report until the stream ends.
    fn take(&mut self, report: HeartbeatRequest) -> Result<(), End> {
        let node_id = &self.node_id;
        if &report.node_id != node_id {
            warn!(%node_id, other = %report.node_id, "a follow stream carried another node's report; closed");
            return Err(End::Refused(Status::permission_denied(format!(
                "this follow stream is node '{node_id}''s: it carries no report of '{}'",
                report.node_id
            ))));
        }
        if let Err(e) = self.reports.take(report, Via::Stream) {
            warn!(%node_id, error = %e, "a node's report was refused; its follow stream is closed");
            return Err(End::Refused(refused_report(e)));
        }
        if self.presence.is_none() {
            self.presence = Some(self.reports.present(node_id));
        }
        Ok(())
    }

    /// Records how the node's side ended; the refusal to send, if any.
    fn finish(&mut self, end: End) -> Option<Status> {
        debug!(node_id = %self.node_id, left = matches!(end, End::Left), "follow stream ended");
        match end {
            End::Left => {
                if let Some(presence) = self.presence.take() {
                    presence.left();
                }
                None
            }
            End::Broken => None,
            End::Refused(status) => Some(status),
        }
    }
}

/// The frames of a stream, holding `held` for as long as they flow.
pub(super) fn holding<T: Send + 'static>(
    frames: impl Stream<Item = Item> + Send + 'static,
    held: T,
) -> WatchStream {
    Box::pin(frames.map(move |frame| {
        let _held = &held;
        frame
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::MAX_WATCHES_PER_NODE;
    use crate::nodes::MIN_HEARTBEAT_GAP;

    /// The streams one identity may hold carry no more reports together
    /// than its heartbeat calls may.
    #[test]
    fn an_identitys_streams_together_report_no_faster_than_its_calls() {
        assert!(REPORT_EVERY >= MIN_HEARTBEAT_GAP * MAX_WATCHES_PER_NODE as u32);
    }
}
