//! `perf_mmap`'s locked-memory accounting (kernel/events/core.c,
//! `perf_mmap_calc_limits` and the charge after it): the rule that refuses
//! a mapping with EPERM when it would pin more memory than the user may.
//!
//! Each new buffer's pages (the data area's `1 + 2^n`, the AUX area's
//! `2^m`) are charged to the user's `locked_vm` up to
//! `perf_event_mlock_kb` per online CPU; the rest goes to the process's
//! `pinned_vm`, which may not exceed `RLIMIT_MEMLOCK` unless perf is not
//! paranoid (`perf_event_paranoid == -1`) or the caller has
//! `CAP_IPC_LOCK`. A second mapping of an existing buffer is not charged;
//! the last unmap of a buffer gives its charge back. A buffer over memory the
//! caller provides (`EventFd::mmap_over`, perfaux's own: a recorder's memfd)
//! is not charged either: nothing is pinned for it.
//!
//! The limits are the running system's, read at each new buffer as the
//! kernel reads its sysctls. Where perfaux differs: `locked_vm` is the
//! user's across all processes in the kernel, but only this process's
//! perfaux buffers here (other processes' buffers are not visible), so the
//! kernel may refuse a mapping that perfaux allows, never the reverse.
//!
//! The counters are only touched under the core's mmap lock, which orders
//! them; they are atomics so that they can be statics.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use perfaux_abi::errno;

use crate::error::{Error, Result};

/// `perf_event_mlock_kb`'s default, if the sysctl cannot be read.
const DEFAULT_MLOCK_KB: u64 = 512 + 4;
/// `perf_event_paranoid`'s default, if the sysctl cannot be read.
const DEFAULT_PARANOID: i64 = 2;
/// `CAP_IPC_LOCK`.
const CAP_IPC_LOCK: u32 = 14;

/// The user's pages charged by perfaux's buffers (`user->locked_vm`).
static USER_LOCKED: AtomicU64 = AtomicU64::new(0);
/// The process's pages charged past the per-user allowance (`mm->pinned_vm`).
static PINNED: AtomicU64 = AtomicU64::new(0);

/// What limits a new buffer's charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Pages the user may lock for perf without touching `pinned_vm`:
    /// `perf_event_mlock_kb` in pages, times the online CPUs.
    pub user_lock_limit: u64,
    /// `RLIMIT_MEMLOCK` in pages (`u64::MAX` when unlimited).
    pub lock_limit: u64,
    /// `!perf_is_paranoid() || capable(CAP_IPC_LOCK)`: the RLIMIT_MEMLOCK
    /// check does not apply.
    pub exempt: bool,
}

impl Limits {
    /// The running system's limits for the calling thread.
    pub fn current(page_size: u64) -> Limits {
        let mlock_kb = read_sysctl("perf_event_mlock_kb")
            .and_then(|v| u64::try_from(v).ok())
            .unwrap_or(DEFAULT_MLOCK_KB);
        // SAFETY: sysconf has no preconditions.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u64;
        let paranoid = read_sysctl("perf_event_paranoid").unwrap_or(DEFAULT_PARANOID);
        Limits {
            user_lock_limit: mlock_kb.saturating_mul(1024) / page_size * cpus,
            lock_limit: memlock_rlimit().map_or(u64::MAX, |b| b / page_size),
            exempt: paranoid <= -1 || has_cap_ipc_lock(),
        }
    }
}

/// What one buffer was charged, given back when its last mapping goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Charge {
    /// Pages on the user's `locked_vm`.
    pub user: u64,
    /// Pages on the process's `pinned_vm` (the kernel's `mmap_locked`).
    pub pinned: u64,
}

/// `perf_mmap_calc_limits`: how `pages` new pages split between the
/// user's allowance and `pinned_vm`, or `None` (EPERM) when `pinned_vm`
/// would pass RLIMIT_MEMLOCK for a caller who is not exempt.
pub fn calc_limits(user_locked: u64, pinned: u64, pages: u64, limits: &Limits) -> Option<Charge> {
    // perf_event_mlock_kb may have been lowered below what is charged.
    let locked = user_locked
        .min(limits.user_lock_limit)
        .saturating_add(pages);
    let extra = locked.saturating_sub(limits.user_lock_limit);
    let charge = Charge {
        user: pages - extra,
        pinned: extra,
    };
    let ok = pinned.saturating_add(extra) <= limits.lock_limit || limits.exempt;
    ok.then_some(charge)
}

/// The charge for a new buffer of `pages` pages, or EPERM; nothing is
/// charged until [`charge`] (the kernel charges after the allocation
/// succeeded). The caller holds the mmap lock from here to [`charge`].
/// `page_size` is the system's.
pub(crate) fn check(pages: u64, page_size: u64) -> Result<Charge> {
    let limits = Limits::current(page_size);
    calc_limits(
        USER_LOCKED.load(Relaxed),
        PINNED.load(Relaxed),
        pages,
        &limits,
    )
    .ok_or(Error::new(
        errno::EPERM,
        "perf_mmap: pages over perf_event_mlock_kb and RLIMIT_MEMLOCK (no CAP_IPC_LOCK)",
    ))
}

/// Charges a buffer that was allocated after [`check`].
pub(crate) fn charge(c: Charge) {
    USER_LOCKED.fetch_add(c.user, Relaxed);
    PINNED.fetch_add(c.pinned, Relaxed);
}

/// Gives a buffer's charge back at its last unmap (caller holds the mmap
/// lock).
pub(crate) fn uncharge(c: Charge) {
    USER_LOCKED.fetch_sub(c.user, Relaxed);
    PINNED.fetch_sub(c.pinned, Relaxed);
}

/// The charges held now: (`locked_vm`, `pinned_vm`) in pages.
pub fn charged() -> (u64, u64) {
    (USER_LOCKED.load(Relaxed), PINNED.load(Relaxed))
}

fn read_sysctl(name: &str) -> Option<i64> {
    std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `RLIMIT_MEMLOCK`'s soft limit in bytes, `None` when unlimited.
fn memlock_rlimit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer for getrlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 {
        return None;
    }
    (r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

/// Whether the calling thread's effective set has CAP_IPC_LOCK (the
/// kernel's `capable()` looks at the task's, and capabilities are per
/// thread).
fn has_cap_ipc_lock() -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut h = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget with a version-3 header and room for its two data
    // structs; it writes only those.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) };
    r == 0 && d[0].effective & (1 << CAP_IPC_LOCK) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        user_lock_limit: 258,
        lock_limit: 2048,
        exempt: false,
    };

    #[test]
    fn within_the_per_user_allowance_nothing_is_pinned() {
        assert_eq!(
            calc_limits(0, 0, 129, &LIMITS),
            Some(Charge {
                user: 129,
                pinned: 0
            })
        );
        assert_eq!(
            calc_limits(129, 0, 129, &LIMITS),
            Some(Charge {
                user: 129,
                pinned: 0
            })
        );
    }

    #[test]
    fn past_the_allowance_the_rest_is_pinned_up_to_rlimit_memlock() {
        assert_eq!(
            calc_limits(200, 0, 100, &LIMITS),
            Some(Charge {
                user: 58,
                pinned: 42
            })
        );
        // 258 + 2048 pages fit exactly; one more is EPERM.
        assert_eq!(
            calc_limits(0, 0, 258 + 2048, &LIMITS),
            Some(Charge {
                user: 258,
                pinned: 2048
            })
        );
        assert_eq!(calc_limits(0, 0, 258 + 2049, &LIMITS), None);
        assert_eq!(calc_limits(258, 2000, 49, &LIMITS), None);
    }

    #[test]
    fn exempt_callers_are_charged_but_never_refused() {
        let exempt = Limits {
            exempt: true,
            ..LIMITS
        };
        assert_eq!(
            calc_limits(258, 2048, 1000, &exempt),
            Some(Charge {
                user: 0,
                pinned: 1000
            })
        );
    }

    #[test]
    fn a_lowered_sysctl_caps_what_counts_as_charged() {
        // locked_vm above the (lowered) limit counts as the limit itself.
        assert_eq!(
            calc_limits(1000, 0, 10, &LIMITS),
            Some(Charge {
                user: 0,
                pinned: 10
            })
        );
    }
}
