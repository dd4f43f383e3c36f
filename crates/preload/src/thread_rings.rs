//! The rings of the program's thread slots, made here in the recorder: the memfds of the first
//! [`crate::program::SLOTS`] before the program starts (inherited by it), the rings of
//! [`crate::program::RINGS_AT_START`] of them then, the others' while it runs, as its threads
//! take them ([`grown_to`]), in the memfds the program already holds; past those, new memfds,
//! which the runtime opens through `/proc/RECORDER/fd/N`, as it opens any memfd a process of
//! the program closed.
//!
//! What a slot costs: two descriptors in the recorder (its soft RLIMIT_NOFILE is raised to the
//! hard limit, [`raise_nofile`]; the program gets its own back before it runs, and keeps none
//! of a grown slot's), and once its rings are made, two mappings and the pages its threads
//! write (tmpfs allocates a page at its first write: a slot of a short thread costs what the
//! thread wrote). Making a slot's rings and unmaking them at the end cost the recorder about
//! 50 us (2026-11-29, AMD EPYC KVM guest): 64 made before a one-thread program were 3 ms of
//! a short recording's CPU time.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use perfaux_ring::{AuxMmap, PerfMmap, RingLayout, RingMemory};

/// The most slots kept free beside the threads that wait: a program that starts threads in a
/// burst finds rings made before it asks. A program of few threads has fewer kept ([`spare`]):
/// a slot made costs the recorder its rings' setup and teardown, which a short program's
/// recording would pay for nothing.
const SPARE: usize = 16;

/// Slots kept free while `held` are held: half as many, at least one (the next thread's), at
/// most [`SPARE`].
fn spare(held: usize) -> usize {
    (held / 2).clamp(1, SPARE)
}

/// The rings of one thread slot.
pub(crate) struct SlotRings {
    pub(crate) data: PerfMmap,
    pub(crate) aux: AuxMmap,
    /// The memories (their memfds handed to the program's threads).
    pub(crate) mems: (Arc<RingMemory>, Arc<RingMemory>),
}

/// An OS error with what failed in front (the session's and the rings' setup).
pub(crate) fn os_err(what: &str, e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("{what}: {e}"))
}

/// The two memfds of a slot whose rings are not made yet ([`SlotRings::memfds`]).
pub(crate) type SlotMemfds = (OwnedFd, OwnedFd);

impl SlotRings {
    /// A slot's data ring of `data_pages` and AUX ring of `aux_pages`, each a sealed memfd.
    pub(crate) fn new(data_pages: usize, aux_pages: usize) -> std::io::Result<SlotRings> {
        SlotRings::in_memfds(SlotRings::memfds()?, data_pages, aux_pages)
    }

    /// The memfds of a slot, empty: handed to the program before its rings are wanted, they
    /// cost a descriptor each and no memory, mapping or teardown until
    /// [`SlotRings::in_memfds`] makes the rings.
    pub(crate) fn memfds() -> std::io::Result<SlotMemfds> {
        let memfd = |what| RingMemory::memfd().map_err(|e| os_err(what, e));
        Ok((memfd("data ring")?, memfd("AUX ring")?))
    }

    /// [`SlotRings::new`] in the memfds `fds` ([`SlotRings::memfds`]).
    pub(crate) fn in_memfds(
        fds: SlotMemfds,
        data_pages: usize,
        aux_pages: usize,
    ) -> std::io::Result<SlotRings> {
        let d = Arc::new(
            RingMemory::shared_in(
                fds.0,
                RingLayout::new(data_pages, 0).map_err(|e| os_err("data ring", e))?,
            )
            .map_err(|e| os_err("data ring", e))?,
        );
        let a = Arc::new(
            RingMemory::shared_in(
                fds.1,
                RingLayout::new(0, aux_pages).map_err(|e| os_err("AUX ring", e))?,
            )
            .map_err(|e| os_err("AUX ring", e))?,
        );
        Ok(SlotRings {
            data: PerfMmap::new(d.clone()),
            aux: AuxMmap::new(a.clone()).map_err(|e| os_err("AUX ring", e))?,
            mems: (d, a),
        })
    }

    /// Bytes the two rings span.
    pub(crate) fn size(&self) -> u64 {
        (self.mems.0.layout().total_len() + self.mems.1.layout().total_len()) as u64
    }

    /// Bytes of memory the two rings hold now: their memfds' allocated pages.
    pub(crate) fn resident(&self) -> u64 {
        [&self.mems.0, &self.mems.1]
            .iter()
            .filter_map(|m| m.shared_fd())
            .filter_map(|fd| rustix::fs::fstat(fd).ok())
            .map(|st| st.st_blocks as u64 * 512)
            .sum()
    }
}

/// How many slots the recorder should have, holding `nslots` of which `held` are not FREE, with
/// `wanted` threads waiting for one, at most `max`: unchanged while more are free than wait
/// (by [`spare`]); else room for every waiting thread and half again the held ones (or
/// [`spare`]), so a burst of a thousand threads takes a few passes, not one a thread.
pub(crate) fn grown_to(nslots: usize, held: usize, wanted: usize, max: usize) -> usize {
    let free = nslots.saturating_sub(held);
    let spare = spare(held);
    if free >= wanted.saturating_add(spare) || nslots >= max {
        return nslots;
    }
    let want = held
        .saturating_add(wanted)
        .saturating_add(spare.max(held / 2));
    want.min(max).max(nslots)
}

/// Raises this process's soft RLIMIT_NOFILE to its hard limit (two descriptors a slot: a
/// thousand threads need more than the usual soft 1024); the limits as they were, for the
/// program to get back, if they changed.
pub(crate) fn raise_nofile() -> Option<libc::rlimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the rlimit given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 || r.rlim_cur >= r.rlim_max {
        return None;
    }
    let raised = libc::rlimit {
        rlim_cur: r.rlim_max,
        rlim_max: r.rlim_max,
    };
    // SAFETY: a valid rlimit; raising the soft limit up to the hard one needs no privilege.
    (unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0).then_some(r)
}

/// Sets RLIMIT_NOFILE back to `r` (in the program's process before exec: async-signal-safe).
pub(crate) fn restore_nofile(r: &libc::rlimit) -> std::io::Result<()> {
    // SAFETY: a valid rlimit; lowering the soft limit needs no privilege.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_stay_as_they_are_while_more_are_free_than_wait() {
        assert_eq!(grown_to(64, 0, 0, 8192), 64);
        assert_eq!(grown_to(64, 48, 0, 8192), 64);
        assert_eq!(grown_to(64, 40, 8, 8192), 64);
    }

    #[test]
    fn a_burst_gets_a_slot_for_each_waiting_thread_and_room_beyond() {
        // Every slot held, 900 threads waiting: one pass makes room for all of them.
        let to = grown_to(64, 64, 900, 8192);
        assert!(to >= 64 + 900 + SPARE, "{to}");
        // Few free, none waiting: made before any thread must wait.
        assert_eq!(grown_to(64, 60, 0, 8192), 60 + SPARE.max(30));
        assert_eq!(grown_to(1000, 990, 0, 8192), 990 + 495);
    }

    /// A program of one thread keeps the two slots made before it started: its own and the
    /// next thread's; a second thread makes one more, a handful a few more.
    #[test]
    fn a_program_of_few_threads_makes_few_slots() {
        assert_eq!(grown_to(2, 0, 0, 8192), 2);
        assert_eq!(grown_to(2, 1, 0, 8192), 2);
        assert_eq!(grown_to(2, 2, 0, 8192), 3);
        assert_eq!(grown_to(3, 2, 1, 8192), 4);
        assert_eq!(grown_to(8, 8, 0, 8192), 12);
        // Where waiting threads are, each gets one, and the spare beyond.
        assert_eq!(grown_to(2, 2, 6, 8192), 9);
    }

    #[test]
    fn never_past_the_most_and_never_fewer() {
        assert_eq!(grown_to(64, 64, 900, 100), 100);
        assert_eq!(grown_to(100, 100, 900, 100), 100);
        assert_eq!(grown_to(200, 200, 5, 100), 200);
        assert_eq!(grown_to(64, 64, usize::MAX, 8192), 8192);
    }

    #[test]
    fn a_rings_memory_is_its_written_pages() {
        let r = SlotRings::new(1, 16).unwrap();
        assert_eq!(r.size(), (2 + 17) * 4096);
        // The user pages, written when the rings were made.
        let before = r.resident();
        assert_eq!(before, 2 * 4096, "{before}");
    }
}
