//! Tells SMS what this node has applied, so `sms status` shows convergence
//! per node. The report is made every few seconds, right after each
//! applied change and at once when the node drains; the follow stream
//! (`sync`) carries it to SMS only when it changed. An SMS from before the
//! follow stream gets it as a heartbeat call instead, every time, and
//! soon again after one it did not hear (`next_wait`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use spear_proto::v1::{HeartbeatRequest, ServerProblem, ServerReport};
use tokio::sync::watch;
use tracing::debug;

use std::collections::BTreeMap;

use crate::connections::{Connections, ServerState, ServerStatus};
use crate::invoke::RunStats;
use crate::registry::{RegistryHandle, RegistryView};
use crate::sms_link::SmsLink;
use crate::sync::SyncStatusCell;
use spear_common::Backoff;

use spear_proto::defaults::{
    HEARTBEAT_EVERY as EVERY, MAX_HEARTBEAT_PROBLEMS, MAX_HEARTBEAT_SERVERS, MAX_HEARTBEAT_TEXT,
};

/// What the node tells SMS about invoking it, and where its audit chain
/// stands.
#[derive(Debug, Clone, Default)]
pub struct Advert {
    /// host:port of the node's Invocation service; empty when it has none.
    pub invoke_addr: String,
    /// The node's guest runs (in progress, and how past ones ended).
    pub runs: Arc<RunStats>,
    /// The last audit record on disk (`None`: no audit log).
    pub audit_head: Option<watch::Receiver<u64>>,
}

/// Makes the node's reports, and sends them as heartbeats to an SMS that
/// takes no reports on the follow stream.
pub async fn run(
    node_id: String,
    link: SmsLink,
    advert: Advert,
    registry: RegistryHandle,
    status: Arc<SyncStatusCell>,
    connections: Connections,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut changes = registry.subscribe();
    let mut draining = advert.runs.draining.subscribe();
    let mut retry = Backoff::new(FIRST_RETRY, EVERY);
    loop {
        let request = report(&node_id, &advert, &registry, &status, &connections);
        let heard = link.report(request.clone()) || heartbeat(&link, request).await;
        tokio::select! {
            _ = tokio::time::sleep(next_wait(heard, &mut retry)) => {}
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                // Let a burst of changes settle into one heartbeat.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            // A drain is told to SMS at once, so it stops routing here.
            Ok(()) = draining.changed() => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// The node's report now.
fn report(
    node_id: &str,
    advert: &Advert,
    registry: &RegistryHandle,
    status: &SyncStatusCell,
    connections: &Connections,
) -> HeartbeatRequest {
    let view = registry.current();
    let state = status.status.lock().state;
    // One look at the connections serves both parts.
    let statuses = connections.status();
    let problems = problems(&statuses);
    let (servers, server_total) = servers(&view, statuses);
    HeartbeatRequest {
        node_id: node_id.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        applied_epoch: view.epoch,
        applied_revision: view.revision,
        sync_state: state as i32,
        problems,
        invoke_addr: advert.invoke_addr.clone(),
        running: advert.runs.running.load(Ordering::Relaxed),
        draining: advert.runs.is_draining(),
        servers,
        server_total,
        audit_head_seq: advert.audit_head.as_ref().map_or(0, |h| *h.borrow()),
    }
}

/// Sends `request` as a heartbeat call; whether SMS heard it.
async fn heartbeat(link: &SmsLink, request: HeartbeatRequest) -> bool {
    let Ok(mut nodes) = link.nodes() else {
        return false;
    };
    let sent = tokio::time::timeout(Duration::from_secs(5), nodes.heartbeat(request)).await;
    match sent {
        Ok(Ok(_)) => true,
        Ok(Err(status)) => {
            debug!(message = %status.message(), "heartbeat refused");
            false
        }
        Err(_) => {
            debug!("heartbeat not answered in time");
            false
        }
    }
}

/// The first retry of a heartbeat SMS did not hear; retries double up to
/// [`EVERY`].
const FIRST_RETRY: Duration = Duration::from_millis(100);

/// How long to wait before the next heartbeat: [`EVERY`] after one SMS
/// heard; after one it did not (the link not connected yet, SMS away or
/// refusing), soon, then less and less often. A node that starts, or
/// comes back, before its link is up is thus heard as soon as the link
/// is, instead of a whole period later (until then SMS shows the node as
/// it last heard of it: a restarted node read "not alive", "draining").
fn next_wait(heard: bool, retry: &mut Backoff) -> Duration {
    if heard {
        retry.reset();
        EVERY
    } else {
        retry.next_delay()
    }
}

/// Each server of the node's registry as this node holds it (the
/// console's nodes view): its connection's state, or `idle` for one no
/// run has used yet (nodes connect on first use) and `disabled`; first by
/// id, at most [`MAX_HEARTBEAT_SERVERS`]; and how many in all.
fn servers(
    view: &RegistryView,
    mut connected: BTreeMap<String, ServerStatus>,
) -> (Vec<ServerReport>, u32) {
    let mut ids: Vec<&String> = view.servers.keys().collect();
    let extra: Vec<String> = connected
        .keys()
        .filter(|id| !view.servers.contains_key(*id))
        .cloned()
        .collect();
    ids.extend(extra.iter());
    ids.sort();
    let total = u32::try_from(ids.len()).unwrap_or(u32::MAX);
    let reports = ids
        .into_iter()
        .take(MAX_HEARTBEAT_SERVERS)
        .map(|id| match connected.remove(id) {
            Some(status) => ServerReport {
                server_id: id.clone(),
                state: status.state.name().to_string(),
                protocol_version: status.protocol_version.unwrap_or_default(),
                sandbox: status
                    .sandbox
                    .map(|b| b.label.to_string())
                    .unwrap_or_default(),
                tools: u32::try_from(status.tools).unwrap_or(u32::MAX),
                held: u32::try_from(status.held.len()).unwrap_or(u32::MAX),
            },
            None => {
                let enabled = view
                    .servers
                    .get(id)
                    .and_then(|r| r.spec.as_ref())
                    .is_some_and(|s| s.enabled);
                ServerReport {
                    server_id: id.clone(),
                    state: if enabled { "idle" } else { "disabled" }.to_string(),
                    ..Default::default()
                }
            }
        })
        .collect();
    (reports, total)
}

/// Per-server problems this node sees: failed servers, quarantined tools
/// and tools held for their pin, as many and as long as SMS keeps.
fn problems(statuses: &BTreeMap<String, ServerStatus>) -> Vec<ServerProblem> {
    let mut out = all_problems(statuses);
    out.truncate(MAX_HEARTBEAT_PROBLEMS);
    for problem in &mut out {
        spear_common::text::truncate(&mut problem.message, MAX_HEARTBEAT_TEXT);
    }
    out
}

fn all_problems(statuses: &BTreeMap<String, ServerStatus>) -> Vec<ServerProblem> {
    let mut out = Vec::new();
    for (server_id, status) in statuses {
        if status.state == ServerState::Failed {
            let message = status.last_error.clone().unwrap_or_else(|| "failed".into());
            out.push(ServerProblem {
                server_id: server_id.clone(),
                message,
                failed: true,
            });
        }
        for q in &status.quarantined {
            let (tool, why) = (&q.tool, &q.why);
            out.push(ServerProblem {
                server_id: server_id.clone(),
                message: format!("tool '{tool}' quarantined: {why}"),
                failed: false,
            });
        }
        if let Some(message) = held_problem(server_id, &status.held) {
            out.push(ServerProblem {
                server_id: server_id.clone(),
                message,
                failed: false,
            });
        }
    }
    out
}

/// Tools a server's pins hold, as one line for the server: the tool's own
/// sentence when one is held, the count and names (and the commands that
/// show and approve them) when more are: a server whose tools all wait for
/// approval says so once, not once per tool.
fn held_problem(server_id: &str, held: &BTreeMap<String, String>) -> Option<String> {
    const NAMED: usize = 5;
    match held.len() {
        0 => None,
        1 => held.values().next().cloned(),
        n => {
            let mut names: Vec<String> =
                held.keys().take(NAMED).map(|t| format!("'{t}'")).collect();
            if n > NAMED {
                names.push(format!("and {} more", n - NAMED));
            }
            Some(format!(
                "{n} tools of server '{server_id}' are held until an operator approves them ({}): see `sms pins diff {server_id}`, then `sms pins approve {server_id}`",
                names.join(", ")
            ))
        }
    }
}

#[cfg(test)]
mod held_tests {
    use std::collections::BTreeMap;

    use super::held_problem;

    #[test]
    fn a_server_with_many_held_tools_is_one_line() {
        let one: BTreeMap<String, String> =
            [("echo".to_string(), "tool 'echo' changed".to_string())].into();
        assert_eq!(
            held_problem("s", &one).as_deref(),
            Some("tool 'echo' changed")
        );
        let many: BTreeMap<String, String> = (0..8)
            .map(|i| (format!("t{i}"), format!("tool 't{i}' waits")))
            .collect();
        assert_eq!(
            held_problem("s", &many).as_deref(),
            Some("8 tools of server 's' are held until an operator approves them ('t0', 't1', 't2', 't3', 't4', and 3 more): see `sms pins diff s`, then `sms pins approve s`")
        );
        assert_eq!(held_problem("s", &BTreeMap::new()), None);
    }
}

#[cfg(test)]
mod pace_tests {
    use super::*;

    /// A node whose first heartbeats are not heard (its link not up yet)
    /// tries again within a fraction of a period, backing off to the
    /// period; once heard, it waits the period, and a later miss starts
    /// again from the first retry.
    #[test]
    fn unheard_heartbeats_are_retried_soon_and_heard_ones_wait_the_period() {
        let mut retry = Backoff::new(FIRST_RETRY, EVERY);
        let first = next_wait(false, &mut retry);
        assert!(first <= FIRST_RETRY, "{first:?}");
        let waits: Vec<Duration> = (0..12).map(|_| next_wait(false, &mut retry)).collect();
        assert!(waits.iter().all(|w| *w <= EVERY), "{waits:?}");
        assert!(waits[11] >= EVERY / 2, "backs off to the period: {waits:?}");
        assert_eq!(next_wait(true, &mut retry), EVERY);
        assert!(next_wait(false, &mut retry) <= FIRST_RETRY);
    }
}
