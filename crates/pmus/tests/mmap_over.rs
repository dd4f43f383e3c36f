//! `EventFd::mmap_over`: a buffer over memory the caller provides (a recorder's shared memfd):
//! what the event writes is read through the caller's own mapping of that memory, and memory
//! of another layout is refused.

mod common;

use std::sync::Arc;

use common::*;
use perfaux_abi::attr::AttrFlags;
use perfaux_abi::consts::*;
use perfaux_abi::errno;
use perfaux_core::{Prot, Target, perf_event_open_attr, perf_uevent};
use perfaux_ring::{PerfMmap, RingLayout, RingMemory};

fn uevents_attr() -> perfaux_abi::attr::PerfEventAttr {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY);
    a.flags |= AttrFlags::UEVENTS | AttrFlags::SAMPLE_ID_ALL;
    a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID;
    a
}

#[test]
fn records_land_in_the_provided_shared_memory() {
    perfaux_pmus::register();
    let ev = perf_event_open_attr(&uevents_attr(), Target::current(), -1, -1, 0).unwrap();
    let mem = Arc::new(RingMemory::shared(RingLayout::new(2, 0).unwrap()).unwrap());
    let _m = ev
        .mmap_over(0, 1 + 2, Prot::READ_WRITE, mem.clone())
        .unwrap();
    ev.enable(0).unwrap();
    perf_uevent(42, b"into the recorder's memory", 0).unwrap();
    // The recorder's side: its own reader over the same memory, not the event's mapping.
    let mut reader = PerfMmap::new(mem);
    let recs: Vec<Vec<u8>> = reader
        .read_records()
        .unwrap()
        .map(|r| r.unwrap().bytes.to_vec())
        .collect();
    let uevents: Vec<&Vec<u8>> = recs
        .iter()
        .filter(|r| {
            u32::from_ne_bytes(r[..4].try_into().unwrap())
                == perfaux_abi::consts::ext::PERF_RECORD_UEVENT
        })
        .collect();
    assert_eq!(uevents.len(), 1, "{recs:?}");
    let body = &uevents[0][8..];
    assert_eq!(u32::from_ne_bytes(body[..4].try_into().unwrap()), 42);
    assert!(body.windows(26).any(|w| w == b"into the recorder's memory"));
}

#[test]
fn memory_of_another_layout_is_einval() {
    perfaux_pmus::register();
    let ev = perf_event_open_attr(&uevents_attr(), Target::current(), -1, -1, 0).unwrap();
    let mem = Arc::new(RingMemory::shared(RingLayout::new(4, 0).unwrap()).unwrap());
    let e = ev.mmap_over(0, 1 + 2, Prot::READ_WRITE, mem).err().unwrap();
    assert_eq!(e.errno, errno::EINVAL);
}
