//! perf_mmap's locked-memory accounting (perf_mmap_calc_limits(): over the
//! limit -> -EPERM), through the real
//! mmap path. One test: the charges are process-wide, and this file is its
//! own process, so nothing else maps buffers meanwhile.

mod common;

use common::*;
use perfaux_abi::consts::*;
use perfaux_core::{MlockLimits as Limits, mlock_charged as charged};
use perfaux_core::{Prot, page_size};
use perfaux_pmus::UEVENT_AUX_TYPE;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_V3: u32 = 0x2008_0522;
const CAP_IPC_LOCK: u32 = 14;

fn caps() -> [CapData; 2] {
    let mut h = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    let mut d = [CapData::default(); 2];
    // SAFETY: a version-3 header and room for its two data structs.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) };
    assert_eq!(r, 0, "capget");
    d
}

/// Sets this thread's effective capability sets (capabilities are per
/// thread: the other threads of the process keep theirs).
fn set_caps(d: [CapData; 2]) {
    let mut h = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    // SAFETY: a version-3 header and its two data structs, read only.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()) };
    assert_eq!(r, 0, "capset");
}

fn memlock() -> libc::rlimit {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) }, 0);
    r
}

fn set_memlock(r: libc::rlimit) {
    // SAFETY: a valid rlimit; lowering the soft limit needs no privilege.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &r) }, 0);
}

/// An event on this thread, disabled.
fn open(type_: u32, config: u64) -> perfaux_core::EventFd {
    let a = attr(type_, config);
    perfaux_core::perf_event_open_attr(&a, perfaux_core::Target::current(), -1, -1, 0).unwrap()
}

#[test]
fn new_buffers_are_charged_until_their_last_unmap_and_refused_past_the_limits() {
    perfaux_pmus::register();
    let page = page_size() as u64;
    assert_eq!(charged(), (0, 0));

    // Data area 1 + 8 pages, AUX area 4 pages: well inside the per-user
    // allowance (perf_event_mlock_kb per CPU, 516 KiB by default).
    let e = open(UEVENT_AUX_TYPE, 0);
    let m = e.mmap(0, 1 + 8, Prot::READ_WRITE).unwrap();
    assert_eq!(charged(), (9, 0));
    let again = e.mmap(0, 1 + 8, Prot::READ_WRITE).unwrap();
    assert_eq!(charged(), (9, 0), "a second mapping charges nothing");
    m.set_aux_area(9 * page, 4 * page).unwrap();
    let aux = e.mmap(9, 4, Prot::READ_WRITE).unwrap();
    assert_eq!(charged(), (13, 0));
    drop(aux);
    assert_eq!(charged(), (9, 0), "the AUX area's last unmap");
    drop(m);
    assert_eq!(charged(), (9, 0), "one data mapping is left");
    drop(again);
    assert_eq!(charged(), (0, 0), "the data area's last unmap");

    // A buffer reached through SET_OUTPUT after its last unmap is not
    // mapped again (the kernel's atomic_inc_not_zero): the event gets a
    // buffer of its own, charged once and given back once.
    let b = open(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY);
    let m = e.mmap(0, 1 + 8, Prot::READ_WRITE).unwrap();
    b.set_output(e.as_raw()).unwrap();
    let old = std::sync::Arc::as_ptr(m.buffer());
    drop(m);
    assert_eq!(charged(), (0, 0));
    let mb = b.mmap(0, 1 + 8, Prot::READ_WRITE).unwrap();
    assert!(!std::ptr::eq(std::sync::Arc::as_ptr(mb.buffer()), old));
    assert_eq!(charged(), (9, 0), "the new buffer is charged");
    drop(mb);
    assert_eq!(charged(), (0, 0), "and given back once");

    // Past the allowance the rest is pinned, and pinned pages over
    // RLIMIT_MEMLOCK are EPERM unless perf is not paranoid or the thread
    // has CAP_IPC_LOCK. Lower the limit to 16 pages and drop CAP_IPC_LOCK
    // from this thread's effective set.
    let saved_limit = memlock();
    let saved_caps = caps();
    set_memlock(libc::rlimit {
        rlim_cur: 16 * page,
        rlim_max: saved_limit.rlim_max,
    });
    let mut dropped = saved_caps;
    dropped[0].effective &= !(1 << CAP_IPC_LOCK);
    set_caps(dropped);
    let limits = Limits::current(page);
    assert_eq!(limits.lock_limit, 16);
    let data_pages = (limits.user_lock_limit + 17).next_power_of_two() as usize;
    let pinned = (1 + data_pages as u64) - limits.user_lock_limit;
    let big = open(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY);
    let refused = big.mmap(0, 1 + data_pages, Prot::READ_WRITE);
    if limits.exempt {
        // perf_event_paranoid is -1 here: the RLIMIT_MEMLOCK check is off.
        assert!(refused.is_ok());
        assert_eq!(charged(), (limits.user_lock_limit, pinned));
        drop(refused);
    } else {
        assert_eq!(refused.err().map(|e| e.errno), Some(libc::EPERM));
        assert_eq!(charged(), (0, 0), "a refused mapping charges nothing");
    }

    // Memory the caller provides (a recorder's memfd, `mmap_over`) is none the kernel would
    // pin: the same buffer over it is neither refused nor charged.
    let over = open(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY);
    let layout = perfaux_ring::RingLayout::new(data_pages, 0).unwrap();
    let mem = std::sync::Arc::new(perfaux_ring::RingMemory::shared(layout).unwrap());
    let m = over
        .mmap_over(0, 1 + data_pages, Prot::READ_WRITE, mem)
        .unwrap();
    assert_eq!(charged(), (0, 0), "provided memory is not charged");
    drop(m);
    assert_eq!(charged(), (0, 0));

    // The caller's own capabilities back (root's include CAP_IPC_LOCK): if
    // they exempt it, the same mapping is allowed and pins the rest.
    set_caps(saved_caps);
    let limits = Limits::current(page);
    let again = big.mmap(0, 1 + data_pages, Prot::READ_WRITE);
    if limits.exempt {
        assert!(again.is_ok());
        assert_eq!(charged(), (limits.user_lock_limit, pinned));
    } else {
        assert_eq!(again.as_ref().err().map(|e| e.errno), Some(libc::EPERM));
    }
    drop(again);
    assert_eq!(charged(), (0, 0));

    // rb_alloc_aux's ENOMEM for an AUX page array over one MAX_PAGE_ORDER
    // allocation comes after the accounting: an exempt caller gets ENOMEM,
    // any other EPERM first (with the 16-page limit still in force).
    let e = open(UEVENT_AUX_TYPE, 0);
    let m = e.mmap(0, 3, Prot::READ_WRITE).unwrap();
    let pages = 1u64 << 20;
    m.set_aux_area(3 * page, pages * page).unwrap();
    let want = if limits.exempt {
        libc::ENOMEM
    } else {
        libc::EPERM
    };
    let got = e.mmap(3, pages as usize, Prot::READ_WRITE);
    assert_eq!(got.err().map(|e| e.errno), Some(want));
    drop(m);
    assert_eq!(charged(), (0, 0));
    set_memlock(saved_limit);
}
