//! Full-trace mode when the AUX area fills: the writer asks for space (the PMU's
//! perf_aux_output_end/begin with a consumer that drains), and without it stops, counts and
//! reports what it lost.

mod common;

use common::*;
use perfaux_swtrace::decode::{Event, decode};
use perfaux_swtrace::format::LostKind;
use perfaux_swtrace::writer;
use perfaux_swtrace::{AuxRegion, Probe, WriterConfig};

static A: Probe = Probe::new("fs_a");
static B: Probe = Probe::new("fs_b");

thread_local! {
    static CONSUMER: std::cell::RefCell<Consumer> = const { std::cell::RefCell::new(Consumer { base: std::ptr::null(), size: 0, tail: 0, out: Vec::new(), calls: 0 }) };
}

struct Consumer {
    base: *const u8,
    size: usize,
    tail: u64,
    out: Vec<u8>,
    calls: u32,
}

impl Consumer {
    fn drain_to(&mut self, head: u64) {
        for p in self.tail..head {
            let at = self.base.wrapping_add(p as usize & (self.size - 1));
            // SAFETY: base..base+size is the test's live AUX buffer; the index is masked into it.
            self.out.push(unsafe { *at });
        }
        self.tail = head;
    }
}

/// perf_aux_output_end + the consumer reading everything + perf_aux_output_begin with the whole
/// area as space again.
fn on_full_drain(aux_head: u64, _needed: u64) -> Option<u64> {
    CONSUMER.with(|c| {
        let mut c = c.borrow_mut();
        c.drain_to(aux_head);
        c.calls += 1;
        Some(aux_head + c.size as u64)
    })
}

fn on_full_stop(_aux_head: u64, _needed: u64) -> Option<u64> {
    None
}

#[test]
fn full_trace_on_full_grants_space_and_nothing_is_lost() {
    register_pool();
    let calls: Vec<Call> = (0..300)
        .map(|i| Call {
            probe: i % 20,
            children: vec![],
        })
        .collect();
    let mut want = Vec::new();
    expected(&calls, 0, &mut want);
    let size = 512usize;
    let mut aux = vec![0u8; size];
    CONSUMER.with(|c| {
        *c.borrow_mut() = Consumer {
            base: aux.as_ptr(),
            size,
            tail: 0,
            out: Vec::new(),
            calls: 0,
        }
    });
    // SAFETY: `aux` outlives the writer.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), size) }.unwrap();
    let mut cfg = WriterConfig::full_trace(region, Some(on_full_drain));
    cfg.sync_period = 128;
    writer::install(cfg).unwrap();
    run(&calls);
    let status = writer::uninstall().unwrap();
    let (stream, on_full_calls) = CONSUMER.with(|c| {
        let mut c = c.borrow_mut();
        c.drain_to(status.aux_head);
        (std::mem::take(&mut c.out), c.calls)
    });
    assert!(on_full_calls > 3, "on_full ran {on_full_calls} times");
    assert_eq!(status.lost_full, 0);
    let events = decode(&stream);
    assert_eq!(steps(&events), want);
    drop(aux);
}

#[test]
fn full_trace_without_space_stops_counts_and_reports_lost() {
    let size = 256usize;
    let mut aux = vec![0u8; size];
    // SAFETY: `aux` outlives the writer.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), size) }.unwrap();
    writer::install(WriterConfig::full_trace(region, Some(on_full_stop))).unwrap();
    let mut executed = 0u64;
    for _ in 0..200 {
        let _g = A.enter();
        executed += 2;
    }
    let st = writer::status().unwrap();
    assert!(st.full_stopped);
    assert!(st.aux_head <= size as u64, "never wrote past the limit");
    let first: Vec<u8> = aux[..st.aux_head as usize].to_vec();
    // The consumer read everything: the core grants the whole area again.
    writer::set_limit(st.aux_head + size as u64).unwrap();
    assert!(!writer::status().unwrap().full_stopped);
    for _ in 0..3 {
        let _g = B.enter();
        executed += 2;
    }
    let end = writer::uninstall().unwrap();
    let mut stream = first;
    stream.extend((st.aux_head..end.aux_head).map(|p| aux[p as usize & (size - 1)]));
    let events = decode(&stream);
    let lost: u64 = events
        .iter()
        .filter_map(|e| match e {
            Event::Lost {
                kind: LostKind::Full,
                count,
                ..
            } => Some(*count),
            _ => None,
        })
        .sum();
    assert_eq!(lost, st.lost_full);
    let written = steps(&events).len() as u64;
    assert_eq!(
        written + lost,
        executed,
        "every probe event is either written or counted lost"
    );
    // LOST is followed at once by a SYNC (format doc).
    let i = events
        .iter()
        .position(|e| matches!(e, Event::Lost { .. }))
        .unwrap();
    assert!(matches!(events[i + 1], Event::Sync { .. }));
}
