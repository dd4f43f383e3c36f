//! A traced thread's events over its slot's memory: opened as `perf record` opens them (the
//! trace event owns the buffer, mapped over the slot's ring memfds; the others in its group
//! or redirected into it), closed before the slot is released.

use std::sync::atomic::Ordering;

use perfaux_abi::attr::AttrFlags;
use perfaux_core::{EventFd, Mmap, Prot, Target, page_size, perf_event_open_attr};
use perfaux_preload_abi::{Control, open_step};
use std::sync::Arc;

use perfaux_ring::RingMemory;

use crate::ring_maps::Which;

/// The thread's events and mappings over its slot's memory.
pub(crate) struct Traced {
    /// `None` once dropped.
    events: Option<TracedEvents>,
    slot: usize,
    /// The process that opened them: a forked child that kept its parent's (a fork from a
    /// signal handler that interrupted the thread's start) neither closes them nor ends the
    /// parent's slot, which the parent's thread still writes.
    pid: i32,
}

/// Fields drop in order: the mappings (held for their life; the memory stays mapped for the
/// slot's next thread in this process, `ring_maps`) before the events.
struct TracedEvents {
    _aux: Mmap,
    _data: Mmap,
    /// The other events (probes, samplers, the uevent stream), redirected into this buffer.
    members: Vec<EventFd>,
    fd: EventFd,
}

impl Drop for Traced {
    /// The events are disabled (the trace's last PERF_RECORD_AUX written, aux_head published),
    /// unmapped and closed; only then is the slot ENDED: the recorder takes its last bytes and
    /// gives the slot to the next thread, so nothing of this one may write its memory after.
    fn drop(&mut self) {
        // A thread cancelled while it traced ends here, its cancellation pending: the closes
        // below must not act on it (the slot would never be ENDED).
        let _no_cancel = crate::no_cancel::NoCancel::new();
        // SAFETY: getpid has no preconditions.
        if self.pid != unsafe { libc::getpid() } {
            std::mem::forget(self.events.take());
            return;
        }
        if let Some(ev) = self.events.take() {
            wait_for_room_to_say_loss(&ev.fd);
            for m in &ev.members {
                let _ = m.disable(0);
            }
            let _ = ev.fd.disable(0);
            drop(ev);
        }
        if let Some(ctl) = crate::control() {
            crate::slot::release(&ctl, self.slot);
        }
    }
}

/// Room in the data area for the records a thread's end writes: its trace's last
/// PERF_RECORD_AUX and the PERF_RECORD_LOST of what it dropped (each with its `sample_id`).
const END_RECORDS_ROOM: u64 = 512;

/// A thread that dropped records (uevents into a full data area, refused with ENOSPC) has them
/// said in a PERF_RECORD_LOST at its events' close, which needs room in the data area: the
/// recorder, which drains every millisecond, is given up to [`crate::slot::SLOT_WAIT`] to make
/// it (the kernel writes no such record; its count would wait for a next record that never
/// comes). No wait once the recording ended or the recorder is gone.
fn wait_for_room_to_say_loss(fd: &EventFd) {
    let Some(rb) = fd.event().buffer() else {
        return;
    };
    let data = rb.data();
    let start = std::time::Instant::now();
    while data.lost() != 0
        && data.data_space() < END_RECORDS_ROOM
        && start.elapsed() < crate::slot::SLOT_WAIT
        && !crate::control().is_none_or(|c| crate::recording_closed(&c))
        && !crate::recorder_alive::gone()
    {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

impl Traced {
    /// The slot the thread traces into.
    pub(crate) fn slot(&self) -> usize {
        self.slot
    }

    /// Ends the thread's trace transaction (its event disabled: PERF_RECORD_AUX written and
    /// aux_head published into the recorder's memory), the events left open.
    pub(crate) fn end_transaction(&self) {
        if let Some(ev) = &self.events {
            let _ = ev.fd.disable(0);
        }
    }
}

/// Claims a slot and opens this thread's events, the trace event over the slot's memory.
pub(crate) fn open(ctl: &Control) -> Option<Traced> {
    if crate::recording_closed(ctl) || crate::recorder_alive::gone() {
        return None;
    }
    crate::start_process(ctl);
    let i = crate::slot::claim(ctl)?;
    let mems = match slot_rings(ctl, i) {
        Ok(m) => m,
        Err(errno) => {
            // Nothing was opened on the slot: it goes back to the next thread, and this one
            // is counted untraced with the reason.
            crate::slot::unreachable(ctl, i, errno);
            return None;
        }
    };
    let t = open_slot(ctl, i, mems);
    if t.is_none() {
        crate::slot::release(ctl, i);
    }
    t
}

/// Slot `i`'s data and AUX ring memories: the recorder's memfds (inherited, or through
/// /proc/RECORDER/fd), mapped by this process for an earlier thread of the slot, or now; the
/// errno if this process cannot open or map them (a process that changed its credentials, or
/// runs in a pid and mount namespace of its own with a /proc that does not show the recorder).
fn slot_rings(ctl: &Control, i: usize) -> Result<(Arc<RingMemory>, Arc<RingMemory>), i32> {
    let ring = |word: &std::sync::atomic::AtomicU64, which: Which| {
        let word = word.load(Ordering::Acquire);
        crate::ring_maps::ring(i, which, word, || {
            let fd = crate::memfds::ring(word)?;
            RingMemory::open_shared(fd).map_err(|_| libc::EINVAL)
        })
    };
    let mems = &ctl.header().ring_fds[i];
    Ok((ring(&mems.data, Which::Data)?, ring(&mems.aux, Which::Aux)?))
}

/// Opens the thread's events in slot `i`, the trace event over the slot's ring memories, and
/// publishes the slot; `None` after saying in the slot which step failed.
fn open_slot(
    ctl: &Control,
    i: usize,
    (data_mem, aux_mem): (Arc<RingMemory>, Arc<RingMemory>),
) -> Option<Traced> {
    let tid = perfaux_core::gettid();
    ctl.slot(i).tid.store(tid as u64, Ordering::Relaxed);
    let events = crate::events::all();
    let einval = || perfaux_core::Error::new(libc::EINVAL, "the recorder's event table");
    let owner = events
        .iter()
        .position(|e| e.attr.type_ == perfaux_pmus::SWTRACE_TYPE)
        .ok_or_else(einval);
    let owner = failed(ctl, i, 0, open_step::OPEN, owner)?;
    let data_pages = data_mem.layout().data_size / page_size();
    let aux_pages = aux_mem.layout().aux_size / page_size();
    // As perf record opens them (ThreadRing::open): each event in order, a member with its
    // leader's fd as group_fd; the trace event owns the buffer, the others write into it.
    let mut fds: Vec<EventFd> = Vec::with_capacity(events.len());
    for (k, e) in events.iter().enumerate() {
        let group_fd = if e.leader == k {
            -1
        } else {
            let leader = fds.get(e.leader).map(EventFd::as_raw).ok_or_else(einval);
            failed(ctl, i, k, open_step::OPEN, leader)?
        };
        let mut attr = e.attr;
        // Enabled once the buffer is mapped.
        attr.flags |= AttrFlags::DISABLED;
        let opened = perf_event_open_attr(&attr, Target::Thread(tid), -1, group_fd, 0);
        fds.push(failed(ctl, i, k, open_step::OPEN, opened)?);
    }
    let fd = fds.remove(owner);
    let data = fd.mmap_over(0, 1 + data_pages, Prot::READ_WRITE, data_mem);
    let data = failed(ctl, i, owner, open_step::MAP_DATA, data)?;
    let page = page_size() as u64;
    let aux_off = (1 + data_pages as u64) * page;
    let placed = data.set_aux_area(aux_off, aux_pages as u64 * page);
    failed(ctl, i, owner, open_step::MAP_AUX, placed)?;
    let prot = if ctl.header().overwrite.load(Ordering::Acquire) != 0 {
        Prot::READ_ONLY
    } else {
        Prot::READ_WRITE
    };
    let aux = fd.mmap_over(aux_off / page, aux_pages, prot, aux_mem);
    let aux = failed(ctl, i, owner, open_step::MAP_AUX, aux)?;
    // The members, in event order without the owner.
    let members = (0..events.len()).filter(|&k| k != owner);
    for (m, k) in fds.iter().zip(members.clone()) {
        failed(ctl, i, k, open_step::SET_OUTPUT, m.set_output(fd.as_raw()))?;
    }
    crate::slot::write_identity(ctl, i);
    ctl.slot(i).event_id.store(fd.id(), Ordering::Relaxed);
    for k in 0..events.len() {
        let id = match k.cmp(&owner) {
            std::cmp::Ordering::Less => fds[k].id(),
            std::cmp::Ordering::Equal => fd.id(),
            std::cmp::Ordering::Greater => fds[k - 1].id(),
        };
        ctl.slot_event_id(i, k).store(id, Ordering::Relaxed);
    }
    crate::slot::publish(ctl, i);
    for (m, k) in fds.iter().zip(members) {
        failed(ctl, i, k, open_step::ENABLE, m.enable(0))?;
    }
    failed(ctl, i, owner, open_step::ENABLE, fd.enable(0))?;
    Some(Traced {
        events: Some(TracedEvents {
            _aux: aux,
            _data: data,
            members: fds,
            fd,
        }),
        slot: i,
        // SAFETY: getpid has no preconditions.
        pid: unsafe { libc::getpid() },
    })
}

/// `r`'s value; or, if it failed, `None` after saying which event `k` and step failed in
/// slot `i`'s OPEN_ERROR word (the recorder names them and the errno at the end).
fn failed<T>(
    ctl: &Control,
    i: usize,
    k: usize,
    step: u64,
    r: perfaux_core::Result<T>,
) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(err) => {
            crate::slot::set_open_error(ctl, i, step, k, err.errno);
            None
        }
    }
}
