//! What a PMU driver may use of the core: the kernel's
//! `include/linux/perf_event.h` for drivers, where the rest of the core is
//! its `kernel/events/internal.h`.
//!
//! A driver (perfaux-pmus' `software`, `swtrace`, `probe`, `uevent`,
//! `uevent_aux`, or a test's own PMU) implements [`Pmu`] and registers it
//! with [`perf_pmu_register`] or [`perf_pmu_register_type`]. The core then
//! calls it where kernel/events/core.c calls a driver, and hands it the
//! [`Event`] (its attr, state, buffer and [`AuxArea`], its private state).
//! The driver reports back through:
//!
//! - the overflow path: [`perf_swevent_event`] (count `nr` occurrences,
//!   one sample per elapsed period) and [`perf_event_overflow`] (one
//!   sample now), with what it knows of the sample in [`SampleData`];
//! - the AUX path: [`perf_aux_output_begin`] / [`perf_aux_output_end`]
//!   around what it writes into the AUX area, [`perf_aux_output_restart`]
//!   to go on after a TRUNCATED end once the consumer made room,
//!   [`perf_output_aux_record`]
//!   for a PERF_RECORD_AUX it reports itself, and
//!   [`perf_event_itrace_started`] once it traces (ITRACE PMUs);
//! - the thread it observes: [`gettid`] and [`current_cpu`] (where it runs),
//!   [`for_each_observing`] (the events observing the calling thread, the
//!   kernel's `perf_sw_event` walk of the task context), [`run_on`] (a call
//!   on the traced thread, the kernel's IPI: [`in_remote_call`] says that the
//!   code runs inside one, [`set_errno`] puts back the errno a signal
//!   handler found).
//!
//! [`RcuCell`] is the core's read-copy-update cell, for per-event state a
//! signal handler reads while the control path replaces it.

pub use crate::aux::{perf_aux_output_begin, perf_aux_output_end, perf_aux_output_restart};
pub use crate::buffer::{AuxArea, Buffer};
pub use crate::control::perf_event_exit_task;
pub use crate::error::{Error, Result, einval, enoent, eopnotsupp};
pub use crate::event::{Event, EventState, Target};
pub use crate::output::{perf_event_itrace_started, perf_output_aux_record};
pub use crate::overflow::{perf_event_overflow, perf_swevent_event};
pub use crate::pmu::{Pmu, PmuCaps, PmuPrivate, ef};
pub use crate::rcu::RcuCell;
pub use crate::registry::{PMU_TYPE_DYNAMIC_BASE, perf_pmu_register, perf_pmu_register_type};
pub use crate::remote::{in_remote_call, run_on, set_errno};
pub use crate::sample::SampleData;
pub use crate::thread::{current_cpu, for_each_observing, gettid};
