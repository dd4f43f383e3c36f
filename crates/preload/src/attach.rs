//! `perfaux record -p PID` / `-t TID`: the running kernel's events of a process that is
//! already running (what `perf record -p` records: samples with call chains, counts, context
//! switches), without the call trace, which needs the runtime loaded when the program starts.
//!
//! As perf does, the recording begins with what the process already is: a COMM for each of
//! its threads and an MMAP2 for each of its mappings from /proc (executable ones; all of
//! them when a sampler copies stacks, for the unwinder's `.eh_frame_hdr`), timed before the
//! events start. Each event is opened for every thread on every CPU with `inherit` (the
//! threads they make later are followed), and on each CPU the events of all threads write
//! into one ring (PERF_EVENT_IOC_SET_OUTPUT, perf's per-CPU buffers). The recording ends when
//! the process ends or the caller stops it; the process is left running.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::time::Duration;

use perfaux_abi::consts::PERF_SAMPLE_STACK_USER;
use perfaux_recorder::synth::{comm_record, sample_id, synth_process_mmaps};
use perfaux_recorder::{EventSpec, Output, RecordSummary, Recorder, RecorderOptions};

use crate::error::ProgramError;
use crate::kernel_events::{self, KernelEvent};
use crate::notice::Notice;
use crate::process_ends::ProcessEnds;

/// What to record of a running process.
#[derive(Debug, Clone, Default)]
pub struct AttachOptions {
    /// The kernel's events to open (samplers, software counters); the first is the
    /// recording's tracking event (its COMM and MMAP2 records).
    pub events: Vec<EventSpec>,
    /// Also the threads' context switches (`perf record --switch-events`).
    pub switch_events: bool,
    /// Only these threads (`-t`), not every thread of the process nor those they make.
    pub tids: Option<Vec<u32>>,
    /// HEADER_TRACING_DATA for the tracepoints among `events`.
    pub tracing_data: Option<Vec<u8>>,
}

/// A recording of a running process's kernel events.
pub struct AttachedProcess {
    rec: Recorder,
    pid: u32,
    pidfd: Option<OwnedFd>,
    ended: bool,
    threads: usize,
    notices: Vec<Notice>,
}

/// What one step saw.
pub struct AttachStep {
    /// The process ended: the next call is [`AttachedProcess::finish`].
    pub ended: bool,
    /// What the start had to say (its first step).
    pub notices: Vec<Notice>,
}

/// The threads of process `pid` (its /proc task directory).
fn threads_of(pid: u32) -> std::io::Result<Vec<u32>> {
    let mut tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// The process a thread belongs to (`Tgid:` of its status).
pub fn process_of(tid: u32) -> std::io::Result<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:")?.trim().parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("/proc/{tid}/status has no Tgid")))
}

/// Why a refusal may be the process's owner's: EACCES or EPERM for a process of another
/// user (perf_event_open asks for ptrace access to it), said with what would allow it.
fn other_owner(pid: u32, e: &kernel_events::KernelError) -> String {
    use std::os::unix::fs::MetadataExt;
    if !matches!(e.source.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
        return String::new();
    }
    let Ok(owner) = std::fs::metadata(format!("/proc/{pid}")).map(|m| m.uid()) else {
        return String::new();
    };
    let me = rustix::process::geteuid().as_raw();
    if owner == me {
        return String::new();
    }
    format!(
        "; process {pid} is uid {owner}'s, not yours (uid {me}): recording another user's \
         process takes root, or CAP_PERFMON with ptrace access to it"
    )
}

/// A thread's name, as /proc has it (its `comm`, without the newline).
fn comm_of(pid: u32, tid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
        .map(|s| s.trim_end_matches('\n').to_owned())
        .unwrap_or_else(|_| format!(":{tid}"))
}

impl AttachedProcess {
    /// Begins the recording of process `pid` into `output`: its threads named and its
    /// mappings placed, then its events opened and enabled. A process that does not exist,
    /// or whose events the kernel refuses all of, is an error that says which and why.
    pub fn start(
        pid: u32,
        options: AttachOptions,
        output: PathBuf,
    ) -> Result<AttachedProcess, ProgramError> {
        let no_process =
            |e: std::io::Error| ProgramError::Options(format!("no process {pid} to record ({e})"));
        let tids = match &options.tids {
            Some(t) => t.clone(),
            None => threads_of(pid).map_err(no_process)?,
        };
        if tids.is_empty() {
            return Err(ProgramError::Options(format!(
                "process {pid} has no threads"
            )));
        }
        let mut specs = options.events;
        let asked = specs.len();
        if options.switch_events {
            specs.push(EventSpec::new(
                kernel_events::SWITCH_EVENT_NAME,
                kernel_events::switch_attr(),
                0,
            ));
        }
        if specs.is_empty() {
            return Err(ProgramError::Options("no events to record".into()));
        }
        let stacks = specs
            .iter()
            .any(|s| s.open.sample_type & PERF_SAMPLE_STACK_USER != 0);
        let mut events = Vec::new();
        for (i, s) in specs.iter_mut().enumerate() {
            s.leader = i;
            if i == 0 {
                kernel_events::with_tracking(&mut s.open, stacks);
            }
            events.push(KernelEvent {
                name: s.name.clone(),
                attr: s.open,
                index: i,
            });
        }
        let page = perfaux_core::page_size() as u64;
        let opts = RecorderOptions {
            data_size: page,
            aux_size: page,
            overwrite: false,
        };
        let mut rec = Recorder::new(specs, opts, &[], Output::File(output))?;
        if let Some(t) = options.tracing_data {
            rec.set_tracing_data(t);
        }
        // What the process is now, before any of the kernel's records: its names and maps.
        let first_id = kernel_events::kernel_id(0, 0);
        let now = perfaux_swtrace::clock::monotonic_ns();
        for &tid in &tids {
            let sid = sample_id(pid, tid, now, first_id);
            let r = comm_record(rec.file_info(), (pid, tid), &comm_of(pid, tid), false, sid)?;
            rec.write_record(&r)?;
        }
        synth_process_mmaps(&mut rec, pid, stacks, sample_id(pid, pid, now, first_id))?;
        let mut notices = Vec::new();
        // One pass over the threads listed, as perf's -p: a thread they make from now on
        // inherits their events (-p); one made between the listing and the opening of its
        // maker's is not recorded (a second listing would open the events twice on the
        // threads that inherited them).
        let inherit = options.tids.is_none();
        let (rings, refused) = kernel_events::open_on_tasks(pid, &tids, &events, inherit);
        let opened: std::collections::HashSet<usize> = rings.iter().map(|r| r.index()).collect();
        for r in rings {
            let ids = [(r.index(), r.id())];
            rec.add_ring_of(Box::new(r), &ids)?;
        }
        for (name, e) in refused {
            let owner = other_owner(pid, &e);
            notices.push(Notice::AttachedEventRefused {
                asked: name != kernel_events::SWITCH_EVENT_NAME,
                event: name,
                pid,
                why: format!("{e}{owner}"),
            });
        }
        if opened.is_empty() || (asked > 0 && !(0..asked).any(|i| opened.contains(&i))) {
            let why: Vec<String> = notices.iter().map(ToString::to_string).collect();
            return Err(ProgramError::Options(format!(
                "no event of process {pid} could be opened: {}",
                why.join("; ")
            )));
        }
        rec.enable()?;
        Ok(AttachedProcess {
            rec,
            pid,
            pidfd: ProcessEnds::pidfd(pid),
            ended: false,
            threads: tids.len(),
            notices,
        })
    }

    /// The process recorded.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Threads the events were opened on (those made later inherit them).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Waits up to `timeout` (less if the process ends), then drains the rings.
    pub fn step(&mut self, timeout: Duration) -> Result<AttachStep, ProgramError> {
        if !self.ended {
            self.ended = match &self.pidfd {
                Some(fd) => {
                    let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
                    let t = rustix::time::Timespec {
                        tv_sec: timeout.as_secs() as i64,
                        tv_nsec: i64::from(timeout.subsec_nanos()),
                    };
                    matches!(rustix::event::poll(&mut fds, Some(&t)), Ok(n) if n > 0)
                }
                None => {
                    std::thread::sleep(timeout);
                    !std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
                }
            };
        }
        self.rec.drain()?;
        Ok(AttachStep {
            ended: self.ended,
            notices: std::mem::take(&mut self.notices),
        })
    }

    /// Stops the events and writes the recording; the process goes on.
    pub fn finish(mut self) -> Result<RecordSummary, ProgramError> {
        self.rec.disable()?;
        self.rec.drain()?;
        Ok(self.rec.finish()?)
    }
}
