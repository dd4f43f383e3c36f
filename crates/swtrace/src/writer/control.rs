//! The core's control calls on the calling thread ([`install`], [`uninstall`], [`pause`],
//! [`resume`], [`set_limit`], the shadow stack users, and the readers [`aux_head`], [`status`],
//! [`callchain`]), and the requests a signal handler defers to the end of the busy section it
//! interrupted.

use std::ptr;
use std::sync::atomic::Ordering::{Relaxed, Release};

use super::config::{AuxMode, Timing, WriterConfig, WriterError, WriterStatus};
use super::lifetime::{existing, thread_trace};
#[cfg(test)]
use super::test_points::{Point, at_point};
use super::thread::{
    REQ_LIMIT, REQ_OBSERVE, REQ_PARK, REQ_PAUSE, REQ_RESUME, REQ_UNOBSERVE, TIMING_SPARSE,
    TIMING_UNTIMED_EXITS, TRACING, ThreadTrace,
};
use crate::clock::{self, ClockSource};
use crate::format::{self, MAX_EVENT};
use crate::shadow::{Callchain, Frame, SHADOW_CAP};

impl ThreadTrace {
    pub(super) fn apply_pending(&self) {
        let req = self.pending.swap(0, Relaxed);
        if req & REQ_LIMIT != 0 {
            let _ = self.set_limit_now(self.pending_limit.load(Relaxed));
        }
        if req & REQ_PAUSE != 0 {
            self.pause_now();
        }
        if req & REQ_PARK != 0 {
            self.park_now();
        }
        if req & REQ_RESUME != 0 {
            self.resume_now();
        }
        // Each in a section of its own; a handler that holds one (this runs from `end`, which a
        // handler may interrupt) gets the request back, to apply at its own `end`.
        if req & REQ_OBSERVE != 0 {
            self.observe_in_section();
        }
        if req & REQ_UNOBSERVE != 0 {
            self.unobserve_in_section();
        }
    }

    /// Pauses the writer (`pmu::stop(PERF_EF_PAUSE)`): PAUSED in the stream.
    pub(super) fn pause_now(&self) -> bool {
        self.stop_writing(false)
    }

    /// [`pause_now`](Self::pause_now) for a stop: writes STOPPED, not PAUSED (the event was
    /// stopped, not aux_paused), and marks the writer parked. A writer already paused writes
    /// nothing (its stream said PAUSED) and stays as it was.
    pub(super) fn park_now(&self) -> bool {
        self.stop_writing(true)
    }

    /// A pause (`park` false) or a park. Control calls check the state only inside the busy
    /// section: a handler that ran before `begin` may have changed it (module doc, "Signal
    /// safety").
    fn stop_writing(&self, park: bool) -> bool {
        #[cfg(test)]
        at_point(Point::ControlBefore);
        if !self.begin() {
            self.pending
                .fetch_or(if park { REQ_PARK } else { REQ_PAUSE }, Relaxed);
            return true;
        }
        if !self.installed.load(Relaxed) || self.paused.load(Relaxed) {
            self.end();
            return false;
        }
        if self.mode.load(Relaxed) == TRACING {
            self.write_boundary(if park {
                format::STOPPED
            } else {
                format::PAUSED
            });
        }
        self.parked.store(park, Relaxed);
        self.paused.store(true, Relaxed);
        self.update_mode();
        self.end();
        true
    }

    pub(super) fn resume_now(&self) -> bool {
        #[cfg(test)]
        at_point(Point::ControlBefore);
        if !self.begin() {
            self.pending.fetch_or(REQ_RESUME, Relaxed);
            return true;
        }
        if !self.installed.load(Relaxed) || !self.paused.load(Relaxed) {
            self.end();
            return false;
        }
        self.paused.store(false, Relaxed);
        // After a park the stream said STOPPED: it starts again with a SYNC alone.
        let boundary = !self.parked.swap(false, Relaxed);
        self.update_mode();
        if self.mode.load(Relaxed) == TRACING {
            self.write_resume_sync(boundary);
        }
        self.end();
        true
    }

    /// LOST/SYNC then RESUMED (if `boundary`): the start of a decodable stretch, with the
    /// boundary visible to a decoder that starts at that SYNC. Busy held.
    pub(super) fn write_resume_sync(&self, boundary: bool) {
        let head = self.head.load(Relaxed);
        let needed =
            (format::MAX_BOUNDARY + format::MAX_SYNC + 2 * format::MAX_LOST + MAX_EVENT) as u64;
        if !self.ensure_space(head, needed) {
            return;
        }
        let now = self.now();
        self.write_lost_and_sync(now);
        if boundary {
            self.write_boundary(format::RESUMED);
        }
    }

    /// Validates and applies a new limit; deferred (and validated when applied) when it
    /// interrupts a packet.
    pub(super) fn set_limit_now(&self, limit: u64) -> Result<(), WriterError> {
        #[cfg(test)]
        at_point(Point::ControlBefore);
        if !self.begin() {
            self.pending_limit.store(limit, Relaxed);
            self.pending.fetch_or(REQ_LIMIT, Relaxed);
            return Ok(());
        }
        if !self.installed.load(Relaxed) {
            self.end();
            return Err(WriterError::NotInstalled);
        }
        if self.limit.load(Relaxed) == u64::MAX {
            // Overwrite mode has no limit to move.
            self.end();
            return Ok(());
        }
        let head = self.head.load(Relaxed);
        let size = self.mask.load(Relaxed) + 1;
        if limit < head || limit - head > size {
            self.end();
            return Err(WriterError::BadLimit {
                limit,
                head,
                size: size as usize,
            });
        }
        self.limit.store(limit, Relaxed);
        self.update_fast_end();
        if self.full_stopped.load(Relaxed)
            && self
                .head
                .load(Relaxed)
                .saturating_add((format::MAX_SYNC + 2 * format::MAX_LOST + MAX_EVENT) as u64)
                <= limit
        {
            self.full_stopped.store(false, Relaxed);
            self.update_mode();
            if self.mode.load(Relaxed) == TRACING {
                // The dropped stretch is reported and a SYNC restarts the stream.
                self.write_resume_sync(false);
            }
        }
        self.end();
        Ok(())
    }
}

/// Installs a writer on the calling thread (`pmu::start`). Unless `start_paused`, the stream
/// starts with a SYNC at once.
pub fn install(config: WriterConfig) -> Result<(), WriterError> {
    let tt = thread_trace().ok_or(WriterError::NotInstalled)?;
    // The whole setup is one busy section: a handler's probes on this thread are counted lost
    // meanwhile, its control calls deferred (pause, resume, set_limit) or refused (install,
    // uninstall), so it never sees a half-built writer.
    if !tt.begin() {
        return Err(WriterError::Busy);
    }
    let result = install_busy(tt, config);
    tt.end();
    result
}

fn install_busy(tt: &'static ThreadTrace, config: WriterConfig) -> Result<(), WriterError> {
    if tt.installed.load(Relaxed) {
        return Err(WriterError::AlreadyInstalled);
    }
    if config.sync_period < 128 {
        return Err(WriterError::BadSyncPeriod(config.sync_period));
    }
    let (ts_every, timing) = match config.timing {
        Timing::Full | Timing::Periodic { every: 1 } => (1, 0),
        Timing::EntryOnly => (1, TIMING_UNTIMED_EXITS | TIMING_SPARSE),
        Timing::Periodic { every: 0 } => return Err(WriterError::BadTimestampEvery),
        Timing::Periodic { every } => (every, TIMING_SPARSE),
    };
    let size = config.region.size();
    let head = config.aux_head;
    let limit = match config.mode {
        AuxMode::Overwrite => u64::MAX,
        AuxMode::FullTrace { limit } => {
            if limit < head || limit - head > size as u64 {
                return Err(WriterError::BadLimit { limit, head, size });
            }
            limit
        }
    };
    let source = config.clock.effective();
    tt.clock_tsc.store(source == ClockSource::Tsc, Relaxed);
    tt.set_conv(clock::anchor(source));
    tt.base.store(config.region.base(), Relaxed);
    tt.mask.store(size as u64 - 1, Relaxed);
    tt.head.store(head, Release);
    tt.limit.store(limit, Relaxed);
    tt.next_sync.store(0, Relaxed);
    tt.fast_end.store(0, Relaxed);
    tt.last_ticks.store(0, Relaxed);
    tt.sync_period.store(u64::from(config.sync_period), Relaxed);
    tt.ts_every.store(ts_every, Relaxed);
    tt.timing.store(timing, Relaxed);
    tt.ts_countdown.store(0, Relaxed);
    tt.on_full
        .store(config.on_full.map_or(0, |f| f as usize), Relaxed);
    tt.lost_nested.store(0, Relaxed);
    tt.lost_full.store(0, Relaxed);
    tt.reported_nested.store(0, Relaxed);
    tt.reported_full.store(0, Relaxed);
    tt.syncs.store(0, Relaxed);
    tt.paused.store(config.start_paused, Relaxed);
    tt.parked.store(false, Relaxed);
    tt.track_paused.store(config.track_paused, Relaxed);
    tt.full_stopped.store(false, Relaxed);
    tt.installed.store(true, Relaxed);
    tt.observe();
    tt.update_mode();
    if tt.mode.load(Relaxed) == TRACING {
        tt.write_resume_sync(false);
    }
    Ok(())
}

/// Removes the calling thread's writer (`pmu::stop`/`del`): writes STOPPED (when there is
/// space) and returns the final counters; `aux_head` is the end of the stream.
pub fn uninstall() -> Result<WriterStatus, WriterError> {
    let tt = existing().ok_or(WriterError::NotInstalled)?;
    #[cfg(test)]
    at_point(Point::ControlBefore);
    if !tt.begin() {
        return Err(WriterError::Busy);
    }
    // Checked inside the section: a handler may have removed the writer just before it.
    if !tt.installed.load(Relaxed) {
        tt.end();
        return Err(WriterError::NotInstalled);
    }
    // Drops not reported yet go into the stream before its end.
    let room = (2 * format::MAX_LOST + format::MAX_BOUNDARY) as u64;
    if !tt.full_stopped.load(Relaxed)
        && tt.head.load(Relaxed).saturating_add(room) <= tt.limit.load(Relaxed)
    {
        let now = tt.now();
        let (head, last) = tt.write_lost(now);
        tt.last_ticks.store(last, Relaxed);
        tt.publish(head);
    }
    tt.write_boundary(format::STOPPED);
    tt.installed.store(false, Relaxed);
    tt.update_mode();
    let status = tt.status();
    tt.base.store(ptr::null_mut(), Relaxed);
    tt.unobserve_if_idle();
    // Requests deferred during the section find no writer when applied.
    tt.end();
    Ok(status)
}

/// Pauses the calling thread's writer (`pmu::stop(PERF_EF_PAUSE)`): writes PAUSED, then
/// nothing until [`resume`]. The calls open at the pause stay on the shadow stack (their
/// returns while paused pop them), so the SYNC at resume names those still open. Calls opened
/// while paused are followed only with [`WriterConfig::track_paused`] or a shadow stack user
/// ([`enable_shadow_stack`]); otherwise the thread is not observed until the resume, which
/// keeps a paused call as cheap as an unobserved one, and those calls and their returns are
/// not in the trace. Returns whether the state changed (or the change was deferred because
/// the call interrupted a packet).
pub fn pause() -> bool {
    existing().is_some_and(ThreadTrace::pause_now)
}

/// Parks the calling thread's writer for a stop of its event from another thread (`pmu::stop`
/// in the signal handler that carries it, where the writer cannot be removed): as [`pause`],
/// but the stream says STOPPED, and the [`resume`] that starts it again writes a SYNC without
/// RESUMED. A writer already paused stays so, silently. Returns whether the state changed (or
/// the change was deferred).
pub fn park() -> bool {
    existing().is_some_and(ThreadTrace::park_now)
}

/// Resumes the calling thread's writer (`pmu::start(PERF_EF_RESUME)`): writes a SYNC and
/// RESUMED (a SYNC alone after [`park`]). Returns whether the state changed (or the change was
/// deferred).
pub fn resume() -> bool {
    existing().is_some_and(ThreadTrace::resume_now)
}

/// Gives a stopped or running full-trace writer space up to `limit` (perf_aux_output_begin's
/// new handle). A writer stopped for lack of space writes LOST and SYNC and continues.
pub fn set_limit(limit: u64) -> Result<(), WriterError> {
    existing()
        .ok_or(WriterError::NotInstalled)?
        .set_limit_now(limit)
}

/// The calling thread's writer head: the position after the last complete packet (what the
/// core copies into aux_head). Safe to call from a signal handler.
pub fn aux_head() -> Option<u64> {
    let t = existing()?;
    t.installed.load(Relaxed).then(|| t.head.load(Relaxed))
}

/// Where the calling thread's writer keeps its head, for a caller that reads it on every
/// call cheaper than [`aux_head`] can (a load instead of a thread-local lookup and a check).
/// A caller that copies it elsewhere after every call has the writer do it instead with
/// [`set_head_mirror`] (the preload runtime, into memory its recorder reads after a SIGKILL).
/// Null until the thread's writer state exists. The word is read-only to the caller and lives
/// until the thread's exit (the pthread key destructor that frees it runs after the thread's
/// Rust thread-local destructors); between installs it holds the last head.
pub fn aux_head_word() -> *const std::sync::atomic::AtomicU64 {
    existing().map_or(std::ptr::null(), |t| &t.head as *const _)
}

/// Has the calling thread's writer store its head into `word` too, after every packet as
/// into its own head (after the packet's bytes, Release), from now on; null stops it. For a
/// caller whose reader sees only that word (the preload runtime's recorder, which reads it
/// after a SIGKILL): the word equals the head without a copy after every probe. The head is
/// stored into a new word at once. False if the thread has no writer state (nothing set).
///
/// # Safety
/// Until the mirror is cleared on this thread (or the thread's writer state is freed),
/// `word` is valid for atomic stores, and nothing stores into it that could be mistaken for
/// the head.
pub unsafe fn set_head_mirror(word: *const std::sync::atomic::AtomicU64) -> bool {
    let Some(t) = existing() else {
        return false;
    };
    t.head_mirror.store(word.cast_mut(), Relaxed);
    if !word.is_null() {
        // SAFETY: the caller's contract.
        unsafe { (*word).store(t.head.load(Relaxed), Release) };
    }
    true
}

/// The calling thread's writer counters.
pub fn status() -> Option<WriterStatus> {
    existing()
        .filter(|t| t.installed.load(Relaxed))
        .map(ThreadTrace::status)
}

/// Keeps the calling thread's shadow stack maintained without a writer (for callchains of
/// samples taken at hooked probes), and while its writer is paused. Counted: pair with
/// [`disable_shadow_stack`]. Enabled during a pause without `track_paused`, the stack does not
/// know the calls opened since the pause (their guards are idle); it follows calls from here on.
/// The core enables it when a callchain sampler is added, before the sampler can fire.
pub fn enable_shadow_stack() {
    if let Some(tt) = thread_trace() {
        tt.shadow_users.fetch_add(1, Relaxed);
        tt.observe_in_section();
    }
}

/// Undoes one [`enable_shadow_stack`].
pub fn disable_shadow_stack() {
    if let Some(tt) = existing() {
        // One read-modify-write: a handler's enable or disable may land anywhere around it.
        let _ = tt
            .shadow_users
            .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
        tt.unobserve_in_section();
    }
}

/// Copies the calling thread's open calls into `out`, innermost first (PERF_SAMPLE_CALLCHAIN
/// order). Frames deeper than the shadow stack's bound ([`SHADOW_CAP`]) are not known. Safe to
/// call from a signal handler; allocates nothing.
pub fn callchain(out: &mut [Frame]) -> Callchain {
    match existing() {
        Some(t) if t.observing.load(Relaxed) => t.shadow.callchain(out),
        _ => Callchain::default(),
    }
}

/// The shadow stack's bound.
pub const SHADOW_DEPTH: usize = SHADOW_CAP;
