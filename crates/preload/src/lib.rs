//! Tracing other programs: `perfaux record -- ./prog`, and any tool's or embedder's.
//!
//! ```text
//! let mut p = TracedProgram::start(Command::new("./prog"), options, "perf.data".into())?;
//! while !p.step(Duration::from_millis(1))?.ended {      // notices in each step
//!     if asked { p.snapshot()?; }  if stop { p.signal(libc::SIGTERM); }
//! }
//! let finished = p.finish()?;                            // summary, ProgramEnd, notices
//! ```
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
//!
//! [`TracedProgram`] ([`program`]) is the recording of a program over both: a
//! [`perfaux_recorder::Recorder`] whose rings are the program's thread slots, the side-band
//! records made from what the runtime reported, and the runtime itself, built by build.rs and
//! carried in this crate ([`runtime`]).

#![warn(missing_docs)]

pub mod attach;
mod error;
mod events;
pub mod host;
mod kernel_events;
mod notice;
pub mod patching;
mod process_ends;
pub mod program;
pub mod runtime;
mod sideband;
mod slot_ring;
pub mod symbols;
mod thread_rings;
mod tsc_cache;

pub use error::{NO_HOOKS, ProgramError};
pub use notice::Notice;
pub use program::{Finished, ProgramEnd, ProgramOptions, Step, TracedProgram};

/// The control area's layout: the contract with the runtime, in a crate of its own
/// (perfaux-preload-abi) that the runtime links without this crate.
pub use perfaux_patch::{MatchKind, PatchSpec};
pub use perfaux_preload_abi as shared;
