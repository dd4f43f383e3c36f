//! Seed 002: uevents are delivered, with the seed's exact record bytes, to
//! every event with `attr.uevents` that observes the calling thread, and
//! to no other event.

mod common;

use common::*;
use perfaux_abi::attr::AttrFlags;
use perfaux_abi::consts::*;
use perfaux_core::{Prot, Target, perf_event_open_attr, perf_uevent, perfaux_uevent};
use perfaux_pmus::{UEVENT_AUX_TYPE, UEVENT_TYPE};

fn uevents_attr() -> perfaux_abi::attr::PerfEventAttr {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY);
    a.flags |= AttrFlags::UEVENTS | AttrFlags::SAMPLE_ID_ALL;
    a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID;
    a
}

fn drain(m: &mut perfaux_core::Mmap) -> Vec<Vec<u8>> {
    let r = m.data_reader().unwrap();
    r.read_records()
        .unwrap()
        .map(|r| r.unwrap().bytes.to_vec())
        .collect()
}

#[test]
fn uevent_records_reach_exactly_the_observing_events() {
    perfaux_pmus::register();
    let me = Target::current();
    let mine = perf_event_open_attr(&uevents_attr(), me, -1, -1, 0).unwrap();
    let mut mine_map = mine.mmap(0, 1 + 2, Prot::READ_WRITE).unwrap();
    mine.enable(0).unwrap();

    // Observes this thread but did not ask for uevents.
    let mut plain = uevents_attr();
    plain.flags.remove(AttrFlags::UEVENTS);
    let plain = perf_event_open_attr(&plain, me, -1, -1, 0).unwrap();
    let mut plain_map = plain.mmap(0, 1 + 2, Prot::READ_WRITE).unwrap();
    plain.enable(0).unwrap();

    // Asks for uevents but observes another thread.
    let (tx, rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        tx.send(perfaux_core::gettid()).unwrap();
        go_rx.recv().unwrap();
        perf_uevent(9, b"from the other thread", 0).unwrap();
    });
    let other = rx.recv().unwrap();
    let theirs = perf_event_open_attr(&uevents_attr(), Target::Thread(other), -1, -1, 0).unwrap();
    let mut their_map = theirs.mmap(0, 1 + 2, Prot::READ_WRITE).unwrap();
    theirs.enable(0).unwrap();

    perf_uevent(42, b"hello", 0).unwrap();
    let msg = b"message";
    // SAFETY: `msg` holds 7 readable bytes.
    let r = unsafe { perfaux_uevent(43, 7, msg.as_ptr().cast(), 0) };
    assert_eq!(r, 0);
    perf_uevent(44, &[], 0).unwrap();
    go_tx.send(()).unwrap();
    h.join().unwrap();

    let recs = drain(&mut mine_map);
    assert_eq!(recs.len(), 3);
    let pid = std::process::id();
    let tid = perfaux_core::gettid() as u32;
    let expect = |type_: u32, data: &[u8], rec: &[u8]| {
        let padded = data.len().next_multiple_of(8);
        let size = 8 + 8 + padded + 24;
        let mut want = Vec::new();
        want.extend_from_slice(&ext::PERF_RECORD_UEVENT.to_ne_bytes());
        want.extend_from_slice(&0u16.to_ne_bytes());
        want.extend_from_slice(&(size as u16).to_ne_bytes());
        want.extend_from_slice(&type_.to_ne_bytes());
        want.extend_from_slice(&(data.len() as u32).to_ne_bytes());
        want.extend_from_slice(data);
        want.resize(16 + padded, 0);
        want.extend_from_slice(&pid.to_ne_bytes());
        want.extend_from_slice(&tid.to_ne_bytes());
        // TIME is whatever the clock said; ID is the event's id.
        want.extend_from_slice(&rec[size - 16..size - 8]);
        want.extend_from_slice(&mine.id().to_ne_bytes());
        assert_eq!(rec, &want[..], "uevent type {type_}");
    };
    expect(42, b"hello", &recs[0]);
    expect(43, b"message", &recs[1]);
    expect(44, b"", &recs[2]);
    assert_eq!(mine.event().counters().lost, 0);

    assert!(
        drain(&mut plain_map).is_empty(),
        "no uevents without attr.uevents"
    );
    let theirs_recs = drain(&mut their_map);
    assert_eq!(theirs_recs.len(), 1, "only the other thread's own uevent");
    assert_eq!(u32_at(&theirs_recs[0], 8), 9);
}

#[test]
fn per_cpu_event_gets_uevents_of_threads_on_its_cpu() {
    perfaux_pmus::register();
    // Pin this thread to CPU 0, open a per-CPU event there.
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU 0 is below CPU_SETSIZE.
    unsafe { libc::CPU_SET(0, &mut set) };
    // SAFETY: pins only this thread; `set` is valid for its size.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    assert_eq!(r, 0);
    let ev = perf_event_open_attr(&uevents_attr(), Target::AnyThread, 0, -1, 0).unwrap();
    let mut m = ev.mmap(0, 1 + 2, Prot::READ_WRITE).unwrap();
    ev.enable(0).unwrap();
    perf_uevent(0x5eed, b"cpu0", 0).unwrap();
    let recs = drain(&mut m);
    assert!(recs.iter().any(|r| u32_at(r, 8) == 0x5eed));
}

#[test]
fn uevent_counting_event_samples_with_the_payload_as_raw() {
    perfaux_pmus::register();
    let mut a = sampling(UEVENT_TYPE, 77, 2);
    a.sample_type = PERF_SAMPLE_RAW | PERF_SAMPLE_PERIOD;
    let ev = perf_event_open_attr(&a, Target::current(), -1, -1, 0).unwrap();
    let mut m = ev.mmap(0, 1 + 2, Prot::READ_WRITE).unwrap();
    ev.enable(0).unwrap();
    for i in 0..5u8 {
        perf_uevent(77, &[i; 3], 0).unwrap();
        perf_uevent(78, &[9; 3], 0).unwrap();
    }
    assert_eq!(ev.event().count(), 5);
    let recs = drain(&mut m);
    assert_eq!(recs.len(), 2, "period 2: samples at the 2nd and 4th");
    for (r, i) in recs.iter().zip([1u8, 3]) {
        assert_eq!(u64_at(r, 8), 2, "PERIOD");
        // RAW: u32 size (padded: 4 + 4 = 8), data, zero pad.
        assert_eq!(u32_at(r, 16), 4);
        assert_eq!(&r[20..24], &[i, i, i, 0]);
    }
}

#[test]
fn uevent_aux_pmu_logs_into_its_aux_area() {
    perfaux_pmus::register();
    let ev = perf_event_open_attr(&attr(UEVENT_AUX_TYPE, 0), Target::current(), -1, -1, 0).unwrap();
    let mut t = map_trace(ev, 1, false);
    t.ev.enable(0).unwrap();
    perf_uevent(5, b"abc", 0).unwrap();
    let aux = t.aux.aux_reader().unwrap().read().unwrap();
    assert_eq!(aux.data.len(), 16);
    assert_eq!(u32_at(aux.data, 0), 5);
    assert_eq!(u32_at(aux.data, 4), 3);
    assert_eq!(&aux.data[8..11], b"abc");
    let recs = records(&mut t.data);
    let aux_rec = recs
        .iter()
        .find(|(h, _)| h.type_ == PERF_RECORD_AUX)
        .unwrap();
    assert_eq!((u64_at(&aux_rec.1, 8), u64_at(&aux_rec.1, 16)), (0, 16));
}

/// A uevent whose record finds the data area full is refused with ENOSPC (C: -1 and errno)
/// and counted lost; every call that returned 0 has its record in the buffer, and the loss
/// reaches the consumer as a PERF_RECORD_LOST of exactly the refused calls once there is room.
#[test]
fn a_uevent_that_finds_no_room_fails_with_enospc_and_is_counted() {
    perfaux_pmus::register();
    let ev = perf_event_open_attr(&uevents_attr(), Target::current(), -1, -1, 0).unwrap();
    // Two data pages: the ring fills long before 500 records of 64 bytes.
    let mut m = ev.mmap(0, 1 + 2, Prot::READ_WRITE).unwrap();
    ev.enable(0).unwrap();
    let (mut accepted, mut refused) = (0u32, 0u32);
    for i in 0..500u32 {
        let payload = i.to_ne_bytes();
        let r = if i % 2 == 0 {
            perf_uevent(50, &payload, 0).map_err(|e| e.errno)
        } else {
            // SAFETY: `payload` holds 4 readable bytes.
            match unsafe { perfaux_uevent(50, 4, payload.as_ptr().cast(), 0) } {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error().raw_os_error().unwrap()),
            }
        };
        match r {
            Ok(()) => accepted += 1,
            Err(e) => {
                assert_eq!(e, perfaux_abi::errno::ENOSPC, "uevent {i}");
                refused += 1;
            }
        }
    }
    assert!(
        accepted > 0 && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
    assert_eq!(ev.event().counters().lost, u64::from(refused));
    let recs = drain(&mut m);
    let written: Vec<u32> = recs
        .iter()
        .filter(|r| u32_at(r, 0) == ext::PERF_RECORD_UEVENT)
        .map(|r| u32_at(r, 16))
        .collect();
    assert_eq!(
        written.len() as u32,
        accepted,
        "every accepted uevent is in the buffer"
    );
    assert_eq!(
        written,
        (0..accepted).collect::<Vec<_>>(),
        "the first ones, in order"
    );
    // With room again, the next record carries the count.
    perf_uevent(51, b"after", 0).unwrap();
    let recs = drain(&mut m);
    assert_eq!(recs.len(), 2);
    assert_eq!(u32_at(&recs[0], 0), PERF_RECORD_LOST);
    assert_eq!(u64_at(&recs[0], 16), u64::from(refused));
    assert_eq!(u32_at(&recs[1], 8), 51);
}
