//! One thread slot of a traced program's memory as a ring of the [`perfaux_recorder::Recorder`]
//! (its documented seam for rings in memory it did not map): the recorder drains, snapshots
//! and files it as it does its own threads' rings, while the bytes are read by the
//! [`ProgramSession`], which trusts nothing the program wrote.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use crate::host::{Drained, ProgramSession, RingDamage};
use perfaux_abi::consts::PERF_AUX_FLAG_OVERWRITE;
use perfaux_perfdata::trace_section::ChunkKind;
use perfaux_recorder::ring::{AuxBytes, AuxFn, RecordFn};
use perfaux_recorder::{RecordError, Ring};
use perfaux_ring::Wakeup;

/// [`SlotRing`]'s `retiring`: the thread runs.
pub(crate) const RUNNING: u8 = 0;
/// [`SlotRing`]'s `retiring`: the thread ended cleanly (its slot is ENDED).
pub(crate) const ENDED: u8 = 1;
/// [`SlotRing`]'s `retiring`: the thread is gone without a word, with its process image (an
/// exec) or its process (ended without the thread's destructors).
pub(crate) const GONE: u8 = 2;

/// The ring of the program's thread that claimed `slot`.
pub(crate) struct SlotRing {
    session: Arc<Mutex<ProgramSession>>,
    slot: usize,
    tid: i32,
    event_id: u64,
    /// Set once the program ended: a drain then also takes the bytes the thread wrote past its
    /// last published aux_head (a crash or SIGKILL leaves them unpublished).
    ended: Arc<AtomicBool>,
    /// The unpublished bytes were taken (they are copied, not consumed: once only).
    unpublished_taken: bool,
    /// Set by the recording loop once it saw the thread end ([`ENDED`]: its slot ENDED;
    /// [`GONE`]: its process image exec'd or its process ended, either of which ended the
    /// thread without its destructors): the next drain takes the thread's last bytes (those past its last published
    /// head too, for a thread gone; in overwrite mode, its last snapshot) and gives the slot
    /// to the next thread.
    retiring: Arc<AtomicU8>,
    /// The slot went to the next thread, or the program wrote over the ring's memory: this
    /// ring reads nothing more.
    retired: bool,
    /// Trace bytes taken from the ring so far (what a damaged ring's thread keeps).
    taken: u64,
}

impl SlotRing {
    /// The ring of `slot`, whose thread `tid` traces with the event of sample id `event_id`.
    pub(crate) fn new(
        session: Arc<Mutex<ProgramSession>>,
        slot: usize,
        tid: i32,
        event_id: u64,
        ended: Arc<AtomicBool>,
        retiring: Arc<AtomicU8>,
    ) -> SlotRing {
        SlotRing {
            session,
            slot,
            tid,
            event_id,
            ended,
            unpublished_taken: false,
            retiring,
            retired: false,
            taken: 0,
        }
    }

    /// Runs one of the session's per-slot reads with `each` as its sink; an error of the
    /// recorder's sink comes back as itself (kept aside, typed, while the session's read
    /// stops at the io::Error it is given in its place). A ring error (its memory fails the
    /// session's checks: the program wrote over it, a wild pointer or a deliberate write) is
    /// that ring's loss alone: the session keeps what was damaged and how much of the thread's
    /// trace came before, and the ring retires (its slot is never given to another thread),
    /// while every other ring is read on.
    fn read(
        &mut self,
        read: impl FnOnce(
            &mut ProgramSession,
            usize,
            &mut dyn FnMut(Drained<'_>) -> std::io::Result<()>,
        ) -> std::io::Result<u64>,
        mut each: impl FnMut(Drained<'_>) -> perfaux_recorder::Result<()>,
    ) -> perfaux_recorder::Result<()> {
        let mut sink_err: Option<RecordError> = None;
        let mut s = self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let r = read(&mut s, self.slot, &mut |d| {
            each(d).map_err(|e| {
                sink_err = Some(e);
                std::io::Error::other("the recording stopped the drain")
            })
        });
        match (r, sink_err) {
            (_, Some(e)) => Err(e),
            (Err(e), None) => {
                s.ring_damaged(RingDamage {
                    tid: self.tid,
                    slot: self.slot,
                    what: e.to_string(),
                    trace_bytes_kept: self.taken,
                });
                self.retired = true;
                Ok(())
            }
            (Ok(_), None) => Ok(()),
        }
    }
}

/// AUX bytes of the event `event_id` as the recorder takes them (none for a record).
fn aux_bytes<'a>(event_id: u64, d: &Drained<'a>) -> Option<AuxBytes<'a>> {
    let (offset, data, kind, flags) = match *d {
        Drained::Aux { offset, bytes, .. } => (offset, bytes, ChunkKind::Trace, 0),
        Drained::Snapshot {
            offset,
            wrapped,
            bytes,
            ..
        } => {
            let flags = if wrapped {
                PERF_AUX_FLAG_OVERWRITE as u32
            } else {
                0
            };
            (offset, bytes, ChunkKind::Snapshot, flags)
        }
        Drained::Record { .. } => return None,
    };
    Some(AuxBytes {
        event_id,
        offset,
        data,
        kind,
        flags,
    })
}

impl Ring for SlotRing {
    fn tid(&self) -> i32 {
        self.tid
    }

    fn read_records(&mut self, f: &mut RecordFn<'_>) -> perfaux_recorder::Result<()> {
        if self.retired {
            return Ok(());
        }
        self.read(
            |s, i, sink| s.drain_slot_records(i, sink),
            |d| match d {
                Drained::Record { bytes, .. } => f(bytes),
                _ => Ok(()),
            },
        )
    }

    /// The recorder drains a ring's records before its AUX bytes: a retiring ring's last
    /// drain ends here, and its slot goes to the next thread.
    fn read_aux(&mut self, f: &mut AuxFn<'_>) -> perfaux_recorder::Result<()> {
        if self.retired {
            return Ok(());
        }
        let retiring = self.retiring.load(Ordering::Acquire);
        let unpublished =
            (self.ended.load(Ordering::Acquire) || retiring == GONE) && !self.unpublished_taken;
        let id = self.event_id;
        let mut taken = 0;
        self.read(
            |s, i, sink| {
                let mut n = s.drain_slot_aux(i, sink)?;
                if unpublished {
                    n += s.drain_unpublished_slot(i, sink)?;
                }
                if retiring != RUNNING {
                    // Overwrite mode: the thread's newest trace, as a snapshot at its end
                    // would have it (full trace: drained above, nothing is taken here).
                    if s.overwrite() {
                        n += s.snapshot_slot(i, sink)?;
                    }
                    if retiring == GONE {
                        s.end_gone_slot(i);
                    }
                    s.recycle_slot(i);
                }
                Ok(n)
            },
            |d| match aux_bytes(id, &d) {
                Some(a) => {
                    taken += a.data.len() as u64;
                    f(a)
                }
                None => Ok(()),
            },
        )?;
        self.taken += taken;
        self.unpublished_taken |= unpublished;
        self.retired |= retiring != RUNNING;
        Ok(())
    }

    fn snapshot(&mut self, f: &mut AuxFn<'_>) -> perfaux_recorder::Result<()> {
        if self.retired {
            return Ok(());
        }
        let id = self.event_id;
        self.read(
            |s, i, sink| s.snapshot_slot(i, sink),
            |d| match aux_bytes(id, &d) {
                Some(a) => f(a),
                None => Ok(()),
            },
        )
    }

    /// The runtime enables the thread's events itself when it opens them.
    fn set_enabled(&self, _on: bool) -> perfaux_recorder::Result<()> {
        Ok(())
    }

    /// The program's events live in its own perf core: their counts stay there.
    fn dropped_pause_resume(&self) -> u64 {
        0
    }

    fn retired(&self) -> bool {
        self.retired
    }

    /// No wakeup crosses the process boundary: the recording loop polls.
    fn wakeup(&self) -> Option<Arc<Wakeup>> {
        None
    }
}
