//! `/events`: server-sent events that tell a page which of its parts
//! changed, so its script re-reads them (the page is re-rendered by the
//! same code that rendered it first: one source of truth, no client-side
//! templates). Topics:
//!
//! - `registry`: the registry's revision moved (a file or admin write).
//! - `problems`: a file of the MCP directory became broken or was fixed.
//! - `nodes`: a heartbeat arrived, or a node stopped being alive.
//! - `trust`: an approval was asked for or decided, or a pin drifted.
//! - `audit`: a record reached SMS.
//!
//! Each stream is one task: it wakes on SMS's own signals (the hub's
//! watch, the trust broadcast, heartbeats) and checks the cheap counters
//! of the rest every 250 ms; events of one topic are at most one per
//! 250 ms. At most [`MAX_STREAMS`] are open at once, and
//! [`MAX_STREAMS_PER_SESSION`] of one session, so no session (a viewer's
//! script, say) takes every place.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use spear_proto::v1::trust_event::Event as Trust;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

use super::guard::Visit;
use super::Shared;

/// Event streams open at once, over all sessions, and of one session.
pub const MAX_STREAMS: usize = 256;
pub const MAX_STREAMS_PER_SESSION: usize = 16;
/// How often the counters are looked at.
const TICK: Duration = Duration::from_millis(250);

/// The nodes topic is sent at most this often.
const NODES_EVERY: Duration = Duration::from_secs(1);

static OPEN: AtomicUsize = AtomicUsize::new(0);
/// Streams open per session id.
static PER_SESSION: std::sync::LazyLock<
    parking_lot::Mutex<std::collections::HashMap<String, usize>>,
> = std::sync::LazyLock::new(Default::default);

#[derive(Deserialize)]
pub struct Topics {
    #[serde(default)]
    topics: String,
}

/// Holds one of the [`MAX_STREAMS`] places, and one of its session's,
/// while its stream is open.
struct Place {
    session: String,
}

/// Why no stream opens.
#[derive(Debug, PartialEq, Eq)]
enum Full {
    Console,
    Session,
}

impl Place {
    fn take(session: &str) -> Result<Place, Full> {
        let mut per = PER_SESSION.lock();
        let mine = per.entry(session.to_string()).or_default();
        if *mine >= MAX_STREAMS_PER_SESSION {
            return Err(Full::Session);
        }
        let taken = OPEN.fetch_add(1, Ordering::AcqRel);
        if taken >= MAX_STREAMS {
            OPEN.fetch_sub(1, Ordering::AcqRel);
            return Err(Full::Console);
        }
        *mine += 1;
        Ok(Place {
            session: session.to_string(),
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        OPEN.fetch_sub(1, Ordering::AcqRel);
        let mut per = PER_SESSION.lock();
        if let Some(mine) = per.get_mut(&self.session) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                per.remove(&self.session);
            }
        }
    }
}

pub async fn events(Visit { state, signed }: Visit, Query(topics): Query<Topics>) -> Response {
    let place = match Place::take(&signed.id) {
        Ok(place) => place,
        Err(Full::Console) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "too many live views are open; close some console tabs\n",
            )
                .into_response()
        }
        Err(Full::Session) => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                format!("this session already has {MAX_STREAMS_PER_SESSION} live views open; close some console tabs\n"),
            )
                .into_response()
        }
    };
    let wanted: BTreeSet<String> = topics
        .topics
        .split(',')
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    let (sender, receiver) = mpsc::channel::<&'static str>(16);
    tokio::spawn(follow(state, signed.id, wanted, sender, place));
    let stream = ReceiverStream::new(receiver)
        .map(|topic| Ok::<_, Infallible>(Event::default().event(topic).data(topic)));
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// Sends the topics that changed until the page goes away or its
/// session ends (sign-out, expiry, a rotated token).
async fn follow(
    state: Shared,
    session_id: String,
    wanted: BTreeSet<String>,
    sender: mpsc::Sender<&'static str>,
    _place: Place,
) {
    let mut trust = state.api.events.subscribe();
    let mut heartbeats = state.nodes.changes();
    let mut position = state.hub.position();
    let mut problems = state.problems.version();
    let mut alive = state.nodes.alive_count();
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut dirty: BTreeSet<&'static str> = BTreeSet::new();
    let mut last_alive_check = tokio::time::Instant::now();
    let mut last_nodes_sent = tokio::time::Instant::now() - NODES_EVERY;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            received = trust.recv() => match received {
                Ok(event) => match event.event {
                    Some(Trust::Audit(_)) => { dirty.insert("audit"); }
                    Some(_) => { dirty.insert("trust"); }
                    None => {}
                },
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    dirty.insert("trust");
                    dirty.insert("audit");
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            changed = heartbeats.changed() => {
                if changed.is_err() {
                    return;
                }
                dirty.insert("nodes");
                heartbeats.borrow_and_update();
                // The tick sends it.
                continue;
            }
        }
        let now = state.hub.position();
        if now != position {
            position = now;
            dirty.insert("registry");
        }
        let now = state.problems.version();
        if now != problems {
            problems = now;
            dirty.insert("problems");
        }
        // Nodes stop being alive without a heartbeat: look once a second.
        if last_alive_check.elapsed() >= Duration::from_secs(1) {
            last_alive_check = tokio::time::Instant::now();
            if state.sessions.get(&session_id).is_none() {
                return;
            }
            let now = state.nodes.alive_count();
            if now != alive {
                alive = now;
                dirty.insert("nodes");
            }
        }
        // A fleet heartbeats all the time: its page is re-read at most
        // once a second.
        let nodes_wait = last_nodes_sent.elapsed() < NODES_EVERY;
        for topic in std::mem::take(&mut dirty) {
            if !wanted.contains(topic) {
                continue;
            }
            if topic == "nodes" {
                if nodes_wait {
                    dirty.insert(topic);
                    continue;
                }
                last_nodes_sent = tokio::time::Instant::now();
            }
            if sender.send(topic).await.is_err() {
                return;
            }
        }
        if sender.is_closed() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test: the places are process-wide.
    #[test]
    fn streams_are_capped_per_session_and_in_all_and_give_their_place_back() {
        let mine: Vec<Place> = (0..MAX_STREAMS_PER_SESSION)
            .map(|_| Place::take("session-flooding").unwrap_or_else(|_| panic!("a place")))
            .collect();
        assert_eq!(
            Place::take("session-flooding").map(|_| ()),
            Err(Full::Session)
        );
        // Another session still gets one; a closed view frees its place.
        assert!(Place::take("session-other").is_ok());
        drop(mine);
        assert!(Place::take("session-flooding").is_ok());
        // Over all sessions, at most MAX_STREAMS.
        let places: Vec<Place> = (0..=MAX_STREAMS)
            .filter_map(|i| Place::take(&format!("session-{i}")).ok())
            .collect();
        assert_eq!(places.len(), MAX_STREAMS);
        assert_eq!(Place::take("session-late").map(|_| ()), Err(Full::Console));
        drop(places);
        assert!(Place::take("session-late").is_ok());
    }
}
