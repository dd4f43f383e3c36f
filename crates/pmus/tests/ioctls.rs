//! The PERF_EVENT_IOC_* semantics beyond the refusals of the table test:
//! REFRESH's overflow limit, PAUSE_OUTPUT's counted losses, RESET, ID,
//! SET_OUTPUT redirection and detach, PERF_IOC_FLAG_GROUP, and a leader's
//! close turning its members into singletons.

mod common;

use common::*;
use perfaux_abi::attr::AttrFlags;
use perfaux_abi::consts::*;
use perfaux_core::{EventState, Prot, Target, perf_event_open_attr, perf_uevent};
use perfaux_pmus::UEVENT_TYPE;

fn counter(type_config: u64, period: u64) -> perfaux_core::EventFd {
    let a = sampling(UEVENT_TYPE, type_config, period);
    perf_event_open_attr(&a, Target::current(), -1, -1, 0).unwrap()
}

#[test]
fn refresh_allows_n_overflows_then_disables() {
    perfaux_pmus::register();
    let ev = counter(400, 1);
    let mut m = ev.mmap(0, 1 + 2, Prot::READ_WRITE).unwrap();
    ev.refresh(2).unwrap();
    assert_eq!(ev.event().state(), EventState::Active);
    for _ in 0..5 {
        perf_uevent(400, b"x", 0).unwrap();
    }
    assert_eq!(ev.event().state(), EventState::Off, "disabled at the limit");
    assert_eq!(ev.event().count(), 2);
    let samples = records(&mut m)
        .iter()
        .filter(|(h, _)| h.type_ == PERF_RECORD_SAMPLE)
        .count();
    assert_eq!(samples, 2);
}

#[test]
fn pause_output_drops_and_counts() {
    perfaux_pmus::register();
    let ev = counter(401, 1);
    let mut m = ev.mmap(0, 1 + 2, Prot::READ_WRITE).unwrap();
    ev.enable(0).unwrap();
    ev.pause_output(true).unwrap();
    for _ in 0..3 {
        perf_uevent(401, b"x", 0).unwrap();
    }
    assert_eq!(ev.event().counters().lost, 3);
    ev.pause_output(false).unwrap();
    perf_uevent(401, b"x", 0).unwrap();
    let recs = records(&mut m);
    // PERF_RECORD_LOST {id, lost = 3} in front of the next sample.
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].0.type_, PERF_RECORD_LOST);
    assert_eq!(u64_at(&recs[0].1, 8), ev.id());
    assert_eq!(u64_at(&recs[0].1, 16), 3);
    assert_eq!(recs[1].0.type_, PERF_RECORD_SAMPLE);
}

#[test]
fn reset_id_and_group_flag() {
    perfaux_pmus::register();
    let l = counter(402, 0);
    let mut ma = attr(UEVENT_TYPE, 402);
    ma.flags |= AttrFlags::DISABLED;
    let m = perf_event_open_attr(&ma, Target::current(), -1, l.as_raw(), 0).unwrap();
    assert_ne!(l.id(), m.id());
    // The group flag on a member applies to the whole group.
    m.enable(PERF_IOC_FLAG_GROUP).unwrap();
    assert_eq!(l.event().state(), EventState::Active);
    assert_eq!(m.event().state(), EventState::Active);
    perf_uevent(402, b"x", 0).unwrap();
    assert_eq!((l.event().count(), m.event().count()), (1, 1));
    l.reset(PERF_IOC_FLAG_GROUP).unwrap();
    assert_eq!((l.event().count(), m.event().count()), (0, 0));
    // Disabling the leader alone schedules the member out.
    l.disable(0).unwrap();
    assert_eq!(m.event().state(), EventState::Inactive);
    perf_uevent(402, b"x", 0).unwrap();
    assert_eq!(m.event().count(), 0);
    l.enable(0).unwrap();
    assert_eq!(m.event().state(), EventState::Active);
    // Closing the leader: the member is a singleton and keeps running.
    drop(l);
    assert!(m.event().is_group_leader());
    assert_eq!(m.event().state(), EventState::Active);
    perf_uevent(402, b"x", 0).unwrap();
    assert_eq!(m.event().count(), 1);
}

#[test]
fn set_output_redirects_and_detaches() {
    perfaux_pmus::register();
    let a = counter(403, 1);
    let b = counter(404, 1);
    let mut mb = b.mmap(0, 1 + 2, Prot::READ_WRITE).unwrap();
    a.set_output(b.as_raw()).unwrap();
    a.enable(0).unwrap();
    perf_uevent(403, b"x", 0).unwrap();
    let recs = records(&mut mb);
    assert_eq!(recs.len(), 1, "a's sample went to b's buffer");
    // Detach: a has no buffer, its records go nowhere (and are not lost).
    a.set_output(-1).unwrap();
    perf_uevent(403, b"x", 0).unwrap();
    assert!(records(&mut mb).is_empty());
    assert_eq!(a.event().counters().lost, 0);
    assert_eq!(a.event().counters().samples, 1);
}
