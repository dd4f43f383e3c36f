//! `perfaux script`: one line per event in time order, in perf script's
//! column style (`comm tid [cpu] time: ...`), and `--call-trace`, the
//! software trace decoded into calls (like `perf script --call-trace`,
//! seed 003).
//!
//! Lines are put in time order the way perf's ordered-events queue does it
//! (tools/perf/util/ordered-events.c): records are queued by time, and at
//! each PERF_RECORD_FINISHED_ROUND every queued line not later than the
//! newest time of the round before is printed; the rest at the end. Memory
//! is bounded by two rounds of lines, and whatever the rounds (huge, or no
//! FINISHED_ROUND at all) by [`ordered::QUEUE_BUDGET`] ([`ordered`]).
//!
//! `--call-trace` merges the decoded windows of the trace section by time,
//! each window decoded lazily from the file in bounded pieces, so what is
//! held is one pending line and one piece per window, not the trace or the
//! output ([`call_trace`]).
//!
//! On damage (a record that does not parse, a file cut short, a broken
//! feature section) every line before it is printed, then the error, and
//! the exit status is non-zero, as `perf script` does.

mod call_trace;
mod line;
mod ordered;
mod pt_call_trace;
mod uevent_logs;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::Path;

use perfaux_abi::consts::*;
use perfaux_abi::raw::RawData;
use perfaux_abi::read_format::{ReadFormat, ReadValues};
use perfaux_abi::records::{Record, TaskKind};
use perfaux_abi::sample::SampleRecord;
use perfaux_perfdata::UserRecord;
use perfaux_perfdata::tracepoint_format::TracepointFormats;
use perfaux_swtrace::decode::Decoder;
use perfaux_swtrace::{CallTrace, CallTraceOptions, ProbeTable};

use call_trace::{WindowLines, call_trace_lines};
use line::Line;
use ordered::{Entry, Ordered};
use uevent_logs::UeventLogs;

use crate::dump::{EvInfo, ev_info};
use crate::error::CliError;
use crate::progress::Progress;
use perfaux_perfdata::trace_section::PERFAUX_FEATURE_BIT;
use perfaux_perfdata::uevent_sample::{UEVENT_EVENT_NAME, uevent_from_raw};

/// The tracepoints' formats of the file (none if it has no HEADER_TRACING_DATA, or a damaged
/// one: their samples then print as other samples do).
fn tracepoint_formats(features: &perfaux_perfdata::features::FeatureSections) -> TracepointFormats {
    features
        .raw(perfaux_perfdata::Feature::TRACING_DATA)
        .and_then(|f| TracepointFormats::parse(&f.data).ok())
        .unwrap_or_default()
}

/// A line of thread `tid` that starts with perf script's leading columns.
fn line_of(tid: i64, cpu: Option<u32>, time: u64) -> Line {
    let mut l = Line::new(tid);
    l.push_prefix(cpu, time);
    l
}

/// A uevent type as the recording names it (its probe table), else its number.
fn uevent_type_name(probes: &ProbeTable, t: u32) -> String {
    match probes.uevent_type(t) {
        Some(n) => format!("{n}({t})"),
        None => format!("type {t}"),
    }
}

/// A switch record's words after the line's columns, as perf's `perf_event__fprintf_switch`
/// prints them (its `in_out` padded to one width).
fn switch_text(r: &Record<'_>) -> String {
    let (misc, other) = match r {
        Record::Switch(s) => (s.misc, None),
        Record::SwitchCpuWide(s) => (s.misc, Some((s.next_prev_pid, s.next_prev_tid))),
        _ => return String::new(),
    };
    let out = misc & PERF_RECORD_MISC_SWITCH_OUT != 0;
    let in_out = match (out, misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT != 0) {
        (false, _) => "IN         ",
        (true, false) => "OUT        ",
        (true, true) => "OUT preempt",
    };
    match other {
        None => format!("PERF_RECORD_SWITCH {in_out}\n"),
        Some((pid, tid)) => format!(
            "PERF_RECORD_SWITCH_CPU_WIDE {in_out}  {} pid/tid: {pid:5}/{tid:<5}\n",
            if out { "next" } else { "prev" }
        ),
    }
}

/// C's `%#x`: `0` for zero, else `0x...`.
fn c_hex(v: u64) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

/// A payload as text if it is printable, else as hex.
fn payload_text(d: &[u8]) -> String {
    if d.iter().all(|&c| (0x20..0x7f).contains(&c)) {
        format!("\"{}\"", String::from_utf8_lossy(d))
    } else {
        d.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

struct Script {
    evs: Vec<EvInfo>,
    comms: HashMap<u32, String>,
    /// The name a COMM gave the threads of one event (its sample_id's identifier, when it
    /// carries one): the image a thread exec'd is another trace event of the same tid.
    comms_by_event: HashMap<u64, String>,
    probes: ProbeTable,
    /// Event id -> index in `evs`, for the members of a group read.
    ev_by_id: HashMap<u64, usize>,
    /// The last counter value seen per event id (perf's `sid->period`).
    last_value: HashMap<u64, u64>,
    /// The tracepoints' formats (HEADER_TRACING_DATA), to print their samples' fields.
    formats: TracepointFormats,
    /// The processes' maps so far (MMAP/MMAP2), to name a sample's address as perf script
    /// does: its function in the object mapped there (the probe table's name first).
    sym: std::cell::RefCell<(
        perfaux_view::symbols::Symbolizer,
        perfaux_view::event::Names,
    )>,
}

impl Script {
    /// The name of the thread an AUX event of id `event_id` traced: its COMM's for that event,
    /// else the thread's last.
    fn comm_of_event(&self, event_id: u64, tid: i64) -> String {
        match self.comms_by_event.get(&event_id) {
            Some(c) => c.clone(),
            None => self.comm(tid),
        }
    }

    fn comm(&self, tid: i64) -> String {
        self.comms
            .get(&(tid as u32))
            .cloned()
            .unwrap_or_else(|| ":".to_string() + &tid.to_string())
    }

    /// The lines of a sample: one, or with a group read
    /// (PERF_SAMPLE_READ with PERF_FORMAT_GROUP) one per member, each with
    /// the member's counter delta since its last read as the period, as
    /// perf's `deliver_sample_group` does.
    fn sample_lines(&mut self, s: &SampleRecord<'_>, idx: usize) -> Vec<(u64, Line)> {
        let ev = &self.evs[idx];
        let time = s.time.unwrap_or(0);
        if ev.attr.sample_type & PERF_SAMPLE_READ != 0
            && let Some(ReadFormat {
                values: ReadValues::Group(values),
                ..
            }) = &s.read
        {
            let mut lines = Vec::new();
            for v in values.iter() {
                // A member with no id, or an id in no attr: perf counts it
                // as an unknown id and prints nothing.
                let Some(id) = v.id else { continue };
                let Some(&member) = self.ev_by_id.get(&id) else {
                    continue;
                };
                let last = self.last_value.insert(id, v.value).unwrap_or(0);
                let line = self.counter_line(s, member, v.value.wrapping_sub(last));
                lines.push((time, line));
            }
            return lines;
        }
        let period = s.period.unwrap_or(ev.attr.sample_period);
        vec![(time, self.counter_line(s, idx, period))]
    }

    fn counter_line(&self, s: &SampleRecord<'_>, idx: usize, period: u64) -> Line {
        let ev = &self.evs[idx];
        let tid = s.tid.map_or(-1, |t| i64::from(t.tid as i32));
        let time = s.time.unwrap_or(0);
        let mut line = line_of(tid, s.cpu.map(|c| c.cpu), time);
        if ev.name == UEVENT_EVENT_NAME
            && let Some((ty, data)) = s.raw.as_ref().and_then(uevent_from_raw)
        {
            line.push_str(&format!(
                "{}: {} {}",
                ev.name,
                uevent_type_name(&self.probes, ty),
                payload_text(&data)
            ));
        } else if ev.attr.type_ == PERF_TYPE_TRACEPOINT
            && let (Some(f), Some(raw)) = (self.formats.get(ev.attr.config), &s.raw)
        {
            // The fields, as perf prints a tracepoint's (perfaux's layout: name=value).
            line.push_str(&format!("{}: {}", ev.name, f.fields_text(&raw.to_vec())));
        } else {
            let ip = s.ip.unwrap_or(0);
            let pid = s.tid.map_or(0, |t| t.pid);
            let sym = match self.probes.iter().find(|p| p.addr == ip && ip != 0) {
                Some(p) => p.name.clone(),
                None => {
                    let mut g = self.sym.borrow_mut();
                    let (sym, names) = &mut *g;
                    let f = sym.resolve(pid, ip, names);
                    names.name(f).to_owned()
                }
            };
            line.push_str(&format!("{period:>10} {}: {ip:>16x} {sym}", ev.name));
        }
        line.push_str("\n");
        if let Some(aux) = &s.aux {
            line.pop();
            line.push_str(&format!(" aux: {} bytes\n", aux.len()));
            self.aux_calls(&aux.to_vec(), s.cpu.map_or(0, |c| c.cpu), &mut line);
        }
        line
    }

    /// The calls a sample's AUX data holds (PERF_SAMPLE_AUX: the newest
    /// trace bytes at the sample), decoded as `--call-trace` decodes the
    /// trace and printed under the sample, indented, as perf's itrace sample
    /// mode shows what each sample's AUX data holds.
    fn aux_calls(&self, aux: &[u8], cpu: u32, out: &mut Line) {
        // Made with no name; the name column becomes the line's slot.
        let opts = CallTraceOptions {
            comm: String::new(),
            cpu,
            returns: false,
            markers: false,
        };
        let mut w = WindowLines::new(Decoder::new(aux), CallTrace::new(&self.probes, opts), None);
        while w.next_line().is_some() {
            out.push_str("    ");
            out.push_named(&String::from_utf8_lossy(w.line()), "", 0);
        }
    }
}

/// What `perfaux script` prints besides its default lines.
#[derive(Debug, Clone, Default)]
pub struct ScriptOptions {
    /// The software trace decoded into calls instead of the records' lines.
    pub call_trace: bool,
    /// The call trace in uftrace replay's layout (implies `call_trace`).
    pub replay: bool,
    /// The context switches (PERF_RECORD_SWITCH), as perf's `--show-switch-events`.
    pub show_switch_events: bool,
    /// Where the recording's files are (perf's `--symfs`).
    pub symfs: Option<std::path::PathBuf>,
}

/// Runs `perfaux script` on `path` into `out`.
pub fn script(
    path: &Path,
    call_trace: bool,
    out: &mut impl Write,
    progress: &mut Progress,
) -> Result<(), CliError> {
    let opts = ScriptOptions {
        call_trace,
        ..ScriptOptions::default()
    };
    script_with(path, &opts, out, progress)
}

/// [`script`] with `opts`.
pub fn script_with(
    path: &Path,
    opts: &ScriptOptions,
    out: &mut impl Write,
    progress: &mut Progress,
) -> Result<(), CliError> {
    let replay = opts.replay;
    let call_trace = opts.call_trace || replay;
    let (mut reader, file_len) = crate::input::open_input(path)?;
    let meta = reader.metadata().clone();
    // A broken feature area does not hide intact records: they are printed,
    // then this error.
    let feature_error = meta.feature_error.as_ref().map(|e| CliError::file(path, e));
    if call_trace && let Some(e) = feature_error {
        return Err(e);
    }
    let (trace, probes) = crate::input::trace_and_probes(&reader, path)?;
    // The uevent logs' places, for the uevents under each AUX record; a bad
    // chunk header is reported after every line the chunks before it give.
    let (uevent_logs, mut section_error) = match &trace {
        Some(t) if !call_trace => UeventLogs::index(t),
        _ => (UeventLogs::default(), None),
    };
    let mut s = Script {
        evs: meta
            .attrs
            .iter()
            .map(|a| ev_info(&a.attr, a.name.as_deref()))
            .collect(),
        comms: HashMap::new(),
        comms_by_event: HashMap::new(),
        probes,
        ev_by_id: meta
            .attrs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.ids.iter().map(move |&id| (id, i)))
            .collect(),
        last_value: HashMap::new(),
        formats: tracepoint_formats(&meta.features),
        sym: Default::default(),
    };
    s.sym.get_mut().0 = perfaux_view::symbols::Symbolizer::new(&s.probes);
    let mut ord = Ordered::new();
    // AUX event id -> (tid, cpu) from ITRACE_START / AUX records, for the call trace.
    let mut aux_owner: HashMap<u64, (u32, Option<u32>)> = HashMap::new();
    // (AUX event id, end of the range) of every PERF_RECORD_AUX flagged
    // TRUNCATED: the window ending there stopped because the area was full.
    let mut truncated: HashSet<(u64, u64)> = HashSet::new();
    loop {
        let rec = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                ord.finish(out)?;
                return Err(CliError::file(path, e));
            }
        };
        let h = rec.header;
        if !rec.is_kernel_record() {
            match rec.user_record() {
                Some(Ok(UserRecord::FinishedRound(_))) => {
                    if !call_trace {
                        ord.round(out)?;
                    }
                    progress.update(rec.location.file_offset, file_len);
                }
                Some(Ok(UserRecord::HeaderAttr(a))) => {
                    for &id in &a.ids {
                        s.ev_by_id.insert(id, s.evs.len());
                    }
                    s.evs.push(ev_info(&a.attr, None));
                }
                _ => {}
            }
            continue;
        }
        let Some(idx) = rec.attr_index.filter(|&i| i < s.evs.len()) else {
            continue;
        };
        let body = RawData::new(rec.body(), &[]);
        let r = match Record::parse(h.type_, h.misc, body, &s.evs[idx].info, rec.endian) {
            Ok(r) => r,
            Err(e) => {
                ord.finish(out)?;
                out.flush().map_err(CliError::output)?;
                return Err(CliError::file(
                    path,
                    format!("record at file offset {:#x}: {e}", rec.location.file_offset),
                ));
            }
        };
        let sid = r.sample_id().copied().unwrap_or_default();
        let tid = sid.tid.map_or(-1, |t| i64::from(t.tid as i32));
        let time = sid.time.unwrap_or(0);
        let cpu = sid.cpu.map(|c| c.cpu);
        let evname = &s.evs[idx].name;
        let line = match &r {
            Record::Comm(c) => {
                let mut name = Vec::new();
                for piece in c.comm.until_nul().chunks() {
                    name.extend_from_slice(piece);
                }
                let name = String::from_utf8_lossy(&name).into_owned();
                if let Some(id) = sid.identifier.filter(|&id| id != 0) {
                    s.comms_by_event.insert(id, name.clone());
                }
                s.comms.insert(c.tid, name.clone());
                (!call_trace).then_some((time, Entry::Comm { tid: c.tid, name }))
            }
            Record::Task(t) if t.kind == TaskKind::Fork => {
                if let Some(name) = s.comms.get(&t.ptid).cloned() {
                    s.comms.entry(t.tid).or_insert(name);
                }
                (!call_trace).then_some((
                    time,
                    Entry::Fork {
                        tid: t.tid,
                        ptid: t.ptid,
                    },
                ))
            }
            // Code maps (not perf's `mmap_data` ones), for the samples' functions.
            Record::Mmap(m) if m.misc & PERF_RECORD_MISC_MMAP_DATA == 0 => {
                let name = perfaux_view::symbols::map_name(&m.filename);
                s.sym.get_mut().0.mmap(m.pid, m.addr, m.len, m.pgoff, &name);
                None
            }
            Record::Mmap2(m) if m.misc & PERF_RECORD_MISC_MMAP_DATA == 0 => {
                let name = perfaux_view::symbols::map_name(&m.filename);
                s.sym.get_mut().0.mmap(m.pid, m.addr, m.len, m.pgoff, &name);
                None
            }
            Record::Sample(smp) => {
                if !call_trace {
                    for (t, l) in s.sample_lines(smp, idx) {
                        ord.push(t, Entry::Line(l), out)?;
                    }
                }
                None
            }
            Record::Aux(a) => {
                if let Some(id) = sid.identifier.or(sid.id) {
                    aux_owner.entry(id).or_insert((tid as u32, cpu));
                    if a.flags & PERF_AUX_FLAG_TRUNCATED != 0 {
                        truncated.insert((id, a.aux_offset.saturating_add(a.aux_size)));
                    }
                }
                let mut flags = String::new();
                for (bit, c) in [
                    (PERF_AUX_FLAG_TRUNCATED, 'T'),
                    (PERF_AUX_FLAG_OVERWRITE, 'O'),
                    (PERF_AUX_FLAG_PARTIAL, 'P'),
                ] {
                    if a.flags & bit != 0 {
                        flags.push(c);
                    }
                }
                let mut text = line_of(tid, cpu, time);
                text.push_str(&format!(
                    "{evname}: PERF_RECORD_AUX offset: {} size: {} flags: {} [{flags}]\n",
                    c_hex(a.aux_offset),
                    c_hex(a.aux_size),
                    c_hex(a.flags)
                ));
                if let (Some(t), Some(id)) = (&trace, sid.identifier.or(sid.id))
                    && !call_trace
                {
                    let (entries, err) = uevent_logs.entries(t, id, a.aux_offset, a.aux_size);
                    if section_error.is_none() {
                        section_error = err;
                    }
                    for (ty, data) in entries {
                        text.push_prefix(cpu, time);
                        text.push_str(&format!(
                            "{evname}: {} {}\n",
                            uevent_type_name(&s.probes, ty),
                            payload_text(&data)
                        ));
                    }
                }
                Some((time, Entry::Line(text)))
            }
            Record::ItraceStart(i) => {
                if let Some(id) = sid.identifier.or(sid.id) {
                    aux_owner.insert(id, (i.tid, cpu));
                }
                let mut l = line_of(tid, cpu, time);
                l.push_str(&format!(
                    "{evname}: PERF_RECORD_ITRACE_START pid: {} tid: {}\n",
                    i.pid, i.tid
                ));
                Some((time, Entry::Line(l)))
            }
            Record::Lost(r) => {
                let mut l = line_of(tid, cpu, time);
                l.push_str(&format!("PERF_RECORD_LOST id: {} lost: {}\n", r.id, r.lost));
                Some((time, Entry::Line(l)))
            }
            Record::Switch(_) | Record::SwitchCpuWide(_) if opts.show_switch_events => {
                let mut l = line_of(tid, cpu, time);
                l.push_str(&switch_text(&r));
                Some((time, Entry::Line(l)))
            }
            Record::LostSamples(r) => {
                let mut l = line_of(tid, cpu, time);
                l.push_str(&format!(
                    "{evname}: PERF_RECORD_LOST_SAMPLES lost: {}\n",
                    r.lost
                ));
                Some((time, Entry::Line(l)))
            }
            _ => None,
        };
        if let Some((t, l)) = line
            && !call_trace
        {
            ord.push(t, l, out)?;
        }
    }
    if call_trace {
        let Some(trace) = trace else {
            // An Intel PT recording: its calls are decoded from its AUXTRACE payloads.
            if pt_call_trace::pt_call_trace(path, opts.symfs.as_deref(), out)? {
                out.flush().map_err(CliError::output)?;
                progress.done();
                return Ok(());
            }
            return Err(CliError::msg(format!(
                "{}: no software trace in the file (perfaux's trace section, feature {PERFAUX_FEATURE_BIT}, is missing)",
                path.display()
            )));
        };
        section_error = call_trace_lines(&s, &trace, &aux_owner, &truncated, replay, out)?;
    }
    ord.finish(out)?;
    out.flush().map_err(CliError::output)?;
    progress.done();
    if let Some(note) = ord.late_note() {
        // As perf's ordered-events queue warns, on stderr: the output is the lines all the same.
        eprintln!("perfaux script: warning: {note}");
    }
    match (feature_error, section_error) {
        (Some(e), _) => Err(e),
        (None, Some(e)) => Err(CliError::file(path, e)),
        (None, None) => Ok(()),
    }
}
