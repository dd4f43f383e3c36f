//! The two recursion guards, provoked deterministically: a test AUX PMU
//! whose `snapshot_aux` and `stop(PERF_EF_PAUSE)` emit a uevent that fires
//! another sampler / trigger of the same AUX event, exactly what an NMI
//! hitting those critical sections does in the kernel.
//!
//! - `aux_in_sampling` (the AUX sampling path, perf_aux_sample_output): the nested sample
//!   carries size 0; the outer one its full data.
//! - `aux_in_pause_resume` (seed 003): the nested resume is dropped; perfaux
//!   counts it on the AUX event and process-wide.

mod common;

use std::cell::Cell;
use std::sync::Arc;

use common::*;
use perfaux_abi::ByteSink;
use perfaux_abi::attr::AuxAction;
use perfaux_abi::consts::*;
use perfaux_core::driver::{AuxArea, Pmu, PmuPrivate, ef, perf_pmu_register};
use perfaux_core::{Event, PmuCaps, Result, Target, perf_event_open_attr, perf_uevent};
use perfaux_pmus::UEVENT_TYPE;

thread_local! {
    static NEST_ON_SNAPSHOT: Cell<Option<u32>> = const { Cell::new(None) };
    static NEST_ON_PAUSE: Cell<Option<u32>> = const { Cell::new(None) };
}

struct GuardPmu;

impl Pmu for GuardPmu {
    fn name(&self) -> &'static str {
        "guard_test"
    }
    fn capabilities(&self) -> PmuCaps {
        PmuCaps::AUX | PmuCaps::AUX_PAUSE | PmuCaps::NO_NMI
    }
    fn event_init(&self, event: &Event) -> Result<PmuPrivate> {
        if event.attr().type_ != event.pmu_type() {
            return Err(perfaux_core::Error::new(
                perfaux_abi::errno::ENOENT,
                "not mine",
            ));
        }
        Ok(Box::new(()))
    }
    fn start(&self, _: &Event, _: u32) {}
    fn stop(&self, _: &Event, flags: u32) {
        if flags & ef::PAUSE != 0
            && let Some(t) = NEST_ON_PAUSE.with(Cell::take)
        {
            perf_uevent(t, b"nested", 0).unwrap();
        }
    }
    fn setup_aux(&self, _: &Event, _: &AuxArea, _: bool) -> Result<PmuPrivate> {
        Ok(Box::new(()))
    }
    fn has_snapshot_aux(&self) -> bool {
        true
    }
    fn snapshot_aux(&self, _: &Event, out: &mut dyn ByteSink, size: usize) -> usize {
        if let Some(t) = NEST_ON_SNAPSHOT.with(Cell::take) {
            perf_uevent(t, b"nested", 0).unwrap();
        }
        out.put(&vec![0xab; size]);
        size
    }
}

fn guard_type() -> u32 {
    static T: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *T.get_or_init(|| perf_pmu_register(Arc::new(GuardPmu)))
}

fn member(leader: &Traced, mut a: perfaux_abi::attr::PerfEventAttr) -> perfaux_core::EventFd {
    a.flags.remove(perfaux_abi::attr::AttrFlags::DISABLED);
    perf_event_open_attr(
        &a,
        Target::current(),
        -1,
        leader.ev.as_raw(),
        PERF_FLAG_FD_OUTPUT,
    )
    .unwrap()
}

#[test]
fn sample_inside_a_snapshot_gets_no_aux_data() {
    perfaux_pmus::register();
    let mut t = trace_event(&attr(guard_type(), 0), 1, true);
    let mut outer = sampling(UEVENT_TYPE, 100, 1);
    outer.sample_type = PERF_SAMPLE_AUX;
    outer.aux_sample_size = 64;
    let mut inner = outer;
    inner.config = 101;
    let o = member(&t, outer);
    let i = member(&t, inner);
    t.ev.enable(0).unwrap();
    NEST_ON_SNAPSHOT.with(|c| c.set(Some(101)));
    perf_uevent(100, b"outer", 0).unwrap();
    let recs = records(&mut t.data);
    let samples: Vec<_> = recs
        .iter()
        .filter(|(h, _)| h.type_ == PERF_RECORD_SAMPLE)
        .map(|(_, b)| b.clone())
        .collect();
    assert_eq!(samples.len(), 2);
    // The nested sample completes first (it nests inside the outer one's
    // reservation) but both are whole records.
    let sizes: Vec<u64> = samples.iter().map(|b| u64_at(b, 8)).collect();
    assert!(sizes.contains(&0) && sizes.contains(&64), "{sizes:?}");
    let full = samples.iter().find(|b| u64_at(b, 8) == 64).unwrap();
    assert!(full[16..80].iter().all(|&x| x == 0xab));
    assert_eq!(i.event().counters().aux_samples_empty, 1);
    assert_eq!(o.event().counters().aux_samples_empty, 0);
}

#[test]
fn resume_inside_a_pause_is_dropped_and_counted() {
    perfaux_pmus::register();
    let t = trace_event(&attr(guard_type(), 0), 1, true);
    let mut pause = sampling(UEVENT_TYPE, 200, 1);
    pause.aux_action = AuxAction::PAUSE;
    let mut resume = sampling(UEVENT_TYPE, 201, 1);
    resume.aux_action = AuxAction::RESUME;
    let _p = member(&t, pause);
    let _r = member(&t, resume);
    t.ev.enable(0).unwrap();
    NEST_ON_PAUSE.with(|c| c.set(Some(201)));
    perf_uevent(200, b"pause", 0).unwrap();
    let c = t.ev.event().counters();
    assert_eq!((c.dropped_pause, c.dropped_resume), (0, 1));
    assert!(
        t.ev.event().aux_paused(),
        "paused: the resume that was dropped did not count"
    );
    // A later resume outside the critical section works.
    perf_uevent(201, b"resume", 0).unwrap();
    assert!(!t.ev.event().aux_paused());
    let c = t.ev.event().counters();
    assert_eq!(
        (c.dropped_pause, c.dropped_resume),
        (0, 1),
        "a resume that got through is not counted as dropped"
    );
}
