//! A thread's slot in the control area: claimed (CAS from FREE) at the thread's first hook,
//! published TRACING once its events are open, released ENDED when its events are closed;
//! the recorder makes it FREE again for the next thread. A thread that finds none free waits a
//! little for one the recorder is about to free.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;

use perfaux_preload_abi::{Control, MAX_SLOTS, open_error_word, slot};

/// How long a thread waits for the recorder to free a slot whose thread ended.
pub(crate) const SLOT_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Claims a slot for the calling thread (see [`claim_slot`]); `None`, counted in the header's
/// `no_slot` for the recorder to say, if every slot stays taken.
pub(crate) fn claim(ctl: &Control) -> Option<usize> {
    let nslots = (ctl.header().nslots.load(Ordering::Acquire) as usize).min(MAX_SLOTS);
    let claimed = claim_slot(ctl, nslots);
    if claimed.is_none() {
        ctl.header().no_slot.fetch_add(1, Ordering::AcqRel);
    }
    claimed
}

/// Claims a FREE slot. If none is, but a slot's thread ended (the recorder frees it at its next
/// drain, a millisecond or so: a program that makes short threads one after another can end
/// them faster) or its process did (`_exit`, a crash: the recorder sees that through a pidfd,
/// [`held_by_gone_process`]), waits for it, up to [`SLOT_WAIT`]; not when every slot's thread
/// still runs.
fn claim_slot(ctl: &Control, nslots: usize) -> Option<usize> {
    let start = std::time::Instant::now();
    // Looked for at the first miss and every few milliseconds after (a few syscalls a slot):
    // another thread may take the slot freed meanwhile.
    let mut gone_held = false;
    let mut tries = 0u32;
    loop {
        let claimed = (0..nslots).find(|&i| {
            ctl.slot(i)
                .state
                .compare_exchange(
                    slot::FREE,
                    slot::CLAIMED,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
        });
        if claimed.is_some() {
            return claimed;
        }
        let to_be_freed = (0..nslots).any(|i| {
            let s = ctl.slot(i);
            s.state.load(Ordering::Acquire) == slot::ENDED
                && s.event_id.load(Ordering::Acquire) != 0
                && s.open_error.load(Ordering::Acquire) == 0
        });
        if !to_be_freed && tries.is_multiple_of(16) {
            gone_held = (0..nslots).any(|i| held_by_gone_process(ctl, i));
        }
        tries += 1;
        let to_be_freed = to_be_freed || gone_held;
        if !to_be_freed
            || start.elapsed() >= SLOT_WAIT
            || crate::recording_closed(ctl)
            || crate::recorder_alive::gone()
        {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// Whether slot `i` is TRACING for a process that has exited (a zombie too: no thread of it is
/// left to end the slot), of this pid namespace, which the recorder watches too (it frees such
/// a slot within a pass).
fn held_by_gone_process(ctl: &Control, i: usize) -> bool {
    let s = ctl.slot(i);
    let ns = crate::pid_ns();
    if s.state.load(Ordering::Acquire) != slot::TRACING
        || ns == 0
        || s.pid_ns.load(Ordering::Acquire) != ns
        || ctl.header().watched_pid_ns.load(Ordering::Acquire) != ns
    {
        return false;
    }
    let pid = libc::pid_t::try_from(s.pid.load(Ordering::Acquire));
    let Some(pid) = pid.ok().filter(|&p| p > 0) else {
        return false;
    };
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let Ok(fd) = i32::try_from(fd) else {
        return false;
    };
    if fd < 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    // SAFETY: `fd` was just opened and is owned here alone.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd that lives across the call; no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & libc::POLLIN != 0
}

/// Writes who holds slot `i`, before it is published: the process (the kernel's word, not the
/// fork handler's: a child made without fork handlers, `_Fork` or a raw clone, that opens a
/// slot is named as itself, which the recorder watches for its end), the thread's name and
/// when it opened its events (its PERF_RECORD_COMM), its image's start and pid namespace, and
/// the fork that made the process.
pub(crate) fn write_identity(ctl: &Control, i: usize) {
    let s = ctl.slot(i);
    // SAFETY: getpid has no preconditions.
    s.pid
        .store(unsafe { libc::getpid() } as u64, Ordering::Relaxed);
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes (NUL included) into the buffer given.
    if unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) } == 0 {
        name[15] = 0;
        for (w, bytes) in s.comm.iter().zip(name.chunks_exact(8)) {
            let v = u64::from_ne_bytes(bytes.try_into().unwrap_or_default());
            w.store(v, Ordering::Relaxed);
        }
    }
    s.open_time
        .store(perfaux_swtrace::clock::monotonic_ns(), Ordering::Relaxed);
    s.image_time.store(crate::image_time(), Ordering::Relaxed);
    s.pid_ns.store(crate::pid_ns(), Ordering::Relaxed);
    crate::lineage::write_slot(s);
}

/// Says in slot `i` that step `step` ([`perfaux_preload_abi::open_step`]) of event `k` failed
/// with `errno` (the recorder names them at the end).
pub(crate) fn set_open_error(ctl: &Control, i: usize, step: u64, k: usize, errno: i32) {
    ctl.slot(i)
        .open_error
        .store(open_error_word(step, k, errno), Ordering::Release);
}

/// Publishes slot `i`: its thread's events are open and every word of it is written.
pub(crate) fn publish(ctl: &Control, i: usize) {
    ctl.slot(i).state.store(slot::TRACING, Ordering::Release);
}

/// Gives slot `i` back: its thread writes its memory no more (its events are closed and
/// unmapped, or were never opened); the recorder takes its last bytes and frees it.
pub(crate) fn release(ctl: &Control, i: usize) {
    ctl.slot(i).state.store(slot::ENDED, Ordering::Release);
}
