//! Tracing another program as library code: [`TracedProgram`] starts a `std::process::Command`
//! with the runtime preloaded (the memory owned here) and records it with the same
//! [`Recorder`] as every recording: each thread slot the program claims becomes one of the
//! recorder's rings ([`crate::slot_ring`]), so the file is made as every recording's is (a
//! temporary renamed at the end, `<output>.old`, trace bytes streamed, snapshots with their
//! wrapped flag). COMM, FORK, EXIT and MMAP2 records for the program's tasks and objects come
//! from what the runtime reported ([`crate::sideband`]), and a probe table names every
//! function from the ELF symbol tables. A child the program forks is traced in slots of its
//! own (perf's inherit default); the recording ends when the program ends, as perf's does,
//! with what still-running children published by then.
//!
//! The verbs are the [`Recorder`]'s: [`TracedProgram::step`] (one pass of the recording loop),
//! [`TracedProgram::snapshot`], [`TracedProgram::signal`], [`TracedProgram::finish`]. What the
//! recording has to tell comes back as [`Notice`]s; the caller owns the command's
//! environment, directory and standard streams, its signals and its messages.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_patch::PatchSpec;
use perfaux_perfdata::record_attrs::{base_attr, uevent_stream_attr};
use perfaux_perfdata::uevent_sample::UEVENT_EVENT_NAME;
use perfaux_recorder::pmus::SWTRACE_TYPE;
use perfaux_recorder::{
    EventSpec, Output, RecordSummary, Recorder, RecorderOptions, default_watermarks,
};
use perfaux_swtrace::{ProbeInfo, ProbeTable};

use crate::error::ProgramError;
use crate::events::{open_error, unfound};
use crate::host::{Options, ProgramEvent, ProgramSession, RingMemoryUse, TracedThread};
use crate::kernel_events::{self, KernelEvent};
use crate::notice::{Notice, functions_missing};
use crate::process_ends::ProcessEnds;
use crate::runtime::Runtime;
use crate::sideband::{Recording, Sideband};
use crate::slot_ring::SlotRing;
use crate::symbols::Symbolizer;

/// Slots whose memfds are made before the program starts (inherited by it): a slot serves one
/// thread at a time, and the recorder makes more as the program's threads take them
/// ([`ProgramOptions::max_threads`]).
pub const SLOTS: usize = 64;
/// Of the [`SLOTS`], those whose rings are made before the program starts: its first thread's
/// and the next one's. The others' rings are made in their memfds as the program's threads
/// take slots (a thread that finds none free waits for the recorder's next pass).
pub const RINGS_AT_START: usize = 2;
/// The most threads traced at once unless the options say otherwise.
pub const MAX_THREADS: usize = crate::shared::MAX_SLOTS;
/// Each traced thread's data area unless the options say otherwise: it holds the thread's
/// uevents, samples and AUX records until the recorder's next pass, so a burst of uevents
/// needs room (perf's own default is 512 KiB a CPU).
pub const DEFAULT_DATA_SIZE: u64 = 4 << 20;
/// Room for one function in the probe table, kept beside the output for the recording's end
/// ([`Recorder::set_probe_table_room`]): its entry's 20 bytes and a long name.
const PROBE_TABLE_ROOM_EACH: u64 = 256;

/// What to record of the program.
#[derive(Debug, Clone)]
pub struct ProgramOptions {
    /// The recorder's events, in the order of `table`: what the file calls them.
    pub events: Vec<EventSpec>,
    /// What every traced thread opens, one entry per event (exactly one AUX event, the
    /// `swtrace//` event that owns the thread's buffer; the uevent stream).
    pub table: Vec<ProgramEvent>,
    /// Each thread's AUX area, in bytes (a power-of-two number of pages).
    pub aux_size: u64,
    /// Each thread's data area, in bytes (a power-of-two number of pages;
    /// [`DEFAULT_DATA_SIZE`] unless asked otherwise).
    pub data_size: u64,
    /// `-S`: the AUX areas run in overwrite mode, and the file holds snapshots (taken by
    /// [`TracedProgram::snapshot`] and when the program ends).
    pub overwrite: bool,
    /// `-P` / `-U`: the functions whose entries the runtime patches in a program built without
    /// instrumentation (perfaux-patch's rules; `None`: none).
    pub patch: Option<PatchSpec>,
    /// With `patch`: the executable is patched only at the entries its compiler prepared
    /// where it chose some functions (XRay's sleds; `record` without `-P` on such a program).
    pub prepared_only: bool,
    /// With `patch`: the executable's calls into shared libraries (through its PLT) are
    /// traced too, under the library functions' names (uftrace's default; `--no-libcall`).
    pub libcalls: bool,
    /// The most threads (of all the program's processes) traced at once, each with rings of
    /// `data_size` and `aux_size` ([`MAX_THREADS`] at most): later ones wait a little for a
    /// slot whose thread ended, or are counted and said.
    pub max_threads: usize,
    /// The kernel's context switches of the program's threads go into the recording
    /// (PERF_RECORD_SWITCH of a `dummy:u` event, [`crate::kernel_events`]); where the kernel
    /// refuses them, a [`Notice::KernelEventsNotRecorded`] says so and the trace is recorded
    /// all the same.
    pub switch_events: bool,
    /// The kernel's own events of the program (`-e page-faults`, ...): each opened by the
    /// recorder on every CPU for the program's threads and processes ([`crate::kernel_events`];
    /// their `leader`s are ignored, each is its own). Where the kernel refuses them, a
    /// [`Notice::KernelEventsNotRecorded`] that is an error says so, and the trace is recorded
    /// all the same.
    pub kernel_events: Vec<EventSpec>,
    /// HEADER_TRACING_DATA for the tracepoints among `kernel_events`
    /// ([`perfaux_recorder::tracefs::tracing_data`]): perf prints their fields from it.
    pub tracing_data: Option<Vec<u8>>,
    /// With `overwrite`: each snapshot keeps at least this much of each thread's newest trace
    /// ([`perfaux_recorder::Recorder::set_window`]); `None`: all its area holds.
    pub window: Option<std::time::Duration>,
}

impl ProgramOptions {
    /// The program's trace and its uevents (what `perfaux record -- ./prog` records without
    /// -e): the `swtrace//` event, owner of each thread's buffer, and the uevent stream.
    pub fn trace(aux_size: u64, overwrite: bool) -> ProgramOptions {
        let trace = base_attr(SWTRACE_TYPE, 0);
        let mut uevents = EventSpec::new(UEVENT_EVENT_NAME, uevent_stream_attr(), 1);
        uevents.uevent_stream = true;
        ProgramOptions {
            events: vec![EventSpec::new("swtrace//", trace, 0), uevents],
            table: vec![
                ProgramEvent {
                    attr: trace,
                    leader: 0,
                    func: None,
                },
                ProgramEvent {
                    attr: uevent_stream_attr(),
                    leader: 1,
                    func: None,
                },
            ],
            aux_size,
            data_size: DEFAULT_DATA_SIZE,
            overwrite,
            patch: None,
            prepared_only: false,
            libcalls: false,
            max_threads: MAX_THREADS,
            switch_events: false,
            kernel_events: Vec::new(),
            tracing_data: None,
            window: None,
        }
    }
}

/// What one [`TracedProgram::step`] did.
#[derive(Debug, Default)]
pub struct Step {
    /// The program ended (the pass took its last bytes): [`TracedProgram::finish`] is next.
    pub ended: bool,
    /// What this pass has to tell.
    pub notices: Vec<Notice>,
}

/// A finished recording.
#[derive(Debug)]
pub struct Finished {
    /// The recorder's counts.
    pub summary: RecordSummary,
    /// How the program ended.
    pub end: ProgramEnd,
    /// What the recording has to tell (the steps' that [`TracedProgram::finish`] made, then
    /// the end's); an [`Notice::is_error`] one is a recording that failed though written.
    pub notices: Vec<Notice>,
    /// Threads traced (of all the program's processes and images).
    pub threads: usize,
    /// What their rings cost.
    pub rings: RingMemoryUse,
}

/// How the traced program ended.
#[derive(Debug, Clone, Copy)]
pub struct ProgramEnd(pub ExitStatus);

impl ProgramEnd {
    /// The exit code a tool leaves with: the program's, or 128 + the signal that killed it
    /// (as a shell reports it).
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

/// The session, whatever a panicking holder left (its state stays consistent: every method
/// leaves the rings as it found them or advanced).
fn lock(s: &Mutex<ProgramSession>) -> MutexGuard<'_, ProgramSession> {
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The recorder as the side band's [`Recording`]: a new thread's ring is its slot's
/// [`SlotRing`].
struct RecorderRecording<'a> {
    rec: &'a mut Recorder,
    session: &'a Arc<Mutex<ProgramSession>>,
    ended: &'a Arc<AtomicBool>,
}

impl Recording for RecorderRecording<'_> {
    fn file_info(&self) -> RecordParseInfo {
        *self.rec.file_info()
    }

    fn write_record(&mut self, record: &[u8]) -> perfaux_recorder::Result<()> {
        self.rec.write_record(record)
    }

    fn add_ring(
        &mut self,
        t: &TracedThread,
        retiring: Arc<AtomicU8>,
    ) -> perfaux_recorder::Result<()> {
        let ring = SlotRing::new(
            self.session.clone(),
            t.slot,
            t.tid as i32,
            t.event_id,
            self.ended.clone(),
            retiring,
        );
        // The thread's events are the table's, the file's first; the kernel's switches after
        // them have rings of their own.
        let ids: Vec<(usize, u64)> = t.ids.iter().copied().enumerate().collect();
        self.rec.add_ring_of(Box::new(ring), &ids)
    }
}

/// A program being traced into a recording.
pub struct TracedProgram {
    session: Arc<Mutex<ProgramSession>>,
    rec: Recorder,
    sideband: Sideband,
    table: Vec<ProgramEvent>,
    output: PathBuf,
    prog: String,
    pid: u32,
    /// A pidfd of the program: a step's wait ends when it ends.
    program_fd: Option<OwnedFd>,
    /// Set once the program ended: the rings' last drain also takes what each thread wrote
    /// past its last published head.
    ended: Arc<AtomicBool>,
    status: Option<ExitStatus>,
    /// Steps made (the first does not wait).
    steps: u64,
    /// Whether the `probe:FUNC` functions were looked for since a thread was traced.
    functions_checked: bool,
    overwrite: bool,
    /// Whether the runtime patches entries (`-P`).
    patching: bool,
    /// What the start had to tell, said by the first step.
    start_notices: Vec<Notice>,
    /// Whether the kernel opened any of the events `-e` asked for: a program nothing traced
    /// then still has a recording, theirs.
    asked_kernel_events: bool,
    /// The runtime's memfd stays open while the program's processes may load it.
    _runtime: Runtime,
}

impl TracedProgram {
    /// Starts `command` traced into a recording at `output`. The command keeps the
    /// environment, directory and standard streams its caller gave it; the runtime is added
    /// in front of its `LD_PRELOAD`, and the recording's descriptors are inherited. The file is
    /// begun before the program runs: a path that cannot be written is said at once.
    pub fn start(
        command: Command,
        options: ProgramOptions,
        output: PathBuf,
    ) -> Result<TracedProgram, ProgramError> {
        // The TSC rate, kept from an earlier recording of this boot (tsc_cache: read here, a
        // file and a clock pair) or measured beside the setup and the program's start (10 ms,
        // asleep on a thread of its own), handed to the program: no traced process calibrates
        // its own before its first call.
        let kept_calibration = cfg!(target_arch = "x86_64")
            .then(crate::tsc_cache::kept)
            .flatten();
        let calibration = (cfg!(target_arch = "x86_64") && kept_calibration.is_none())
            .then(|| std::thread::spawn(crate::tsc_cache::measured));
        let ProgramOptions {
            events: mut specs,
            mut table,
            aux_size,
            data_size,
            overwrite,
            patch,
            prepared_only,
            libcalls,
            max_threads,
            switch_events,
            kernel_events: kernel_specs,
            tracing_data,
            window,
        } = options;
        if specs.len() != table.len() {
            return Err(ProgramError::Options(format!(
                "{} events for an event table of {}",
                specs.len(),
                table.len()
            )));
        }
        let page = perfaux_core::page_size() as u64;
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
        // The kernel's events (those asked for, then the switches) are events of the file
        // that no thread of the program opens: after the table's.
        let mut kernel = Vec::new();
        let switches = switch_events.then(|| {
            EventSpec::new(
                kernel_events::SWITCH_EVENT_NAME,
                kernel_events::switch_attr(),
                0,
            )
        });
        let switch_index = switches.is_some().then(|| specs.len() + kernel_specs.len());
        let stacks = kernel_specs
            .iter()
            .any(|k| k.open.sample_type & perfaux_abi::consts::PERF_SAMPLE_STACK_USER != 0);
        for (k, mut spec) in kernel_specs.into_iter().chain(switches).enumerate() {
            spec.leader = specs.len();
            if k == 0 && Some(specs.len()) != switch_index {
                kernel_events::with_tracking(&mut spec.open, stacks);
            }
            kernel.push(KernelEvent {
                name: spec.name.clone(),
                attr: spec.open,
                index: specs.len(),
            });
            specs.push(spec);
        }
        let runtime = Runtime::find().map_err(ProgramError::Runtime)?;
        let opts = Options {
            runtime: runtime.path.clone(),
            slots: RINGS_AT_START,
            inherited: SLOTS,
            max_slots: max_threads,
            data_pages: (data_size / page) as usize,
            aux_pages: (aux_size / page) as usize,
            overwrite,
            events: table.clone(),
        };
        let mut session = ProgramSession::new(&opts).map_err(ProgramError::Session)?;
        let mut rec = Recorder::new(specs, rec_opts, &[], Output::File(output.clone()))?;
        // The probe table grows with the functions the program calls (Self::step).
        rec.set_probe_table_room(0);
        if let Some(t) = tracing_data {
            rec.set_tracing_data(t);
        }
        rec.set_window(window);
        // What the start has to tell, said at the first step.
        let mut notices = Vec::new();
        if let Some(c) = kept_calibration {
            session.set_tsc_calibration(c);
        }
        if calibration.is_some() {
            session.tsc_calibration_pending();
        }
        let ends = ProcessEnds::new();
        session.set_watched_pid_ns(ends.watched_ns());
        let prog = command.get_program().to_string_lossy().into_owned();
        let mut command = command;
        let patching = patch.as_ref().is_some_and(|p| !p.is_empty());
        // The executable's plan, made here before the program starts (the runtime would scan
        // every function of it otherwise), handed over as an inherited sealed memfd; kept
        // open until the program has started.
        let mut plan_fd = None;
        if let Some(spec) = patch.as_ref().filter(|_| patching) {
            command.env(crate::patching::ENV_PATCH, spec.encode());
            plan_fd = crate::patching::plan_memfd(&prog, spec, prepared_only);
            if prepared_only {
                command.env(crate::patching::ENV_PATCH_PLAN_ONLY, "1");
            }
            if libcalls {
                // Every PLT slot filled before the constructors, for the runtime to hook.
                command.env("LD_BIND_NOW", "1");
                command.env(crate::patching::ENV_LIBCALL, "1");
            }
        }
        if let Some(fd) = &plan_fd {
            let raw = fd.as_raw_fd();
            command.env(crate::patching::ENV_PATCH_PLAN_FD, raw.to_string());
            let inherit = move || -> std::io::Result<()> {
                // SAFETY: the plan's descriptor, open until the spawn returns.
                let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(raw) };
                rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
                Ok(())
            };
            // SAFETY: runs in the forked child before exec; fcntl is async-signal-safe.
            unsafe { std::os::unix::process::CommandExt::pre_exec(&mut command, inherit) };
        }
        // The child waits between fork and exec until the kernel's events are open.
        let names: Vec<String> = kernel.iter().map(|k| k.name.clone()).collect();
        // The switches are recorded by default: their refusal is a warning; an event `-e`
        // asked for is an error.
        let not_recorded = |events: Vec<String>, why: String| Notice::KernelEventsNotRecorded {
            asked: events.iter().any(|e| e != kernel_events::SWITCH_EVENT_NAME),
            events,
            why,
        };
        let opening = match (!kernel.is_empty()).then(kernel_events::SpawnGate::new) {
            Some(Ok(gate)) => {
                gate.hold(&mut command);
                Some(gate.open_on_spawn(kernel))
            }
            Some(Err(e)) => {
                notices.push(not_recorded(
                    names.clone(),
                    format!("no pipe to hold the program at its start: {e}"),
                ));
                None
            }
            None => None,
        };
        let start_ns = perfaux_swtrace::clock::monotonic_ns();
        let spawned = session.spawn(command, &runtime.path);
        let opened = opening.and_then(|(parent_side, opening)| {
            // The child forked (or the spawn failed): the parent's copies of its ends go, so
            // that the opener sees the pipe end if no child ever writes.
            drop(parent_side);
            opening.join().ok().flatten()
        });
        let pid = spawned.map_err(|source| ProgramError::Spawn {
            prog: prog.clone(),
            source,
        })?;
        drop(plan_fd);
        let mut rec = rec;
        let mut asked_kernel_events = false;
        if !names.is_empty() {
            match opened {
                Some(kernel_events::Opened {
                    pid: p,
                    rings,
                    refused,
                }) if p == pid => {
                    asked_kernel_events = rings.iter().any(|r| Some(r.index()) != switch_index);
                    for r in rings {
                        let ids = [(r.index(), r.id())];
                        if let Err(e) = rec.add_ring_of(Box::new(r), &ids) {
                            // No recording: the program is not left running untraced.
                            session.kill_and_reap();
                            return Err(e.into());
                        }
                    }
                    for (name, e) in refused {
                        notices.push(not_recorded(vec![name], e.to_string()));
                    }
                }
                _ => notices.push(not_recorded(
                    names.clone(),
                    "the program's pid did not come before its start".into(),
                )),
            }
        }
        let program_fd = ProcessEnds::pidfd(pid);
        // The program starts while the calibration ends (its loading and first steps take
        // some of the 10 ms); its first hook waits for what is left.
        match calibration.map(std::thread::JoinHandle::join) {
            Some(Ok(c)) => session.set_tsc_calibration(c),
            Some(Err(_)) => session.tsc_calibration_failed(),
            None => {}
        }
        let comm = std::path::Path::new(&prog)
            .file_name()
            .map_or(prog.clone(), |n| n.to_string_lossy().into_owned());
        Ok(TracedProgram {
            session: Arc::new(Mutex::new(session)),
            rec,
            sideband: Sideband::new(start_ns, pid, comm, ends),
            table,
            output,
            prog,
            pid,
            program_fd,
            ended: Arc::new(AtomicBool::new(false)),
            status: None,
            steps: 0,
            functions_checked: false,
            overwrite,
            patching,
            start_notices: notices,
            asked_kernel_events,
            _runtime: runtime,
        })
    }

    /// The program's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// How far the recording is: threads traced so far, records and trace bytes taken.
    pub fn progress(&self) -> (usize, u64, u64) {
        let s = self.rec.summary();
        (self.sideband.traced(), s.records, s.aux_bytes)
    }

    /// One pass of the recording loop, after waiting up to `timeout` (less if the program
    /// ends; the first step does not wait): the threads and objects that appeared go into
    /// the recording, the rings are drained, and once the program ended the last pass takes
    /// what its threads wrote past their last published heads (with `overwrite`, their last
    /// snapshot). A step after the end does nothing.
    pub fn step(&mut self, timeout: Duration) -> Result<Step, ProgramError> {
        if self.status.is_some() {
            return Ok(Step {
                ended: true,
                notices: Vec::new(),
            });
        }
        if self.steps > 0 {
            ProcessEnds::wait_for(self.program_fd.as_ref(), timeout);
        }
        self.steps += 1;
        let st = lock(&self.session).try_wait().map_err(ProgramError::Wait)?;
        if st.is_some() {
            // The last pass also takes what each thread wrote past its last published head.
            self.ended.store(true, Ordering::Release);
        }
        {
            let mut session = lock(&self.session);
            session.grow();
            session.take_probes();
            self.rec
                .set_probe_table_room(session.probe_ids() as u64 * PROBE_TABLE_ROOM_EACH);
            let mut rec = RecorderRecording {
                rec: &mut self.rec,
                session: &self.session,
                ended: &self.ended,
            };
            self.sideband.add_new(&mut rec, &mut *session)?;
        }
        let mut notices = std::mem::take(&mut self.start_notices);
        if !self.functions_checked && self.sideband.traced() > 0 {
            // A traced thread means the runtime's init resolved the probe functions in the
            // objects loaded at start: say at once if one is missing (a dlopen may still
            // bring it; the recording fails at the end if none does).
            self.functions_checked = true;
            let functions = unfound(&lock(&self.session), &self.table);
            if !functions.is_empty() {
                notices.push(Notice::FunctionsMissingAtStart {
                    functions,
                    prog: self.prog.clone(),
                });
            }
        }
        self.rec.drain()?;
        if self.overwrite && st.is_none() && self.rec.take_uevent_snapshot_request() {
            // The program asked (perfaux-tracing's trigger): its threads' newest trace now.
            self.rec.snapshot()?;
        }
        if self.overwrite && st.is_some() {
            // Once the program ended (exit, crash or kill), the newest trace of every thread;
            // the threads are never stopped for it.
            self.rec.snapshot()?;
        }
        self.status = st;
        Ok(Step {
            ended: st.is_some(),
            notices,
        })
    }

    /// With `overwrite`, a snapshot whenever the program sends a uevent of type `ty` (its own
    /// trigger: perfaux-tracing's `tracing_snapshot`), taken at the step that drains it.
    pub fn snapshot_on_uevent(&mut self, ty: Option<u32>) {
        self.rec.snapshot_on_uevent(ty);
    }

    /// With `overwrite`, writes every thread's newest trace as a snapshot now (the threads
    /// are not stopped); whether it took any. Without, nothing (as perf ignores SIGUSR2
    /// without -S).
    pub fn snapshot(&mut self) -> Result<bool, ProgramError> {
        if !self.overwrite || self.status.is_some() {
            return Ok(false);
        }
        Ok(self.rec.snapshot()?)
    }

    /// Sends `sig` to the program, if it still runs (perf's way to end a recording early is
    /// SIGTERM: what the program wrote until it dies is kept).
    pub fn signal(&mut self, sig: i32) {
        if self.status.is_none() {
            lock(&self.session).kill(sig);
        }
    }

    /// Waits for the program's end (stepping the recording every millisecond), then writes
    /// the recording: the objects reported since the last pass, the program's threads' EXITs,
    /// the probe table named from the ELF symbols, the file.
    pub fn finish(mut self) -> Result<Finished, ProgramError> {
        let mut notices = Vec::new();
        while self.status.is_none() {
            notices.extend(self.step(Duration::from_millis(1))?.notices);
        }
        let Some(status) = self.status else {
            unreachable!("the loop above ends with a status");
        };
        let end = ProgramEnd(status);
        let shared = self.session;
        let mut rec = self.rec;
        let mut session = lock(&shared);
        session.close();
        {
            let mut r = RecorderRecording {
                rec: &mut rec,
                session: &shared,
                ended: &self.ended,
            };
            // The objects reported since the last pass (a descendant still running) are
            // recorded and named too.
            self.sideband.write_objects(&mut r, &mut *session)?;
            // The program is gone, and its threads with it (children may still run: theirs
            // stay open).
            let threads = session.threads();
            let gone: Vec<_> = threads.iter().filter(|t| t.pid == self.pid).collect();
            self.sideband.write_exits(&mut r, &gone)?;
        }
        session.take_probes();
        let rings = session.ring_memory();
        let damaged = session.damaged_rings().to_vec();
        let control_damaged = session.control_damaged();
        let (max_slots, slot_limit) = session.slot_limit();
        let slot_limit = slot_limit.map(str::to_owned);
        // The program's words: noise once it wrote over their area (said instead).
        let words = |w: u64| if control_damaged { 0 } else { w };
        let without_slot = words(session.threads_without_slot());
        let (unreachable, unreachable_errno) = session.rings_unreachable();
        let unreachable = words(unreachable);
        let objects_lost = words(session.objects_lost());
        let calls_in_handlers = words(session.calls_in_handlers());
        let calls_past_depth = words(session.calls_past_depth());
        let (patched, refused) = session.functions_patched();
        let (patched, refused) = (words(patched), words(refused));
        let failed = if control_damaged {
            None
        } else {
            let missing = unfound(&session, &self.table);
            (!missing.is_empty())
                .then(|| functions_missing(&missing, &self.prog, ""))
                .or_else(|| open_error(&session, rec.events()))
        };
        let traced = self.sideband.traced();
        if traced == 0 {
            let hint = if self.patching {
                crate::patching::nothing_ran_hint(patched, refused)
            } else {
                crate::patching::no_hooks_hint(&self.prog)
            };
            if !self.asked_kernel_events {
                // Dropping the recorder unmade leaves no file and the previous one in place.
                drop(rec);
                return Err(ProgramError::NothingTraced {
                    end: end.signal_line(&self.prog),
                    prog: self.prog,
                    hint,
                });
            }
            // The kernel's samples and counts of the program are a recording of their own, as
            // `perf record` makes one: the first asked event's COMM and MMAP2 records name
            // and place them (kernel_events::with_tracking).
            notices.push(Notice::OnlyKernelEvents {
                prog: self.prog.clone(),
                hint,
            });
        }
        let probes = session.probes();
        let addrs: Vec<u64> = probes.iter().map(|&(_, addr)| addr).collect();
        let syms = Symbolizer::for_addrs(session.objects(), &addrs);
        let table = ProbeTable::from_entries(probes.into_iter().map(|(id, addr)| {
            ProbeInfo {
                id,
                name: match session.probe_name(id) {
                    Some(name) => name.to_owned(),
                    None => syms
                        .name(addr)
                        .map_or_else(|| format!("{addr:#x}"), str::to_owned),
                },
                addr,
                file: String::new(),
                line: 0,
            }
        }));
        let mut table = table;
        for (ty, name) in session.uevent_type_names() {
            table.name_uevent_type(ty, &String::from_utf8_lossy(&name));
        }
        drop(session);
        // The session's memory (megabytes of pages the threads wrote) is unmapped beside the
        // file's writing: by the recorder's rings that still hold it (Recorder::finish), or
        // here, on a thread, once the rings let go of it (the retired ones did already).
        let unmapped = std::thread::Builder::new()
            .name("perfaux-unmap".into())
            .spawn(move || drop(shared))
            .ok();
        rec.set_probe_table(table.to_bytes());
        let summary = rec.finish()?;
        // Not waited for: what it frees is no part of the recording, and a process that ends
        // now (perfaux record) has the kernel free it at its exit.
        drop(unmapped);
        if without_slot > 0 {
            notices.push(Notice::ThreadsWithoutSlot {
                threads: without_slot,
                slots: max_slots,
                why: slot_limit,
                made: rings.slots,
            });
        }
        for d in damaged {
            notices.push(Notice::RingDamaged(d));
        }
        if control_damaged {
            notices.push(Notice::ControlAreaDamaged);
        }
        if unreachable > 0 {
            notices.push(Notice::RingsUnreachable {
                threads: unreachable,
                errno: unreachable_errno,
            });
        }
        if objects_lost > 0 {
            notices.push(Notice::ObjectsLost {
                objects: objects_lost,
            });
        }
        if calls_in_handlers > 0 {
            notices.push(Notice::CallsInHandlers {
                calls: calls_in_handlers,
            });
        }
        if refused > 0 {
            notices.push(Notice::FunctionsRefused { refused, patched });
        }
        if calls_past_depth > 0 {
            notices.push(Notice::CallsPastDepth {
                calls: calls_past_depth,
            });
        }
        notices.extend(Notice::disk_filled(&self.output, &summary));
        if let Some(what) = failed {
            // The program ran: what it recorded is kept (its run cannot be had again), and the
            // recording says it lacks what was asked for, failing as a record that could not
            // open an event does.
            return Err(ProgramError::Incomplete {
                what,
                output: self.output,
                notices,
            });
        }
        Ok(Finished {
            summary,
            end,
            notices,
            threads: traced,
            rings,
        })
    }
}
