//! perfaux-recorder: one recorder for `perfaux record`, for a program's
//! runtime and for embedders. It opens per-thread events through
//! perfaux-core's perf_event_open (the AUX PMU as leader of each thread's
//! buffer, the other events redirected into it with SET_OUTPUT), maps the
//! rings, drains them when their producers pass a watermark (as perf polls
//! its fds), takes flight-recorder snapshots that keep their
//! OVERWRITE/wrapped flag, and writes a perf.data that perf 6.1 reads in
//! the format of [`perfaux_perfdata::trace_section`].
//!
//! ```text
//! let mut r = Recorder::new(events, options, &tids, Output::File(path))?;
//! synth_comm(&mut r, pid, tid, "name")?;       // optional synthesized records
//! r.enable()?;
//! loop { r.wait(timeout); r.drain()?; if asked { r.snapshot()?; } }
//! let summary = r.finish()?;                    // last drain, trace section, rename
//! ```
//!
//! Memory is bounded by the rings: trace bytes (full trace and snapshots) go
//! into the output's trace section as they are drained ([`in_place`]), and
//! records to an unnamed file beside it, moved after the section when the
//! recording ends. The output appears only complete ([`output`]).
//!
//! # The seam for rings that arrive while recording
//!
//! [`Recorder::add_thread`] opens the events on a thread that appeared
//! later; [`Recorder::add_ring`] takes any [`ring::Ring`] (for example the
//! ring a traced program's runtime writes in recorder-owned memfd memory)
//! with the sample ids its records carry. The ids join the file's attrs at
//! finish, the ring's wakeup joins the drain loop's, and `drain`/`snapshot`
//! treat it as the recorder's own.

#![warn(missing_docs)]

pub mod error;
mod in_place;
pub mod output;
pub mod pmus;
pub mod recorder;
pub mod ring;
pub mod snapshot_window;
mod spec;
pub mod synth;
pub mod trace_gaps;
pub mod tracefs;
mod wakeups;

pub use error::{RecordError, Result};
pub use recorder::{Output, RecordSummary, Recorder};
pub use ring::{AuxBytes, Ring, ThreadRing};
pub use spec::{AUX_WATERMARK_MAX, EventSpec, RecorderOptions, default_watermarks};
pub use trace_gaps::{MAX_LISTED_GAPS, TraceGap};
pub use wakeups::Waiter;
