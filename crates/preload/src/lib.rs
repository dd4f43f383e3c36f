//! Tracing other programs: `perfaux record -- ./prog`.
//!
//! Two halves share this crate's [`shared`] layout:
//! - the runtime (`perfaux-preload-runtime`, a cdylib under `runtime/`, loaded into the program
//!   with `LD_PRELOAD`) implements the compilers' hooks (`__cyg_profile_func_enter/exit` from
//!   `-finstrument-functions`), turns every function address into a perfaux-swtrace probe, and
//!   runs perfaux-core's perf core in the program: each thread, on its first hook, claims a
//!   slot, opens the trace PMU for itself and maps its buffer over the slot's memory
//!   ([`perfaux_core::EventFd::mmap_over`]), so the four features keep the core's semantics;
//! - the recorder's side ([`host`]) owns that memory: it creates the control memfd and one pair
//!   of ring memfds (data area, AUX area) per slot, spawns the program with them, drains the
//!   rings from its own mappings with perfaux-ring's consumer (never trusting what the program
//!   wrote), and after the program ends (also by a crash or SIGKILL) still holds every byte it
//!   wrote. [`symbols`] names the probe addresses from the ELF symbol tables of the objects the
//!   runtime reported.

#![warn(missing_docs)]

pub mod host;
pub mod shared;
pub mod symbols;

use perfaux_abi::attr::{AttrFlags, PerfEventAttr};
use perfaux_abi::consts::*;

/// The sample_id every record of the program's trace event carries (the CLI's, so that
/// `perfaux script` and perf read the records alike).
pub const SAMPLE_ID_TYPE: u64 =
    PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;

/// The attr of the trace event each traced thread opens (`swtrace//`), as opened and as
/// written into perf.data.
pub fn trace_attr() -> PerfEventAttr {
    base_attr(perfaux_pmus::SWTRACE_TYPE, 0)
}

/// The attr of the uevent stream each traced thread opens (a dummy software event that takes
/// the thread's uevents, `perfaux_uevent` from perfaux.h), as opened.
pub fn uevent_attr() -> PerfEventAttr {
    let mut a = base_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY);
    a.flags |= AttrFlags::UEVENTS;
    a
}

fn base_attr(type_: u32, config: u64) -> PerfEventAttr {
    let mut a = PerfEventAttr {
        type_,
        size: PERF_ATTR_SIZE_VER7,
        config,
        sample_type: SAMPLE_ID_TYPE,
        ..Default::default()
    };
    a.flags |= AttrFlags::DISABLED
        | AttrFlags::SAMPLE_ID_ALL
        | AttrFlags::EXCLUDE_KERNEL
        | AttrFlags::EXCLUDE_HV;
    a
}
