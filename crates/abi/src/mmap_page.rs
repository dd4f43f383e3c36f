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
    pub version: u32,
    pub compat_version: u32,
    pub lock: u32,
    pub index: u32,
    pub offset: i64,
    pub time_enabled: u64,
    pub time_running: u64,
    pub capabilities: u64,
    pub pmc_width: u16,
    pub time_shift: u16,
    pub time_mult: u32,
    pub time_offset: u64,
    pub time_zero: u64,
    pub size: u32,
    pub __reserved_1: u32,
    pub time_cycles: u64,
    pub time_mask: u64,
    pub __reserved: [u8; 928],
    pub data_head: u64,
    pub data_tail: u64,
    pub data_offset: u64,
    pub data_size: u64,
    pub aux_head: u64,
    pub aux_tail: u64,
    pub aux_offset: u64,
    pub aux_size: u64,
}

/// Offsets of the control words, as the UAPI documents them.
pub mod offsets {
    pub const VERSION: usize = 0;
    pub const COMPAT_VERSION: usize = 4;
    pub const LOCK: usize = 8;
    pub const INDEX: usize = 12;
    pub const OFFSET: usize = 16;
    pub const TIME_ENABLED: usize = 24;
    pub const TIME_RUNNING: usize = 32;
    pub const CAPABILITIES: usize = 40;
    pub const PMC_WIDTH: usize = 48;
    pub const TIME_SHIFT: usize = 50;
    pub const TIME_MULT: usize = 52;
    pub const TIME_OFFSET: usize = 56;
    pub const TIME_ZERO: usize = 64;
    pub const SIZE: usize = 72;
    pub const TIME_CYCLES: usize = 80;
    pub const TIME_MASK: usize = 88;
    pub const RESERVED: usize = 96;
    pub const DATA_HEAD: usize = 1024;
    pub const DATA_TAIL: usize = 1032;
    pub const DATA_OFFSET: usize = 1040;
    pub const DATA_SIZE: usize = 1048;
    pub const AUX_HEAD: usize = 1056;
    pub const AUX_TAIL: usize = 1064;
    pub const AUX_OFFSET: usize = 1072;
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
    pub const CAP_BIT0: u64 = 1 << 0;
    pub const CAP_BIT0_IS_DEPRECATED: u64 = 1 << 1;
    pub const CAP_USER_RDPMC: u64 = 1 << 2;
    pub const CAP_USER_TIME: u64 = 1 << 3;
    pub const CAP_USER_TIME_ZERO: u64 = 1 << 4;
    pub const CAP_USER_TIME_SHORT: u64 = 1 << 5;
}
