//! The builtin PMUs.
//!
//! | name | type | what |
//! |---|---|---|
//! | `software` | 1 (`PERF_TYPE_SOFTWARE`) | `task-clock` (thread CPU time, sampled by a POSIX timer signal) and `dummy` |
//! | `swtrace` | [`SWTRACE_TYPE`] | the trace PMU: AUX area, pause/resume, snapshot_aux, ITRACE |

use std::sync::Arc;

use crate::pmu::Pmu;

pub mod software;
pub mod swtrace;

/// Registers the builtin PMUs (called once by the registry).
/// The `swtrace` PMU's type.
pub const SWTRACE_TYPE: u32 = crate::registry::PMU_TYPE_DYNAMIC_BASE;

pub(crate) fn register_builtin(mut add: impl FnMut(u32, Arc<dyn Pmu>)) {
    add(
        crate::registry::SOFTWARE_TYPE,
        Arc::new(software::SoftwarePmu),
    );
    add(SWTRACE_TYPE, Arc::new(swtrace::SwtracePmu));
}
