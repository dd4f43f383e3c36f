//! Tracing other programs: `perfaux record -- ./prog`.
//!
//! Two halves share this crate's [`shared`] layout:
//! - the runtime (`perfaux-preload-runtime`, a cdylib under `runtime/`, loaded into the program
//!   with `LD_PRELOAD`) implements the compilers' hooks (`__cyg_profile_func_enter/exit` from
//!   `-finstrument-functions`), turns every function address into a perfaux-swtrace probe, and
//!   runs perfaux-core's perf core in the program: each thread, on its first hook, claims a
//!   slot, opens the recorder's events for itself (the event table in [`shared`]: the trace
//!   PMU's event, whose buffer it maps over the slot's memory with
//!   [`perfaux_core::EventFd::mmap_over`], and the probe events and samplers in its group), so
//!   the four features keep the core's semantics, also on the program's own functions
//!   (`probe:FUNC`, resolved by the runtime in every object it loads);
//! - the recorder's side ([`host`]) owns that memory: it creates the control memfd and one pair
//!   of ring memfds (data area, AUX area) per slot, spawns the program with them, drains the
//!   rings from its own mappings with perfaux-ring's consumer (never trusting what the program
//!   wrote), and after the program ends (also by a crash or SIGKILL) still holds every byte it
//!   wrote. [`symbols`] names the probe addresses from the ELF symbol tables of the objects the
//!   runtime reported.

#![warn(missing_docs)]

pub mod host;
/// The control area's layout: the contract with the runtime, in a crate of its own
/// (perfaux-preload-abi) that the runtime links without this crate.
pub use perfaux_preload_abi as shared;
pub mod symbols;
