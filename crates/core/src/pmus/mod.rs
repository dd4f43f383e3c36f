//! The builtin PMUs.
//!
//! | name | type | what |
//! |---|---|---|
//! | `software` | 1 (`PERF_TYPE_SOFTWARE`) | `task-clock`, `cpu-clock` (thread CPU time, sampled by a POSIX timer signal), the counters of `sw_counters` and `dummy` |
//! | `swtrace` | [`SWTRACE_TYPE`] | the trace PMU: AUX area, pause/resume, snapshot_aux, ITRACE |
//! | `probe` | [`PROBE_TYPE`] | counts entries/returns of a swtrace probe (sampler, trigger) |
//! | `uevent` | [`UEVENT_TYPE`] | counts uevents of one type, RAW = payload |
//! | `uevent_aux` | [`UEVENT_AUX_TYPE`] | AUX PMU logging uevents; no AUX_PAUSE, no snapshot_aux |

use std::sync::Arc;

use crate::pmu::Pmu;

pub mod probe;
pub mod software;
pub mod sw_counters;
pub mod swtrace;
pub mod task_clock;
pub mod uevent;

/// Registers the builtin PMUs (called once by the registry).
/// The `swtrace` PMU's type.
pub const SWTRACE_TYPE: u32 = crate::registry::PMU_TYPE_DYNAMIC_BASE;

/// The `probe` PMU's type.
pub const PROBE_TYPE: u32 = crate::registry::PMU_TYPE_DYNAMIC_BASE + 1;
/// The `uevent` PMU's type.
pub const UEVENT_TYPE: u32 = crate::registry::PMU_TYPE_DYNAMIC_BASE + 2;
/// The `uevent_aux` PMU's type.
pub const UEVENT_AUX_TYPE: u32 = crate::registry::PMU_TYPE_DYNAMIC_BASE + 3;

pub(crate) fn register_builtin(mut add: impl FnMut(u32, Arc<dyn Pmu>)) {
    add(
        crate::registry::SOFTWARE_TYPE,
        Arc::new(software::SoftwarePmu),
    );
    add(SWTRACE_TYPE, Arc::new(swtrace::SwtracePmu));
    add(PROBE_TYPE, Arc::new(probe::ProbePmu));
    add(UEVENT_TYPE, Arc::new(uevent::UeventPmu));
    add(UEVENT_AUX_TYPE, Arc::new(uevent::UeventAuxPmu));
}
