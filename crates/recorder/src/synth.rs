//! Records perf synthesizes at the start of a recording, so that its
//! tools name the threads and resolve addresses: COMM
//! (`perf_event__synthesize_comm`) and MMAP2 from /proc/self/maps
//! (`perf_event__synthesize_mmap_events`).

use perfaux_abi::consts::*;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::{CommRecord, EncodeRecord, Mmap2FileId, Mmap2Record};
use perfaux_abi::sample_id::{CpuRes, PidTid, SampleId};

use crate::error::{RecordError, Result};
use crate::recorder::Recorder;

fn encode_err(what: &str) -> impl FnOnce(perfaux_abi::error::EncodeError) -> RecordError {
    let what = what.to_string();
    move |source| RecordError::Encode { what, source }
}

/// The sample_id of a synthesized record: time 0, id 0 ("the first event").
fn synth_id(pid: u32, tid: u32) -> SampleId {
    SampleId {
        tid: Some(PidTid { pid, tid }),
        time: Some(0),
        cpu: Some(CpuRes { cpu: 0, res: 0 }),
        identifier: Some(0),
        ..Default::default()
    }
}

/// Writes a synthesized COMM: its sample_id is zero, which perf reads as
/// "the first event".
pub fn synth_comm(rec: &mut Recorder, pid: u32, tid: u32, comm: &str) -> Result<()> {
    let r = CommRecord {
        misc: 0,
        pid,
        tid,
        comm: RawData::new(comm.as_bytes(), &[]),
        sample_id: synth_id(pid, tid),
    };
    let bytes = r
        .to_vec(rec.file_info(), perfaux_abi::Endianness::NATIVE)
        .map_err(encode_err("synthesizing COMM"))?;
    rec.write_record(&bytes)
}

/// Writes synthesized MMAP2s for the executable mappings of this process,
/// so that perf resolves the probe addresses in samples to functions.
pub fn synth_mmaps(rec: &mut Recorder, pid: u32) -> Result<()> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Ok(());
    };
    for line in maps.lines() {
        // start-end perms offset maj:min inode path
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms), Some(off), Some(dev), Some(ino)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let path = f.collect::<Vec<_>>().join(" ");
        if !perms.contains('x') || !path.starts_with('/') {
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
        let r = Mmap2Record {
            misc: PERF_RECORD_MISC_USER,
            pid,
            tid: pid,
            addr: start,
            len: end.saturating_sub(start),
            pgoff,
            file_id: Mmap2FileId::Inode {
                maj: maj as u32,
                min: min as u32,
                ino,
                ino_generation: 0,
            },
            prot,
            flags,
            filename: RawData::new(path.as_bytes(), &[]),
            sample_id: synth_id(pid, pid),
        };
        let bytes = r
            .to_vec(rec.file_info(), perfaux_abi::Endianness::NATIVE)
            .map_err(encode_err("synthesizing MMAP2"))?;
        rec.write_record(&bytes)?;
    }
    Ok(())
}
