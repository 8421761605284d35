//! The watch client: connect to one of the SMS addresses, resume from the
//! applied position, apply what arrives, and reconnect with backoff when the
//! stream breaks, goes silent or cannot be trusted. The last good registry
//! keeps being served throughout.
//!
//! The stream is `Registry.Follow`: the node's side carries its report
//! (from [`SmsLink::reports`]) whenever it changed, and the open stream is
//! how SMS knows the node is there. At shutdown the node ends its side, so
//! SMS knows it left. An SMS from before the follow stream answers
//! `Unimplemented`; the node then watches (`Registry.Watch`) and reports
//! with heartbeat calls.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use spear_proto::v1::follow_request::Message;
use spear_proto::v1::{FollowRequest, SyncState, WatchEvent, WatchRequest};
use tokio::sync::{oneshot, watch};
use tonic::Streaming;
use tracing::{debug, info, info_span, warn, Instrument};

use super::apply::{Applier, Step};
use super::retry::Retry;
use super::status::SyncStatusCell;
use crate::persist::{Applied, AppliedLog};
use crate::registry::RegistryHandle;
use crate::sms_link::{LinkError, SmsLink};

/// Largest watch message accepted (snapshot frames are about 1 MiB).
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// A stream silent this long is dead: three of SMS's progress frames
/// (every 60 s by default) missed. A connection to an SMS whose host went
/// away is found sooner, by TCP keepalive and HTTP/2 pings (`sms_link`).
pub const SILENCE_TIMEOUT: Duration = Duration::from_secs(180);

/// How long a leaving node waits for SMS to close the stream after it
/// ended its side.
const LEAVE_WITHIN: Duration = Duration::from_secs(2);

/// How the node follows SMS.
#[derive(Clone)]
pub struct SyncConfig {
    /// The link to SMS: its addresses (tried in turn), TLS and join token.
    /// The sync loop decides which SMS the node follows, for every client.
    pub link: SmsLink,
    pub node_id: String,
    /// A stream silent this long is dead (SMS sends progress every ~5 s).
    pub silence_timeout: Duration,
}

/// The sync loop.
pub struct Syncer {
    config: SyncConfig,
    registry: RegistryHandle,
    status: Arc<SyncStatusCell>,
    log: AppliedLog,
}

enum StreamEnd {
    /// Reconnect, resuming from the applied position.
    Broken(String),
    /// Nothing listens at the address (refused): reconnect as
    /// [`Broken`](StreamEnd::Broken), at [`Retry`]'s quicker pace.
    Refused(String),
    /// Reconnect asking for a snapshot.
    Resync(String),
    Shutdown,
}

impl Syncer {
    pub fn new(
        config: SyncConfig,
        registry: RegistryHandle,
        status: Arc<SyncStatusCell>,
        log: AppliedLog,
    ) -> Self {
        Self {
            config,
            registry,
            status,
            log,
        }
    }

    /// Runs until `shutdown` turns true: connect, stream, and after the
    /// stream ends wait as [`Retry`] says (reset once an event
    /// applies) before the next attempt, on the next SMS address.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let span = info_span!("sync", node_id = %self.config.node_id);
        async move {
            let mut retry = Retry::default();
            let mut next_addr = 0usize;
            let mut want_snapshot = false;
            // Said once per distinct reason, so a node that cannot follow
            // SMS says why without a line per retry.
            let mut last_said: Option<String> = None;
            loop {
                if *shutdown.borrow() {
                    return;
                }
                let addrs = self.config.link.addrs();
                let Some(addr) = addrs.get(next_addr % addrs.len().max(1)).cloned() else {
                    warn!("no SMS address configured");
                    return;
                };
                let end = self
                    .stream(&addr, want_snapshot, &mut retry, &mut shutdown)
                    .await;
                let refused = matches!(end, StreamEnd::Refused(_));
                match end {
                    StreamEnd::Shutdown => return,
                    StreamEnd::Resync(reason) => {
                        warn!(sms = %addr, %reason, "resynchronising from a snapshot");
                        self.status.counters.gaps.fetch_add(1, Ordering::Relaxed);
                        want_snapshot = true;
                        self.degrade(&reason);
                    }
                    StreamEnd::Broken(reason) | StreamEnd::Refused(reason) => {
                        if last_said.as_deref() == Some(reason.as_str()) {
                            debug!(sms = %addr, %reason, "watch stream ended");
                        } else {
                            warn!(sms = %addr, "cannot follow SMS: {reason}");
                            last_said = Some(reason.clone());
                        }
                        next_addr += 1;
                        self.degrade(&reason);
                    }
                }
                self.status
                    .counters
                    .reconnects
                    .fetch_add(1, Ordering::Relaxed);
                let delay = retry.next_delay(refused);
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.changed() => return,
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Marks the node stale (serving the last good registry) or connecting.
    fn degrade(&self, reason: &str) {
        let mut status = self.status.status.lock();
        status.set_state(if self.registry.current().epoch == 0 {
            SyncState::Connecting
        } else {
            SyncState::Stale
        });
        status.last_error = Some(reason.to_string());
    }

    async fn stream(
        &mut self,
        addr: &str,
        want_snapshot: bool,
        retry: &mut Retry,
        shutdown: &mut watch::Receiver<bool>,
    ) -> StreamEnd {
        let link = &self.config.link;
        let channel = match link.connect(addr).await {
            Ok(channel) => channel,
            Err(
                e @ LinkError::Connect {
                    nobody_listening: true,
                    ..
                },
            ) => return StreamEnd::Refused(e.to_string()),
            Err(e) => return StreamEnd::Broken(e.to_string()),
        };
        let mut client = link
            .registry(channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES);
        let (epoch, revision) = if want_snapshot {
            (0, 0)
        } else {
            self.registry.current().position()
        };
        let request = WatchRequest {
            node_id: self.config.node_id.clone(),
            epoch,
            revision,
        };
        let (leave, leaving) = oneshot::channel();
        let mut stream = match open(&mut client, request, link, leaving).await {
            Ok(stream) => stream,
            Err(status) => return StreamEnd::Broken(watch_refused(addr, &status, link)),
        };
        info!(sms = %addr, epoch, revision, "watching the registry");
        // Every client of the node follows this SMS now, on this connection
        // (and `/status` shows it).
        link.follow(addr, channel);
        let mut applier = Applier::default();
        loop {
            let message = tokio::select! {
                m = tokio::time::timeout(self.config.silence_timeout, stream.message()) => m,
                _ = shutdown.changed() => return leave_stream(leave, stream).await,
            };
            let event = match message {
                Err(_) => {
                    return StreamEnd::Broken(format!(
                        "no message from SMS at {addr} for {:?}",
                        self.config.silence_timeout
                    ))
                }
                Ok(Err(status)) => {
                    return StreamEnd::Broken(format!(
                        "watch stream from {addr} failed: {}",
                        status.message()
                    ))
                }
                Ok(Ok(None)) => {
                    return StreamEnd::Broken(format!("SMS at {addr} closed the watch stream"))
                }
                Ok(Ok(Some(event))) => event,
            };
            let event = set_aside_others(event, &self.config.node_id);
            let current = self.registry.current();
            match applier.step(&current, event) {
                Step::Nothing => {}
                Step::Resync(reason) => return StreamEnd::Resync(reason),
                Step::Progress { epoch, revision } => {
                    let mut status = self.status.status.lock();
                    status.sms_revision = revision;
                    if epoch == current.epoch && revision <= current.revision {
                        status.set_state(SyncState::Synced);
                        status.last_error = None;
                        retry.reset();
                    }
                }
                Step::Apply(update) => {
                    let counters = &self.status.counters;
                    let counter = match update.applied {
                        Applied::Snapshot { .. } => Some(&counters.snapshots),
                        Applied::Delta { .. } => Some(&counters.deltas),
                        // Written by the node at start, never by sync.
                        Applied::Restored { .. } => None,
                    };
                    if let Some(counter) = counter {
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    self.log.append(&update.applied);
                    debug!(change = %update.applied, affected = update.affected.len(), "registry change applied");
                    self.registry.publish(update.view, update.affected);
                    let mut status = self.status.status.lock();
                    status.set_state(SyncState::Synced);
                    status.last_error = None;
                    retry.reset();
                }
            }
        }
    }
}

/// Opens the node's stream from SMS: a follow stream whose node side
/// carries the node's reports until `leaving` fires, or, from an SMS that
/// has none, a watch (the node then reports with heartbeat calls).
async fn open(
    client: &mut spear_proto::v1::registry_client::RegistryClient<crate::sms_link::Joined>,
    request: WatchRequest,
    link: &SmsLink,
    leaving: oneshot::Receiver<()>,
) -> Result<Streaming<WatchEvent>, tonic::Status> {
    let first = FollowRequest {
        message: Some(Message::Watch(request.clone())),
    };
    let reports = tokio_stream::wrappers::WatchStream::new(link.reports()).filter_map(|latest| {
        futures::future::ready(latest.map(|report| FollowRequest {
            message: Some(Message::Report(report)),
        }))
    });
    // Only a leave ends the node's side; a stream dropped for any other
    // reason (a gap, silence) is reset, so SMS does not think it left.
    let left = async move {
        if leaving.await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let outbound = futures::stream::once(futures::future::ready(first))
        .chain(reports)
        .take_until(left);
    match client.follow(outbound).await {
        Ok(response) => {
            link.set_carried(true);
            Ok(response.into_inner())
        }
        Err(status) if status.code() == tonic::Code::Unimplemented => {
            debug!("SMS has no follow stream: watching, and reporting with heartbeat calls");
            link.set_carried(false);
            Ok(client.watch(request).await?.into_inner())
        }
        Err(status) => Err(status),
    }
}

/// Ends the node's side of its stream and waits (briefly) for SMS's side
/// to end: SMS then knows the node left, rather than lost it.
async fn leave_stream(leave: oneshot::Sender<()>, mut stream: Streaming<WatchEvent>) -> StreamEnd {
    let _ = leave.send(());
    let drained = async { while let Ok(Some(_)) = stream.message().await {} };
    let _ = tokio::time::timeout(LEAVE_WITHIN, drained).await;
    StreamEnd::Shutdown
}

/// Why a watch was not opened: SMS's refusal, or a connection that broke
/// before any answer (it carries a source), with what to check.
fn watch_refused(addr: &str, status: &tonic::Status, link: &crate::sms_link::SmsLink) -> String {
    if std::error::Error::source(status).is_some() {
        format!(
            "the connection to SMS at {addr} failed before an answer ({}); {}",
            status.message(),
            link.dial_hint()
        )
    } else {
        format!("SMS at {addr} refused the watch: {}", status.message())
    }
}

/// Servers scoped to other nodes (their `nodes`) are kept disabled and
/// without their environment or headers: this node never connects or
/// offers them. They stay in the view, so revisions and snapshot counts
/// are SMS's.
fn set_aside_others(
    mut event: spear_proto::v1::WatchEvent,
    node_id: &str,
) -> spear_proto::v1::WatchEvent {
    use spear_proto::scope::{in_scope, set_aside};
    use spear_proto::v1::watch_event::Event;
    let records = match &mut event.event {
        Some(Event::Snapshot(frame)) => &mut frame.servers,
        Some(Event::Delta(delta)) => &mut delta.upserts,
        _ => return event,
    };
    for spec in records.iter_mut().filter_map(|r| r.spec.as_mut()) {
        if !in_scope(spec, node_id) {
            set_aside(spec);
        }
    }
    event
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;

    use futures::Stream;
    use spear_proto::v1::registry_server::{Registry, RegistryServer};
    use spear_proto::v1::{watch_event, ListServersRequest, ListServersResponse, Progress};
    use tonic::{Request, Response, Status};

    use super::*;

    /// An SMS from before the follow stream: `Follow` is unknown to it.
    struct OldSms;

    type Events = Pin<Box<dyn Stream<Item = Result<WatchEvent, Status>> + Send>>;

    #[tonic::async_trait]
    impl Registry for OldSms {
        async fn list_servers(
            &self,
            _: Request<ListServersRequest>,
        ) -> Result<Response<ListServersResponse>, Status> {
            Err(Status::unimplemented("not in this test"))
        }

        type WatchStream = Events;

        async fn watch(&self, request: Request<WatchRequest>) -> Result<Response<Events>, Status> {
            let revision = request.into_inner().revision;
            let progress = WatchEvent {
                event: Some(watch_event::Event::Progress(Progress {
                    epoch: 1,
                    revision,
                })),
            };
            Ok(Response::new(Box::pin(futures::stream::iter([Ok(
                progress,
            )]))))
        }

        type FollowStream = Events;

        async fn follow(
            &self,
            _: Request<Streaming<FollowRequest>>,
        ) -> Result<Response<Events>, Status> {
            // What tonic answers for a method a server does not have.
            Err(Status::unimplemented(""))
        }
    }

    /// Against an SMS without `Follow`, the node watches instead and
    /// reports with heartbeat calls (its reports are not carried).
    #[tokio::test]
    async fn an_sms_without_follow_is_watched_and_sent_heartbeats() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(RegistryServer::new(OldSms))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        let link = SmsLink::new(vec![addr.clone()], None, Default::default());
        link.set_carried(true);
        let channel = link.connect(&addr).await.unwrap();
        let mut client = link.registry(channel);
        let request = WatchRequest {
            node_id: "n".into(),
            epoch: 1,
            revision: 7,
        };
        let (_leave, leaving) = oneshot::channel();
        let mut stream = open(&mut client, request, &link, leaving).await.unwrap();
        let event = stream.message().await.unwrap().unwrap();
        assert!(
            matches!(
                event.event,
                Some(watch_event::Event::Progress(Progress { revision: 7, .. }))
            ),
            "{event:?}"
        );
        assert!(
            !link.report(Default::default()),
            "reports go as heartbeat calls"
        );
    }
}
