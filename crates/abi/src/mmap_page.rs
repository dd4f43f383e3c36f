//! `struct perf_event_mmap_page`: the first page of a perf mapping, shared by
//! the producer (the kernel, or perfaux-core) and the consumer.
//!
//! The struct is here for its layout; a consumer must not form references
//! to a page another process writes. perfaux-ring reads and writes the
//! head/tail words through atomics at the offsets below.

use core::mem::offset_of;

/// The kernel's layout, byte for byte (UAPI, v6.19).
#[repr(C)]
#[derive(Debug)]
pub struct PerfEventMmapPage {
    /// Version of the structure (0).
    pub version: u32,
    /// The lowest version this page is compatible with (0).
    pub compat_version: u32,
    /// Seqlock of the self-monitoring fields: re-read `index`, `offset` and the
    /// time fields while it changes.
    pub lock: u32,
    /// The hardware counter for `rdpmc` plus one; 0 when the event is not on a
    /// counter.
    pub index: u32,
    /// Added to the `rdpmc` value to give the event's count.
    pub offset: i64,
    /// Nanoseconds the event was enabled, as of the last update.
    pub time_enabled: u64,
    /// Nanoseconds the event was on the PMU, as of the last update.
    pub time_running: u64,
    /// The `cap_*` bit-field word; see [`caps`].
    pub capabilities: u64,
    /// Width in bits of the `rdpmc` value (for sign extension), with
    /// `cap_user_rdpmc`.
    pub pmc_width: u16,
    /// TSC to ns: `ns = time_offset + ((cyc * time_mult) >> time_shift)`, with
    /// `cap_user_time`.
    pub time_shift: u16,
    /// Multiplier of the TSC to ns conversion (see `time_shift`).
    pub time_mult: u32,
    /// Offset of the TSC to ns conversion (see `time_shift`).
    pub time_offset: u64,
    /// With `cap_user_time_zero`: the perf clock is `time_zero` plus the converted
    /// TSC.
    pub time_zero: u64,
    /// Size of the header part, up to `__reserved`.
    pub size: u32,
    /// Padding (`__reserved_1`), zero.
    pub __reserved_1: u32,
    /// With `cap_user_time_short`: the cycle value the short counter is relative
    /// to (v5.12).
    pub time_cycles: u64,
    /// With `cap_user_time_short`: `cyc = time_cycles + ((cyc - time_cycles) &
    /// time_mask)` (v5.12).
    pub time_mask: u64,
    /// Pads the header to 1 KiB (`__reserved`).
    pub __reserved: [u8; 928],
    /// Where the producer has written up to in the data area (byte count that
    /// only grows); read it with acquire ordering before reading the data.
    pub data_head: u64,
    /// Where the consumer has read up to; written by it with release ordering. In
    /// a writable mapping the producer does not overwrite past it.
    pub data_tail: u64,
    /// Offset in the mapping of the data area (v4.1).
    pub data_offset: u64,
    /// Size in bytes of the data area (v4.1).
    pub data_size: u64,
    /// Where the PMU has written up to in the AUX area (v4.1).
    pub aux_head: u64,
    /// Where the consumer has read up to in the AUX area (v4.1).
    pub aux_tail: u64,
    /// Offset in the file of the AUX area, set by the consumer before mapping it
    /// (v4.1).
    pub aux_offset: u64,
    /// Size in bytes of the AUX area, set by the consumer before mapping it
    /// (v4.1).
    pub aux_size: u64,
}

/// Offsets of the control words, as the UAPI documents them.
pub mod offsets {
    /// `perf_event_mmap_page.version`.
    pub const VERSION: usize = 0;
    /// `perf_event_mmap_page.compat_version`.
    pub const COMPAT_VERSION: usize = 4;
    /// `perf_event_mmap_page.lock`.
    pub const LOCK: usize = 8;
    /// `perf_event_mmap_page.index`.
    pub const INDEX: usize = 12;
    /// `perf_event_mmap_page.offset`.
    pub const OFFSET: usize = 16;
    /// `perf_event_mmap_page.time_enabled`.
    pub const TIME_ENABLED: usize = 24;
    /// `perf_event_mmap_page.time_running`.
    pub const TIME_RUNNING: usize = 32;
    /// `perf_event_mmap_page.capabilities`.
    pub const CAPABILITIES: usize = 40;
    /// `perf_event_mmap_page.pmc_width`.
    pub const PMC_WIDTH: usize = 48;
    /// `perf_event_mmap_page.time_shift`.
    pub const TIME_SHIFT: usize = 50;
    /// `perf_event_mmap_page.time_mult`.
    pub const TIME_MULT: usize = 52;
    /// `perf_event_mmap_page.time_offset`.
    pub const TIME_OFFSET: usize = 56;
    /// `perf_event_mmap_page.time_zero`.
    pub const TIME_ZERO: usize = 64;
    /// `perf_event_mmap_page.size`.
    pub const SIZE: usize = 72;
    /// `perf_event_mmap_page.time_cycles`.
    pub const TIME_CYCLES: usize = 80;
    /// `perf_event_mmap_page.time_mask`.
    pub const TIME_MASK: usize = 88;
    /// `perf_event_mmap_page.__reserved`, the padding up to 1 KiB.
    pub const RESERVED: usize = 96;
    /// `perf_event_mmap_page.data_head`.
    pub const DATA_HEAD: usize = 1024;
    /// `perf_event_mmap_page.data_tail`.
    pub const DATA_TAIL: usize = 1032;
    /// `perf_event_mmap_page.data_offset`.
    pub const DATA_OFFSET: usize = 1040;
    /// `perf_event_mmap_page.data_size`.
    pub const DATA_SIZE: usize = 1048;
    /// `perf_event_mmap_page.aux_head`.
    pub const AUX_HEAD: usize = 1056;
    /// `perf_event_mmap_page.aux_tail`.
    pub const AUX_TAIL: usize = 1064;
    /// `perf_event_mmap_page.aux_offset`.
    pub const AUX_OFFSET: usize = 1072;
    /// `perf_event_mmap_page.aux_size`.
    pub const AUX_SIZE: usize = 1080;
    /// One past `aux_size`: the bytes of the page the ABI defines.
    pub const END: usize = 1088;
}

// The layout is checked when this crate compiles, not when a test runs.
const _: () = {
    use offsets as o;
    assert!(offset_of!(PerfEventMmapPage, version) == o::VERSION);
    assert!(offset_of!(PerfEventMmapPage, compat_version) == o::COMPAT_VERSION);
    assert!(offset_of!(PerfEventMmapPage, lock) == o::LOCK);
    assert!(offset_of!(PerfEventMmapPage, index) == o::INDEX);
    assert!(offset_of!(PerfEventMmapPage, offset) == o::OFFSET);
    assert!(offset_of!(PerfEventMmapPage, time_enabled) == o::TIME_ENABLED);
    assert!(offset_of!(PerfEventMmapPage, time_running) == o::TIME_RUNNING);
    assert!(offset_of!(PerfEventMmapPage, capabilities) == o::CAPABILITIES);
    assert!(offset_of!(PerfEventMmapPage, pmc_width) == o::PMC_WIDTH);
    assert!(offset_of!(PerfEventMmapPage, time_shift) == o::TIME_SHIFT);
    assert!(offset_of!(PerfEventMmapPage, time_mult) == o::TIME_MULT);
    assert!(offset_of!(PerfEventMmapPage, time_offset) == o::TIME_OFFSET);
    assert!(offset_of!(PerfEventMmapPage, time_zero) == o::TIME_ZERO);
    assert!(offset_of!(PerfEventMmapPage, size) == o::SIZE);
    assert!(offset_of!(PerfEventMmapPage, time_cycles) == o::TIME_CYCLES);
    assert!(offset_of!(PerfEventMmapPage, time_mask) == o::TIME_MASK);
    assert!(offset_of!(PerfEventMmapPage, __reserved) == o::RESERVED);
    assert!(offset_of!(PerfEventMmapPage, data_head) == o::DATA_HEAD);
    assert!(offset_of!(PerfEventMmapPage, data_tail) == o::DATA_TAIL);
    assert!(offset_of!(PerfEventMmapPage, data_offset) == o::DATA_OFFSET);
    assert!(offset_of!(PerfEventMmapPage, data_size) == o::DATA_SIZE);
    assert!(offset_of!(PerfEventMmapPage, aux_head) == o::AUX_HEAD);
    assert!(offset_of!(PerfEventMmapPage, aux_tail) == o::AUX_TAIL);
    assert!(offset_of!(PerfEventMmapPage, aux_offset) == o::AUX_OFFSET);
    assert!(offset_of!(PerfEventMmapPage, aux_size) == o::AUX_SIZE);
    assert!(core::mem::size_of::<PerfEventMmapPage>() == o::END);
};

/// `capabilities` bits.
pub mod caps {
    /// `cap_bit0`: always 0; it was `cap_usr_time` and `cap_usr_rdpmc` at once, a
    /// layout bug.
    pub const CAP_BIT0: u64 = 1 << 0;
    /// `cap_bit0_is_deprecated`: always 1, telling readers to ignore bit 0.
    pub const CAP_BIT0_IS_DEPRECATED: u64 = 1 << 1;
    /// `cap_user_rdpmc`: user space may read the counter with `rdpmc` at `index`.
    pub const CAP_USER_RDPMC: u64 = 1 << 2;
    /// `cap_user_time`: `time_shift`, `time_mult` and `time_offset` are valid.
    pub const CAP_USER_TIME: u64 = 1 << 3;
    /// `cap_user_time_zero`: `time_zero` is valid.
    pub const CAP_USER_TIME_ZERO: u64 = 1 << 4;
    /// `cap_user_time_short`: `time_cycles` and `time_mask` are valid (v5.12).
    pub const CAP_USER_TIME_SHORT: u64 = 1 << 5;
}
