//! The [`Recorder`]: events per thread, their rings, the drain, snapshots
//! and the perf.data at the end.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Duration;

use perfaux_abi::Endianness;
use perfaux_abi::PerfEventHeader;
use perfaux_abi::attr::PerfEventAttr;
use perfaux_abi::consts::ext::PERF_RECORD_UEVENT;
use perfaux_abi::consts::*;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::Record;
use perfaux_perfdata::Feature;
use perfaux_perfdata::record_attrs::{file_attr, finished_round};
use perfaux_perfdata::trace_section::{
    CHUNKS_FIRST_HEAD, ChunkHeader, ChunkKind, ChunkStream, PERFAUX_FEATURE_BIT, SNAPSHOT_BEGIN,
    probe_table_tail,
};
use perfaux_perfdata::uevent_sample::uevent_sample;
use perfaux_perfdata::writer::{
    FeatureBody, PerfDataWriter, PerfPipeWriter, WriterEvent, WriterOptions,
};

use crate::error::{RecordError, Result};
use crate::in_place::InPlace;
use crate::output::FileOutput;
use crate::ring::{AuxBytes, AuxFn, Ring, ThreadRing};
use crate::spec::{EventSpec, RecorderOptions, default_watermarks};
use crate::trace_gaps::{TraceGap, TraceGaps};
use crate::wakeups::Wakeups;

/// Where the perf.data goes.
pub enum Output {
    /// A file-mode perf.data at this path (temporary, then renamed).
    File(PathBuf),
    /// A pipe-mode perf.data to this stream (`perf ... -i -`).
    Pipe(Box<dyn Write + Send>),
}

/// What a recording did, for perf's closing lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordSummary {
    /// Drain passes that found data (perf's "Woken up N times").
    pub wakeups: u64,
    /// Records in the data section.
    pub records: u64,
    /// Trace bytes kept (full-trace data and snapshots).
    pub aux_bytes: u64,
    /// Lost records and samples (PERF_RECORD_LOST, LOST_SAMPLES) and AUX
    /// transactions cut short (PERF_AUX_FLAG_TRUNCATED).
    pub lost: u64,
    /// Of [`Self::lost`]: records the data area had no room for (PERF_RECORD_LOST).
    pub lost_records: u64,
    /// Of [`Self::lost`]: samples the perf core could not write (PERF_RECORD_LOST_SAMPLES).
    pub lost_samples: u64,
    /// Of [`Self::lost`]: AUX transactions cut short, the AUX area full
    /// (PERF_AUX_FLAG_TRUNCATED).
    pub aux_truncated: u64,
    /// Each ring's data area, in bytes (what a loss of records says).
    pub data_size: u64,
    /// The most trace bytes a sample carries (`aux_sample_size`), 0 without AUX sampling.
    pub aux_sample_size: u64,
    /// Snapshots that wrote trace bytes to the file: one per taking of all the
    /// areas (SIGUSR2, -Se), however many threads it held, and one per ended
    /// thread whose area its last drain took (-S with a program). The chunk
    /// that begins each carries [`SNAPSHOT_BEGIN`], which the views count.
    pub snapshots: u64,
    /// Snapshot bytes left out as older than the window ([`Recorder::set_window`]).
    pub outside_window_bytes: u64,
    /// Whole copies of the recording put at the output's path while it went on
    /// ([`Recorder::checkpoint`]).
    pub checkpoints: u64,
    /// Bytes of the file written.
    pub file_size: u64,
    /// Pauses and resumes the AUX events dropped because another was in
    /// progress (`aux_in_pause_resume`), as of the last drain.
    pub dropped_pause_resume: u64,
    /// The output's file system filled: the trace and the records from then on were not
    /// written (the file holds everything before, and ends as a whole recording).
    pub disk_full: bool,
    /// Bytes of trace not written because the disk was full (those of the chunk that did not
    /// fit, and every chunk after it).
    pub trace_lost_to_full_disk: u64,
    /// Records (the rings' and the caller's) not written because the disk was full.
    pub records_lost_to_full_disk: u64,
    /// Spans of a thread's time with no trace: its AUX area filled (a TRUNCATED record)
    /// until the trace resumed, in time order, at most
    /// [`MAX_LISTED_GAPS`](crate::trace_gaps::MAX_LISTED_GAPS).
    pub trace_gaps: Vec<TraceGap>,
    /// Gaps past [`MAX_LISTED_GAPS`](crate::trace_gaps::MAX_LISTED_GAPS), counted only.
    pub unlisted_trace_gaps: u64,
}

/// The feature sections known only at the end (or at a checkpoint): the tracepoints' formats,
/// and the trace section placed at `section` (its offset and length) in the final file.
fn late_features(
    tracing_data: Option<Vec<u8>>,
    section: Option<(u64, u64)>,
) -> Vec<(Feature, FeatureBody<'static>)> {
    let mut late = Vec::new();
    if let Some(t) = tracing_data {
        late.push((Feature::TRACING_DATA, FeatureBody::Bytes(t)));
    }
    if let Some((offset, len)) = section {
        late.push((
            Feature(PERFAUX_FEATURE_BIT),
            FeatureBody::Placed { offset, len },
        ));
    }
    late
}

/// Room kept on the output's file system for the recording's end (the records move after the
/// trace, the feature sections follow), in an unnamed file beside the output, held until the
/// recording's end, when it is given back: this much for the features and the file's head,
/// and more as the end's need grows ([`Sink::end_room`]: the records' writer's buffer and the
/// pieces they move in, the tracing data, the probe table). The need is small for a short
/// recording: a fixed 4 MiB, allocated and zeroed on tmpfs at every start and freed at every
/// end, was 3.6 ms of it (2026-11-29, AMD EPYC KVM guest).
pub const END_ROOM: u64 = 256 << 10;
/// The room kept for the probe table unless the caller says how large its table will be
/// ([`Recorder::set_probe_table_room`]): this process's probes, which the end lists.
pub const PROBE_TABLE_ROOM: u64 = 2 << 20;
/// The records' writer's buffer: at the end, what a full disk left in it is written after
/// the room is given back.
const RECORDS_BUFFER: u64 = 1 << 20;
/// The room's size grows in steps of this (a grown need costs one `fallocate` a step).
const ROOM_STEP: u64 = 64 << 10;

enum Writer {
    File(Box<PerfDataWriter<BufWriter<File>>>, FileOutput),
    Pipe(PerfPipeWriter<Box<dyn Write + Send>>),
}

/// Everything a drained record goes through: parsing with the open attrs,
/// conversion, the file.
struct Sink {
    writer: Writer,
    /// The trace section's chunks, into the output in place (file mode).
    chunks: ChunkStream<BufWriter<InPlace>>,
    open_info: Vec<RecordParseInfo>,
    file_info: Vec<RecordParseInfo>,
    spec_of: HashMap<u64, usize>,
    uevent_stream: Vec<bool>,
    /// Per spec: its AUX area holds uevents, not trace (no gaps are looked for there).
    uevent_log: Vec<bool>,
    gaps: TraceGaps,
    endian: Endianness,
    summary: RecordSummary,
    path: PathBuf,
    /// Where the chunks start in the output.
    chunks_start: u64,
    /// The chunk stream's (length, chunks, trace bytes) at the chunk boundaries not yet known
    /// to be in the file, the first one the newest that is: a full disk cuts it back there.
    boundaries: std::collections::VecDeque<(u64, u64, u64)>,
    /// The room held beside the output for the end ([`END_ROOM`]), and its bytes; `None` once
    /// the file system refused it its first bytes (or in pipe mode).
    reserve: Option<File>,
    reserved: u64,
    /// The file system refused the room more bytes: it stays as it is.
    room_refused: bool,
    /// What the end writes that the caller hands over: the probe table, the tracing data.
    probe_table_room: u64,
    tracing_data_room: u64,
    /// Inside [`Recorder::snapshot`]: whether the taking's first trace chunk was written.
    /// Outside it, a snapshot chunk (an ended thread's, from a drain) is a snapshot of its
    /// own.
    taking: Option<bool>,
    /// The uevent type that asks for a snapshot ([`Recorder::snapshot_on_uevent`]).
    snapshot_uevent: Option<u32>,
    /// A uevent of that type was drained since [`Recorder::take_uevent_snapshot_request`].
    snapshot_asked: bool,
}

/// Whether `e` says the file system is full (or the user's quota is).
fn is_full(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// [`is_full`] for the records' writer.
fn records_full(e: &perfaux_perfdata::Error) -> bool {
    matches!(e, perfaux_perfdata::Error::Io { source, .. } if is_full(source))
}

impl Sink {
    fn write_err(&self, what: &'static str) -> impl FnOnce(perfaux_perfdata::Error) -> RecordError {
        let path = self.path.clone();
        move |source| RecordError::PerfData { path, what, source }
    }

    fn push(&mut self, rec: &[u8]) -> Result<()> {
        // After the disk filled, what room there is stays for the recording's end.
        if self.summary.disk_full {
            self.summary.records_lost_to_full_disk += 1;
            return Ok(());
        }
        self.summary.records += 1;
        let r = match &mut self.writer {
            // A record is whole in the writer's buffer before it flushes, and a flush that
            // fails keeps what it did not write: after a full disk, the next flush goes on.
            Writer::File(w, _) => match w.write_record(rec) {
                Err(e) if records_full(&e) => return self.disk_filled(),
                r => r,
            },
            Writer::Pipe(w) => w.write_record(rec),
        };
        r.map_err(self.write_err("writing a record"))?;
        self.keep_room();
        Ok(())
    }

    /// What the recording's end writes, at most, when the disk is full, beyond what is in the
    /// file then: the features and the head ([`END_ROOM`]), the probe table and the tracing
    /// data, the records the writer's buffer holds (at most [`RECORDS_BUFFER`]) and the piece
    /// they move in (`move_range`), each no more than the records written so far.
    fn end_room(&self) -> u64 {
        let records = match &self.writer {
            Writer::File(w, _) => w.offset(),
            Writer::Pipe(_) => 0,
        };
        END_ROOM
            .saturating_add(self.probe_table_room)
            .saturating_add(self.tracing_data_room)
            .saturating_add(records.min(RECORDS_BUFFER))
            .saturating_add(records.min(crate::output::MOVE_PIECE))
    }

    /// Grows the room held for the end to what it needs now ([`Self::end_room`]), in steps of
    /// [`ROOM_STEP`]. A file system that refuses the first bytes leaves the recording none (as
    /// one that is full at the start); one that refuses more leaves the room as it is, and
    /// the disk that fills soon after finds it held. After a full disk, the room stays held
    /// for the end.
    fn keep_room(&mut self) {
        if self.room_refused || self.summary.disk_full {
            return;
        }
        let need = self.end_room();
        if need <= self.reserved {
            return;
        }
        let Some(f) = &self.reserve else {
            return;
        };
        let to = need.next_multiple_of(ROOM_STEP);
        match rustix::fs::fallocate(f, rustix::fs::FallocateFlags::empty(), 0, to) {
            Ok(()) => self.reserved = to,
            Err(_) => {
                self.room_refused = true;
                if self.reserved == 0 {
                    self.reserve = None;
                }
            }
        }
    }

    fn round(&mut self) -> Result<()> {
        let r = finished_round(self.endian);
        self.push(&r)
    }

    /// One record from a ring: a uevent becomes a BPF-output sample; loss
    /// is counted.
    fn take_record(&mut self, tid: i32, rec: &[u8]) -> Result<()> {
        let Some(h8) = rec.first_chunk::<8>() else {
            return Err(RecordError::Record {
                tid,
                what: format!("a record of {} bytes", rec.len()),
            });
        };
        let h = PerfEventHeader::parse(*h8, self.endian);
        let body = RawData::new(&rec[8..], &[]);
        // Which event: by the IDENTIFIER (all attrs carry the same sample_id layout).
        let spec = self.open_info[0]
            .record_id(h.type_, body, self.endian)
            .and_then(|id| self.spec_of.get(&id).copied());
        let parsed =
            spec.map(|s| Record::parse(h.type_, h.misc, body, &self.open_info[s], self.endian));
        match parsed {
            Some(Ok(Record::Uevent(u))) if h.type_ == PERF_RECORD_UEVENT => {
                let s = spec.unwrap_or(0);
                if !self.uevent_stream[s] {
                    return Err(RecordError::Record {
                        tid,
                        what: "a uevent of an event that does not carry the uevent stream".into(),
                    });
                }
                if self.snapshot_uevent == Some(u.type_) {
                    self.snapshot_asked = true;
                }
                let bytes =
                    uevent_sample(&u, &self.file_info[s], self.endian).map_err(|source| {
                        RecordError::Encode {
                            what: format!("thread {tid}: converting a uevent to a sample"),
                            source,
                        }
                    })?;
                self.push(&bytes)
            }
            Some(Ok(Record::Lost(l))) => {
                self.summary.lost += l.lost;
                self.summary.lost_records += l.lost;
                self.push(rec)
            }
            Some(Ok(Record::LostSamples(l))) => {
                self.summary.lost += l.lost;
                self.summary.lost_samples += l.lost;
                self.push(rec)
            }
            Some(Ok(Record::Aux(a))) => {
                if a.flags & PERF_AUX_FLAG_TRUNCATED != 0 {
                    self.summary.lost += 1;
                    self.summary.aux_truncated += 1;
                    let s = spec.unwrap_or(0);
                    if !self.uevent_log.get(s).copied().unwrap_or(true) {
                        let end = a.aux_offset.saturating_add(a.aux_size);
                        self.gaps.truncated(tid, a.sample_id.time.unwrap_or(0), end);
                    }
                }
                self.push(rec)
            }
            Some(Err(e)) => Err(RecordError::Record {
                tid,
                what: format!("a record of type {} from the ring: {e}", h.type_),
            }),
            // A uevent must belong to a known event; anything else is a
            // record perf 6.1 cannot read: refuse to write it.
            _ if h.type_ == PERF_RECORD_UEVENT => Err(RecordError::Record {
                tid,
                what: "a uevent record with an unknown event id".into(),
            }),
            _ => self.push(rec),
        }
    }

    fn take_aux(&mut self, tid: i32, a: AuxBytes<'_>) -> Result<()> {
        if a.kind == ChunkKind::Trace {
            self.gaps.trace_bytes(tid, a.offset, a.data);
        }
        if self.summary.disk_full {
            self.summary.trace_lost_to_full_disk += a.data.len() as u64;
            return Ok(());
        }
        self.summary.aux_bytes += a.data.len() as u64;
        let begins = a.kind == ChunkKind::Snapshot && self.taking != Some(true);
        let h = ChunkHeader {
            event_id: a.event_id,
            cpu: u32::MAX,
            tid: tid as u32,
            aux_offset: a.offset,
            kind: a.kind,
            flags: if begins {
                a.flags | SNAPSHOT_BEGIN
            } else {
                a.flags
            },
        };
        match self.chunks.push(&h, &[a.data]) {
            Ok(()) => {
                if begins {
                    self.summary.snapshots += 1;
                    if self.taking.is_some() {
                        self.taking = Some(true);
                    }
                }
                self.boundaries.push_back((
                    self.chunks.len(),
                    self.chunks.chunks(),
                    self.summary.aux_bytes,
                ));
                let durable = self.chunks.get_ref().get_ref().position() - self.chunks_start;
                while self.boundaries.get(1).is_some_and(|b| b.0 <= durable) {
                    self.boundaries.pop_front();
                }
                Ok(())
            }
            Err(e) if is_full(&e) => {
                self.summary.aux_bytes -= a.data.len() as u64;
                self.summary.trace_lost_to_full_disk += a.data.len() as u64;
                self.disk_filled()
            }
            Err(source) => Err(RecordError::Output {
                path: self.path.clone(),
                what: "writing trace bytes".into(),
                source,
            }),
        }
    }

    /// Flushes the trace's buffer into the file (at the end), a full disk cutting it back as
    /// a chunk that finds it full does.
    fn flush_trace(&mut self) -> Result<()> {
        match self.chunks.get_mut().flush() {
            Ok(()) => Ok(()),
            Err(e) if is_full(&e) => self.disk_filled(),
            Err(source) => Err(RecordError::Output {
                path: self.path.clone(),
                what: "writing trace bytes".into(),
                source,
            }),
        }
    }

    /// The disk is full: the chunk stream goes back to the last chunk that is whole in the
    /// file (what a buffer held past it is dropped, the file cut there), and from now on trace
    /// and records are counted, not written (a record whose flush met the full disk stays in
    /// the writer's buffer). Everything recorded before stays; the recording ends as a whole
    /// file if its end finds room (the reserve's, held until then, when the disk had it).
    fn disk_filled(&mut self) -> Result<()> {
        self.cut_back_trace().map_err(|source| RecordError::Output {
            path: self.path.clone(),
            what: "cutting the trace back after the disk filled".into(),
            source,
        })
    }

    /// [`Self::disk_filled`]'s work on the trace and the counts.
    fn cut_back_trace(&mut self) -> std::io::Result<()> {
        let durable = self.chunks.get_ref().get_ref().position() - self.chunks_start;
        let (len, chunks, kept) = self
            .boundaries
            .iter()
            .rev()
            .find(|b| b.0 <= durable)
            .copied()
            .unwrap_or((0, 0, 0));
        // Chunks pushed past the last whole one (into the buffer, or part-way into the file).
        self.summary.trace_lost_to_full_disk += self.summary.aux_bytes - kept;
        self.summary.aux_bytes = kept;
        let buffered = self.chunks.get_mut();
        buffered.get_mut().set_discard(true);
        let emptied = buffered.flush();
        buffered.get_mut().set_discard(false);
        emptied?;
        buffered.get_mut().rewind(self.chunks_start + len)?;
        self.chunks.rewind(chunks, len);
        self.boundaries.clear();
        self.boundaries.push_back((len, chunks, kept));
        // The reserve stays held until the end (the traced program, often what filled the
        // disk, would take its room at once).
        self.summary.disk_full = true;
        Ok(())
    }
}

/// A recording in progress: see the crate documentation.
pub struct Recorder {
    events: Vec<EventSpec>,
    opts: RecorderOptions,
    rings: Vec<Box<dyn Ring>>,
    sink: Sink,
    wakeups: Wakeups,
    enabled: bool,
    /// The probe table the caller gave ([`Self::set_probe_table`]), for
    /// probes that are not this process's (a traced program's).
    probe_table: Option<Vec<u8>>,
    /// HEADER_TRACING_DATA, if the recording has tracepoints ([`Self::set_tracing_data`]).
    tracing_data: Option<Vec<u8>>,
    /// A snapshot keeps this much of each thread's trace, at least ([`Self::set_window`]).
    window_ns: Option<u64>,
    /// One ring's snapshot while it is cut to the window (at most its AUX area).
    window_buf: Vec<u8>,
    /// When the last FINISHED_ROUND went out ([`ROUND_INTERVAL`]).
    last_round: Option<std::time::Instant>,
    /// The dropped pauses and resumes of the rings let go of ([`Ring::retired`]).
    retired_dropped_pause_resume: u64,
}

/// Least time between two FINISHED_ROUNDs the drain writes. perf sorts a round's records
/// and, at each FINISHED_ROUND, hands on those up to the newest time of the round before: a
/// record may come one whole round late. A user-space producer can be preempted between
/// taking a record's time and publishing it (under load, for a timeslice or more: 12 ms
/// measured under 4 busy loops, where a round per drain pass of a few ms made perf warn "1 out
/// of order events"); rounds this long leave that much room. perf reads them whole, so its
/// memory grows with the records of 100 ms, as with `perf record`'s own rounds on a busy
/// machine.
pub const ROUND_INTERVAL: Duration = Duration::from_millis(100);

/// The AUX bytes `produce` gives for thread `tid` into `sink`; with a window (`cutoff`, the
/// oldest time a snapshot must keep), a snapshot's pieces are gathered whole in `buf` (at most
/// an AUX area) and given from its first packet at or past the cutoff, after a SYNC made for
/// the cut ([`crate::snapshot_window`]); the bytes left out are counted. Whether any bytes came.
fn take_windowed(
    sink: &mut Sink,
    buf: &mut Vec<u8>,
    cutoff: Option<u64>,
    tid: i32,
    produce: &mut dyn FnMut(&mut AuxFn<'_>) -> Result<()>,
) -> Result<bool> {
    let mut any = false;
    buf.clear();
    let mut head: Option<(u64, u64, ChunkKind, u32)> = None;
    produce(&mut |a| {
        any = true;
        match cutoff {
            Some(_) if a.kind == ChunkKind::Snapshot => {
                head.get_or_insert((a.event_id, a.offset, a.kind, a.flags));
                buf.extend_from_slice(a.data);
                Ok(())
            }
            _ => sink.take_aux(tid, a),
        }
    })?;
    if let (Some((event_id, offset, kind, flags)), Some(cutoff)) = (head, cutoff) {
        let start = crate::snapshot_window::window_cut(buf, cutoff);
        sink.summary.outside_window_bytes += start as u64;
        sink.take_aux(
            tid,
            AuxBytes {
                event_id,
                offset: offset + start as u64,
                data: &buf[start..],
                kind,
                flags,
            },
        )?;
    }
    Ok(any)
}

impl Recorder {
    /// Opens the events on each of `tids`, maps their rings and begins the
    /// file at `output`; the events stay disabled until [`Self::enable`].
    pub fn new(
        mut events: Vec<EventSpec>,
        opts: RecorderOptions,
        tids: &[i32],
        output: Output,
    ) -> Result<Self> {
        crate::pmus::register();
        let page = perfaux_core::page_size() as u64;
        for (what, size) in [("data", opts.data_size), ("AUX", opts.aux_size)] {
            if size < page || !(size / page).is_power_of_two() {
                return Err(RecordError::Config(format!(
                    "the {what} area must be a power of two pages ({size} bytes given)"
                )));
            }
        }
        if events.is_empty() {
            return Err(RecordError::Config("no events to record".into()));
        }
        for ev in &mut events {
            default_watermarks(ev, &opts);
        }
        let mut rings: Vec<Box<dyn Ring>> = Vec::with_capacity(tids.len());
        let mut ids: Vec<Vec<u64>> = vec![Vec::new(); events.len()];
        let mut spec_of = HashMap::new();
        for &tid in tids {
            let r = ThreadRing::open(tid, &events, &opts)?;
            for (i, id) in r.ids().into_iter().enumerate() {
                ids[i].push(id);
                spec_of.insert(id, i);
            }
            rings.push(Box::new(r));
        }
        let files: Vec<PerfEventAttr> = events
            .iter()
            .map(|e| file_attr(&e.open, e.uevent_stream))
            .collect();
        let wevents: Vec<WriterEvent> = events
            .iter()
            .zip(&files)
            .zip(ids)
            .map(|((e, f), ids)| WriterEvent {
                attr: *f,
                ids,
                name: e.name.clone(),
            })
            .collect();
        let endian = Endianness::NATIVE;
        let wopts = WriterOptions {
            endian,
            ..WriterOptions::default()
        };
        let (writer, path, trace, reserve) = match output {
            Output::File(path) => {
                let (out, file) = FileOutput::create(&path)?;
                let records = out.scratch()?;
                let w = PerfDataWriter::new(
                    BufWriter::with_capacity(RECORDS_BUFFER as usize, records),
                    wevents,
                    wopts,
                )
                .map_err(|source| RecordError::PerfData {
                    path: path.clone(),
                    what: "beginning the file",
                    source,
                })?;
                // The trace section starts where the data would (the records move after it
                // at the end), its chunks after the head that is filled in then.
                let trace = InPlace::new(file, w.data_offset() + CHUNKS_FIRST_HEAD);
                // Room for the end if the disk fills: its bytes are taken below, and as the
                // end's need grows.
                let reserve = out.scratch().ok();
                (Writer::File(Box::new(w), out), path, trace, reserve)
            }
            Output::Pipe(w) => {
                let path = PathBuf::from("-");
                if let Some(e) = events.iter().find(|e| e.has_aux) {
                    return Err(RecordError::Config(format!(
                        "-: event '{}' has an AUX area, and a pipe-mode perf.data cannot \
                         carry its trace: perfaux keeps the trace in feature section 250, \
                         whose pipe form (HEADER_FEATURE records) stops `perf report` \
                         (\"wrong feature ID: 250\"); record to a file with -o FILE, or \
                         pipe only events without an AUX area (e.g. -e uevent)",
                        e.name
                    )));
                }
                // No AUX area, so no chunk comes: an unnamed file only for the type's sake.
                let scratch = tempfile::tempfile().map_err(|source| RecordError::Output {
                    path: path.clone(),
                    what: "cannot create scratch space".into(),
                    source,
                })?;
                let w = PerfPipeWriter::new(w, wevents, wopts).map_err(|source| {
                    RecordError::PerfData {
                        path: path.clone(),
                        what: "beginning the stream",
                        source,
                    }
                })?;
                (Writer::Pipe(w), path, InPlace::new(scratch, 0), None)
            }
        };
        let mut wakeups = Wakeups::default();
        for r in &rings {
            if let Some(w) = r.wakeup() {
                wakeups.watch(w);
            }
        }
        let chunks_start = trace.position();
        let sink = Sink {
            writer,
            chunks: ChunkStream::new(BufWriter::with_capacity(1 << 20, trace)),
            chunks_start,
            boundaries: std::collections::VecDeque::from([(0, 0, 0)]),
            reserve,
            reserved: 0,
            room_refused: false,
            probe_table_room: PROBE_TABLE_ROOM,
            tracing_data_room: 0,
            open_info: events
                .iter()
                .map(|e| RecordParseInfo::new(&e.open))
                .collect(),
            file_info: files.iter().map(RecordParseInfo::new).collect(),
            spec_of,
            uevent_stream: events.iter().map(|e| e.uevent_stream).collect(),
            uevent_log: events.iter().map(|e| e.uevent_log).collect(),
            gaps: TraceGaps::default(),
            endian,
            summary: RecordSummary {
                data_size: opts.data_size,
                aux_sample_size: events
                    .iter()
                    .map(|e| u64::from(e.open.aux_sample_size))
                    .max()
                    .unwrap_or(0),
                ..RecordSummary::default()
            },
            path,
            taking: None,
            snapshot_uevent: None,
            snapshot_asked: false,
        };
        // The room's bytes are taken at the first record (the caller may first say how large
        // its probe table is: Self::set_probe_table_room).
        Ok(Recorder {
            events,
            opts,
            rings,
            sink,
            wakeups,
            enabled: false,
            probe_table: None,
            tracing_data: None,
            window_ns: None,
            window_buf: Vec::new(),
            last_round: None,
            retired_dropped_pause_resume: 0,
        })
    }

    /// The events as the recorder opens them (watermarks filled in).
    pub fn events(&self) -> &[EventSpec] {
        &self.events
    }

    /// The options the recorder was made with.
    pub fn options(&self) -> &RecorderOptions {
        &self.opts
    }

    /// The parse layout of records written with [`Self::write_record`]
    /// (the first event's file attr; synthesized records carry its
    /// sample_id layout).
    pub fn file_info(&self) -> &RecordParseInfo {
        &self.sink.file_info[0]
    }

    /// Writes a record the caller made (synthesized COMM, MMAP2, ...).
    pub fn write_record(&mut self, rec: &[u8]) -> Result<()> {
        self.sink.push(rec)
    }

    /// Names the trace's probes with `table` (a `ProbeTable`'s bytes)
    /// instead of this process's probe registry: the probes of a traced
    /// program live in that program.
    pub fn set_probe_table(&mut self, table: Vec<u8>) {
        self.probe_table = Some(table);
    }

    /// Says how large the probe table that [`Self::set_probe_table`] will hand over is, about,
    /// so far (a traced program's, which grows with the functions its threads call): the room
    /// held for the recording's end follows it instead of [`PROBE_TABLE_ROOM`].
    pub fn set_probe_table_room(&mut self, bytes: u64) {
        self.sink.probe_table_room = bytes;
        self.sink.keep_room();
    }

    /// Bounds each snapshot by time as well as by size: it keeps the last `window` of each
    /// thread's trace, from its first packet in it, the state there said by a SYNC made for the
    /// cut ([`crate::snapshot_window`]); the AUX area's size stays the cap. `None`: all the area
    /// holds.
    pub fn set_window(&mut self, window: Option<Duration>) {
        self.window_ns = window.map(|w| w.as_nanos().min(u128::from(u64::MAX)) as u64);
    }

    /// The oldest time a snapshot taken now must keep, with a window.
    fn window_cutoff(&self) -> Option<u64> {
        self.window_ns
            .map(|w| perfaux_swtrace::clock::monotonic_ns().saturating_sub(w))
    }

    /// The HEADER_TRACING_DATA feature the file gets (the formats of the tracepoints it
    /// records, [`crate::tracefs::tracing_data`]): perf prints their fields from it.
    pub fn set_tracing_data(&mut self, data: Vec<u8>) {
        self.sink.tracing_data_room = data.len() as u64;
        self.tracing_data = Some(data);
        self.sink.keep_room();
    }

    /// Writes a FINISHED_ROUND: records before it are sorted by time.
    pub fn finish_round(&mut self) -> Result<()> {
        self.sink.round()
    }

    /// Opens the events on a thread that appeared while recording.
    pub fn add_thread(&mut self, tid: i32) -> Result<()> {
        let r = ThreadRing::open(tid, &self.events, &self.opts)?;
        let ids = r.ids();
        self.add_ring(Box::new(r), &ids)
    }

    /// Adds a ring the recorder did not open (see [`crate::ring`]): `ids`
    /// are the sample ids of its events, one per event in event order.
    /// It is enabled if the recording is.
    pub fn add_ring(&mut self, ring: Box<dyn Ring>, ids: &[u64]) -> Result<()> {
        if ids.len() != self.events.len() {
            return Err(RecordError::Config(format!(
                "a ring with {} event ids for {} events",
                ids.len(),
                self.events.len()
            )));
        }
        let ids: Vec<(usize, u64)> = ids.iter().copied().enumerate().collect();
        self.add_ring_of(ring, &ids)
    }

    /// Adds a ring that carries some of the events only (the kernel's context switches of a
    /// traced program, one ring per CPU): `ids` are (event index, sample id) pairs.
    pub fn add_ring_of(&mut self, ring: Box<dyn Ring>, ids: &[(usize, u64)]) -> Result<()> {
        if let Some(&(i, _)) = ids.iter().find(|&&(i, _)| i >= self.events.len()) {
            return Err(RecordError::Config(format!(
                "a ring's event {i} of {} events",
                self.events.len()
            )));
        }
        if let Writer::File(w, _) = &mut self.sink.writer {
            for &(i, id) in ids {
                w.add_ids(i, &[id])
                    .map_err(|source| RecordError::PerfData {
                        path: self.sink.path.clone(),
                        what: "adding event ids",
                        source,
                    })?;
            }
        } else {
            return Err(RecordError::Config(
                "a pipe-mode output cannot take rings after it began".into(),
            ));
        }
        for &(i, id) in ids {
            self.sink.spec_of.insert(id, i);
        }
        if self.enabled {
            ring.set_enabled(true)?;
        }
        if let Some(w) = ring.wakeup() {
            self.wakeups.watch(w);
        }
        self.rings.push(ring);
        Ok(())
    }

    /// Starts every event.
    pub fn enable(&mut self) -> Result<()> {
        for r in &self.rings {
            r.set_enabled(true)?;
        }
        self.enabled = true;
        Ok(())
    }

    /// Stops every event (the last drain comes after).
    pub fn disable(&mut self) -> Result<()> {
        for r in &self.rings {
            r.set_enabled(false)?;
        }
        self.enabled = false;
        Ok(())
    }

    /// Waits until a ring's producer passed a watermark, or `timeout`.
    pub fn wait(&self, timeout: Duration) {
        self.wakeups.wait(timeout);
    }

    /// A handle that waits as [`Self::wait`] does without borrowing the recorder, for a
    /// drain loop on its own thread while other threads add theirs.
    pub fn waiter(&self) -> crate::Waiter {
        self.wakeups.waiter()
    }

    /// Drains every ring (records and, in full-trace mode, AUX bytes),
    /// then writes a FINISHED_ROUND if anything came and the last is
    /// [`ROUND_INTERVAL`] old; returns the number of records drained.
    pub fn drain(&mut self) -> Result<u64> {
        let before = self.sink.summary.records;
        let mut aux = false;
        // An ended thread's last snapshot comes through its drain: cut to the window too.
        let cutoff = self.window_cutoff();
        for r in &mut self.rings {
            let tid = r.tid();
            let sink = &mut self.sink;
            r.read_records(&mut |rec| sink.take_record(tid, rec))?;
            aux |= take_windowed(sink, &mut self.window_buf, cutoff, tid, &mut |f| {
                r.read_aux(f)
            })?;
        }
        // The events' own counts: this recording's, whatever else the
        // process records.
        // A program that makes threads all its life leaves no ring behind per thread.
        for r in self.rings.iter().filter(|r| r.retired()) {
            self.retired_dropped_pause_resume += r.dropped_pause_resume();
        }
        self.rings.retain(|r| !r.retired());
        self.sink.summary.dropped_pause_resume = self.retired_dropped_pause_resume
            + self
                .rings
                .iter()
                .map(|r| r.dropped_pause_resume())
                .sum::<u64>();
        let n = self.sink.summary.records - before;
        if n > 0 || aux {
            self.sink.summary.wakeups += 1;
            if self
                .last_round
                .is_none_or(|t| t.elapsed() >= ROUND_INTERVAL)
            {
                self.sink.round()?;
                self.last_round = Some(std::time::Instant::now());
            }
        }
        Ok(n)
    }

    /// Takes a snapshot of every overwrite AUX area (each keeps whether it
    /// wrapped); returns whether any held bytes. The bytes go to the file's
    /// scratch space at once, so memory stays bounded by the rings.
    pub fn snapshot(&mut self) -> Result<bool> {
        let mut took = false;
        self.sink.taking = Some(false);
        let cutoff = self.window_cutoff();
        let window_buf = &mut self.window_buf;
        let mut each = || -> Result<()> {
            for r in &mut self.rings {
                let tid = r.tid();
                let sink = &mut self.sink;
                took |= take_windowed(sink, window_buf, cutoff, tid, &mut |f| r.snapshot(f))?;
            }
            Ok(())
        };
        let done = each();
        self.sink.taking = None;
        done?;
        // A snapshot after the disk filled is not in the file.
        Ok(took && !self.sink.summary.disk_full)
    }

    /// Asks for a snapshot whenever a uevent of type `ty` is drained: a traced program's own
    /// trigger (perfaux-tracing's `tracing_snapshot`, sent on an error, a slow span, a
    /// panic), as SIGUSR2 is the user's. The drain loop takes the request with
    /// [`Self::take_uevent_snapshot_request`] and snapshots.
    pub fn snapshot_on_uevent(&mut self, ty: Option<u32>) {
        self.sink.snapshot_uevent = ty;
    }

    /// Whether a uevent of the type [`Self::snapshot_on_uevent`] names was drained since the
    /// last call.
    pub fn take_uevent_snapshot_request(&mut self) -> bool {
        std::mem::take(&mut self.sink.snapshot_asked)
    }

    /// The rings the recorder holds now: threads recorded and not ended, or ended and not yet
    /// drained (an ended thread's ring is let go of at the drain that takes its last bytes;
    /// in overwrite mode it stays for the snapshots).
    pub fn live_rings(&self) -> usize {
        self.rings.len()
    }

    /// What the recording did so far.
    pub fn summary(&self) -> &RecordSummary {
        &self.sink.summary
    }

    /// Puts a whole perf.data of what is recorded so far at the output's path, while the
    /// recording goes on: an in-process flight recorder calls it after each snapshot, so
    /// that the snapshots outlive a crash or a SIGKILL of the process that records itself
    /// (the recording's own file is unnamed until [`Self::finish`]). The copy is made in
    /// the kernel (`copy_file_range`) from the records and the trace written so far, the
    /// feature sections and header after them as the finish would write them now; it takes
    /// the output's name in one rename, the first one moving a previous file to `.old` as
    /// the finish does, and the finish replaces it. It is not synced: it outlives the
    /// process, not the machine. Returns false when there is nothing to do (a pipe output,
    /// or a disk found full, whose room stays for the end).
    pub fn checkpoint(&mut self) -> Result<bool> {
        if matches!(self.sink.writer, Writer::Pipe(_)) || self.sink.summary.disk_full {
            return Ok(false);
        }
        self.sink.flush_trace()?;
        if self.sink.summary.disk_full {
            return Ok(false);
        }
        let probe_table = self
            .probe_table
            .clone()
            .unwrap_or_else(crate::pmus::probe_table);
        let tracing_data = self.tracing_data.clone();
        let sink = &mut self.sink;
        let out_err = |what: &str| {
            let path = sink.path.clone();
            let what = format!("checkpoint: {what}");
            move |source| RecordError::Output { path, what, source }
        };
        let chunks_len = sink.chunks.len();
        let has_section = chunks_len > 0 || !probe_table.is_empty();
        let head = sink.chunks.chunks_first_head(probe_table.len() as u64);
        let trace_file = sink.chunks.get_ref().get_ref().file();
        let Writer::File(w, out) = &mut sink.writer else {
            return Ok(false);
        };
        w.flush().map_err(|source| RecordError::PerfData {
            path: sink.path.clone(),
            what: "checkpoint: flushing the records",
            source,
        })?;
        let at = w.data_offset();
        let tail = probe_table_tail(&probe_table);
        let room = if has_section {
            CHUNKS_FIRST_HEAD + chunks_len + tail.len() as u64
        } else {
            0
        };
        let late = late_features(tracing_data, has_section.then_some((at, room)));
        let end = w
            .checkpoint(late, room)
            .map_err(|source| RecordError::PerfData {
                path: sink.path.clone(),
                what: "checkpoint: ending the copy",
                source,
            })?;
        let records = w.get_ref().get_ref();
        let (copy, named) = out.checkpoint_file()?;
        let written = (|| -> Result<()> {
            use crate::output::copy_range;
            use std::os::unix::fs::FileExt;
            let data_len = end.data_end - at;
            copy_range(records, 0, &copy, 0, at).map_err(out_err("copying the attrs"))?;
            if has_section {
                copy.write_all_at(&head, at)
                    .map_err(out_err("writing the trace section's head"))?;
                let chunks_at = at + CHUNKS_FIRST_HEAD;
                copy_range(trace_file, chunks_at, &copy, chunks_at, chunks_len)
                    .map_err(out_err("copying the trace"))?;
                copy.write_all_at(&tail, chunks_at + chunks_len)
                    .map_err(out_err("writing the probe table"))?;
            }
            copy_range(records, at, &copy, at + room, data_len)
                .map_err(out_err("copying the records"))?;
            copy.write_all_at(&end.tail, at + room + data_len)
                .map_err(out_err("writing the feature sections"))?;
            if let Some((attrs_at, attrs)) = &end.attrs {
                copy.write_all_at(attrs, *attrs_at)
                    .map_err(out_err("writing the attrs"))?;
            }
            copy.write_all_at(&end.header, 0)
                .map_err(out_err("writing the header"))?;
            Ok(())
        })();
        if let Err(e) = written {
            out.drop_checkpoint(named);
            return Err(e);
        }
        out.put_checkpoint(copy, named)?;
        self.sink.summary.checkpoints += 1;
        Ok(true)
    }

    /// Stops the events, drains them a last time, writes the trace section
    /// and the header, and puts the file in place.
    pub fn finish(mut self) -> Result<RecordSummary> {
        if self.enabled {
            self.disable()?;
        }
        self.drain()?;
        self.wakeups.stop();
        // Unmapping the rings frees what the traced threads wrote (megabytes of pages): on
        // another thread, beside the file's writing and syncing, which wait for the disk.
        let rings = std::mem::take(&mut self.rings);
        let unmapped = std::thread::Builder::new()
            .name("perfaux-unmap".into())
            .spawn(move || drop(rings))
            .ok();
        let Recorder { mut sink, .. } = self;
        sink.flush_trace()?;
        let (gaps, unlisted) = std::mem::take(&mut sink.gaps).finish();
        sink.summary.trace_gaps = gaps;
        sink.summary.unlisted_trace_gaps = unlisted;
        // The end's room: the records move after the trace, the features follow.
        sink.reserve = None;
        let Sink {
            writer,
            chunks,
            mut summary,
            path,
            ..
        } = sink;
        let out_err = |what: &str| {
            let path = path.clone();
            let what = what.to_string();
            move |source| RecordError::Output { path, what, source }
        };
        // The table is read at the end: probes register on their first call.
        let probe_table = self
            .probe_table
            .take()
            .unwrap_or_else(crate::pmus::probe_table);
        let tracing_data = self.tracing_data.take();
        let has_section = !chunks.is_empty() || !probe_table.is_empty();
        let head = chunks.chunks_first_head(probe_table.len() as u64);
        let chunks_len = chunks.len();
        let mut trace = chunks
            .into_inner()
            .map_err(out_err("writing trace bytes"))?
            .into_inner()
            .map_err(|e| out_err("writing trace bytes")(e.into_error()))?;
        match writer {
            Writer::File(w, out) => {
                let at = w.data_offset();
                let mut room = 0;
                if has_section {
                    trace
                        .write_all(&probe_table_tail(&probe_table))
                        .map_err(out_err("writing the probe table"))?;
                    room = trace.position() - at;
                    debug_assert_eq!(
                        room,
                        CHUNKS_FIRST_HEAD + chunks_len + {
                            probe_table.len().next_multiple_of(8) as u64
                        }
                    );
                }
                let late = late_features(tracing_data, has_section.then_some((at, room)));
                let file = trace.into_file();
                if has_section {
                    use std::os::unix::fs::FileExt;
                    file.write_all_at(&head, at)
                        .map_err(out_err("writing the trace section's head"))?;
                }
                let records = w
                    .finish_around(late, room)
                    .map_err(|source| RecordError::PerfData {
                        path: path.clone(),
                        what: "finishing the file",
                        source,
                    })?
                    .into_inner()
                    .map_err(|e| out_err("writing the output")(e.into_error()))?;
                // The final file: the records file's head (header, ids, attrs), the trace
                // section in place, then the rest of the records file (data, features).
                let len = records
                    .metadata()
                    .map_err(out_err("reading the records kept beside the output"))?
                    .len();
                // Moved: each piece's room given back as it is copied (a disk that filled has
                // no room for two copies of the records).
                let moved = crate::output::move_range(&records, 0, &file, 0, at).and_then(|()| {
                    crate::output::move_range(&records, at, &file, at + room, len - at)
                });
                moved.map_err(out_err("moving the records into the output"))?;
                summary.file_size = len + room;
                file.set_len(summary.file_size)
                    .map_err(out_err("writing the output"))?;
                out.commit(file)?;
            }
            Writer::Pipe(w) => {
                let pos = w.offset();
                w.finish().map_err(|source| RecordError::PerfData {
                    path: path.clone(),
                    what: "finishing the stream",
                    source,
                })?;
                summary.file_size = pos;
            }
        }
        if let Some(h) = unmapped {
            let _ = h.join();
        }
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfaux_perfdata::record_attrs::base_attr;
    use std::os::unix::fs::MetadataExt;

    /// The bytes the room beside the output holds on its file system.
    fn held(rec: &Recorder) -> u64 {
        let f = rec.sink.reserve.as_ref().expect("a room");
        f.metadata().unwrap().blocks() * 512
    }

    /// A short recording holds little room for its end, not a fixed 4 MiB; the room grows as
    /// the records and the caller's probe table do, always at least what the end needs, and
    /// the recording ends as before.
    #[test]
    fn the_room_for_the_end_follows_what_the_end_needs() {
        let d = tempfile::tempdir().unwrap();
        let trace = EventSpec::new("swtrace//", base_attr(crate::pmus::SWTRACE_TYPE, 0), 0);
        let opts = RecorderOptions {
            data_size: 64 << 10,
            aux_size: 64 << 10,
            overwrite: false,
        };
        let out = d.path().join("room.data");
        let mut rec = Recorder::new(vec![trace], opts, &[], Output::File(out.clone())).unwrap();
        rec.set_probe_table_room(0);
        let first = rec.sink.reserved;
        assert!(first >= rec.sink.end_room(), "{first}");
        assert!(first < END_ROOM + 2 * ROOM_STEP, "{first}");
        assert!(held(&rec) >= first, "{} held of {first}", held(&rec));
        // 160 KB of records: the end may have them in the writer's buffer, and moves them.
        for _ in 0..20_000 {
            rec.finish_round().unwrap();
        }
        assert!(
            rec.sink.reserved >= END_ROOM + 2 * 160_000,
            "{}",
            rec.sink.reserved
        );
        assert!(rec.sink.reserved >= rec.sink.end_room());
        rec.set_probe_table_room(3 << 20);
        assert!(rec.sink.reserved >= END_ROOM + (3 << 20) + 2 * 160_000);
        assert!(held(&rec) >= rec.sink.reserved);
        let summary = rec.finish().unwrap();
        assert_eq!(summary.records, 20_000);
        assert!(std::fs::metadata(&out).unwrap().len() > 160_000);
    }
}
