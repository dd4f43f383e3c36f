//! perfaux-pmus: the PMU drivers of perfaux, outside the core as the
//! kernel's drivers sit outside kernel/events/core.c.
//!
//! | name | type | what |
//! |---|---|---|
//! | `software` | 1 (`PERF_TYPE_SOFTWARE`) | `task-clock`, `cpu-clock` (thread CPU time, sampled by a POSIX timer signal), the counters of `sw_counters` and `dummy` |
//! | `swtrace` | [`SWTRACE_TYPE`] | the trace PMU: AUX area, pause/resume, snapshot_aux, ITRACE |
//! | `probe` | [`PROBE_TYPE`] | counts entries/returns of a swtrace probe (sampler, trigger) |
//! | `uevent` | [`UEVENT_TYPE`] | counts uevents of one type, RAW = payload |
//! | `uevent_aux` | [`UEVENT_AUX_TYPE`] | AUX PMU logging uevents; no AUX_PAUSE, no snapshot_aux |
//! | `ktrigger` | [`KTRIGGER_TYPE`] | a kernel event (tracepoint, software event) as a trigger: its sigtrap runs the overflow on the thread |
//!
//! The drivers reach the core only through its driver facade,
//! `perfaux_core::driver` (the [`Pmu`] trait, the registry, the overflow,
//! output and AUX entry points); the core never names a driver.
//! A program calls [`register`] once before its first `perf_event_open`,
//! as the kernel runs its PMU initcalls before the first event.
//!
//! Count the uevents of one type, as an event of the `uevent` PMU:
//!
//! ```
//! use perfaux_abi::attr::{AttrFlags, PerfEventAttr};
//! use perfaux_abi::consts::PERF_ATTR_SIZE_VER8;
//! use perfaux_core::{Target, perf_event_open_attr, perf_uevent};
//!
//! perfaux_pmus::register();
//! let attr = PerfEventAttr {
//!     type_: perfaux_pmus::UEVENT_TYPE,
//!     size: PERF_ATTR_SIZE_VER8,
//!     config: 7, // count uevents of type 7
//!     flags: AttrFlags::empty(),
//!     ..Default::default()
//! };
//! let ev = perf_event_open_attr(&attr, Target::current(), -1, -1, 0).unwrap();
//! perf_uevent(7, b"done", 0).unwrap();
//! perf_uevent(8, b"other", 0).unwrap();
//! assert_eq!(ev.event().count(), 1);
//! ```

#![warn(missing_docs)]

use std::sync::{Arc, Once};

use perfaux_abi::consts::PERF_TYPE_SOFTWARE;
use perfaux_core::driver::{PMU_TYPE_DYNAMIC_BASE, Pmu, perf_pmu_register_type};

mod kernel_clock;
pub mod kernel_trigger;
pub mod probe;
mod signal_events;
pub mod software;
pub mod sw_counters;
pub mod swtrace;
mod task_clock;
pub use task_clock::use_kernel_clock;
pub mod uevent;

/// The `swtrace` PMU's type.
pub const SWTRACE_TYPE: u32 = PMU_TYPE_DYNAMIC_BASE;
/// The `probe` PMU's type.
pub const PROBE_TYPE: u32 = PMU_TYPE_DYNAMIC_BASE + 1;
/// The `uevent` PMU's type.
pub const UEVENT_TYPE: u32 = PMU_TYPE_DYNAMIC_BASE + 2;
/// The `uevent_aux` PMU's type.
pub const UEVENT_AUX_TYPE: u32 = PMU_TYPE_DYNAMIC_BASE + 3;
/// The `ktrigger` PMU's type (a kernel event as a trigger, [`kernel_trigger`]).
pub const KTRIGGER_TYPE: u32 = PMU_TYPE_DYNAMIC_BASE + 4;

/// Registers the PMUs of this crate with the core under their fixed types
/// (`software` as `PERF_TYPE_SOFTWARE`, the others as [`SWTRACE_TYPE`],
/// [`PROBE_TYPE`], [`UEVENT_TYPE`], [`UEVENT_AUX_TYPE`]). Idempotent and
/// thread-safe: every caller returns once all are registered.
///
/// # Panics
///
/// If another PMU already holds one of these types or names: call
/// `register` before registering PMUs of your own with
/// `perfaux_core::driver::perf_pmu_register`, which hands out the next
/// free dynamic type.
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let drivers: [(u32, Arc<dyn Pmu>); 6] = [
            (PERF_TYPE_SOFTWARE, Arc::new(software::SoftwarePmu)),
            (SWTRACE_TYPE, Arc::new(swtrace::SwtracePmu)),
            (PROBE_TYPE, Arc::new(probe::ProbePmu)),
            (UEVENT_TYPE, Arc::new(uevent::UeventPmu)),
            (UEVENT_AUX_TYPE, Arc::new(uevent::UeventAuxPmu)),
            (KTRIGGER_TYPE, Arc::new(kernel_trigger::KernelTriggerPmu)),
        ];
        for (type_, pmu) in drivers {
            let name = pmu.name();
            if let Err(e) = perf_pmu_register_type(pmu, type_) {
                panic!("perfaux_pmus::register: PMU `{name}` as type {type_:#x}: {e}");
            }
        }
        // A thread traced in this process may exit while its events are on: the
        // trace PMU's per-thread state has the one exit hook that is safe to set
        // from a signal handler, so the core's task exit runs from it.
        perfaux_swtrace::writer::set_exit_hook(perfaux_core::driver::perf_event_exit_task);
    });
}
