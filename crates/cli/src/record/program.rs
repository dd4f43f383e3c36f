//! `perfaux record -- ./prog`: traces another program through perfaux-preload (the runtime
//! preloaded into it, the memory owned here) with the same [`Recorder`] as the built-in
//! workload: each thread slot the program claims becomes one of the recorder's rings
//! ([`super::program_ring::SlotRing`]), so the file is made as every recording's is (a
//! temporary renamed at the end, `<output>.old`, trace bytes streamed, snapshots with their
//! wrapped flag). COMM and MMAP2 records for the program's threads and objects come from what
//! the runtime reported (since /proc/PID/maps is gone once a crashed program is reaped), and a
//! probe table names every function from the ELF symbol tables. A child the program forks is
//! traced in slots of its own (perf's inherit default): its first thread brings its
//! PERF_RECORD_FORK, its objects their own MMAP2s; the recording ends when the program ends,
//! as perf's does, with what still-running children published by then.
//!
//! `-e` takes what the built-in workload's record takes, around one `swtrace//` event
//! ([`super::program_events`]): the recorder writes the events into the control area's event
//! table, every traced thread opens them in its group and buffer as `perf record` would and
//! reports their ids, and `probe:FUNC` is resolved by the runtime in each object the program
//! loads (its load addresses are known only there); a FUNC found nowhere is an error naming
//! it, and the file is not written.

use std::ffi::OsString;
use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use perfaux_abi::Endianness;
use perfaux_abi::consts::*;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::{
    CommRecord, EncodeRecord, Mmap2FileId, Mmap2Record, TaskKind, TaskRecord,
};
use perfaux_abi::sample_id::{CpuRes, PidTid, SampleId};
use perfaux_preload::host::{LoadedObject, Options, ProgramSession, TracedThread};
use perfaux_preload::shared::{MAX_OBJECTS, OBJECT_WAIT};
use perfaux_preload::symbols::Symbolizer;
use perfaux_recorder::{Output, Recorder, RecorderOptions, default_watermarks};
use perfaux_swtrace::{ProbeInfo, ProbeTable};

use super::process_ends::{ProcessEnds, ProcessKey};
use super::program_events::{open_error, program_events, unfound, unfound_line};
use super::program_ring::{self, SlotRing};
use super::session::{is_stdout, rec_err};
use super::{DEFAULT_AUX_SIZE, DEFAULT_DATA_SIZE, RecordSummary, aux_sample_size, signals};
use crate::cli::{RecordArgs, parse_mmap_pages};
use crate::error::CliError;
use crate::events::resolve_events;

/// Threads of the program (of all its processes) that can be traced in one recording: a slot
/// serves one thread for the whole recording (later ones are counted and said).
const SLOTS: usize = 64;

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
static RUNTIME: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libperfaux_runtime.so"));

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
    let fd = rustix::fs::memfd_create("libperfaux_runtime.so", rustix::fs::MemfdFlags::CLOEXEC)
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
    if is_stdout(&a.output) {
        return Err(CliError::msg(
            "record: -o - cannot carry a program's trace (perf 6.1 reads no trace in a pipe-mode \
             perf.data, docs/PERF-COMPAT.md): record to a file with -o FILE",
        ));
    }
    // The TSC rate, kept from an earlier recording of this boot (record/tsc_cache.rs) or
    // measured beside the setup and the program's start (10 ms, asleep on a thread of its own),
    // handed to the program: no traced process calibrates its own before its first call.
    let calibration =
        cfg!(target_arch = "x86_64").then(|| std::thread::spawn(super::tsc_cache::calibration));
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
    let events = resolve_events(&texts, aux_sample_size(a)?).map_err(CliError::msg)?;
    let (mut specs, mut table) = program_events(&events)?;
    let page = perfaux_core::page_size() as u64;
    // `-m DATA,AUX` sizes each thread's areas as it does the built-in workload's: the data
    // area holds the thread's uevents and records until the next pass (every millisecond),
    // so a larger one loses fewer in a burst.
    let (data_size, aux_size) = match &a.mmap_pages {
        Some(m) => parse_mmap_pages(m, page)?,
        None => (None, None),
    };
    let data_size = data_size.unwrap_or(DEFAULT_DATA_SIZE);
    let aux_size = aux_size.unwrap_or(DEFAULT_AUX_SIZE);
    let rec_opts = RecorderOptions {
        data_size,
        aux_size,
        overwrite,
    };
    // The threads open what the file says they opened: the recorder's default watermarks,
    // which it sets on its own copies of the attrs, go into the program's event table too.
    for (spec, ev) in specs.iter_mut().zip(&mut table) {
        default_watermarks(spec, &rec_opts);
        ev.attr = spec.open;
    }
    let (runtime, _runtime_fd) = find_runtime()?;
    let opts = Options {
        runtime: runtime.clone(),
        slots: SLOTS,
        data_pages: (data_size / page) as usize,
        aux_pages: (aux_size / page) as usize,
        overwrite,
        events: table.clone(),
    };
    let session = ProgramSession::new(&opts).map_err(|e| CliError::msg(format!("record: {e}")))?;
    let session = Arc::new(Mutex::new(session));
    // The file is begun before the program runs: a path that cannot be written is said at once.
    let mut rec =
        Recorder::new(specs, rec_opts, &[], Output::File(a.output.clone())).map_err(rec_err)?;
    if calibration.is_some() {
        lock(&session).tsc_calibration_pending();
    }
    let ends = ProcessEnds::new();
    lock(&session).set_watched_pid_ns(ends.watched_ns());
    let argv: Vec<OsString> = a.command.iter().map(OsString::from).collect();
    let prog = a.command[0].clone();
    let start_ns = perfaux_swtrace::clock::monotonic_ns();
    let pid = lock(&session)
        .spawn(&argv, &runtime)
        .map_err(|e| CliError::msg(format!("record: cannot run '{prog}': {e}")))?;
    let program_fd = ProcessEnds::pidfd(pid);
    // The program starts while the calibration ends (its loading and first steps take some of
    // the 10 ms); its first hook waits for what is left.
    match calibration.map(std::thread::JoinHandle::join) {
        Some(Ok(c)) => lock(&session).set_tsc_calibration(c),
        Some(Err(_)) => lock(&session).tsc_calibration_failed(),
        None => {}
    }
    if verbose {
        eprintln!("perfaux record: tracing {prog} (pid {pid})");
    }
    let comm = std::path::Path::new(&prog)
        .file_name()
        .map_or(prog.clone(), |n| n.to_string_lossy().into_owned());
    let ended = Arc::new(AtomicBool::new(false));
    let mut seen = Sideband {
        start_ns,
        slots: Vec::new(),
        traced: 0,
        objects: 0,
        tasks: Vec::new(),
        main_exited: Vec::new(),
        ends,
    };
    let mut stop_sent = false;
    let mut functions_checked = false;
    let status = loop {
        let st = lock(&session)
            .try_wait()
            .map_err(|e| CliError::msg(format!("record: wait: {e}")))?;
        if st.is_some() {
            // The last pass also takes what each thread wrote past its last published head.
            ended.store(true, Ordering::Release);
        }
        seen.add_new(&mut rec, &session, &ended, pid, &comm)?;
        if !functions_checked && seen.traced > 0 {
            // A traced thread means the runtime's init resolved the probe functions in the
            // objects loaded at start: say at once if one is missing (a dlopen may still
            // bring it; the recording fails at the end if none does).
            functions_checked = true;
            let missing = unfound(&lock(&session), &table);
            if !missing.is_empty() {
                let l = unfound_line(&missing, &prog, " at its start");
                eprintln!(
                    "perfaux record: warning: {l}; the recording fails unless a dlopen brings it"
                );
            }
        }
        rec.drain().map_err(rec_err)?;
        if overwrite && (st.is_some() || signals::take_snapshot_request()) {
            // -S: on SIGUSR2, and once the program ended (exit, crash or kill), the newest
            // trace of every thread; the threads are never stopped for it.
            rec.snapshot().map_err(rec_err)?;
        }
        if let Some(st) = st {
            break st;
        }
        if !stop_sent && signals::stop_requested().is_some() {
            // perf's way: the recording ends with the program, which gets SIGTERM; what it
            // wrote until it dies is kept (a second Ctrl-C aborts, signals.rs).
            lock(&session).kill(libc::SIGTERM);
            stop_sent = true;
        }
        ProcessEnds::wait_for(program_fd.as_ref(), Duration::from_millis(1));
    };
    let end = ProgramEnd(status);
    let shared = session;
    let mut session = lock(&shared);
    session.close();
    // The objects reported since the last pass (a descendant still running) are recorded and
    // named too.
    seen.write_objects(&mut rec, &mut session, pid)?;
    // The program is gone, and its threads with it (children may still run: theirs stay open).
    let threads = session.threads();
    let gone: Vec<_> = threads.iter().filter(|t| t.pid == pid).collect();
    seen.write_exits(&mut rec, &gone)?;
    let missing = unfound(&session, &table);
    let without_slot = session.threads_without_slot();
    let objects_lost = session.objects_lost();
    let failed = (!missing.is_empty())
        .then(|| unfound_line(&missing, &prog, ""))
        .or_else(|| open_error(&session, rec.events()));
    if seen.traced == 0 {
        // Dropping the recorder unmade leaves no file and the previous one in place.
        drop(rec);
        let how = end
            .signal_line(&prog)
            .map(|l| format!(" ({l})"))
            .unwrap_or_default();
        return Err(CliError::msg(format!(
            "record: nothing traced in '{prog}'{how}: {NO_HOOKS}"
        )));
    }
    let probes = session.probes();
    let addrs: Vec<u64> = probes.iter().map(|&(_, addr)| addr).collect();
    let syms = Symbolizer::for_addrs(session.objects(), &addrs);
    let table = ProbeTable::from_entries(probes.into_iter().map(|(id, addr)| {
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
    drop(session);
    // The session's memory (megabytes of pages the threads wrote) is unmapped beside the
    // file's writing: by the recorder's rings that still hold it (Recorder::finish), or here,
    // on a thread, once the rings let go of it (the retired ones did already).
    let unmapped = std::thread::Builder::new()
        .name("perfaux-unmap".into())
        .spawn(move || drop(shared))
        .ok();
    rec.set_probe_table(table.to_bytes());
    let recorded = rec.finish().map_err(rec_err)?;
    if let Some(h) = unmapped {
        let _ = h.join();
    }
    if without_slot > 0 {
        eprintln!(
            "perfaux record: warning: {without_slot} thread(s) of the program's processes were not \
             traced: they started while the recording's {SLOTS} slots were all held (a slot \
             goes to another thread once its thread ended, its process exec'd, or its process \
             ended, this last seen only in perfaux's pid namespace)"
        );
    }
    if objects_lost > 0 {
        eprintln!(
            "perfaux record: warning: {objects_lost} object(s) the program's processes loaded \
             were not recorded (the ring of {MAX_OBJECTS} loaded objects stayed full for {} ms, \
             or a process loaded more than 1024): their functions are named by address",
            OBJECT_WAIT.as_millis()
        );
    }
    if let Some(l) = failed {
        // The program ran: what it recorded is kept (its run cannot be had again), and the
        // recording says it lacks what was asked for, failing as a record that could not open
        // an event does (and, first, that the disk filled, if it did).
        let summary = RecordSummary {
            recorded: recorded.clone(),
        };
        if let Some(cut) = summary.disk_full_line(&a.output) {
            eprintln!("perfaux: error: {cut}");
        }
        return Err(CliError::msg(format!(
            "record: {l}; the recording is written to {} without it",
            a.output.display()
        )));
    }
    Ok((RecordSummary { recorded }, end))
}

/// The session, whatever a panicking holder left (its state stays consistent: every method
/// leaves the rings as it found them or advanced).
fn lock(s: &Mutex<ProgramSession>) -> std::sync::MutexGuard<'_, ProgramSession> {
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The threads and objects already in the recording.
struct Sideband {
    /// When the program was started (the time of its threads' COMM records).
    start_ns: u64,
    /// Per slot, the thread whose ring the recorder has (`None`: none yet).
    slots: Vec<Option<Registered>>,
    /// Threads traced so far.
    traced: usize,
    /// The session's objects whose MMAP2 is written.
    objects: usize,
    /// (pid, tid, fork time) of every traced thread seen: the same in a new slot is an image
    /// the thread exec'd; a child's FORK is written with its first.
    tasks: Vec<(u32, u32, Option<u64>)>,
    /// The processes (pid, fork time) whose main thread's PERF_RECORD_EXIT is written.
    main_exited: Vec<(u32, Option<u64>)>,
    /// The processes with a registered thread, watched for an end that ran no destructors.
    ends: ProcessEnds,
}

/// A thread whose ring the recorder has, in its slot (see [`TracedThread`] for the fields
/// it keeps).
struct Registered {
    generation: u64,
    pid: u32,
    tid: u32,
    fork: Option<(u32, u32, u64)>,
    image_time: u64,
    pid_ns: u64,
    /// Its ring's retiring word ([`SlotRing`]): set once the thread ended.
    retiring: Arc<AtomicU8>,
    /// Its PERF_RECORD_EXIT is written.
    exited: bool,
}

impl Registered {
    /// Whether it is a thread of `t`'s process (the same pid namespace, pid and fork).
    fn of_process_of(&self, t: &TracedThread) -> bool {
        self.process() == process_of(t)
    }

    /// Marks its thread gone without a word ([`program_ring::GONE`]) if it was running;
    /// whether it was.
    fn mark_gone(&self) -> bool {
        self.retiring
            .compare_exchange(
                program_ring::RUNNING,
                program_ring::GONE,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Whether its thread is not known to have ended.
    fn running(&self) -> bool {
        self.retiring.load(Ordering::Acquire) == program_ring::RUNNING
    }

    fn process(&self) -> ProcessKey {
        (self.pid, self.fork.map(|f| f.2), self.pid_ns)
    }
}

/// The process of thread `t`, as [`ProcessEnds`] knows it.
fn process_of(t: &TracedThread) -> ProcessKey {
    (t.pid, t.fork.map(|f| f.2), t.pid_ns)
}

/// The PERF_RECORD_EXIT of `r`'s thread at `time`, unless it has one. A process's main thread
/// lives on through its execs (one task, each image a slot of its own): it exits once, which
/// `main_exited` (pid, fork time) remembers.
fn exit_once(
    rec: &mut Recorder,
    r: &mut Registered,
    main_exited: &mut Vec<(u32, Option<u64>)>,
    time: u64,
) -> Result<(), CliError> {
    if r.exited {
        return Ok(());
    }
    r.exited = true;
    if r.tid == r.pid {
        let process = (r.pid, r.fork.map(|f| f.2));
        if main_exited.contains(&process) {
            return Ok(());
        }
        main_exited.push(process);
    }
    write_exit(rec, (r.pid, r.tid), r.fork, time)
}

/// Writes a PERF_RECORD_EXIT of thread `tid` of process `pid` at `time`; the parent named is
/// the process's (as the kernel's `real_parent`): its forker in `fork`, or perfaux.
fn write_exit(
    rec: &mut Recorder,
    (pid, tid): (u32, u32),
    fork: Option<(u32, u32, u64)>,
    time: u64,
) -> Result<(), CliError> {
    let me = std::process::id();
    let (ppid, ptid) = fork.map_or((me, me), |(ppid, ptid, _)| (ppid, ptid));
    let r = task_record(
        TaskKind::Exit,
        (pid, ppid, tid, ptid, time),
        rec.file_info(),
        Endianness::NATIVE,
    )?;
    rec.write_record(&r).map_err(rec_err)
}

impl Sideband {
    /// Hands the recorder the rings of threads that appeared, and writes COMM for each and
    /// MMAP2 for every object the runtime reported since the last call. A forked child's first
    /// thread brings its PERF_RECORD_FORK (at the fork's time, before the child's COMM and
    /// samples), from which perf gives the child its parent's maps.
    fn add_new(
        &mut self,
        rec: &mut Recorder,
        session: &Arc<Mutex<ProgramSession>>,
        ended: &Arc<AtomicBool>,
        pid: u32,
        comm: &str,
    ) -> Result<(), CliError> {
        let mut threads = {
            let mut s = lock(session);
            self.slots.resize_with(s.slot_count(), || None);
            self.write_objects(rec, &mut s, pid)?;
            s.threads()
        };
        // In the order the threads began, not of their slots (recycled, a later thread's may
        // come first): of a task seen twice in one pass, the first is the image it exec'd
        // from. (The program's words: they only order what is registered.)
        threads.sort_by_key(|t| t.open_time);
        let info = *rec.file_info();
        let endian = Endianness::NATIVE;
        let mut news = Vec::new();
        for t in &threads {
            if self.slots[t.slot]
                .as_ref()
                .is_some_and(|r| r.generation == t.generation)
            {
                continue;
            }
            self.traced += 1;
            // A thread of the program's start is named from then on; one in a slot another
            // thread had (a tid the kernel may have given before) from when it began.
            let mut comm_ns = if t.generation > 0 && t.open_time != 0 {
                t.open_time
            } else {
                self.start_ns
            };
            if let Some((ppid, ptid, time)) = t.fork {
                comm_ns = time;
                // The child's first thread (none of its process, by pid and fork time, seen
                // before: a pid the kernel gave again to a later child is another process):
                // tid = pid.
                if !self
                    .tasks
                    .iter()
                    .any(|&(p, _, f)| p == t.pid && f == Some(time))
                {
                    let r = task_record(
                        TaskKind::Fork,
                        (t.pid, ppid, t.pid, ptid, time),
                        &info,
                        endian,
                    )?;
                    rec.write_record(&r).map_err(rec_err)?;
                }
            }
            // An exec'd image: its thread's name changed at the exec (COMM_EXEC, as the
            // kernel's perf_event_comm), before its first traced call. It is a thread seen
            // before in another slot: the same pid and tid (exec makes the calling thread its
            // process's leader, tid = pid) and the same fork (an exec'd child's image carries
            // its fork; a later child given the same pid does not).
            let task = (t.pid, t.tid, t.fork.map(|f| f.2));
            let exec = t.tid == t.pid && self.tasks.contains(&task);
            if exec && t.open_time != 0 {
                comm_ns = t.open_time;
            }
            news.push(t);
            self.tasks.push(task);
            let name = t.comm.as_deref().unwrap_or(comm);
            let task = (t.pid, t.tid, t.event_id);
            let r = comm_record(task, comm_ns, name, exec, &info, endian)?;
            rec.write_record(&r).map_err(rec_err)?;
            let retiring = Arc::new(AtomicU8::new(program_ring::RUNNING));
            let ring = SlotRing::new(
                session.clone(),
                t.slot,
                t.tid as i32,
                t.event_id,
                ended.clone(),
                retiring.clone(),
            );
            rec.add_ring(Box::new(ring), &t.ids).map_err(rec_err)?;
            self.slots[t.slot] = Some(Registered {
                generation: t.generation,
                pid: t.pid,
                tid: t.tid,
                fork: t.fork,
                image_time: t.image_time,
                pid_ns: t.pid_ns,
                retiring,
                exited: false,
            });
        }
        // After every new thread is in: the old image's may have come in this same pass.
        for t in news {
            self.gone_with_old_image(rec, t)?;
        }
        let ended: Vec<_> = threads.iter().filter(|t| t.ended).collect();
        self.write_exits(rec, &ended)?;
        // The ended threads' rings take their last bytes at the next drain, which then gives
        // their slots to the threads that come.
        for t in ended {
            if let Some(r) = &self.slots[t.slot] {
                r.retiring.store(program_ring::ENDED, Ordering::Release);
            }
        }
        self.gone_with_process(rec)
    }

    /// The threads of every process that ended since the last pass without their destructors
    /// (`_exit`, a crash, SIGKILL, `exit` with other threads running: their slots still
    /// TRACING): as for an exec, their rings take their last bytes, past the last published
    /// head too, at the next drain, and their slots go to the next threads; each gets its
    /// PERF_RECORD_EXIT now (within a pass of the end). The threads that ended cleanly were
    /// retired above.
    fn gone_with_process(&mut self, rec: &mut Recorder) -> Result<(), CliError> {
        for r in self.slots.iter().flatten().filter(|r| r.running()) {
            self.ends.watch(r.process());
        }
        let ended = self.ends.take_ended();
        if !ended.is_empty() {
            let time = perfaux_swtrace::clock::monotonic_ns();
            for r in self.slots.iter_mut().flatten() {
                if !ended.contains(&r.process()) {
                    continue;
                }
                if r.mark_gone() {
                    exit_once(rec, r, &mut self.main_exited, time)?;
                }
            }
        }
        // Only processes that hold a slot stay watched: the list is as short as the slots.
        let slots = &self.slots;
        self.ends.retain(|p| {
            slots
                .iter()
                .flatten()
                .any(|r| r.running() && r.process() == *p)
        });
        Ok(())
    }

    /// The threads of `t`'s process (the same pid namespace, pid and fork) that ran in an
    /// image older than the newest of the process's registered threads (`t` among them, which
    /// may be the old one when the recorder saw the new image first): the process exec'd
    /// since, which ended them all (its main thread lives on in the new image) without their
    /// destructors. Their rings take their last bytes, past the last published head too, at
    /// the next drain, and their slots go to the next threads; the threads other than the
    /// main one get their PERF_RECORD_EXIT, at the new image's start (the exec was before).
    fn gone_with_old_image(
        &mut self,
        rec: &mut Recorder,
        t: &TracedThread,
    ) -> Result<(), CliError> {
        let newest = self
            .slots
            .iter()
            .flatten()
            .filter(|r| r.of_process_of(t))
            .map(|r| r.image_time)
            .max()
            .unwrap_or(0);
        for r in self.slots.iter_mut().flatten() {
            if !r.of_process_of(t) || r.image_time == 0 || r.image_time >= newest {
                continue;
            }
            if r.mark_gone() && r.tid != r.pid && !r.exited {
                r.exited = true;
                write_exit(rec, (r.pid, r.tid), r.fork, newest)?;
            }
        }
        Ok(())
    }

    /// Takes the objects the program's processes reported since the last call and writes
    /// their MMAP2 records (`pid`: the program's, for an entry that names no process).
    fn write_objects(
        &mut self,
        rec: &mut Recorder,
        session: &mut ProgramSession,
        pid: u32,
    ) -> Result<(), CliError> {
        session.take_objects();
        let info = *rec.file_info();
        for o in session.objects().get(self.objects..).unwrap_or_default() {
            let r = mmap2_record(
                if o.pid != 0 { o.pid } else { pid },
                o,
                &info,
                Endianness::NATIVE,
            )?;
            rec.write_record(&r).map_err(rec_err)?;
            self.objects += 1;
        }
        Ok(())
    }

    /// PERF_RECORD_EXIT for each of `threads` not yet given one, timed now (within a drain
    /// pass of the thread's end): the kernel writes it when a task exits, and perf ends the
    /// thread's life there. The parent named is the thread's process's parent, as the
    /// kernel's `real_parent` (a thread's is its process's): the child's forker, or perfaux.
    fn write_exits(
        &mut self,
        rec: &mut Recorder,
        threads: &[&TracedThread],
    ) -> Result<(), CliError> {
        for t in threads {
            let Some(r) = self.slots.get_mut(t.slot).and_then(Option::as_mut) else {
                continue;
            };
            if r.generation == t.generation {
                let time = perfaux_swtrace::clock::monotonic_ns();
                exit_once(rec, r, &mut self.main_exited, time)?;
            }
        }
        Ok(())
    }
}

fn sid(pid: u32, tid: u32, time: u64) -> SampleId {
    sid_of(pid, tid, time, 0)
}

/// A sample_id naming the event `id` (as the kernel writes a thread's COMM into each of its
/// events' buffers with that event's id).
fn sid_of(pid: u32, tid: u32, time: u64, id: u64) -> SampleId {
    SampleId {
        tid: Some(PidTid { pid, tid }),
        time: Some(time),
        cpu: Some(CpuRes { cpu: 0, res: 0 }),
        identifier: Some(id),
        ..Default::default()
    }
}

/// A thread's COMM, timed at the program's start (`start_ns`): the runtime reports the
/// thread only after its first events, and perf names a sample's thread from the COMM that
/// comes before it in time. `exec`: the name an exec gave it (PERF_RECORD_MISC_COMM_EXEC),
/// timed when the new image's thread opened its events.
fn comm_record(
    (pid, tid, event_id): (u32, u32, u64),
    start_ns: u64,
    comm: &str,
    exec: bool,
    info: &RecordParseInfo,
    endian: Endianness,
) -> Result<Vec<u8>, CliError> {
    CommRecord {
        misc: if exec { PERF_RECORD_MISC_COMM_EXEC } else { 0 },
        pid,
        tid,
        comm: RawData::new(comm.as_bytes(), &[]),
        sample_id: sid_of(pid, tid, start_ns, event_id),
    }
    .to_vec(info, endian)
    .map_err(|e| CliError::msg(format!("synthesizing COMM: {e}")))
}

/// PERF_RECORD_FORK or PERF_RECORD_EXIT of thread `tid` of `pid`, whose parent is thread
/// `ptid` of `ppid`, at `time` (`task`: pid, ppid, tid, ptid, time).
fn task_record(
    kind: TaskKind,
    (pid, ppid, tid, ptid, time): (u32, u32, u32, u32, u64),
    info: &RecordParseInfo,
    endian: Endianness,
) -> Result<Vec<u8>, CliError> {
    TaskRecord {
        kind,
        misc: 0,
        pid,
        ppid,
        tid,
        ptid,
        time,
        sample_id: sid(pid, tid, time),
    }
    .to_vec(info, endian)
    .map_err(|e| CliError::msg(format!("synthesizing {kind:?}: {e}")))
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
        // When the runtime found the object: before the samples in it.
        sample_id: sid(
            pid,
            pid,
            if o.time != 0 {
                o.time
            } else {
                perfaux_swtrace::clock::monotonic_ns()
            },
        ),
    }
    .to_vec(info, endian)
    .map_err(|e| CliError::msg(format!("synthesizing MMAP2: {e}")))
}
