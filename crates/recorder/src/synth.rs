//! Records perf synthesizes at the start of a recording, so that its
//! tools name the threads and resolve addresses: COMM
//! (`perf_event__synthesize_comm`) and MMAP2 from /proc/self/maps
//! (`perf_event__synthesize_mmap_events`); and the builders of the
//! side-band records (COMM, FORK, EXIT, MMAP2) a recorder writes for tasks
//! it learns of while recording (a traced program's threads and objects),
//! one set for every writer of them.

use perfaux_abi::consts::*;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::{
    CommRecord, EncodeRecord, Mmap2FileId, Mmap2Record, TaskKind, TaskRecord,
};
use perfaux_abi::sample_id::{CpuRes, PidTid, SampleId};

use crate::error::{RecordError, Result};
use crate::recorder::Recorder;

/// PROT_EXEC, in MMAP2's `prot`.
const PROT_EXEC: u32 = 4;

fn encode_err(what: &str) -> impl FnOnce(perfaux_abi::error::EncodeError) -> RecordError {
    let what = what.to_string();
    move |source| RecordError::Encode { what, source }
}

/// The sample_id of a side-band record of thread `tid` of `pid` at `time`,
/// naming the event `id` (0: "the first event"; the kernel writes a
/// thread's COMM into each of its events' buffers with that event's id).
pub fn sample_id(pid: u32, tid: u32, time: u64, id: u64) -> SampleId {
    SampleId {
        tid: Some(PidTid { pid, tid }),
        time: Some(time),
        cpu: Some(CpuRes { cpu: 0, res: 0 }),
        identifier: Some(id),
        ..Default::default()
    }
}

/// The sample_id of a synthesized record: time 0, id 0 ("the first event").
fn synth_id(pid: u32, tid: u32) -> SampleId {
    sample_id(pid, tid, 0, 0)
}

/// PERF_RECORD_COMM of thread `tid` of `pid` named `comm`; `exec`: the name
/// an exec gave it (PERF_RECORD_MISC_COMM_EXEC, as the kernel's
/// `perf_event_comm`).
pub fn comm_record(
    info: &RecordParseInfo,
    (pid, tid): (u32, u32),
    comm: &str,
    exec: bool,
    sample_id: SampleId,
) -> Result<Vec<u8>> {
    CommRecord {
        misc: if exec { PERF_RECORD_MISC_COMM_EXEC } else { 0 },
        pid,
        tid,
        comm: RawData::new(comm.as_bytes(), &[]),
        sample_id,
    }
    .to_vec(info, perfaux_abi::Endianness::NATIVE)
    .map_err(encode_err("synthesizing COMM"))
}

/// PERF_RECORD_FORK or PERF_RECORD_EXIT of thread `tid` of `pid`, whose
/// parent is thread `ptid` of `ppid`, at `time` (`task`: pid, ppid, tid,
/// ptid, time).
pub fn task_record(
    info: &RecordParseInfo,
    kind: TaskKind,
    (pid, ppid, tid, ptid, time): (u32, u32, u32, u32, u64),
) -> Result<Vec<u8>> {
    TaskRecord {
        kind,
        misc: 0,
        pid,
        ppid,
        tid,
        ptid,
        time,
        sample_id: sample_id(pid, tid, time, 0),
    }
    .to_vec(info, perfaux_abi::Endianness::NATIVE)
    .map_err(encode_err(match kind {
        TaskKind::Fork => "synthesizing FORK",
        TaskKind::Exit => "synthesizing EXIT",
    }))
}

/// A file mapping as PERF_RECORD_MMAP2 describes it.
#[derive(Debug, Clone, Copy)]
pub struct FileMapping<'a> {
    /// The mapping's first address and length.
    pub addr: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The file offset it maps from.
    pub pgoff: u64,
    /// The file's device (major, minor) and inode.
    pub dev_ino: (u32, u32, u64),
    /// PROT_* bits.
    pub prot: u32,
    /// MAP_SHARED 1, MAP_PRIVATE 2.
    pub flags: u32,
    /// The file's path.
    pub path: &'a [u8],
}

/// PERF_RECORD_MMAP2 (user space) of `m` in process `pid`; a mapping without PROT_EXEC is
/// marked PERF_RECORD_MISC_MMAP_DATA, as the kernel marks it.
pub fn mmap2_record(
    info: &RecordParseInfo,
    pid: u32,
    m: &FileMapping<'_>,
    sample_id: SampleId,
) -> Result<Vec<u8>> {
    let (maj, min, ino) = m.dev_ino;
    let data = if m.prot & PROT_EXEC == 0 {
        PERF_RECORD_MISC_MMAP_DATA
    } else {
        0
    };
    Mmap2Record {
        misc: PERF_RECORD_MISC_USER | data,
        pid,
        tid: pid,
        addr: m.addr,
        len: m.len,
        pgoff: m.pgoff,
        file_id: Mmap2FileId::Inode {
            maj,
            min,
            ino,
            ino_generation: 0,
        },
        prot: m.prot,
        flags: m.flags,
        filename: RawData::new(m.path, &[]),
        sample_id,
    }
    .to_vec(info, perfaux_abi::Endianness::NATIVE)
    .map_err(encode_err("synthesizing MMAP2"))
}

/// Writes a synthesized COMM: its sample_id is zero, which perf reads as
/// "the first event".
pub fn synth_comm(rec: &mut Recorder, pid: u32, tid: u32, comm: &str) -> Result<()> {
    let bytes = comm_record(rec.file_info(), (pid, tid), comm, false, synth_id(pid, tid))?;
    rec.write_record(&bytes)
}

/// Writes synthesized MMAP2s for the executable mappings of this process,
/// so that perf resolves the probe addresses in samples to functions.
pub fn synth_mmaps(rec: &mut Recorder, pid: u32) -> Result<()> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Ok(());
    };
    synth_maps(rec, pid, &maps, false, synth_id(pid, pid))
}

/// Writes synthesized MMAP2s for the file mappings of process `pid` (/proc/PID/maps, as
/// perf's `perf_event__synthesize_mmap_events` for `-p`): the executable ones, and with
/// `data` the others too (perf's `mmap_data`), each with `sid`.
pub fn synth_process_mmaps(rec: &mut Recorder, pid: u32, data: bool, sid: SampleId) -> Result<()> {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Ok(());
    };
    synth_maps(rec, pid, &maps, data, sid)
}

/// The MMAP2s of the file mappings `maps` (a /proc maps text) lists.
fn synth_maps(rec: &mut Recorder, pid: u32, maps: &str, data: bool, sid: SampleId) -> Result<()> {
    for line in maps.lines() {
        // start-end perms offset maj:min inode path
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms), Some(off), Some(dev), Some(ino)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let path = f.collect::<Vec<_>>().join(" ");
        if !(perms.contains('x') || data) || !path.starts_with('/') {
            continue;
        }
        let hex = |t: &str| u64::from_str_radix(t, 16).ok();
        let (Some((a, b)), Some((maj, min))) = (range.split_once('-'), dev.split_once(':')) else {
            continue;
        };
        let (Some(start), Some(end), Some(pgoff), Some(maj), Some(min), Ok(ino)) = (
            hex(a),
            hex(b),
            hex(off),
            hex(maj),
            hex(min),
            ino.parse::<u64>(),
        ) else {
            continue;
        };
        let b = perms.as_bytes();
        let prot = u32::from(b[0] == b'r')
            | (u32::from(b[1] == b'w') << 1)
            | (u32::from(b[2] == b'x') << 2);
        // MAP_SHARED 1, MAP_PRIVATE 2.
        let flags = if b.get(3) == Some(&b's') { 1 } else { 2 };
        let m = FileMapping {
            addr: start,
            len: end.saturating_sub(start),
            pgoff,
            dev_ino: (maj as u32, min as u32, ino),
            prot,
            flags,
            path: path.as_bytes(),
        };
        let bytes = mmap2_record(rec.file_info(), pid, &m, sid)?;
        rec.write_record(&bytes)?;
    }
    Ok(())
}
