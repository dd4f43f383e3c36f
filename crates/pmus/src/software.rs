//! The `software` PMU (type `PERF_TYPE_SOFTWARE`): the kernel's software
//! events that a process can observe of itself.
//!
//! - `PERF_COUNT_SW_DUMMY`: counts nothing; carries sideband and uevents.
//! - `PERF_COUNT_SW_TASK_CLOCK`: the thread's CPU time in ns (see
//!   `task_clock`).
//!
//! - `PERF_COUNT_SW_CPU_CLOCK`: as task-clock (a task's cpu-clock counts
//!   while it is on a CPU).
//! - the counters (page faults, context switches, migrations, ...): see
//!   [`super::sw_counters`]; cgroup-switches, which a process cannot
//!   observe, is EOPNOTSUPP. Ids beyond the kernel's are ENOENT, as
//!   `perf_swevent_init` returns.

use perfaux_abi::consts::{
    PERF_COUNT_SW_CPU_CLOCK, PERF_COUNT_SW_DUMMY, PERF_COUNT_SW_TASK_CLOCK,
    PERF_SAMPLE_BRANCH_STACK, PERF_SAMPLE_CALLCHAIN,
};
use perfaux_swtrace::writer;

use perfaux_core::driver::{
    Event, Pmu, PmuCaps, PmuPrivate, Result, ef, enoent, eopnotsupp, run_on,
};

/// `PERF_COUNT_SW_MAX`.
const PERF_COUNT_SW_MAX: u64 = 12;

fn is_task_clock(event: &Event) -> bool {
    matches!(
        event.attr().config,
        PERF_COUNT_SW_TASK_CLOCK | PERF_COUNT_SW_CPU_CLOCK
    )
}

/// The thread of a task-clock event that samples callchains.
fn callchain_thread(event: &Event) -> Option<i32> {
    let sampling = event.is_sampling() && event.attr().sample_type & PERF_SAMPLE_CALLCHAIN != 0;
    if is_task_clock(event) && sampling {
        event.target().tid()
    } else {
        None
    }
}

/// The software PMU.
pub struct SoftwarePmu;

impl Pmu for SoftwarePmu {
    fn name(&self) -> &'static str {
        "software"
    }

    fn capabilities(&self) -> PmuCaps {
        PmuCaps::NO_NMI
    }

    fn event_init(&self, event: &Event) -> Result<PmuPrivate> {
        if event.attr().type_ != perfaux_abi::consts::PERF_TYPE_SOFTWARE {
            return Err(enoent("not a software event"));
        }
        // perf_swevent_init, task_clock_event_init: no branch sampling.
        if event.attr().sample_type & PERF_SAMPLE_BRANCH_STACK != 0 {
            return Err(eopnotsupp(
                "PERF_SAMPLE_BRANCH_STACK: software events have no branch stack",
            ));
        }
        match event.attr().config {
            PERF_COUNT_SW_DUMMY => Ok(Box::new(())),
            // cpu-clock counts while the task is on a CPU: its CPU time.
            PERF_COUNT_SW_TASK_CLOCK | PERF_COUNT_SW_CPU_CLOCK => {
                super::task_clock::event_init(event)
            }
            c if c >= PERF_COUNT_SW_MAX => {
                Err(enoent("software event id beyond PERF_COUNT_SW_MAX"))
            }
            _ => super::sw_counters::event_init(event),
        }
    }

    /// A task-clock sampler with PERF_SAMPLE_CALLCHAIN keeps its thread's
    /// shadow stack live while it is scheduled in (as the probe PMU's
    /// samplers do): its callchains then name the open calls also while
    /// the thread's trace is paused or there is none.
    fn add(&self, event: &Event, flags: u32) -> Result<()> {
        if let Some(tid) = callchain_thread(event) {
            let _ = run_on(tid, &mut writer::enable_shadow_stack);
        }
        if flags & ef::START != 0 {
            self.start(event, ef::RELOAD);
        }
        Ok(())
    }

    fn del(&self, event: &Event, _flags: u32) {
        self.stop(event, ef::UPDATE);
        if let Some(tid) = callchain_thread(event) {
            let _ = run_on(tid, &mut writer::disable_shadow_stack);
        }
    }

    // Every event but dummy has a timer state (task_clock.rs); these do
    // nothing for an event without one.
    fn start(&self, event: &Event, _flags: u32) {
        super::task_clock::start(event);
    }

    fn stop(&self, event: &Event, _flags: u32) {
        super::task_clock::stop(event);
    }

    fn read(&self, event: &Event) {
        super::task_clock::read(event);
    }

    fn destroy(&self, event: &Event) {
        super::task_clock::destroy(event);
    }
}
