//! The per-thread shadow stack: the probes of the open calls, innermost last.
//!
//! SYNC packets list its innermost frames so that a decoder starting at any SYNC knows the
//! enclosing calls; the core builds PERF_SAMPLE_CALLCHAIN from it. It holds [`SHADOW_CAP`]
//! frames; deeper calls are counted (depth keeps growing) but not stored, and `overflows`
//! counts them.
//!
//! Updates are signal-safe without read-modify-write: `push` stores the new depth before the
//! frame, so a signal handler that interrupts it pushes above the outer's slot, and `pop_to`
//! restores the depth the guard recorded, so a handler that leaves frames behind (a panic
//! caught inside it, say) cannot shift the outer's view.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64};

use crate::format::MAX_SYNC_FRAMES;
use crate::probe::{Probe, ProbeId};

/// Frames the shadow stack stores.
pub const SHADOW_CAP: usize = 128;

/// `repr(C)`: `depth` first, beside the innermost frames (see `ThreadTrace`).
#[repr(C)]
pub(crate) struct ShadowStack {
    pub(crate) depth: AtomicU32,
    overflows: AtomicU64,
    frames: [AtomicPtr<Probe>; SHADOW_CAP],
}

impl ShadowStack {
    pub(crate) fn new() -> ShadowStack {
        ShadowStack {
            depth: AtomicU32::new(0),
            overflows: AtomicU64::new(0),
            frames: [const { AtomicPtr::new(std::ptr::null_mut()) }; SHADOW_CAP],
        }
    }

    pub(crate) fn reset(&self) {
        self.depth.store(0, Relaxed);
        self.overflows.store(0, Relaxed);
    }

    /// Pushes `probe`; returns the depth of the new frame (the depth before the push).
    #[inline(always)]
    pub(crate) fn push(&self, probe: &'static Probe) -> u32 {
        let d = self.depth.load(Relaxed);
        self.depth.store(d.saturating_add(1), Relaxed);
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        match self.frames.get(d as usize) {
            Some(slot) => slot.store(std::ptr::from_ref(probe).cast_mut(), Relaxed),
            None => self.count_overflow(),
        }
        d
    }

    #[cold]
    fn count_overflow(&self) {
        self.overflows.fetch_add(1, Relaxed);
    }

    /// Closes the frame at `depth` (and any left open above it).
    #[inline(always)]
    pub(crate) fn pop_to(&self, depth: u32) {
        self.depth.store(depth, Relaxed);
    }

    fn id_at(&self, i: usize) -> u32 {
        let p = self.frames[i].load(Relaxed);
        if p.is_null() {
            return 0;
        }
        // SAFETY: frames only hold pointers to `&'static Probe`s.
        unsafe { &*p }.current_id()
    }

    /// Fills `ids` with the innermost stored frames for a SYNC; returns (depth, first, n).
    pub(crate) fn sync_frames(&self, ids: &mut [u32; MAX_SYNC_FRAMES]) -> (u32, u32, usize) {
        let depth = self.depth.load(Relaxed);
        let stored = (depth as usize).min(SHADOW_CAP);
        let n = stored.min(MAX_SYNC_FRAMES);
        let first = stored - n;
        for (k, i) in (first..stored).enumerate() {
            ids[k] = self.id_at(i);
        }
        // A SYNC lists no id 0 (a frame whose probe lost its registration race): list only the
        // frames above the innermost such one.
        let start = ids[..n]
            .iter()
            .rposition(|&id| id == 0)
            .map_or(0, |z| z + 1);
        ids.copy_within(start..n, 0);
        (depth, (first + start) as u32, n - start)
    }

    /// Copies the stored frames innermost first.
    pub(crate) fn callchain(&self, out: &mut [Frame]) -> Callchain {
        let depth = self.depth.load(Relaxed);
        let stored = (depth as usize).min(SHADOW_CAP);
        let mut written = 0;
        for i in (0..stored).rev() {
            if written == out.len() {
                break;
            }
            let p = self.frames[i].load(Relaxed);
            if p.is_null() {
                continue;
            }
            // SAFETY: frames only hold pointers to `&'static Probe`s.
            let probe = unsafe { &*p };
            out[written] = Frame {
                id: ProbeId(probe.current_id()),
                addr: probe.addr() as u64,
            };
            written += 1;
        }
        Callchain {
            depth,
            written,
            overflows: self.overflows.load(Relaxed),
        }
    }
}

/// One frame of a callchain built from the shadow stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The probe of the open call.
    pub id: ProbeId,
    /// An address inside the instrumented function (see [`Probe::addr`]).
    pub addr: u64,
}

/// What [`crate::writer::callchain`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Callchain {
    /// Open traced calls.
    pub depth: u32,
    /// Frames written to the caller's buffer, innermost first.
    pub written: usize,
    /// Calls that went deeper than the shadow stack's bound since it was reset.
    pub overflows: u64,
}
