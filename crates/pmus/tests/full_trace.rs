//! Full-trace mode (AUX mapped read-write): the writer fills the space the
//! consumer gave back, each AUX transaction ends in a PERF_RECORD_AUX, and
//! when no space is left the event is disabled (pending disable) and the
//! consumer woken, as `perf_aux_output_begin` does; re-enabling after the
//! consumer read the data resumes tracing. Overwrite mode marks its
//! records with PERF_AUX_FLAG_OVERWRITE.

mod common;

use common::*;
use perfaux_abi::consts::*;
use perfaux_core::EventState;

fn ft_call(i: u64) -> u64 {
    let _g = perfaux_swtrace::probe!("ft_call");
    i + 1
}

fn aux_records(t: &mut Traced) -> Vec<(u64, u64, u64)> {
    records(&mut t.data)
        .into_iter()
        .filter(|(h, _)| h.type_ == PERF_RECORD_AUX)
        .map(|(_, b)| (u64_at(&b, 8), u64_at(&b, 16), u64_at(&b, 24)))
        .collect()
}

#[test]
fn full_area_disables_the_event_until_the_consumer_reads() {
    perfaux_pmus::register();
    let mut t = trace_event(&trace_attr(), 1, false);
    t.ev.enable(0).unwrap();
    let mut acc = 0;
    for i in 0..10_000 {
        acc += ft_call(i);
    }
    assert!(acc > 0);
    assert_eq!(t.ev.event().state(), EventState::Off, "pending disable");
    let got = t.aux.aux_reader().unwrap().read().unwrap().data.len() as u64;
    assert!(got > 3000 && got <= 4096, "{got}");
    let recs = aux_records(&mut t);
    assert!(!recs.is_empty());
    assert_eq!(
        recs.iter().map(|r| r.1).sum::<u64>(),
        got,
        "AUX records cover the data"
    );
    assert!(recs.iter().all(|r| r.2 & PERF_AUX_FLAG_OVERWRITE == 0));
    // Offsets follow each other.
    let mut at = 0;
    for r in &recs {
        assert_eq!(r.0, at);
        at += r.1;
    }

    // The consumer gave the space back: re-enable, trace more.
    t.ev.enable(0).unwrap();
    assert_eq!(t.ev.event().state(), EventState::Active);
    for i in 0..10 {
        acc += ft_call(i);
    }
    assert!(acc > 10);
    t.ev.disable(0).unwrap();
    let more = t.aux.aux_reader().unwrap().read().unwrap();
    assert_eq!(more.offset, got);
    assert_eq!(entered(more.data), vec!["ft_call"; 10]);
}

#[test]
fn overwrite_records_carry_the_overwrite_flag() {
    perfaux_pmus::register();
    let mut t = trace_event(&trace_attr(), 1, true);
    t.ev.enable(0).unwrap();
    for i in 0..10_000 {
        ft_call(i);
    }
    t.ev.disable(0).unwrap();
    let recs = aux_records(&mut t);
    assert_eq!(recs.len(), 1);
    let (offset, size, flags) = recs[0];
    assert_eq!(flags, PERF_AUX_FLAG_OVERWRITE);
    assert_eq!(size, 4096, "a wrapped area reports its whole size");
    let head = t.aux.aux_reader().unwrap().aux_head();
    assert_eq!(
        offset, head,
        "mainline: aux_offset is the new aux_head in overwrite mode"
    );
}
