//! The software counters and cpu-clock: each counts the workload that
//! drives it, beside the same event opened on the running kernel (the
//! oracle, where perf_event_open is allowed), and a sampling counter emits
//! one sample per period.

mod common;

use common::{attr, records, sampling, touch_pages, u32_at, u64_at};
use perfaux_abi::consts::*;
use perfaux_abi::errno;
use perfaux_core::{EventFd, Prot, Target, perf_event_open_attr};

fn open(a: &perfaux_abi::attr::PerfEventAttr) -> EventFd {
    perfaux_pmus::register();
    perf_event_open_attr(a, Target::current(), -1, -1, 0).unwrap()
}

/// The same counter on the kernel (exclude_kernel clear: the kernel counts
/// context switches in kernel context), or None where it is not allowed.
struct KernelCounter(i32);

impl KernelCounter {
    fn open(config: u64) -> Option<Self> {
        let a = attr(PERF_TYPE_SOFTWARE, config);
        let mut b = a.to_bytes(PERF_ATTR_SIZE_VER8, perfaux_abi::Endianness::NATIVE);
        // SAFETY: `b` is a whole attr of the size it states.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                b.as_mut_ptr(),
                0,
                -1,
                -1,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            eprintln!(
                "skipped (the kernel's side): perf_event_open: {}",
                std::io::Error::last_os_error()
            );
            return None;
        }
        Some(Self(fd as i32))
    }

    fn ioctl(&self, req: u64) {
        // SAFETY: a perf fd this owns; ENABLE/DISABLE take an int flag.
        unsafe { libc::ioctl(self.0, req as _, 0) };
    }

    fn count(&self) -> u64 {
        let mut v = 0u64;
        // SAFETY: read(2) of a u64 into a u64.
        let n = unsafe { libc::read(self.0, (&mut v as *mut u64).cast(), 8) };
        assert_eq!(n, 8);
        v
    }
}

impl Drop for KernelCounter {
    fn drop(&mut self) {
        // SAFETY: the fd is owned and closed once.
        unsafe { libc::close(self.0) };
    }
}

/// Runs `work` with `config` counting on both sides; (perfaux, kernel).
fn count_both(config: u64, work: impl FnOnce()) -> (u64, Option<u64>) {
    let p = open(&attr(PERF_TYPE_SOFTWARE, config));
    let k = KernelCounter::open(config);
    if let Some(k) = &k {
        k.ioctl(PERF_EVENT_IOC_ENABLE);
    }
    p.enable(0).unwrap();
    work();
    p.disable(0).unwrap();
    if let Some(k) = &k {
        k.ioctl(PERF_EVENT_IOC_DISABLE);
    }
    (p.event().count(), k.map(|k| k.count()))
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Runs on the CPU until the thread has used `ns` more CPU time.
fn burn(ns: u64) {
    let end = thread_cpu_ns() + ns;
    let mut x = 0u64;
    while thread_cpu_ns() < end {
        for i in 0..1000 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    }
}

/// Opens `config` sampling every `period` with IP, TID and PERIOD, runs
/// `work` with it enabled (`disable` ends it), and returns the count and
/// the samples' bodies.
fn sample_run(
    config: u64,
    period: u64,
    work: impl FnOnce(),
    disable: impl FnOnce(&EventFd),
) -> (u64, Vec<Vec<u8>>) {
    let mut a = sampling(PERF_TYPE_SOFTWARE, config, period);
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_PERIOD;
    let ev = open(&a);
    let mut m = ev.mmap(0, 1 + 16, Prot::READ_WRITE).unwrap();
    ev.enable(0).unwrap();
    work();
    disable(&ev);
    let count = ev.event().count();
    let samples = records(&mut m)
        .into_iter()
        .filter(|(h, _)| h.type_ == PERF_RECORD_SAMPLE)
        .map(|(_, b)| b)
        .collect();
    (count, samples)
}

fn disable_here(ev: &EventFd) {
    ev.disable(0).unwrap();
}

#[test]
fn page_faults_count_the_pages_touched_as_the_kernel_does() {
    for config in [PERF_COUNT_SW_PAGE_FAULTS, PERF_COUNT_SW_PAGE_FAULTS_MIN] {
        let (p, k) = count_both(config, || touch_pages(256));
        assert!(p >= 256, "config {config}: perfaux counted {p} faults");
        if let Some(k) = k {
            assert!(k >= 256, "config {config}: the kernel counted {k}");
            assert!(
                p.abs_diff(k) <= 64,
                "config {config}: perfaux {p}, kernel {k}"
            );
        }
    }
    let (p, _) = count_both(PERF_COUNT_SW_PAGE_FAULTS_MAJ, || touch_pages(16));
    assert!(p < 16, "anonymous pages are minor faults: {p} major");
}

#[test]
fn context_switches_count_the_sleeps() {
    let (p, k) = count_both(PERF_COUNT_SW_CONTEXT_SWITCHES, || {
        for _ in 0..10 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
    assert!(p >= 10, "perfaux counted {p} switches");
    if let Some(k) = k {
        assert!(k >= 10, "the kernel counted {k}");
    }
}

fn pin(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes inside the set (cpu < CPU_SETSIZE).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: a valid set of its own size, for the calling thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) == 0 }
}

#[test]
fn cpu_migrations_count_a_move_between_cpus() {
    // SAFETY: a zeroed cpu_set_t is a valid out-value.
    let mut old: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer of its own size.
    unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&old), &mut old) };
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `old` is an initialised set.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &old) })
        .collect();
    if cpus.len() < 2 || !pin(cpus[0]) {
        eprintln!("skipped: fewer than 2 CPUs to move between");
        return;
    }
    let (p, k) = count_both(PERF_COUNT_SW_CPU_MIGRATIONS, || {
        assert!(pin(cpus[1]));
        std::thread::yield_now();
    });
    // SAFETY: restores the affinity read above.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&old), &old) };
    assert!(p >= 1, "perfaux counted {p} migrations");
    if let Some(k) = k {
        assert!(k >= 1, "the kernel counted {k}");
    }
}

#[test]
fn counters_nothing_drives_stay_zero_as_in_the_kernel() {
    let mut configs = vec![PERF_COUNT_SW_BPF_OUTPUT];
    if cfg!(target_arch = "x86_64") {
        configs.extend([
            PERF_COUNT_SW_ALIGNMENT_FAULTS,
            PERF_COUNT_SW_EMULATION_FAULTS,
        ]);
    }
    for config in configs {
        let (p, k) = count_both(config, || touch_pages(8));
        assert_eq!(p, 0, "config {config}");
        if let Some(k) = k {
            assert_eq!(k, 0, "config {config} on the kernel");
        }
    }
    perfaux_pmus::register();
    let e = perf_event_open_attr(
        &attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CGROUP_SWITCHES),
        Target::current(),
        -1,
        -1,
        0,
    )
    .unwrap_err();
    assert_eq!(e.errno, errno::EOPNOTSUPP, "cgroup-switches");
}

#[test]
fn cpu_clock_counts_cpu_time() {
    let (p, k) = count_both(PERF_COUNT_SW_CPU_CLOCK, || burn(5_000_000));
    assert!(p >= 5_000_000, "perfaux counted {p} ns");
    // The kernel's cpu-clock adds local_clock() time while the task runs, the burn stops on
    // CLOCK_THREAD_CPUTIME_ID (the task's sum_exec_runtime): two clocks, which in a VM under
    // load were seen 0.35 % apart (4,982,962 ns for the 5 ms burn). The kernel is the oracle
    // of what cpu-clock counts, within that.
    if let Some(k) = k {
        assert!(
            k >= 5_000_000 - 5_000_000 / 100,
            "the kernel counted {k} ns"
        );
    }
}

#[test]
fn sampling_page_faults_emit_one_sample_per_period() {
    let (count, samples) = sample_run(
        PERF_COUNT_SW_PAGE_FAULTS,
        16,
        || {
            touch_pages(512);
            // The counter is polled every POLL_NS of CPU time.
            burn(5 * perfaux_pmus::sw_counters::POLL_NS);
        },
        disable_here,
    );
    assert!(
        samples.len() >= 512 / 16,
        "{} samples for {count} faults",
        samples.len()
    );
    assert!(
        samples.len() as u64 * 16 <= count,
        "no more samples than periods"
    );
    for b in &samples {
        // ip, pid/tid, period
        assert_eq!(u32_at(b, 20) as i32, perfaux_core::gettid());
        assert_eq!(u64_at(b, 24), 16);
    }
}

/// A task-clock sampler's timer fires at most once per
/// scheduler tick however short its period, so a sample stands for all
/// the CPU time since the one before: the periods the samples carry add up
/// to the CPU time counted up to the last sample, not to 250 µs each.
#[test]
fn task_clock_sample_periods_add_up_to_the_cpu_time() {
    for config in [PERF_COUNT_SW_TASK_CLOCK, PERF_COUNT_SW_CPU_CLOCK] {
        let (count, samples) = sample_run(config, 250_000, || burn(60_000_000), disable_here);
        let periods: Vec<u64> = samples.iter().map(|b| u64_at(b, 24)).collect();
        let sum: u64 = periods.iter().sum();
        assert!(
            sum <= count && sum >= count / 2,
            "config {config}: {} samples, periods add up to {sum} ns of {count} ns counted",
            periods.len()
        );
        assert!(
            periods.iter().all(|&p| p >= 250_000),
            "config {config}: a sample stands for at least one period: {periods:?}"
        );
    }
}

/// A thread that runs less than a poll of CPU time still gets its
/// samples: disabling emits the periods crossed, from the observed thread
/// itself or from another one (as `perfaux record` disables).
#[test]
fn a_sampling_counter_disabled_emits_what_the_poll_left() {
    for from_another_thread in [false, true] {
        disabled_counter_emits(from_another_thread);
    }
}

fn disabled_counter_emits(from_another_thread: bool) {
    let (count, samples) = sample_run(
        PERF_COUNT_SW_PAGE_FAULTS_MIN,
        8,
        || touch_pages(128),
        |ev| {
            if from_another_thread {
                std::thread::scope(|s| s.spawn(|| ev.disable(0).unwrap()).join().unwrap());
            } else {
                ev.disable(0).unwrap();
            }
        },
    );
    let n = samples.len() as u64;
    assert!(count >= 128, "{count} faults");
    // Writing the samples may fault a ring page in after they are taken.
    assert!(
        n * 8 <= count && count - n * 8 < 16,
        "{n} samples, one per period of {count} faults"
    );
}
