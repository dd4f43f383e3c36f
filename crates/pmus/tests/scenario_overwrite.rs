//! Seed 004: the AUX area as a flight recorder. A trace event maps its AUX
//! area read-only (overwrite mode), traces a long run, is disabled, and the
//! snapshot (oldest first) decodes to the newest calls.

use perfaux_abi::attr::{AttrBuilder, AttrFlags};
use perfaux_abi::consts::*;
use perfaux_core::{Prot, Target, page_size, perf_event_open_attr};
use perfaux_pmus::SWTRACE_TYPE;
use perfaux_swtrace::decode;

fn step(i: u64) -> u64 {
    let _g = perfaux_swtrace::probe!("ow_step");
    i.wrapping_mul(3)
}

fn marker() {
    let _g = perfaux_swtrace::probe!("ow_marker_last");
}

#[test]
fn flight_recorder_snapshot_holds_the_newest_calls() {
    perfaux_pmus::register();
    let attr = AttrBuilder::new(SWTRACE_TYPE, 0)
        .flags(AttrFlags::SAMPLE_ID_ALL)
        .sample_type(PERF_SAMPLE_TID | PERF_SAMPLE_TIME)
        .build();
    let ev = perf_event_open_attr(&attr, Target::current(), -1, -1, 0).unwrap();
    let data = ev.mmap(0, 1 + 8, Prot::READ_WRITE).unwrap();
    let aux_pages = 4;
    let aux_off = (1 + 8) * page_size() as u64;
    data.set_aux_area(aux_off, (aux_pages * page_size()) as u64)
        .unwrap();
    let mut aux = ev
        .mmap(aux_off / page_size() as u64, aux_pages, Prot::READ_ONLY)
        .unwrap();
    ev.enable(0).unwrap();
    let mut acc = 0;
    for i in 0..20_000 {
        acc += step(i);
    }
    marker();
    ev.disable(0).unwrap();
    assert!(acc > 0);
    let r = aux.aux_reader().unwrap();
    let snap = r.read_snapshot(0).unwrap();
    assert!(snap.wrapped, "20000 calls wrap a 16 KiB area");
    let events = decode::decode(snap.data);
    let text = format!("{events:?}");
    assert!(text.contains("Enter"), "{text:.300}");
    let table = perfaux_swtrace::probe_table();
    let trace = perfaux_swtrace::CallTrace::new(&table, Default::default()).format(&events);
    let last = trace.lines().rfind(|l| l.contains("ow_")).unwrap();
    assert!(last.contains("ow_marker_last"), "{trace:.2000}");
}
