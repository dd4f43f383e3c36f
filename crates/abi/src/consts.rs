//! Numbers of the perf_event UAPI (include/uapi/linux/perf_event.h) and of the
//! perf tool's user record types (tools/lib/perf/include/perf/event.h).
//!
//! Names follow the C headers so that a reader of either finds the same word.
//! Everything here is mainline Linux as of v6.19, except the items in
//! [`ext`], which are perfaux's numbers for the parts of the seed series that
//! mainline never took.

// --- perf_type_id (attr.type) ---
pub const PERF_TYPE_HARDWARE: u32 = 0;
pub const PERF_TYPE_SOFTWARE: u32 = 1;
pub const PERF_TYPE_TRACEPOINT: u32 = 2;
pub const PERF_TYPE_HW_CACHE: u32 = 3;
pub const PERF_TYPE_RAW: u32 = 4;
pub const PERF_TYPE_BREAKPOINT: u32 = 5;

// --- perf_sw_ids (attr.config for PERF_TYPE_SOFTWARE) ---
pub const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
pub const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
pub const PERF_COUNT_SW_PAGE_FAULTS: u64 = 2;
pub const PERF_COUNT_SW_CONTEXT_SWITCHES: u64 = 3;
pub const PERF_COUNT_SW_CPU_MIGRATIONS: u64 = 4;
pub const PERF_COUNT_SW_PAGE_FAULTS_MIN: u64 = 5;
pub const PERF_COUNT_SW_PAGE_FAULTS_MAJ: u64 = 6;
pub const PERF_COUNT_SW_ALIGNMENT_FAULTS: u64 = 7;
pub const PERF_COUNT_SW_EMULATION_FAULTS: u64 = 8;
pub const PERF_COUNT_SW_DUMMY: u64 = 9;
pub const PERF_COUNT_SW_BPF_OUTPUT: u64 = 10;
pub const PERF_COUNT_SW_CGROUP_SWITCHES: u64 = 11;

// --- perf_event_sample_format (attr.sample_type) ---
pub const PERF_SAMPLE_IP: u64 = 1 << 0;
pub const PERF_SAMPLE_TID: u64 = 1 << 1;
pub const PERF_SAMPLE_TIME: u64 = 1 << 2;
pub const PERF_SAMPLE_ADDR: u64 = 1 << 3;
pub const PERF_SAMPLE_READ: u64 = 1 << 4;
pub const PERF_SAMPLE_CALLCHAIN: u64 = 1 << 5;
pub const PERF_SAMPLE_ID: u64 = 1 << 6;
pub const PERF_SAMPLE_CPU: u64 = 1 << 7;
pub const PERF_SAMPLE_PERIOD: u64 = 1 << 8;
pub const PERF_SAMPLE_STREAM_ID: u64 = 1 << 9;
pub const PERF_SAMPLE_RAW: u64 = 1 << 10;
pub const PERF_SAMPLE_BRANCH_STACK: u64 = 1 << 11;
pub const PERF_SAMPLE_REGS_USER: u64 = 1 << 12;
pub const PERF_SAMPLE_STACK_USER: u64 = 1 << 13;
pub const PERF_SAMPLE_WEIGHT: u64 = 1 << 14;
pub const PERF_SAMPLE_DATA_SRC: u64 = 1 << 15;
pub const PERF_SAMPLE_IDENTIFIER: u64 = 1 << 16;
pub const PERF_SAMPLE_TRANSACTION: u64 = 1 << 17;
pub const PERF_SAMPLE_REGS_INTR: u64 = 1 << 18;
pub const PERF_SAMPLE_PHYS_ADDR: u64 = 1 << 19;
pub const PERF_SAMPLE_AUX: u64 = 1 << 20;
pub const PERF_SAMPLE_CGROUP: u64 = 1 << 21;
pub const PERF_SAMPLE_DATA_PAGE_SIZE: u64 = 1 << 22;
pub const PERF_SAMPLE_CODE_PAGE_SIZE: u64 = 1 << 23;
pub const PERF_SAMPLE_WEIGHT_STRUCT: u64 = 1 << 24;
/// Non-ABI: one past the highest defined sample_type bit.
pub const PERF_SAMPLE_MAX: u64 = 1 << 25;

// --- perf_branch_sample_type bits that change the sample layout ---
pub const PERF_SAMPLE_BRANCH_HW_INDEX: u64 = 1 << 17;
pub const PERF_SAMPLE_BRANCH_COUNTERS: u64 = 1 << 19;

// --- perf_event_read_format (attr.read_format) ---
pub const PERF_FORMAT_TOTAL_TIME_ENABLED: u64 = 1 << 0;
pub const PERF_FORMAT_TOTAL_TIME_RUNNING: u64 = 1 << 1;
pub const PERF_FORMAT_ID: u64 = 1 << 2;
pub const PERF_FORMAT_GROUP: u64 = 1 << 3;
pub const PERF_FORMAT_LOST: u64 = 1 << 4;
/// Non-ABI: one past the highest defined read_format bit.
pub const PERF_FORMAT_MAX: u64 = 1 << 5;

// --- attr sizes ---
pub const PERF_ATTR_SIZE_VER0: u32 = 64;
pub const PERF_ATTR_SIZE_VER1: u32 = 72;
pub const PERF_ATTR_SIZE_VER2: u32 = 80;
pub const PERF_ATTR_SIZE_VER3: u32 = 96;
pub const PERF_ATTR_SIZE_VER4: u32 = 104;
pub const PERF_ATTR_SIZE_VER5: u32 = 112;
pub const PERF_ATTR_SIZE_VER6: u32 = 120;
pub const PERF_ATTR_SIZE_VER7: u32 = 128;
pub const PERF_ATTR_SIZE_VER8: u32 = 136;
pub const PERF_ATTR_SIZE_VER9: u32 = 144;
/// The size of `struct perf_event_attr` as perfaux knows it (VER9, v6.19).
pub const PERF_ATTR_SIZE_LATEST: u32 = PERF_ATTR_SIZE_VER9;

// --- perf_event_type (kernel records) ---
pub const PERF_RECORD_MMAP: u32 = 1;
pub const PERF_RECORD_LOST: u32 = 2;
pub const PERF_RECORD_COMM: u32 = 3;
pub const PERF_RECORD_EXIT: u32 = 4;
pub const PERF_RECORD_THROTTLE: u32 = 5;
pub const PERF_RECORD_UNTHROTTLE: u32 = 6;
pub const PERF_RECORD_FORK: u32 = 7;
pub const PERF_RECORD_READ: u32 = 8;
pub const PERF_RECORD_SAMPLE: u32 = 9;
pub const PERF_RECORD_MMAP2: u32 = 10;
pub const PERF_RECORD_AUX: u32 = 11;
pub const PERF_RECORD_ITRACE_START: u32 = 12;
pub const PERF_RECORD_LOST_SAMPLES: u32 = 13;
pub const PERF_RECORD_SWITCH: u32 = 14;
pub const PERF_RECORD_SWITCH_CPU_WIDE: u32 = 15;
pub const PERF_RECORD_NAMESPACES: u32 = 16;
pub const PERF_RECORD_KSYMBOL: u32 = 17;
pub const PERF_RECORD_BPF_EVENT: u32 = 18;
pub const PERF_RECORD_CGROUP: u32 = 19;
pub const PERF_RECORD_TEXT_POKE: u32 = 20;
pub const PERF_RECORD_AUX_OUTPUT_HW_ID: u32 = 21;
pub const PERF_RECORD_CALLCHAIN_DEFERRED: u32 = 22;
/// Non-ABI: one past the highest kernel record type.
pub const PERF_RECORD_MAX: u32 = 23;

// --- perf tool user record types (perf.data only, never in a kernel ring) ---
pub const PERF_RECORD_USER_TYPE_START: u32 = 64;
pub const PERF_RECORD_HEADER_ATTR: u32 = 64;
pub const PERF_RECORD_HEADER_EVENT_TYPE: u32 = 65;
pub const PERF_RECORD_HEADER_TRACING_DATA: u32 = 66;
pub const PERF_RECORD_HEADER_BUILD_ID: u32 = 67;
pub const PERF_RECORD_FINISHED_ROUND: u32 = 68;
pub const PERF_RECORD_ID_INDEX: u32 = 69;
pub const PERF_RECORD_AUXTRACE_INFO: u32 = 70;
pub const PERF_RECORD_AUXTRACE: u32 = 71;
pub const PERF_RECORD_AUXTRACE_ERROR: u32 = 72;
pub const PERF_RECORD_THREAD_MAP: u32 = 73;
pub const PERF_RECORD_CPU_MAP: u32 = 74;
pub const PERF_RECORD_STAT_CONFIG: u32 = 75;
pub const PERF_RECORD_STAT: u32 = 76;
pub const PERF_RECORD_STAT_ROUND: u32 = 77;
pub const PERF_RECORD_EVENT_UPDATE: u32 = 78;
pub const PERF_RECORD_TIME_CONV: u32 = 79;
pub const PERF_RECORD_HEADER_FEATURE: u32 = 80;
pub const PERF_RECORD_COMPRESSED: u32 = 81;
pub const PERF_RECORD_FINISHED_INIT: u32 = 82;
pub const PERF_RECORD_COMPRESSED2: u32 = 83;
pub const PERF_RECORD_BPF_METADATA: u32 = 84;
pub const PERF_RECORD_SCHEDSTAT_CPU: u32 = 85;
pub const PERF_RECORD_SCHEDSTAT_DOMAIN: u32 = 86;

// --- PERF_RECORD_AUX flags ---
pub const PERF_AUX_FLAG_TRUNCATED: u64 = 0x01;
pub const PERF_AUX_FLAG_OVERWRITE: u64 = 0x02;
pub const PERF_AUX_FLAG_PARTIAL: u64 = 0x04;
pub const PERF_AUX_FLAG_COLLISION: u64 = 0x08;
pub const PERF_AUX_FLAG_PMU_FORMAT_TYPE_MASK: u64 = 0xff00;
pub const PERF_AUX_FLAG_CORESIGHT_FORMAT_CORESIGHT: u64 = 0x0000;
pub const PERF_AUX_FLAG_CORESIGHT_FORMAT_RAW: u64 = 0x0100;

// --- perf_event_header.misc ---
pub const PERF_RECORD_MISC_CPUMODE_MASK: u16 = 7;
pub const PERF_RECORD_MISC_CPUMODE_UNKNOWN: u16 = 0;
pub const PERF_RECORD_MISC_KERNEL: u16 = 1;
pub const PERF_RECORD_MISC_USER: u16 = 2;
pub const PERF_RECORD_MISC_HYPERVISOR: u16 = 3;
pub const PERF_RECORD_MISC_GUEST_KERNEL: u16 = 4;
pub const PERF_RECORD_MISC_GUEST_USER: u16 = 5;
pub const PERF_RECORD_MISC_PROC_MAP_PARSE_TIMEOUT: u16 = 1 << 12;
pub const PERF_RECORD_MISC_MMAP_DATA: u16 = 1 << 13;
pub const PERF_RECORD_MISC_COMM_EXEC: u16 = 1 << 13;
pub const PERF_RECORD_MISC_FORK_EXEC: u16 = 1 << 13;
pub const PERF_RECORD_MISC_SWITCH_OUT: u16 = 1 << 13;
pub const PERF_RECORD_MISC_EXACT_IP: u16 = 1 << 14;
pub const PERF_RECORD_MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;
pub const PERF_RECORD_MISC_MMAP_BUILD_ID: u16 = 1 << 14;
pub const PERF_RECORD_MISC_EXT_RESERVED: u16 = 1 << 15;

// --- perf_event_open flags ---
pub const PERF_FLAG_FD_NO_GROUP: u64 = 1 << 0;
pub const PERF_FLAG_FD_OUTPUT: u64 = 1 << 1;
pub const PERF_FLAG_PID_CGROUP: u64 = 1 << 2;
pub const PERF_FLAG_FD_CLOEXEC: u64 = 1 << 3;
/// Every open flag mainline accepts.
pub const PERF_FLAG_ALL: u64 =
    PERF_FLAG_FD_NO_GROUP | PERF_FLAG_FD_OUTPUT | PERF_FLAG_PID_CGROUP | PERF_FLAG_FD_CLOEXEC;

// --- ioctls: _IO('$', n) and friends, as on x86_64/arm64 (asm-generic ioctl.h) ---
const fn ioc(dir: u64, nr: u64, size: u64) -> u64 {
    (dir << 30) | (size << 16) | ((b'$' as u64) << 8) | nr
}
const IOC_NONE: u64 = 0;
const IOC_WRITE: u64 = 1;
const IOC_READ: u64 = 2;
pub const PERF_EVENT_IOC_ENABLE: u64 = ioc(IOC_NONE, 0, 0);
pub const PERF_EVENT_IOC_DISABLE: u64 = ioc(IOC_NONE, 1, 0);
pub const PERF_EVENT_IOC_REFRESH: u64 = ioc(IOC_NONE, 2, 0);
pub const PERF_EVENT_IOC_RESET: u64 = ioc(IOC_NONE, 3, 0);
pub const PERF_EVENT_IOC_PERIOD: u64 = ioc(IOC_WRITE, 4, 8);
pub const PERF_EVENT_IOC_SET_OUTPUT: u64 = ioc(IOC_NONE, 5, 0);
pub const PERF_EVENT_IOC_SET_FILTER: u64 = ioc(IOC_WRITE, 6, 8);
pub const PERF_EVENT_IOC_ID: u64 = ioc(IOC_READ, 7, 8);
pub const PERF_EVENT_IOC_SET_BPF: u64 = ioc(IOC_WRITE, 8, 4);
pub const PERF_EVENT_IOC_PAUSE_OUTPUT: u64 = ioc(IOC_WRITE, 9, 4);
pub const PERF_EVENT_IOC_QUERY_BPF: u64 = ioc(IOC_READ | IOC_WRITE, 10, 8);
pub const PERF_EVENT_IOC_MODIFY_ATTRIBUTES: u64 = ioc(IOC_WRITE, 11, 8);
pub const PERF_IOC_FLAG_GROUP: u64 = 1;

// --- perf_callchain_context ---
pub const PERF_CONTEXT_HV: u64 = -32i64 as u64;
pub const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
pub const PERF_CONTEXT_USER: u64 = -512i64 as u64;
pub const PERF_CONTEXT_USER_DEFERRED: u64 = -640i64 as u64;
pub const PERF_CONTEXT_GUEST: u64 = -2048i64 as u64;
pub const PERF_CONTEXT_GUEST_KERNEL: u64 = -2176i64 as u64;
pub const PERF_CONTEXT_GUEST_USER: u64 = -2560i64 as u64;
pub const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;

// --- AUXTRACE_INFO types (tools/perf/util/auxtrace.h) ---
pub const PERF_AUXTRACE_UNKNOWN: u32 = 0;
pub const PERF_AUXTRACE_INTEL_PT: u32 = 1;
pub const PERF_AUXTRACE_INTEL_BTS: u32 = 2;
pub const PERF_AUXTRACE_CS_ETM: u32 = 3;
pub const PERF_AUXTRACE_ARM_SPE: u32 = 4;
pub const PERF_AUXTRACE_S390_CPUMSF: u32 = 5;
pub const PERF_AUXTRACE_HISI_PTT: u32 = 6;

/// The kernel caps a record at the 16-bit `header.size`.
pub const PERF_RECORD_SIZE_MAX: usize = u16::MAX as usize;

/// perfaux's extensions: the seed-series parts mainline never took.
///
/// Each number was chosen to collide with no mainline value, today or in
/// the ranges mainline grows into:
///
/// - seed 002 put `uevents` at attr flag bit 23 (now `mmap2`) and
///   `PERF_RECORD_UEVENT` at 11 (now `PERF_RECORD_AUX`). perfaux uses the
///   topmost reserved flag bit, 63 (mainline grows `__reserved_1` from the
///   bottom, bit 40 after v6.19), and record type `0x4000_000b`: bit 30
///   marks a perfaux extension record, the low bits keep the seed's 11.
///   Kernel types stop at 22, perf tool types at 86.
/// - seed 000 put `PERF_FLAG_FD_SAMPLE` at open flag bit 4. Mainline never
///   took bit 4, but it is the next free bit; perfaux uses bit 30 so a future
///   mainline flag cannot be mistaken for it.
/// - seed 002's `PR_TASK_PERF_UEVENT` = 43 is now `PR_MPX_ENABLE_MANAGEMENT`;
///   perfaux exposes a function, not a prctl number (see perfaux-core).
pub mod ext {
    /// attr flags bit for `uevents` (seed 002).
    pub const ATTR_FLAG_UEVENTS_BIT: u32 = 63;
    /// `PERF_RECORD_UEVENT` of seed 002, moved off mainline's 11.
    pub const PERF_RECORD_UEVENT: u32 = 0x4000_000b;
    /// `PERF_FLAG_FD_SAMPLE` of seed 000, moved off the next mainline bit.
    pub const PERF_FLAG_FD_SAMPLE: u64 = 1 << 30;
    /// The largest uevent payload (seed 002: `size > PAGE_SIZE` is E2BIG).
    /// Fixed at x86-64's PAGE_SIZE rather than the running system's: with
    /// 64 KiB pages the seed's record could not fit its u16 header size.
    pub const UEVENT_MAX_SIZE: u32 = 4096;
}
