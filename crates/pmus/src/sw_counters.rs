//! The kernel's software counters (`PERF_TYPE_SOFTWARE`) seen from user
//! space: page-faults, minor-faults, major-faults, context-switches,
//! cpu-migrations, alignment-faults, emulation-faults and bpf-output.
//!
//! The kernel counts each of these where it happens; a process sees the
//! thread's running totals instead, so the count is the delta of a total
//! since the event was enabled, brought up to date whenever it is read:
//!
//! | event | total observed |
//! |---|---|
//! | page-faults | `ru_minflt + ru_majflt` |
//! | minor-faults, major-faults | `ru_minflt`, `ru_majflt` |
//! | context-switches | `ru_nvcsw + ru_nivcsw` |
//! | cpu-migrations | changes of the thread's CPU between two observations (a lower bound) |
//! | alignment-faults, emulation-faults | 0 on x86-64, where the kernel counts none either |
//! | bpf-output | 0: only a BPF program writes it, and perfaux runs none |
//!
//! On the observed thread the totals come from `getrusage(RUSAGE_THREAD)`
//! and `sched_getcpu` (syscalls, async-signal-safe); from another thread,
//! from `/proc/self/task/<tid>/stat` and `.../status`.
//!
//! A sampling counter has task-clock's timer ([`super::task_clock`]) on
//! the thread's CPU clock, polling every [`POLL_NS`] of CPU time: each
//! poll emits one sample per `sample_period` the total crossed (up to
//! [`MAX_SAMPLES_PER_POLL`], the rest at the next poll), with the
//! interrupted ip, as the kernel's `perf_swevent_overflow` emits one per
//! period; a stop (disable) emits what the last poll left, with ip 0, on
//! the observed thread. In freq mode the period stays at 1, the kernel's starting
//! period (perfaux does not adjust it).
//!
//! cgroup-switches (a switch between tasks of two cgroups) is not
//! observable from inside a process: EOPNOTSUPP, the kernel's answer for a
//! software event the PMU does not provide.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use perfaux_abi::attr::AttrFlags;
use perfaux_abi::consts::*;

use perfaux_core::driver::{
    Event, EventState, PmuPrivate, Result, SampleData, Target, einval, eopnotsupp,
    perf_event_overflow,
};

/// CPU time between two polls of a sampling counter.
pub const POLL_NS: u64 = 1_000_000;
/// Samples one poll emits at most.
pub const MAX_SAMPLES_PER_POLL: u64 = 64;

/// A software counter's state, kept in its task-clock timer's state.
pub(crate) struct SwCounter {
    config: u64,
    tid: i32,
    /// The total at the last count update; `u64::MAX` while stopped.
    last: AtomicU64,
    /// The total at the last poll (sampling).
    polled: AtomicU64,
    /// Events counted towards the next sample.
    pending: AtomicU64,
    /// `sample_period` (1 in freq mode); 0: counting only.
    period: u64,
    /// cpu-migrations: the CPU last seen and the changes counted.
    last_cpu: AtomicI32,
    migrations: AtomicU64,
}

/// Whether `config` is a counter of this module.
pub(crate) fn is_counter(config: u64) -> bool {
    matches!(
        config,
        PERF_COUNT_SW_PAGE_FAULTS
            | PERF_COUNT_SW_PAGE_FAULTS_MIN
            | PERF_COUNT_SW_PAGE_FAULTS_MAJ
            | PERF_COUNT_SW_CONTEXT_SWITCHES
            | PERF_COUNT_SW_CPU_MIGRATIONS
            | PERF_COUNT_SW_ALIGNMENT_FAULTS
            | PERF_COUNT_SW_EMULATION_FAULTS
            | PERF_COUNT_SW_BPF_OUTPUT
    )
}

/// `event_init` of a software counter; `config` is below
/// `PERF_COUNT_SW_MAX` and is neither a clock nor dummy.
pub(crate) fn event_init(event: &Event) -> Result<PmuPrivate> {
    let config = event.attr().config;
    if !is_counter(config) {
        return Err(eopnotsupp(
            "software event not observable in user space (cgroup-switches)",
        ));
    }
    let Target::Thread(tid) = event.target() else {
        return Err(einval(
            "software counters count one thread: need a thread target",
        ));
    };
    let period = if !event.is_sampling() {
        0
    } else if event.flag(AttrFlags::FREQ) {
        1
    } else {
        event.attr().sample_period
    };
    let counter = SwCounter {
        config,
        tid,
        last: AtomicU64::new(u64::MAX),
        polled: AtomicU64::new(0),
        pending: AtomicU64::new(0),
        period,
        last_cpu: AtomicI32::new(-1),
        migrations: AtomicU64::new(0),
    };
    let poll = if period == 0 { 0 } else { POLL_NS };
    super::task_clock::init(tid, poll, Some(counter))
}

/// The thread's running totals.
#[derive(Default, Clone, Copy)]
struct Totals {
    minflt: u64,
    majflt: u64,
    nvcsw: u64,
    nivcsw: u64,
    cpu: i32,
}

fn totals(tid: i32) -> Option<Totals> {
    if tid == perfaux_core::driver::gettid() {
        // SAFETY: a zeroed rusage is a valid out-value.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer; RUSAGE_THREAD reads the calling thread.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
            return None;
        }
        // SAFETY: no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        return Some(Totals {
            minflt: ru.ru_minflt as u64,
            majflt: ru.ru_majflt as u64,
            nvcsw: ru.ru_nvcsw as u64,
            nivcsw: ru.ru_nivcsw as u64,
            cpu,
        });
    }
    proc_totals(tid)
}

/// The totals of another thread of this process, from /proc.
fn proc_totals(tid: i32) -> Option<Totals> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // Fields after the command (which may hold spaces), from field 3 on.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    let field = |n: usize| f.get(n - 3).and_then(|s| s.parse::<u64>().ok());
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    let line = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some(Totals {
        minflt: field(10)?,
        majflt: field(12)?,
        nvcsw: line("voluntary_ctxt_switches:")?,
        nivcsw: line("nonvoluntary_ctxt_switches:")?,
        cpu: field(39)? as i32,
    })
}

impl SwCounter {
    /// The running total this counter counts.
    fn total(&self) -> Option<u64> {
        let t = match self.config {
            PERF_COUNT_SW_ALIGNMENT_FAULTS
            | PERF_COUNT_SW_EMULATION_FAULTS
            | PERF_COUNT_SW_BPF_OUTPUT => return Some(0),
            _ => totals(self.tid)?,
        };
        Some(match self.config {
            PERF_COUNT_SW_PAGE_FAULTS => t.minflt + t.majflt,
            PERF_COUNT_SW_PAGE_FAULTS_MIN => t.minflt,
            PERF_COUNT_SW_PAGE_FAULTS_MAJ => t.majflt,
            PERF_COUNT_SW_CONTEXT_SWITCHES => t.nvcsw + t.nivcsw,
            _ => {
                let prev = self.last_cpu.swap(t.cpu, Ordering::AcqRel);
                if prev >= 0 && prev != t.cpu {
                    self.migrations.fetch_add(1, Ordering::AcqRel);
                }
                self.migrations.load(Ordering::Acquire)
            }
        })
    }

    /// `pmu->start`: counting from the current total.
    pub(crate) fn start(&self) {
        if let Some(t) = self.total() {
            self.polled.store(t, Ordering::Release);
            self.last.store(t, Ordering::Release);
        }
    }

    /// `pmu->stop`: the count brought up to date, then frozen. The
    /// periods crossed since the last poll are sampled first, on the
    /// observed thread (a remote call from another one), with no ip (the
    /// stop is not where they happened), so that a thread that ran less
    /// than a poll still has its samples; the timer's handler skips an
    /// event that is no longer active, so the two do not both emit.
    pub(crate) fn stop(&self, event: &Event) {
        if self.period != 0 {
            let _ = perfaux_core::driver::run_on(self.tid, &mut || self.emit(event, 0));
        }
        self.read(event);
        self.last.store(u64::MAX, Ordering::Release);
    }

    /// `pmu->read`: adds what the total grew by since the last update.
    pub(crate) fn read(&self, event: &Event) {
        let last = self.last.load(Ordering::Acquire);
        if last == u64::MAX {
            return;
        }
        let Some(now) = self.total() else { return };
        if now > last
            && self
                .last
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            event.add_count(now - last);
        }
    }

    /// A poll of a sampling counter, on its thread (the timer's signal):
    /// one sample per period crossed since the last poll.
    pub(crate) fn poll(&self, event: &Event, ip: u64) {
        if event.state() != EventState::Active || self.period == 0 {
            return;
        }
        self.emit(event, ip);
    }

    /// One sample per period the total crossed since the last poll.
    fn emit(&self, event: &Event, ip: u64) {
        self.read(event);
        let Some(now) = self.total() else { return };
        let prev = self.polled.swap(now, Ordering::AcqRel);
        let pending = self.pending.load(Ordering::Acquire) + now.saturating_sub(prev);
        let n = (pending / self.period).min(MAX_SAMPLES_PER_POLL);
        self.pending
            .store(pending - n * self.period, Ordering::Release);
        for _ in 0..n {
            let mut data = SampleData::default();
            data.ip = ip;
            data.period = self.period;
            event.set_last_period(self.period);
            perf_event_overflow(event, &mut data);
        }
    }
}
