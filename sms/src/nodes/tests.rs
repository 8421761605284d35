//! Tests of the node table: liveness by heartbeat or open stream, lag, limits and refusals.

use super::*;

fn hb(id: &str, epoch: u64, rev: u64) -> HeartbeatRequest {
    HeartbeatRequest {
        node_id: id.into(),
        applied_epoch: epoch,
        applied_revision: rev,
        ..Default::default()
    }
}

#[test]
fn lag_is_revisions_behind_in_the_same_epoch() {
    let table = NodeTable::default();
    table.heartbeat(hb("a", 7, 10)).unwrap();
    table.heartbeat(hb("b", 7, 12)).unwrap();
    table.heartbeat(hb("c", 3, 12)).unwrap();
    let status = table.status(7, 12);
    let lag: Vec<(String, u64)> = status.iter().map(|n| (n.node_id.clone(), n.lag)).collect();
    assert_eq!(
        lag,
        vec![("a".into(), 2), ("b".into(), 0), ("c".into(), 12)]
    );
    assert!(status.iter().all(|n| n.alive));
}

#[test]
fn a_full_table_drops_the_longest_dead_node_and_never_a_live_one() {
    let table = NodeTable::with_limit(2);
    let start = Instant::now();
    table.heartbeat_at(hb("old", 1, 1), start).unwrap();
    table.heartbeat_at(hb("older", 1, 1), start).unwrap();
    let later = start + NODE_TTL * 2;
    table
        .heartbeat_at(hb("older", 1, 1), start + Duration::from_secs(1))
        .unwrap();
    // Both dead by `later`: "old" was seen longest ago and goes.
    table.heartbeat_at(hb("new", 1, 1), later).unwrap();
    let ids: Vec<String> = table.nodes.read().by_id.keys().cloned().collect();
    assert_eq!(ids, vec!["new".to_string(), "older".to_string()]);
    // Now "new" is alive: another newcomer takes "older"'s place, and
    // a third finds only live nodes and is refused.
    table.heartbeat_at(hb("newer", 1, 1), later).unwrap();
    assert!(matches!(
        table.heartbeat_at(hb("third", 1, 1), later + Duration::from_secs(1)),
        Err(NodeError::TooMany)
    ));
}

#[test]
fn heartbeats_closer_than_the_gap_and_bad_ids_are_refused() {
    let table = NodeTable::default();
    let now = Instant::now();
    table.heartbeat_at(hb("n", 1, 1), now).unwrap();
    assert!(matches!(
        table.heartbeat_at(hb("n", 1, 2), now + Duration::from_millis(1)),
        Err(NodeError::TooFrequent(_))
    ));
    table
        .heartbeat_at(hb("n", 1, 2), now + MIN_HEARTBEAT_GAP)
        .unwrap();
    for bad in ["a/b", "../x", &"x".repeat(200), "sp ace"] {
        assert!(matches!(
            table.heartbeat(hb(bad, 1, 1)),
            Err(NodeError::BadId(_))
        ));
    }
}

/// A node on its follow stream is alive however long it says
/// nothing; one that ended its stream itself has left (not alive at
/// once); one whose stream broke is alive for the TTL, and a report
/// on a new stream brings either back.
#[test]
fn a_following_node_is_alive_while_its_stream_is_open_and_leaves_when_it_ends_it() {
    let table = NodeTable::default();
    let start = Instant::now();
    table.report_at(hb("n", 1, 1), start, Via::Stream).unwrap();
    table.stream_opened("n");
    let entry = |t: &NodeTable| t.nodes.read().by_id["n"].clone();
    let much_later = start + NODE_TTL * 10;
    assert!(entry(&table).alive(much_later), "open stream: alive");
    assert_eq!(entry(&table).age(much_later), Duration::ZERO);
    // Reports on a stream are paced by the stream, never refused.
    table
        .report_at(hb("n", 1, 2), start + Duration::from_millis(1), Via::Stream)
        .unwrap();

    table.stream_ended("n", StreamEnd::Left);
    let now = Instant::now();
    assert!(!entry(&table).alive(now), "left: not alive at once");
    let status = table.node_status("n", 1, 2).unwrap();
    assert!(!status.alive && status.left, "{status:?}");
    assert!(!table.invocable().iter().any(|n| n.node_id == "n"));

    // Back on a new stream: alive again, no longer left.
    table.report(hb("n", 1, 2), Via::Stream).unwrap();
    table.stream_opened("n");
    assert!(table.is_alive("n"));
    assert!(!table.node_status("n", 1, 2).unwrap().left);

    // A broken stream: alive for the TTL after the break, then lost.
    table.stream_ended("n", StreamEnd::Broken);
    let ended = Instant::now();
    assert!(entry(&table).alive(ended + NODE_TTL / 2));
    assert!(!entry(&table).alive(ended + NODE_TTL));
    assert!(!table.node_status("n", 1, 2).unwrap().left);
}

#[test]
fn a_node_with_two_streams_stays_while_one_is_open() {
    let table = NodeTable::default();
    table.report(hb("n", 1, 1), Via::Stream).unwrap();
    table.stream_opened("n");
    table.stream_opened("n");
    table.stream_ended("n", StreamEnd::Left);
    let later = Instant::now() + NODE_TTL * 2;
    assert!(table.nodes.read().by_id["n"].alive(later));
    table.stream_ended("n", StreamEnd::Left);
    assert!(!table.is_alive("n"));
}

#[test]
fn empty_node_id_is_refused() {
    assert!(matches!(
        NodeTable::default().heartbeat(hb("", 1, 1)),
        Err(NodeError::EmptyId)
    ));
}
