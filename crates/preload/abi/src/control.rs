//! [`Control`], a view of a mapped control area, and the protocols over it both sides share:
//! the rings of objects and children, the bounded byte copies.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use crate::area::{ControlArea, ControlHeader, SharedChild, SharedEvent, SharedObject, Slot};
use crate::{
    ChildEntry, MAX_CHILDREN, MAX_EVENTS, MAX_OBJECTS, MAX_SLOTS, NAMED_PROBE, OBJECT_WAIT,
    ObjectEntry, PATH_MAX, PROBE_NAME_MAX, PROBE_NAMES_SIZE,
};

/// A view of a mapped control area. The other process writes the same memory: every word is
/// read and written atomically, every byte array a byte at a time within its bounds, and an
/// index the other side wrote is bounded by the reader's own counts before it is used.
#[derive(Clone, Copy, Debug)]
pub struct Control {
    area: NonNull<ControlArea>,
}

// SAFETY: every access through Control is atomic (words and bytes); the mapping outlives every
// Control (the owner keeps it for the process's life on the runtime side, for the session's on
// the recorder side).
unsafe impl Send for Control {}
// SAFETY: as for Send.
unsafe impl Sync for Control {}

/// Copies `bytes` into `dst` (as many as fit).
pub fn copy_in(dst: &[AtomicU8], bytes: &[u8]) {
    for (d, &b) in dst.iter().zip(bytes) {
        d.store(b, Ordering::Relaxed);
    }
}

/// The first `len` bytes of `src` (at most all of them).
pub fn copy_out(src: &[AtomicU8], len: usize) -> Vec<u8> {
    src[..len.min(src.len())]
        .iter()
        .map(|b| b.load(Ordering::Relaxed))
        .collect()
}

impl Control {
    /// A view of the [`crate::total_len`] mapped bytes at `base`.
    ///
    /// # Panics
    /// If `base` is null.
    ///
    /// # Safety
    /// `base` is page aligned and maps at least [`crate::total_len`] bytes for as long as the view
    /// and its copies are used.
    pub unsafe fn new(base: *mut u8) -> Control {
        debug_assert!(base.cast::<ControlArea>().is_aligned());
        Control {
            area: NonNull::new(base.cast()).expect("a mapped control area"),
        }
    }

    /// The whole area.
    #[inline]
    pub fn area(&self) -> &ControlArea {
        // SAFETY: the mapping is aligned and holds total_len() = size_of::<ControlArea>()
        // bytes while the view is used (Control::new's contract); every byte of ControlArea
        // lies in an atomic, so shared references to it stay valid while the other process
        // writes it.
        unsafe { self.area.as_ref() }
    }

    /// The header.
    #[inline]
    pub fn header(&self) -> &ControlHeader {
        &self.area().header
    }

    /// Slot `i`.
    ///
    /// # Panics
    /// If `i >= MAX_SLOTS` (a bug in the caller: indices come from its own bounded counts).
    #[inline]
    pub fn slot(&self, i: usize) -> &Slot {
        &self.area().slots[i]
    }

    /// The probe table word of probe id `id` (`None` past the table).
    #[inline]
    pub fn probe_word(&self, id: u32) -> Option<&AtomicU64> {
        let i = (id as usize).checked_sub(1)?;
        self.area().probes.get(i)
    }

    /// Writes `name` (cut to [`PROBE_NAME_MAX`] bytes) into the area's probe names and returns
    /// the probe word that names it ([`NAMED_PROBE`] | its offset), to be stored into the
    /// probe's word with Release after this returns; `None` when the names are full.
    pub fn write_probe_name(&self, name: &[u8]) -> Option<u64> {
        let name = &name[..name.len().min(PROBE_NAME_MAX)];
        let need = 2 + name.len() as u64;
        let names = &self.area().probe_names;
        let at = names.used.fetch_add(need, Ordering::AcqRel);
        let end = at.checked_add(need)?;
        if end > PROBE_NAMES_SIZE as u64 {
            return None;
        }
        let at = at as usize;
        copy_in(&names.bytes[at..at + 2], &(name.len() as u16).to_le_bytes());
        copy_in(&names.bytes[at + 2..end as usize], name);
        Some(NAMED_PROBE | at as u64)
    }

    /// The name a probe word written by [`Self::write_probe_name`] points at (read with
    /// Acquire before); `None` for a function address or a word that points outside the
    /// names (the other process wrote it: its offset and length are bounded here).
    pub fn probe_name(&self, word: u64) -> Option<Vec<u8>> {
        if word & NAMED_PROBE == 0 {
            return None;
        }
        let at = usize::try_from(word & !NAMED_PROBE).ok()?;
        let bytes = &self.area().probe_names.bytes;
        let len = copy_out(bytes.get(at..at.checked_add(2)?)?, 2);
        let len = usize::from(u16::from_le_bytes([len[0], len[1]])).min(PROBE_NAME_MAX);
        let start = at + 2;
        Some(copy_out(bytes.get(start..start.checked_add(len)?)?, len))
    }

    /// Names uevent type `ty` for the recording (its name into the probe names, a word for
    /// it in `uevent_names`; a later name of the same type is another word, and the reader
    /// takes the last). False when the names or the words are full, or `ty` is past 2^31.
    pub fn name_uevent_type(&self, ty: u32, name: &[u8]) -> bool {
        if ty >= 1 << 31 {
            return false;
        }
        let Some(word) = self.write_probe_name(name) else {
            return false;
        };
        let word = word | u64::from(ty) << 32;
        self.area().uevent_names.iter().any(|w| {
            w.compare_exchange(0, word, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        })
    }

    /// The uevent type names written so far, in the order of their words (bounded: a word
    /// the other process wrote that points outside the names is passed over).
    pub fn uevent_type_names(&self) -> Vec<(u32, Vec<u8>)> {
        self.area()
            .uevent_names
            .iter()
            .map(|w| w.load(Ordering::Acquire))
            .filter(|&w| w != 0)
            .filter_map(|w| {
                let ty = ((w & !NAMED_PROBE) >> 32) as u32;
                let name = self.probe_name(w & (NAMED_PROBE | 0xffff_ffff))?;
                Some((ty, name))
            })
            .collect()
    }

    /// The id word of event `k` in slot `i`.
    ///
    /// # Panics
    /// If `i >= MAX_SLOTS` or `k >= MAX_EVENTS`.
    #[inline]
    pub fn slot_event_id(&self, i: usize, k: usize) -> &AtomicU64 {
        assert!(i < MAX_SLOTS && k < MAX_EVENTS, "slot {i} event {k}");
        &self.area().slot_event_ids[i][k]
    }

    /// The event count word.
    #[inline]
    pub fn event_count(&self) -> &AtomicU64 {
        &self.area().events.count
    }

    /// Event entry `k`.
    ///
    /// # Panics
    /// If `k >= MAX_EVENTS`.
    #[inline]
    pub fn event(&self, k: usize) -> &SharedEvent {
        &self.area().events.entries[k]
    }

    /// The forked children's count word (entries claimed; may exceed [`MAX_CHILDREN`]).
    #[inline]
    pub fn child_count(&self) -> &AtomicU64 {
        &self.area().children.count
    }

    /// Forked child entry `n` (the ring's place `n % MAX_CHILDREN`).
    #[inline]
    pub fn child(&self, n: u64) -> &SharedChild {
        &self.area().children.entries[(n % MAX_CHILDREN as u64) as usize]
    }

    /// Writes a forked child's entry into the next place of the ring (over the entry a turn
    /// before).
    pub fn push_child(&self, c: &ChildEntry) {
        let n = self.child_count().fetch_add(1, Ordering::AcqRel);
        let e = self.child(n);
        e.seq.store(0, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        e.pid.store(c.pid, Ordering::Relaxed);
        e.ppid.store(c.ppid, Ordering::Relaxed);
        e.ptid.store(c.ptid, Ordering::Relaxed);
        e.fork_time.store(c.fork_time, Ordering::Relaxed);
        e.pid_ns.store(c.pid_ns, Ordering::Relaxed);
        e.seq.store(n + 1, Ordering::Release);
    }

    /// The newest whole entry of child `pid` of pid namespace `pid_ns` among the ring's (an
    /// entry being written, or written over while it was read, is passed over).
    pub fn find_child(&self, pid: u64, pid_ns: u64) -> Option<ChildEntry> {
        let count = self.child_count().load(Ordering::Acquire);
        (count.saturating_sub(MAX_CHILDREN as u64)..count)
            .rev()
            .find_map(|n| {
                let e = self.child(n);
                if e.seq.load(Ordering::Acquire) != n + 1 {
                    return None;
                }
                let c = ChildEntry {
                    pid: e.pid.load(Ordering::Relaxed),
                    ppid: e.ppid.load(Ordering::Relaxed),
                    ptid: e.ptid.load(Ordering::Relaxed),
                    fork_time: e.fork_time.load(Ordering::Relaxed),
                    pid_ns: e.pid_ns.load(Ordering::Relaxed),
                };
                std::sync::atomic::fence(Ordering::Acquire);
                let whole = e.seq.load(Ordering::Relaxed) == n + 1;
                (whole && c.pid == pid && c.pid_ns == pid_ns).then_some(c)
            })
    }

    /// The object entries claimed so far (the program's word).
    #[inline]
    pub fn object_count(&self) -> &AtomicU64 {
        &self.area().objects.count
    }

    /// The object entries the recorder took so far (its word; the program only reads it).
    #[inline]
    pub fn objects_taken(&self) -> &AtomicU64 {
        &self.area().objects.taken
    }

    /// Objects a process could not write: the ring stayed full (the recorder did not take
    /// entries for [`OBJECT_WAIT`]).
    #[inline]
    pub fn objects_lost(&self) -> &AtomicU64 {
        &self.area().objects.lost
    }

    /// Object entry `n` (the ring's place `n % MAX_OBJECTS`).
    #[inline]
    pub fn object(&self, n: u64) -> &SharedObject {
        &self.area().objects.entries[(n % MAX_OBJECTS as u64) as usize]
    }

    /// Claims the next object entry for the calling process to write (then its `done` word
    /// last), if the ring has room: the recorder took the entry a turn before it. Its number,
    /// or `None` while the ring is full.
    pub fn try_claim_object(&self) -> Option<u64> {
        let count = self.object_count();
        let mut n = count.load(Ordering::Acquire);
        loop {
            let taken = self.objects_taken().load(Ordering::Acquire);
            if n >= taken.saturating_add(MAX_OBJECTS as u64) {
                return None;
            }
            match count.compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(n),
                Err(now) => n = now,
            }
        }
    }

    /// Writes object entry `n` (claimed with [`Control::claim_object`]), its `done` word last.
    pub fn write_object(&self, n: u64, o: &ObjectEntry<'_>) {
        let e = self.object(n);
        let path = &o.path[..o.path.len().min(PATH_MAX)];
        e.base.store(o.base, Ordering::Relaxed);
        e.start.store(o.start, Ordering::Relaxed);
        e.len.store(o.len, Ordering::Relaxed);
        e.pgoff.store(o.pgoff, Ordering::Relaxed);
        e.path_len.store(path.len() as u64, Ordering::Relaxed);
        e.time.store(o.time, Ordering::Relaxed);
        e.pid.store(o.pid, Ordering::Relaxed);
        copy_in(&e.path, path);
        e.done.store(n + 1, Ordering::Release);
    }

    /// [`Control::try_claim_object`], waiting up to [`OBJECT_WAIT`] for the recorder to take
    /// entries of a full ring (it does at each pass of its loop, a millisecond apart); `None`
    /// (counted in [`Control::objects_lost`]) if it does not. No wait once `may_wait` is
    /// false (the caller's process waited in vain before: the recorder is stuck or gone) or
    /// the recording has ended (nobody takes entries any more).
    pub fn claim_object(&self, may_wait: bool) -> Option<u64> {
        let start = std::time::Instant::now();
        loop {
            if let Some(n) = self.try_claim_object() {
                return Some(n);
            }
            let closed = self.header().closed.load(Ordering::Acquire) != 0;
            if !may_wait || closed || start.elapsed() >= OBJECT_WAIT {
                self.objects_lost().fetch_add(1, Ordering::AcqRel);
                return None;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slot;

    /// A zeroed control area on the heap, and its view.
    struct Area(*mut u8, std::alloc::Layout);

    impl Area {
        fn new() -> Area {
            let layout = std::alloc::Layout::new::<ControlArea>();
            // SAFETY: a non-zero-sized layout.
            let p = unsafe { std::alloc::alloc_zeroed(layout) };
            assert!(!p.is_null());
            Area(p, layout)
        }

        fn control(&self) -> Control {
            // SAFETY: self.0 holds a zeroed ControlArea (all atomics: zero is valid) while
            // the view is used in the test.
            unsafe { Control::new(self.0) }
        }
    }

    impl Drop for Area {
        fn drop(&mut self) {
            // SAFETY: allocated in Area::new with this layout.
            unsafe { std::alloc::dealloc(self.0, self.1) };
        }
    }

    #[test]
    fn probe_names_round_trip_and_words_from_elsewhere_are_bounded() {
        let a = Area::new();
        let ctl = a.control();
        let w = ctl.write_probe_name(b"svc::http::request").unwrap();
        assert_ne!(w & NAMED_PROBE, 0);
        assert_eq!(ctl.probe_name(w).unwrap(), b"svc::http::request");
        let long = vec![b'x'; PROBE_NAME_MAX + 10];
        let w2 = ctl.write_probe_name(&long).unwrap();
        assert_eq!(ctl.probe_name(w2).unwrap().len(), PROBE_NAME_MAX);
        // A function address is no name; words pointing past the names are refused.
        assert_eq!(ctl.probe_name(0x55_5555_1000), None);
        assert_eq!(
            ctl.probe_name(NAMED_PROBE | (PROBE_NAMES_SIZE as u64 - 1)),
            None
        );
        assert_eq!(ctl.probe_name(NAMED_PROBE | (u64::MAX >> 1)), None);
        // A length the other side wrote past the end is refused, not read past.
        let at = PROBE_NAMES_SIZE - 4;
        copy_in(
            &ctl.area().probe_names.bytes[at..at + 2],
            &1000u16.to_le_bytes(),
        );
        assert_eq!(ctl.probe_name(NAMED_PROBE | at as u64), None);
        // Full: a claim that does not fit is refused and later ones too.
        ctl.area()
            .probe_names
            .used
            .store(PROBE_NAMES_SIZE as u64 - 3, Ordering::Relaxed);
        assert_eq!(ctl.write_probe_name(b"abc"), None);
        assert_eq!(ctl.write_probe_name(b""), None);
    }

    #[test]
    fn uevent_type_names_round_trip_and_bad_words_are_passed_over() {
        let a = Area::new();
        let ctl = a.control();
        assert!(ctl.name_uevent_type(0x7401, b"tracing_event"));
        assert!(ctl.name_uevent_type(3, b"slow_path"));
        assert!(!ctl.name_uevent_type(1 << 31, b"too high"));
        ctl.area().uevent_names[9].store(NAMED_PROBE | 5 << 32 | 0xfff_ffff, Ordering::Relaxed);
        assert_eq!(
            ctl.uevent_type_names(),
            [
                (0x7401, b"tracing_event".to_vec()),
                (3, b"slow_path".to_vec())
            ]
        );
    }

    /// `Slot::words` is the slot's fields in order: word 0 the state, then tid, ... and the
    /// two comm words at 9 and 10, as the recorder clears "every word but the state".
    #[test]
    fn slot_words_are_its_fields_in_order() {
        let a = Area::new();
        let ctl = a.control();
        let s = ctl.slot(MAX_SLOTS - 1);
        s.state.store(slot::ENDED, Ordering::Relaxed);
        s.tid.store(11, Ordering::Relaxed);
        s.comm[1].store(22, Ordering::Relaxed);
        s.pid_ns.store(33, Ordering::Relaxed);
        let w: Vec<u64> = s
            .words()
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .collect();
        assert_eq!(w[0], slot::ENDED);
        assert_eq!(w[1], 11);
        assert_eq!(w[10], 22);
        assert_eq!(w[13], 33);
        assert_eq!(w.iter().filter(|&&v| v != 0).count(), 4);
        assert_eq!(ctl.slot(MAX_SLOTS - 2).state.load(Ordering::Relaxed), 0);
    }

    /// Byte copies stay inside their array whatever length they are given: a path longer
    /// than PATH_MAX is cut, a read past the array's end stops at it.
    #[test]
    fn byte_copies_stay_in_their_arrays() {
        let a = Area::new();
        let ctl = a.control();
        let long = vec![b'x'; PATH_MAX + 100];
        let o = ObjectEntry {
            base: 1,
            start: 2,
            len: 3,
            pgoff: 4,
            time: 5,
            pid: 6,
            path: &long,
        };
        let n = ctl.try_claim_object().unwrap();
        ctl.write_object(n, &o);
        let e = ctl.object(n);
        assert_eq!(e.path_len.load(Ordering::Relaxed), PATH_MAX as u64);
        assert_eq!(copy_out(&e.path, usize::MAX).len(), PATH_MAX);
        // The next entry's first word is untouched by the cut path.
        assert_eq!(ctl.object(n + 1).done.load(Ordering::Relaxed), 0);
        assert_eq!(e.done.load(Ordering::Relaxed), n + 1);
        let ev = ctl.event(MAX_EVENTS - 1);
        copy_in(&ev.func, &vec![b'f'; crate::FUNC_MAX + 7]);
        assert_eq!(copy_out(&ev.func, 4), b"ffff");
        assert_eq!(copy_out(&ev.func, usize::MAX).len(), crate::FUNC_MAX);
        assert_eq!(ctl.probe_word(0).map(|_| ()), None);
        assert!(ctl.probe_word(crate::MAX_PROBES as u32).is_some());
        assert!(ctl.probe_word(crate::MAX_PROBES as u32 + 1).is_none());
    }
}
