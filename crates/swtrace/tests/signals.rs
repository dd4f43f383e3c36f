//! Signal handlers that enter probes (the trace's NMI): with real signals, and at a chosen
//! point inside a packet (writer module doc, "Signal safety").

use perfaux_swtrace::decode::{Event, SkipReason, decode};
use perfaux_swtrace::format::LostKind;
use perfaux_swtrace::{
    AuxMode, AuxRegion, HookTarget, Probe, ProbeEvent, ProbeId, WriterConfig, writer,
};

static MAIN: Probe = Probe::new("sig_main");
static LEAF: Probe = Probe::new("sig_leaf");
static IN_HANDLER: Probe = Probe::new("sig_handler");
static IN_HANDLER_LEAF: Probe = Probe::new("sig_handler_leaf");
static HOOKED: Probe = Probe::new("sig_hooked");

thread_local! {
    /// Handler runs on this thread (a const thread-local: fine to touch in a handler).
    static HANDLED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// The writer head the handler read (per thread: the tests run in parallel).
    static HANDLER_HEAD: std::cell::Cell<u64> = const { std::cell::Cell::new(u64::MAX) };
    /// Whether the handler pauses the writer (per thread, like the above).
    static PAUSE_IN_HANDLER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

extern "C" fn on_signal(_sig: libc::c_int) {
    HANDLED.with(|h| h.set(h.get() + 1));
    if let Some(h) = writer::aux_head() {
        HANDLER_HEAD.with(|c| c.set(h));
    }
    let _g = IN_HANDLER.enter();
    {
        let _l = IN_HANDLER_LEAF.enter();
    }
    if PAUSE_IN_HANDLER.with(|p| p.get()) {
        writer::pause();
    }
}

fn install_handler(sig: libc::c_int) {
    // SAFETY: an all-zero sigaction is a valid value (no flags, empty mask).
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    let handler: extern "C" fn(libc::c_int) = on_signal;
    sa.sa_sigaction = handler as libc::sighandler_t;
    sa.sa_flags = libc::SA_RESTART;
    // SAFETY: `on_signal` has the signature sa_handler expects and touches only
    // async-signal-safe state (atomics, const thread-locals, the writer's signal-safe paths).
    let rc = unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) };
    assert_eq!(rc, 0);
}

/// A POSIX timer that sends `sig` to the calling thread every `period_ns` (timer_create with
/// SIGEV_THREAD_ID: the signal interrupts this thread wherever it is).
struct ThreadTimer(libc::timer_t);

impl ThreadTimer {
    fn start(sig: libc::c_int, period_ns: i64) -> ThreadTimer {
        // SAFETY: an all-zero sigevent is a valid value.
        let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = sig;
        // SAFETY: gettid has no preconditions.
        sev.sigev_notify_thread_id = unsafe { libc::gettid() };
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: `sev` and `timer` are valid for the call; SIGEV_THREAD_ID reads the fields
        // set above.
        let rc = unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut timer) };
        assert_eq!(rc, 0);
        let period = libc::timespec {
            tv_sec: 0,
            tv_nsec: period_ns,
        };
        let spec = libc::itimerspec {
            it_interval: period,
            it_value: period,
        };
        // SAFETY: `timer` was just created; `spec` is valid for the call.
        let rc = unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) };
        assert_eq!(rc, 0);
        ThreadTimer(timer)
    }
}

impl Drop for ThreadTimer {
    fn drop(&mut self) {
        // SAFETY: the timer was created by `start` and is deleted once.
        unsafe { libc::timer_delete(self.0) };
    }
}

fn id(p: &'static Probe) -> u32 {
    p.id().unwrap().0
}

/// Checks the decoded stream is well nested: each EXIT closes the innermost open ENTER.
fn assert_well_nested(events: &[Event]) -> Vec<u32> {
    let mut stack = Vec::new();
    let mut entered = Vec::new();
    for e in events {
        match e {
            Event::Enter { id, depth, .. } => {
                assert_eq!(*depth as usize, stack.len(), "{e:?}");
                stack.push(*id);
                entered.push(*id);
            }
            Event::Exit { id, depth, .. } => {
                assert_eq!(stack.pop(), *id, "{e:?}");
                assert_eq!(*depth as usize, stack.len());
            }
            // Calls that returned while paused are closed by the SYNC at resume.
            Event::Sync { depth, .. } => {
                assert!(*depth as usize <= stack.len(), "{e:?}");
                stack.truncate(*depth as usize);
            }
            Event::Skipped { .. } => assert_not_skipped(e),
            _ => {}
        }
    }
    assert!(stack.is_empty());
    entered
}

#[test]
fn real_signals_during_tracing_never_tear_the_stream() {
    install_handler(libc::SIGUSR1);
    let (h, hl) = (id(&IN_HANDLER), id(&IN_HANDLER_LEAF));
    let mut aux = vec![0u8; 1 << 23];
    // SAFETY: `aux` outlives the writer, uninstalled below.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
    let mut cfg = WriterConfig::full_trace(region, None);
    cfg.sync_period = 128;
    writer::install(cfg).unwrap();
    let timer = ThreadTimer::start(libc::SIGUSR1, 20_000);
    let mut main_calls = 0u64;
    let start = std::time::Instant::now();
    // Until enough signals landed, the buffer is 3/4 full, or 10 s passed (a loaded machine
    // may run this thread rarely).
    while HANDLED.with(|c| c.get()) < 3000
        && writer::aux_head().unwrap() < (3 << 21)
        && start.elapsed() < std::time::Duration::from_secs(10)
    {
        let _m = MAIN.enter();
        for _ in 0..8 {
            let _l = LEAF.enter();
        }
        main_calls += 1;
        // Untraced work between calls, so that the signals land in every phase.
        for i in 0..100u32 {
            std::hint::black_box(i);
        }
    }
    drop(timer);
    let status = writer::uninstall().unwrap();
    assert!(!status.full_stopped, "the 8 MiB buffer filled");
    let events = decode(&aux[..status.aux_head as usize]);
    let entered = assert_well_nested(&events);
    let handled = HANDLED.with(|c| c.get());
    let traced_handler_calls = entered.iter().filter(|&&e| e == h).count() as u64;
    assert_eq!(
        entered.iter().filter(|&&e| e == hl).count() as u64,
        traced_handler_calls
    );
    // Every handler run is either in the trace (2 calls = 4 events) or counted lost.
    assert_eq!(
        traced_handler_calls * 4 + status.lost_nested,
        handled * 4,
        "handled {handled}"
    );
    let main = id(&MAIN);
    assert_eq!(
        entered.iter().filter(|&&e| e == main).count() as u64,
        main_calls
    );
    let lost_in_stream: u64 = events
        .iter()
        .filter_map(|e| match e {
            Event::Lost {
                kind: LostKind::Nested,
                count,
                ..
            } => Some(*count),
            _ => None,
        })
        .sum();
    assert!(lost_in_stream <= status.lost_nested);
    assert!(handled >= 20, "only {handled} signals handled");
}

fn on_full_raises(aux_head: u64, _needed: u64) -> Option<u64> {
    // The writer is inside a packet here: exactly the point a signal must not tear.
    // SAFETY: raise has no preconditions; SIGUSR2 has a handler installed.
    unsafe { libc::raise(libc::SIGUSR2) };
    Some(aux_head + 4096)
}

#[test]
fn a_signal_inside_a_packet_is_counted_and_its_pause_deferred() {
    install_handler(libc::SIGUSR2);
    let m = id(&MAIN);
    let mut aux = vec![0u8; 4096];
    // SAFETY: `aux` outlives the writer, uninstalled below.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), 4096) }.unwrap();
    let mut cfg = WriterConfig::full_trace(region, Some(on_full_raises));
    cfg.mode = AuxMode::FullTrace { limit: 300 };
    writer::install(cfg).unwrap();
    PAUSE_IN_HANDLER.with(|p| p.set(true));
    let before = HANDLED.with(|c| c.get());
    let mut rounds = 0;
    while HANDLED.with(|c| c.get()) == before {
        let _m = MAIN.enter();
        let _l = LEAF.enter();
        rounds += 1;
        assert!(rounds < 1000, "on_full never ran");
    }
    PAUSE_IN_HANDLER.with(|p| p.set(false));
    let st = writer::status().unwrap();
    assert!(
        st.paused,
        "the handler's pause was applied after the packet"
    );
    assert_eq!(
        st.lost_nested, 4,
        "the handler's two calls (4 events) were dropped"
    );
    assert!(writer::resume());
    {
        let _m = MAIN.enter();
    }
    let end = writer::uninstall().unwrap().aux_head;
    let events = decode(&aux[..end as usize]);
    assert_well_nested(&events);
    // The head the handler read was at a packet boundary.
    let head_in_handler = HANDLER_HEAD.with(|c| c.get());
    let boundaries: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Sync { offset, .. }
            | Event::Enter { offset, .. }
            | Event::Exit { offset, .. }
            | Event::Paused { offset, .. }
            | Event::Lost { offset, .. } => Some(*offset),
            _ => None,
        })
        .collect();
    assert!(
        boundaries.contains(&head_in_handler),
        "{head_in_handler} not a packet start"
    );
    // After the interrupted packet: PAUSED (deferred), then at resume LOST(Nested, 4), SYNC,
    // RESUMED.
    let i = events
        .iter()
        .position(|e| matches!(e, Event::Paused { .. }))
        .unwrap();
    assert!(
        matches!(
            events[i + 1],
            Event::Lost {
                kind: LostKind::Nested,
                count: 4,
                ..
            }
        ),
        "{:?}",
        &events[i..]
    );
    assert!(matches!(events[i + 2], Event::Sync { .. }));
    assert!(matches!(events[i + 3], Event::Resumed { .. }));
    assert!(matches!(events[i + 4], Event::Enter { id, depth: 0, .. } if id == m));
}

fn raise_from_hook(id: ProbeId, event: ProbeEvent) {
    if event == ProbeEvent::Enter
        && perfaux_swtrace::probe_by_id(id).is_some_and(|p| p.name() == "sig_hooked")
    {
        // SAFETY: raise has no preconditions; SIGURG has a handler installed by the test.
        unsafe { libc::raise(libc::SIGURG) };
    }
}

#[test]
fn a_signal_raised_from_a_hook_nests_cleanly() {
    install_handler(libc::SIGURG);
    perfaux_swtrace::set_hook_handler(raise_from_hook).unwrap();
    perfaux_swtrace::set_hook(HookTarget::Name("sig_hooked"), true).unwrap();
    let (m, hk, h, hl) = (
        id(&MAIN),
        id(&HOOKED),
        id(&IN_HANDLER),
        id(&IN_HANDLER_LEAF),
    );
    let mut aux = vec![0u8; 4096];
    // SAFETY: `aux` outlives the writer, uninstalled below.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), 4096) }.unwrap();
    writer::install(WriterConfig::full_trace(region, None)).unwrap();
    {
        let _m = MAIN.enter();
        let _k = HOOKED.enter();
    }
    let end = writer::uninstall().unwrap().aux_head;
    let events = decode(&aux[..end as usize]);
    let entered = assert_well_nested(&events);
    // The hook runs before the hooked probe's ENTER: the handler's calls come first, at the
    // depth the hooked call will have.
    assert_eq!(entered, [m, h, hl, hk]);
    let depths: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            Event::Enter { depth, .. } => Some(*depth),
            _ => None,
        })
        .collect();
    assert_eq!(depths, [0, 1, 2, 1]);
}

#[test]
fn every_drop_is_reported_in_the_stream_by_its_end() {
    install_handler(libc::SIGUSR2);
    let mut aux = vec![0u8; 4096];
    // SAFETY: `aux` outlives the writer, uninstalled below.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), 4096) }.unwrap();
    let mut cfg = WriterConfig::full_trace(region, Some(on_full_raises));
    cfg.mode = AuxMode::FullTrace { limit: 300 };
    writer::install(cfg).unwrap();
    let before = HANDLED.with(|c| c.get());
    while HANDLED.with(|c| c.get()) == before {
        let _m = MAIN.enter();
    }
    let st = writer::uninstall().unwrap();
    assert_eq!(st.lost_nested, 4);
    let events = decode(&aux[..st.aux_head as usize]);
    // Reported by the next SYNC or, when none came, just before STOPPED.
    let reported: u64 = events
        .iter()
        .filter_map(|e| match e {
            Event::Lost {
                kind: LostKind::Nested,
                count,
                ..
            } => Some(*count),
            _ => None,
        })
        .sum();
    assert_eq!(reported, 4);
    assert!(matches!(events.last(), Some(Event::Stopped { .. })));
}

thread_local! {
    /// The region the reinstalling handler uses (base, size) and the head it continues from.
    static CHURN_REGION: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
    static CHURN_HEAD: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Signals seen and control calls that took effect (uninstall, install, pause, resume).
    static CHURN_SIGNALS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static CHURN_DONE: std::cell::Cell<[u64; 4]> = const { std::cell::Cell::new([0; 4]) };
    /// Whether the writers this thread installs follow calls while paused.
    static CHURN_TRACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Cycles through uninstall, install (continuing the stream where the last one stopped),
/// pause and resume, one per signal: the core's pmu::stop/start landing anywhere.
extern "C" fn churn(_sig: libc::c_int) {
    let n = CHURN_SIGNALS.with(|c| {
        c.set(c.get() + 1);
        c.get()
    });
    let step = (n % 4) as usize;
    let done = match step {
        0 => match writer::uninstall() {
            Ok(st) => {
                CHURN_HEAD.with(|h| h.set(st.aux_head));
                true
            }
            Err(_) => false,
        },
        1 => {
            let (base, size) = CHURN_REGION.with(|r| r.get());
            // SAFETY: the test's buffer outlives the writer (the test removes it before
            // dropping the buffer) and nothing else writes it.
            let region = unsafe { AuxRegion::new(base as *mut u8, size) }.unwrap();
            let mut cfg = WriterConfig::full_trace(region, None);
            cfg.aux_head = CHURN_HEAD.with(|h| h.get());
            cfg.mode = AuxMode::FullTrace { limit: size as u64 };
            cfg.sync_period = 128;
            cfg.track_paused = CHURN_TRACK.with(|t| t.get());
            writer::install(cfg).is_ok()
        }
        2 => writer::pause(),
        _ => writer::resume(),
    };
    if done {
        CHURN_DONE.with(|d| {
            let mut v = d.get();
            v[step] += 1;
            d.set(v);
        });
    }
}

/// Randomized (by timing) form of the writer's signal-safety argument (module doc, "Signal
/// safety"): a timer signal every 20 µs uninstalls, reinstalls, pauses and resumes the writer
/// wherever the thread is in its traced calls. Nothing may crash or write outside the granted
/// space, and the stream must decode with not one byte skipped (no torn, corrupt or cut
/// packet) and well nested; drops are fine (they are counted in LOST packets).
#[test]
fn writer_churned_from_signal_handlers_keeps_a_decodable_stream() {
    churn_from_signal_handlers(false);
}

/// The same with writers that follow calls while paused (`track_paused`): the paused path
/// then runs inside the busy section, and the SYNC at each resume lists the calls opened
/// while paused.
#[test]
fn writer_tracking_paused_calls_churned_from_signal_handlers_keeps_a_decodable_stream() {
    churn_from_signal_handlers(true);
}

fn churn_from_signal_handlers(track_paused: bool) {
    const SIZE: usize = 1 << 23;
    CHURN_TRACK.with(|t| t.set(track_paused));
    let mut aux = vec![0u8; SIZE];
    CHURN_REGION.with(|r| r.set((aux.as_mut_ptr() as usize, SIZE)));
    // SAFETY: an all-zero sigaction is valid (no flags, empty mask).
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    let handler: extern "C" fn(libc::c_int) = churn;
    sa.sa_sigaction = handler as libc::sighandler_t;
    sa.sa_flags = libc::SA_RESTART;
    // SAFETY: `churn` has the signature sa_handler expects and only uses const thread-locals and
    // the writer's control calls on this thread's already-created state.
    let rc = unsafe { libc::sigaction(libc::SIGPROF, &sa, std::ptr::null_mut()) };
    assert_eq!(rc, 0);
    // SAFETY: `aux` outlives the writer, removed below.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), SIZE) }.unwrap();
    let mut cfg = WriterConfig::full_trace(region, None);
    cfg.sync_period = 128;
    cfg.track_paused = track_paused;
    writer::install(cfg).unwrap();
    let timer = ThreadTimer::start(libc::SIGPROF, 20_000);
    let start = std::time::Instant::now();
    while CHURN_SIGNALS.with(|c| c.get()) < 2000
        && CHURN_HEAD.with(|h| h.get()) < (SIZE as u64 / 4) * 3
        && writer::aux_head().unwrap_or(0) < (SIZE as u64 / 4) * 3
        && start.elapsed() < std::time::Duration::from_secs(10)
    {
        let _m = MAIN.enter();
        for _ in 0..8 {
            let _l = LEAF.enter();
        }
        for i in 0..50u32 {
            std::hint::black_box(i);
        }
    }
    drop(timer);
    let end = match writer::uninstall() {
        Ok(st) => st.aux_head,
        Err(_) => CHURN_HEAD.with(|h| h.get()),
    };
    let signals = CHURN_SIGNALS.with(|c| c.get());
    let done = CHURN_DONE.with(|d| d.get());
    assert!(signals >= 20, "only {signals} signals handled");
    assert!(done[0] >= 1 && done[1] >= 1, "no churn: {done:?}");
    let events = decode(&aux[..end as usize]);
    assert_consistent_across_streams(&events);
    // Every install started a stream with a SYNC, every uninstall ended one with STOPPED.
    let stopped = events
        .iter()
        .filter(|e| matches!(e, Event::Stopped { .. }))
        .count() as u64;
    assert!(stopped >= done[0], "{stopped} STOPPED for {done:?}");
}

/// Checks each EXIT closes the innermost call the stream knows of: from ENTERs since the last
/// SYNC, and at the depth each SYNC states (a SYNC at resume lists the calls open at the
/// pause, and with `track_paused` also those opened while paused; a SYNC that starts a new
/// stream after STOPPED restarts from its own depth).
fn assert_consistent_across_streams(events: &[Event]) {
    let mut stack: Vec<Option<u32>> = Vec::new();
    for e in events {
        match e {
            // The SYNC is the truth (decode.rs, apply_sync): its depth and its listed frames
            // replace what came before, which may differ at the same depth when calls opened
            // and closed unwritten while the writer was paused. Event::Sync carries the depth
            // only, so the ids of the calls open at a SYNC are forgotten.
            Event::Sync { depth, .. } => {
                stack.clear();
                stack.resize(*depth as usize, None);
            }
            Event::Enter { id, depth, .. } => {
                assert_eq!(*depth as usize, stack.len(), "{e:?}");
                stack.push(Some(*id));
            }
            Event::Exit { id, depth, .. } => {
                let open = stack.pop();
                assert!(open.is_some(), "EXIT with no open call: {e:?}");
                if let Some(Some(known)) = open {
                    assert_eq!(*id, Some(known), "{e:?}");
                }
                assert_eq!(*depth as usize, stack.len(), "{e:?}");
            }
            Event::Skipped { .. } => assert_not_skipped(e),
            _ => {}
        }
    }
}

/// A window that ends at the writer's final head (a packet boundary, written by the writer
/// itself, never overwritten: full-trace mode) holds no bytes the decoder may skip: no NoSync
/// (every stream starts with a SYNC), no Corrupt (a torn packet), no Truncated (the head is
/// stored after the packet's bytes, so the window cannot end inside one), no Gap (one
/// window). Any of them is the tearing these tests look for.
fn assert_not_skipped(e: &Event) {
    if let Event::Skipped { reason, offset, .. } = e {
        let what = match reason {
            SkipReason::NoSync => "bytes before the first SYNC",
            SkipReason::Corrupt(_) => "a packet that does not parse (torn)",
            SkipReason::Truncated => "a packet cut at the final head",
            SkipReason::Gap => "a gap in one window",
            _ => "bytes not decoded",
        };
        panic!("torn stream at {offset}: {what}: {e:?}");
    }
}
