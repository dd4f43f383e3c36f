//! `struct perf_event`: an event, its state, its group and its links.
//!
//! Lifetimes follow the kernel's: an event is shared (`Arc`) by its fd and
//! by every event that refers to it. A group member holds its leader, an
//! event with an `aux_action` or AUX sampling holds its `aux_event`, an
//! event opened with `PERF_FLAG_FD_SAMPLE` holds its sampler, an event whose
//! output was redirected holds the buffer (not the event). A leader refers
//! to its members only weakly, so closing in any order leaves no cycle:
//! closing a leader turns its members into singletons (`perf_group_detach`)
//! and tears down the `aux_event` links to it (`perf_put_aux_event`).

use std::sync::atomic::{AtomicBool, AtomicI8, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use perfaux_abi::attr::{AttrFlags, AuxAction, PerfEventAttr};

use crate::buffer::Buffer;
use crate::clock::Clock;
use crate::grave::GraveCell;
use crate::pmu::{Pmu, PmuCaps, PmuPrivate};
use crate::rcu::RcuCell;

/// What an event observes: one thread of this process, or every thread of
/// it (the kernel's `pid == -1`, meaningful with a CPU: a per-CPU event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// The thread with this tid (`gettid()`), which must belong to the
    /// process.
    Thread(i32),
    /// Any thread of the process (per-CPU event; needs `cpu >= 0`).
    AnyThread,
}

impl Target {
    /// The calling thread.
    pub fn current() -> Self {
        Target::Thread(crate::thread::gettid())
    }

    /// The tid, if this is a thread target.
    pub fn tid(self) -> Option<i32> {
        match self {
            Target::Thread(t) => Some(t),
            Target::AnyThread => None,
        }
    }
}

/// `enum perf_event_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(i8)]
pub enum EventState {
    /// Closed: the fd is gone.
    Dead = -4,
    /// The thread it observed has exited ([`crate::driver::perf_event_exit_task`]): its
    /// counts and trace are final, and enabling it does nothing.
    Exit = -3,
    /// Put into error by the teardown of a link it needed.
    Error = -2,
    /// Disabled.
    Off = -1,
    /// Enabled but not scheduled in (its group leader is off).
    Inactive = 0,
    /// Scheduled in: the PMU counts or traces.
    Active = 1,
}

impl EventState {
    fn from_i8(v: i8) -> Self {
        match v {
            -4 => Self::Dead,
            -3 => Self::Exit,
            -2 => Self::Error,
            -1 => Self::Off,
            0 => Self::Inactive,
            _ => Self::Active,
        }
    }
}

/// A list of events, swapped as a whole (sibling lists, context lists).
pub(crate) struct EventList(pub(crate) Vec<Arc<Event>>);

/// `struct hw_perf_event` and the counters the core keeps per event.
#[derive(Default)]
pub(crate) struct Hw {
    /// `event->count`.
    pub(crate) count: AtomicU64,
    /// `hwc->sample_period`.
    pub(crate) sample_period: AtomicU64,
    /// `hwc->period_left`.
    pub(crate) period_left: AtomicI64,
    /// `hwc->last_period`: the period of the last overflow.
    pub(crate) last_period: AtomicU64,
    /// Frequency mode: the target rate (`attr.sample_freq`, or the value of
    /// the last `PERF_EVENT_IOC_PERIOD`), and the time of the last period
    /// adjustment.
    pub(crate) sample_freq: AtomicU64,
    pub(crate) freq_time_stamp: AtomicU64,
    /// `hwc->aux_paused` (AUX events): the last pause/resume that was not
    /// dropped.
    pub(crate) aux_paused: AtomicBool,
    /// `event->event_limit` (`PERF_EVENT_IOC_REFRESH`).
    pub(crate) event_limit: AtomicI64,
    /// `PERF_ATTACH_ITRACE`: ITRACE_START was logged.
    pub(crate) itrace_started: AtomicBool,
    /// `event->pending_disable`: disabled from the overflow path.
    pub(crate) pending_disable: AtomicBool,
    /// The PMU has been `add`ed (scheduled in) and not `del`eted.
    pub(crate) added: AtomicBool,
    /// Time accounting: ns enabled and running, and when that began.
    pub(crate) time_enabled: AtomicU64,
    pub(crate) time_running: AtomicU64,
    pub(crate) tstamp: AtomicU64,
}

/// Counters the core keeps beyond the kernel's, readable by the user.
#[derive(Default)]
pub(crate) struct EventCounters {
    /// Samples this event wrote.
    pub samples: AtomicU64,
    /// Records this event could not write (data area full or output
    /// paused); the ring reports them in PERF_RECORD_LOST too.
    pub lost: AtomicU64,
    /// AUX samples that carried no data (sampler inactive, elsewhere, or a
    /// snapshot already in progress).
    pub aux_samples_empty: AtomicU64,
    /// Pause requests dropped by the `aux_in_pause_resume` guard (counted
    /// on the AUX event; the kernel drops them silently).
    pub dropped_pause: AtomicU64,
    /// Resume requests dropped by the same guard.
    pub dropped_resume: AtomicU64,
}

/// A snapshot of an event's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CountersSnapshot {
    /// Samples this event wrote.
    pub samples: u64,
    /// Records this event could not write (data area full or output
    /// paused); the ring reports them in PERF_RECORD_LOST too.
    pub lost: u64,
    /// AUX samples that carried no data (sampler inactive, elsewhere, or a
    /// snapshot already in progress).
    pub aux_samples_empty: u64,
    /// Pause requests dropped by the `aux_in_pause_resume` guard (counted
    /// on the AUX event; the kernel drops them silently).
    pub dropped_pause: u64,
    /// Resume requests dropped by the same guard.
    pub dropped_resume: u64,
}

/// `struct perf_event`.
pub struct Event {
    pub(crate) id: u64,
    pub(crate) attr: PerfEventAttr,
    /// `attr`'s record layout facts, computed once.
    pub(crate) info: perfaux_abi::parse_info::RecordParseInfo,
    pub(crate) pmu: Arc<dyn Pmu>,
    pub(crate) pmu_type: u32,
    pub(crate) target: Target,
    pub(crate) cpu: i32,
    pub(crate) clock: Clock,
    pub(crate) state: AtomicI8,
    /// `event->group_leader`, `None` when the event leads its own group.
    pub(crate) group_leader: RcuCell<Event>,
    /// `sibling_list` of a leader. The leader holds its members until they
    /// leave (close) or it closes (detach): the control path breaks the
    /// links, so no cycle outlives a close.
    pub(crate) sibling_list: RcuCell<EventList>,
    /// `event->aux_event`: the AUX leader this event pauses, resumes or
    /// samples (or the `PERF_FLAG_FD_SAMPLE` sampler of seed 000).
    pub(crate) aux_event: RcuCell<Event>,
    /// `event->rb`: the buffer records go to (own mapping or redirected).
    pub(crate) rb: GraveCell<Buffer>,
    /// Mappings of this event's own buffer (`event->mmap_count`).
    pub(crate) mmap_count: AtomicU64,
    pub(crate) hw: Hw,
    pub(crate) counters: EventCounters,
    pub(crate) private: OnceLock<PmuPrivate>,
    pub(crate) weak_self: Weak<Event>,
}

impl Event {
    /// The event's id (`PERF_EVENT_IOC_ID`, `PERF_SAMPLE_ID`).
    #[inline]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The attr it was opened with (after `perf_copy_attr`).
    #[inline]
    pub fn attr(&self) -> &PerfEventAttr {
        &self.attr
    }

    /// The PMU's type.
    #[inline]
    pub fn pmu_type(&self) -> u32 {
        self.pmu_type
    }

    /// What the event observes.
    #[inline]
    pub fn target(&self) -> Target {
        self.target
    }

    /// The CPU it is bound to, or -1.
    #[inline]
    pub fn cpu(&self) -> i32 {
        self.cpu
    }

    /// The current state.
    #[inline]
    pub fn state(&self) -> EventState {
        EventState::from_i8(self.state.load(Ordering::Acquire))
    }

    pub(crate) fn set_state(&self, s: EventState) {
        self.state.store(s as i8, Ordering::Release);
    }

    /// The PMU's per-event state, if it is a `T`.
    #[inline]
    pub fn pmu_private<T: 'static>(&self) -> Option<&T> {
        self.private.get()?.downcast_ref::<T>()
    }

    /// What perfaux-abi needs to lay out this event's records.
    #[inline]
    pub fn record_info(&self) -> perfaux_abi::parse_info::RecordParseInfo {
        self.info
    }

    /// The PMU's capabilities.
    #[inline]
    pub fn pmu_caps(&self) -> PmuCaps {
        self.pmu.capabilities()
    }

    /// `has_aux(event)`: the PMU has an AUX area ([`PmuCaps::AUX`]).
    #[inline]
    pub fn has_aux(&self) -> bool {
        self.pmu_caps().contains(PmuCaps::AUX)
    }

    /// `is_sampling_event()`: a non-zero period or frequency.
    #[inline]
    pub fn is_sampling(&self) -> bool {
        self.attr.sample_period != 0
    }

    /// Whether `attr.flags` has `f`.
    #[inline]
    pub fn flag(&self, f: AttrFlags) -> bool {
        self.attr.flags.contains(f)
    }

    /// Whether `attr.aux_action` has `a`.
    pub(crate) fn aux_action(&self, a: AuxAction) -> bool {
        self.attr.aux_action.contains(a)
    }

    /// Whether the AUX event is paused (`hw.aux_paused`): the state the last
    /// pause or resume that was not dropped left.
    #[inline]
    pub fn aux_paused(&self) -> bool {
        self.hw.aux_paused.load(Ordering::Acquire)
    }

    /// The count (`read()` value), brought up to date by the PMU.
    pub fn count(&self) -> u64 {
        self.pmu.read(self);
        self.hw.count.load(Ordering::Relaxed)
    }

    /// Adds `delta` to the count (`local64_add(delta, &event->count)`),
    /// for a PMU's `read` or its overflow path.
    #[inline]
    pub fn add_count(&self, delta: u64) {
        self.hw.count.fetch_add(delta, Ordering::Relaxed);
    }

    /// Sets `hw.last_period`, the period the next sample reports.
    #[inline]
    pub fn set_last_period(&self, period: u64) {
        self.hw.last_period.store(period, Ordering::Relaxed);
    }

    /// The event's ring buffer (`event->rb`), if mapped. Lock-free and
    /// async-signal-safe; the buffer stays valid while `self` lives.
    #[inline]
    pub fn buffer(&self) -> Option<&Buffer> {
        self.rb.load()
    }

    /// The event's ring buffer, as a counted reference that outlives a
    /// `munmap` (not for signal handlers).
    pub fn buffer_arc(&self) -> Option<Arc<Buffer>> {
        self.rb.get()
    }

    /// The event's counters.
    pub fn counters(&self) -> CountersSnapshot {
        let c = &self.counters;
        CountersSnapshot {
            samples: c.samples.load(Ordering::Relaxed),
            lost: c.lost.load(Ordering::Relaxed),
            aux_samples_empty: c.aux_samples_empty.load(Ordering::Relaxed),
            dropped_pause: c.dropped_pause.load(Ordering::Relaxed),
            dropped_resume: c.dropped_resume.load(Ordering::Relaxed),
        }
    }

    /// The group leader (itself for a singleton or a leader).
    pub fn group_leader(&self) -> Arc<Event> {
        self.group_leader.get().unwrap_or_else(|| self.arc())
    }

    /// Whether the event leads its group (`event->group_leader == event`).
    pub fn is_group_leader(&self) -> bool {
        !self.group_leader.is_some()
    }

    /// The members of the group this event leads.
    pub fn siblings(&self) -> Vec<Arc<Event>> {
        self.sibling_list
            .read(|l| l.map(|l| l.0.clone()).unwrap_or_default())
    }

    /// The AUX event this one pauses, resumes or samples, if linked.
    pub fn aux_event(&self) -> Option<Arc<Event>> {
        self.aux_event.get()
    }

    /// The event as a counted reference (it is only ever reached through
    /// one).
    pub fn arc(&self) -> Arc<Event> {
        self.weak_self
            .upgrade()
            .expect("an event is only reached through a live Arc")
    }

    /// Whether the overflow path of this event runs on one thread only
    /// (with its signal handlers): the event observes one thread.
    #[inline]
    pub(crate) fn single_writer(&self) -> bool {
        matches!(self.target, Target::Thread(_))
    }

    /// Runs a control-path write of the words the overflow path updates
    /// with `local` operations (`count`, the period) on the thread the
    /// event observes, as the kernel runs `PERF_EVENT_IOC_RESET` and
    /// `PERF_EVENT_IOC_PERIOD` on the event's CPU (`event_function_call`):
    /// a store from another thread could land inside one of those
    /// read-modify-writes and be lost. If the thread is gone (nothing
    /// writes there any more) or does not take the call (signals blocked),
    /// the write is done here.
    pub(crate) fn on_owner_thread(&self, f: &mut dyn FnMut()) {
        match self.target {
            Target::Thread(tid) if tid != crate::thread::gettid() => {
                if crate::remote::run_on(tid, f).is_err() {
                    f();
                }
            }
            _ => f(),
        }
    }

    /// Adds one to a counter of [`EventCounters`] that only the overflow
    /// path of this event writes. For an event that observes one thread,
    /// that path runs only on that thread and in its signal handlers, so
    /// the kernel's `local_inc` (one read-modify-write instruction without
    /// the bus lock: atomic against a handler, which lands between
    /// instructions) is enough; for a per-CPU event, any thread on that CPU
    /// counts, with an atomic add.
    #[inline]
    pub(crate) fn counter_inc(&self, counter: &AtomicU64) {
        use perfaux_ring::protocol::{Local, Rmw};
        match self.target {
            Target::Thread(_) => {
                Local::fetch_sub(counter, 1u64.wrapping_neg(), Ordering::Relaxed);
            }
            Target::AnyThread => {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Whether the event observes the thread `tid` running on `cpu`
    /// (`event_filter_match` plus the task context).
    #[inline]
    pub fn observes(&self, tid: i32, cpu: i32) -> bool {
        (self.cpu == -1 || self.cpu == cpu)
            && match self.target {
                Target::Thread(t) => t == tid,
                Target::AnyThread => true,
            }
    }

    /// Whether the event is ACTIVE for the calling thread on its CPU: what
    /// the kernel checks as `state == ACTIVE && oncpu == smp_processor_id()`.
    #[inline]
    pub(crate) fn active_here(&self, tid: i32, cpu: i32) -> bool {
        self.state() == EventState::Active && self.observes(tid, cpu)
    }
}

/// `perf_event_disable_inatomic`: stop now, finish the disable on the
/// control path (`pending_disable`). Async-signal-safe. Here, on the
/// object floor, because both the overflow path and the AUX path end in it.
pub(crate) fn perf_event_disable_inatomic(event: &Event) {
    if event.state() <= EventState::Off {
        return;
    }
    event.hw.pending_disable.store(true, Ordering::Release);
    event.set_state(EventState::Off);
    if event.hw.added.load(Ordering::Acquire) {
        event.pmu.stop(event, 0);
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("id", &self.id)
            .field("pmu", &self.pmu.name())
            .field("config", &self.attr.config)
            .field("target", &self.target)
            .field("cpu", &self.cpu)
            .field("state", &self.state())
            .finish()
    }
}

/// The counter [`share_event_ids`] gave, if any.
static SHARED_IDS: std::sync::atomic::AtomicPtr<AtomicU64> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// Draws event ids from `counter` from now on, instead of this process's own count: the
/// processes of one recording (a traced program, the children it forks and the images they
/// exec, each with a core of its own) share one counter, so that an id names one event in the
/// recording as `perf_event_id` does in the kernel.
pub fn share_event_ids(counter: &'static AtomicU64) {
    SHARED_IDS.store(std::ptr::from_ref(counter).cast_mut(), Ordering::Release);
}

/// Event ids, unique in the process (`perf_event_id`), or in the processes sharing a counter.
pub(crate) fn next_event_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let shared = SHARED_IDS.load(Ordering::Acquire);
    if !shared.is_null() {
        // SAFETY: set from a `&'static AtomicU64` in share_event_ids.
        let counter = unsafe { &*shared };
        // 0 is no id (a sample_id's unset identifier): a counter that starts there skips it.
        loop {
            let id = counter.fetch_add(1, Ordering::Relaxed);
            if id != 0 {
                return id;
            }
        }
    }
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A weak reference to an event, for checking that closing released it.
#[derive(Clone)]
pub struct WeakEvent(pub(crate) Weak<Event>);

impl WeakEvent {
    /// Whether the event object still exists.
    pub fn is_alive(&self) -> bool {
        self.0.strong_count() > 0
    }
}
