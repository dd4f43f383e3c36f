//! `perfaux record -- ./prog`: traces another program through perfaux-preload (the runtime
//! preloaded into it, the memory owned here) and writes the perf.data the built-in workload's
//! recording writes: the trace event's attr and ids, COMM and MMAP2 records for the program's
//! threads and objects (from what the runtime reported, since /proc/PID/maps is gone once a
//! crashed program is reaped), the drained data-area records, and the trace bytes with a probe
//! table that names every function from the ELF symbol tables.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::BufWriter;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use perfaux_abi::consts::ext::PERF_RECORD_UEVENT;
use perfaux_abi::consts::*;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::Record;
use perfaux_abi::records::{CommRecord, EncodeRecord, Mmap2FileId, Mmap2Record};
use perfaux_abi::sample_id::{CpuRes, PidTid, SampleId};
use perfaux_abi::{Endianness, PerfEventHeader};
use perfaux_perfdata::Feature;
use perfaux_perfdata::writer::{PerfDataWriter, WriterEvent, WriterOptions};
use perfaux_preload::host::{Drained, LoadedObject, Options, ProgramSession};
use perfaux_preload::symbols::Symbolizer;
use perfaux_swtrace::{ProbeInfo, ProbeTable};

use super::attrs::attrs_for;
use super::spill::Spill;
use super::{DEFAULT_AUX_SIZE, RecordSummary};
use crate::auxdata::{AuxChunk, AuxData, ChunkKind, PERFAUX_FEATURE_BIT};
use crate::cli::{RecordArgs, parse_mmap_pages};
use crate::error::CliError;
use crate::events::resolve_events;
use crate::uevent::uevent_sample;

/// Set by the SIGUSR2 handler in -S mode: take a snapshot.
static SNAPSHOT_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigusr2(_: libc::c_int) {
    SNAPSHOT_REQUESTED.store(true, Ordering::Release);
}

fn install_sigusr2() -> Result<(), CliError> {
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    let r = unsafe { libc::signal(libc::SIGUSR2, on_sigusr2 as *const () as libc::sighandler_t) };
    if r == libc::SIG_ERR {
        return Err(CliError::msg("cannot install the SIGUSR2 handler for -S"));
    }
    Ok(())
}

/// Threads of the program that can be traced at once.
const SLOTS: usize = 64;
/// Data pages per traced thread (its AUX records and ITRACE_START).
const DATA_PAGES: usize = 16;

/// How the traced program ended.
#[derive(Debug, Clone, Copy)]
pub struct ProgramEnd(pub ExitStatus);

impl ProgramEnd {
    /// The exit code `perfaux record` leaves with: the program's, or 128 + the signal that
    /// killed it (as a shell reports it).
    pub fn exit_code(&self) -> u8 {
        match (self.0.code(), self.0.signal()) {
            (Some(c), _) => c as u8,
            (None, Some(s)) => 128u8.wrapping_add(s as u8),
            _ => 1,
        }
    }

    /// perf's line for a program a signal ended, if one did.
    pub fn signal_line(&self, prog: &str) -> Option<String> {
        let s = self.0.signal()?;
        let core = if self.0.core_dumped() {
            " (core dumped)"
        } else {
            ""
        };
        Some(format!(
            "perfaux record: {prog} terminated by signal {s} ({}){core}",
            signal_name(s)
        ))
    }
}

/// The signal's name, as `kill -l` gives it.
pub fn signal_name(sig: i32) -> String {
    const NAMES: [&str; 32] = [
        "0",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match usize::try_from(sig).ok().and_then(|i| NAMES.get(i)) {
        Some(n) if sig > 0 => (*n).to_string(),
        _ => format!("SIGRTMIN+{}", sig - libc::SIGRTMIN()),
    }
}

/// The runtime, built by build.rs and carried in the binary.
static RUNTIME: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libperfaux_preload.so"));

/// The runtime to preload: `PERFAUX_PRELOAD_LIB` if set, else the copy carried in this binary,
/// written to a memfd that the program's loader opens as /proc/PID/fd/N of this process (the
/// fd is kept for the recording's life).
pub fn find_runtime() -> Result<(PathBuf, Option<std::os::fd::OwnedFd>), CliError> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    if let Some(p) = std::env::var_os("PERFAUX_PRELOAD_LIB") {
        return Ok((PathBuf::from(p), None));
    }
    let err =
        |e: &dyn std::fmt::Display| CliError::msg(format!("record: the preload runtime: {e}"));
    let fd = rustix::fs::memfd_create("libperfaux_preload.so", rustix::fs::MemfdFlags::CLOEXEC)
        .map_err(|e| err(&e))?;
    let mut f = File::from(fd);
    f.write_all(RUNTIME).map_err(|e| err(&e))?;
    let path = PathBuf::from(format!("/proc/{}/fd/{}", std::process::id(), f.as_raw_fd()));
    Ok((path, Some(f.into())))
}

/// The message for a program that never called a hook.
pub const NO_HOOKS: &str = "it called no instrumentation hook: build it with -finstrument-functions \
     (gcc/clang), or -pg, or -pg -mfentry, so that perfaux can trace its functions";

/// The "not possible" line for `-p PID` and `-a`, if either is given.
pub fn refuse_attach(a: &RecordArgs) -> Option<String> {
    let how = "perfaux traces a program through the hooks its compiler put in \
               (-finstrument-functions, -pg) and a runtime loaded when it starts (LD_PRELOAD), \
               with no kernel PMU";
    if let Some(pid) = &a.pid {
        return Some(format!(
            "record: -p {pid}: not possible: {how}, so a process that is already running has \
             no runtime to write its trace; start it under perfaux instead: \
             perfaux record -- ./prog ARGS"
        ));
    }
    a.all_cpus.then(|| {
        format!(
            "record: -a: not possible: {how}, so it cannot see other processes; trace each \
             program by starting it under perfaux: perfaux record -- ./prog ARGS"
        )
    })
}

/// Records `a.command`; returns the summary and how the program ended.
pub fn record_program(
    a: &RecordArgs,
    verbose: bool,
) -> Result<(RecordSummary, ProgramEnd), CliError> {
    if a.aux_sample.is_some() {
        return Err(CliError::msg(
            "record: --aux-sample is not available yet for a program (the full trace and -S are)",
        ));
    }
    let overwrite = match a.snapshot.as_deref() {
        None => false,
        Some("" | "e") => true,
        Some(other) => {
            return Err(CliError::msg(format!(
                "-S/--snapshot: unknown option '{other}' (only 'e', snapshot at exit)"
            )));
        }
    };
    let texts = if a.events.is_empty() {
        vec!["swtrace//".to_string()]
    } else {
        a.events.clone()
    };
    let events = resolve_events(&texts, None).map_err(CliError::msg)?;
    if events.len() != 1
        || !matches!(events[0].kind, crate::events::EventKind::SwTrace)
        || events[0].aux_action != Default::default()
    {
        return Err(CliError::msg(
            "record: a program is traced with swtrace// alone for now (other events and aux-action come later)",
        ));
    }
    let attrs = attrs_for(&events[0]).map_err(CliError::msg)?;
    let uevent_ev = resolve_events(&["uevent".to_string()], None).map_err(CliError::msg)?;
    let uevent_attrs = attrs_for(&uevent_ev[0]).map_err(CliError::msg)?;
    let uev = UeventConv {
        open: RecordParseInfo::new(&uevent_attrs.open),
        file: RecordParseInfo::new(&uevent_attrs.file),
    };
    let page = perfaux_core::page_size() as u64;
    let aux_size = match &a.mmap_pages {
        Some(m) => parse_mmap_pages(m, page)?.1,
        None => None,
    }
    .unwrap_or(DEFAULT_AUX_SIZE);
    let (runtime, _runtime_fd) = find_runtime()?;
    let opts = Options {
        runtime: runtime.clone(),
        slots: SLOTS,
        data_pages: DATA_PAGES,
        aux_pages: (aux_size / page) as usize,
        overwrite,
    };
    let mut session =
        ProgramSession::new(&opts).map_err(|e| CliError::msg(format!("record: {e}")))?;
    let argv: Vec<OsString> = a.command.iter().map(OsString::from).collect();
    let prog = a.command[0].clone();
    let pid = session
        .spawn(&argv, &runtime)
        .map_err(|e| CliError::msg(format!("record: cannot run '{prog}': {e}")))?;
    if verbose {
        eprintln!("perfaux record: tracing {prog} (pid {pid})");
    }
    let mut spill = Spill::create(&a.output)?;
    let mut chunks: Vec<AuxChunk> = Vec::new();
    let mut summary = RecordSummary::default();
    if overwrite {
        install_sigusr2()?;
    }
    let status = loop {
        let st = session
            .try_wait()
            .map_err(|e| CliError::msg(format!("record: wait: {e}")))?;
        // After the program ended, one last pass takes everything it wrote.
        let n = drain(&mut session, &mut spill, &mut chunks, &mut summary, &uev)?;
        if n > 0 {
            summary.wakeups += 1;
            spill.push(&FINISHED_ROUND)?;
        }
        if overwrite && (st.is_some() || SNAPSHOT_REQUESTED.swap(false, Ordering::AcqRel)) {
            // -S: on SIGUSR2, and once the program ended (exit, crash or kill), the newest
            // trace of every thread; the threads are never stopped for it.
            let n = drain_with(&mut spill, &mut chunks, &mut summary, &uev, |sink| {
                session.snapshot(sink)
            })?;
            if n > 0 {
                summary.snapshots += 1;
            }
        }
        if let Some(st) = st {
            let n = drain_with(&mut spill, &mut chunks, &mut summary, &uev, |sink| {
                session.drain_unpublished(sink)
            })?;
            if n > 0 {
                summary.wakeups += 1;
            }
            break st;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let end = ProgramEnd(status);
    let threads = session.threads();
    if threads.is_empty() {
        let _ = std::fs::remove_file(&a.output);
        let how = end
            .signal_line(&prog)
            .map(|l| format!(" ({l})"))
            .unwrap_or_default();
        return Err(CliError::msg(format!(
            "record: nothing traced in '{prog}'{how}: {NO_HOOKS}"
        )));
    }
    let objects = session.objects();
    let syms = Symbolizer::new(&objects);
    let table = ProbeTable::from_entries(session.probes().into_iter().map(|(id, addr)| {
        ProbeInfo {
            id,
            name: syms
                .name(addr)
                .map_or_else(|| format!("{addr:#x}"), str::to_owned),
            addr,
            file: String::new(),
            line: 0,
        }
    }));
    let info = RecordParseInfo::new(&attrs.file);
    let endian = Endianness::NATIVE;
    let comm = std::path::Path::new(&prog)
        .file_name()
        .map_or(prog.clone(), |n| n.to_string_lossy().into_owned());
    let mut synth: Vec<Vec<u8>> = Vec::new();
    let mut tids: Vec<(u32, u32)> = vec![(pid, pid)];
    tids.extend(
        threads
            .iter()
            .filter(|t| t.tid != pid)
            .map(|t| (t.pid, t.tid)),
    );
    for (p, t) in tids {
        synth.push(comm_record(p, t, &comm, &info, endian)?);
    }
    for o in &objects {
        synth.push(mmap2_record(pid, o, &info, endian)?);
    }
    for c in &mut chunks {
        if let Some(t) = threads.iter().find(|t| t.slot as u64 == c.event_id) {
            c.event_id = t.event_id;
            c.tid = t.tid;
        }
    }
    let ids: Vec<u64> = threads.iter().map(|t| t.event_id).collect();
    let uevent_ids: Vec<u64> = threads
        .iter()
        .map(|t| t.uevent_id)
        .filter(|&i| i != 0)
        .collect();
    let section = AuxData {
        probe_table: table.to_bytes(),
        chunks,
    };
    let wopts = WriterOptions {
        endian,
        raw_features: BTreeMap::from([(Feature(PERFAUX_FEATURE_BIT), section.to_bytes())]),
        ..WriterOptions::default()
    };
    let out = &a.output;
    let f = File::create(out)
        .map_err(|e| CliError::msg(format!("{}: cannot create: {e}", out.display())))?;
    let mut w = PerfDataWriter::new(
        BufWriter::with_capacity(1 << 20, f),
        vec![
            WriterEvent {
                attr: attrs.file,
                ids,
                name: attrs.name.clone(),
            },
            WriterEvent {
                attr: uevent_attrs.file,
                ids: uevent_ids,
                name: uevent_attrs.name.clone(),
            },
        ],
        wopts,
    )
    .map_err(|e| CliError::file(out, e))?;
    for r in &synth {
        w.write_record(r).map_err(|e| CliError::file(out, e))?;
    }
    summary.records += synth.len() as u64;
    spill.replay(|rec| {
        w.write_record(rec)
            .map(|_| ())
            .map_err(|e| CliError::file(out, e))
    })?;
    w.finish().map_err(|e| CliError::file(out, e))?;
    summary.file_size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    Ok((summary, end))
}

const FINISHED_ROUND: [u8; 8] = [PERF_RECORD_FINISHED_ROUND as u8, 0, 0, 0, 0, 0, 8, 0];

/// One drain pass; AUX chunks carry the slot index in `event_id` until the threads are known.
fn drain(
    session: &mut ProgramSession,
    spill: &mut Spill,
    chunks: &mut Vec<AuxChunk>,
    summary: &mut RecordSummary,
    uev: &UeventConv,
) -> Result<u64, CliError> {
    drain_with(spill, chunks, summary, uev, |sink| session.drain(sink))
}

/// Turns the program's PERF_RECORD_UEVENTs into the BPF-output samples perf reads (as the
/// built-in workload's recording does, crate::uevent).
struct UeventConv {
    open: RecordParseInfo,
    file: RecordParseInfo,
}

impl UeventConv {
    /// The record to write for `rec` from a data area: itself, or the uevent's sample.
    fn convert(&self, rec: &[u8]) -> Result<Option<Vec<u8>>, CliError> {
        let endian = Endianness::NATIVE;
        let mut h8 = [0u8; 8];
        h8.copy_from_slice(&rec[..8]);
        let h = PerfEventHeader::parse(h8, endian);
        if h.type_ != PERF_RECORD_UEVENT {
            return Ok(None);
        }
        let body = RawData::new(&rec[8..], &[]);
        let bad = |e: &dyn std::fmt::Display| {
            CliError::msg(format!("a uevent record from the program: {e}"))
        };
        let Record::Uevent(u) =
            Record::parse(h.type_, h.misc, body, &self.open, endian).map_err(|e| bad(&e))?
        else {
            return Err(bad(&"not a uevent"));
        };
        uevent_sample(&u, &self.file, endian)
            .map(Some)
            .map_err(|e| bad(&e))
    }
}

type Sink<'s> = dyn FnMut(Drained<'_>) -> std::io::Result<()> + 's;

/// Runs one of the session's drains with the sink that spills records and keeps AUX chunks.
fn drain_with(
    spill: &mut Spill,
    chunks: &mut Vec<AuxChunk>,
    summary: &mut RecordSummary,
    uev: &UeventConv,
    run: impl FnOnce(&mut Sink<'_>) -> std::io::Result<u64>,
) -> Result<u64, CliError> {
    let mut err: Option<CliError> = None;
    let n = run(&mut |d| {
        let r = match d {
            Drained::Record { bytes, .. } => {
                summary.records += 1;
                if bytes.len() >= 8
                    && u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
                        == PERF_RECORD_LOST
                {
                    summary.lost += 1;
                }
                match uev.convert(bytes) {
                    Ok(Some(sample)) => spill.push(&sample),
                    Ok(None) => spill.push(bytes),
                    Err(e) => Err(e),
                }
            }
            Drained::Aux { .. } | Drained::Snapshot { .. } => {
                let (slot, offset, kind, flags, bytes) = match d {
                    Drained::Snapshot {
                        slot,
                        offset,
                        wrapped,
                        bytes,
                    } => {
                        let flags = if wrapped {
                            PERF_AUX_FLAG_OVERWRITE as u32
                        } else {
                            0
                        };
                        (slot, offset, ChunkKind::Snapshot, flags, bytes)
                    }
                    Drained::Aux {
                        slot,
                        offset,
                        bytes,
                    } => (slot, offset, ChunkKind::Trace, 0, bytes),
                    Drained::Record { bytes, .. } => (0, 0, ChunkKind::Trace, 0, bytes),
                };
                summary.aux_bytes += bytes.len() as u64;
                chunks.push(AuxChunk {
                    event_id: slot as u64,
                    cpu: u32::MAX,
                    tid: 0,
                    aux_offset: offset,
                    kind,
                    flags,
                    bytes: bytes.to_vec(),
                });
                Ok(())
            }
        };
        r.map_err(|e| {
            let m = e.to_string();
            err = Some(e);
            std::io::Error::other(m)
        })
    })
    .map_err(|e| {
        err.take()
            .unwrap_or_else(|| CliError::msg(format!("record: {e}")))
    })?;
    Ok(n)
}

fn sid(pid: u32, tid: u32) -> SampleId {
    SampleId {
        tid: Some(PidTid { pid, tid }),
        time: Some(0),
        cpu: Some(CpuRes { cpu: 0, res: 0 }),
        identifier: Some(0),
        ..Default::default()
    }
}

fn comm_record(
    pid: u32,
    tid: u32,
    comm: &str,
    info: &RecordParseInfo,
    endian: Endianness,
) -> Result<Vec<u8>, CliError> {
    CommRecord {
        misc: 0,
        pid,
        tid,
        comm: RawData::new(comm.as_bytes(), &[]),
        sample_id: sid(pid, tid),
    }
    .to_vec(info, endian)
    .map_err(|e| CliError::msg(format!("synthesizing COMM: {e}")))
}

fn mmap2_record(
    pid: u32,
    o: &LoadedObject,
    info: &RecordParseInfo,
    endian: Endianness,
) -> Result<Vec<u8>, CliError> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let (maj, min, ino) = std::fs::metadata(&o.path)
        .map(|m| (libc::major(m.dev()), libc::minor(m.dev()), m.ino()))
        .unwrap_or((0, 0, 0));
    Mmap2Record {
        misc: PERF_RECORD_MISC_USER,
        pid,
        tid: pid,
        addr: o.start,
        len: o.len,
        pgoff: o.pgoff,
        file_id: Mmap2FileId::Inode {
            maj,
            min,
            ino,
            ino_generation: 0,
        },
        prot: 5,
        flags: 2,
        filename: RawData::new(o.path.as_os_str().as_bytes(), &[]),
        sample_id: sid(pid, pid),
    }
    .to_vec(info, endian)
    .map_err(|e| CliError::msg(format!("synthesizing MMAP2: {e}")))
}
