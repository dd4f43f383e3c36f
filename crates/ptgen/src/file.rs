//! The perf.data around the packets, as `perf record --per-thread -e
//! intel_pt/tsc=1,noretcomp=1/u -- PROG` lays it out: the intel_pt event and the dummy:u
//! tracking event, TIME_CONV, AUXTRACE_INFO, the sideband records, the trace in an
//! AUXTRACE record (idx 0, the thread's tid, cpu -1: per-thread), PERF_RECORD_AUX, EXIT.
//! Or, recording per CPU ([`crate::Options::cpu_wide`]), as `perf record -e
//! intel_pt/tsc=1,noretcomp=1/u -- PROG` lays it out when the program runs on CPU 0 only:
//! PERF_SAMPLE_CPU in every record's sample_id, the dummy event with `context_switch`, the
//! trace in an AUXTRACE record of idx 0, tid -1, cpu 0, and before the trace the
//! PERF_RECORD_SWITCH_CPU_WIDE out of the idle task and into the program and the
//! ITRACE_START that tell perf whose trace the CPU's buffer holds.
//! In snapshot mode (`perf record -S`, [`crate::SnapshotPlan`]) the attrs are the same
//! (perf sets `aux_watermark` only for a full trace), AUXTRACE_INFO's
//! priv[INTEL_PT_SNAPSHOT_MODE] is 1, and each snapshot is an AUXTRACE record (its `offset`
//! the ring's head, its `reference` the TSC when taken) and the kernel's PERF_RECORD_AUX
//! with PERF_AUX_FLAG_OVERWRITE; perf 6.1 finds what a snapshot shares with the one before
//! by the TSC of the last PSB+ (`intel_pt_find_overlap`) and decodes it once.
//! With AUX sampling (`perf record --aux-sample`, [`crate::AuxSamplePlan`]) there is no
//! AUXTRACE record: an `instructions` event (the intel_pt event's group member, its
//! sample_type with PERF_SAMPLE_AUX, `aux_sample_size` set) samples carry the trace. perf
//! 6.1 takes sampling mode from that attr, queues each sample's AUX data by its id's
//! PERF_RECORD_ID_INDEX entry (so the index, written first, names the thread: without it
//! the queue's thread is 0), and finds what a snippet shares with the one before as for
//! snapshots, passing over the zeros the kernel pads it with (`adj_for_padding`).
//! Pausing and resuming the trace ([`crate::PausePlan`], Linux 6.13's aux-action): the
//! intel_pt event (`aux_action` START_PAUSED if it starts paused) leads a group (in
//! HEADER_GROUP_DESC) with two `task-clock` events of `aux_action` RESUME and PAUSE, whose
//! samples (IP, TID, TIME, IDENTIFIER, and CPU per CPU) are in the sideband at the points
//! the plan says. perf 6.1 knows no aux_action (its `__reserved_3`), reads the attrs
//! without complaint and prints the samples as the events'.
//! In the header, as perf record writes them after the run: HEADER_BUILD_ID with the build
//! id of every file an MMAP2 named (read when it was mapped), which `perf buildid-list`
//! lists and which perf (and perfaux) check the files on disk against.
//!
//! What perf 6.1 needs, learnt the hard way (tools/perf/util/intel-pt.c):
//! - it finds the intel_pt event by `attr.type == AUXTRACE_INFO priv[INTEL_PT_PMU_TYPE]`,
//!   and that event must have a sample id (its synthesized events' ids are its first id +
//!   1000000000);
//! - timed decoding (the trace ordered against the sideband by time) needs the TSC bit in
//!   that event's config and in priv[INTEL_PT_TSC_BIT], cap_user_time_zero, and
//!   PERF_SAMPLE_TIME in every event; times convert with TIME_CONV's shift/mult/zero;
//! - the AUXTRACE record's `reference` must be a TSC near the trace's (see [`write`]);
//! - a sideband record takes effect for the trace whose TSC is at or after its time, and
//!   the trace between two TSC packets has the first one's time: an MMAP2 must be stamped
//!   before the TSC of the TIP.PGE after the system call that made the mapping.

use crate::AuxSamplePlan;
use crate::tracee::Mapping;
use crate::{TIME_MULT, TIME_SHIFT, TIME_ZERO, tsc_to_perf_time};
use perfaux_abi::Endianness;
use perfaux_abi::attr::{AttrFlags, AuxAction, PerfEventAttr};
use perfaux_abi::consts::*;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::{
    AuxRecord, CommRecord, EncodeRecord, ItraceStartRecord, Mmap2FileId, Mmap2Record,
    SwitchCpuWideRecord, TaskKind, TaskRecord,
};
use perfaux_abi::sample::SampleRecord;
use perfaux_abi::sample_id::{CpuRes, PidTid, SampleId};
use perfaux_abi::user::{
    AuxtraceInfoRecord, AuxtraceRecord, FinishedInitRecord, FinishedRoundRecord, IdIndexEntry,
    IdIndexRecord, TimeConvExt, TimeConvRecord,
};
use perfaux_perfdata::{Feature, HostInfo, PerfDataWriter, WriterEvent, WriterOptions};

/// The intel_pt PMU's type number written in the attr and AUXTRACE_INFO (a real system's
/// comes from /sys/bus/event_source/devices/intel_pt/type; 8 is common).
pub const PMU_TYPE: u32 = 8;
/// The sample id of the intel_pt event and of the dummy:u tracking event.
pub const PT_ID: u64 = 101;
/// See [`PT_ID`].
pub const DUMMY_ID: u64 = 102;
/// The sample id of the `instructions` event whose samples carry the trace (AUX sampling).
pub const SAMPLER_ID: u64 = 103;
/// The sample ids of the aux-action events: the resume one, the pause one.
pub const RESUME_ID: u64 = 104;
/// See [`RESUME_ID`].
pub const PAUSE_ID: u64 = 105;

/// perf's `PERF_COUNT_HW_INSTRUCTIONS`.
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;

// intel_pt config bits (/sys/bus/event_source/devices/intel_pt/format/*).
const CFG_PT: u64 = 1 << 0;
const CFG_TSC: u64 = 1 << 10;
const CFG_NORETCOMP: u64 = 1 << 11;
const CFG_BRANCH: u64 = 1 << 13;
const CFG_PSB_PERIOD_SHIFT: u32 = 24;
const CFG_MTC: u64 = 1 << 9;
const CFG_MTC_PERIOD_SHIFT: u32 = 14;
const CFG_CYC: u64 = 1 << 1;

const SAMPLE_TYPE: u64 =
    PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_IDENTIFIER;

/// The CPU a CPU-wide recording's buffer and records are on.
pub const CPU: u32 = 0;

/// The events' sample_type: a CPU-wide recording's records carry their CPU too (perf
/// record adds PERF_SAMPLE_CPU to every event when it records per CPU).
fn sample_type(cpu_wide: bool) -> u64 {
    if cpu_wide {
        SAMPLE_TYPE | PERF_SAMPLE_CPU
    } else {
        SAMPLE_TYPE
    }
}

fn pt_attr(cpu_wide: bool) -> PerfEventAttr {
    PerfEventAttr {
        type_: PMU_TYPE,
        // `pt,branch` (the PMU's defaults), `tsc=1,noretcomp=1`, psb_period=1 (4 KiB);
        // `mtc=0` since no MTC packets are written.
        config: CFG_PT | CFG_TSC | CFG_NORETCOMP | CFG_BRANCH | (1 << CFG_PSB_PERIOD_SHIFT),
        sample_period: 1,
        sample_type: sample_type(cpu_wide),
        flags: AttrFlags::DISABLED
            | AttrFlags::ENABLE_ON_EXEC
            | AttrFlags::EXCLUDE_KERNEL
            | AttrFlags::EXCLUDE_HV
            | AttrFlags::SAMPLE_ID_ALL,
        ..Default::default()
    }
}

/// The `instructions/period=N/u` event in the intel_pt event's group whose samples carry
/// the last `aux_sample_size` bytes of the trace (`perf record --aux-sample`: PERF_SAMPLE_AUX
/// in its sample_type, the group member neither disabled nor enabled on exec, its leader
/// is).
fn sampler_attr(cpu_wide: bool, plan: &AuxSamplePlan) -> PerfEventAttr {
    PerfEventAttr {
        type_: PERF_TYPE_HARDWARE,
        config: PERF_COUNT_HW_INSTRUCTIONS,
        sample_period: plan.every_insns,
        sample_type: sample_type(cpu_wide) | PERF_SAMPLE_AUX,
        aux_sample_size: plan.size as u32,
        flags: AttrFlags::EXCLUDE_KERNEL | AttrFlags::EXCLUDE_HV | AttrFlags::SAMPLE_ID_ALL,
        ..Default::default()
    }
}

/// The `task-clock/aux-action=pause/u` (`pause`) or `.../aux-action=resume/u` event in the
/// intel_pt event's group: its samples pause or resume the trace (Linux 6.13). A group
/// member, neither disabled nor enabled on exec (its leader is).
fn action_attr(cpu_wide: bool, pause: bool) -> PerfEventAttr {
    PerfEventAttr {
        type_: PERF_TYPE_SOFTWARE,
        config: PERF_COUNT_SW_TASK_CLOCK,
        sample_period: ACTION_PERIOD,
        sample_type: sample_type(cpu_wide),
        aux_action: if pause {
            AuxAction::PAUSE
        } else {
            AuxAction::RESUME
        },
        flags: AttrFlags::EXCLUDE_KERNEL | AttrFlags::EXCLUDE_HV | AttrFlags::SAMPLE_ID_ALL,
        ..Default::default()
    }
}

/// The aux-action events' period (ns of task clock): a label only, the plan says when they
/// overflow.
const ACTION_PERIOD: u64 = 100_000;

fn action_name(pause: bool) -> &'static str {
    if pause {
        "task-clock/aux-action=pause/u"
    } else {
        "task-clock/aux-action=resume/u"
    }
}

/// The intel_pt event's name: with `aux-action=start-paused` if it starts paused.
fn pt_name(start_paused: Option<bool>) -> &'static str {
    if start_paused == Some(true) {
        "intel_pt/aux-action=start-paused,tsc=1,noretcomp=1/u"
    } else {
        "intel_pt/tsc=1,noretcomp=1/u"
    }
}

fn sampler_name(plan: &AuxSamplePlan) -> String {
    format!("instructions/period={}/u", plan.every_insns)
}

/// The dummy:u tracking event; recording per CPU, it also asks for the context switches
/// (`context_switch = 1`) that tell the threads of a CPU's buffer apart.
fn dummy_attr(cpu_wide: bool) -> PerfEventAttr {
    let switches = if cpu_wide {
        AttrFlags::CONTEXT_SWITCH
    } else {
        AttrFlags::empty()
    };
    PerfEventAttr {
        type_: PERF_TYPE_SOFTWARE,
        config: PERF_COUNT_SW_DUMMY,
        sample_period: 1,
        sample_type: sample_type(cpu_wide),
        flags: switches
            | AttrFlags::DISABLED
            | AttrFlags::ENABLE_ON_EXEC
            | AttrFlags::EXCLUDE_KERNEL
            | AttrFlags::EXCLUDE_HV
            | AttrFlags::MMAP
            | AttrFlags::COMM
            | AttrFlags::TASK
            | AttrFlags::MMAP2
            | AttrFlags::COMM_EXEC
            | AttrFlags::SAMPLE_ID_ALL,
        ..Default::default()
    }
}

/// The AUXTRACE_INFO priv[] of tools/perf/arch/x86/util/intel-pt.c's
/// `intel_pt_info_fill` (perf 6.1: INTEL_PT_PMU_TYPE .. INTEL_PT_FILTER_STR_LEN).
///
/// Recording per CPU, priv[INTEL_PT_PER_CPU_MMAPS] is 1 and priv[INTEL_PT_HAVE_SCHED_SWITCH]
/// 3: perf record's value when it asks for context switch records of a CPU-wide dummy event
/// (PERF_RECORD_SWITCH_CPU_WIDE), whose switch-outs name the next task
/// (`intel_pt_context_switch`).
fn auxtrace_info(cpu_wide: bool, snapshot: bool) -> AuxtraceInfoRecord {
    AuxtraceInfoRecord {
        type_: PERF_AUXTRACE_INTEL_PT,
        reserved: 0,
        priv_: vec![
            u64::from(PMU_TYPE),          // INTEL_PT_PMU_TYPE
            u64::from(TIME_SHIFT),        // INTEL_PT_TIME_SHIFT
            u64::from(TIME_MULT),         // INTEL_PT_TIME_MULT
            TIME_ZERO,                    // INTEL_PT_TIME_ZERO
            1,                            // INTEL_PT_CAP_USER_TIME_ZERO
            CFG_TSC,                      // INTEL_PT_TSC_BIT
            CFG_NORETCOMP,                // INTEL_PT_NORETCOMP_BIT
            if cpu_wide { 3 } else { 0 }, // INTEL_PT_HAVE_SCHED_SWITCH
            u64::from(snapshot),          // INTEL_PT_SNAPSHOT_MODE
            u64::from(cpu_wide),          // INTEL_PT_PER_CPU_MMAPS (0: --per-thread)
            CFG_MTC,                      // INTEL_PT_MTC_BIT
            0xf << CFG_MTC_PERIOD_SHIFT,  // INTEL_PT_MTC_FREQ_BITS
            2,                            // INTEL_PT_TSC_CTC_N
            1,                            // INTEL_PT_TSC_CTC_D
            CFG_CYC,                      // INTEL_PT_CYC_BIT
            20,                           // INTEL_PT_MAX_NONTURBO_RATIO
            0,                            // INTEL_PT_FILTER_STR_LEN (no address filter)
        ],
    }
}

/// The sideband records, in time order, as the kernel writes them.
pub(crate) struct Sideband {
    pid: u32,
    /// Recorded per CPU (on [`CPU`]), not `--per-thread`.
    cpu_wide: bool,
    /// Snapshot mode (`perf record -S`): priv[INTEL_PT_SNAPSHOT_MODE] = 1.
    pub(crate) snapshot: bool,
    /// AUX sampling (`perf record --aux-sample`): the sampling event.
    pub(crate) aux_sample: Option<AuxSamplePlan>,
    /// Pausing and resuming ([`crate::PausePlan`]): whether the trace starts paused.
    pub(crate) pauses: Option<bool>,
    /// The kernel traced too ([`crate::Options::kernel`]).
    pub(crate) kernel: bool,
    comm: String,
    /// Whole records.
    records: Vec<Vec<u8>>,
    /// The files MMAP2 records named, with their GNU build ids as they were when mapped
    /// (for HEADER_BUILD_ID), in the order first mapped.
    files: Vec<(String, Option<Vec<u8>>)>,
    pt: RecordParseInfo,
    dummy: RecordParseInfo,
}

impl Sideband {
    pub(crate) fn new(pid: u32, comm: &str, cpu_wide: bool) -> Self {
        // The kernel's TASK_COMM_LEN is 16, NUL included.
        let comm: String = comm.chars().take(15).collect();
        Self {
            pid,
            cpu_wide,
            snapshot: false,
            aux_sample: None,
            pauses: None,
            kernel: false,
            comm,
            records: Vec::new(),
            files: Vec::new(),
            pt: RecordParseInfo::new(&pt_attr(cpu_wide)),
            dummy: RecordParseInfo::new(&dummy_attr(cpu_wide)),
        }
    }

    fn sid(&self, id: u64, tsc: u64) -> SampleId {
        self.sid_of(self.pid, id, tsc)
    }

    /// The sample_id of a record written while task `pid` (a single thread) ran.
    fn sid_of(&self, pid: u32, id: u64, tsc: u64) -> SampleId {
        SampleId {
            tid: Some(PidTid { pid, tid: pid }),
            time: Some(tsc_to_perf_time(tsc)),
            cpu: self.cpu_wide.then_some(CpuRes { cpu: CPU, res: 0 }),
            identifier: Some(id),
            ..Default::default()
        }
    }

    /// The context switch on [`CPU`] from the idle task (pid 0) to the program, as the
    /// kernel writes it for a CPU-wide `context_switch` event: the switch-out in the idle
    /// task's name (its next task the program) at `tsc`, the switch-in in the program's
    /// (its previous task the idle one) at `tsc + 1`.
    pub(crate) fn switch_to_program(&mut self, tsc: u64) {
        let out = SwitchCpuWideRecord {
            misc: PERF_RECORD_MISC_SWITCH_OUT,
            next_prev_pid: self.pid,
            next_prev_tid: self.pid,
            sample_id: self.sid_of(0, DUMMY_ID, tsc),
        }
        .to_vec(&self.dummy, Endianness::NATIVE);
        self.push(out);
        let r = SwitchCpuWideRecord {
            misc: 0,
            next_prev_pid: 0,
            next_prev_tid: 0,
            sample_id: self.sid(DUMMY_ID, tsc + 1),
        }
        .to_vec(&self.dummy, Endianness::NATIVE);
        self.push(r);
    }

    fn push(&mut self, r: Result<Vec<u8>, perfaux_abi::error::EncodeError>) {
        self.records
            .push(r.expect("a sideband record fits in 64 KiB"));
    }

    pub(crate) fn itrace_start(&mut self, tsc: u64) {
        let r = ItraceStartRecord {
            misc: 0,
            pid: self.pid,
            tid: self.pid,
            sample_id: self.sid(PT_ID, tsc),
        }
        .to_vec(&self.pt, Endianness::NATIVE);
        self.push(r);
    }

    /// A sample of the `instructions` event at `tsc`, at `ip`, carrying `aux` (the trace's
    /// last bytes), padded with zeros to 8 bytes after them as the kernel does
    /// (`perf_aux_sample_output`).
    pub(crate) fn aux_sample(&mut self, tsc: u64, ip: u64, aux: &[u8]) {
        let Some(plan) = self.aux_sample else { return };
        let info = RecordParseInfo::new(&sampler_attr(self.cpu_wide, &plan));
        let mut data = aux.to_vec();
        data.resize(data.len().next_multiple_of(8), 0);
        let sid = self.sid(SAMPLER_ID, tsc);
        let r = SampleRecord {
            misc: PERF_RECORD_MISC_USER,
            identifier: Some(SAMPLER_ID),
            ip: Some(ip),
            tid: sid.tid,
            time: sid.time,
            cpu: sid.cpu,
            aux: Some(RawData::new(&data, &[])),
            ..Default::default()
        }
        .to_vec(&info, Endianness::NATIVE);
        self.push(r);
    }

    /// A sample of the aux-action event that pauses (`pause`) or resumes the trace, at
    /// `tsc`, at `ip` (where the program was interrupted).
    pub(crate) fn pause_sample(&mut self, tsc: u64, ip: u64, pause: bool) {
        let info = RecordParseInfo::new(&action_attr(self.cpu_wide, pause));
        let id = if pause { PAUSE_ID } else { RESUME_ID };
        let sid = self.sid(id, tsc);
        let r = SampleRecord {
            misc: PERF_RECORD_MISC_USER,
            identifier: Some(id),
            ip: Some(ip),
            tid: sid.tid,
            time: sid.time,
            cpu: sid.cpu,
            ..Default::default()
        }
        .to_vec(&info, Endianness::NATIVE);
        self.push(r);
    }

    pub(crate) fn comm(&mut self, tsc: u64) {
        let r = CommRecord {
            misc: PERF_RECORD_MISC_COMM_EXEC,
            pid: self.pid,
            tid: self.pid,
            comm: RawData::new(self.comm.as_bytes(), &[]),
            sample_id: self.sid(DUMMY_ID, tsc),
        }
        .to_vec(&self.dummy, Endianness::NATIVE);
        self.push(r);
    }

    pub(crate) fn mmap2(&mut self, tsc: u64, m: &Mapping) {
        let p = m.perms.as_bytes();
        let bit = |on: bool, b: i32| if on { b as u32 } else { 0 };
        let prot = bit(p[0] == b'r', libc::PROT_READ)
            | bit(p[1] == b'w', libc::PROT_WRITE)
            | bit(p[2] == b'x', libc::PROT_EXEC);
        let flags = if p[3] == b's' {
            libc::MAP_SHARED
        } else {
            libc::MAP_PRIVATE
        } as u32;
        let r = Mmap2Record {
            misc: PERF_RECORD_MISC_USER,
            pid: self.pid,
            tid: self.pid,
            addr: m.start,
            len: m.end - m.start,
            pgoff: m.pgoff,
            file_id: Mmap2FileId::Inode {
                maj: m.dev.0,
                min: m.dev.1,
                ino: m.inode,
                ino_generation: 0,
            },
            prot,
            flags,
            filename: RawData::new(m.name.as_bytes(), &[]),
            sample_id: self.sid(DUMMY_ID, tsc),
        }
        .to_vec(&self.dummy, Endianness::NATIVE);
        self.push(r);
        if m.is_file() && !self.files.iter().any(|(n, _)| *n == m.name) {
            let id = std::fs::read(&m.name).ok().and_then(|d| elf_build_id(&d));
            self.files.push((m.name.clone(), id));
        }
    }
}

/// The GNU build id (NT_GNU_BUILD_ID note) of an ELF file's bytes.
pub fn elf_build_id(data: &[u8]) -> Option<Vec<u8>> {
    use object::Object;
    let file = object::File::parse(data).ok()?;
    file.build_id().ok().flatten().map(<[u8]>::to_vec)
}

/// perf's `PERF_RECORD_MISC_BUILD_ID_SIZE`: the entry's byte 20 of `build_id` is its size.
const PERF_RECORD_MISC_BUILD_ID_SIZE: u16 = 1 << 15;
/// perf's NAME_ALIGN: the file names of HEADER_BUILD_ID entries are NUL-padded to it.
const BUILD_ID_NAME_ALIGN: usize = 64;

/// The HEADER_BUILD_ID feature section perf record writes (`write_buildid` in
/// tools/perf/util/build-id.c): per file a `struct perf_record_header_build_id` — header
/// {PERF_RECORD_HEADER_BUILD_ID, PERF_RECORD_MISC_USER | PERF_RECORD_MISC_BUILD_ID_SIZE,
/// size}, pid (-1: the host machine's), build_id[20] + its size + 3 reserved bytes — and
/// the file name, NUL-padded to a multiple of 64 bytes (at least one NUL).
fn build_id_section(files: &[(String, Option<Vec<u8>>)], e: Endianness) -> Vec<u8> {
    let mut v = Vec::new();
    for (name, id) in files {
        let Some(id) = id else { continue };
        let id = &id[..id.len().min(20)];
        let name_len = (name.len() + 1).div_ceil(BUILD_ID_NAME_ALIGN) * BUILD_ID_NAME_ALIGN;
        let size = 8 + 4 + 24 + name_len;
        v.extend_from_slice(&e.u32_bytes(PERF_RECORD_HEADER_BUILD_ID));
        v.extend_from_slice(&e.u16_bytes(PERF_RECORD_MISC_USER | PERF_RECORD_MISC_BUILD_ID_SIZE));
        v.extend_from_slice(&e.u16_bytes(size as u16));
        v.extend_from_slice(&e.u32_bytes(u32::MAX));
        let mut b = [0u8; 24];
        b[..id.len()].copy_from_slice(id);
        b[20] = id.len() as u8;
        v.extend_from_slice(&b);
        let start = v.len();
        v.extend_from_slice(name.as_bytes());
        v.resize(start + name_len, 0);
    }
    v
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// One AUXTRACE record's payload and the PERF_RECORD_AUX the kernel wrote for it.
#[derive(Debug, Clone)]
pub(crate) struct AuxBuffer<'a> {
    /// The bytes of the packet stream it holds.
    pub(crate) range: std::ops::Range<usize>,
    /// Those bytes.
    pub(crate) data: &'a [u8],
    /// The AUXTRACE record's `offset` and `reference` (a TSC).
    pub(crate) offset: u64,
    pub(crate) reference: u64,
    /// The PERF_RECORD_AUX's fields.
    pub(crate) aux_offset: u64,
    pub(crate) aux_size: u64,
    pub(crate) aux_flags: u64,
}

impl<'a> AuxBuffer<'a> {
    /// The whole trace in one buffer, read at `tsc` (the full trace mode, per thread or CPU).
    pub(crate) fn whole(trace: &'a [u8], tsc: u64) -> Self {
        Self {
            range: 0..trace.len(),
            data: trace,
            offset: 0,
            reference: tsc,
            aux_offset: 0,
            aux_size: trace.len() as u64,
            aux_flags: 0,
        }
    }
}

/// Writes the perf.data: `buffers` the AUXTRACE records (the packet stream, whole or in
/// snapshots), `end_tsc` the TSC after the exit.
pub(crate) fn write(
    path: &std::path::Path,
    side: &Sideband,
    buffers: &[AuxBuffer<'_>],
    end_tsc: u64,
) -> Result<(), String> {
    let e = Endianness::NATIVE;
    let mut host = HostInfo::from_machine();
    // The trace claims Intel PT hardware: say an Intel CPU made it (perf keys errata
    // workarounds on the CPUID).
    host.cpuid = "GenuineIntel,6,85,4".into();
    host.cpudesc = "Intel(R) Xeon(R) CPU (perfaux-ptgen, single-stepped)".into();
    let mut cmdline = vec!["perf".into(), "record".into()];
    if !side.cpu_wide {
        cmdline.push("--per-thread".into());
    }
    if side.snapshot {
        cmdline.push("--snapshot=e".into());
    }
    // The kernel traced: the event without its `u` modifier.
    let pt_event = match pt_name(side.pauses) {
        name if side.kernel => name.trim_end_matches('u'),
        name => name,
    };
    // The group the intel_pt event leads, if any: its name and its members'.
    let group: Option<(String, u32)> = match (&side.aux_sample, side.pauses) {
        (Some(plan), _) => {
            cmdline.push(format!("--aux-sample={}", plan.size));
            Some((format!("{{{pt_event},{}}}", sampler_name(plan)), 2))
        }
        (None, Some(_)) => Some((
            format!(
                "{{{pt_event},{},{}}}",
                action_name(false),
                action_name(true)
            ),
            3,
        )),
        (None, None) => None,
    };
    let event = group.as_ref().map_or(pt_event, |(g, _)| g.as_str());
    cmdline.extend(["-e".into(), event.into(), "--".into(), side.comm.clone()]);
    host.cmdline = cmdline;
    let cpu_wide = side.cpu_wide;
    let mut pt = pt_attr(cpu_wide);
    if side.kernel {
        pt.flags.remove(AttrFlags::EXCLUDE_KERNEL);
    }
    if side.pauses == Some(true) {
        pt.aux_action = AuxAction::START_PAUSED;
    }
    let mut events = vec![WriterEvent {
        attr: pt,
        ids: vec![PT_ID],
        name: pt_event.into(),
    }];
    if let Some(plan) = &side.aux_sample {
        events.push(WriterEvent {
            attr: sampler_attr(cpu_wide, plan),
            ids: vec![SAMPLER_ID],
            name: sampler_name(plan),
        });
    }
    if side.pauses.is_some() {
        for (pause, id) in [(false, RESUME_ID), (true, PAUSE_ID)] {
            events.push(WriterEvent {
                attr: action_attr(cpu_wide, pause),
                ids: vec![id],
                name: action_name(pause).into(),
            });
        }
    }
    events.push(WriterEvent {
        attr: dummy_attr(cpu_wide),
        ids: vec![DUMMY_ID],
        name: "dummy:u".into(),
    });
    let mut wopts = WriterOptions::new(host);
    wopts
        .raw_features
        .insert(Feature::BUILD_ID, build_id_section(&side.files, e));
    if let Some((name, members)) = &group {
        // HEADER_GROUP_DESC: one group, the intel_pt event (index 0) leading its members.
        let mut g = Vec::new();
        g.extend_from_slice(&e.u32_bytes(1));
        let len = (name.len() + 1).div_ceil(BUILD_ID_NAME_ALIGN) * BUILD_ID_NAME_ALIGN;
        g.extend_from_slice(&e.u32_bytes(len as u32));
        let start = g.len();
        g.extend_from_slice(name.as_bytes());
        g.resize(start + len, 0);
        g.extend_from_slice(&e.u32_bytes(0));
        g.extend_from_slice(&e.u32_bytes(*members));
        wopts.raw_features.insert(Feature::GROUP_DESC, g);
    }
    let f = std::fs::File::create(path).map_err(|x| format!("{}: {x}", path.display()))?;
    let mut w = PerfDataWriter::new(std::io::BufWriter::new(f), events, wopts).map_err(err)?;
    let mut v = Vec::new();
    if side.aux_sample.is_some() {
        // PERF_RECORD_ID_INDEX: which buffer (mmap idx), CPU and thread each id's records
        // come from. perf queues a sample's AUX data by its id's entry (its
        // `auxtrace_queues__add_sample`), and reads the samples for that while it reads the
        // AUXTRACE_INFO: the index must come before.
        let (cpu, tid) = if cpu_wide {
            (u64::from(CPU), u64::MAX)
        } else {
            (u64::MAX, u64::from(side.pid))
        };
        IdIndexRecord {
            entries: [PT_ID, SAMPLER_ID, DUMMY_ID]
                .into_iter()
                .map(|id| IdIndexEntry {
                    id,
                    idx: 0,
                    cpu,
                    tid,
                    guest: None,
                })
                .collect(),
        }
        .write(&mut v, e)
        .map_err(err)?;
        w.write_record(&v).map_err(err)?;
        v.clear();
    }
    TimeConvRecord {
        time_shift: u64::from(TIME_SHIFT),
        time_mult: u64::from(TIME_MULT),
        time_zero: TIME_ZERO,
        ext: Some(TimeConvExt {
            time_cycles: 0,
            time_mask: 0,
            cap_user_time_zero: 1,
            cap_user_time_short: 0,
            reserved: [0; 6],
        }),
    }
    .write(&mut v, e);
    w.write_record(&v).map_err(err)?;
    v.clear();
    auxtrace_info(cpu_wide, side.snapshot)
        .write(&mut v, e)
        .map_err(err)?;
    w.write_record(&v).map_err(err)?;
    v.clear();
    FinishedInitRecord.write(&mut v, e);
    w.write_record(&v).map_err(err)?;
    for r in &side.records {
        w.write_record(r).map_err(err)?;
    }
    // The trace, as perf record copies it out of the AUX area. `reference` is the TSC when
    // perf read the buffer (perf record's `intel_pt_reference` is rdtsc()): perf's decoder
    // takes the top byte of the 7-byte TSC packets from it, and without it (0) ignores the
    // first TSC, so that the first decoder state has no timestamp, which perf 6.1 does not
    // survive (a NULL `ptq->state` in intel_pt_walk_next_insn: SIGSEGV).
    // Per thread: the thread's tid, cpu -1; per CPU: tid -1, the CPU.
    let (tid, cpu) = if cpu_wide {
        (u32::MAX, CPU)
    } else {
        (side.pid, u32::MAX)
    };
    let pt = RecordParseInfo::new(&pt_attr(cpu_wide));
    let dummy = RecordParseInfo::new(&dummy_attr(cpu_wide));
    for b in buffers {
        // perf's copy of the AUX area, then the kernel's AUX record of the data.
        let aux = AuxtraceRecord::for_payload(b.data.len(), b.offset, b.reference, 0, tid, cpu);
        w.write_auxtrace(&aux, b.data).map_err(err)?;
        let rec = AuxRecord {
            misc: 0,
            aux_offset: b.aux_offset,
            aux_size: b.aux_size,
            flags: b.aux_flags,
            sample_id: side.sid(PT_ID, b.reference),
        }
        .to_vec(&pt, e)
        .map_err(err)?;
        w.write_record(&rec).map_err(err)?;
    }
    let rec = TaskRecord {
        kind: TaskKind::Exit,
        misc: 0,
        pid: side.pid,
        ppid: std::process::id(),
        tid: side.pid,
        ptid: std::process::id(),
        time: tsc_to_perf_time(end_tsc + 1),
        sample_id: side.sid(DUMMY_ID, end_tsc + 1),
    }
    .to_vec(&dummy, e)
    .map_err(err)?;
    w.write_record(&rec).map_err(err)?;
    v.clear();
    FinishedRoundRecord.write(&mut v, e);
    w.write_record(&v).map_err(err)?;
    let mut out = w.finish().map_err(err)?;
    std::io::Write::flush(&mut out).map_err(err)?;
    Ok(())
}
