//! A real signal at each dangerous point of the writer (module doc, "Signal safety"): the
//! handler runs a control call exactly between two steps of the interrupted probe or control
//! call, as the kernel's NMI could. Each test arms a one-shot point whose closure raises
//! SIGUSR1 on this thread; the handler runs this thread's `ACTION`.

use std::cell::Cell;

use std::ptr;

use super::lifetime::{self, existing};
use super::*;
use crate::decode::{Event, decode};
use crate::probe::Probe;

static OUTER: Probe = Probe::new("sigtest_outer");
static CALL: Probe = Probe::new("sigtest_call");

/// Sentinel for AUX bytes the writer must not touch.
const UNTOUCHED: u8 = 0xEE;

thread_local! {
    /// What the SIGUSR1 handler does on this thread (the tests run on parallel threads).
    static ACTION: Cell<Option<fn()>> = const { Cell::new(None) };
    /// The result of the handler's control call.
    static RESULT: Cell<Option<Result<(), WriterError>>> = const { Cell::new(None) };
    /// The second region a handler may install (leaked: valid for the whole process).
    static SECOND: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

extern "C" fn on_sigusr1(_sig: libc::c_int) {
    if let Some(f) = ACTION.with(Cell::get) {
        f();
    }
}

fn raise_sigusr1() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: an all-zero sigaction is valid (no flags, empty mask).
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        let handler: extern "C" fn(libc::c_int) = on_sigusr1;
        sa.sa_sigaction = handler as libc::sighandler_t;
        // SAFETY: `on_sigusr1` has the signature sa_handler expects; it only touches const
        // thread-locals and the writer's control calls.
        let rc = unsafe { libc::sigaction(libc::SIGUSR1, &sa, ptr::null_mut()) };
        assert_eq!(rc, 0);
    });
    // SAFETY: raise has no preconditions; the handler runs before it returns.
    let rc = unsafe { libc::raise(libc::SIGUSR1) };
    assert_eq!(rc, 0);
}

fn handler_uninstalls() {
    RESULT.with(|r| r.set(Some(uninstall().map(|_| ()))));
}

fn handler_pauses() {
    RESULT.with(|r| r.set(Some(pause().then_some(()).ok_or(WriterError::NotInstalled))));
}

fn handler_resumes() {
    RESULT.with(|r| {
        r.set(Some(
            resume().then_some(()).ok_or(WriterError::NotInstalled),
        ))
    });
}

fn handler_reinstalls() {
    let _ = uninstall();
    let (base, size) = SECOND.with(Cell::get);
    // SAFETY: SECOND is a leaked buffer of `size` bytes that nothing else writes.
    let region = unsafe { AuxRegion::new(base as *mut u8, size) }.unwrap();
    RESULT.with(|r| r.set(Some(install(WriterConfig::overwrite(region)))));
}

/// An overwrite-mode writer over a fresh sentinel-filled buffer, and the handler's action.
fn setup(action: fn()) -> Vec<u8> {
    setup_tracking(action, false)
}

/// As [`setup`], with `track_paused` set as given.
fn setup_tracking(action: fn(), track_paused: bool) -> Vec<u8> {
    let mut aux = vec![UNTOUCHED; 4096];
    // SAFETY: every test uninstalls before dropping `aux` (or leaks it).
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
    let mut config = WriterConfig::overwrite(region);
    config.track_paused = track_paused;
    install(config).unwrap();
    ACTION.with(|a| a.set(Some(action)));
    RESULT.with(|r| r.set(None));
    aux
}

fn handler_result() -> Result<(), WriterError> {
    ACTION.with(|a| a.set(None));
    RESULT.with(Cell::take).expect("the handler ran")
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| match e {
            Event::Sync { .. } => "sync",
            Event::Enter { .. } => "enter",
            Event::Exit { .. } => "exit",
            Event::Paused { .. } => "paused",
            Event::Resumed { .. } => "resumed",
            Event::Stopped { .. } => "stopped",
            Event::Lost { .. } => "lost",
            Event::Skipped { .. } => "skipped",
            Event::Tag { .. } => "tag",
        })
        .collect()
}

/// The trace PMU's stop in a signal handler: uninstall from a handler that lands after the
/// probe saw the writer and before it began its packet must not make the probe write through
/// the cleared base; the entry then goes untraced, and nothing is written after STOPPED.
#[test]
fn uninstall_before_an_entry_begins_its_packet() {
    CALL.id().unwrap();
    let aux = setup(handler_uninstalls);
    arm_point(Point::EnterBefore, raise_sigusr1);
    {
        let _g = CALL.enter();
    }
    assert_eq!(handler_result(), Ok(()));
    assert_eq!(status(), None, "the handler removed the writer");
    let end = aux.iter().rposition(|&b| b != UNTOUCHED).unwrap() + 1;
    assert_eq!(kinds(&decode(&aux[..end])), ["sync", "stopped"]);
}

/// The same at a return: the EXIT is not written after STOPPED.
#[test]
fn uninstall_before_an_exit_begins_its_packet() {
    CALL.id().unwrap();
    let aux = setup(handler_uninstalls);
    {
        let _g = CALL.enter();
        arm_point(Point::ExitBefore, raise_sigusr1);
    }
    assert_eq!(handler_result(), Ok(()));
    let end = aux.iter().rposition(|&b| b != UNTOUCHED).unwrap() + 1;
    assert_eq!(kinds(&decode(&aux[..end])), ["sync", "enter", "stopped"]);
}

/// Inside the busy section (mode not read yet) the handler's uninstall is refused as Busy and
/// the interrupted entry completes in the stream it began.
#[test]
fn uninstall_inside_an_entry_is_refused_busy() {
    CALL.id().unwrap();
    let aux = setup(handler_uninstalls);
    arm_point(Point::EnterInside, raise_sigusr1);
    {
        let _g = CALL.enter();
    }
    assert_eq!(handler_result(), Err(WriterError::Busy));
    let end = uninstall().unwrap().aux_head as usize;
    assert_eq!(
        kinds(&decode(&aux[..end])),
        ["sync", "enter", "exit", "stopped"]
    );
}

/// The same at a return.
#[test]
fn uninstall_inside_an_exit_is_refused_busy() {
    CALL.id().unwrap();
    let aux = setup(handler_uninstalls);
    {
        let _g = CALL.enter();
        arm_point(Point::ExitInside, raise_sigusr1);
    }
    assert_eq!(handler_result(), Err(WriterError::Busy));
    let end = uninstall().unwrap().aux_head as usize;
    assert_eq!(
        kinds(&decode(&aux[..end])),
        ["sync", "enter", "exit", "stopped"]
    );
}

/// A pause landing before an entry begins: the entry is not written after PAUSED (format
/// doc: no packets until RESUMED), and the SYNC at resume lists the call opened meanwhile, so
/// its EXIT closes it.
#[test]
fn pause_before_an_entry_begins_keeps_paused_silent() {
    CALL.id().unwrap();
    let aux = setup(handler_pauses);
    arm_point(Point::EnterBefore, raise_sigusr1);
    {
        let _g = CALL.enter();
        assert_eq!(handler_result(), Ok(()));
        assert!(resume());
    }
    let end = uninstall().unwrap().aux_head as usize;
    let events = decode(&aux[..end]);
    assert_eq!(
        kinds(&events),
        ["sync", "paused", "sync", "resumed", "exit", "stopped"]
    );
    let call = CALL.id().unwrap().0;
    assert!(
        matches!(events[2], Event::Sync { depth: 1, .. }),
        "{events:?}"
    );
    assert!(
        matches!(events[4], Event::Exit { id: Some(i), depth: 0, .. } if i == call),
        "{events:?}"
    );
}

/// Uninstall and install of another region before an entry begins: the entry goes into the
/// new stream (after its SYNC), and so does its exit; the old region gets nothing after STOPPED.
#[test]
fn reinstall_before_an_entry_begins_writes_the_new_stream() {
    CALL.id().unwrap();
    let second: &'static mut [u8] = Box::leak(vec![UNTOUCHED; 4096].into_boxed_slice());
    SECOND.with(|s| s.set((second.as_mut_ptr() as usize, second.len())));
    let aux = setup(handler_reinstalls);
    arm_point(Point::EnterBefore, raise_sigusr1);
    {
        let _g = CALL.enter();
    }
    assert_eq!(handler_result(), Ok(()));
    let end = uninstall().unwrap().aux_head as usize;
    let old_end = aux.iter().rposition(|&b| b != UNTOUCHED).unwrap() + 1;
    assert_eq!(kinds(&decode(&aux[..old_end])), ["sync", "stopped"]);
    assert_eq!(
        kinds(&decode(&second[..end])),
        ["sync", "enter", "exit", "stopped"]
    );
}

/// A control call interrupted just before its busy section by a handler that removes the
/// writer: the interrupted pause finds no writer and writes nothing.
#[test]
fn uninstall_before_a_pause_begins() {
    let aux = setup(handler_uninstalls);
    arm_point(Point::ControlBefore, raise_sigusr1);
    assert!(!pause());
    assert_eq!(handler_result(), Ok(()));
    let end = aux.iter().rposition(|&b| b != UNTOUCHED).unwrap() + 1;
    assert_eq!(kinds(&decode(&aux[..end])), ["sync", "stopped"]);
}

/// The same for uninstall itself: the handler's uninstall wins, the interrupted one reports
/// that there is no writer left (and writes no second STOPPED through the cleared base).
#[test]
fn uninstall_before_an_uninstall_begins() {
    let aux = setup(handler_uninstalls);
    arm_point(Point::ControlBefore, raise_sigusr1);
    assert_eq!(uninstall(), Err(WriterError::NotInstalled));
    assert_eq!(handler_result(), Ok(()));
    let end = aux.iter().rposition(|&b| b != UNTOUCHED).unwrap() + 1;
    assert_eq!(kinds(&decode(&aux[..end])), ["sync", "stopped"]);
}

/// A call opened under a paused writer that follows paused calls (`track_paused`), whose
/// entry is interrupted before it begins by a resume: whichever side of the SYNC the push
/// lands, the EXIT closes a call the decoder knows.
#[test]
fn resume_before_a_paused_entry_begins_keeps_the_stack_consistent() {
    OUTER.id().unwrap();
    CALL.id().unwrap();
    let aux = setup_tracking(handler_resumes, true);
    let _o = OUTER.enter();
    assert!(pause());
    arm_point(Point::EnterBefore, raise_sigusr1);
    {
        let _g = CALL.enter();
    }
    assert_eq!(handler_result(), Ok(()));
    drop(_o);
    let end = uninstall().unwrap().aux_head as usize;
    let events = decode(&aux[..end]);
    let (outer, call) = (OUTER.id().unwrap().0, CALL.id().unwrap().0);
    let exits: Vec<Option<u32>> = events
        .iter()
        .filter_map(|e| match e {
            Event::Exit { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(exits, [Some(call), Some(outer)], "{events:?}");
}

/// Without `track_paused` a paused thread is not observed: a resume that lands after a probe
/// read the empty slot leaves that call untracked, so neither its entry nor its return is in
/// the stream, and the SYNC at resume lists the call that was open at the pause.
#[test]
fn resume_after_an_untracked_entry_read_the_slot_leaves_the_call_out() {
    OUTER.id().unwrap();
    CALL.id().unwrap();
    let aux = setup(handler_resumes);
    let _o = OUTER.enter();
    assert!(pause());
    arm_point(Point::ProbeSlotRead, raise_sigusr1);
    {
        let _g = CALL.enter();
        assert_eq!(handler_result(), Ok(()));
    }
    drop(_o);
    let end = uninstall().unwrap().aux_head as usize;
    let events = decode(&aux[..end]);
    assert_eq!(
        kinds(&events),
        [
            "sync", "enter", "paused", "sync", "resumed", "exit", "stopped"
        ],
        "{events:?}"
    );
    let outer = OUTER.id().unwrap().0;
    assert!(
        matches!(events[3], Event::Sync { depth: 1, .. }),
        "{events:?}"
    );
    assert!(
        matches!(events[5], Event::Exit { id: Some(i), depth: 0, .. } if i == outer),
        "{events:?}"
    );
}

/// A resume landing after `disable_shadow_stack` decided that the paused thread is no longer
/// observed and before it cleared the slot: the decision and the store are one busy section,
/// so the resume is deferred to its end and the resumed writer is observed (the calls after
/// it are traced), where the store would otherwise hide the resumed writer.
#[test]
fn resume_inside_disable_shadow_stack_leaves_the_resumed_writer_observed() {
    CALL.id().unwrap();
    let aux = setup(handler_resumes);
    enable_shadow_stack();
    assert!(pause());
    arm_point(Point::SlotDecided, raise_sigusr1);
    disable_shadow_stack();
    assert_eq!(
        handler_result(),
        Ok(()),
        "the resume was deferred, not refused"
    );
    assert!(!status().unwrap().paused);
    assert!(!slot().is_null(), "a tracing writer is observed");
    {
        let _g = CALL.enter();
    }
    let end = uninstall().unwrap().aux_head as usize;
    assert_eq!(
        kinds(&decode(&aux[..end])),
        [
            "sync", "paused", "sync", "resumed", "enter", "exit", "stopped"
        ]
    );
}

/// A resume landing while the thread's ThreadTrace is released (thread exit): it finds no
/// ThreadTrace, so it cannot publish the slot over the memory about to be freed.
#[test]
fn resume_during_release_cannot_publish_the_slot() {
    let _aux = setup(handler_resumes);
    assert!(pause());
    arm_point(Point::Release, raise_sigusr1);
    lifetime::release_now();
    assert_eq!(handler_result(), Err(WriterError::NotInstalled));
    assert!(slot().is_null());
    assert!(existing().is_none());
}

thread_local! {
    /// Allocations the handler's install made, and its result.
    static HANDLER_ALLOCS: Cell<Option<(u64, Result<(), WriterError>)>> = const { Cell::new(None) };
}

fn handler_installs_first() {
    let (base, size) = SECOND.with(Cell::get);
    // SAFETY: SECOND is a leaked buffer of `size` bytes that nothing else writes.
    let region = unsafe { AuxRegion::new(base as *mut u8, size) }.unwrap();
    let config = WriterConfig::overwrite(region);
    let before = crate::test_alloc::allocations();
    let r = install(config);
    let made = crate::test_alloc::allocations() - before;
    HANDLER_ALLOCS.with(|h| h.set(Some((made, r))));
}

/// The core installs a writer from a signal handler on the traced thread (its remote call), and
/// it may be the thread's first: making the thread's state there allocates nothing (the
/// handler may have interrupted malloc), and thread exit frees it.
#[test]
fn first_install_in_a_signal_handler_allocates_nothing_and_exit_frees_it() {
    CALL.id().unwrap();
    // The TSC rate is calibrated once per process, on the first install, and the key made:
    // the core does both at event_init, not here.
    let _ = crate::clock::tsc_rate();
    assert!(prepare(), "the key is one of the first 32");
    let second: &'static mut [u8] = Box::leak(vec![UNTOUCHED; 4096].into_boxed_slice());
    let (base, size) = (second.as_mut_ptr() as usize, second.len());
    let (tid, addr) = std::thread::spawn(move || {
        assert!(existing().is_none(), "a fresh thread has no state");
        SECOND.with(|s| s.set((base, size)));
        ACTION.with(|a| a.set(Some(handler_installs_first)));
        raise_sigusr1();
        ACTION.with(|a| a.set(None));
        let (allocations, r) = HANDLER_ALLOCS.with(Cell::take).expect("the handler ran");
        assert_eq!(r, Ok(()));
        assert_eq!(allocations, 0, "making the state in the handler allocated");
        {
            let _g = CALL.enter();
        }
        assert!(status().is_some());
        let t = existing().unwrap();
        (t.tid, t as *const ThreadTrace as usize)
        // The thread ends with the writer installed.
    })
    .join()
    .unwrap();
    assert!(
        lifetime::was_freed(tid, addr),
        "thread exit freed the state"
    );
    let events = decode(&second[..]);
    assert_eq!(kinds(&events)[..3], ["sync", "enter", "exit"]);
}
