//! One record's dump: the `event:` line, the raw bytes, the time stamp and
//! the `PERF_RECORD_*` line with the fields perf prints for its type.

use std::collections::HashMap;
use std::io::Write;

use perfaux_abi::consts::*;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::{Mmap2FileId, Record};
use perfaux_abi::sample::SampleRecord;
use perfaux_abi::sample_id::SampleId;
use perfaux_abi::user::AuxtraceRecord;
use perfaux_perfdata::{RawRecord, UserRecord};

use super::EvInfo;
use super::fmt::{dec, hash_x, hex_lines, hex_lines_at, sdec, sdec_left, sdec_right};
use super::names::record_name;
use crate::error::CliError;
use perfaux_perfdata::trace_reader::{SectionSource, TraceSection};
use perfaux_perfdata::trace_section::AuxDataError;
use perfaux_perfdata::uevent_sample::{UEVENT_EVENT_NAME, uevent_from_raw};

/// A mapping perf would resolve a sample's ip with.
#[derive(Debug, Clone)]
struct Map {
    start: u64,
    end: u64,
    name: Vec<u8>,
}

pub(crate) struct Dumper {
    path: Vec<u8>,
    evs: Vec<EvInfo>,
    /// OR of every event's sample_type (perf's `__evlist__combined_sample_type`).
    combined: u64,
    sample_id_all: bool,
    comms: HashMap<u32, Vec<u8>>,
    maps: HashMap<u32, Vec<Map>>,
    /// The AUXTRACE_INFO's trace type, once seen: it says how AUXTRACE payloads decode.
    auxtrace_type: Option<u32>,
}

/// perf's `enum auxtrace_type` value for Intel PT.
const PERF_AUXTRACE_INTEL_PT: u32 = 1;

fn push_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
}

/// `pid<sep>tid` as perf prints the pair: each as a signed 32-bit value (-1 stays -1).
fn id_pair(out: &mut Vec<u8>, a: u32, sep: u8, b: u32) {
    sdec(out, i64::from(a as i32));
    out.push(sep);
    sdec(out, i64::from(b as i32));
}

/// The start MMAP and MMAP2 share: ` pid/tid: [addr(len) @ pgoff`.
fn map_prefix(out: &mut Vec<u8>, pid: u32, tid: u32, addr: u64, len: u64, pgoff: u64) {
    out.push(b' ');
    id_pair(out, pid, b'/', tid);
    out.extend_from_slice(b": [");
    hash_x(out, addr);
    out.push(b'(');
    hash_x(out, len);
    out.extend_from_slice(b") @ ");
    hash_x(out, pgoff);
}

fn push_raw(out: &mut Vec<u8>, r: &RawData<'_>) {
    for c in r.until_nul().chunks() {
        out.extend_from_slice(c);
    }
}

impl Dumper {
    pub(crate) fn new(path: &str, evs: &[EvInfo]) -> Self {
        let mut d = Dumper {
            path: path.as_bytes().to_vec(),
            evs: Vec::new(),
            combined: 0,
            sample_id_all: false,
            comms: HashMap::new(),
            maps: HashMap::new(),
            auxtrace_type: None,
        };
        d.set_events(evs);
        d
    }

    pub(crate) fn set_events(&mut self, evs: &[EvInfo]) {
        self.evs = evs.to_vec();
        self.combined = evs.iter().fold(0, |a, e| a | e.attr.sample_type);
        // perf's evlist__sample_id_all: the first event's.
        self.sample_id_all = evs.first().is_some_and(|e| e.info.sample_id_all);
    }

    /// perf's `evlist__print_tstamp`.
    fn tstamp(&self, out: &mut Vec<u8>, ty: u32, cpu: u32, time: u64) {
        if ty != PERF_RECORD_SAMPLE && !self.sample_id_all {
            out.extend_from_slice(b"-1 -1 ");
            return;
        }
        if self.combined & PERF_SAMPLE_CPU != 0 {
            dec(out, u64::from(cpu));
            out.push(b' ');
        }
        if self.combined & PERF_SAMPLE_TIME != 0 {
            dec(out, time);
            out.push(b' ');
        }
    }

    pub(crate) fn record(&mut self, out: &mut Vec<u8>, rec: &RawRecord<'_>) {
        let h = rec.header;
        let off = rec.location.file_offset;
        // dump_event: "\n%#lx@%s [%#x]: event: %d\n", then trace_event.
        out.push(b'\n');
        hash_x(out, off);
        out.push(b'@');
        out.extend_from_slice(&self.path);
        out.extend_from_slice(b" [");
        hash_x(out, u64::from(h.size));
        out.extend_from_slice(b"]: event: ");
        dec(out, u64::from(h.type_));
        out.extend_from_slice(b"\n.\n. ... raw event: size ");
        dec(out, u64::from(h.size));
        out.extend_from_slice(b" bytes\n");
        hex_lines(out, rec.bytes);
        out.push(b'\n');

        let ev_idx = rec.attr_index.filter(|&i| i < self.evs.len());
        let parsed = match ev_idx.map(|i| &self.evs[i]) {
            Some(ev) if rec.is_kernel_record() => Some(Record::parse(
                h.type_,
                h.misc,
                RawData::new(rec.body(), &[]),
                &ev.info,
                rec.endian,
            )),
            _ => None,
        };
        // The sample's (or sample_id's) cpu and time; perf's defaults when absent.
        let (cpu, time) = match &parsed {
            Some(Ok(Record::Sample(s))) => (
                s.cpu.map_or(u32::MAX, |c| c.cpu),
                s.time.unwrap_or(u64::MAX),
            ),
            Some(Ok(r)) => r
                .sample_id()
                .map_or((u32::MAX, u64::MAX), |sid: &SampleId| {
                    (
                        sid.cpu.map_or(u32::MAX, |c| c.cpu),
                        sid.time.unwrap_or(u64::MAX),
                    )
                }),
            _ if rec.is_kernel_record() => (u32::MAX, u64::MAX),
            // perf_session__process_user_event dumps with a zeroed sample.
            _ => (0, 0),
        };
        self.tstamp(out, h.type_, cpu, time);
        hash_x(out, off);
        out.extend_from_slice(b" [");
        hash_x(out, u64::from(h.size));
        out.extend_from_slice(b"]: PERF_RECORD_");
        push_str(out, record_name(h.type_));
        match parsed {
            Some(Ok(r)) => self.kernel_fields(out, &r, ev_idx),
            Some(Err(e)) => {
                push_str(out, &format!(": cannot parse: {e}\n"));
            }
            None if rec.is_kernel_record() => out.extend_from_slice(b": unknown event id\n"),
            None => user_fields(out, rec, &mut self.auxtrace_type),
        }
    }

    fn kernel_fields(&mut self, out: &mut Vec<u8>, r: &Record<'_>, ev_idx: Option<usize>) {
        match r {
            Record::Sample(s) => self.sample(out, s, ev_idx.map(|i| &self.evs[i])),
            Record::Mmap(m) => {
                map_prefix(out, m.pid, m.tid, m.addr, m.len, m.pgoff);
                out.extend_from_slice(b"]: ");
                out.push(if m.misc & PERF_RECORD_MISC_MMAP_DATA != 0 {
                    b'r'
                } else {
                    b'x'
                });
                out.push(b' ');
                push_raw(out, &m.filename);
                out.push(b'\n');
                self.add_map(m.pid, m.addr, m.len, &m.filename);
            }
            Record::Mmap2(m) => {
                map_prefix(out, m.pid, m.tid, m.addr, m.len, m.pgoff);
                match m.file_id {
                    Mmap2FileId::Inode {
                        maj,
                        min,
                        ino,
                        ino_generation,
                    } => {
                        push_str(
                            out,
                            &format!(" {maj:02x}:{min:02x} {ino} {ino_generation}]: "),
                        );
                    }
                    Mmap2FileId::BuildId {
                        build_id_size,
                        build_id,
                    } => {
                        out.extend_from_slice(b" <");
                        for b in &build_id[..usize::from(build_id_size).min(20)] {
                            push_str(out, &format!("{b:02x}"));
                        }
                        out.extend_from_slice(b">]: ");
                    }
                }
                out.push(if m.prot & 1 != 0 { b'r' } else { b'-' });
                out.push(if m.prot & 2 != 0 { b'w' } else { b'-' });
                out.push(if m.prot & 4 != 0 { b'x' } else { b'-' });
                // MAP_SHARED is 1.
                out.push(if m.flags & 1 != 0 { b's' } else { b'p' });
                out.push(b' ');
                push_raw(out, &m.filename);
                out.push(b'\n');
                self.add_map(m.pid, m.addr, m.len, &m.filename);
            }
            Record::Comm(c) => {
                if c.misc & PERF_RECORD_MISC_COMM_EXEC != 0 {
                    out.extend_from_slice(b" exec");
                }
                out.extend_from_slice(b": ");
                push_raw(out, &c.comm);
                out.push(b':');
                id_pair(out, c.pid, b'/', c.tid);
                out.push(b'\n');
                let mut name = Vec::new();
                push_raw(&mut name, &c.comm);
                self.comms.insert(c.tid, name);
            }
            Record::Task(t) => {
                out.push(b'(');
                id_pair(out, t.pid, b':', t.tid);
                out.extend_from_slice(b"):(");
                id_pair(out, t.ppid, b':', t.ptid);
                out.extend_from_slice(b")\n");
            }
            Record::Lost(l) => {
                out.extend_from_slice(b": id:");
                dec(out, l.id);
                out.extend_from_slice(b": lost:");
                dec(out, l.lost);
                out.push(b'\n');
            }
            Record::Aux(a) => {
                out.extend_from_slice(b" offset: ");
                hash_x(out, a.aux_offset);
                out.extend_from_slice(b" size: ");
                hash_x(out, a.aux_size);
                out.extend_from_slice(b" flags: ");
                hash_x(out, a.flags);
                out.extend_from_slice(b" [");
                aux_flag_letters(out, a.flags);
                out.extend_from_slice(b"]\n");
            }
            Record::ItraceStart(i) => {
                out.extend_from_slice(b" pid: ");
                dec(out, u64::from(i.pid));
                out.extend_from_slice(b" tid: ");
                dec(out, u64::from(i.tid));
                out.push(b'\n');
            }
            Record::LostSamples(l) => {
                out.extend_from_slice(b" lost ");
                dec(out, l.lost);
                out.push(b'\n');
            }
            Record::Switch(s) => {
                out.push(b' ');
                out.extend_from_slice(switch_in_out(s.misc));
                out.push(b'\n');
            }
            Record::SwitchCpuWide(s) => {
                let is_out = s.misc & PERF_RECORD_MISC_SWITCH_OUT != 0;
                out.push(b' ');
                out.extend_from_slice(switch_in_out(s.misc));
                out.extend_from_slice(if is_out {
                    b"  next pid/tid: "
                } else {
                    b"  prev pid/tid: "
                });
                sdec_right(out, i64::from(s.next_prev_pid as i32), 5);
                out.push(b'/');
                sdec_left(out, i64::from(s.next_prev_tid as i32), 5);
                out.push(b'\n');
            }
            Record::Uevent(u) => {
                out.extend_from_slice(b" type: ");
                dec(out, u64::from(u.type_));
                out.extend_from_slice(b" size: ");
                dec(out, u.data.len() as u64);
                out.push(b'\n');
            }
            _ => out.push(b'\n'),
        }
    }

    fn add_map(&mut self, pid: u32, start: u64, len: u64, name: &RawData<'_>) {
        let mut n = Vec::new();
        push_raw(&mut n, name);
        // perf names the kernel map "[kernel.kallsyms]" whatever the record's suffix.
        if n.starts_with(b"[kernel.kallsyms]") {
            n.truncate(b"[kernel.kallsyms]".len());
        }
        let maps = self.maps.entry(pid).or_default();
        maps.retain(|m| m.end <= start || m.start >= start.saturating_add(len));
        maps.push(Map {
            start,
            end: start.saturating_add(len),
            name: n,
        });
    }

    /// perf's `dump_sample`, then the thread and dso lines that
    /// `machine__resolve` prints for perf report.
    fn sample(&self, out: &mut Vec<u8>, s: &SampleRecord<'_>, ev: Option<&EvInfo>) {
        let (pid, tid) = s.tid.map_or((-1, -1), |t| {
            (i64::from(t.pid as i32), i64::from(t.tid as i32))
        });
        // perf's default period is the attr's sample_period.
        let period = s
            .period
            .unwrap_or_else(|| ev.map_or(0, |e| e.attr.sample_period));
        out.extend_from_slice(b"(IP, ");
        hash_x(out, u64::from(s.misc));
        out.extend_from_slice(b"): ");
        sdec(out, pid);
        out.push(b'/');
        sdec(out, tid);
        out.extend_from_slice(b": ");
        hash_x(out, s.ip.unwrap_or(0));
        out.extend_from_slice(b" period: ");
        dec(out, period);
        out.extend_from_slice(b" addr: ");
        hash_x(out, s.addr.unwrap_or(0));
        out.push(b'\n');
        if let Some(cc) = &s.callchain {
            out.extend_from_slice(b"... FP chain: nr:");
            dec(out, cc.len() as u64);
            out.push(b'\n');
            for (i, ip) in cc.iter().enumerate() {
                push_str(out, &format!("..... {i:2}: {ip:016x}\n"));
            }
        }
        if let Some(raw) = &s.raw {
            let is_uevent = ev.is_some_and(|e| e.name == UEVENT_EVENT_NAME);
            match uevent_from_raw(raw).filter(|_| is_uevent) {
                Some((ty, data)) => {
                    out.extend_from_slice(b". ... uevent type: ");
                    dec(out, u64::from(ty));
                    out.extend_from_slice(b" size: ");
                    dec(out, data.len() as u64);
                    out.push(b'\n');
                    hex_lines(out, &data);
                }
                None => {
                    out.extend_from_slice(b". ... raw sample: size ");
                    dec(out, raw.len() as u64);
                    out.extend_from_slice(b" bytes\n");
                    hex_lines(out, &raw.to_vec());
                }
            }
        }
        if let Some(aux) = &s.aux {
            out.extend_from_slice(b". ... AUX sample: size ");
            dec(out, aux.len() as u64);
            out.extend_from_slice(b" bytes\n");
            match aux.as_single() {
                Some(b) => hex_lines(out, b),
                None => hex_lines(out, &aux.to_vec()),
            }
        }
        if s.tid.is_some() {
            out.extend_from_slice(b" ... thread: ");
            match self.comms.get(&(tid as u32)) {
                Some(c) => out.extend_from_slice(c),
                None => {
                    out.push(b':');
                    sdec(out, tid);
                }
            }
            out.push(b':');
            sdec(out, tid);
            out.extend_from_slice(b"\n ...... dso: ");
            let ip = s.ip.unwrap_or(0);
            let hit = [pid as u32, u32::MAX].iter().find_map(|p| {
                self.maps
                    .get(p)?
                    .iter()
                    .find(|m| m.start <= ip && ip < m.end)
            });
            match hit {
                Some(m) => out.extend_from_slice(&m.name),
                None => out.extend_from_slice(b"<not found>"),
            }
            out.push(b'\n');
        }
    }
}

/// perf's letters for PERF_RECORD_AUX flags: T(runcated), O(verwrite), P(artial).
fn aux_flag_letters(out: &mut Vec<u8>, flags: u64) {
    if flags & PERF_AUX_FLAG_TRUNCATED != 0 {
        out.push(b'T');
    }
    if flags & PERF_AUX_FLAG_OVERWRITE != 0 {
        out.push(b'O');
    }
    if flags & PERF_AUX_FLAG_PARTIAL != 0 {
        out.push(b'P');
    }
}

fn switch_in_out(misc: u16) -> &'static [u8] {
    if misc & PERF_RECORD_MISC_SWITCH_OUT == 0 {
        b"IN         "
    } else if misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT == 0 {
        b"OUT        "
    } else {
        b"OUT preempt"
    }
}

/// The fields perf prints for its own record types.
fn user_fields(out: &mut Vec<u8>, rec: &RawRecord<'_>, auxtrace_type: &mut Option<u32>) {
    let parsed = match rec.user_record() {
        Some(Ok(u)) => u,
        Some(Err(e)) => {
            push_str(out, &format!(": cannot parse: {e}\n"));
            return;
        }
        None => {
            out.push(b'\n');
            return;
        }
    };
    match parsed {
        UserRecord::TimeConv(t) => {
            push_str(
                out,
                &format!(
                    "\n... Time Shift      {}\n... Time Muliplier  {}\n... Time Zero       {}\n",
                    t.time_shift, t.time_mult, t.time_zero
                ),
            );
            if let Some(x) = &t.ext {
                push_str(
                    out,
                    &format!(
                        "... Time Cycles     {}\n... Time Mask       {:#x}\n... Cap Time Zero   {}\n... Cap Time Short  {}\n",
                        x.time_cycles, x.time_mask, x.cap_user_time_zero, x.cap_user_time_short
                    ),
                );
            }
            out.extend_from_slice(b": unhandled!\n");
        }
        UserRecord::AuxtraceInfo(i) => {
            *auxtrace_type = Some(i.type_);
            out.extend_from_slice(b" type: ");
            dec(out, u64::from(i.type_));
            out.push(b'\n');
        }
        UserRecord::Auxtrace(a, payload) => auxtrace(out, &a, payload, *auxtrace_type),
        UserRecord::IdIndex(ix) => {
            out.extend_from_slice(b" nr: ");
            dec(out, ix.entries.len() as u64);
            out.push(b'\n');
            for e in &ix.entries {
                push_str(
                    out,
                    &format!(
                        " ... id: {}  idx: {}  cpu: {}  tid: {}\n",
                        e.id, e.idx, e.cpu as i64, e.tid as i64
                    ),
                );
            }
        }
        UserRecord::FinishedInit(_) => out.extend_from_slice(b": unhandled!\n"),
        _ => out.push(b'\n'),
    }
}

fn auxtrace(out: &mut Vec<u8>, a: &AuxtraceRecord, payload: &[u8], auxtrace_type: Option<u32>) {
    // perf: " size: %#lx  offset: %#lx  ref: %#lx  idx: %u  tid: %d  cpu: %d".
    out.extend_from_slice(b" size: ");
    hash_x(out, a.size);
    out.extend_from_slice(b"  offset: ");
    hash_x(out, a.offset);
    out.extend_from_slice(b"  ref: ");
    hash_x(out, a.reference);
    push_str(
        out,
        &format!(
            "  idx: {}  tid: {}  cpu: {}\n",
            a.idx, a.tid as i32, a.cpu as i32
        ),
    );
    if auxtrace_type == Some(PERF_AUXTRACE_INTEL_PT) {
        // perf's intel_pt_dump: its packet lines (writing to a Vec cannot fail).
        out.extend_from_slice(b".\n");
        let _ = perfaux_intelpt::perf_dump::dump(payload, &mut *out);
        return;
    }
    out.extend_from_slice(b".\n. ... AUX data: size ");
    dec(out, payload.len() as u64);
    out.extend_from_slice(b" bytes\n");
    hex_lines(out, payload);
}

/// The chunks of perfaux's trace section, after the records, read from the
/// section [`AUX_PIECE`] bytes at a time. A bad chunk header ends the dump
/// after the chunks before it.
pub(crate) fn dump_aux_section(
    buf: &mut Vec<u8>,
    section: &TraceSection<SectionSource>,
    out: &mut impl Write,
) -> Result<(), DumpError> {
    push_str(
        buf,
        &format!(
            "\nperfaux trace section at {:#x}: {} chunks, probe table {} bytes\n",
            section.offset(),
            section.nr_chunks(),
            section.probe_table().len()
        ),
    );
    let mut piece = Vec::new();
    for c in section.chunks() {
        let c = c.map_err(DumpError::Section)?;
        let h = &c.header;
        push_str(
            buf,
            &format!(
                "\n{} event id: {}  cpu: {}  tid: {}  aux offset: {:#x}  size: {:#x}  flags: {:#x}\n",
                h.kind.name(),
                h.event_id,
                h.cpu as i32,
                h.tid,
                h.aux_offset,
                c.size,
                h.flags
            ),
        );
        piece.resize(c.size.min(AUX_PIECE as u64) as usize, 0);
        let mut at = 0u64;
        loop {
            let n = section
                .read_chunk(&c, at, &mut piece)
                .map_err(|e| DumpError::Read(c.data_offset + at, e))?;
            if n == 0 {
                break;
            }
            hex_lines_at(buf, &piece[..n], at as usize);
            at += n as u64;
            if buf.len() >= 1 << 16 {
                out.write_all(buf)
                    .map_err(|e| DumpError::Cli(CliError::output(e)))?;
                buf.clear();
            }
        }
    }
    Ok(())
}

/// Bytes of a chunk dumped at a time (a multiple of 16: the hex lines).
const AUX_PIECE: usize = 64 * 1024;

/// Why the trace section's dump stopped.
pub(crate) enum DumpError {
    /// Writing the output.
    Cli(CliError),
    /// A bad chunk header.
    Section(AuxDataError),
    /// Reading a chunk's bytes at a file offset.
    Read(u64, std::io::Error),
}
