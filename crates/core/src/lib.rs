//! perfaux-core: the perf core in user space (what kernel/events/core.c
//! does for the AUX area), with software PMUs that trace real execution.
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod aux;
pub mod buffer;
pub mod clock;
pub mod control;
pub mod error;
pub mod event;
pub mod fd;
mod grave;
pub mod mlock;
pub mod mmap;
pub mod open;
pub mod output;
pub mod overflow;
pub mod pmu;
pub mod rcu;
pub mod registry;
pub mod remote;
pub mod sample;
pub mod thread;
pub mod uevent;
mod wire;

pub use control::EventFd;
pub use error::{Error, Result};
pub use event::{CountersSnapshot, Event, EventState, Target, WeakEvent, share_event_ids};
pub use mmap::{Mmap, Prot, page_size};
pub use open::{perf_event_open, perf_event_open_attr};
pub use pmu::{Pmu, PmuCaps, ef};
pub use sample::SampleData;
pub use uevent::{perf_uevent, perfaux_uevent};
