//! `perfaux export --format firefox`: the Firefox Profiler's processed
//! format, the JSON fxprof-processed-profile 0.8 (samply's crate) writes,
//! written here in bounded memory.
//!
//! The Firefox Profiler is sample-based: a perf sample becomes a sample
//! with its callchain; a traced thread gets a sample at every stack change
//! (each call and return) with the stack it changed to, so its call tree
//! and stack chart show the traced calls. Every call is also an interval
//! marker, every uevent an instant marker with its type and payload, and
//! losses and pause/resume windows are markers.
//!
//! # Why by hand
//!
//! fxprof-processed-profile's model is a profile in memory: every sample
//! and marker stays there until the profile is serialized (474 MB for 2.8
//! million calls). The format is column-oriented, per thread: the columns
//! whose length grows with the trace (samples, markers, the string array,
//! which holds uevent payloads) are appended to as the pass goes, so they
//! are spooled to an anonymous temporary file (module `spool`, in
//! `$TMPDIR`) and
//! copied into the output at the end. What stays in memory grows with the
//! program's shape, not the trace: per thread, its name, open calls, frame,
//! function and stack tables (the functions it called, as many as the
//! view's names; the distinct call paths, bounded: module `tables`) and a
//! buffer per column, the buffers together bounded too (`spool::BUDGET`).
//!
//! The output is the crate's byte for byte (both format numbers with
//! serde_json; the crate stays a dev-dependency, `reference` is its
//! exporter, and the tests compare the two on the same events and
//! recordings), with two differences a crafted or very long trace can
//! bring: marker strings remembered for reuse are bounded (a string seen
//! again after the bound was reached may be written again: the same
//! profile, a longer string array) and so are call paths (module `tables`).
//! And a thread whose samples came out of time order is sorted with equal
//! times in the order they came, where the crate's unstable sort leaves
//! the order of equal times unspecified.

mod json;
mod markers;
#[cfg(any(test, feature = "fxprof-oracle"))]
pub mod reference;
mod samples;
mod spool;
mod tables;
#[cfg(test)]
mod tests;
mod write;

use std::collections::HashMap;
use std::io::{self, Write};

use crate::event::{Call, FuncId, Names, Sink, ViewEvent, uevent_label};
use crate::offcpu::ThreadSwitches;
use crate::perfetto::payload_text;

use markers::{Data, Markers};
use samples::{NO_STACK, Samples};
use spool::Spool;
use tables::{Shared, Tables};

/// A process: its pid, name (the pid's comm when its first thread was
/// seen) and when that was.
struct Process {
    pid: u32,
    name: String,
    start: u64,
}

/// A thread and its tables and columns.
struct Thread {
    tid: u32,
    process: usize,
    name: Option<String>,
    start: u64,
    is_main: bool,
    tables: Tables,
    samples: Samples,
    markers: Markers,
    /// Open calls: function, stack, start (the view bounds how many).
    calls: Vec<(FuncId, u32, u64)>,
    pause_start: Option<u64>,
}

/// Builds the profile as the pass hands events over.
pub struct FirefoxProfile {
    product: String,
    spool: Spool,
    shared: Shared,
    processes: Vec<Process>,
    process_of_pid: HashMap<u32, usize>,
    threads: Vec<Thread>,
    thread_of_tid: HashMap<u32, usize>,
    /// The last event's thread, for the next call of the same thread.
    last: Option<(u32, usize)>,
    comms: HashMap<u32, (u32, String)>,
    /// The marker types used (their schemas go in the profile's meta).
    used_call: bool,
    used_info: bool,
    /// The threads' context switches, markers off the CPU at the end.
    switches: ThreadSwitches,
}

impl FirefoxProfile {
    /// An empty profile of `product` (the recorded command).
    pub fn new(product: &str) -> Self {
        FirefoxProfile {
            product: product.to_owned(),
            spool: Spool::default(),
            shared: Shared::default(),
            processes: Vec::new(),
            process_of_pid: HashMap::new(),
            threads: Vec::new(),
            thread_of_tid: HashMap::new(),
            last: None,
            comms: HashMap::new(),
            used_call: false,
            used_info: false,
            switches: ThreadSwitches::default(),
        }
    }

    /// The thread `tid`, made (with its process) at `time` when new.
    #[inline]
    fn thread(&mut self, pid: u32, tid: u32, time: u64) -> usize {
        if let Some((t, i)) = self.last
            && t == tid
        {
            return i;
        }
        let i = match self.thread_of_tid.get(&tid) {
            Some(&i) => i,
            None => self.new_thread(pid, tid, time),
        };
        self.last = Some((tid, i));
        i
    }

    #[cold]
    fn new_thread(&mut self, pid: u32, tid: u32, time: u64) -> usize {
        let process = match self.process_of_pid.get(&pid) {
            Some(&p) => p,
            None => {
                let name = self
                    .comms
                    .get(&pid)
                    .map_or_else(|| format!("pid {pid}"), |c| c.1.clone());
                self.processes.push(Process {
                    pid,
                    name,
                    start: time,
                });
                self.process_of_pid.insert(pid, self.processes.len() - 1);
                self.processes.len() - 1
            }
        };
        self.threads.push(Thread {
            tid,
            process,
            name: self.comms.get(&tid).map(|c| c.1.clone()),
            start: time,
            is_main: tid == pid,
            tables: Tables::default(),
            samples: Samples::default(),
            markers: Markers::default(),
            calls: Vec::new(),
            pause_start: None,
        });
        self.thread_of_tid.insert(tid, self.threads.len() - 1);
        self.threads.len() - 1
    }

    fn pid(&self, tid: u32) -> u32 {
        self.comms.get(&tid).map_or(tid, |c| c.0)
    }

    /// A call began: its frame under the open calls', a sample there.
    #[inline]
    fn enter(&mut self, names: &Names, c: Call) -> io::Result<()> {
        let i = self.thread(c.pid, c.tid, c.time);
        let t = &mut self.threads[i];
        let (spool, shared) = (&mut self.spool, &mut self.shared);
        let parent = t.calls.last().map(|c| c.1);
        let s = t.tables.func_string(spool, c.func, names.name(c.func))?;
        let frame = t.tables.frame(s);
        let stack = t.tables.stack(spool, shared, parent, frame)?;
        t.calls.push((c.func, stack, c.time));
        t.samples.add(spool, c.time, stack)?;
        self.keep_budget()
    }

    /// A call returned: its marker, a sample at its caller's stack.
    #[inline]
    fn exit(&mut self, names: &Names, c: Call) -> io::Result<()> {
        let i = self.thread(c.pid, c.tid, c.time);
        let t = &mut self.threads[i];
        let spool = &mut self.spool;
        let Some((func, _, start)) = t.calls.pop() else {
            return Ok(());
        };
        let parent = t.calls.last().map_or(NO_STACK, |c| c.1);
        let s = t.tables.func_string(spool, func, names.name(func))?;
        t.markers.add(spool, s, start, Some(c.time), Data::Call)?;
        self.used_call = true;
        t.samples.add(spool, c.time, parent)?;
        self.keep_budget()
    }

    /// A marker with a number and a text, on thread `tid`.
    fn info(
        &mut self,
        (pid, tid): (u32, u32),
        (start, end): (u64, Option<u64>),
        name: &str,
        number: f64,
        text: &str,
    ) -> io::Result<()> {
        let i = self.thread(pid, tid, start);
        let t = &mut self.threads[i];
        let (spool, shared) = (&mut self.spool, &mut self.shared);
        let name = t.tables.string(spool, shared, name)?;
        let text = t.tables.string(spool, shared, text)?;
        t.markers
            .add(spool, name, start, end, Data::Info { number, text })?;
        self.used_info = true;
        if self.shared.string_bytes > self.shared.max_string_bytes {
            for t in &mut self.threads {
                t.tables.forget_strings();
            }
            self.shared.string_bytes = 0;
        }
        self.keep_budget()
    }

    /// A sample with its callchain (leaf first).
    fn sample(
        &mut self,
        names: &Names,
        (pid, tid, time): (u32, u32, u64),
        stack: &[FuncId],
    ) -> io::Result<()> {
        let i = self.thread(pid, tid, time);
        let t = &mut self.threads[i];
        let (spool, shared) = (&mut self.spool, &mut self.shared);
        let mut parent = None;
        for &f in stack.iter().rev() {
            let s = t.tables.func_string(spool, f, names.name(f))?;
            let frame = t.tables.frame(s);
            parent = Some(t.tables.stack(spool, shared, parent, frame)?);
        }
        t.samples.add(spool, time, parent.unwrap_or(NO_STACK))?;
        self.keep_budget()
    }

    /// Hands every column's buffer to the spool when together they hold
    /// more than its budget.
    #[inline]
    fn keep_budget(&mut self) -> io::Result<()> {
        if !self.spool.over_budget() {
            return Ok(());
        }
        for t in &mut self.threads {
            self.spool.release(&mut t.tables.strings)?;
            self.spool.release(&mut t.samples.stream)?;
            for s in t.markers.streams() {
                self.spool.release(s)?;
            }
        }
        Ok(())
    }

    /// Writes the profile as JSON, with a marker per interval each thread spent off the CPU.
    pub fn write(mut self, out: impl Write) -> io::Result<()> {
        for (pid, tid, start, end) in self.switches.take_intervals() {
            self.info(
                (pid, tid),
                (start, Some(end)),
                "off-CPU",
                0.0,
                "switched out",
            )?;
        }
        write::profile(self, out)
    }
}

impl Sink for FirefoxProfile {
    #[inline]
    fn enter(&mut self, names: &Names, c: Call) -> io::Result<()> {
        FirefoxProfile::enter(self, names, c)
    }

    #[inline]
    fn exit(&mut self, names: &Names, c: Call, _closed: bool) -> io::Result<()> {
        FirefoxProfile::exit(self, names, c)
    }

    fn event(&mut self, names: &Names, ev: &ViewEvent<'_>) -> io::Result<()> {
        match *ev {
            ViewEvent::Comm { pid, tid, comm } => {
                self.comms.insert(tid, (pid, comm.to_owned()));
                if let Some(&i) = self.thread_of_tid.get(&tid) {
                    self.threads[i].name = Some(comm.to_owned());
                }
                Ok(())
            }
            ViewEvent::Enter { .. } => ev.call().map_or(Ok(()), |c| self.enter(names, c)),
            ViewEvent::Exit { .. } => ev.call().map_or(Ok(()), |c| self.exit(names, c)),
            ViewEvent::Sample {
                pid,
                tid,
                time,
                stack,
                ..
            } => self.sample(names, (pid, tid, time), stack),
            ViewEvent::Uevent {
                pid,
                tid,
                time,
                ty,
                type_name,
                payload,
            } => self.info(
                (pid, tid),
                (time, None),
                &uevent_label(ty, type_name),
                f64::from(ty),
                &payload_text(payload),
            ),
            ViewEvent::PauseResume {
                tid,
                time,
                pause,
                dropped,
            } => {
                let pid = self.pid(tid);
                if dropped {
                    let n = if pause {
                        "dropped pause"
                    } else {
                        "dropped resume"
                    };
                    self.info((pid, tid), (time, None), n, 0.0, "")
                } else if pause {
                    let i = self.thread(pid, tid, time);
                    self.threads[i].pause_start = Some(time);
                    Ok(())
                } else {
                    let i = self.thread(pid, tid, time);
                    match self.threads[i].pause_start.take() {
                        Some(start) => {
                            self.info((pid, tid), (start, Some(time)), "paused", 0.0, "")
                        }
                        None => Ok(()),
                    }
                }
            }
            ViewEvent::Stopped { tid, time } => {
                let pid = self.pid(tid);
                self.info((pid, tid), (time, None), "trace stopped", 0.0, "")
            }
            ViewEvent::Snapshot {
                tid,
                begin,
                end,
                bytes,
                ..
            } => {
                let pid = self.pid(tid);
                self.info((pid, tid), (begin, Some(end)), "snapshot", bytes as f64, "")
            }
            ViewEvent::Lost {
                tid,
                time,
                kind,
                count,
            } => {
                let pid = self.pid(tid);
                self.info((pid, tid), (time, None), kind.name(), count as f64, "")
            }
            // Its calls show under their one name; the profile format has no flows.
            ViewEvent::Tag { .. } => Ok(()),
            ViewEvent::Switch { .. } => {
                self.switches.push_event(ev);
                Ok(())
            }
        }
    }
}
