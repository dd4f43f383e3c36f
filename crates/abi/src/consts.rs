//! Numbers of the perf_event UAPI (include/uapi/linux/perf_event.h) and of the
//! perf tool's user record types (tools/lib/perf/include/perf/event.h).
//!
//! Names follow the C headers so that a reader of either finds the same word.
//! Everything here is mainline Linux as of v6.19, except the items in
//! [`ext`], which are perfaux's numbers for the parts of the seed series that
//! mainline never took. Where a doc line names a version, it is the mainline
//! release that added the item.

// --- perf_type_id (attr.type) ---
/// `PERF_TYPE_HARDWARE`: a generalized hardware event; `attr.config` is a
/// `perf_hw_id` (`PERF_COUNT_HW_CPU_CYCLES`, ...).
pub const PERF_TYPE_HARDWARE: u32 = 0;
/// `PERF_TYPE_SOFTWARE`: a counter the kernel keeps itself; `attr.config` is
/// a `perf_sw_ids` value (`PERF_COUNT_SW_*`).
pub const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_TYPE_TRACEPOINT`: a kernel tracepoint; `attr.config` is its id from
/// tracefs `events/<system>/<name>/id`.
pub const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `PERF_TYPE_HW_CACHE`: a generalized cache event; `attr.config` is
/// `cache_id | (op_id << 8) | (op_result_id << 16)`.
pub const PERF_TYPE_HW_CACHE: u32 = 3;
/// `PERF_TYPE_RAW`: a PMU-specific event; `attr.config` is the raw event code
/// of the core PMU.
pub const PERF_TYPE_RAW: u32 = 4;
/// `PERF_TYPE_BREAKPOINT`: a hardware breakpoint described by
/// `attr.bp_type`, `bp_addr` and `bp_len`; `attr.config` is 0.
pub const PERF_TYPE_BREAKPOINT: u32 = 5;

// --- perf_sw_ids (attr.config for PERF_TYPE_SOFTWARE) ---
/// `PERF_COUNT_SW_CPU_CLOCK`: a per-CPU high-resolution timer, counting
/// nanoseconds of wall time.
pub const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
/// `PERF_COUNT_SW_TASK_CLOCK`: nanoseconds the task spent on a CPU.
pub const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
/// `PERF_COUNT_SW_PAGE_FAULTS`: page faults, minor and major.
pub const PERF_COUNT_SW_PAGE_FAULTS: u64 = 2;
/// `PERF_COUNT_SW_CONTEXT_SWITCHES`: context switches.
pub const PERF_COUNT_SW_CONTEXT_SWITCHES: u64 = 3;
/// `PERF_COUNT_SW_CPU_MIGRATIONS`: times the task moved to another CPU.
pub const PERF_COUNT_SW_CPU_MIGRATIONS: u64 = 4;
/// `PERF_COUNT_SW_PAGE_FAULTS_MIN`: minor page faults (no I/O needed).
pub const PERF_COUNT_SW_PAGE_FAULTS_MIN: u64 = 5;
/// `PERF_COUNT_SW_PAGE_FAULTS_MAJ`: major page faults (I/O needed).
pub const PERF_COUNT_SW_PAGE_FAULTS_MAJ: u64 = 6;
/// `PERF_COUNT_SW_ALIGNMENT_FAULTS`: unaligned accesses the kernel fixed up
/// (v2.6.33).
pub const PERF_COUNT_SW_ALIGNMENT_FAULTS: u64 = 7;
/// `PERF_COUNT_SW_EMULATION_FAULTS`: instructions the kernel emulated
/// (v2.6.33).
pub const PERF_COUNT_SW_EMULATION_FAULTS: u64 = 8;
/// `PERF_COUNT_SW_DUMMY`: counts nothing; opened to receive side-band records
/// (MMAP, COMM, ...) without sampling (v3.12).
pub const PERF_COUNT_SW_DUMMY: u64 = 9;
/// `PERF_COUNT_SW_BPF_OUTPUT`: the event a BPF program writes samples into
/// with `bpf_perf_event_output()` (v4.4).
pub const PERF_COUNT_SW_BPF_OUTPUT: u64 = 10;
/// `PERF_COUNT_SW_CGROUP_SWITCHES`: context switches to a task in another
/// cgroup (v5.13).
pub const PERF_COUNT_SW_CGROUP_SWITCHES: u64 = 11;

// --- perf_event_sample_format (attr.sample_type) ---
// Each bit adds one field to PERF_RECORD_SAMPLE, in the order of the bits
// (IDENTIFIER excepted: it comes first).
/// `PERF_SAMPLE_IP`: `u64 ip`, the instruction pointer at the event.
pub const PERF_SAMPLE_IP: u64 = 1 << 0;
/// `PERF_SAMPLE_TID`: `u32 pid, tid` of the task the event hit.
pub const PERF_SAMPLE_TID: u64 = 1 << 1;
/// `PERF_SAMPLE_TIME`: `u64 time`, nanoseconds of the perf clock (or of
/// `attr.clockid` when `use_clockid` is set).
pub const PERF_SAMPLE_TIME: u64 = 1 << 2;
/// `PERF_SAMPLE_ADDR`: `u64 addr`, the data address of the event (fault
/// address, memory-access address).
pub const PERF_SAMPLE_ADDR: u64 = 1 << 3;
/// `PERF_SAMPLE_READ`: the event's (or its group's) counter values, laid out
/// by `attr.read_format`.
pub const PERF_SAMPLE_READ: u64 = 1 << 4;
/// `PERF_SAMPLE_CALLCHAIN`: `u64 nr, ips[nr]`, the call chain with
/// `PERF_CONTEXT_*` markers between its parts.
pub const PERF_SAMPLE_CALLCHAIN: u64 = 1 << 5;
/// `PERF_SAMPLE_ID`: `u64 id`, the event's primary id (an inherited event's
/// parent's id).
pub const PERF_SAMPLE_ID: u64 = 1 << 6;
/// `PERF_SAMPLE_CPU`: `u32 cpu, res`, the CPU the event hit on.
pub const PERF_SAMPLE_CPU: u64 = 1 << 7;
/// `PERF_SAMPLE_PERIOD`: `u64 period`, the events this sample stands for.
pub const PERF_SAMPLE_PERIOD: u64 = 1 << 8;
/// `PERF_SAMPLE_STREAM_ID`: `u64 stream_id`, the id of the very event
/// instance that wrote the sample (an inherited child's own id).
pub const PERF_SAMPLE_STREAM_ID: u64 = 1 << 9;
/// `PERF_SAMPLE_RAW`: `u32 size; char data[size]`, PMU- or
/// tracepoint-specific raw data.
pub const PERF_SAMPLE_RAW: u64 = 1 << 10;
/// `PERF_SAMPLE_BRANCH_STACK`: `u64 bnr; struct perf_branch_entry lbr[bnr]`,
/// the last branches taken, filtered by `attr.branch_sample_type` (v3.4).
pub const PERF_SAMPLE_BRANCH_STACK: u64 = 1 << 11;
/// `PERF_SAMPLE_REGS_USER`: `u64 abi; u64 regs[]`, the user-space registers
/// selected by `attr.sample_regs_user` (v3.7).
pub const PERF_SAMPLE_REGS_USER: u64 = 1 << 12;
/// `PERF_SAMPLE_STACK_USER`: `u64 size; char data[size]; u64 dyn_size`, a
/// copy of the user stack of up to `attr.sample_stack_user` bytes (v3.7).
pub const PERF_SAMPLE_STACK_USER: u64 = 1 << 13;
/// `PERF_SAMPLE_WEIGHT`: `u64 weight`, a hardware cost of the sampled
/// instruction such as load latency in cycles (v3.10).
pub const PERF_SAMPLE_WEIGHT: u64 = 1 << 14;
/// `PERF_SAMPLE_DATA_SRC`: `u64 data_src`, a `union perf_mem_data_src`
/// (memory level, snoop, TLB of the access) (v3.10).
pub const PERF_SAMPLE_DATA_SRC: u64 = 1 << 15;
/// `PERF_SAMPLE_IDENTIFIER`: `u64 id` at a fixed place, first in a sample and
/// last in a `sample_id` trailer, so a reader finds it before knowing the
/// attr (v3.12).
pub const PERF_SAMPLE_IDENTIFIER: u64 = 1 << 16;
/// `PERF_SAMPLE_TRANSACTION`: `u64 transaction`, the abort reason flags of a
/// hardware transaction (Intel TSX) (v3.13).
pub const PERF_SAMPLE_TRANSACTION: u64 = 1 << 17;
/// `PERF_SAMPLE_REGS_INTR`: `u64 abi; u64 regs[]`, the interrupted machine
/// state selected by `attr.sample_regs_intr` (v3.19).
pub const PERF_SAMPLE_REGS_INTR: u64 = 1 << 18;
/// `PERF_SAMPLE_PHYS_ADDR`: `u64 phys_addr`, the physical address of `addr`
/// (v4.14).
pub const PERF_SAMPLE_PHYS_ADDR: u64 = 1 << 19;
/// `PERF_SAMPLE_AUX`: `u64 size; char data[size]`, a snapshot of the group
/// leader's AUX area of up to `attr.aux_sample_size` bytes (v5.5).
pub const PERF_SAMPLE_AUX: u64 = 1 << 20;
/// `PERF_SAMPLE_CGROUP`: `u64 cgroup`, the id of the task's cgroup (v5.7).
pub const PERF_SAMPLE_CGROUP: u64 = 1 << 21;
/// `PERF_SAMPLE_DATA_PAGE_SIZE`: `u64 data_page_size`, the size of the page
/// that maps `addr` (v5.11).
pub const PERF_SAMPLE_DATA_PAGE_SIZE: u64 = 1 << 22;
/// `PERF_SAMPLE_CODE_PAGE_SIZE`: `u64 code_page_size`, the size of the page
/// that maps `ip` (v5.11).
pub const PERF_SAMPLE_CODE_PAGE_SIZE: u64 = 1 << 23;
/// `PERF_SAMPLE_WEIGHT_STRUCT`: the weight as `union perf_sample_weight`
/// (`var1_dw`, `var2_w`, `var3_w`) in place of `PERF_SAMPLE_WEIGHT`'s u64;
/// the two bits exclude each other (v5.12).
pub const PERF_SAMPLE_WEIGHT_STRUCT: u64 = 1 << 24;
/// Non-ABI: one past the highest defined sample_type bit.
pub const PERF_SAMPLE_MAX: u64 = 1 << 25;

// --- perf_branch_sample_type bits that change the sample layout ---
/// `PERF_SAMPLE_BRANCH_HW_INDEX`: the branch stack carries `u64 hw_idx`, the
/// hardware index of the newest entry, between `bnr` and the entries (v5.7).
pub const PERF_SAMPLE_BRANCH_HW_INDEX: u64 = 1 << 17;
/// `PERF_SAMPLE_BRANCH_COUNTERS`: the branch stack is followed by
/// `u64 counters[bnr]`, per-branch occurrence counts of the group's events
/// (v6.8).
pub const PERF_SAMPLE_BRANCH_COUNTERS: u64 = 1 << 19;

// --- perf_event_read_format (attr.read_format) ---
/// `PERF_FORMAT_TOTAL_TIME_ENABLED`: `u64 time_enabled`, nanoseconds the
/// event was enabled.
pub const PERF_FORMAT_TOTAL_TIME_ENABLED: u64 = 1 << 0;
/// `PERF_FORMAT_TOTAL_TIME_RUNNING`: `u64 time_running`, nanoseconds the
/// event was on the PMU (less than enabled when counters are multiplexed).
pub const PERF_FORMAT_TOTAL_TIME_RUNNING: u64 = 1 << 1;
/// `PERF_FORMAT_ID`: `u64 id` after each value.
pub const PERF_FORMAT_ID: u64 = 1 << 2;
/// `PERF_FORMAT_GROUP`: read the whole group at once: `u64 nr` then one
/// value (with its id and lost count) per member.
pub const PERF_FORMAT_GROUP: u64 = 1 << 3;
/// `PERF_FORMAT_LOST`: `u64 lost` after each value, the samples the event
/// lost (v6.0).
pub const PERF_FORMAT_LOST: u64 = 1 << 4;
/// Non-ABI: one past the highest defined read_format bit.
pub const PERF_FORMAT_MAX: u64 = 1 << 5;

// --- attr sizes ---
/// `PERF_ATTR_SIZE_VER0`: the first published `struct perf_event_attr`,
/// through `bp_addr`/`config1`.
pub const PERF_ATTR_SIZE_VER0: u32 = 64;
/// `PERF_ATTR_SIZE_VER1`: adds `config2` (`bp_len`).
pub const PERF_ATTR_SIZE_VER1: u32 = 72;
/// `PERF_ATTR_SIZE_VER2`: adds `branch_sample_type` (v3.4).
pub const PERF_ATTR_SIZE_VER2: u32 = 80;
/// `PERF_ATTR_SIZE_VER3`: adds `sample_regs_user` and `sample_stack_user`
/// (v3.7).
pub const PERF_ATTR_SIZE_VER3: u32 = 96;
/// `PERF_ATTR_SIZE_VER4`: adds `sample_regs_intr` (v3.19).
pub const PERF_ATTR_SIZE_VER4: u32 = 104;
/// `PERF_ATTR_SIZE_VER5`: adds `aux_watermark` (v4.1).
pub const PERF_ATTR_SIZE_VER5: u32 = 112;
/// `PERF_ATTR_SIZE_VER6`: adds `aux_sample_size` (v5.5).
pub const PERF_ATTR_SIZE_VER6: u32 = 120;
/// `PERF_ATTR_SIZE_VER7`: adds `sig_data` (v5.13).
pub const PERF_ATTR_SIZE_VER7: u32 = 128;
/// `PERF_ATTR_SIZE_VER8`: adds `config3` (v6.3).
pub const PERF_ATTR_SIZE_VER8: u32 = 136;
/// `PERF_ATTR_SIZE_VER9`: adds `config4` (v6.19).
pub const PERF_ATTR_SIZE_VER9: u32 = 144;
/// The size of `struct perf_event_attr` as perfaux knows it (VER9, v6.19).
pub const PERF_ATTR_SIZE_LATEST: u32 = PERF_ATTR_SIZE_VER9;

// --- perf_event_type (kernel records) ---
/// `PERF_RECORD_MMAP`: an executable mapping was created (`attr.mmap`):
/// pid, tid, addr, len, pgoff, filename.
pub const PERF_RECORD_MMAP: u32 = 1;
/// `PERF_RECORD_LOST`: `id, lost`, records dropped because the ring buffer
/// was full.
pub const PERF_RECORD_LOST: u32 = 2;
/// `PERF_RECORD_COMM`: a task's name changed (`attr.comm`): pid, tid, comm.
pub const PERF_RECORD_COMM: u32 = 3;
/// `PERF_RECORD_EXIT`: a task exited (`attr.task`): pid, ppid, tid, ptid,
/// time.
pub const PERF_RECORD_EXIT: u32 = 4;
/// `PERF_RECORD_THROTTLE`: the event exceeded the interrupt rate limit and
/// stopped sampling: time, id, stream_id.
pub const PERF_RECORD_THROTTLE: u32 = 5;
/// `PERF_RECORD_UNTHROTTLE`: a throttled event samples again: time, id,
/// stream_id.
pub const PERF_RECORD_UNTHROTTLE: u32 = 6;
/// `PERF_RECORD_FORK`: a task was created (`attr.task`): pid, ppid, tid,
/// ptid, time.
pub const PERF_RECORD_FORK: u32 = 7;
/// `PERF_RECORD_READ`: an inherited child's counter values at its exit
/// (`attr.inherit_stat`): pid, tid, values by `read_format`.
pub const PERF_RECORD_READ: u32 = 8;
/// `PERF_RECORD_SAMPLE`: one sample, its fields chosen by `attr.sample_type`.
pub const PERF_RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_MMAP2`: MMAP plus the mapped file's maj, min, ino,
/// ino_generation (or build id), prot and flags (`attr.mmap2`, v3.16).
pub const PERF_RECORD_MMAP2: u32 = 10;
/// `PERF_RECORD_AUX`: new data is in the AUX area: aux_offset, aux_size,
/// `PERF_AUX_FLAG_*` flags (v4.1).
pub const PERF_RECORD_AUX: u32 = 11;
/// `PERF_RECORD_ITRACE_START`: instruction tracing started for a task: pid,
/// tid (v4.1).
pub const PERF_RECORD_ITRACE_START: u32 = 12;
/// `PERF_RECORD_LOST_SAMPLES`: `lost`, samples dropped before they were
/// written to the ring (e.g. PEBS records the PMU could not deliver) (v4.2).
pub const PERF_RECORD_LOST_SAMPLES: u32 = 13;
/// `PERF_RECORD_SWITCH`: the task was switched in, or out with
/// `PERF_RECORD_MISC_SWITCH_OUT` (`attr.context_switch`, v4.3).
pub const PERF_RECORD_SWITCH: u32 = 14;
/// `PERF_RECORD_SWITCH_CPU_WIDE`: a context switch seen by a CPU-wide event,
/// with `next_prev_pid`/`next_prev_tid` of the other task (v4.3).
pub const PERF_RECORD_SWITCH_CPU_WIDE: u32 = 15;
/// `PERF_RECORD_NAMESPACES`: a task's namespaces: pid, tid, nr_namespaces,
/// `{dev, inode}` per namespace (`attr.namespaces`, v4.12).
pub const PERF_RECORD_NAMESPACES: u32 = 16;
/// `PERF_RECORD_KSYMBOL`: a kernel symbol (JIT, BPF) was registered or
/// unregistered: addr, len, ksym_type, flags, name (`attr.ksymbol`, v5.1).
pub const PERF_RECORD_KSYMBOL: u32 = 17;
/// `PERF_RECORD_BPF_EVENT`: a BPF program was loaded or unloaded: type,
/// flags, id, tag (`attr.bpf_event`, v5.1).
pub const PERF_RECORD_BPF_EVENT: u32 = 18;
/// `PERF_RECORD_CGROUP`: a cgroup was created: id, path (`attr.cgroup`,
/// v5.7).
pub const PERF_RECORD_CGROUP: u32 = 19;
/// `PERF_RECORD_TEXT_POKE`: kernel text was modified: addr, old_len, new_len,
/// the old then new bytes (`attr.text_poke`, v5.9).
pub const PERF_RECORD_TEXT_POKE: u32 = 20;
/// `PERF_RECORD_AUX_OUTPUT_HW_ID`: `hw_id`, the hardware id the AUX data is
/// tagged with (e.g. Intel PEBS-via-PT's counter, CoreSight's trace id) (v5.16).
pub const PERF_RECORD_AUX_OUTPUT_HW_ID: u32 = 21;
/// `PERF_RECORD_CALLCHAIN_DEFERRED`: the user part of a callchain unwound at
/// return to user space: cookie, nr, ips (`attr.defer_output`, v6.19).
pub const PERF_RECORD_CALLCHAIN_DEFERRED: u32 = 22;
/// Non-ABI: one past the highest kernel record type.
pub const PERF_RECORD_MAX: u32 = 23;

// --- perf tool user record types (perf.data only, never in a kernel ring) ---
/// `PERF_RECORD_USER_TYPE_START`: the first type number of the perf tool's
/// own records; kernel types stay below it.
pub const PERF_RECORD_USER_TYPE_START: u32 = 64;
/// `PERF_RECORD_HEADER_ATTR`: an attr and its ids, written in pipe mode
/// where there is no attrs section.
pub const PERF_RECORD_HEADER_ATTR: u32 = 64;
/// `PERF_RECORD_HEADER_EVENT_TYPE`: an event type's name (obsolete, perf
/// ignores it).
pub const PERF_RECORD_HEADER_EVENT_TYPE: u32 = 65;
/// `PERF_RECORD_HEADER_TRACING_DATA`: the tracepoint format data, pipe mode's
/// HEADER_TRACING_DATA feature; the data follows the record.
pub const PERF_RECORD_HEADER_TRACING_DATA: u32 = 66;
/// `PERF_RECORD_HEADER_BUILD_ID`: the build id of one DSO, pipe mode's
/// HEADER_BUILD_ID feature entry.
pub const PERF_RECORD_HEADER_BUILD_ID: u32 = 67;
/// `PERF_RECORD_FINISHED_ROUND`: every record before it that perf has read
/// may be sorted by time and flushed.
pub const PERF_RECORD_FINISHED_ROUND: u32 = 68;
/// `PERF_RECORD_ID_INDEX`: maps sample ids to their event index, cpu and tid.
pub const PERF_RECORD_ID_INDEX: u32 = 69;
/// `PERF_RECORD_AUXTRACE_INFO`: what a decoder of the AUX data needs:
/// `PERF_AUXTRACE_*` type and PMU-specific values.
pub const PERF_RECORD_AUXTRACE_INFO: u32 = 70;
/// `PERF_RECORD_AUXTRACE`: a chunk of AUX area data, the bytes following the
/// record: size, offset, reference, idx, tid, cpu.
pub const PERF_RECORD_AUXTRACE: u32 = 71;
/// `PERF_RECORD_AUXTRACE_ERROR`: an error met while recording or decoding
/// AUX data, with its position and message.
pub const PERF_RECORD_AUXTRACE_ERROR: u32 = 72;
/// `PERF_RECORD_THREAD_MAP`: the threads the events were opened on.
pub const PERF_RECORD_THREAD_MAP: u32 = 73;
/// `PERF_RECORD_CPU_MAP`: the CPUs the events were opened on.
pub const PERF_RECORD_CPU_MAP: u32 = 74;
/// `PERF_RECORD_STAT_CONFIG`: `perf stat record`'s settings (aggregation
/// mode, interval, scale).
pub const PERF_RECORD_STAT_CONFIG: u32 = 75;
/// `PERF_RECORD_STAT`: one counter reading of `perf stat record`: id, cpu,
/// thread, val, ena, run.
pub const PERF_RECORD_STAT: u32 = 76;
/// `PERF_RECORD_STAT_ROUND`: the end of one `perf stat record` interval.
pub const PERF_RECORD_STAT_ROUND: u32 = 77;
/// `PERF_RECORD_EVENT_UPDATE`: an event's unit, scale, name or cpus, for the
/// event of the given id.
pub const PERF_RECORD_EVENT_UPDATE: u32 = 78;
/// `PERF_RECORD_TIME_CONV`: the TSC to perf-time conversion (time_shift,
/// time_mult, time_zero, ...), as in `perf_event_mmap_page`.
pub const PERF_RECORD_TIME_CONV: u32 = 79;
/// `PERF_RECORD_HEADER_FEATURE`: one header feature section, sent as a record
/// in pipe mode.
pub const PERF_RECORD_HEADER_FEATURE: u32 = 80;
/// `PERF_RECORD_COMPRESSED`: zstd-compressed records (`perf record -z`).
pub const PERF_RECORD_COMPRESSED: u32 = 81;
/// `PERF_RECORD_FINISHED_INIT`: the end of the records perf synthesizes at
/// start (threads, mmaps, ...).
pub const PERF_RECORD_FINISHED_INIT: u32 = 82;
/// `PERF_RECORD_COMPRESSED2`: compressed records with an explicit
/// `data_size`, padded to 8 bytes (replaces COMPRESSED).
pub const PERF_RECORD_COMPRESSED2: u32 = 83;
/// `PERF_RECORD_BPF_METADATA`: the metadata variables of a BPF program perf
/// saw loaded.
pub const PERF_RECORD_BPF_METADATA: u32 = 84;
/// `PERF_RECORD_SCHEDSTAT_CPU`: a CPU's /proc/schedstat counters (`perf sched
/// stats`).
pub const PERF_RECORD_SCHEDSTAT_CPU: u32 = 85;
/// `PERF_RECORD_SCHEDSTAT_DOMAIN`: a sched domain's /proc/schedstat counters
/// (`perf sched stats`).
pub const PERF_RECORD_SCHEDSTAT_DOMAIN: u32 = 86;

// --- PERF_RECORD_AUX flags ---
/// `PERF_AUX_FLAG_TRUNCATED`: the AUX data was cut short, the area had no
/// room for it.
pub const PERF_AUX_FLAG_TRUNCATED: u64 = 0x01;
/// `PERF_AUX_FLAG_OVERWRITE`: the area is in overwrite (snapshot) mode; the
/// data may have overwritten older data.
pub const PERF_AUX_FLAG_OVERWRITE: u64 = 0x02;
/// `PERF_AUX_FLAG_PARTIAL`: the data contains gaps.
pub const PERF_AUX_FLAG_PARTIAL: u64 = 0x04;
/// `PERF_AUX_FLAG_COLLISION`: the sample collided with another one.
pub const PERF_AUX_FLAG_COLLISION: u64 = 0x08;
/// `PERF_AUX_FLAG_PMU_FORMAT_TYPE_MASK`: bits 8..15 hold a PMU-specific
/// format type of the trace data.
pub const PERF_AUX_FLAG_PMU_FORMAT_TYPE_MASK: u64 = 0xff00;
/// `PERF_AUX_FLAG_CORESIGHT_FORMAT_CORESIGHT`: CoreSight data in formatted
/// frames (the default).
pub const PERF_AUX_FLAG_CORESIGHT_FORMAT_CORESIGHT: u64 = 0x0000;
/// `PERF_AUX_FLAG_CORESIGHT_FORMAT_RAW`: CoreSight data raw, without the
/// formatter's frames.
pub const PERF_AUX_FLAG_CORESIGHT_FORMAT_RAW: u64 = 0x0100;

// --- perf_event_header.misc ---
/// `PERF_RECORD_MISC_CPUMODE_MASK`: bits 0..2 say where the CPU was when the
/// record was made.
pub const PERF_RECORD_MISC_CPUMODE_MASK: u16 = 7;
/// `PERF_RECORD_MISC_CPUMODE_UNKNOWN`: the CPU mode is not known.
pub const PERF_RECORD_MISC_CPUMODE_UNKNOWN: u16 = 0;
/// `PERF_RECORD_MISC_KERNEL`: in the kernel.
pub const PERF_RECORD_MISC_KERNEL: u16 = 1;
/// `PERF_RECORD_MISC_USER`: in user space.
pub const PERF_RECORD_MISC_USER: u16 = 2;
/// `PERF_RECORD_MISC_HYPERVISOR`: in the hypervisor.
pub const PERF_RECORD_MISC_HYPERVISOR: u16 = 3;
/// `PERF_RECORD_MISC_GUEST_KERNEL`: in a guest's kernel.
pub const PERF_RECORD_MISC_GUEST_KERNEL: u16 = 4;
/// `PERF_RECORD_MISC_GUEST_USER`: in a guest's user space.
pub const PERF_RECORD_MISC_GUEST_USER: u16 = 5;
/// `PERF_RECORD_MISC_PROC_MAP_PARSE_TIMEOUT`: perf gave up reading
/// /proc/PID/maps for a synthesized MMAP; the map list is incomplete.
pub const PERF_RECORD_MISC_PROC_MAP_PARSE_TIMEOUT: u16 = 1 << 12;
/// `PERF_RECORD_MISC_MMAP_DATA`: on MMAP/MMAP2, the mapping is not
/// executable (`attr.mmap_data`).
pub const PERF_RECORD_MISC_MMAP_DATA: u16 = 1 << 13;
/// `PERF_RECORD_MISC_COMM_EXEC`: on COMM, the name changed through exec
/// (`attr.comm_exec`, v3.16).
pub const PERF_RECORD_MISC_COMM_EXEC: u16 = 1 << 13;
/// `PERF_RECORD_MISC_FORK_EXEC`: on FORK, a bit only the perf tool sets
/// ("perf internal" in the UAPI); the kernel never does.
pub const PERF_RECORD_MISC_FORK_EXEC: u16 = 1 << 13;
/// `PERF_RECORD_MISC_SWITCH_OUT`: on SWITCH/SWITCH_CPU_WIDE, the task was
/// switched out (else in).
pub const PERF_RECORD_MISC_SWITCH_OUT: u16 = 1 << 13;
/// `PERF_RECORD_MISC_EXACT_IP`: on SAMPLE, `ip` is the instruction that
/// caused the event, not one after it (`precise_ip`).
pub const PERF_RECORD_MISC_EXACT_IP: u16 = 1 << 14;
/// `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`: on a switch out, the task was
/// preempted and is still runnable (v4.17).
pub const PERF_RECORD_MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;
/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: on MMAP2, a build id replaces maj, min,
/// ino and ino_generation (`attr.build_id`, v5.12).
pub const PERF_RECORD_MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// `PERF_RECORD_MISC_EXT_RESERVED`: reserved for a future extension of misc.
pub const PERF_RECORD_MISC_EXT_RESERVED: u16 = 1 << 15;

// --- perf_event_open flags ---
/// `PERF_FLAG_FD_NO_GROUP`: the new event is not put in `group_fd`'s group
/// (`group_fd` still serves `PERF_FLAG_FD_OUTPUT`).
pub const PERF_FLAG_FD_NO_GROUP: u64 = 1 << 0;
/// `PERF_FLAG_FD_OUTPUT`: send the new event's records to `group_fd`'s ring
/// buffer.
pub const PERF_FLAG_FD_OUTPUT: u64 = 1 << 1;
/// `PERF_FLAG_PID_CGROUP`: `pid` is an fd of a cgroup directory; the event
/// counts that cgroup's tasks on `cpu`.
pub const PERF_FLAG_PID_CGROUP: u64 = 1 << 2;
/// `PERF_FLAG_FD_CLOEXEC`: the new fd is close-on-exec (v3.14).
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
/// `PERF_EVENT_IOC_ENABLE`: start counting (the whole group with
/// [`PERF_IOC_FLAG_GROUP`]).
pub const PERF_EVENT_IOC_ENABLE: u64 = ioc(IOC_NONE, 0, 0);
/// `PERF_EVENT_IOC_DISABLE`: stop counting (the whole group with
/// [`PERF_IOC_FLAG_GROUP`]).
pub const PERF_EVENT_IOC_DISABLE: u64 = ioc(IOC_NONE, 1, 0);
/// `PERF_EVENT_IOC_REFRESH`: add the argument to the overflows the event may
/// take before it disables itself, and enable it.
pub const PERF_EVENT_IOC_REFRESH: u64 = ioc(IOC_NONE, 2, 0);
/// `PERF_EVENT_IOC_RESET`: set the count to zero.
pub const PERF_EVENT_IOC_RESET: u64 = ioc(IOC_NONE, 3, 0);
/// `PERF_EVENT_IOC_PERIOD`: set the sample period (or frequency) from the
/// `u64` the argument points to.
pub const PERF_EVENT_IOC_PERIOD: u64 = ioc(IOC_WRITE, 4, 8);
/// `PERF_EVENT_IOC_SET_OUTPUT`: send the event's records to the ring buffer
/// of the fd given as argument (-1: its own again).
pub const PERF_EVENT_IOC_SET_OUTPUT: u64 = ioc(IOC_NONE, 5, 0);
/// `PERF_EVENT_IOC_SET_FILTER`: set a tracepoint filter or an address filter
/// (AUX PMUs) from the string the argument points to.
pub const PERF_EVENT_IOC_SET_FILTER: u64 = ioc(IOC_WRITE, 6, 8);
/// `PERF_EVENT_IOC_ID`: write the event's id to the `u64` the argument
/// points to (v3.12).
pub const PERF_EVENT_IOC_ID: u64 = ioc(IOC_READ, 7, 8);
/// `PERF_EVENT_IOC_SET_BPF`: attach the BPF program whose fd is the argument
/// to a tracepoint event (v4.1).
pub const PERF_EVENT_IOC_SET_BPF: u64 = ioc(IOC_WRITE, 8, 4);
/// `PERF_EVENT_IOC_PAUSE_OUTPUT`: stop (argument 1) or resume (0) writing
/// into the event's ring buffer (v4.7).
pub const PERF_EVENT_IOC_PAUSE_OUTPUT: u64 = ioc(IOC_WRITE, 9, 4);
/// `PERF_EVENT_IOC_QUERY_BPF`: list the BPF programs attached to a
/// tracepoint event into a `struct perf_event_query_bpf` (v4.16).
pub const PERF_EVENT_IOC_QUERY_BPF: u64 = ioc(IOC_READ | IOC_WRITE, 10, 8);
/// `PERF_EVENT_IOC_MODIFY_ATTRIBUTES`: change the event's attr to the one the
/// argument points to (breakpoints only) (v4.17).
pub const PERF_EVENT_IOC_MODIFY_ATTRIBUTES: u64 = ioc(IOC_WRITE, 11, 8);
/// `PERF_IOC_FLAG_GROUP`: argument of ENABLE, DISABLE and RESET: act on the
/// event's whole group.
pub const PERF_IOC_FLAG_GROUP: u64 = 1;

// --- perf_callchain_context ---
// Markers in a callchain's ips[]: each says in which context the following
// addresses lie.
/// `PERF_CONTEXT_HV`: the following addresses are in the hypervisor.
pub const PERF_CONTEXT_HV: u64 = -32i64 as u64;
/// `PERF_CONTEXT_KERNEL`: the following addresses are in the kernel.
pub const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
/// `PERF_CONTEXT_USER`: the following addresses are in user space.
pub const PERF_CONTEXT_USER: u64 = -512i64 as u64;
/// `PERF_CONTEXT_USER_DEFERRED`: the user part will come in a
/// `PERF_RECORD_CALLCHAIN_DEFERRED`; the next entry is its cookie (v6.19).
pub const PERF_CONTEXT_USER_DEFERRED: u64 = -640i64 as u64;
/// `PERF_CONTEXT_GUEST`: the following addresses are in a guest.
pub const PERF_CONTEXT_GUEST: u64 = -2048i64 as u64;
/// `PERF_CONTEXT_GUEST_KERNEL`: the following addresses are in a guest's
/// kernel.
pub const PERF_CONTEXT_GUEST_KERNEL: u64 = -2176i64 as u64;
/// `PERF_CONTEXT_GUEST_USER`: the following addresses are in a guest's user
/// space.
pub const PERF_CONTEXT_GUEST_USER: u64 = -2560i64 as u64;
/// `PERF_CONTEXT_MAX`: an entry at or above it is a context marker, not an
/// address.
pub const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;

// --- AUXTRACE_INFO types (tools/perf/util/auxtrace.h) ---
/// `PERF_AUXTRACE_UNKNOWN`: no known AUX decoder.
pub const PERF_AUXTRACE_UNKNOWN: u32 = 0;
/// `PERF_AUXTRACE_INTEL_PT`: Intel Processor Trace.
pub const PERF_AUXTRACE_INTEL_PT: u32 = 1;
/// `PERF_AUXTRACE_INTEL_BTS`: Intel Branch Trace Store.
pub const PERF_AUXTRACE_INTEL_BTS: u32 = 2;
/// `PERF_AUXTRACE_CS_ETM`: Arm CoreSight Embedded Trace Macrocell.
pub const PERF_AUXTRACE_CS_ETM: u32 = 3;
/// `PERF_AUXTRACE_ARM_SPE`: Arm Statistical Profiling Extension.
pub const PERF_AUXTRACE_ARM_SPE: u32 = 4;
/// `PERF_AUXTRACE_S390_CPUMSF`: s390 CPU-Measurement Sampling Facility.
pub const PERF_AUXTRACE_S390_CPUMSF: u32 = 5;
/// `PERF_AUXTRACE_HISI_PTT`: HiSilicon PCIe Tune and Trace.
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
