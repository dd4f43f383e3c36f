//! The one streaming pass: a recording to [`ViewEvent`]s.
//!
//! First the record stream, record by record in time order as perf's
//! ordered events give it ([`crate::record_order`]: COMM, FORK, MMAP/MMAP2
//! for the symbolizer, samples, uevents, switches, AUX/LOST markers), then
//! the software trace,
//! window by window: chunks of one event that continue each other decode as
//! one stream (as `perfaux script --call-trace` decodes them), so calls that
//! span a chunk boundary keep their depth. Per window the pass keeps the
//! open calls (bounded by the deepest stack); the only other state is the
//! thread names, the maps, the interned names and the records queued for their
//! time (two rounds, at most `record_order::QUEUE_BUDGET` bytes). The trace bytes are
//! read from the section as the decoder asks for them, [`WINDOW_PIECE`]
//! bytes at a time, whatever the window's size.

use std::collections::HashMap;
use std::io::BufRead;

use perfaux_abi::attr::AuxAction;
use perfaux_abi::consts::*;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::{Record, TaskKind};
use perfaux_abi::sample::SampleRecord;
use perfaux_abi::sample_fields::SampleFields;
use perfaux_perfdata::trace_reader::{SectionSource, TraceSection};
use perfaux_perfdata::trace_section::{ChunkKind, SNAPSHOT_BEGIN};
use perfaux_perfdata::{PerfDataReader, RawRecord, UserRecord};
use perfaux_swtrace::ProbeTable;
use perfaux_swtrace::decode::{Decoder, Event as TraceEvent};
use perfaux_swtrace::format::LostKind as TraceLost;
use perfaux_swtrace::window::SnapshotEnds;

use crate::ViewError;
use crate::event::{Call, FuncId, LostKind, Names, Sink, ViewEvent};
use crate::intel_pt::{PtContext, PtTrace};
use crate::record_order::{RecordQueue, TakeRecord, record_time};
use crate::symbols::{Symbolizer, map_name};
use crate::unwind::StackUnwinder;

/// Decodes a uevent sample's RAW data to (type, payload), the payload in
/// place (the pass copies it only when the ring split it).
pub type UeventDecode = for<'a> fn(&RawData<'a>) -> Option<(u32, RawData<'a>)>;

/// How the recording's program carries uevents (perfaux: BPF-output samples
/// of a named event whose RAW data is the uevent body).
#[derive(Clone, Copy)]
pub struct UeventFormat<'a> {
    /// The event name the samples carry.
    pub event_name: &'a str,
    /// RAW data to (type, payload).
    pub decode: UeventDecode,
    /// Names of the known types.
    pub type_names: &'a [(&'a str, u32)],
}

/// Which threads to look at (`--tid`, `--comm`); empty lists take all.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Thread ids.
    pub tids: Vec<u32>,
    /// Thread names.
    pub comms: Vec<String>,
}

/// A recording ready for the pass.
pub struct Recording<'a, R> {
    /// The perf.data reader, positioned at the first record.
    pub reader: PerfDataReader<R>,
    /// Names of the trace's probe ids.
    pub probes: &'a ProbeTable,
    /// perfaux's trace section, read in place window by window.
    pub trace: Option<&'a TraceSection<SectionSource>>,
    /// How uevents travel.
    pub uevents: UeventFormat<'a>,
    /// Threads to keep.
    pub filter: Filter,
    /// Where the recording's files are (perf's `--symfs`): `None`, at their paths.
    pub symfs: Option<std::path::PathBuf>,
}

/// What the pass saw, for titles and headers.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Earliest time of any event.
    pub first_time: Option<u64>,
    /// Latest time of any event.
    pub last_time: u64,
    /// The recording's command line (perf's CMDLINE feature).
    pub cmdline: Option<String>,
    /// Names of the sampling events, in attr order.
    pub events: Vec<String>,
    /// What the pass could not use, for the user (files whose build id is not the
    /// recording's, ...).
    pub notes: Vec<String>,
    /// The recording holds Intel PT trace (an intel_pt AUXTRACE_INFO), whose calls the
    /// pass decoded.
    pub intel_pt: bool,
}

impl Summary {
    fn saw(&mut self, t: u64) {
        if t != 0 {
            self.first_time = Some(self.first_time.map_or(t, |f| f.min(t)));
            self.last_time = self.last_time.max(t);
        }
    }
}

impl Filter {
    /// True when every thread is kept.
    pub fn is_empty(&self) -> bool {
        self.tids.is_empty() && self.comms.is_empty()
    }

    /// The filter as the command line gives it (`--tid 1,2 --comm x`).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.tids.is_empty() {
            let t: Vec<String> = self.tids.iter().map(u32::to_string).collect();
            parts.push(format!("--tid {}", t.join(",")));
        }
        if !self.comms.is_empty() {
            parts.push(format!("--comm {}", self.comms.join(",")));
        }
        parts.join(" ")
    }
}

struct Threads {
    /// tid -> (pid, comm).
    info: HashMap<u32, (u32, String)>,
    filter: Filter,
    /// Every thread the recording shows (records, samples, trace windows),
    /// for the error of a filter that keeps none: grows with threads only.
    seen: std::collections::BTreeSet<u32>,
    /// The filter kept some thread.
    matched: bool,
}

/// Threads a filter's error lists before it says how many more there are.
const LISTED_THREADS: usize = 32;

impl Threads {
    fn pid(&self, tid: u32) -> u32 {
        self.info.get(&tid).map_or(tid, |i| i.0)
    }

    fn keep(&mut self, tid: u32) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        if tid != 0 {
            self.seen.insert(tid);
        }
        let keep = (self.filter.tids.is_empty() || self.filter.tids.contains(&tid))
            && (self.filter.comms.is_empty()
                || self
                    .info
                    .get(&tid)
                    .is_some_and(|i| self.filter.comms.contains(&i.1)));
        self.matched |= keep;
        keep
    }

    /// The error of a filter that kept no thread: what it was and which
    /// threads there are.
    fn nothing_matched(&self) -> ViewError {
        let listed: Vec<String> = self
            .seen
            .iter()
            .take(LISTED_THREADS)
            .map(|tid| match self.info.get(tid) {
                Some((_, comm)) => format!("{tid} ({comm})"),
                None => tid.to_string(),
            })
            .collect();
        let more = self.seen.len().saturating_sub(LISTED_THREADS);
        let threads = if listed.is_empty() {
            String::from("it has none")
        } else if more > 0 {
            format!("its threads: {}, and {more} more", listed.join(", "))
        } else {
            format!("its threads: {}", listed.join(", "))
        };
        ViewError(format!(
            "{} matches no thread of the recording; {threads}",
            self.filter.describe()
        ))
    }
}

fn io(e: std::io::Error) -> ViewError {
    ViewError(format!("output: {e}"))
}

/// Runs the pass over `rec`, handing every event to `sink`.
pub fn walk<R: BufRead + std::io::Seek>(
    mut rec: Recording<'_, R>,
    sink: &mut impl Sink,
) -> Result<(Summary, Names), ViewError> {
    let meta = rec.reader.metadata();
    let sum = Summary {
        cmdline: meta
            .features
            .cmdline()
            .and_then(Result::ok)
            .map(|v| v.join(" ")),
        ..Summary::default()
    };
    let ev_names: Vec<String> = meta
        .attrs
        .iter()
        .enumerate()
        .map(|(i, a)| a.name.clone().unwrap_or_else(|| format!("event{i}")))
        .collect();
    let regs_masks: Vec<u64> = meta.attrs.iter().map(|a| a.attr.sample_regs_user).collect();
    let aux_actions: Vec<AuxAction> = meta.attrs.iter().map(|a| a.attr.aux_action).collect();
    // An AUX event that starts paused (aux-action=start-paused): every thread's trace is off
    // until a resume.
    let starts_paused = aux_actions
        .iter()
        .any(|a| a.contains(AuxAction::START_PAUSED));
    let names = Names::default();
    let threads = Threads {
        info: HashMap::new(),
        filter: rec.filter.clone(),
        seen: Default::default(),
        matched: false,
    };
    let mut sym = Symbolizer::new(rec.probes);
    sym.files().set_symfs(rec.symfs.clone());
    if let Some(Ok(ids)) = meta.features.build_ids() {
        sym.files()
            .set_build_ids(ids.into_iter().map(|e| (e.filename, e.build_id)));
    }
    let stack: Vec<FuncId> = Vec::new();
    // AUX event id -> tid, from ITRACE_START (the chunk's tid otherwise).
    let aux_owner: HashMap<u64, u32> = HashMap::new();
    let mut pass = RecordPass {
        sum,
        ev_names,
        names,
        threads,
        sym,
        stack,
        aux_owner,
        uevents: rec.uevents,
        regs_masks,
        aux_actions,
        starts_paused,
        pt_paused: HashMap::new(),
        unwinder: StackUnwinder::default(),
        frames: Vec::new(),
        regs_buf: Vec::new(),
        stack_buf: Vec::new(),
        pt: PtTrace::default(),
    };
    // Records are handled in time order as perf's ordered-events queue hands them over
    // (tools/perf/util/ordered-events.c): a thread's COMM, FORK and MMAPs can be in the file
    // after its samples (another CPU's buffer written later), and name and place them only
    // if they come first in time.
    let mut queue = RecordQueue::default();
    let mut to = Taker {
        pass: &mut pass,
        sink,
    };
    loop {
        let r = match rec.reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => return Err(ViewError(format!("reading the records: {e}"))),
        };
        if !r.is_kernel_record() {
            match r.user_record() {
                Some(Ok(UserRecord::HeaderAttr(_))) => {
                    let n = to.pass.ev_names.len();
                    to.pass.ev_names.push(format!("event{n}"));
                }
                Some(Ok(UserRecord::FinishedRound(_))) => queue.round(&mut to)?,
                Some(Ok(UserRecord::AuxtraceInfo(i))) => to.pass.pt.info(&i),
                Some(Ok(UserRecord::TimeConv(t))) => to.pass.pt.time_conv(&t),
                Some(Ok(UserRecord::Auxtrace(a, payload))) => to.pass.pt.auxtrace(&a, payload),
                _ => {}
            }
            continue;
        }
        match record_time(&r) {
            Some(t) => queue.push(t, &r, &mut to)?,
            None => to.take(&r)?,
        }
    }
    queue.finish(&mut to)?;
    let Taker { sink, .. } = to;
    let RecordPass {
        mut sum,
        ev_names,
        mut names,
        mut threads,
        aux_owner,
        mut sym,
        pt,
        ..
    } = pass;
    sum.events = ev_names;
    if pt.is_intel_pt() {
        sum.intel_pt = true;
        pt_calls(&rec, pt, &mut sym, &mut threads, &mut names, &mut sum, sink)?;
    }
    trace_windows(&rec, &aux_owner, &mut threads, &mut names, &mut sum, sink)?;
    sum.notes = sym.files().notes().to_vec();
    if !threads.filter.is_empty() && !threads.matched {
        return Err(threads.nothing_matched());
    }
    Ok((sum, names))
}

/// The record pass and the sink, as the queue's taker.
struct Taker<'p, 's, 'a, S> {
    pass: &'p mut RecordPass<'a>,
    sink: &'s mut S,
}

impl<S: Sink> TakeRecord<ViewError> for Taker<'_, '_, '_, S> {
    fn take(&mut self, r: &RawRecord<'_>) -> Result<(), ViewError> {
        self.pass.record(r, self.sink)
    }
}

/// The state of the record stream's part of the pass.
struct RecordPass<'a> {
    sum: Summary,
    ev_names: Vec<String>,
    names: Names,
    threads: Threads,
    sym: Symbolizer,
    stack: Vec<FuncId>,
    /// AUX event id -> tid, from ITRACE_START (the chunk's tid otherwise).
    aux_owner: HashMap<u64, u32>,
    uevents: UeventFormat<'a>,
    /// Each event's `sample_regs_user`: which registers its samples carry, in order.
    regs_masks: Vec<u64>,
    /// Each event's aux-action (v6.13): its samples pause or resume the AUX event's trace.
    aux_actions: Vec<AuxAction>,
    starts_paused: bool,
    /// Each AUX event's Intel PT trace (a thread's, or a CPU's) paused (true) or on, after
    /// the samples so far.
    pt_paused: HashMap<u64, bool>,
    unwinder: StackUnwinder,
    /// A sample's unwound addresses, and its registers and stack copy (reused buffers).
    frames: Vec<u64>,
    regs_buf: Vec<u64>,
    stack_buf: Vec<u8>,
    /// An Intel PT recording's trace, decoded after the records.
    pt: PtTrace,
}

impl RecordPass<'_> {
    /// Hands one record's events to `sink`.
    fn record(&mut self, r: &RawRecord<'_>, sink: &mut impl Sink) -> Result<(), ViewError> {
        let at = r.location.file_offset;
        let idx = r.attr_index;
        // Samples (the uevents are samples: most of the records) are read
        // for the fields the views show only, located in place
        // (`SampleFields`: building the whole `SampleRecord`, some 500 bytes,
        // cost more than reading them). A sample carries its own tid and time.
        if r.header.type_ == PERF_RECORD_SAMPLE {
            let Some(info) = r.parse_info else {
                return Ok(());
            };
            let body = RawData::new(r.body(), &[]);
            // A sample with a copied user stack is parsed whole once (`--call-graph dwarf`:
            // the registers and the stack to unwind), its viewer's fields taken from that.
            let aux_sample = info.sample_type & PERF_SAMPLE_AUX != 0 && self.pt.is_intel_pt();
            let full = (info.sample_type & USER_STACK_BITS == USER_STACK_BITS || aux_sample)
                .then(|| SampleRecord::parse(0, body, &info, r.endian));
            // An Intel PT snippet in the sample (PERF_SAMPLE_AUX, `--aux-sample`): the trace
            // that led to it, decoded with the recording's other trace.
            if let Some(Ok(f)) = &full
                && let Some(aux) = &f.aux
                && !aux.is_empty()
            {
                let tid = f.tid.map_or(u32::MAX, |t| t.tid);
                let cpu = f.cpu.map_or(u32::MAX, |c| c.cpu);
                self.pt.aux_sample(tid, cpu, &aux.to_vec());
            }
            let parsed = match &full {
                Some(Ok(f)) => Ok(SampleFields::from(f)),
                Some(Err(e)) => Err(*e),
                None => SampleFields::parse(body, &info, r.endian),
            };
            let s = match &parsed {
                Ok(s) => s,
                Err(e) => {
                    let e = e.in_record(PERF_RECORD_SAMPLE);
                    return Err(ViewError(format!("record at file offset {at:#x}: {e}")));
                }
            };
            if !self.threads.keep(s.tid.map_or(0, |t| t.tid)) {
                return Ok(());
            }
            let (pid, tid) = s.tid.map_or((0, 0), |t| (t.pid, t.tid));
            let time = s.time.unwrap_or(0);
            self.sum.saw(time);
            // A sample of an aux-action event paused or resumed the thread's Intel PT trace
            // (the hardware's TIP.PGD and TIP.PGE in it); a request for the state it was in
            // changed nothing (the kernel's __perf_event_aux_pause).
            let action = idx
                .and_then(|i| self.aux_actions.get(i))
                .copied()
                .unwrap_or_default();
            if self.pt.is_intel_pt() && action.intersects(AuxAction::PAUSE | AuxAction::RESUME) {
                let pause = action.contains(AuxAction::PAUSE);
                // The state is the AUX event's: a thread's own (`--per-thread`), or its CPU's.
                let cpu = self
                    .pt
                    .cpu_wide()
                    .then(|| SampleRecord::parse(0, body, &info, r.endian).ok()?.cpu)
                    .flatten();
                let key = match cpu {
                    Some(c) => (1 << 32) | u64::from(c.cpu),
                    None => u64::from(tid),
                };
                let was = self.pt_paused.entry(key).or_insert(self.starts_paused);
                let dropped = *was == pause;
                *was = pause;
                sink.event(
                    &self.names,
                    &ViewEvent::PauseResume {
                        tid,
                        time,
                        pause,
                        dropped,
                    },
                )
                .map_err(io)?;
            }
            let ev = idx
                .and_then(|i| self.ev_names.get(i))
                .map_or("", String::as_str);
            if ev == self.uevents.event_name
                && let Some((ty, payload)) = s.raw.as_ref().and_then(self.uevents.decode)
            {
                let type_name = self
                    .uevents
                    .type_names
                    .iter()
                    .find(|(_, v)| *v == ty)
                    .map(|(n, _)| *n);
                let joined;
                let payload = match payload.as_single() {
                    Some(p) => p,
                    None => {
                        joined = payload.to_vec();
                        &joined
                    }
                };
                sink.event(
                    &self.names,
                    &ViewEvent::Uevent {
                        pid,
                        tid,
                        time,
                        ty,
                        type_name,
                        payload,
                    },
                )
                .map_err(io)?;
                return Ok(());
            }
            self.stack.clear();
            // `--call-graph dwarf`: the chain is unwound from the copied stack (the kernel's
            // own holds no user frames then).
            if let Some(Ok(full)) = &full
                && let (Some(regs), Some(st)) = (&full.regs_user, &full.stack_user)
            {
                let mask = idx
                    .and_then(|i| self.regs_masks.get(i))
                    .copied()
                    .unwrap_or(0);
                self.regs_buf.clear();
                self.regs_buf.extend(regs.regs.iter());
                self.stack_buf.clear();
                for piece in st.data.chunks() {
                    self.stack_buf.extend_from_slice(piece);
                }
                let dyn_size = (st.dyn_size as usize).min(self.stack_buf.len());
                self.unwinder.unwind(
                    pid,
                    mask,
                    &self.regs_buf,
                    &self.stack_buf[..dyn_size],
                    &mut self.frames,
                );
                for &a in &self.frames {
                    self.stack.push(self.sym.resolve(pid, a, &mut self.names));
                }
            }
            match &s.callchain {
                _ if !self.stack.is_empty() => {}
                Some(cc) if !cc.is_empty() => {
                    for a in cc.iter() {
                        // PERF_CONTEXT_* markers are not addresses.
                        if a < PERF_CONTEXT_MAX_MARKER {
                            self.stack.push(self.sym.resolve(pid, a, &mut self.names));
                        }
                    }
                }
                _ => {
                    if let Some(ip) = s.ip {
                        self.stack.push(self.sym.resolve(pid, ip, &mut self.names));
                    }
                }
            }
            sink.event(
                &self.names,
                &ViewEvent::Sample {
                    pid,
                    tid,
                    time,
                    event: ev,
                    period: s.period.unwrap_or(1),
                    stack: &self.stack,
                },
            )
            .map_err(io)?;
            return Ok(());
        }
        // The record is looked at in place: a `Record` is some 700 bytes,
        // and each move of it was a `memcpy` call.
        let parsed = r.parse();
        let parsed = match &parsed {
            None => return Ok(()),
            Some(Ok(p)) => p,
            Some(Err(e)) => {
                return Err(ViewError(format!("record at file offset {at:#x}: {e}")));
            }
        };
        let sid = parsed.sample_id().copied().unwrap_or_default();
        let tid = sid.tid.map_or(0, |t| t.tid);
        let time = sid.time.unwrap_or(0);
        let lost = |kind, count, sum: &mut Summary, names: &Names, sink: &mut _| {
            sum.saw(time);
            Sink::event(
                sink,
                names,
                &ViewEvent::Lost {
                    tid,
                    time,
                    kind,
                    count,
                },
            )
            .map_err(io)
        };
        // A CPU-wide Intel PT buffer's threads: who ran on each CPU from when. A switch-in
        // record, per task (SWITCH) or CPU-wide (SWITCH_CPU_WIDE), is written in the name of
        // the task switched in.
        let switch_misc = match parsed {
            Record::Switch(sw) => Some(sw.misc),
            Record::SwitchCpuWide(sw) => Some(sw.misc),
            _ => None,
        };
        if let Some(misc) = switch_misc
            && misc & PERF_RECORD_MISC_SWITCH_OUT == 0
            && let (Some(cpu), Some(t)) = (sid.cpu, sid.tid)
        {
            self.pt.switch_in(cpu.cpu, time, t.pid, t.tid);
        }
        match parsed {
            Record::Comm(c) => {
                let comm = String::from_utf8_lossy(&c.comm.until_nul().to_vec()).into_owned();
                self.threads.info.insert(c.tid, (c.pid, comm.clone()));
                if self.threads.keep(c.tid) {
                    sink.event(
                        &self.names,
                        &ViewEvent::Comm {
                            pid: c.pid,
                            tid: c.tid,
                            comm: &comm,
                        },
                    )
                    .map_err(io)?;
                }
            }
            // A thread a clone made gets no COMM record: it bears its parent's name until
            // one comes (perf's `thread__fork` copies the parent's comm).
            Record::Task(t) if t.kind == TaskKind::Fork => {
                if let Some((_, comm)) = self.threads.info.get(&t.ptid).cloned() {
                    self.threads.info.insert(t.tid, (t.pid, comm.clone()));
                    if self.threads.keep(t.tid) {
                        sink.event(
                            &self.names,
                            &ViewEvent::Comm {
                                pid: t.pid,
                                tid: t.tid,
                                comm: &comm,
                            },
                        )
                        .map_err(io)?;
                    }
                }
            }
            // A data map (perf's `mmap_data`, which `--call-graph dwarf` asks for: an
            // unwinder of perf's reads `.eh_frame_hdr` from one) holds no code to name.
            Record::Mmap(m) if m.misc & PERF_RECORD_MISC_MMAP_DATA == 0 => {
                let name = map_name(&m.filename);
                self.sym.mmap(m.pid, m.addr, m.len, m.pgoff, &name);
                self.unwinder.exec_map(m.pid, m.addr, m.len, m.pgoff, &name);
            }
            Record::Mmap2(m) if m.misc & PERF_RECORD_MISC_MMAP_DATA == 0 => {
                let name = map_name(&m.filename);
                self.sym.mmap(m.pid, m.addr, m.len, m.pgoff, &name);
                self.unwinder.exec_map(m.pid, m.addr, m.len, m.pgoff, &name);
            }
            Record::ItraceStart(i) => {
                // The trace of a CPU-wide buffer is this thread's from here (perf's
                // intel_pt_process_itrace_start).
                if let Some(cpu) = sid.cpu {
                    self.pt.switch_in(cpu.cpu, time, i.pid, i.tid);
                }
                if let Some(id) = sid.identifier.or(sid.id) {
                    self.aux_owner.insert(id, i.tid);
                }
            }
            Record::Aux(a) if a.flags & PERF_AUX_FLAG_TRUNCATED != 0 && self.threads.keep(tid) => {
                lost(LostKind::AuxTruncated, 1, &mut self.sum, &self.names, sink)?;
            }
            Record::Switch(s) if self.threads.keep(tid) => {
                self.sum.saw(time);
                sink.event(
                    &self.names,
                    &ViewEvent::Switch {
                        pid: sid.tid.map_or(0, |t| t.pid),
                        tid,
                        time,
                        out: s.misc & PERF_RECORD_MISC_SWITCH_OUT != 0,
                        preempt: s.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT != 0,
                    },
                )
                .map_err(io)?;
            }
            Record::Lost(l) => lost(LostKind::Records, l.lost, &mut self.sum, &self.names, sink)?,
            Record::LostSamples(l) => {
                lost(LostKind::Samples, l.lost, &mut self.sum, &self.names, sink)?
            }
            _ => {}
        }
        Ok(())
    }
}

/// A sample with the user registers and stack, to unwind (`--call-graph dwarf`).
const USER_STACK_BITS: u64 = PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;

/// The first PERF_CONTEXT_* marker value: addresses are below it.
const PERF_CONTEXT_MAX_MARKER: u64 = (-4095i64) as u64;

/// An Intel PT recording's calls ([`crate::intel_pt`]).
fn pt_calls(
    rec: &Recording<'_, impl BufRead>,
    pt: PtTrace,
    sym: &mut Symbolizer,
    threads: &mut Threads,
    names: &mut Names,
    sum: &mut Summary,
    sink: &mut impl Sink,
) -> Result<(), ViewError> {
    let pmu_type = pt.pmu_type();
    let config = rec
        .reader
        .metadata()
        .attrs
        .iter()
        .find(|a| u64::from(a.attr.type_) == pmu_type)
        .map_or(0, |a| a.attr.config);
    let info = threads.info.clone();
    let pid_of = move |tid: u32| info.get(&tid).map_or(tid, |i| i.0);
    let mut keep = |tid: u32| threads.keep(tid);
    let mut saw = |t: u64| sum.saw(t);
    crate::intel_pt::emit_calls(
        pt,
        PtContext {
            sym,
            names,
            sink,
            pid_of: &pid_of,
            keep: &mut keep,
            config,
            saw: &mut saw,
        },
    )
    .map_err(io)
}

fn trace_windows(
    rec: &Recording<'_, impl BufRead>,
    owner: &HashMap<u64, u32>,
    threads: &mut Threads,
    names: &mut Names,
    sum: &mut Summary,
    sink: &mut impl Sink,
) -> Result<(), ViewError> {
    let funcs = ProbeFuncs::new(rec.probes, names);
    let Some(section) = rec.trace else {
        return Ok(());
    };
    let mut snapshot_ends = SnapshotEnds::default();
    for w in section.windows() {
        let w = w.map_err(|e| ViewError(e.to_string()))?;
        let first = &w.first.header;
        let tid = owner.get(&first.event_id).copied().unwrap_or(first.tid);
        if !threads.keep(tid) {
            continue;
        }
        let snapshot = first.kind == ChunkKind::Snapshot;
        let seen_end = if snapshot {
            snapshot_ends.seen_end(&w)
        } else {
            0
        };
        let mut win = Window {
            tid,
            pid: threads.pid(tid),
            stack: Vec::new(),
            cut: 0,
            last: 0,
            first: None,
            paused: None,
        };
        let piece = WINDOW_PIECE.min(usize::try_from(w.len).unwrap_or(usize::MAX));
        let mut dec = Decoder::from_reader(section.window_bytes(&w), w.start(), piece);
        // The decoder calls back from its common ENTER and EXIT paths
        // separately, so a call's fields stay in registers (through
        // `Iterator::next` they came back through memory: a store-forwarding
        // stall per event). The fields are taken out here, as scalars:
        // handing the event on by reference made the compiler copy it whole.
        if seen_end == 0 {
            dec.try_each(
                #[inline(always)]
                |ev| win.on(ev, &funcs, names, sink),
            )
            .map_err(io)?;
        } else {
            dec.try_each(|ev| win.on_after(seen_end, ev, &funcs, names, sink))
                .map_err(io)?;
        }
        if let Some(e) = dec.take_error() {
            return Err(ViewError(format!(
                "reading the trace window at file offset {:#x}: {e}",
                w.first.data_offset
            )));
        }
        win.close(names, sink).map_err(io)?;
        if let Some(f) = win.first {
            sum.saw(f);
            sum.saw(win.last);
            if snapshot {
                sink.event(
                    names,
                    &ViewEvent::Snapshot {
                        tid,
                        begin: f,
                        end: win.last,
                        bytes: w.len,
                        begins: first.flags & SNAPSHOT_BEGIN != 0,
                    },
                )
                .map_err(io)?;
            }
        }
    }
    Ok(())
}

/// Probe id -> function, looked up per ENTER: a dense table indexed by the
/// id (ids are small, given out in order), with a hash map only for ids
/// beyond [`ProbeFuncs::DENSE`] (the table's size is bounded whatever the
/// file's probe table says).
struct ProbeFuncs {
    dense: Vec<Option<FuncId>>,
    sparse: rustc_hash::FxHashMap<u32, FuncId>,
}

impl ProbeFuncs {
    const DENSE: u32 = 1 << 16;

    fn new(probes: &ProbeTable, names: &mut Names) -> Self {
        let mut f = ProbeFuncs {
            dense: Vec::new(),
            sparse: Default::default(),
        };
        for p in probes.iter() {
            let func = names.intern(&p.name, "[swtrace]");
            if p.id < Self::DENSE {
                let i = p.id as usize;
                if f.dense.len() <= i {
                    f.dense.resize(i + 1, None);
                }
                // A repeated id keeps its last entry, as a map collected
                // from the table does.
                f.dense[i] = Some(func);
            } else {
                f.sparse.insert(p.id, func);
            }
        }
        f
    }

    #[inline]
    fn get(&self, id: u32) -> Option<FuncId> {
        match self.dense.get(id as usize) {
            Some(f) => *f,
            None if id < Self::DENSE => None,
            None => self.sparse.get(&id).copied(),
        }
    }
}

/// What the pass holds of a window's bytes at a time: small enough that
/// the kernel's copy into it and the decoder's reads of it stay in the L2
/// cache (1 MiB pieces were 0.5 ms slower on a 2.82 M-call report).
const WINDOW_PIECE: usize = 1 << 16;

/// The open calls of one decoded window.
struct Window {
    tid: u32,
    pid: u32,
    /// (decoder depth, function) of each open call the window saw enter.
    stack: Vec<(u32, FuncId)>,
    /// Calls entered past the stack's bound since the last note of them: counted as calls
    /// (closed at once, untimed), said as one [`LostKind::CallsPastDepth`] note.
    cut: u64,
    last: u64,
    first: Option<u64>,
    /// Whether the trace is paused, once a marker said it: unknown at the window's start (a
    /// `start-paused` trace, a snapshot taken while paused), so a window's first marker is
    /// never a dropped request.
    paused: Option<bool>,
}

impl Window {
    /// Closes the calls at decoder depth `depth` and deeper.
    fn pop_to(&mut self, depth: u32, names: &Names, sink: &mut impl Sink) -> std::io::Result<()> {
        self.say_cut(names, sink)?;
        while let Some(&(d, func)) = self.stack.last() {
            if d < depth {
                break;
            }
            self.stack.pop();
            let c = Call {
                pid: self.pid,
                tid: self.tid,
                time: self.last,
                func,
                depth: self.stack.len() as u32,
            };
            sink.exit(names, c, true)?;
        }
        Ok(())
    }

    /// The calls cut past the stack's bound since the last note, as one note (the views count
    /// them as calls; this says their times are not known).
    #[cold]
    #[inline(never)]
    fn say_cut(&mut self, names: &Names, sink: &mut impl Sink) -> std::io::Result<()> {
        if self.cut == 0 {
            return Ok(());
        }
        let count = std::mem::take(&mut self.cut);
        sink.event(
            names,
            &ViewEvent::Lost {
                tid: self.tid,
                time: self.last,
                kind: LostKind::CallsPastDepth,
                count,
            },
        )
    }

    /// A call entered past the stack's bound: counted as a call the view closed (untimed, its
    /// return not followed), so every view counts the calls the call trace shows.
    #[cold]
    #[inline(never)]
    fn enter_past_bound(
        &mut self,
        id: u32,
        time: u64,
        funcs: &ProbeFuncs,
        names: &mut Names,
        sink: &mut impl Sink,
    ) -> std::io::Result<()> {
        let func = match funcs.get(id) {
            Some(f) => f,
            None => names.intern(&format!("[unknown probe {id}]"), "[swtrace]"),
        };
        let c = Call {
            pid: self.pid,
            tid: self.tid,
            time,
            func,
            depth: self.stack.len() as u32,
        };
        self.cut += 1;
        sink.enter(names, c)?;
        sink.exit(names, c, true)
    }

    fn close(&mut self, names: &Names, sink: &mut impl Sink) -> std::io::Result<()> {
        self.pop_to(0, names, sink)
    }

    /// The time of the next event: a thread's time never goes back. Where
    /// the decoded times do (a SYNC whose clock conversion disagrees with
    /// the one before it), the view holds the time so that calls stay
    /// nested in time, as every viewer requires.
    #[inline(always)]
    fn advance(&mut self, time: Option<u64>) -> u64 {
        let time = time.unwrap_or(self.last).max(self.last);
        self.last = time;
        if time != 0 && self.first.is_none() {
            self.first = Some(time);
        }
        time
    }

    /// Takes one decoded event. Inlined (always) into each of the decoder's
    /// calls of it, so that a call's fields stay in registers: the closure
    /// that held this body was compiled out of line and took the event in
    /// memory.
    #[inline(always)]
    fn on(
        &mut self,
        ev: TraceEvent,
        funcs: &ProbeFuncs,
        names: &mut Names,
        sink: &mut impl Sink,
    ) -> std::io::Result<()> {
        match ev {
            TraceEvent::Enter {
                id, depth, time, ..
            } => self.enter(id, depth, time, funcs, names, sink),
            TraceEvent::Exit { depth, time, .. } => self.exit(depth, time, names, sink),
            ev => self.event(&ev, funcs, names, sink),
        }
    }

    /// Takes one decoded event of a snapshot that overlaps the thread's one before it: the
    /// events of packets before `seen_end` (that one's end in the stream) were shown by it
    /// and only move the window's time. The decoder still reads them, for the depth and
    /// time of what follows. A call the earlier snapshot left open was ended there
    /// (truncated); its return here finds no call entered in this window and is passed
    /// over, so it is counted once.
    fn on_after(
        &mut self,
        seen_end: u64,
        ev: TraceEvent,
        funcs: &ProbeFuncs,
        names: &mut Names,
        sink: &mut impl Sink,
    ) -> std::io::Result<()> {
        if ev.offset() >= seen_end {
            return self.on(ev, funcs, names, sink);
        }
        self.advance(ev.time());
        Ok(())
    }

    /// A call began (the decoder's ENTER at `depth`).
    #[inline(always)]
    fn enter(
        &mut self,
        id: u32,
        depth: u32,
        time: u64,
        funcs: &ProbeFuncs,
        names: &mut Names,
        sink: &mut impl Sink,
    ) -> std::io::Result<()> {
        let time = self.advance(Some(time));
        if self.stack.last().is_some_and(|&(d, _)| d >= depth) {
            self.pop_to(depth, names, sink)?;
        }
        // Bounded like the decoder's: deeper calls are counted, untimed, and said.
        if self.stack.len() >= perfaux_swtrace::decode::MAX_FRAMES {
            return self.enter_past_bound(id, time, funcs, names, sink);
        }
        let func = match funcs.get(id) {
            Some(f) => f,
            None => names.intern(&format!("[unknown probe {id}]"), "[swtrace]"),
        };
        let d = self.stack.len() as u32;
        self.stack.push((depth, func));
        let c = Call {
            pid: self.pid,
            tid: self.tid,
            time,
            func,
            depth: d,
        };
        sink.enter(names, c)
    }

    /// A call returned (the decoder's EXIT at `depth`).
    #[inline(always)]
    fn exit(
        &mut self,
        depth: u32,
        time: u64,
        names: &Names,
        sink: &mut impl Sink,
    ) -> std::io::Result<()> {
        let time = self.advance(Some(time));
        if self.stack.last().is_some_and(|&(d, _)| d > depth) {
            self.pop_to(depth + 1, names, sink)?;
        }
        match self.stack.last() {
            Some(&(d, func)) if d == depth => {
                self.say_cut(names, sink)?;
                self.stack.pop();
                let c = Call {
                    pid: self.pid,
                    tid: self.tid,
                    time,
                    func,
                    depth: self.stack.len() as u32,
                };
                sink.exit(names, c, false)
            }
            // A return of a call entered before the window began.
            _ => Ok(()),
        }
    }

    fn event(
        &mut self,
        ev: &TraceEvent,
        funcs: &ProbeFuncs,
        names: &mut Names,
        sink: &mut impl Sink,
    ) -> std::io::Result<()> {
        let tid = self.tid;
        let time = self.advance(ev.time());
        match ev {
            TraceEvent::Sync { depth, .. } => self.pop_to(*depth, names, sink),
            &TraceEvent::Enter {
                id, depth, time, ..
            } => self.enter(id, depth, time, funcs, names, sink),
            &TraceEvent::Exit { depth, time, .. } => self.exit(depth, time, names, sink),
            TraceEvent::Paused { .. } | TraceEvent::Resumed { .. } => {
                let pause = matches!(ev, TraceEvent::Paused { .. });
                let dropped = self.paused == Some(pause);
                self.paused = Some(pause);
                sink.event(
                    names,
                    &ViewEvent::PauseResume {
                        tid,
                        time,
                        pause,
                        dropped,
                    },
                )
            }
            TraceEvent::Stopped { .. } => sink.event(names, &ViewEvent::Stopped { tid, time }),
            TraceEvent::Lost { count, kind, .. } => {
                let _: &TraceLost = kind;
                sink.event(
                    names,
                    &ViewEvent::Lost {
                        tid,
                        time,
                        kind: LostKind::ProbeEvents,
                        count: *count,
                    },
                )
            }
            // The innermost open call, if the view has it (not a call entered before the
            // window, whose ENTER it did not see).
            &TraceEvent::Tag { depth, value, .. } => match self.stack.last() {
                Some(&(d, _)) if d == depth => sink.event(
                    names,
                    &ViewEvent::Tag {
                        pid: self.pid,
                        tid,
                        time,
                        depth: self.stack.len() as u32 - 1,
                        value,
                    },
                ),
                _ => Ok(()),
            },
            TraceEvent::Skipped { bytes, .. } => sink.event(
                names,
                &ViewEvent::Lost {
                    tid,
                    time,
                    kind: LostKind::SkippedBytes,
                    count: *bytes,
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfaux_swtrace::table::ProbeInfo;

    fn probe(id: u32, name: &str) -> ProbeInfo {
        ProbeInfo {
            id,
            name: name.into(),
            addr: 0,
            file: String::new(),
            line: 0,
        }
    }

    #[test]
    fn probe_ids_map_to_their_functions_dense_or_not() {
        let mut table = ProbeTable::default();
        for (id, name) in [(0, "a"), (5, "b"), (70_000, "c"), (u32::MAX, "d")] {
            table.insert(probe(id, name));
        }
        let mut names = Names::default();
        let funcs = ProbeFuncs::new(&table, &mut names);
        let name = |id| funcs.get(id).map(|f| names.name(f).to_owned());
        assert_eq!(name(0).as_deref(), Some("a"));
        assert_eq!(name(5).as_deref(), Some("b"));
        assert_eq!(name(70_000).as_deref(), Some("c"));
        assert_eq!(name(u32::MAX).as_deref(), Some("d"));
        for unknown in [1, 4, 6, ProbeFuncs::DENSE - 1, ProbeFuncs::DENSE, 70_001] {
            assert_eq!(name(unknown), None, "id {unknown}");
        }
        // The dense table ends at the largest small id, whatever the file
        // says beyond it.
        assert_eq!(funcs.dense.len(), 6);
    }
}
