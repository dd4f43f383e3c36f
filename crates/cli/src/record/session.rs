//! One recording: the events of every workload thread, their buffers, the
//! drain loop, snapshots, and the file at the end.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufWriter;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use perfaux_abi::consts::ext::PERF_RECORD_UEVENT;
use perfaux_abi::consts::*;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::{CommRecord, EncodeRecord, Mmap2FileId, Mmap2Record, Record};
use perfaux_abi::sample_id::{CpuRes, PidTid, SampleId};
use perfaux_abi::{Endianness, PerfEventHeader};
use perfaux_core::{EventFd, Mmap, Prot, Target, page_size, perf_event_open_attr};
use perfaux_perfdata::Feature;
use perfaux_perfdata::writer::{PerfDataWriter, WriterEvent, WriterOptions};

use super::attrs::{EventAttrs, attrs_for};
use super::spill::Spill;
use super::{RecordConfig, RecordSummary};
use crate::auxdata::{AuxChunk, AuxData, ChunkKind, PERFAUX_FEATURE_BIT};
use crate::error::CliError;
use crate::events::EventKind;
use crate::progress::Progress;
use crate::uevent::uevent_sample;
use crate::workload::{WORKERS, Workload};

/// Set by the SIGUSR2 handler: take a snapshot.
static SNAPSHOT_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigusr2(_: libc::c_int) {
    SNAPSHOT_REQUESTED.store(true, Ordering::Release);
}

fn install_sigusr2() -> Result<(), CliError> {
    // SAFETY: the handler only stores to an atomic (async-signal-safe), and
    // `signal` with a valid handler address has no other precondition.
    let r = unsafe { libc::signal(libc::SIGUSR2, on_sigusr2 as *const () as libc::sighandler_t) };
    if r == libc::SIG_ERR {
        return Err(CliError::msg("cannot install the SIGUSR2 handler for -S"));
    }
    Ok(())
}

/// The uevent sink of the workload: seed 002's prctl, perfaux's function.
fn emit_uevent(type_: u32, data: &[u8]) {
    // A payload over 4096 bytes is E2BIG; the workload's are short.
    let _ = perfaux_core::perf_uevent(type_, data, 0);
}

/// One workload thread's events and buffer.
struct ThreadEvents {
    tid: i32,
    /// Per event spec, in spec order.
    fds: Vec<EventFd>,
    data: Mmap,
    /// The AUX mapping and the index of the AUX event in `fds`.
    aux: Option<(Mmap, usize)>,
    /// The AUX event is `uevent_aux` (a uevent log, not a software trace).
    log_aux: bool,
}

struct Session<'a> {
    cfg: &'a RecordConfig,
    attrs: Vec<EventAttrs>,
    /// Sample id -> event spec index.
    spec_of: HashMap<u64, usize>,
    open_info: Vec<RecordParseInfo>,
    file_info: Vec<RecordParseInfo>,
    spill: Spill,
    chunks: Vec<AuxChunk>,
    summary: RecordSummary,
    endian: Endianness,
}

fn open_err(ev: &str, tid: i32, e: impl std::fmt::Display) -> CliError {
    CliError::msg(format!("event '{ev}' on thread {tid}: {e}"))
}

/// An mmap refusal, with perf's advice when it is the locked-memory limit.
fn mmap_err(area: &str, e: &perfaux_core::Error) -> String {
    let mut msg = format!("mmap of the {area}: {e}");
    if e.errno == perfaux_abi::errno::EPERM {
        msg.push_str(
            "\nPermission error mapping pages. Consider increasing \
             /proc/sys/kernel/perf_event_mlock_kb, or try again with a smaller value of -m.",
        );
    }
    msg
}

impl Session<'_> {
    /// Opens every event for thread `tid` and maps its buffer.
    fn open_thread(&self, tid: i32) -> Result<ThreadEvents, CliError> {
        let evs = &self.cfg.events;
        let mut fds: Vec<EventFd> = Vec::with_capacity(evs.len());
        for (i, ev) in evs.iter().enumerate() {
            let group_fd = if ev.leader == i {
                -1
            } else {
                fds[ev.leader].as_raw()
            };
            let fd =
                perf_event_open_attr(&self.attrs[i].open, Target::Thread(tid), -1, group_fd, 0)
                    .map_err(|e| open_err(&ev.text, tid, e))?;
            fds.push(fd);
        }
        // The buffer belongs to the AUX event if there is one (its AUX area
        // hangs off the buffer), else to the first event.
        let owner = evs.iter().position(|e| e.kind.is_aux()).unwrap_or(0);
        let page = page_size() as u64;
        let data_pages = (self.cfg.data_size / page) as usize;
        let data = fds[owner]
            .mmap(0, 1 + data_pages, Prot::READ_WRITE)
            .map_err(|e| open_err(&evs[owner].text, tid, mmap_err("data area", &e)))?;
        let aux = if evs[owner].kind.is_aux() {
            let aux_off = (1 + data_pages as u64) * page;
            data.set_aux_area(aux_off, self.cfg.aux_size)
                .map_err(|e| open_err(&evs[owner].text, tid, e))?;
            // -S maps the AUX area read-only: overwrite, the flight recorder.
            let prot = if self.cfg.snapshot.is_some() {
                Prot::READ_ONLY
            } else {
                Prot::READ_WRITE
            };
            let m = fds[owner]
                .mmap(aux_off / page, (self.cfg.aux_size / page) as usize, prot)
                .map_err(|e| open_err(&evs[owner].text, tid, mmap_err("AUX area", &e)))?;
            Some((m, owner))
        } else {
            None
        };
        for (i, fd) in fds.iter().enumerate() {
            if i != owner {
                fd.set_output(fds[owner].as_raw())
                    .map_err(|e| open_err(&evs[i].text, tid, format!("SET_OUTPUT: {e}")))?;
            }
        }
        let log_aux = evs[owner].kind == EventKind::UeventAux;
        Ok(ThreadEvents {
            tid,
            fds,
            data,
            aux,
            log_aux,
        })
    }

    fn push(&mut self, rec: &[u8]) -> Result<(), CliError> {
        self.summary.records += 1;
        self.spill.push(rec)
    }

    /// A synthesized COMM (perf's `perf_event__synthesize_comm`): its
    /// sample_id is zero, which perf reads as "the first event".
    fn synth_comm(&mut self, pid: u32, tid: u32, comm: &str) -> Result<(), CliError> {
        let rec = CommRecord {
            misc: 0,
            pid,
            tid,
            comm: RawData::new(comm.as_bytes(), &[]),
            sample_id: SampleId {
                tid: Some(PidTid { pid, tid }),
                time: Some(0),
                cpu: Some(CpuRes { cpu: 0, res: 0 }),
                identifier: Some(0),
                ..Default::default()
            },
        };
        let bytes = rec
            .to_vec(&self.file_info[0], self.endian)
            .map_err(|e| CliError::msg(format!("synthesizing COMM: {e}")))?;
        self.push(&bytes)
    }

    /// Synthesized MMAP2s for the executable mappings of the process (perf's
    /// `perf_event__synthesize_mmap_events` from /proc/PID/maps), so that
    /// perf resolves the probe addresses in samples to the workload's
    /// functions.
    fn synth_mmaps(&mut self, pid: u32) -> Result<(), CliError> {
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
            let (Some((a, b)), Some((maj, min))) = (range.split_once('-'), dev.split_once(':'))
            else {
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
            let rec = Mmap2Record {
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
                sample_id: SampleId {
                    tid: Some(PidTid { pid, tid: pid }),
                    time: Some(0),
                    cpu: Some(CpuRes { cpu: 0, res: 0 }),
                    identifier: Some(0),
                    ..Default::default()
                },
            };
            let bytes = rec
                .to_vec(&self.file_info[0], self.endian)
                .map_err(|e| CliError::msg(format!("synthesizing MMAP2: {e}")))?;
            self.push(&bytes)?;
        }
        Ok(())
    }

    /// Drains one thread's data area (and, in full-trace mode, its AUX
    /// area); returns the number of records written.
    fn drain(&mut self, t: &mut ThreadEvents) -> Result<u64, CliError> {
        let mut n = 0;
        let reader = t
            .data
            .data_reader()
            .ok_or_else(|| CliError::msg("data mapping has no reader"))?;
        let recs = reader
            .read_records()
            .map_err(|e| CliError::msg(format!("thread {}: data area: {e}", t.tid)))?;
        let mut out: Vec<Vec<u8>> = Vec::new();
        for r in recs {
            let r = r.map_err(|e| CliError::msg(format!("thread {}: data area: {e}", t.tid)))?;
            out.push(r.bytes.to_vec());
        }
        for rec in out {
            self.take_record(&rec)?;
            n += 1;
        }
        if self.cfg.snapshot.is_none()
            && let Some((m, owner)) = &mut t.aux
        {
            let id = t.fds[*owner].id();
            let reader = m
                .aux_reader()
                .ok_or_else(|| CliError::msg("AUX mapping has no reader"))?;
            let got = reader
                .read()
                .map_err(|e| CliError::msg(format!("thread {}: AUX area: {e}", t.tid)))?;
            if !got.data.is_empty() {
                self.summary.aux_bytes += got.data.len() as u64;
                self.chunks.push(AuxChunk {
                    event_id: id,
                    cpu: u32::MAX,
                    tid: t.tid as u32,
                    aux_offset: got.offset,
                    kind: if t.log_aux {
                        ChunkKind::UeventLog
                    } else {
                        ChunkKind::Trace
                    },
                    flags: 0,
                    bytes: got.data.to_vec(),
                });
            }
        }
        Ok(n)
    }

    /// Writes one record from a ring, converting a uevent to a sample.
    fn take_record(&mut self, rec: &[u8]) -> Result<(), CliError> {
        let mut h8 = [0u8; 8];
        h8.copy_from_slice(&rec[..8]);
        let h = PerfEventHeader::parse(h8, self.endian);
        let body = RawData::new(&rec[8..], &[]);
        // Which event: by the IDENTIFIER at the end of the trailer (all our
        // attrs carry the same sample_id layout).
        let info = self.open_info[0];
        let spec = info
            .record_id(h.type_, body, self.endian)
            .and_then(|id| self.spec_of.get(&id).copied());
        let parsed =
            spec.map(|s| Record::parse(h.type_, h.misc, body, &self.open_info[s], self.endian));
        match parsed {
            Some(Ok(Record::Uevent(u))) if h.type_ == PERF_RECORD_UEVENT => {
                let s = spec.unwrap_or(0);
                let bytes =
                    uevent_sample(&u, &self.file_info[s], self.endian).map_err(CliError::msg)?;
                self.push(&bytes)
            }
            Some(Ok(Record::Lost(l))) => {
                self.summary.lost += l.lost;
                self.push(rec)
            }
            Some(Ok(Record::LostSamples(l))) => {
                self.summary.lost += l.lost;
                self.push(rec)
            }
            Some(Ok(Record::Aux(a))) => {
                if a.flags & PERF_AUX_FLAG_TRUNCATED != 0 {
                    self.summary.lost += 1;
                }
                self.push(rec)
            }
            Some(Err(e)) => Err(CliError::msg(format!(
                "a record of type {} from the ring: {e}",
                h.type_
            ))),
            _ if h.type_ == PERF_RECORD_UEVENT => {
                // A uevent must belong to the stream event; anything else is
                // a record perf 6.1 cannot read (fact 2): refuse to write it.
                Err(CliError::msg("a uevent record with an unknown event id"))
            }
            _ => self.push(rec),
        }
    }

    /// Snapshot of every AUX area (perf's `record__read_auxtrace_snapshot`):
    /// disable the AUX event, copy the area, enable it again.
    fn snapshot(&mut self, threads: &mut [ThreadEvents]) -> Result<(), CliError> {
        let mut took = false;
        for t in threads.iter_mut() {
            let Some((m, owner)) = &mut t.aux else {
                continue;
            };
            let fd = &t.fds[*owner];
            fd.disable(0)
                .map_err(|e| CliError::msg(format!("snapshot: disable: {e}")))?;
            let id = fd.id();
            let reader = m
                .aux_reader()
                .ok_or_else(|| CliError::msg("AUX mapping has no reader"))?;
            let snap = reader
                .read_snapshot(0)
                .map_err(|e| CliError::msg(format!("thread {}: AUX snapshot: {e}", t.tid)))?;
            if !snap.data.is_empty() {
                self.summary.aux_bytes += snap.data.len() as u64;
                self.chunks.push(AuxChunk {
                    event_id: id,
                    cpu: u32::MAX,
                    tid: t.tid as u32,
                    aux_offset: snap.offset,
                    kind: if t.log_aux {
                        ChunkKind::UeventLog
                    } else {
                        ChunkKind::Snapshot
                    },
                    flags: if snap.wrapped {
                        PERF_AUX_FLAG_OVERWRITE as u32
                    } else {
                        0
                    },
                    bytes: snap.data.to_vec(),
                });
                took = true;
            }
            fd.enable(0)
                .map_err(|e| CliError::msg(format!("snapshot: enable: {e}")))?;
        }
        if took {
            self.summary.snapshots += 1;
        }
        Ok(())
    }
}

const FINISHED_ROUND: [u8; 8] = [PERF_RECORD_FINISHED_ROUND as u8, 0, 0, 0, 0, 0, 8, 0];

/// Runs the recording `cfg` describes; prints nothing but progress.
pub fn record(cfg: &RecordConfig, progress: &mut Progress) -> Result<RecordSummary, CliError> {
    let attrs = cfg
        .events
        .iter()
        .map(attrs_for)
        .collect::<Result<Vec<_>, _>>()?;
    let endian = Endianness::NATIVE;
    let page = page_size() as u64;
    if cfg.data_size < page || !(cfg.data_size / page).is_power_of_two() {
        return Err(CliError::msg(
            "-m: the data area must be a power of two pages",
        ));
    }
    if cfg.aux_size < page || !(cfg.aux_size / page).is_power_of_two() {
        return Err(CliError::msg(
            "-m: the AUX area must be a power of two pages",
        ));
    }
    let mut s = Session {
        cfg,
        open_info: attrs
            .iter()
            .map(|a| RecordParseInfo::new(&a.open))
            .collect(),
        file_info: attrs
            .iter()
            .map(|a| RecordParseInfo::new(&a.file))
            .collect(),
        attrs,
        spec_of: HashMap::new(),
        spill: Spill::create(&cfg.output)?,
        chunks: Vec::new(),
        summary: RecordSummary::default(),
        endian,
    };
    let workload = Workload::spawn(cfg.requests, emit_uevent)
        .map_err(|e| CliError::msg(format!("cannot start the workload: {e}")))?;
    let mut threads = Vec::with_capacity(WORKERS);
    for &tid in workload.tids() {
        threads.push(s.open_thread(tid)?);
    }
    let mut ids: Vec<Vec<u64>> = vec![Vec::new(); cfg.events.len()];
    for t in &threads {
        for (i, fd) in t.fds.iter().enumerate() {
            ids[i].push(fd.id());
            s.spec_of.insert(fd.id(), i);
        }
    }
    let pid = std::process::id();
    s.synth_comm(pid, pid, "perfaux")?;
    s.synth_mmaps(pid)?;
    for (w, &tid) in workload.tids().iter().enumerate() {
        s.synth_comm(pid, tid as u32, &format!("perfaux-worker{w}"))?;
    }
    s.push(&FINISHED_ROUND)?;
    if cfg.snapshot.is_some() {
        install_sigusr2()?;
    }
    for t in &threads {
        for (i, fd) in t.fds.iter().enumerate() {
            fd.enable(0)
                .map_err(|e| open_err(&cfg.events[i].text, t.tid, format!("enable: {e}")))?;
        }
    }
    if cfg.verbose {
        eprintln!(
            "perfaux record: recording started ({} threads, {} events each)",
            threads.len(),
            cfg.events.len()
        );
    }
    let dropped_before = dropped_total();
    workload.start();
    let mut done = false;
    while !done {
        done = workload.is_finished();
        let mut n = 0;
        for t in threads.iter_mut() {
            n += s.drain(t)?;
        }
        if n > 0 {
            s.summary.wakeups += 1;
            s.push(&FINISHED_ROUND)?;
        }
        if SNAPSHOT_REQUESTED.swap(false, Ordering::AcqRel) {
            s.snapshot(&mut threads)?;
        }
        progress.note(&format!(
            "{} records, {} bytes of AUX",
            s.summary.records, s.summary.aux_bytes
        ));
        if !done {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // The workers are done but alive: last snapshot, stop, last drain.
    if cfg.snapshot == Some(true) || SNAPSHOT_REQUESTED.swap(false, Ordering::AcqRel) {
        s.snapshot(&mut threads)?;
    }
    for t in &threads {
        for fd in t.fds.iter().rev() {
            fd.disable(0)
                .map_err(|e| CliError::msg(format!("disable: {e}")))?;
        }
    }
    let mut n = 0;
    for t in threads.iter_mut() {
        n += s.drain(t)?;
    }
    if n > 0 {
        s.summary.wakeups += 1;
        s.push(&FINISHED_ROUND)?;
    }
    s.summary.dropped_pause_resume = dropped_total() - dropped_before;
    drop(threads);
    workload.join().map_err(CliError::msg)?;
    write_file(s, ids)
}

/// Pause and resume requests dropped so far, process-wide.
fn dropped_total() -> u64 {
    let (p, r) = perfaux_core::aux::dropped_pause_resume();
    p + r
}

fn write_file(s: Session<'_>, ids: Vec<Vec<u64>>) -> Result<RecordSummary, CliError> {
    let cfg = s.cfg;
    let events: Vec<WriterEvent> = s
        .attrs
        .iter()
        .zip(ids)
        .map(|(a, ids)| WriterEvent {
            attr: a.file,
            ids,
            name: a.name.clone(),
        })
        .collect();
    let section = AuxData {
        probe_table: perfaux_swtrace::probe_table().to_bytes(),
        chunks: s.chunks,
    };
    let opts = WriterOptions {
        endian: s.endian,
        raw_features: BTreeMap::from([(Feature(PERFAUX_FEATURE_BIT), section.to_bytes())]),
        ..WriterOptions::default()
    };
    let out = &cfg.output;
    let f = File::create(out)
        .map_err(|e| CliError::msg(format!("{}: cannot create: {e}", out.display())))?;
    let mut w = PerfDataWriter::new(BufWriter::with_capacity(1 << 20, f), events, opts)
        .map_err(|e| CliError::file(out, e))?;
    s.spill.replay(|rec| {
        w.write_record(rec)
            .map(|_| ())
            .map_err(|e| CliError::file(out, e))
    })?;
    w.finish().map_err(|e| CliError::file(out, e))?;
    let mut summary = s.summary;
    summary.file_size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::mmap_err;
    use perfaux_abi::errno;

    #[test]
    fn a_locked_memory_refusal_carries_perfs_advice() {
        let e = perfaux_core::Error::new(errno::EPERM, "over the limit");
        let msg = mmap_err("AUX area", &e);
        assert!(
            msg.starts_with("mmap of the AUX area: EPERM: over the limit"),
            "{msg}"
        );
        assert!(msg.contains("perf_event_mlock_kb"), "{msg}");
        let other = mmap_err(
            "data area",
            &perfaux_core::Error::new(errno::EINVAL, "size"),
        );
        assert!(!other.contains("perf_event_mlock_kb"), "{other}");
    }
}
