//! perfaux-tracing: Rust programs' own `tracing` spans and events in a perfaux recording.
//!
//! ```no_run
//! use tracing_subscriber::prelude::*;
//!
//! let recording = perfaux_tracing::Recording::start("service.data", Default::default())?;
//! tracing_subscriber::registry().with(perfaux_tracing::layer()).init();
//! // ... the service runs; its spans and events are recorded ...
//! recording.finish()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! - Each span is a function of the software trace: entering it is a call, leaving it the
//!   return ([`layer`]: one swtrace probe per callsite, named `target::name`), so
//!   `perfaux report`, `script --call-trace`, the flame graph and the exports show spans as
//!   they show calls, with their nesting and times. A span's fields are sent once, at its
//!   first entry, as a uevent of type [`SPAN_FIELDS`] inside that call.
//! - Each event is a uevent of type [`EVENT`] whose payload is `key=value` text:
//!   `level=INFO target=svc::http message="request done" status=200`.
//! - An async task `instrument`ed with a span enters it at every poll: each poll is a call
//!   on the worker thread that polled it, under the span's one name (tests/async_tasks.rs),
//!   tagged in the trace with the span's id (swtrace's TAG packet), so the exports link the
//!   polls of one span: Perfetto's flows, Chrome's flow events (examples/async_tasks.rs).
//! - [`Recording`] records the process in-process, into a perf.data that perf 6.1 reads: the
//!   whole trace, or as a flight recorder (an overwrite AUX area per thread, kept by
//!   [`Recording::snapshot`]). Each thread joins the recording at its first span or event.
//! - A flight recording's triggers take a snapshot on the triggering thread, so the trace kept
//!   ends where the trigger fired: an event as severe as [`RecordingOptions::snapshot_on_level`],
//!   a span busy past [`RecordingOptions::snapshot_on_slow`] (summed over its entries), a
//!   panic ([`RecordingOptions::snapshot_on_panic`]: its message first becomes an event); a
//!   [`SNAPSHOT`] uevent says why, and triggers within
//!   [`RecordingOptions::snapshot_interval`] of the last are counted, not taken. Each
//!   snapshot is written as it is taken: the file at the recording's path holds every
//!   snapshot so far, whole (a copy put in place in one rename), so a crash, an abort or a
//!   SIGKILL before the finish loses none. Each copy is of the whole file so far (made in the
//!   kernel, on the triggering thread): the interval between triggered snapshots also bounds
//!   that work. Under `perfaux record -S --snapshot-on LEVEL` (`--snapshot-on-slow`,
//!   `--snapshot-on-panic`) the layer fires the same triggers from what the recorder put in
//!   its environment, and the recorder takes the snapshot on the [`SNAPSHOT`] uevent.
//!
//! With the layer installed and no recording, a span's entry costs one relaxed load past the
//! registry's own work, its exit one thread-local load: within the noise of the registry
//! alone (BENCHMARKS.md). A span made still
//! gets its probe in its extensions, so that it records if a recording starts while it lives.
//!
//! [`RecordingOptions::timing`] chooses which entries and exits read the clock, as `perfaux
//! record -e swtrace/timing=.../` does: every one (the default), or one in N
//! ([`Timing::Periodic`], the others interpolated by the decoder and marked by the views).
//!
//! Under `perfaux record -- ./service` the same code is recorded by the recorder's preload
//! runtime, with no change: the spans' probes are named exactly (swtrace's `Probe::exact`: the
//! runtime writes their names into the control area, the recorder puts them in the file), the
//! events go to the runtime's uevents, and [`Recording::start`] says the process is recorded
//! already instead of recording it twice.

#![warn(missing_docs)]

mod fields;
mod layer;
mod recording;
mod span_table;

pub use layer::{PerfauxLayer, layer};
pub use perfaux_swtrace::Timing;
pub use recording::{Recording, RecordingOptions};

/// The uevent type of a `tracing` event: payload `level=... target=... message=... k=v...`.
pub const EVENT: u32 = perfaux_preload_abi::tracing::EVENT;
/// The uevent type of a span's fields, sent once at its first entry: payload
/// `span=NAME k=v...`.
pub const SPAN_FIELDS: u32 = perfaux_preload_abi::tracing::SPAN_FIELDS;

/// The uevent type of a snapshot a trigger takes, just before it: payload `reason=level
/// level=ERROR`, `reason=slow span=NAME busy_us=N` or `reason=panic`.
pub const SNAPSHOT: u32 = perfaux_preload_abi::tracing::SNAPSHOT;

/// The names the recording gives its uevent types (the views print them).
pub const UEVENT_TYPES: &[(&str, u32)] = &[
    ("tracing_event", EVENT),
    ("tracing_span", SPAN_FIELDS),
    ("tracing_snapshot", SNAPSHOT),
];
