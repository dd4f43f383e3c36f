//! Seed 003 (and its merged form, mainline's aux_action, v6.13): the trace starts paused
//! (`aux_start_paused`), a probe at the start of a function resumes it
//! (`aux_resume`), a probe at its end pauses it (`aux_pause`): the decoded
//! call trace holds exactly the calls inside that window.

mod common;

use common::*;
use perfaux_abi::attr::AuxAction;
use perfaux_abi::consts::*;
use perfaux_core::{EventFd, Target, perf_event_open_attr};
use perfaux_pmus::PROBE_TYPE;
use perfaux_pmus::probe::{CONFIG1_ON_EXIT, resolve_probe};

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

/// The triggers in the trace event's group: resume at s3_window's entry,
/// pause at its return (resolved by name, possibly before s3_window ever
/// ran), their samples into the leader's buffer.
fn window_triggers(leader: &EventFd) -> (EventFd, EventFd) {
    let window = resolve_probe("s3_window");
    let mut resume = sampling(PROBE_TYPE, window, 1);
    resume.aux_action = AuxAction::RESUME;
    let mut pause = sampling(PROBE_TYPE, window, 1);
    pause.config1 = CONFIG1_ON_EXIT;
    pause.aux_action = AuxAction::PAUSE;
    let (leader_fd, me) = (leader.as_raw(), Target::current());
    let r = perf_event_open_attr(&resume, me, -1, leader_fd, PERF_FLAG_FD_OUTPUT).unwrap();
    let p = perf_event_open_attr(&pause, me, -1, leader_fd, PERF_FLAG_FD_OUTPUT).unwrap();
    (r, p)
}

#[test]
fn trace_holds_exactly_the_calls_between_resume_and_pause() {
    perfaux_pmus::register();
    let mut leader_attr = trace_attr();
    leader_attr.aux_action = AuxAction::START_PAUSED;
    let mut t = trace_event(&leader_attr, 4, false);
    assert!(t.ev.event().aux_paused());

    let (r, p) = window_triggers(&t.ev);

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
    assert_eq!(u32_at(rec, 36) as i32, perfaux_core::gettid());
}

#[test]
fn pause_and_resume_from_a_trigger_without_buffer_do_nothing() {
    perfaux_pmus::register();
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

fn s3_caller() {
    let _g = perfaux_swtrace::probe!("s3_caller");
    s3_window();
}

/// Opens the trace event with `config`, starts paused, resumes at
/// s3_window's entry and pauses at its return, calls it from s3_caller
/// (entered while paused), and returns each ENTER as `name@depth`.
fn window_inside_a_paused_caller(config: u64) -> Vec<String> {
    let mut leader_attr = trace_attr();
    leader_attr.config = config;
    leader_attr.aux_action = AuxAction::START_PAUSED;
    let mut t = trace_event(&leader_attr, 4, false);
    let _triggers = window_triggers(&t.ev);
    // Register the probes before tracing: a probe's first entry takes the
    // table lock, and gives that one entry up (untraced) when another test
    // thread holds the lock for too long; a lost s3_caller entry would
    // look like an untracked one.
    while ["s3_caller", "s3_window", "s3_inner"]
        .iter()
        .any(|n| perfaux_swtrace::lookup(n).is_empty())
    {
        s3_caller();
    }
    t.ev.enable(PERF_IOC_FLAG_GROUP).unwrap();
    s3_caller();
    t.ev.disable(PERF_IOC_FLAG_GROUP).unwrap();
    let aux = t.aux.aux_reader().unwrap().read().unwrap();
    let table = perfaux_swtrace::probe_table();
    perfaux_swtrace::decode(aux.data)
        .iter()
        .filter_map(|e| match e {
            perfaux_swtrace::Event::Enter { id, depth, .. } => {
                Some(format!("{}@{depth}", table.get(*id)?.name))
            }
            _ => None,
        })
        .collect()
}

/// By default a paused thread is not observed (as Intel PT knows nothing
/// of what ran while paused): the window's calls decode from depth 0.
#[test]
fn window_decodes_without_the_calls_opened_while_paused() {
    perfaux_pmus::register();
    assert_eq!(
        window_inside_a_paused_caller(0),
        ["s3_window@0", "s3_inner@1", "s3_inner@1"]
    );
}

/// `config` bit CONFIG_TRACK_PAUSED (`swtrace/track-paused/`): the writer
/// follows calls while paused, so the SYNC at the resume names s3_caller
/// and the window decodes at its real depth.
#[test]
fn track_paused_config_places_the_window_under_its_paused_caller() {
    perfaux_pmus::register();
    assert_eq!(
        window_inside_a_paused_caller(perfaux_pmus::swtrace::CONFIG_TRACK_PAUSED),
        ["s3_window@1", "s3_inner@2", "s3_inner@2"]
    );
}
