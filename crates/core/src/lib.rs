//! perfaux-core: the perf core in user space (what kernel/events/core.c
//! does for the AUX area), with software PMUs that trace real execution.
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

// The system calls: what a perf_event_open user reaches, re-exported below.
mod control;
mod mmap;
mod open;
mod uevent;

// The overflow path, bottom to top: sample_id (the records' trailer),
// output (the records' writer), aux, sample, overflow. Drivers call in
// here through `driver`.
mod aux;
mod output;
mod overflow;
mod sample;
mod sample_id;
mod sample_rate;

// The objects, and the leaves below them (the README lists the floors).
mod buffer;
mod clock;
mod error;
mod event;
mod fd;
mod grave;
mod mlock;
mod pmu;
mod rcu;
mod registry;
mod remote;
mod thread;
mod wire;

pub mod driver;

pub use control::{EventFd, close};
pub use error::{Error, Result};
pub use event::{CountersSnapshot, Event, EventState, Target, WeakEvent, share_event_ids};
pub use mlock::{Limits as MlockLimits, charged as mlock_charged};
pub use mmap::{Mmap, Prot, page_size};
pub use open::{PERF_REG_EXTENDED_MASK, perf_event_open, perf_event_open_attr};
pub use pmu::PmuCaps;
pub use registry::{pmu_capabilities, pmu_type_by_name, pmus};
pub use sample_rate::{MAX_SAMPLE_RATE, max_sample_rate};
pub use thread::{forget_after_fork, getpid, gettid, nr_cpu_ids};
pub use uevent::{perf_uevent, perfaux_uevent};
