//! The admission rule, table by table.

use super::*;
use futures::FutureExt;
use oneshot::error::TryRecvError::{Closed, Empty};
use std::pin::pin;
use std::task::Poll;

fn ip(last: u8) -> IpAddr {
    IpAddr::from([10, 0, 0, last])
}

fn small() -> Admission {
    Admission::new(Bounds {
        silent: 4,
        silent_per_source: 2,
        handshakes: 4,
        handshakes_per_source: 2,
        anonymous: 3,
        anonymous_per_source: 2,
    })
}

/// A slot at once, or a panic: for tables with room (or a flood to
/// drop), where `handshake` must not wait.
fn admit(admission: &Admission, source: IpAddr) -> (HandshakeSlot, Evicted) {
    match admission.handshake(source).now_or_never() {
        Some(admitted) => admitted,
        None => panic!("{source} had to wait for a silent slot"),
    }
}

fn speak(slot: &mut HandshakeSlot) {
    assert!(
        slot.speaking().now_or_never().is_some(),
        "the handshake had to wait for a slot"
    );
}

#[test]
fn a_flooding_source_evicts_its_own_oldest_silent_connection_not_others() {
    let admission = small();
    let (_o, mut other) = admit(&admission, ip(2));
    let (_f, mut first) = admit(&admission, ip(1));
    let (_s, mut second) = admit(&admission, ip(1));
    let _third = admit(&admission, ip(1));
    assert_eq!(first.try_recv(), Err(Closed));
    assert_eq!(second.try_recv(), Err(Empty));
    assert_eq!(other.try_recv(), Err(Empty));
}

#[test]
fn a_full_table_makes_room_at_the_source_holding_the_most() {
    let admission = small();
    let (_a, mut bystander) = admit(&admission, ip(1));
    let (_b, mut flood_1) = admit(&admission, ip(2));
    let (_c, mut flood_2) = admit(&admission, ip(2));
    let (_d, mut other) = admit(&admission, ip(3));
    let (_n, mut newest) = admit(&admission, ip(9));
    assert_eq!(flood_1.try_recv(), Err(Closed));
    for evicted in [&mut bystander, &mut flood_2, &mut other, &mut newest] {
        assert_eq!(evicted.try_recv(), Err(Empty));
    }
}

/// A fleet coming back: every source holds one. Nobody is dropped;
/// the newcomer waits and is admitted when a connection ends.
#[tokio::test]
async fn a_table_full_of_one_connection_per_source_makes_the_newcomer_wait() {
    let admission = small();
    let mut held: Vec<_> = (1..=4).map(|i| admit(&admission, ip(i))).collect();
    let mut waiting = pin!(admission.handshake(ip(9)));
    assert!(futures::poll!(waiting.as_mut()).is_pending());
    assert!(held.iter_mut().all(|(_, e)| e.try_recv() == Err(Empty)));
    held.remove(2);
    let Poll::Ready((_slot, mut evicted)) = futures::poll!(waiting.as_mut()) else {
        panic!("a freed silent slot woke nobody");
    };
    assert_eq!(evicted.try_recv(), Err(Empty));
    assert_eq!(held_in(&admission), 4);
}

fn held_in(admission: &Admission) -> usize {
    let table = admission.shared.table.lock();
    table.silent.total + table.speaking.total
}

/// Handshake slots all held by one source each: a connection that has
/// spoken waits, still silent, and starts when a handshake ends; none
/// in progress is thrown away for it.
#[tokio::test]
async fn a_spoken_connection_waits_for_a_handshake_to_end_rather_than_drop_one() {
    let admission = Admission::new(Bounds {
        handshakes: 2,
        ..Bounds::default()
    });
    let mut speaking = Vec::new();
    for i in 1..=2 {
        let (mut slot, evicted) = admit(&admission, ip(i));
        speak(&mut slot);
        speaking.push((slot, evicted));
    }
    let (mut queued, _) = admit(&admission, ip(3));
    {
        let mut start = pin!(queued.speaking());
        assert!(futures::poll!(start.as_mut()).is_pending());
        assert!(speaking.iter_mut().all(|(_, e)| e.try_recv() == Err(Empty)));
        speaking.remove(0);
        assert!(
            futures::poll!(start.as_mut()).is_ready(),
            "a freed slot woke nobody"
        );
    }
    assert_eq!(queued.stage(), Stage::Speaking);
    let table = admission.shared.table.lock();
    assert_eq!((table.silent.total, table.speaking.total), (0, 2));
}

/// Waiters given a freed slot and then gone (their deadline passed)
/// hand it on: the next waiter is not left waiting for a wake-up that
/// went to nobody.
#[tokio::test]
async fn a_waiter_that_gives_up_hands_the_freed_slot_on() {
    let admission = Admission::new(Bounds {
        handshakes: 1,
        ..Bounds::default()
    });
    let (mut busy, _) = admit(&admission, ip(1));
    speak(&mut busy);
    let (mut first, _) = admit(&admission, ip(2));
    let (mut second, _) = admit(&admission, ip(3));
    {
        let mut second_start = pin!(second.speaking());
        {
            let mut first_start = pin!(first.speaking());
            assert!(futures::poll!(first_start.as_mut()).is_pending());
            assert!(futures::poll!(second_start.as_mut()).is_pending());
            drop(busy);
        }
        assert!(
            futures::poll!(second_start.as_mut()).is_ready(),
            "the slot the first waiter gave up went to nobody"
        );
    }
    assert_eq!(second.stage(), Stage::Speaking);
}

#[test]
fn silent_connections_never_push_out_one_that_speaks() {
    let admission = small();
    let (mut admin, mut evicted) = admit(&admission, ip(1));
    speak(&mut admin);
    // A flood of silent connections, from the same source and others,
    // reopened as fast as they are dropped.
    let mut silent = Vec::new();
    for i in 0..100u8 {
        silent.push(admit(&admission, ip(1 + i % 3)));
    }
    assert_eq!(evicted.try_recv(), Err(Empty));
}

#[test]
fn handshakes_in_progress_are_bounded_per_source_oldest_first() {
    let admission = small();
    let mut speaking = Vec::new();
    for _ in 0..3 {
        let (mut slot, evicted) = admit(&admission, ip(1));
        speak(&mut slot);
        speaking.push((slot, evicted));
    }
    let states: Vec<_> = speaking.iter_mut().map(|(_, e)| e.try_recv()).collect();
    assert_eq!(states, [Err(Closed), Err(Empty), Err(Empty)]);
    assert_eq!(admission.shared.table.lock().speaking.total, 2);
}

/// The flood of the benchmark: 100 silent connections from each of ten
/// sources fit the default bounds, so none is dropped (and reopened).
#[test]
fn silent_connections_within_the_bounds_are_left_to_their_deadline() {
    let admission = Admission::new(Bounds::default());
    let mut held = Vec::new();
    for i in 0..1000usize {
        held.push(admit(&admission, ip((i % 10) as u8)));
    }
    assert!(held.iter_mut().all(|(_, e)| e.try_recv() == Err(Empty)));
}

#[test]
fn finished_handshakes_free_their_slot() {
    let admission = small();
    for i in 0..100 {
        let (mut slot, _) = admit(&admission, ip(1));
        if i % 2 == 0 {
            speak(&mut slot);
        }
    }
    let table = admission.shared.table.lock();
    assert_eq!((table.silent.total, table.speaking.total), (0, 0));
    assert!(table.silent.by_source.is_empty() && table.speaking.by_source.is_empty());
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
