//! The rings a [`crate::Recorder`] drains, behind one trait: the seam for
//! rings the recorder did not open itself.
//!
//! [`ThreadRing`] is the ring of one thread's events opened through
//! perfaux-core (the AUX event as leader of the buffer, the others
//! redirected into it with SET_OUTPUT). A ring that arrives while
//! recording (a thread that appears later, a ring in memory the recorder
//! did not map, such as a traced program's memfd) implements [`Ring`] and
//! is handed to [`crate::Recorder::add_ring`] with the sample ids its
//! records carry; from then on it is drained, woken on and snapshotted like
//! the recorder's own.

use std::sync::Arc;

use perfaux_core::{EventFd, EventState, Mmap, Prot, Target, page_size, perf_event_open_attr};
use perfaux_perfdata::trace_section::ChunkKind;
use perfaux_ring::Wakeup;

use crate::error::{RecordError, Result};
use crate::spec::{EventSpec, RecorderOptions};

/// Bytes of an AUX area handed to the recorder.
#[derive(Debug, Clone, Copy)]
pub struct AuxBytes<'a> {
    /// Sample id of the AUX event.
    pub event_id: u64,
    /// Position of `data[0]` in the event's AUX stream.
    pub offset: u64,
    /// The bytes, as the area held them.
    pub data: &'a [u8],
    /// Trace, snapshot or uevent log.
    pub kind: ChunkKind,
    /// `PERF_AUX_FLAG_OVERWRITE` when a snapshot's area had wrapped (its
    /// first bytes start mid-stream).
    pub flags: u32,
}

/// Callback for each record of a data area.
pub type RecordFn<'a> = dyn FnMut(&[u8]) -> Result<()> + 'a;
/// Callback for AUX bytes.
pub type AuxFn<'a> = dyn FnMut(AuxBytes<'_>) -> Result<()> + 'a;

/// One ring the recorder drains.
pub trait Ring: Send {
    /// The thread the ring's events observe.
    fn tid(&self) -> i32;
    /// Hands every whole record of the data area to `f`, then frees them.
    fn read_records(&mut self, f: &mut RecordFn<'_>) -> Result<()>;
    /// Full-trace mode: hands the new AUX bytes to `f`, then frees them.
    fn read_aux(&mut self, f: &mut AuxFn<'_>) -> Result<()>;
    /// Overwrite mode: stops the AUX event, hands the area's bytes (and
    /// whether it wrapped) to `f`, starts the event again.
    fn snapshot(&mut self, f: &mut AuxFn<'_>) -> Result<()>;
    /// Starts (`true`) or stops the ring's events.
    fn set_enabled(&self, on: bool) -> Result<()>;
    /// The wakeup the producer signals at its watermarks, if any.
    fn wakeup(&self) -> Option<Arc<Wakeup>>;
    /// Pauses and resumes the ring's AUX event dropped so far because
    /// another was in progress (its `aux_in_pause_resume` guard), summed;
    /// 0 without an AUX event.
    fn dropped_pause_resume(&self) -> u64;
    /// Whether the ring is done for good (its thread ended and its last bytes were taken):
    /// the recorder lets go of it after a drain. Its count of dropped pauses and resumes
    /// is kept.
    fn retired(&self) -> bool {
        false
    }
}

/// A thread's events, opened and mapped by the recorder.
pub struct ThreadRing {
    tid: i32,
    names: Vec<String>,
    fds: Vec<EventFd>,
    data: Mmap,
    /// The AUX mapping and the index of its event in `fds`.
    aux: Option<(Mmap, usize)>,
    overwrite: bool,
    log_aux: bool,
    /// Every event had exited (its thread ended, `perf_event_exit_task`) before the last
    /// read of the areas began, so that read took the last bytes: the ring is done.
    done: bool,
}

fn event_err(
    ev: &str,
    tid: i32,
    what: impl Into<String>,
) -> impl FnOnce(perfaux_core::Error) -> RecordError {
    let (event, what) = (ev.to_string(), what.into());
    move |source| RecordError::Event {
        event,
        tid,
        what,
        source,
    }
}

/// An mmap refusal, with perf's advice when it is the locked-memory limit.
fn mmap_what(area: &str, e: &perfaux_core::Error) -> String {
    let mut msg = format!("mmap of the {area}");
    if e.errno == perfaux_abi::errno::EPERM {
        msg.push_str(
            " (Permission error mapping pages. Consider increasing \
             /proc/sys/kernel/perf_event_mlock_kb, or try again with a smaller value of -m.)",
        );
    }
    msg
}

impl ThreadRing {
    /// Opens every event of `events` on thread `tid` and maps the buffer.
    pub(crate) fn open(tid: i32, events: &[EventSpec], opts: &RecorderOptions) -> Result<Self> {
        let mut fds: Vec<EventFd> = Vec::with_capacity(events.len());
        for (i, ev) in events.iter().enumerate() {
            let group_fd = if ev.leader == i {
                -1
            } else {
                fds[ev.leader].as_raw()
            };
            let fd = perf_event_open_attr(&ev.open, Target::Thread(tid), -1, group_fd, 0)
                .map_err(event_err(&ev.name, tid, "perf_event_open"))?;
            fds.push(fd);
        }
        // The buffer belongs to the AUX event if there is one (its AUX area
        // hangs off the buffer), else to the first event.
        let owner = events.iter().position(|e| e.has_aux).unwrap_or(0);
        let name = &events[owner].name;
        let page = page_size() as u64;
        let data_pages = (opts.data_size / page) as usize;
        let data = fds[owner]
            .mmap(0, 1 + data_pages, Prot::READ_WRITE)
            .map_err(|e| {
                let what = mmap_what("data area", &e);
                event_err(name, tid, what)(e)
            })?;
        let aux = if events[owner].has_aux {
            let aux_off = (1 + data_pages as u64) * page;
            data.set_aux_area(aux_off, opts.aux_size)
                .map_err(event_err(name, tid, "AUX area offset"))?;
            // Overwrite maps the AUX area read-only: the flight recorder.
            let prot = if opts.overwrite {
                Prot::READ_ONLY
            } else {
                Prot::READ_WRITE
            };
            let m = fds[owner]
                .mmap(aux_off / page, (opts.aux_size / page) as usize, prot)
                .map_err(|e| {
                    let what = mmap_what("AUX area", &e);
                    event_err(name, tid, what)(e)
                })?;
            Some((m, owner))
        } else {
            None
        };
        for (i, fd) in fds.iter().enumerate() {
            if i != owner {
                fd.set_output(fds[owner].as_raw()).map_err(event_err(
                    &events[i].name,
                    tid,
                    "SET_OUTPUT",
                ))?;
            }
        }
        Ok(ThreadRing {
            tid,
            names: events.iter().map(|e| e.name.clone()).collect(),
            fds,
            data,
            aux,
            overwrite: opts.overwrite,
            log_aux: events[owner].uevent_log,
            done: false,
        })
    }

    /// The sample ids of the events, in event order.
    pub fn ids(&self) -> Vec<u64> {
        self.fds.iter().map(|f| f.id()).collect()
    }

    fn aux_kind(&self, snapshot: bool) -> ChunkKind {
        match (self.log_aux, snapshot) {
            (true, _) => ChunkKind::UeventLog,
            (false, true) => ChunkKind::Snapshot,
            (false, false) => ChunkKind::Trace,
        }
    }
}

impl Ring for ThreadRing {
    fn tid(&self) -> i32 {
        self.tid
    }

    fn read_records(&mut self, f: &mut RecordFn<'_>) -> Result<()> {
        // Seen before the read: an event exits after its last write (the AUX record at its
        // task's exit), so this read and the AUX read after it take everything. In overwrite
        // mode the area stays for the snapshots to come.
        let exited = !self.overwrite
            && self
                .fds
                .iter()
                .all(|fd| fd.event().state() == EventState::Exit);
        let tid = self.tid;
        let ring_err = |source| RecordError::Ring {
            tid,
            what: "data area",
            source,
        };
        let Some(reader) = self.data.data_reader() else {
            return Ok(());
        };
        for r in reader.read_records().map_err(ring_err)? {
            f(r.map_err(ring_err)?.bytes)?;
        }
        self.done = exited;
        Ok(())
    }

    fn retired(&self) -> bool {
        self.done
    }

    fn read_aux(&mut self, f: &mut AuxFn<'_>) -> Result<()> {
        if self.overwrite {
            return Ok(());
        }
        let kind = self.aux_kind(false);
        let Some((m, owner)) = &mut self.aux else {
            return Ok(());
        };
        let event_id = self.fds[*owner].id();
        let Some(reader) = m.aux_reader() else {
            return Ok(());
        };
        let got = reader.read().map_err(|source| RecordError::Ring {
            tid: self.tid,
            what: "AUX area",
            source,
        })?;
        if got.data.is_empty() {
            return Ok(());
        }
        f(AuxBytes {
            event_id,
            offset: got.offset,
            data: got.data,
            kind,
            flags: 0,
        })
    }

    fn snapshot(&mut self, f: &mut AuxFn<'_>) -> Result<()> {
        let kind = self.aux_kind(true);
        let Some((m, owner)) = &mut self.aux else {
            return Ok(());
        };
        let fd = &self.fds[*owner];
        let name = &self.names[*owner];
        // perf's record__read_auxtrace_snapshot: stop, copy, start again.
        fd.disable(0)
            .map_err(event_err(name, self.tid, "snapshot: disable"))?;
        let event_id = fd.id();
        if let Some(reader) = m.aux_reader() {
            let snap = reader
                .read_snapshot(0)
                .map_err(|source| RecordError::Ring {
                    tid: self.tid,
                    what: "AUX snapshot",
                    source,
                })?;
            if !snap.data.is_empty() {
                f(AuxBytes {
                    event_id,
                    offset: snap.offset,
                    data: snap.data,
                    kind,
                    flags: if snap.wrapped {
                        perfaux_abi::consts::PERF_AUX_FLAG_OVERWRITE as u32
                    } else {
                        0
                    },
                })?;
            }
        }
        fd.enable(0)
            .map_err(event_err(name, self.tid, "snapshot: enable"))
    }

    fn set_enabled(&self, on: bool) -> Result<()> {
        if on {
            for (fd, name) in self.fds.iter().zip(&self.names) {
                fd.enable(0).map_err(event_err(name, self.tid, "enable"))?;
            }
        } else {
            for (fd, name) in self.fds.iter().zip(&self.names).rev() {
                fd.disable(0)
                    .map_err(event_err(name, self.tid, "disable"))?;
            }
        }
        Ok(())
    }

    fn dropped_pause_resume(&self) -> u64 {
        self.aux.as_ref().map_or(0, |&(_, i)| {
            let c = self.fds[i].event().counters();
            c.dropped_pause + c.dropped_resume
        })
    }

    fn wakeup(&self) -> Option<Arc<Wakeup>> {
        Some(self.data.buffer().data().wakeup().clone())
    }
}
