//! ptdump's perf_event sideband: the `--sb:*` and `--pevent*` options, and the records of the
//! sideband files printed among the packets, each once the trace's time has reached it.
//!
//! Sideband is why ptdump tracks time at all when no time column is asked for: a record's
//! place in the dump is the first timing packet whose TSC estimate is at or past the record's
//! time, which shows which mappings and tasks a stretch of trace ran with. The files are read
//! at option time, as ptdump does, so a bad file stops the command before any output.
//!
//! ptxed takes the same options and files, and applies the records to process images
//! ([`crate::ptxed_sideband`]).

use std::io::{self, Write};

use crate::args::{Input, number, parse_c_number};
use crate::pevent::{self, Body, Record};

/// What a sideband record line shows (`--sb:*`); nothing at all when every flag is off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SidebandFlags {
    /// One line per record (`--sb`, `--sb:compact`).
    pub compact: bool,
    /// A line per field (`--sb:verbose`).
    pub verbose: bool,
    /// The file's name first (`--sb:filename`).
    pub filename: bool,
    /// The record's offset in the file first (`--sb:offset`).
    pub offset: bool,
    /// The record's TSC, for records with a time (`--sb:time`).
    pub time: bool,
}

impl SidebandFlags {
    fn any(&self) -> bool {
        self.compact || self.verbose || self.filename || self.offset || self.time
    }
}

/// A perf_event sideband file, loaded, and how its records were written.
#[derive(Clone, PartialEq, Eq)]
pub struct PeventFile {
    /// The name as given, without a range suffix: errors and `--sb:filename` show it.
    pub path: String,
    pub config: pevent::Config,
    /// The file's bytes (or the range of it that was asked for).
    pub bytes: Vec<u8>,
    /// `--pevent:primary` rather than `--pevent:secondary`: a primary file is the one of the
    /// cpu the trace was recorded on, so its context switches are the trace's.
    pub primary: bool,
    pub process: ProcessConfig,
}

/// How ptxed turns a file's records into process images (the settings ptdump takes and
/// ignores).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessConfig {
    /// `--pevent:kernel-start`: where the kernel's addresses begin, which tells a trace
    /// position in the kernel, where a context switch may take effect, from one in user
    /// space. By default no address is the kernel's.
    pub kernel_start: u64,
    /// `--pevent:sysroot`: put before the names of mapped files, as it is (a directory ends
    /// in `/`).
    pub sysroot: Option<String>,
    /// `--pevent:vdso-x64`, `--pevent:vdso-x32`, `--pevent:vdso-ia32`: the file a `[vdso]`
    /// mapping stands for, by the ABI of the process's first mapped ELF file.
    pub vdso_x64: Option<String>,
    pub vdso_x32: Option<String>,
    pub vdso_ia32: Option<String>,
}

impl Default for ProcessConfig {
    fn default() -> Self {
        ProcessConfig {
            kernel_start: u64::MAX,
            sysroot: None,
            vdso_x64: None,
            vdso_x32: None,
            vdso_ia32: None,
        }
    }
}

impl std::fmt::Debug for PeventFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeventFile")
            .field("path", &self.path)
            .field("config", &self.config)
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// The sideband part of ptdump's options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SidebandOptions {
    pub show: SidebandFlags,
    /// `--sb:warn`. Accepted for ptxed's sake: sideband warnings come from applying records
    /// to a process image, which a packet dump never does.
    pub warn: bool,
    /// In command-line order.
    pub files: Vec<PeventFile>,
}

impl SidebandOptions {
    /// `--quiet` turns sideband lines off too (a later `--sb:*` turns them back on).
    pub(crate) fn quiet(&mut self) {
        self.show = SidebandFlags::default();
    }
}

/// The `--pevent:*` settings given so far, for the next `--pevent` file: each file takes
/// those in force where it appears.
#[derive(Debug, Default)]
pub(crate) struct PeventArgs {
    config: pevent::Config,
    process: ProcessConfig,
}

impl PeventArgs {
    /// Takes one sideband option (and its argument) if `opt` is one; `Ok(false)` if not.
    pub(crate) fn parse<'s>(
        &mut self,
        opt: &str,
        args: &mut impl Iterator<Item = &'s String>,
        sb: &mut SidebandOptions,
    ) -> Result<bool, String> {
        let c = &mut self.config;
        let p = &mut self.process;
        let show = &mut sb.show;
        match opt {
            "--sb" | "--sb:compact" => {
                show.compact = true;
                show.verbose = false;
            }
            "--sb:verbose" => {
                show.verbose = true;
                show.compact = false;
            }
            "--sb:filename" => show.filename = true,
            "--sb:offset" => show.offset = true,
            "--sb:time" => show.time = true,
            "--sb:warn" => sb.warn = true,
            "--pevent" | "--pevent:primary" | "--pevent:secondary" => {
                let arg = args.next().ok_or(format!("{opt}: missing argument"))?;
                let input = Input::parse(arg)?;
                let bytes = load(&input)?;
                sb.files.push(PeventFile {
                    path: input.path,
                    config: c.clone(),
                    bytes,
                    primary: opt != "--pevent:secondary",
                    process: p.clone(),
                });
            }
            "--pevent:sample-type" => c.sample_type = number(opt, args.next())?,
            "--pevent:sample-config" => {
                let arg = args.next().ok_or(format!("{opt}: missing argument"))?;
                let bad = || format!("{opt}: bad sample config {arg}: expected ID:SAMPLE_TYPE");
                let (id, st) = arg.split_once(':').ok_or_else(bad)?;
                let id = parse_c_number(id).ok_or_else(bad)?;
                let st = parse_c_number(st).ok_or_else(bad)?;
                c.sample_types.push((id, st));
            }
            "--pevent:time-zero" => c.time_zero = number(opt, args.next())?,
            "--pevent:time-shift" => {
                // perf's shift is well below 64; larger ones would shift every time to 0.
                c.time_shift = number::<u8>(opt, args.next())?;
                if c.time_shift >= 64 {
                    return Err(format!("{opt}: value too big"));
                }
            }
            "--pevent:time-mult" => c.time_mult = number(opt, args.next())?,
            "--pevent:tsc-offset" => c.tsc_offset = number(opt, args.next())?,
            "--pevent:kernel-start" => p.kernel_start = number(opt, args.next())?,
            "--pevent:sysroot" | "--pevent:vdso-x64" | "--pevent:vdso-x32"
            | "--pevent:vdso-ia32" => {
                let v = args.next().ok_or(format!("{opt}: missing argument"))?;
                let slot = match opt {
                    "--pevent:sysroot" => &mut p.sysroot,
                    "--pevent:vdso-x64" => &mut p.vdso_x64,
                    "--pevent:vdso-x32" => &mut p.vdso_x32,
                    _ => &mut p.vdso_ia32,
                };
                *slot = Some(v.clone());
            }
            // The kernel's code only matters to building a process image, which ptxed does
            // (and takes this option before it comes here).
            "--pevent:kcore" => {
                args.next().ok_or(format!("{opt}: missing argument"))?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The range of a sideband file. Unlike the trace's, a range end past the file's end is cut
/// to it, and a start at the end gives an empty stream.
fn load(input: &Input) -> Result<Vec<u8>, String> {
    use std::io::{Read, Seek, SeekFrom};
    let path = &input.path;
    let fail = |e: io::Error| format!("error loading {path}: {e}");
    let mut f = std::fs::File::open(path).map_err(fail)?;
    let size = f.metadata().map_err(fail)?.len();
    if input.from > size {
        return Err(format!(
            "error loading {path}: bad offset {:#x}",
            input.from
        ));
    }
    let end = input.to.map_or(size, |to| to.min(size));
    f.seek(SeekFrom::Start(input.from)).map_err(fail)?;
    let mut buf = Vec::new();
    f.take(end - input.from)
        .read_to_end(&mut buf)
        .map_err(fail)?;
    Ok(buf)
}

/// One file's records, with the next one due.
struct Channel<'a> {
    file: &'a PeventFile,
    records: pevent::Reader<'a, 'a>,
    next: Option<Record<'a>>,
}

impl Channel<'_> {
    /// A record without a time is due at once.
    fn due(&self) -> u64 {
        self.next.and_then(|r| r.tsc).unwrap_or(0)
    }
}

/// The sideband files being dumped: each file's next record, in the order they fall due.
pub(crate) struct Session<'a> {
    show: SidebandFlags,
    channels: Vec<Channel<'a>>,
    /// Channels with a record due, by its TSC. A channel goes in before those with an equal
    /// TSC, so one file's records at one time print together, and at the start the files
    /// given first print first.
    queue: Vec<usize>,
}

impl<'a> Session<'a> {
    pub(crate) fn new(o: &'a SidebandOptions) -> Self {
        Session {
            show: o.show,
            channels: o
                .files
                .iter()
                .map(|file| Channel {
                    file,
                    records: pevent::Reader::new(&file.bytes, &file.config),
                    next: None,
                })
                .collect(),
            queue: Vec::new(),
        }
    }

    /// Reads each file's first record; a file whose first record is bad is reported and left
    /// out.
    pub(crate) fn start(&mut self, out: &mut impl Write) -> io::Result<()> {
        for i in (0..self.channels.len()).rev() {
            if self.advance(i, out)? {
                self.enqueue(i);
            }
        }
        Ok(())
    }

    /// Moves channel `i` to its next record: false at the end of its file or at a bad record
    /// (reported, and the rest of that file cannot be found).
    fn advance(&mut self, i: usize, out: &mut impl Write) -> io::Result<bool> {
        let ch = &mut self.channels[i];
        ch.next = None;
        match ch.records.next() {
            Some(Ok(r)) => {
                ch.next = Some(r);
                Ok(true)
            }
            Some(Err(e)) => {
                writeln!(
                    out,
                    "[{}:{:016x} sideband error: {}]",
                    ch.file.path,
                    e.offset,
                    e.kind.libipt_str()
                )?;
                Ok(false)
            }
            None => Ok(false),
        }
    }

    fn enqueue(&mut self, i: usize) {
        let due = self.channels[i].due();
        let at = self
            .queue
            .iter()
            .position(|&j| due <= self.channels[j].due())
            .unwrap_or(self.queue.len());
        self.queue.insert(at, i);
    }

    /// Prints every record due at or before `tsc`, in order.
    pub(crate) fn dump_until(&mut self, tsc: u64, out: &mut impl Write) -> io::Result<()> {
        while let Some(&i) = self.queue.first() {
            if tsc < self.channels[i].due() {
                break;
            }
            self.queue.remove(0);
            if let Some(r) = self.channels[i].next {
                print_record(out, self.show, &self.channels[i].file.path, &r)?;
            }
            if self.advance(i, out)? {
                self.enqueue(i);
            }
        }
        Ok(())
    }
}

/// A record as ptdump prints it: the prefixes the flags ask for, the record in the compact
/// or the verbose form, its sample fields, and a newline unless every flag is off.
pub(crate) fn print_record(
    out: &mut impl Write,
    show: SidebandFlags,
    path: &str,
    r: &Record<'_>,
) -> io::Result<()> {
    let mut l: Vec<u8> = Vec::with_capacity(128);
    match (show.filename, show.offset) {
        (true, true) => write!(l, "{path}:{:016x}  ", r.offset)?,
        (true, false) => write!(l, "{path}  ")?,
        (false, true) => write!(l, "{:016x}  ", r.offset)?,
        (false, false) => {}
    }
    if show.time
        && let Some(tsc) = r.tsc
    {
        write!(l, "{tsc:016x}  ")?;
    }
    if show.compact {
        compact(&mut l, r)?;
    }
    if show.verbose {
        verbose(&mut l, r)?;
    }
    if show.any() {
        l.push(b'\n');
    }
    out.write_all(&l)
}

fn suffix(on: bool, yes: &'static str, no: &'static str) -> &'static str {
    if on { yes } else { no }
}

fn compact(l: &mut Vec<u8>, r: &Record<'_>) -> io::Result<()> {
    let out_in = suffix(r.misc & pevent::MISC_SWITCH_OUT != 0, "OUT", "IN");
    match r.body {
        Body::Mmap {
            pid,
            tid,
            addr,
            len,
            pgoff,
            filename,
        } => {
            write!(
                l,
                "PERF_RECORD_MMAP  {pid:x}/{tid:x}, {addr:x}, {len:x}, {pgoff:x}, "
            )?;
            l.extend_from_slice(filename);
        }
        Body::Lost { id, lost } => write!(l, "PERF_RECORD_LOST  {id:x}, {lost:x}")?,
        Body::Comm { pid, tid, comm } => {
            let exec = suffix(r.misc & pevent::MISC_COMM_EXEC != 0, ".EXEC", "");
            write!(l, "PERF_RECORD_COMM{exec}  {pid:x}/{tid:x}, ")?;
            l.extend_from_slice(comm);
        }
        Body::Exit(t) => write!(
            l,
            "PERF_RECORD_EXIT  {:x}/{:x}, {:x}/{:x}, {:x}",
            t.pid, t.tid, t.ppid, t.ptid, t.time
        )?,
        Body::Fork(t) => write!(
            l,
            "PERF_RECORD_FORK  {:x}/{:x}, {:x}/{:x}, {:x}",
            t.pid, t.tid, t.ppid, t.ptid, t.time
        )?,
        Body::Throttle(t) => write!(
            l,
            "PERF_RECORD_THROTTLE  {:x}, {:x}, {:x}",
            t.time, t.id, t.stream_id
        )?,
        Body::Unthrottle(t) => write!(
            l,
            "PERF_RECORD_UNTHROTTLE  {:x}, {:x}, {:x}",
            t.time, t.id, t.stream_id
        )?,
        Body::Mmap2 {
            pid,
            tid,
            addr,
            len,
            pgoff,
            maj,
            min,
            ino,
            ino_generation,
            prot,
            flags,
            filename,
        } => {
            write!(
                l,
                "PERF_RECORD_MMAP2  {pid:x}/{tid:x}, {addr:x}, {len:x}, {pgoff:x}, {maj:x}, \
                 {min:x}, {ino:x}, {ino_generation:x}, {prot:x}, {flags:x}, "
            )?;
            l.extend_from_slice(filename);
        }
        Body::Aux {
            offset,
            size,
            flags,
        } => {
            let t = suffix(flags & pevent::AUX_FLAG_TRUNCATED != 0, ".TRUNCATED", "");
            write!(l, "PERF_RECORD_AUX{t}  {offset:x}, {size:x}, {flags:x}")?;
        }
        Body::ItraceStart { pid, tid } => write!(l, "PERF_RECORD_ITRACE_START  {pid:x}/{tid:x}")?,
        Body::LostSamples { lost } => write!(l, "PERF_RECORD_LOST_SAMPLES  {lost:x}")?,
        Body::Switch => write!(l, "PERF_RECORD_SWITCH.{out_in}")?,
        Body::SwitchCpuWide { pid, tid } => {
            write!(l, "PERF_RECORD_SWITCH_CPU_WIDE.{out_in}  {pid:x}/{tid:x}")?
        }
        Body::Other => write!(l, "UNKNOWN ({:x}, {:x})", r.kind, r.misc)?,
    }
    let s = &r.samples;
    l.extend_from_slice(b"  {");
    if let Some((pid, tid)) = s.pid_tid {
        write!(l, " {pid:x}/{tid:x}")?;
    }
    if let Some(time) = s.time {
        write!(l, " {time:x}")?;
    }
    if let Some(id) = s.id {
        write!(l, " {id:x}")?;
    }
    if let Some(cpu) = s.cpu {
        write!(l, " cpu-{cpu:x}")?;
    }
    if let Some(v) = s.stream_id {
        write!(l, " {v:x}")?;
    }
    if let Some(v) = s.identifier {
        write!(l, " {v:x}")?;
    }
    l.extend_from_slice(b" }");
    Ok(())
}

fn verbose(l: &mut Vec<u8>, r: &Record<'_>) -> io::Result<()> {
    let out = r.misc & pevent::MISC_SWITCH_OUT != 0;
    let task = |l: &mut Vec<u8>, name: &str, t: &pevent::Task| {
        write!(
            l,
            "{name}\n  pid: {:x}\n  ppid: {:x}\n  tid: {:x}\n  ptid: {:x}\n  time: {:x}",
            t.pid, t.ppid, t.tid, t.ptid, t.time
        )
    };
    let throttle = |l: &mut Vec<u8>, name: &str, t: &pevent::Throttle| {
        write!(
            l,
            "{name}\n  time: {:x}\n  id: {:x}\n  stream_id: {:x}",
            t.time, t.id, t.stream_id
        )
    };
    match r.body {
        Body::Mmap {
            pid,
            tid,
            addr,
            len,
            pgoff,
            filename,
        } => {
            write!(
                l,
                "PERF_RECORD_MMAP\n  pid: {pid:x}\n  tid: {tid:x}\n  addr: {addr:x}\n  \
                 len: {len:x}\n  pgoff: {pgoff:x}\n  filename: "
            )?;
            l.extend_from_slice(filename);
        }
        Body::Lost { id, lost } => write!(l, "PERF_RECORD_LOST\n  id: {id:x}\n  lost: {lost:x}")?,
        Body::Comm { pid, tid, comm } => {
            let exec = suffix(r.misc & pevent::MISC_COMM_EXEC != 0, ".EXEC", "");
            write!(
                l,
                "PERF_RECORD_COMM{exec}\n  pid: {pid:x}\n  tid: {tid:x}\n  comm: "
            )?;
            l.extend_from_slice(comm);
        }
        Body::Exit(t) => task(l, "PERF_RECORD_EXIT", &t)?,
        Body::Fork(t) => task(l, "PERF_RECORD_FORK", &t)?,
        Body::Throttle(t) => throttle(l, "PERF_RECORD_THROTTLE", &t)?,
        Body::Unthrottle(t) => throttle(l, "PERF_RECORD_UNTHROTTLE", &t)?,
        Body::Mmap2 {
            pid,
            tid,
            addr,
            len,
            pgoff,
            maj,
            min,
            ino,
            ino_generation,
            prot,
            flags,
            filename,
        } => {
            write!(
                l,
                "PERF_RECORD_MMAP2\n  pid: {pid:x}\n  tid: {tid:x}\n  addr: {addr:x}\n  \
                 len: {len:x}\n  pgoff: {pgoff:x}\n  maj: {maj:x}\n  min: {min:x}\n  \
                 ino: {ino:x}\n  ino_generation: {ino_generation:x}\n  prot: {prot:x}\n  \
                 flags: {flags:x}\n  filename: "
            )?;
            l.extend_from_slice(filename);
        }
        Body::Aux {
            offset,
            size,
            flags,
        } => {
            let t = suffix(flags & pevent::AUX_FLAG_TRUNCATED != 0, ".TRUNCATED", "");
            write!(
                l,
                "PERF_RECORD_AUX{t}\n  aux offset: {offset:x}\n  aux size: {size:x}\n  \
                 flags: {flags:x}"
            )?;
        }
        Body::ItraceStart { pid, tid } => write!(
            l,
            "PERF_RECORD_ITRACE_START\n  pid: {pid:x}\n  tid: {tid:x}"
        )?,
        Body::LostSamples { lost } => write!(l, "PERF_RECORD_LOST_SAMPLES\n  lost: {lost:x}")?,
        Body::Switch => write!(l, "PERF_RECORD_SWITCH.{}", suffix(out, "OUT", "IN"))?,
        Body::SwitchCpuWide { pid, tid } => {
            let (dir, who) = if out { ("OUT", "next") } else { ("IN", "prev") };
            write!(
                l,
                "PERF_RECORD_SWITCH_CPU_WIDE.{dir}\n  {who} pid: {pid:x}\n  {who} tid: {tid:x}"
            )?;
        }
        Body::Other => write!(l, "UNKNOWN\n  type: {:x}\n  misc: {:x}", r.kind, r.misc)?,
    }
    let s = &r.samples;
    if let Some((pid, tid)) = s.pid_tid {
        write!(l, "\n  pid: {pid:x}\n  tid: {tid:x}")?;
    }
    if let Some(v) = s.time {
        write!(l, "\n  time: {v:x}")?;
    }
    if let Some(v) = s.id {
        write!(l, "\n  id: {v:x}")?;
    }
    if let Some(v) = s.cpu {
        write!(l, "\n  cpu: {v:x}")?;
    }
    if let Some(v) = s.stream_id {
        write!(l, "\n  stream id: {v:x}")?;
    }
    if let Some(v) = s.identifier {
        write!(l, "\n  identifier: {v:x}")?;
    }
    Ok(())
}
