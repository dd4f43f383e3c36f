//! The bit-field word of `struct perf_event_attr` (offset 40, `disabled` ..
//! `__reserved_1`) and `aux_action` (offset 116), as flag sets.

use crate::consts::ext;

bitflags::bitflags! {
    /// The u64 bit-field word at offset 40, bit 0 = `disabled`.
    ///
    /// `precise_ip` is the 2-bit field at bits 15-16: read and set it with
    /// [`AttrFlags::precise_ip`] / [`AttrFlags::set_precise_ip`]. Bits 40..62
    /// are mainline's `__reserved_1`; bit 63 is perfaux's `uevents`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct AttrFlags: u64 {
        /// `disabled`: the event starts off; enable it with `PERF_EVENT_IOC_ENABLE`.
        const DISABLED = 1 << 0;
        /// `inherit`: children the task creates after the open get a copy of the event.
        const INHERIT = 1 << 1;
        /// `pinned`: the event (a group leader) must always be on the PMU, or it goes
        /// into error state.
        const PINNED = 1 << 2;
        /// `exclusive`: when on the PMU, the event's group is the only group there.
        const EXCLUSIVE = 1 << 3;
        /// `exclude_user`: don't count in user space.
        const EXCLUDE_USER = 1 << 4;
        /// `exclude_kernel`: don't count in the kernel.
        const EXCLUDE_KERNEL = 1 << 5;
        /// `exclude_hv`: don't count in the hypervisor.
        const EXCLUDE_HV = 1 << 6;
        /// `exclude_idle`: don't count while the CPU runs the idle task.
        const EXCLUDE_IDLE = 1 << 7;
        /// `mmap`: emit `PERF_RECORD_MMAP` for executable mappings.
        const MMAP = 1 << 8;
        /// `comm`: emit `PERF_RECORD_COMM` when a task's name changes.
        const COMM = 1 << 9;
        /// `freq`: `sample_freq` (samples per second) is meant, not `sample_period`.
        const FREQ = 1 << 10;
        /// `inherit_stat`: keep per-task counts of inherited events, and emit
        /// `PERF_RECORD_READ` at a child's exit.
        const INHERIT_STAT = 1 << 11;
        /// `enable_on_exec`: the next exec enables the event.
        const ENABLE_ON_EXEC = 1 << 12;
        /// `task`: emit `PERF_RECORD_FORK` and `PERF_RECORD_EXIT`.
        const TASK = 1 << 13;
        /// `watermark`: `wakeup_watermark` (bytes) is meant, not `wakeup_events`.
        const WATERMARK = 1 << 14;
        /// Low bit of `precise_ip`.
        const PRECISE_IP_BIT0 = 1 << 15;
        /// High bit of `precise_ip`.
        const PRECISE_IP_BIT1 = 1 << 16;
        /// `mmap_data`: also emit MMAP records for non-executable mappings.
        const MMAP_DATA = 1 << 17;
        /// `sample_id_all`: every non-sample record carries the `sample_id` trailer
        /// (the TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER fields of `sample_type`).
        const SAMPLE_ID_ALL = 1 << 18;
        /// `exclude_host`: don't count in the host when running guests.
        const EXCLUDE_HOST = 1 << 19;
        /// `exclude_guest`: don't count in guests.
        const EXCLUDE_GUEST = 1 << 20;
        /// `exclude_callchain_kernel`: callchains leave out kernel frames (v3.7).
        const EXCLUDE_CALLCHAIN_KERNEL = 1 << 21;
        /// `exclude_callchain_user`: callchains leave out user frames (v3.7).
        const EXCLUDE_CALLCHAIN_USER = 1 << 22;
        /// `mmap2`: emit `PERF_RECORD_MMAP2` (with inode data) in place of MMAP (v3.16).
        const MMAP2 = 1 << 23;
        /// `comm_exec`: mark COMM records caused by exec with
        /// `PERF_RECORD_MISC_COMM_EXEC` (v3.16).
        const COMM_EXEC = 1 << 24;
        /// `use_clockid`: time fields use the clock `clockid` names (v4.1).
        const USE_CLOCKID = 1 << 25;
        /// `context_switch`: emit `PERF_RECORD_SWITCH` / `SWITCH_CPU_WIDE` (v4.3).
        const CONTEXT_SWITCH = 1 << 26;
        /// `write_backward`: write the ring buffer from its end towards its start (v4.7).
        const WRITE_BACKWARD = 1 << 27;
        /// `namespaces`: emit `PERF_RECORD_NAMESPACES` (v4.12).
        const NAMESPACES = 1 << 28;
        /// `ksymbol`: emit `PERF_RECORD_KSYMBOL` (v5.1).
        const KSYMBOL = 1 << 29;
        /// `bpf_event`: emit `PERF_RECORD_BPF_EVENT` (v5.1).
        const BPF_EVENT = 1 << 30;
        /// `aux_output`: the event's output goes into its group leader's AUX area
        /// (e.g. PEBS via Intel PT) (v5.4).
        const AUX_OUTPUT = 1 << 31;
        /// `cgroup`: emit `PERF_RECORD_CGROUP` (v5.7).
        const CGROUP = 1 << 32;
        /// `text_poke`: emit `PERF_RECORD_TEXT_POKE` (v5.9).
        const TEXT_POKE = 1 << 33;
        /// `build_id`: MMAP2 records carry a build id instead of inode data (v5.12).
        const BUILD_ID = 1 << 34;
        /// `inherit_thread`: inherit only into children made with `CLONE_THREAD`
        /// (v5.13).
        const INHERIT_THREAD = 1 << 35;
        /// `remove_on_exec`: exec removes the event from the task (v5.13).
        const REMOVE_ON_EXEC = 1 << 36;
        /// `sigtrap`: each overflow sends the task a synchronous SIGTRAP carrying
        /// `sig_data` (v5.13).
        const SIGTRAP = 1 << 37;
        /// `defer_callchain`: unwind the user part of callchains at return to user
        /// space; samples carry `PERF_CONTEXT_USER_DEFERRED` and a cookie (v6.19).
        const DEFER_CALLCHAIN = 1 << 38;
        /// `defer_output`: this event receives the `PERF_RECORD_CALLCHAIN_DEFERRED`
        /// records (v6.19).
        const DEFER_OUTPUT = 1 << 39;
        /// perfaux extension (seed 002): the event accepts uevents.
        const UEVENTS = 1 << ext::ATTR_FLAG_UEVENTS_BIT;
    }
}

impl AttrFlags {
    /// The `precise_ip` field mask (bits 15-16).
    pub const PRECISE_IP_MASK: u64 = 3 << 15;
    /// Mainline's `__reserved_1`: bits 40..63, less perfaux's `uevents` bit.
    pub const RESERVED_1_MASK: u64 = !((1u64 << 40) - 1) & !(1u64 << ext::ATTR_FLAG_UEVENTS_BIT);

    /// `precise_ip` (0..=3): the skid constraint.
    pub fn precise_ip(self) -> u8 {
        ((self.bits() & Self::PRECISE_IP_MASK) >> 15) as u8
    }

    /// Sets `precise_ip`; only the low two bits of `v` are kept, as the C
    /// bit-field assignment would.
    pub fn set_precise_ip(&mut self, v: u8) {
        let bits = (self.bits() & !Self::PRECISE_IP_MASK) | ((u64::from(v) & 3) << 15);
        *self = Self::from_bits_retain(bits);
    }

    /// The `__reserved_1` bits that are set.
    pub fn reserved_1(self) -> u64 {
        self.bits() & Self::RESERVED_1_MASK
    }
}

bitflags::bitflags! {
    /// `aux_action` (u32 at offset 116): bits 3..31 are `__reserved_3`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct AuxAction: u32 {
        /// `aux_start_paused`: the AUX event starts with tracing paused (v6.13).
        const START_PAUSED = 1 << 0;
        /// `aux_pause`: this event's overflow pauses its group's AUX tracing (v6.13).
        const PAUSE = 1 << 1;
        /// `aux_resume`: this event's overflow resumes its group's AUX tracing (v6.13).
        const RESUME = 1 << 2;
    }
}

impl AuxAction {
    /// `__reserved_3`: bits 3..31.
    pub const RESERVED_3_MASK: u32 = !7;

    /// The `__reserved_3` bits that are set.
    pub fn reserved_3(self) -> u32 {
        self.bits() & Self::RESERVED_3_MASK
    }
}
