//! The `Pmu` trait: the contract of the kernel's `struct pmu`
//! (include/linux/perf_event.h), for PMUs that run inside the process.
//!
//! The core calls a PMU exactly where kernel/events/core.c calls the
//! driver: `event_init` from `perf_event_alloc` (through `perf_init_event`),
//! `add`/`del` when an event is scheduled in and out (here: enabled and
//! disabled, since an event's thread is "on CPU" whenever it runs), `start`/
//! `stop` with the `PERF_EF_*` flags, `read` before a count is reported,
//! `setup_aux`/`free_aux` when the AUX area is mapped and released, and
//! `snapshot_aux` from the overflow path of a sampling event (our NMI).

use std::any::Any;

use perfaux_abi::ByteSink;

use crate::buffer::AuxArea;
use crate::error::{Result, eopnotsupp};
use crate::event::Event;

/// `PERF_EF_*`: the flags of `add`, `del`, `start` and `stop`.
pub mod ef {
    /// `add`: start the counter when adding.
    pub const START: u32 = 0x01;
    /// `start`: reload the counter (period) when starting.
    pub const RELOAD: u32 = 0x02;
    /// `stop`: update the counter when stopping.
    pub const UPDATE: u32 = 0x04;
    /// `stop`: AUX area event, pause tracing (aux_action).
    pub const PAUSE: u32 = 0x08;
    /// `start`: AUX area event, resume tracing (aux_action).
    pub const RESUME: u32 = 0x10;
}

bitflags::bitflags! {
    /// `PERF_PMU_CAP_*`: what a PMU can do (the kernel-internal values), and
    /// perfaux's two above them.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct PmuCaps: u32 {
        /// No overflow interrupt: the PMU cannot sample.
        const NO_INTERRUPT = 0x0001;
        /// The overflow interrupt is not an NMI.
        const NO_NMI = 0x0002;
        /// The AUX area must be one contiguous block.
        const AUX_NO_SG = 0x0004;
        /// Sampling of extended registers.
        const EXTENDED_REGS = 0x0008;
        /// One event per context at a time (`exclusive_event_installable`).
        const EXCLUSIVE = 0x0010;
        /// An instruction trace PMU: PERF_RECORD_ITRACE_START is due.
        const ITRACE = 0x0020;
        /// No `exclude_*` attr bits supported.
        const NO_EXCLUDE = 0x0040;
        /// Other events may write into this PMU's AUX stream (`aux_output`).
        const AUX_OUTPUT = 0x0080;
        /// Extended hardware type in `config`'s high bits.
        const EXTENDED_HW_TYPE = 0x0100;
        /// Supports aux_action pause and resume (`PERF_EF_PAUSE`/`RESUME`).
        const AUX_PAUSE = 0x0200;
        /// Prefers large AUX allocations.
        const AUX_PREFER_LARGE = 0x0400;
        /// perfaux: the PMU has `setup_aux`, so its events have an AUX
        /// area (the kernel's `has_aux(event)` tests `pmu->setup_aux`; a
        /// trait's default method cannot be told from a driver's own, so
        /// the driver says it here). A bit of its own, above the kernel's.
        const AUX = 1 << 30;
        /// perfaux: the AUX area holds uevent records (PERF_RECORD_UEVENT,
        /// as the uevent_aux PMU writes them), not a trace that a decoder
        /// reads: a recorder keeps them as records. Only with [`Self::AUX`].
        const AUX_UEVENT_LOG = 1 << 31;
    }
}

/// A PMU's per-event state (the kernel's `event->hw` and `pmu_private`).
pub type PmuPrivate = Box<dyn Any + Send + Sync>;

/// A performance monitoring unit: the driver side of the core.
///
/// Every method may run on any thread; `start`/`stop` with
/// [`ef::PAUSE`]/[`ef::RESUME`] and `snapshot_aux` may run in a signal
/// handler and must then be async-signal-safe (no locks, no allocation).
pub trait Pmu: Send + Sync + 'static {
    /// The PMU's name, as `/sys/bus/event_source/devices/<name>`.
    fn name(&self) -> &'static str;

    /// `pmu->capabilities`.
    fn capabilities(&self) -> PmuCaps;

    /// `pmu->event_init`: accept the event (returning its private state) or
    /// refuse it: ENOENT means "not mine", EINVAL/EOPNOTSUPP refuse the
    /// configuration.
    fn event_init(&self, event: &Event) -> Result<PmuPrivate>;

    /// `pmu->add`: the event is scheduled in; start it if `flags` has
    /// [`ef::START`].
    fn add(&self, event: &Event, flags: u32) -> Result<()> {
        if flags & ef::START != 0 {
            self.start(event, ef::RELOAD);
        }
        Ok(())
    }

    /// `pmu->del`: the event is scheduled out.
    fn del(&self, event: &Event, _flags: u32) {
        self.stop(event, ef::UPDATE);
    }

    /// `pmu->start`, with [`ef::RELOAD`] or [`ef::RESUME`].
    fn start(&self, event: &Event, flags: u32);

    /// `pmu->stop`, with [`ef::UPDATE`] or [`ef::PAUSE`].
    fn stop(&self, event: &Event, flags: u32);

    /// `event->destroy`: the event is being released (closed, or refused
    /// after `event_init`); free what `event_init` set up.
    fn destroy(&self, _event: &Event) {}

    /// `exclusive_event_installable`, for a PMU with [`PmuCaps::EXCLUSIVE`]:
    /// claims the event's context for it, or returns false (EBUSY) when
    /// another live event of this PMU has it. The syscall asks last, after
    /// every other check, as the kernel does; `destroy` gives the claim
    /// back.
    fn exclusive_event_installable(&self, _event: &Event) -> bool {
        true
    }

    /// `pmu->read`: bring the event's count up to date.
    fn read(&self, _event: &Event) {}

    /// `pmu->setup_aux`, for a PMU with [`PmuCaps::AUX`]: the AUX area
    /// was just mapped; `overwrite` is the
    /// read-only-mapping mode. Returns the PMU's `aux_priv`.
    fn setup_aux(&self, _event: &Event, _aux: &AuxArea, _overwrite: bool) -> Result<PmuPrivate> {
        Err(eopnotsupp("PMU has no setup_aux"))
    }

    /// `pmu->free_aux`: the AUX area is being released.
    fn free_aux(&self, _aux_priv: PmuPrivate) {}

    /// Whether the PMU has `snapshot_aux` (AUX sampling needs it).
    fn has_snapshot_aux(&self) -> bool {
        false
    }

    /// `pmu->snapshot_aux`: copy the newest `size` bytes of trace into
    /// `out` without changing the event's state; returns bytes written.
    /// Called from the sampling path, possibly in a signal handler.
    fn snapshot_aux(&self, _event: &Event, _out: &mut dyn ByteSink, _size: usize) -> usize {
        0
    }

    /// A uevent from a thread this event observes (perfaux: lets counting
    /// and AUX PMUs react to uevents). Runs on the emitting thread.
    fn uevent(&self, _event: &Event, _type: u32, _data: &[u8]) {}

    /// `pmu->aux_output_match`: whether `event`'s output may go into this
    /// PMU's AUX stream (`attr.aux_output`).
    fn aux_output_match(&self, _event: &Event) -> bool {
        false
    }
}
