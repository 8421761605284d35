//! `Registry.Follow`: a node's one stream to SMS. The node's side says
//! first where it stands (a `WatchRequest`), then carries its report
//! whenever something in it changed; SMS's side is the watch stream.
//! The open stream is the node's liveness: no heartbeat call every few
//! seconds, and an idle node costs SMS nothing but the keepalives of its
//! connection.
//!
//! [`first_watch`] reads where the node stands; [`serve`] answers with the
//! watch frames while [`take_reports`] takes the node's reports. The two
//! halves end together: the node ending its side (it left), a report SMS
//! refuses (the frames end with the refusal), the connection breaking,
//! or SMS ending the frames (shutting down, the node's certificate
//! revoked).

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use spear_proto::frame::EncodedEvent;
use spear_proto::v1::follow_request::Message;
use spear_proto::v1::{FollowRequest, WatchRequest};
use tokio::sync::oneshot;
use tokio::time::Instant;
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
    let (end_tx, end) = oneshot::channel();
    let (stop, stop_rx) = oneshot::channel();
    tokio::spawn(take_reports(reports, node_id, inbound, stop_rx, end_tx));
    let halves = Halves {
        frames,
        end,
        _stop: stop,
        done: false,
    };
    Box::pin(futures::stream::unfold(halves, Halves::next))
}

/// SMS's side of the stream, and its link to the node's side.
struct Halves {
    frames: WatchStream,
    /// The node's side ended: with a refusal to send, or without.
    end: oneshot::Receiver<Option<Status>>,
    /// Dropped with this side, which ends the node's.
    _stop: oneshot::Sender<()>,
    done: bool,
}

type Item = Result<EncodedEvent, Status>;

impl Halves {
    async fn next(mut self) -> Option<(Item, Halves)> {
        if self.done {
            return None;
        }
        tokio::select! {
            biased;
            end = &mut self.end => {
                self.done = true;
                match end {
                    Ok(Some(refusal)) => Some((Err(refusal), self)),
                    _ => None,
                }
            }
            frame = self.frames.next() => frame.map(|frame| (frame, self)),
        }
    }
}

/// How the node's side of a follow stream ended.
enum End {
    /// The node ended it: it left.
    Left,
    /// Broken, or SMS's side ended first.
    Broken,
    /// SMS refused what the node sent.
    Refused(Status),
}

/// Takes `node_id`'s reports from its side of the stream, one at a time
/// and at most one per [`REPORT_EVERY`] (a flood is slowed through
/// HTTP/2's flow control, and nothing is dropped); the node counts as present from its first report until the
/// stream ends.
async fn take_reports(
    reports: Arc<Reports>,
    node_id: String,
    mut inbound: Streaming<FollowRequest>,
    mut stop: oneshot::Receiver<()>,
    end_tx: oneshot::Sender<Option<Status>>,
) {
    let mut presence: Option<Presence> = None;
    let mut next = Instant::now();
    let end = loop {
        let message = tokio::select! {
            message = inbound.message() => message,
            _ = &mut stop => break End::Broken,
        };
        let report = match message {
            Ok(Some(FollowRequest {
                message: Some(Message::Report(report)),
            })) => report,
            Ok(Some(_)) => {
                break End::Refused(Status::invalid_argument(
                    "a follow stream carries one watch request, first, then reports only",
                ))
            }
            Ok(None) => break End::Left,
            Err(_) => break End::Broken,
        };
        if report.node_id != node_id {
            warn!(%node_id, other = %report.node_id, "a follow stream carried another node's report; closed");
            break End::Refused(Status::permission_denied(format!(
                "this follow stream is node '{node_id}''s: it carries no report of '{}'",
                report.node_id
            )));
        }
        tokio::time::sleep_until(next).await;
        next = Instant::now() + REPORT_EVERY;
        if let Err(e) = reports.take(report, Via::Stream).await {
            warn!(%node_id, error = %e, "a node's report was refused; its follow stream is closed");
            break End::Refused(refused_report(e));
        }
        if presence.is_none() {
            presence = Some(reports.present(&node_id));
        }
    };
    debug!(%node_id, left = matches!(end, End::Left), "follow stream ended");
    let refusal = match end {
        End::Left => {
            if let Some(presence) = presence {
                presence.left();
            }
            None
        }
        End::Broken => None,
        End::Refused(status) => Some(status),
    };
    let _ = end_tx.send(refusal);
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
