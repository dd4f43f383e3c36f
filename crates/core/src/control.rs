//! The control path: [`EventFd`] (the handle `perf_event_open` returns;
//! dropping it closes it), enable, disable, the other `PERF_EVENT_IOC_*`
//! ioctls, `set_output`, and close (`perf_event_release_kernel`).
//!
//! Scheduling is the kernel's, reduced to what a process can see: an event
//! is scheduled in (the PMU `add`ed, state ACTIVE) while it is enabled and
//! its group leader is enabled; the thread it observes is "on CPU" whenever
//! it runs. All control operations take one lock (the kernel's
//! `ctx->mutex`); the overflow path takes none.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use perfaux_abi::attr::AttrFlags;
use perfaux_abi::consts::PERF_IOC_FLAG_GROUP;

use crate::error::{Result, einval};
use crate::event::{Event, EventState, WeakEvent};
use crate::fd;
use crate::overflow;
use crate::pmu::ef;
use crate::{output, thread};

fn ctx_lock() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// The lock of mmap and munmap (`event->mmap_mutex`); the same as the
/// control lock, so a mapping never changes under an enable or a close.
pub(crate) fn mmap_lock() -> MutexGuard<'static, ()> {
    ctx_lock()
}

/// `perf_pmu_output_stop`: the AUX area is going away; a running PMU stops
/// writing into it (and flushes its last PERF_RECORD_AUX).
pub(crate) fn perf_pmu_output_stop(ev: &Event) {
    if ev.hw.added.load(Ordering::Acquire) {
        ev.pmu.stop(ev, ef::UPDATE);
    }
}

/// `event_sched_in`: log ITRACE_START, then `pmu->add(PERF_EF_START)`.
fn event_sched_in(ev: &Event) {
    if ev.hw.added.load(Ordering::Acquire) {
        ev.set_state(EventState::Active);
        return;
    }
    ev.hw.tstamp.store(ev.clock.now(), Ordering::Relaxed);
    output::perf_log_itrace_start(ev);
    ev.set_state(EventState::Active);
    ev.hw.added.store(true, Ordering::Release);
    if ev.pmu.add(ev, ef::START).is_err() {
        ev.hw.added.store(false, Ordering::Release);
        ev.set_state(EventState::Inactive);
    }
}

/// `event_sched_out`: `pmu->del()`, then the new state.
fn event_sched_out(ev: &Event, state: EventState) {
    if ev.hw.added.swap(false, Ordering::AcqRel) {
        ev.set_state(EventState::Inactive);
        ev.pmu.del(ev, 0);
        let now = ev.clock.now();
        let since = ev.hw.tstamp.load(Ordering::Relaxed);
        let d = now.saturating_sub(since);
        ev.hw.time_enabled.fetch_add(d, Ordering::Relaxed);
        ev.hw.time_running.fetch_add(d, Ordering::Relaxed);
    }
    ev.set_state(state);
}

/// `perf_event_exit_task`: the calling thread is exiting. Every event that
/// observes it is scheduled out for good, as the kernel's
/// `perf_event_exit_event` does from `do_exit`: its PMU is deleted on this
/// thread (a trace PMU ends its AUX transaction, so the trace written up to
/// here is published with its PERF_RECORD_AUX instead of being lost with
/// the thread), and its state becomes EXIT, which later enables ignore and
/// disables leave alone. Members go before their leaders, as a group's are
/// scheduled out.
///
/// User space has no `do_exit` to hook: this runs from the first thread-exit
/// hook that exists on an observed thread without allocating where a signal
/// handler could (perfaux-swtrace's per-thread state's pthread-key
/// destructor, `writer::set_exit_hook`; its PMU driver installs it). Not
/// for a signal handler: it takes the context lock.
pub fn perf_event_exit_task() {
    let Some(ctx) = crate::thread::existing_ctx(crate::thread::gettid()) else {
        return;
    };
    let events: Vec<Arc<Event>> = ctx
        .events
        .read(|l| l.map(|l| l.0.clone()).unwrap_or_default());
    if events.is_empty() {
        return;
    }
    let _g = ctx_lock();
    let (leaders, members): (Vec<_>, Vec<_>) = events.iter().partition(|e| e.is_group_leader());
    for ev in members.into_iter().chain(leaders) {
        ev.hw.pending_disable.store(false, Ordering::Relaxed);
        if ev.state() > EventState::Exit {
            event_sched_out(ev, EventState::Exit);
        }
    }
}

/// Brings the group `leader` leads in line with its members' states
/// (`ctx_resched` for one group).
fn resched_group(leader: &Arc<Event>) {
    let leader_on = leader.state() >= EventState::Inactive;
    let mut all = vec![leader.clone()];
    all.extend(leader.siblings());
    // Members out first, leader in first: a member never runs without its
    // leader, so an AUX member's trigger never hits a stopped leader.
    if leader_on {
        event_sched_in(leader);
    }
    for ev in &all[1..] {
        let st = ev.state();
        if st >= EventState::Inactive && leader_on {
            event_sched_in(ev);
        } else if st >= EventState::Inactive {
            event_sched_out(ev, EventState::Inactive);
        }
    }
    if !leader_on {
        let st = leader.state();
        event_sched_out(leader, st.min(EventState::Off));
    }
}

/// `_perf_event_enable`.
fn perf_event_enable_locked(ev: &Arc<Event>) {
    let st = ev.state();
    if st >= EventState::Inactive || st < EventState::Error {
        return;
    }
    ev.hw.pending_disable.store(false, Ordering::Relaxed);
    ev.set_state(EventState::Inactive);
    resched_group(&ev.group_leader());
}

/// `_perf_event_disable`.
fn perf_event_disable_locked(ev: &Arc<Event>) {
    if ev.state() <= EventState::Off {
        return;
    }
    if ev.is_group_leader() {
        ev.set_state(EventState::Off);
        resched_group(ev);
    } else {
        event_sched_out(ev, EventState::Off);
    }
}

/// Enables `ev` (`PERF_EVENT_IOC_ENABLE` without the group flag).
pub(crate) fn enable(ev: &Arc<Event>) -> Result<()> {
    let _g = ctx_lock();
    perf_event_enable_locked(ev);
    Ok(())
}

/// Runs `f` on the event, or on its whole group with
/// `PERF_IOC_FLAG_GROUP` (`perf_event_for_each`: leader, then members).
fn for_each(ev: &Arc<Event>, flags: u64, mut f: impl FnMut(&Arc<Event>)) {
    if flags & PERF_IOC_FLAG_GROUP != 0 {
        let leader = ev.group_leader();
        f(&leader);
        for s in leader.siblings() {
            f(&s);
        }
    } else {
        f(ev);
    }
}

/// Applies the disables that the overflow path asked for
/// (`perf_pending_disable` irq_work); the control path runs it first.
/// The overflow path already set the state to OFF and stopped the PMU; here
/// the PMU is `del`eted and the group rescheduled.
pub(crate) fn run_pending_disables(ev: &Arc<Event>) {
    let leader = ev.group_leader();
    let mut all = vec![leader.clone()];
    all.extend(leader.siblings());
    for e in &all {
        if e.hw.pending_disable.swap(false, Ordering::AcqRel) {
            event_sched_out(e, EventState::Off);
        }
    }
    resched_group(&leader);
}

/// An open event: the fd `perf_event_open` returns. Dropping it closes it.
pub struct EventFd {
    pub(crate) fd: i32,
    pub(crate) event: Arc<Event>,
}

impl EventFd {
    /// The fd number, for `group_fd` and `set_output`.
    pub fn as_raw(&self) -> i32 {
        self.fd
    }

    /// The event.
    pub fn event(&self) -> &Arc<Event> {
        &self.event
    }

    /// A weak reference, to check after closing that nothing leaked.
    pub fn downgrade(&self) -> WeakEvent {
        WeakEvent(Arc::downgrade(&self.event))
    }

    /// Closes the fd now (`close(2)`); the same as dropping it.
    pub fn close(self) {}
}

impl Drop for EventFd {
    fn drop(&mut self) {
        close_fd(self.fd);
    }
}

impl std::fmt::Debug for EventFd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventFd")
            .field("fd", &self.fd)
            .field("event", &self.event)
            .finish()
    }
}

impl EventFd {
    /// `PERF_EVENT_IOC_ENABLE`; `flags` may hold `PERF_IOC_FLAG_GROUP`.
    pub fn enable(&self, flags: u64) -> Result<()> {
        let _g = ctx_lock();
        run_pending_disables(&self.event);
        for_each(&self.event, flags, perf_event_enable_locked);
        Ok(())
    }

    /// `PERF_EVENT_IOC_DISABLE`; `flags` may hold `PERF_IOC_FLAG_GROUP`.
    pub fn disable(&self, flags: u64) -> Result<()> {
        let _g = ctx_lock();
        run_pending_disables(&self.event);
        for_each(&self.event, flags, perf_event_disable_locked);
        Ok(())
    }

    /// `PERF_EVENT_IOC_RESET`: the count goes back to 0.
    pub fn reset(&self, flags: u64) -> Result<()> {
        let _g = ctx_lock();
        for_each(&self.event, flags, |e| {
            e.pmu.read(e);
            e.on_owner_thread(&mut || e.hw.count.store(0, Ordering::Relaxed));
        });
        Ok(())
    }

    /// `PERF_EVENT_IOC_REFRESH`: allow `refresh` more overflows, then
    /// disable (`_perf_event_refresh`). EINVAL for an inherited or
    /// non-sampling event.
    pub fn refresh(&self, refresh: i32) -> Result<()> {
        let ev = &self.event;
        if ev.flag(AttrFlags::INHERIT) || !ev.is_sampling() {
            return Err(einval(
                "PERF_EVENT_IOC_REFRESH: inherited or non-sampling event",
            ));
        }
        let _g = ctx_lock();
        ev.hw
            .event_limit
            .fetch_add(i64::from(refresh), Ordering::AcqRel);
        run_pending_disables(ev);
        perf_event_enable_locked(ev);
        Ok(())
    }

    /// `PERF_EVENT_IOC_PERIOD` (`perf_event_period`).
    pub fn period(&self, value: u64) -> Result<()> {
        overflow::perf_event_period(&self.event, value)
    }

    /// `PERF_EVENT_IOC_ID`.
    pub fn id(&self) -> u64 {
        self.event.id()
    }

    /// `PERF_EVENT_IOC_SET_OUTPUT`: send this event's records into
    /// `output_fd`'s buffer, or with -1 back to none. EBADF for an fd that
    /// is no event; EINVAL for the kernel's refusals.
    pub fn set_output(&self, output_fd: i32) -> Result<()> {
        let _g = ctx_lock();
        if output_fd == -1 {
            if self.event.mmap_count.load(Ordering::Acquire) != 0 {
                return Err(einval("SET_OUTPUT: event has an active mmap"));
            }
            self.event.rb.store(None);
            return Ok(());
        }
        let out = fd::lookup(output_fd)?;
        set_output_rules(&self.event, &out)?;
        attach_output(&self.event, &out)
    }

    /// `PERF_EVENT_IOC_PAUSE_OUTPUT`: while paused, records to this event's
    /// buffer are dropped and counted lost. EINVAL without a buffer, or with
    /// one of no data pages (the kernel's `!rb || !rb->nr_pages`).
    pub fn pause_output(&self, pause: bool) -> Result<()> {
        match self.event.rb.load() {
            Some(rb) if rb.data_pages > 0 => {
                rb.pause_output(pause);
                Ok(())
            }
            Some(_) => Err(einval("PAUSE_OUTPUT: the buffer has no data pages")),
            None => Err(einval("PAUSE_OUTPUT: event has no buffer")),
        }
    }
}

/// The refusals of `perf_event_set_output` before any buffer is looked at
/// (all EINVAL).
pub(crate) fn set_output_rules(event: &Event, output: &Event) -> Result<()> {
    if std::ptr::eq(event, output) {
        return Err(einval("SET_OUTPUT: an event cannot output into itself"));
    }
    if output.cpu != event.cpu {
        return Err(einval("SET_OUTPUT: cross-cpu buffers"));
    }
    if output.cpu == -1 && output.target != event.target {
        return Err(einval("SET_OUTPUT: per-thread buffer of another thread"));
    }
    if output.clock != event.clock {
        return Err(einval("SET_OUTPUT: events use different clocks"));
    }
    if output.flag(AttrFlags::WRITE_BACKWARD) != event.flag(AttrFlags::WRITE_BACKWARD) {
        return Err(einval("SET_OUTPUT: write_backward differs"));
    }
    if event.has_aux() && output.has_aux() && event.pmu_type != output.pmu_type {
        return Err(einval(
            "SET_OUTPUT: both events have AUX areas on different PMUs",
        ));
    }
    Ok(())
}

/// The second half of `perf_event_set_output`: the event must not be
/// mapped itself; the output event's buffer must exist.
pub(crate) fn attach_output(event: &Event, output: &Event) -> Result<()> {
    if event.mmap_count.load(Ordering::Acquire) != 0 {
        return Err(einval("SET_OUTPUT: event has an active mmap"));
    }
    if output.state() == EventState::Dead {
        return Err(einval("SET_OUTPUT: output event is closed"));
    }
    let Some(rb) = output.rb.get() else {
        return Err(einval(
            "SET_OUTPUT: output event has no buffer (not mmapped)",
        ));
    };
    if rb.mmap_count.load(Ordering::Acquire) == 0 {
        return Err(einval("SET_OUTPUT: output buffer is being unmapped"));
    }
    event.rb.store(Some(rb));
    Ok(())
}

/// `close(fd)`: EBADF if `fd` is no open event.
pub fn close(fd: i32) -> Result<()> {
    let ev = fd::remove(fd).ok_or_else(|| crate::error::ebadf("close: fd is not an open event"))?;
    release(&ev);
    Ok(())
}

pub(crate) fn close_fd(fd: i32) {
    if let Some(ev) = fd::remove(fd) {
        release(&ev);
    }
}

/// `perf_event_release_kernel`: schedule out, leave the context, detach
/// from the group (members become singletons), tear down `aux_event` links,
/// release the PMU's state.
fn release(ev: &Arc<Event>) {
    let _g = ctx_lock();
    event_sched_out(ev, EventState::Dead);
    thread::uninstall(ev);
    perf_group_detach(ev);
    ev.pmu.destroy(ev);
    output::perf_output_lost(ev);
    ev.rb.store(None);
}

/// `perf_group_attach`: `event` joins the group `leader` leads.
pub(crate) fn attach_to_group(event: &Arc<Event>, leader: &Arc<Event>) {
    let _g = ctx_lock();
    thread::edit(&leader.sibling_list, |v| v.push(event.clone()));
    event.group_leader.replace(Some(leader.clone()));
}

/// `perf_group_detach` with `perf_put_aux_event`.
fn perf_group_detach(ev: &Arc<Event>) {
    // perf_put_aux_event: our own link, then the links others have to us.
    if ev.aux_event.replace(None).is_none() {
        let leader = ev.group_leader();
        for s in leader.siblings() {
            let points_here = s.aux_event.read(|a| a.is_some_and(|a| a.id() == ev.id()));
            if points_here {
                s.aux_event.replace(None);
            }
        }
    }
    if let Some(leader) = ev.group_leader.replace(None) {
        thread::edit(&leader.sibling_list, |v| v.retain(|s| s.id() != ev.id()));
        return;
    }
    let siblings = ev
        .sibling_list
        .replace(None)
        .map(|l| l.0.clone())
        .unwrap_or_default();
    for s in siblings {
        // The sibling becomes a singleton and keeps its state; its group
        // is now itself, so schedule it as such.
        s.group_leader.replace(None);
        if s.state() >= EventState::Inactive {
            event_sched_in(&s);
        }
    }
}
