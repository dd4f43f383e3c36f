//! `task-clock` (`PERF_TYPE_SOFTWARE`, `PERF_COUNT_SW_TASK_CLOCK`): the CPU
//! time of one thread, in ns, sampled by a POSIX timer on the thread's CPU
//! clock that delivers a signal to that very thread
//! (`timer_create(CLOCK_THREAD_CPUTIME_ID-of-tid, SIGEV_THREAD_ID)`).
//!
//! The signal handler is this PMU's interrupt and the core's NMI: it runs
//! the whole overflow path (`__perf_event_overflow`, pause/resume, AUX
//! sampling, output) on the observed thread at an arbitrary point of its
//! execution, possibly in the middle of a trace packet or of another
//! record. That path takes no lock and allocates nothing.
//!
//! The handler finds its event through a slot table (the timer's
//! `sigev_value` holds the slot and a generation, so a signal still
//! pending after its event closed is ignored). The signal is
//! `SIGRTMIN + 7` ([`task_clock_signal`]). A frequency (`attr.freq`) is
//! turned into the period `NSEC_PER_SEC / sample_freq`, and periods are at
//! least 10 µs, as the kernel's `perf_swevent_init_hrtimer` does.
//!
//! A sampler's interrupt is the running kernel's own task-clock where the
//! kernel allows it ([`super::kernel_clock`]: its hrtimer, at the rate
//! `perf record -e task-clock` samples, each sample standing for one
//! `sample_period`); else the POSIX timer, which, unlike the kernel's
//! hrtimer, is checked at scheduler ticks: a period shorter than a tick
//! gives one sample per tick, whose period is the CPU time since the
//! previous sample (at least `sample_period`), so the periods add up to the
//! time counted.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};

use perfaux_abi::attr::AttrFlags;
use perfaux_abi::consts::PERF_SAMPLE_CALLCHAIN;
use perfaux_abi::errno;
use perfaux_swtrace::ProbeId;
use perfaux_swtrace::writer::{self, Frame};

use perfaux_core::driver::{
    Error, Event, EventState, PmuPrivate, Result, SampleData, Target, einval, perf_event_overflow,
};

use super::kernel_clock::{self, KernelClock, Source};
use super::signal_events::{EventSlots, ip_of};
use super::sw_counters::SwCounter;

/// Whether samplers take the kernel's task-clock as their interrupt where it is allowed.
static KERNEL_CLOCK: AtomicBool = AtomicBool::new(true);

/// Makes the samplers opened from now on take the kernel's task-clock as their interrupt where
/// the kernel allows it (`true`, the default), or always the POSIX CPU-time timer (`false`:
/// one sample per scheduler tick at most, what a process without `perf_event_open` gets).
pub fn use_kernel_clock(on: bool) {
    KERNEL_CLOCK.store(on, Ordering::Release);
}

/// The signal the timers deliver.
pub fn task_clock_signal() -> i32 {
    libc::SIGRTMIN() + 7
}

/// Sampling task-clocks (and sampling software counters) a process may
/// have at once; the kernel's limit is the fds.
const NSLOTS: usize = 4096;
const NO_TIMER: usize = usize::MAX;
/// The slot of a counting task-clock, which has no timer.
const NO_SLOT: usize = usize::MAX;
const MIN_PERIOD_NS: u64 = 10_000;

fn slots() -> &'static EventSlots {
    static S: OnceLock<EventSlots> = OnceLock::new();
    S.get_or_init(|| EventSlots::new(NSLOTS))
}

/// Per-event state.
pub(crate) struct TaskClock {
    /// The timer id, or [`NO_TIMER`] (glibc hands out id 0 too).
    timer: AtomicUsize,
    slot: usize,
    clockid: libc::clockid_t,
    period_ns: u64,
    /// Thread CPU time when the count last started, or -1 when stopped.
    base: AtomicI64,
    /// Time counted up to the last stop.
    acc: AtomicU64,
    /// `acc` at the last sample.
    sampled: AtomicU64,
    /// A software counter this timer polls; its count is not CPU time.
    counter: Option<SwCounter>,
    /// The kernel's task-clock, the interrupt instead of the timer.
    kernel: Option<KernelClock>,
}

/// `MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`: the CPU-time clock of any
/// thread of the process.
fn thread_cpu_clock(tid: i32) -> libc::clockid_t {
    ((!tid) << 3) | 6
}

fn now(clockid: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer; clock_gettime is async-signal-safe.
    let r = unsafe { libc::clock_gettime(clockid, &mut ts) };
    (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

fn install_handler() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // SAFETY: a zeroed sigaction is a valid starting value.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY: `sa.sa_mask` is a valid sigset_t to initialise.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: a valid signal number and an initialised sigaction.
        unsafe { libc::sigaction(task_clock_signal(), &sa, std::ptr::null_mut()) };
    });
}

pub(crate) fn event_init(event: &Event) -> Result<PmuPrivate> {
    let Target::Thread(tid) = event.target() else {
        return Err(einval(
            "task-clock counts one thread: needs a thread target",
        ));
    };
    if event.attr().sample_type & PERF_SAMPLE_CALLCHAIN != 0 {
        // Its callchains enable the thread's shadow stack by a remote call
        // (software.rs): make the writer's thread-state key here.
        writer::prepare();
    }
    let period_ns = if event.flag(AttrFlags::FREQ) {
        1_000_000_000u64
            .checked_div(event.attr().sample_freq())
            .map_or(0, |p| p.max(1))
    } else {
        event.attr().sample_period
    };
    let period_ns = if period_ns == 0 {
        0
    } else {
        period_ns.max(MIN_PERIOD_NS)
    };
    init(tid, period_ns, None)
}

/// A timer on `tid`'s CPU clock firing every `period_ns` (none for 0),
/// for a task-clock or, with `counter`, for a software counter it polls.
pub(crate) fn init(tid: i32, period_ns: u64, counter: Option<SwCounter>) -> Result<PmuPrivate> {
    // Only a sampler has a timer, and only a timer needs a slot: counting
    // task-clocks are as many as the fds allow, as in the kernel.
    let (slot, key) = if period_ns == 0 {
        (NO_SLOT, 0)
    } else {
        slots()
            .claim()
            .ok_or_else(|| Error::new(errno::ENOSPC, "task-clock: all timer slots in use"))?
    };
    install_handler();
    let clockid = thread_cpu_clock(tid);
    let mut timer_id = NO_TIMER;
    let kernel = (period_ns != 0 && counter.is_none() && KERNEL_CLOCK.load(Ordering::Acquire))
        .then(|| KernelClock::open(tid, period_ns, key))
        .flatten();
    if period_ns != 0 && kernel.is_none() {
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: a zeroed sigevent is valid; the fields set below are the
        // ones SIGEV_THREAD_ID reads.
        let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = task_clock_signal();
        sev.sigev_notify_thread_id = tid;
        sev.sigev_value = libc::sigval {
            sival_ptr: key as *mut libc::c_void,
        };
        // SAFETY: valid clock id, sigevent and out-pointer.
        let r = unsafe { libc::timer_create(clockid, &mut sev, &mut timer) };
        if r != 0 {
            slots().release(slot);
            let os = std::io::Error::last_os_error();
            return Err(Error::with_cause(
                os.raw_os_error().unwrap_or(errno::EINVAL),
                "task-clock: timer_create failed",
                os,
            ));
        }
        timer_id = timer as usize;
    }
    Ok(Box::new(TaskClock {
        timer: AtomicUsize::new(timer_id),
        slot,
        clockid,
        period_ns,
        base: AtomicI64::new(-1),
        acc: AtomicU64::new(0),
        sampled: AtomicU64::new(0),
        counter,
        kernel,
    }))
}

fn state(event: &Event) -> Option<&TaskClock> {
    event.pmu_private::<TaskClock>()
}

fn arm(tc: &TaskClock, ns: u64) {
    if let Some(k) = &tc.kernel {
        return k.set(ns != 0);
    }
    let t = tc.timer.load(Ordering::Acquire);
    if t == NO_TIMER {
        return;
    }
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    let its = libc::itimerspec {
        it_interval: ts,
        it_value: ts,
    };
    // SAFETY: a timer this state created and has not deleted.
    unsafe { libc::timer_settime(t as libc::timer_t, 0, &its, std::ptr::null_mut()) };
}

pub(crate) fn start(event: &Event) {
    let Some(tc) = state(event) else { return };
    if tc.base.load(Ordering::Acquire) < 0 {
        if let Some(c) = &tc.counter {
            c.start();
        }
        slots().set(tc.slot, Some(event.arc()));
        if let Some(n) = now(tc.clockid) {
            tc.base.store(n as i64, Ordering::Release);
        }
        arm(tc, tc.period_ns);
    }
}

pub(crate) fn stop(event: &Event) {
    let Some(tc) = state(event) else { return };
    arm(tc, 0);
    match &tc.counter {
        Some(c) => c.stop(event),
        None => read(event),
    }
    if tc.base.swap(-1, Ordering::AcqRel) >= 0 {
        slots().set(tc.slot, None);
    }
}

/// Brings `event->count` up to the thread's CPU time.
pub(crate) fn read(event: &Event) {
    let Some(tc) = state(event) else { return };
    if let Some(c) = &tc.counter {
        return c.read(event);
    }
    let base = tc.base.load(Ordering::Acquire);
    if base < 0 {
        return;
    }
    if let Some(n) = now(tc.clockid) {
        let d = n.saturating_sub(base as u64);
        if tc
            .base
            .compare_exchange(base, n as i64, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            tc.acc.fetch_add(d, Ordering::Relaxed);
            event.add_count(d);
        }
    }
}

pub(crate) fn destroy(event: &Event) {
    let Some(tc) = state(event) else { return };
    let t = tc.timer.swap(NO_TIMER, Ordering::AcqRel);
    if t != NO_TIMER {
        // SAFETY: the timer was created by event_init and is deleted once.
        unsafe { libc::timer_delete(t as libc::timer_t) };
    }
    slots().release(tc.slot);
}

extern "C" fn handler(_sig: i32, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    let saved = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let info = unsafe { &*info };
    let (v, kernel) = match kernel_clock::source_of(info) {
        // SAFETY: for a timer signal si_value holds the timer's sigev_value.
        Source::Timer => (unsafe { info.si_value() }.sival_ptr as usize, false),
        Source::Kernel(key) => (key, true),
        Source::Gone => {
            perfaux_core::driver::set_errno(saved);
            return;
        }
    };
    // A kernel clock's signal found by its descriptor's number: the event must be this
    // thread's (the number may have gone to another thread's event since).
    slots().with(v, |ev| {
        let mine =
            !kernel || matches!(ev.target(), Target::Thread(t) if t == perfaux_core::gettid());
        if mine {
            tick(ev, ip_of(uctx));
        }
    });
    perfaux_core::driver::set_errno(saved);
}

/// One timer expiry: update the count, overflow with the period.
fn tick(ev: &Event, ip: u64) {
    if ev.state() != EventState::Active {
        return;
    }
    let Some(tc) = state(ev) else { return };
    if let Some(c) = &tc.counter {
        return c.poll(ev, ip);
    }
    read(ev);
    let mut frames = [Frame {
        id: ProbeId(0),
        addr: 0,
    }; 64];
    let mut ips = [0u64; 64];
    let mut n = 0;
    if ev.attr().sample_type & PERF_SAMPLE_CALLCHAIN != 0 {
        let cc = writer::callchain(&mut frames);
        for (i, f) in frames[..cc.written].iter().enumerate() {
            ips[i] = f.addr;
        }
        n = cc.written;
    }
    // The kernel's clock overflows once a period, and its sample stands for that period, as
    // the kernel's own task-clock says. A POSIX CPU-time timer expires at most once per
    // scheduler tick (4 ms at HZ=250) however short its period: its sample stands for all the
    // CPU time since the previous one, so that the periods add up to it.
    let acc = tc.acc.load(Ordering::Relaxed);
    let since = acc.saturating_sub(tc.sampled.swap(acc, Ordering::Relaxed));
    let period = if tc.kernel.is_some() {
        tc.period_ns
    } else {
        since.max(tc.period_ns)
    };
    let mut data = SampleData::default();
    data.ip = ip;
    data.period = period;
    data.callchain = &ips[..n];
    ev.set_last_period(period);
    perf_event_overflow(ev, &mut data);
    // The overflow this sample took, given back to the kernel's clock while the event counts
    // (a stop meanwhile disabled it for good).
    if let Some(k) = &tc.kernel
        && tc.base.load(Ordering::Acquire) >= 0
        && ev.state() == EventState::Active
    {
        k.refresh();
    }
}
