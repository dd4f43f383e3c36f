//! The `ktrigger` PMU: the running kernel's event as a trigger of the user-space core. Each
//! hit of the kernel's event on the thread (its sigtrap) counts once on the core's event, whose
//! overflow runs the core's path: a resume of the trace at a kernel event, a pause at another.
//! A SIGTRAP that is not a trigger's reaches the handler that was there before.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{sampling, touch_pages, trace_attr, trace_event};
use perfaux_abi::attr::{AttrFlags, AuxAction, PerfEventAttr};
use perfaux_abi::consts::*;
use perfaux_core::{EventFd, Target, perf_event_open_attr};
use perfaux_pmus::KTRIGGER_TYPE;

/// A trigger on the kernel's `page-faults` of this thread (user mode), every `period` faults.
fn page_fault_trigger(period: u64) -> PerfEventAttr {
    let mut a = sampling(KTRIGGER_TYPE, PERF_COUNT_SW_PAGE_FAULTS, period);
    a.config1 = u64::from(PERF_TYPE_SOFTWARE);
    a
}

fn open(a: &PerfEventAttr, group: i32) -> EventFd {
    perfaux_pmus::register();
    perf_event_open_attr(a, Target::current(), -1, group, 0).unwrap()
}

static OTHER_TRAPS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn other_trap(_sig: i32) {
    OTHER_TRAPS.fetch_add(1, Ordering::Relaxed);
}

/// Every fault of the thread is a hit (each one the kernel's sigtrap), and the count is the
/// kernel's; with a period of 10, every tenth; and a SIGTRAP the program raises itself still
/// reaches the one-shot handler it had before the trigger was opened, which is then reset;
/// then a paused trace resumes at a kernel event, the triggers' handler still in place.
#[test]
fn each_kernel_hit_counts_once_and_other_traps_reach_their_handler() {
    // The program's own handler, there before any trigger, one-shot (SA_RESETHAND, as the
    // runtime's crash handler is).
    // SAFETY: all-zero is a valid sigaction.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = other_trap as *const () as usize;
    sa.sa_flags = libc::SA_RESETHAND;
    // SAFETY: sigaction(2) with a plain extern "C" handler.
    unsafe { libc::sigaction(libc::SIGTRAP, &sa, std::ptr::null_mut()) };
    let t = open(&page_fault_trigger(1), -1);
    t.enable(0).unwrap();
    touch_pages(100);
    t.disable(0).unwrap();
    let n = t.event().count();
    // The mapping's own faults only: nothing else in between faults on this thread but for
    // a stray page of the allocator's.
    assert!((100..=103).contains(&n), "{n} hits for 100 faults");
    let t10 = open(&page_fault_trigger(10), -1);
    t10.enable(0).unwrap();
    touch_pages(100);
    t10.disable(0).unwrap();
    let n = t10.event().count();
    assert!(
        (10..=11).contains(&n),
        "{n} hits of period 10 for 100 faults"
    );
    // SAFETY: raise(3) of a signal with a handler installed.
    unsafe { libc::raise(libc::SIGTRAP) };
    assert_eq!(OTHER_TRAPS.load(Ordering::Relaxed), 1);
    // Reset on entry, as the kernel resets a one-shot handler: the program's action is the
    // default now, while the triggers' handler stays (the resume below would otherwise end
    // the process with the default action).
    assert!(!perfaux_pmus::kernel_trigger::chained());
    a_kernel_event_resumes_a_paused_trace();
}

/// A trace that starts paused is resumed by the kernel's event: the trigger in its group with
/// aux-action=resume, at the first fault. (Run from the test above: the SIGTRAP handler is
/// the process's, and that test sets what comes before it.)
fn a_kernel_event_resumes_a_paused_trace() {
    let mut ta = trace_attr();
    ta.aux_action = AuxAction::START_PAUSED;
    let t = trace_event(&ta, 4, false);
    let mut r = page_fault_trigger(1);
    r.aux_action = AuxAction::RESUME;
    r.flags |= AttrFlags::DISABLED;
    let trig = open(&r, t.ev.as_raw());
    t.ev.enable(0).unwrap();
    trig.enable(0).unwrap();
    assert!(t.ev.event().aux_paused(), "started paused");
    touch_pages(3);
    assert!(!t.ev.event().aux_paused(), "resumed at a fault");
    assert!(trig.event().count() >= 3);
}
