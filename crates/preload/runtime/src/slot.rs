//! A thread's slot in the control area: claimed (CAS from FREE) at the thread's first hook,
//! published TRACING once its events are open, released ENDED when its events are closed;
//! the recorder makes it FREE again for the next thread. A thread that finds none free asks the
//! recorder for more (it makes their rings while the program runs, up to `--max-threads`), or,
//! at the most, waits a little for one the recorder is about to free.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;

use perfaux_preload_abi::{Control, MAX_SLOTS, SLOT_GROW_WAIT, open_error_word, slot};

/// How long a thread waits for the recorder to free a slot whose thread ended.
pub(crate) const SLOT_WAIT: std::time::Duration = std::time::Duration::from_millis(100);
/// The longest sleep between two looks while waiting: a thousand threads started at once
/// wait together, and must leave the CPU to the recorder that makes their slots.
const LONGEST_NAP: std::time::Duration = std::time::Duration::from_millis(2);

/// Claims a slot for the calling thread (see [`claim_slot`]); `None`, counted in the header's
/// `no_slot` for the recorder to say, if every slot stays taken.
pub(crate) fn claim(ctl: &Control) -> Option<usize> {
    let claimed = claim_slot(ctl);
    if claimed.is_none() {
        ctl.header().no_slot.fetch_add(1, Ordering::AcqRel);
    }
    claimed
}

/// The slots whose rings the recorder has made, and the most it will make.
fn slot_counts(ctl: &Control) -> (usize, usize) {
    let h = ctl.header();
    let nslots = (h.nslots.load(Ordering::Acquire) as usize).min(MAX_SLOTS);
    let max = (h.slots_max.load(Ordering::Acquire) as usize).min(MAX_SLOTS);
    (nslots, max)
}

/// The first FREE slot below `nslots`, claimed (a slot is read before the CAS: with thousands
/// of slots held, a locked instruction each would make every thread start slow).
fn claim_free(ctl: &Control, nslots: usize) -> Option<usize> {
    (0..nslots).find(|&i| {
        let state = &ctl.slot(i).state;
        state.load(Ordering::Relaxed) == slot::FREE
            && state
                .compare_exchange(
                    slot::FREE,
                    slot::CLAIMED,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
    })
}

/// Claims a FREE slot. If none is, and the recorder may make more (`nslots` below
/// `slots_max`), asks for one (`slots_wanted`) and waits for it, up to [`SLOT_GROW_WAIT`]. At
/// the most slots, if a slot's thread ended (the recorder frees it at its next drain, a
/// millisecond or so: a program that makes short threads one after another can end them
/// faster) or its process did (`_exit`, a crash: the recorder sees that through a pidfd,
/// [`held_by_gone_process`]), waits for it, up to [`SLOT_WAIT`]; not when every slot's
/// thread still runs. Never once the recording closed or the recorder is gone.
fn claim_slot(ctl: &Control) -> Option<usize> {
    let start = std::time::Instant::now();
    let mut asked = false;
    let mut nap = std::time::Duration::from_micros(100);
    // Looked for at the first miss and every few looks after (a few syscalls a slot):
    // another thread may take the slot freed meanwhile.
    let mut gone_held = false;
    let mut tries = 0u32;
    let claimed = loop {
        let (nslots, max) = slot_counts(ctl);
        if let Some(i) = claim_free(ctl, nslots) {
            break Some(i);
        }
        let growing = nslots < max && !UNREACHABLE.load(Ordering::Relaxed);
        if growing && !asked {
            ctl.header().slots_wanted.fetch_add(1, Ordering::AcqRel);
            asked = true;
        }
        let to_be_freed = (0..nslots).any(|i| {
            let s = ctl.slot(i);
            s.state.load(Ordering::Acquire) == slot::ENDED
                && s.event_id.load(Ordering::Acquire) != 0
                && s.open_error.load(Ordering::Acquire) == 0
        });
        if !growing && !to_be_freed && tries.is_multiple_of(16) {
            gone_held = (0..nslots).any(|i| held_by_gone_process(ctl, i));
        }
        tries += 1;
        let limit = if growing { SLOT_GROW_WAIT } else { SLOT_WAIT };
        if !(growing || to_be_freed || gone_held)
            || start.elapsed() >= limit
            || crate::recording_closed(ctl)
            || crate::recorder_alive::gone()
        {
            break None;
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(LONGEST_NAP);
    };
    if asked {
        ctl.header().slots_wanted.fetch_sub(1, Ordering::AcqRel);
    }
    claimed
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

/// Whether a thread of this process found a slot's rings it could not open: its threads ask
/// the recorder for no more slots (they would fail the same way).
static UNREACHABLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Gives slot `i`, claimed but never opened, straight back (FREE) because this process cannot
/// open its rings (`errno`): counted in the header for the recorder to say why.
pub(crate) fn unreachable(ctl: &Control, i: usize, errno: i32) {
    UNREACHABLE.store(true, Ordering::Relaxed);
    let h = ctl.header();
    h.rings_unreachable.fetch_add(1, Ordering::AcqRel);
    h.rings_errno.store(errno as u32 as u64, Ordering::Release);
    let s = ctl.slot(i);
    for w in &s.words()[1..] {
        w.store(0, Ordering::Relaxed);
    }
    s.state.store(slot::FREE, Ordering::Release);
}

/// Gives slot `i` back: its thread writes its memory no more (its events are closed and
/// unmapped, or were never opened); the recorder takes its last bytes and frees it.
pub(crate) fn release(ctl: &Control, i: usize) {
    ctl.slot(i).state.store(slot::ENDED, Ordering::Release);
}
