//! The running kernel's own `task-clock` as the interrupt of a sampling task-clock: a
//! per-thread software event of the kernel (`perf_event_open`, user mode only, no buffer)
//! whose overflows signal the thread itself (`F_SETSIG` to [`task_clock_signal`],
//! `F_SETOWN_EX` to the thread: the kernel's `perf_pending_irq` sends it at each overflow, on
//! the way back to user space), so that this PMU's handler runs at the kernel's hrtimer
//! rate, as `perf record -e task-clock` samples.
//!
//! Why: a POSIX CPU-time timer, the other source ([`super::task_clock`]), expires at most once
//! per scheduler tick whatever its period: at perf's default 4000 Hz and HZ=250 it gives one
//! sample in sixteen. The kernel's event needs `perf_event_paranoid` 2 or lower (per-thread,
//! user-only events of one's own threads) and a descriptor per sampling thread; where it is
//! refused (paranoid 3, a container's seccomp filter, no descriptors left) the timer stays.
//!
//! A few signals at most are in flight per event ([`IN_FLIGHT`]): the event is allowed that
//! many overflows (`PERF_EVENT_IOC_REFRESH`, after which the kernel disables it) and the
//! handler gives back the one it took ([`KernelClock::refresh`]), so a thread that runs its
//! handlers never sees its clock stop (stopping it at each overflow and starting it again
//! from the handler lost the handler's latency from every period: 11 % of the samples at
//! 4 kHz). A real-time signal is queued per overflow, not merged as a timer's is: a thread
//! that blocks the signal would otherwise pile them up until the user's RLIMIT_SIGPENDING ran
//! out, and the kernel then sends plain SIGIO, which ends the process.
//!
//! The handler knows such a signal by its `si_code` (`POLL_IN`/`POLL_HUP`, where a timer's is
//! `SI_TIMER`) and finds the event from `si_fd` through [`source_of`]: a table indexed by
//! descriptor number (the first [`FD_KEYS`]; an event whose descriptor is higher uses the timer).
//! A signal sent before its event closed can arrive after its descriptor's number went to
//! another event: the handler also checks that the event it finds is the thread's own.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use perfaux_abi::Endianness;
use perfaux_abi::attr::{AttrFlags, PerfEventAttr};
use perfaux_abi::consts::{PERF_ATTR_SIZE_VER0, PERF_COUNT_SW_TASK_CLOCK, PERF_TYPE_SOFTWARE};

use super::task_clock::task_clock_signal;

/// Overflows an event may signal before its handler ran.
const IN_FLIGHT: libc::c_int = 4;
/// Descriptors the handler can map to an event (a process with more open files than this
/// samples its higher ones with the timer).
const FD_KEYS: usize = 1 << 16;
/// `PERF_EVENT_IOC_DISABLE` (`_IO('$', 1)`) and `PERF_EVENT_IOC_REFRESH` (`_IO('$', 2)`).
const IOC_DISABLE: libc::c_ulong = 0x2401;
const IOC_REFRESH: libc::c_ulong = 0x2402;
/// fcntl commands and `struct f_owner_ex` (include/uapi/asm-generic/fcntl.h), which the libc
/// crate does not name.
const F_SETSIG: libc::c_int = 10;
const F_SETOWN_EX: libc::c_int = 15;
const F_OWNER_TID: libc::c_int = 0;
#[repr(C)]
struct OwnerEx {
    type_: libc::c_int,
    pid: libc::pid_t,
}
/// `si_code` of a signal `F_SETSIG` sends for input (`POLL_IN`), and for an event disabled
/// by its `event_limit` (`POLL_HUP`).
const POLL_IN: i32 = 1;
const POLL_HUP: i32 = 6;

fn keys() -> &'static [AtomicUsize] {
    static K: OnceLock<Box<[AtomicUsize]>> = OnceLock::new();
    K.get_or_init(|| (0..FD_KEYS).map(|_| AtomicUsize::new(0)).collect())
}

/// The kernel's task-clock of one thread, signalling it at each period of its CPU time.
pub(crate) struct KernelClock {
    fd: OwnedFd,
}

impl KernelClock {
    /// Opens the kernel's task-clock of thread `tid` sampling every `period_ns` of its user
    /// time, disabled; its signals carry `key` to the handler. `None` where the kernel or the
    /// process refuses it.
    pub(crate) fn open(tid: i32, period_ns: u64, key: usize) -> Option<KernelClock> {
        let attr = PerfEventAttr {
            type_: PERF_TYPE_SOFTWARE,
            config: PERF_COUNT_SW_TASK_CLOCK,
            sample_period: period_ns,
            flags: AttrFlags::DISABLED | AttrFlags::EXCLUDE_KERNEL | AttrFlags::EXCLUDE_HV,
            ..PerfEventAttr::default()
        };
        let bytes = attr.to_bytes(PERF_ATTR_SIZE_VER0, Endianness::NATIVE);
        // SAFETY: perf_event_open(2) reads `size` bytes of attr (VER0, written above) and
        // returns a new descriptor or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                bytes.as_ptr(),
                tid,
                -1,
                -1,
                libc::c_ulong::from(1u8 << 3), // PERF_FLAG_FD_CLOEXEC
            )
        };
        let fd = i32::try_from(fd).ok().filter(|&fd| fd >= 0)?;
        // SAFETY: a descriptor just returned to us alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let slot = keys().get(fd.as_raw_fd() as usize)?;
        let owner = OwnerEx {
            type_: F_OWNER_TID,
            pid: tid,
        };
        let raw = fd.as_raw_fd();
        // SAFETY: fcntl on our descriptor with an int argument: the signal to send.
        let set = unsafe { libc::fcntl(raw, F_SETSIG, task_clock_signal()) } == 0
            // SAFETY: the owner, a struct that lives across the call.
            && unsafe { libc::fcntl(raw, F_SETOWN_EX, &owner) } == 0
            // SAFETY: asynchronous notification on, an int argument.
            && unsafe { libc::fcntl(raw, libc::F_SETFL, libc::O_ASYNC) } == 0;
        if !set {
            return None;
        }
        slot.store(key + 1, Ordering::Release);
        Some(KernelClock { fd })
    }

    /// Starts the kernel's count, allowed [`IN_FLIGHT`] overflows (and signals), or stops it.
    pub(crate) fn set(&self, on: bool) {
        if on {
            // SAFETY: an ioctl with an int argument (overflows to allow) on our descriptor.
            unsafe { libc::ioctl(self.fd.as_raw_fd(), IOC_REFRESH, IN_FLIGHT) };
        } else {
            // SAFETY: an ioctl without argument on our perf descriptor.
            unsafe { libc::ioctl(self.fd.as_raw_fd(), IOC_DISABLE, 0) };
        }
    }

    /// Gives back the overflow a sample took (from the handler: async-signal-safe), starting
    /// the count again if it had stopped at its last allowed overflow.
    pub(crate) fn refresh(&self) {
        // SAFETY: an ioctl with an int argument (the overflows to allow) on our descriptor.
        unsafe { libc::ioctl(self.fd.as_raw_fd(), IOC_REFRESH, 1) };
    }
}

impl Drop for KernelClock {
    fn drop(&mut self) {
        self.set(false);
        if let Some(k) = keys().get(self.fd.as_raw_fd() as usize) {
            k.store(0, Ordering::Release);
        }
    }
}

/// The layout of a `siginfo_t` for `SIGPOLL`-style signals on Linux x86-64 and aarch64: the
/// three ints, padding, then `si_band` and `si_fd` (the libc crate names no accessor for them).
#[repr(C)]
struct PollInfo {
    signo: i32,
    errno: i32,
    code: i32,
    _pad: i32,
    band: libc::c_long,
    fd: i32,
}

/// Where a task-clock signal comes from.
pub(crate) enum Source {
    /// A POSIX timer: its `si_value` holds the key.
    Timer,
    /// A kernel clock's event, by its key.
    Kernel(usize),
    /// A kernel clock's signal whose descriptor no event has now (sent before it closed).
    Gone,
}

/// Where the signal `info` comes from.
pub(crate) fn source_of(info: &libc::siginfo_t) -> Source {
    if info.si_code != POLL_IN && info.si_code != POLL_HUP {
        return Source::Timer;
    }
    // SAFETY: a siginfo_t is 128 bytes, larger than PollInfo, and for these codes the kernel
    // filled its poll fields (x86-64 and aarch64 layout: 64-bit `long`).
    let p = unsafe { &*std::ptr::from_ref(info).cast::<PollInfo>() };
    let key = usize::try_from(p.fd)
        .ok()
        .and_then(|fd| keys().get(fd))
        .and_then(|k| k.load(Ordering::Acquire).checked_sub(1));
    key.map_or(Source::Gone, Source::Kernel)
}
