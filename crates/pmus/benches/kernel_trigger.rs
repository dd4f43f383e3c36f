//! The cost of one kernel trigger (`ktrigger`, crates/pmus/BENCHMARKS.md): the kernel's event
//! fires on the thread, its sigtrap is delivered on the way back to user space, and the handler
//! counts the hit on the core's event (the overflow path behind it is the probe's, measured in
//! benches/core.rs). Each against the same work without the trigger, in the same run:
//!
//! - `page_fault`: a page given back (`madvise(MADV_DONTNEED)`) and written again, one minor
//!   fault, with a trigger on the kernel's `page-faults`;
//! - `syscall`: `getppid(2)`, with a trigger on the tracepoint `syscalls:sys_enter_getppid`
//!   (root, tracefs mounted; left out where it cannot be opened); and its floor,
//!   `signal_floor`: `getppid(2)` then a signal to the thread itself (`raise`) with an empty
//!   SA_SIGINFO handler, the delivery every trigger pays.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use perfaux_abi::attr::{AttrBuilder, PerfEventAttr};
use perfaux_abi::consts::*;
use perfaux_core::{EventFd, Target, perf_event_open_attr};
use perfaux_pmus::KTRIGGER_TYPE;
use perfaux_pmus::kernel_trigger::CONFIG2_KERNEL_MODE;

fn trigger(type_: u32, config: u64, kernel_mode: bool) -> Option<EventFd> {
    perfaux_pmus::register();
    let mut a: PerfEventAttr = AttrBuilder::new(KTRIGGER_TYPE, config)
        .sample_period(1)
        .build();
    a.config1 = u64::from(type_);
    if kernel_mode {
        a.config2 = CONFIG2_KERNEL_MODE;
    }
    let ev = perf_event_open_attr(&a, Target::current(), -1, -1, 0).ok()?;
    ev.enable(0).ok()?;
    Some(ev)
}

/// A page of its own, faulted in again at each call.
struct Page(*mut u8);

impl Page {
    fn new() -> Page {
        // SAFETY: a fresh private anonymous page, never unmapped (the bench's life).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        Page(p.cast())
    }

    #[inline(never)]
    fn fault(&self) {
        // SAFETY: the page is ours; DONTNEED drops it.
        unsafe { libc::madvise(self.0.cast(), 4096, libc::MADV_DONTNEED) };
        // SAFETY: a byte of our writable page: the write faults a zero page back in.
        unsafe { std::ptr::write_volatile(self.0, 1) };
    }
}

fn page_fault(c: &mut Criterion) {
    let page = Page::new();
    let mut g = c.benchmark_group("ktrigger_page_fault");
    g.bench_function("without_trigger", |b| b.iter(|| page.fault()));
    let ev = trigger(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, false);
    if let Some(ev) = &ev {
        g.bench_function("with_trigger", |b| b.iter(|| page.fault()));
        ev.disable(0).unwrap();
        assert!(ev.event().count() > 0, "the trigger never fired");
    } else {
        eprintln!("ktrigger_page_fault/with_trigger: not measured (sigtrap event refused)");
    }
    g.finish();
}

fn getppid() -> libc::pid_t {
    // SAFETY: getppid has no preconditions.
    unsafe { libc::getppid() }
}

extern "C" fn empty(_: i32, _: *mut libc::siginfo_t, _: *mut libc::c_void) {}

fn install_empty_handler() {
    // SAFETY: all-zero is a valid sigaction; the handler does nothing.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = empty as *const () as usize;
    sa.sa_flags = libc::SA_SIGINFO;
    // SAFETY: as above.
    unsafe { libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()) };
}

fn syscall(c: &mut Criterion) {
    let id = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .find_map(|m| {
            std::fs::read_to_string(format!("{m}/events/syscalls/sys_enter_getppid/id")).ok()
        })
        .and_then(|s| s.trim().parse::<u64>().ok());
    let mut g = c.benchmark_group("ktrigger_syscall");
    g.bench_function("without_trigger", |b| b.iter(|| black_box(getppid())));
    install_empty_handler();
    g.bench_function("signal_floor", |b| {
        b.iter(|| {
            black_box(getppid());
            // SAFETY: raise of a signal whose handler is installed above.
            unsafe { libc::raise(libc::SIGUSR2) };
        })
    });
    match id.and_then(|id| trigger(PERF_TYPE_TRACEPOINT, id, true)) {
        Some(ev) => {
            g.bench_function("with_trigger", |b| b.iter(|| black_box(getppid())));
            ev.disable(0).unwrap();
            assert!(ev.event().count() > 0, "the trigger never fired");
        }
        None => eprintln!(
            "ktrigger_syscall/with_trigger: not measured (no readable tracefs, or the \
             tracepoint refused: root needed)"
        ),
    }
    g.finish();
}

criterion_group!(benches, page_fault, syscall);
criterion_main!(benches);
