//! A sampling task-clock's rate on the thread that spins: with the kernel's task-clock as its
//! interrupt (the default where `perf_event_open` is allowed) a sample every period of the
//! thread's CPU time, as the kernel's own task-clock samples; with the POSIX CPU-time timer
//! (what a process without `perf_event_open` gets) fewer samples, at most one a scheduler tick,
//! whose periods still add up to the CPU time.

mod common;

use common::*;
use perfaux_abi::consts::*;
use perfaux_core::{Prot, Target, perf_event_open_attr};

/// The tests of this file one at a time: each spins a CPU, and one turns the kernel clock off.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(r, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Spins 200 ms of this thread's CPU time under a task-clock sampler of `period` ns: the
/// samples taken, the sum of their periods, and the CPU time spun.
fn spin_sampled(period: u64) -> (u64, u64, u64) {
    let mut a = sampling(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, period);
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_PERIOD;
    let ev = perf_event_open_attr(&a, Target::current(), -1, -1, 0).unwrap();
    let mut data = ev.mmap(0, 1 + 64, Prot::READ_WRITE).unwrap();
    let (mut n, mut sum) = (0, 0);
    let mut take = |data: &mut perfaux_core::Mmap| {
        for (h, b) in records(data) {
            if h.type_ == PERF_RECORD_SAMPLE {
                n += 1;
                sum += u64_at(&b, 16);
            }
        }
    };
    let start = thread_cpu_ns();
    ev.enable(0).unwrap();
    let mut x = 0u64;
    while thread_cpu_ns() - start < 200_000_000 {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        take(&mut data);
    }
    ev.disable(0).unwrap();
    let cpu = thread_cpu_ns() - start;
    take(&mut data);
    (n, sum, cpu)
}

#[test]
fn a_task_clock_samples_each_period_of_cpu_time_and_its_periods_add_up() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    perfaux_pmus::register();
    let period = 250_000;
    // The kernel's clock: a sample every period (those that land in the kernel's code, and
    // those the hypervisor's steal of a loaded host leaves out, excepted: at least three in
    // four), where a tick-bound timer gives one in 4 to 16 (HZ 1000 to 250).
    let (n, sum, cpu) = spin_sampled(period);
    let want = cpu / period;
    assert!(
        n * 4 >= want * 3 && n * 10 <= want * 11,
        "{n} samples for {cpu} ns of CPU time at {period} ns"
    );
    assert!(
        sum * 10 >= cpu * 9 && sum <= cpu,
        "periods {sum} for {cpu} ns"
    );
    // The timer: fewer, larger periods, adding up all the same.
    perfaux_pmus::use_kernel_clock(false);
    let (n, sum, cpu) = spin_sampled(period);
    perfaux_pmus::use_kernel_clock(true);
    assert!(n >= 1, "the timer fired");
    assert!(
        sum * 10 >= cpu * 8 && sum <= cpu,
        "periods {sum} for {cpu} ns ({n} samples)"
    );
}

/// Signals queued for the user (`SigQ` of /proc/self/status: queued/limit).
fn queued_signals() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("SigQ:")).unwrap();
    line[5..].trim().split('/').next().unwrap().parse().unwrap()
}

/// Blocks (`how` = SIG_BLOCK) or unblocks the samplers' signal for the calling thread.
fn mask_sampler_signal(how: libc::c_int) {
    // SAFETY: an all-zero sigset_t is a valid value to initialise.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid sigset_t.
    unsafe { libc::sigemptyset(&mut set) };
    // SAFETY: a valid sigset_t and signal number.
    unsafe { libc::sigaddset(&mut set, libc::SIGRTMIN() + 7) };
    // SAFETY: a valid sigset_t; this thread's mask alone changes.
    unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
}

/// A thread that blocks the sampler's signal while it runs (a worker pool that leaves signals
/// to its main thread) holds a few pending samples, not one a period: the kernel's clock is
/// allowed four overflows its handler has not seen, so the user's queue of real-time signals
/// (RLIMIT_SIGPENDING, past which the kernel sends a plain SIGIO that ends the process) does
/// not fill.
#[test]
fn a_thread_that_blocks_the_samplers_signal_piles_up_no_signals() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    perfaux_pmus::register();
    let before = queued_signals();
    std::thread::spawn(move || {
        mask_sampler_signal(libc::SIG_BLOCK);
        let a = sampling(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, 100_000);
        let ev = perf_event_open_attr(&a, Target::current(), -1, -1, 0).unwrap();
        let _data = ev.mmap(0, 1 + 8, Prot::READ_WRITE).unwrap();
        ev.enable(0).unwrap();
        let start = thread_cpu_ns();
        let mut x = 0u64;
        // 100 ms of CPU time: a thousand periods.
        while thread_cpu_ns() - start < 100_000_000 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        // Four of this event's at most, and a few of other tests' samplers in flight (the
        // queue is the user's): a thousand without the limit.
        let during = queued_signals();
        ev.disable(0).unwrap();
        drop(ev);
        // Unblocked with the event closed: the pending signals find no event.
        mask_sampler_signal(libc::SIG_UNBLOCK);
        assert!(
            during <= before + 16,
            "{during} signals queued (before: {before})"
        );
    })
    .join()
    .unwrap();
}
