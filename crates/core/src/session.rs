//! A recording session: what `perf record` sets up, as one object the
//! command line (and any program) can drive.
//!
//! A [`Session`] owns events, their mappings, and the order to read them
//! in. It opens, per traced thread, a `swtrace` event with its data and AUX
//! areas ([`Session::trace_thread`]); adds samplers that carry AUX data
//! ([`Session::sampler`]), probe triggers that pause or resume the trace
//! ([`Session::trigger`]), uevent collection ([`Session::uevents`]); and
//! then drains the data areas and the AUX areas ([`Session::drain`]), takes
//! flight-recorder snapshots ([`Session::snapshot`]) and sums the counters
//! ([`Session::counters`]). Everything here is built from the public
//! syscall-level API ([`crate::perf_event_open`], [`crate::EventFd`]), which
//! stays available for anything the session does not cover.

use perfaux_abi::PerfEventHeader;
use perfaux_abi::attr::{AttrFlags, AuxAction, PerfEventAttr};
use perfaux_abi::consts::*;

use crate::error::{Result, einval};
use crate::event::Target;
use crate::fd::EventFd;
use crate::mmap::{Mmap, Prot, page_size};
use crate::open::perf_event_open_attr;
use crate::pmus::probe::{CONFIG1_ON_EXIT, resolve_probe};
use crate::pmus::{PROBE_TYPE, SWTRACE_TYPE};

/// How a thread is traced.
#[derive(Debug, Clone, Copy)]
pub struct TraceOptions {
    /// Overwrite (flight recorder, AUX mapped read-only) or full trace.
    pub overwrite: bool,
    /// `aux_start_paused`: nothing is traced until a resume trigger fires.
    pub start_paused: bool,
    /// Data area pages (a power of two).
    pub data_pages: usize,
    /// AUX area pages (a power of two).
    pub aux_pages: usize,
    /// `sample_type` of the sideband records' `sample_id`
    /// (`sample_id_all` is set).
    pub sample_type: u64,
}

impl Default for TraceOptions {
    fn default() -> Self {
        Self {
            overwrite: false,
            start_paused: false,
            data_pages: 64,
            aux_pages: 256,
            sample_type: PERF_SAMPLE_TID
                | PERF_SAMPLE_TIME
                | PERF_SAMPLE_CPU
                | PERF_SAMPLE_IDENTIFIER,
        }
    }
}

/// Which AUX action a trigger takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuxTrigger {
    /// `aux_pause`.
    Pause,
    /// `aux_resume`.
    Resume,
}

/// A traced thread: its trace event and mappings.
pub struct TracedThread {
    /// The `swtrace` event (group leader of its samplers and triggers).
    pub event: EventFd,
    /// The data area: sideband, samples, uevents of the group.
    pub data: Mmap,
    /// The AUX area: the trace.
    pub aux: Mmap,
    /// The traced thread.
    pub tid: i32,
    /// Overwrite mode.
    pub overwrite: bool,
    members: Vec<EventFd>,
}

/// What [`Session::drain`] hands out.
pub enum Drained<'a> {
    /// A record from a data area (header and whole record bytes).
    Record {
        tid: i32,
        header: PerfEventHeader,
        bytes: &'a [u8],
    },
    /// AUX bytes at stream position `offset` of a thread's trace.
    Aux {
        tid: i32,
        offset: u64,
        data: &'a [u8],
    },
}

/// Counters summed over a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionCounters {
    /// Records drained from the data areas.
    pub records: u64,
    /// Records the data areas could not take.
    pub lost: u64,
    /// Samples written.
    pub samples: u64,
    /// Samples whose AUX data was empty.
    pub aux_samples_empty: u64,
    /// Pauses dropped by the `aux_in_pause_resume` guard.
    pub dropped_pause: u64,
    /// Resumes dropped by the same guard.
    pub dropped_resume: u64,
}

/// A recording session.
#[derive(Default)]
pub struct Session {
    threads: Vec<TracedThread>,
    records: u64,
}

fn base_attr(type_: u32, config: u64) -> PerfEventAttr {
    PerfEventAttr {
        type_,
        size: PERF_ATTR_SIZE_VER8,
        config,
        flags: AttrFlags::DISABLED,
        ..Default::default()
    }
}

impl Session {
    /// An empty session.
    pub fn new() -> Self {
        Self::default()
    }

    /// The traced threads.
    pub fn threads(&self) -> &[TracedThread] {
        &self.threads
    }

    fn thread_mut(&mut self, tid: i32) -> Result<&mut TracedThread> {
        self.threads
            .iter_mut()
            .find(|t| t.tid == tid)
            .ok_or_else(|| einval("session: thread is not traced"))
    }

    /// Opens a `swtrace` event for `tid` and maps its data and AUX areas.
    /// Returns the trace event's id.
    pub fn trace_thread(&mut self, tid: i32, opts: TraceOptions) -> Result<u64> {
        let mut a = base_attr(SWTRACE_TYPE, 0);
        a.flags |= AttrFlags::SAMPLE_ID_ALL;
        a.sample_type = opts.sample_type;
        if opts.start_paused {
            a.aux_action = AuxAction::START_PAUSED;
        }
        let event = perf_event_open_attr(&a, Target::Thread(tid), -1, -1, 0)?;
        let data = event.mmap(0, 1 + opts.data_pages, Prot::READ_WRITE)?;
        let pgoff = 1 + opts.data_pages as u64;
        data.set_aux_area(
            pgoff * page_size() as u64,
            (opts.aux_pages * page_size()) as u64,
        )?;
        let prot = if opts.overwrite {
            Prot::READ_ONLY
        } else {
            Prot::READ_WRITE
        };
        let aux = event.mmap(pgoff, opts.aux_pages, prot)?;
        let id = event.id();
        self.threads.push(TracedThread {
            event,
            data,
            aux,
            tid,
            overwrite: opts.overwrite,
            members: Vec::new(),
        });
        Ok(id)
    }

    fn member(&mut self, tid: i32, mut a: PerfEventAttr) -> Result<u64> {
        let t = self.thread_mut(tid)?;
        a.flags |= AttrFlags::SAMPLE_ID_ALL;
        let ev = perf_event_open_attr(
            &a,
            Target::Thread(tid),
            -1,
            t.event.as_raw(),
            PERF_FLAG_FD_OUTPUT,
        )?;
        let id = ev.id();
        t.members.push(ev);
        Ok(id)
    }

    /// A sampler in `tid`'s trace group: every `period` entries of the
    /// probe named `probe`, a sample with `sample_type` and, when
    /// `aux_sample_size` is not 0, the newest `aux_sample_size` bytes of
    /// trace (PERF_SAMPLE_AUX). Samples go to the trace's data area.
    pub fn sampler(
        &mut self,
        tid: i32,
        probe: &str,
        period: u64,
        sample_type: u64,
        aux_sample_size: u32,
    ) -> Result<u64> {
        let mut a = base_attr(PROBE_TYPE, resolve_probe(probe));
        a.sample_period = period;
        a.sample_type = sample_type;
        if aux_sample_size != 0 {
            a.sample_type |= PERF_SAMPLE_AUX;
            a.aux_sample_size = aux_sample_size;
        }
        self.member(tid, a)
    }

    /// A probe trigger in `tid`'s trace group: at every `period`-th entry
    /// (or return, `on_exit`) of `probe`, pause or resume the trace.
    pub fn trigger(
        &mut self,
        tid: i32,
        probe: &str,
        on_exit: bool,
        action: AuxTrigger,
        period: u64,
    ) -> Result<u64> {
        let mut a = base_attr(PROBE_TYPE, resolve_probe(probe));
        a.sample_period = period.max(1);
        a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_IDENTIFIER;
        if on_exit {
            a.config1 = CONFIG1_ON_EXIT;
        }
        a.aux_action = match action {
            AuxTrigger::Pause => AuxAction::PAUSE,
            AuxTrigger::Resume => AuxAction::RESUME,
        };
        self.member(tid, a)
    }

    /// Collects `tid`'s uevents into its trace's data area.
    pub fn uevents(&mut self, tid: i32) -> Result<u64> {
        let mut a = base_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY);
        a.flags |= AttrFlags::UEVENTS;
        a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_IDENTIFIER;
        self.member(tid, a)
    }

    /// Enables every group (`PERF_EVENT_IOC_ENABLE` with the group flag).
    pub fn enable(&self) -> Result<()> {
        for t in &self.threads {
            t.event.enable(PERF_IOC_FLAG_GROUP)?;
        }
        Ok(())
    }

    /// Disables every group.
    pub fn disable(&self) -> Result<()> {
        for t in &self.threads {
            t.event.disable(PERF_IOC_FLAG_GROUP)?;
        }
        Ok(())
    }

    /// Reads what is new: each data area's records, then (full-trace mode)
    /// each AUX area's new bytes. Overwrite-mode AUX areas are read with
    /// [`Session::snapshot`]. A corrupt ring is an error naming where.
    pub fn drain(&mut self, mut f: impl FnMut(Drained<'_>)) -> Result<()> {
        let corrupt = |e: perfaux_ring::RingError| {
            let _ = e;
            einval("session: the ring's head or a record is corrupt")
        };
        for t in &mut self.threads {
            let tid = t.tid;
            if let Some(r) = t.data.data_reader() {
                for rec in r.read_records().map_err(corrupt)? {
                    let rec = rec.map_err(corrupt)?;
                    self.records += 1;
                    f(Drained::Record {
                        tid,
                        header: rec.header,
                        bytes: rec.bytes,
                    });
                }
            }
            if !t.overwrite
                && let Some(a) = t.aux.aux_reader()
            {
                let got = a.read().map_err(corrupt)?;
                if !got.data.is_empty() {
                    f(Drained::Aux {
                        tid,
                        offset: got.offset,
                        data: got.data,
                    });
                }
            }
        }
        Ok(())
    }

    /// A flight-recorder snapshot of `tid`'s trace: disable, read the AUX
    /// area up to `aux_head` (oldest byte first, wrapped or not), enable
    /// again. Returns (stream offset of the first byte, bytes).
    pub fn snapshot(&mut self, tid: i32) -> Result<(u64, Vec<u8>)> {
        let t = self.thread_mut(tid)?;
        t.event.disable(0)?;
        let out = match t.aux.aux_reader() {
            Some(a) => {
                let s = a
                    .read_snapshot(0)
                    .map_err(|_| einval("session: AUX head is corrupt"))?;
                (s.offset, s.data.to_vec())
            }
            None => (0, Vec::new()),
        };
        t.event.enable(0)?;
        Ok(out)
    }

    /// The session's counters.
    pub fn counters(&self) -> SessionCounters {
        let mut c = SessionCounters {
            records: self.records,
            ..Default::default()
        };
        for t in &self.threads {
            for ev in std::iter::once(&t.event).chain(&t.members) {
                let k = ev.event().counters();
                c.lost += k.lost;
                c.samples += k.samples;
                c.aux_samples_empty += k.aux_samples_empty;
                c.dropped_pause += k.dropped_pause;
                c.dropped_resume += k.dropped_resume;
            }
        }
        c
    }
}
