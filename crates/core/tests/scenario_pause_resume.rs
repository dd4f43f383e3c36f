//! Seed 003 (and its merged form, UPSTREAM 1(4)): the trace starts paused
//! (`aux_start_paused`), a probe at the start of a function resumes it
//! (`aux_resume`), a probe at its end pauses it (`aux_pause`): the decoded
//! call trace holds exactly the calls inside that window.

mod common;

use common::*;
use perfaux_abi::attr::AuxAction;
use perfaux_abi::consts::*;
use perfaux_core::pmus::PROBE_TYPE;
use perfaux_core::pmus::probe::{CONFIG1_ON_EXIT, resolve_probe};
use perfaux_core::{Target, perf_event_open_attr};

fn s3_before() {
    let _g = perfaux_swtrace::probe!("s3_before");
}
fn s3_inner() {
    let _g = perfaux_swtrace::probe!("s3_inner");
}
fn s3_window() {
    let _g = perfaux_swtrace::probe!("s3_window");
    s3_inner();
    s3_inner();
}
fn s3_after() {
    let _g = perfaux_swtrace::probe!("s3_after");
    s3_inner();
}

#[test]
fn trace_holds_exactly_the_calls_between_resume_and_pause() {
    let mut leader_attr = trace_attr();
    leader_attr.aux_action = AuxAction::START_PAUSED;
    let mut t = trace_event(&leader_attr, 4, false);
    assert!(t.ev.event().aux_paused());

    // The triggers are resolved by name before "s3_window" ever ran.
    let window = resolve_probe("s3_window");
    let mut resume = sampling(PROBE_TYPE, window, 1);
    resume.aux_action = AuxAction::RESUME;
    let mut pause = sampling(PROBE_TYPE, window, 1);
    pause.config1 = CONFIG1_ON_EXIT;
    pause.aux_action = AuxAction::PAUSE;
    let leader_fd = t.ev.as_raw();
    let me = Target::current();
    let r = perf_event_open_attr(&resume, me, -1, leader_fd, PERF_FLAG_FD_OUTPUT).unwrap();
    let p = perf_event_open_attr(&pause, me, -1, leader_fd, PERF_FLAG_FD_OUTPUT).unwrap();

    t.ev.enable(PERF_IOC_FLAG_GROUP).unwrap();
    s3_before();
    s3_window();
    s3_after();
    s3_before();
    s3_window();
    s3_before();
    t.ev.disable(PERF_IOC_FLAG_GROUP).unwrap();

    let aux = t.aux.aux_reader().unwrap().read().unwrap();
    let names = entered(aux.data);
    let expect = ["s3_window", "s3_inner", "s3_inner"].repeat(2);
    assert_eq!(names, expect, "only the calls inside the windows");
    assert!(t.ev.event().aux_paused(), "the last action was a pause");
    let c = t.ev.event().counters();
    assert_eq!((c.dropped_pause, c.dropped_resume), (0, 0));
    assert_eq!(r.event().count(), 2);
    assert_eq!(p.event().count(), 2);

    // Samples of both triggers, ITRACE_START and PERF_RECORD_AUX went to
    // the leader's buffer (FD_OUTPUT).
    let recs = records(&mut t.data);
    let kinds: Vec<u32> = recs.iter().map(|(h, _)| h.type_).collect();
    assert_eq!(
        kinds.iter().filter(|&&k| k == PERF_RECORD_SAMPLE).count(),
        4
    );
    assert_eq!(kinds.first(), Some(&PERF_RECORD_ITRACE_START));
    let aux_recs: Vec<_> = recs
        .iter()
        .filter(|(h, _)| h.type_ == PERF_RECORD_AUX)
        .collect();
    assert_eq!(aux_recs.len(), 1);
    let (_, rec) = aux_recs[0];
    assert_eq!(u64_at(rec, 8), 0, "aux_offset of the first transaction");
    assert_eq!(u64_at(rec, 16), aux.data.len() as u64, "aux_size");
    assert_eq!(u64_at(rec, 24), 0, "no flags in full-trace mode");
    // sample_id: TID, TIME, IDENTIFIER (last) = the leader's id.
    assert_eq!(u64_at(rec, rec.len() - 8), t.ev.id());
    assert_eq!(u32_at(rec, 32), std::process::id());
    assert_eq!(u32_at(rec, 36) as i32, perfaux_core::thread::gettid());
}

#[test]
fn pause_and_resume_from_a_trigger_without_buffer_do_nothing() {
    // perf_event_aux_pause: no ring buffer, nothing happens (the kernel's
    // ring_buffer_get fails).
    let mut leader_attr = trace_attr();
    leader_attr.aux_action = AuxAction::START_PAUSED;
    let l = perf_event_open_attr(&leader_attr, Target::current(), -1, -1, 0).unwrap();
    let mut resume = sampling(PROBE_TYPE, resolve_probe("s3_before"), 1);
    resume.aux_action = AuxAction::RESUME;
    let _r = perf_event_open_attr(&resume, Target::current(), -1, l.as_raw(), 0).unwrap();
    l.enable(PERF_IOC_FLAG_GROUP).unwrap();
    s3_before();
    assert!(l.event().aux_paused());
}
