//! perfaux's views of a recording: what `perfaux report` (without -D) and
//! `perfaux export` show.
//!
//! One streaming pass ([`walk()`]) turns any recording perfaux decodes
//! (its own software trace, uevents and samples; perf's cpu-clock or
//! tracepoint files) into [`ViewEvent`]s: per-thread call enters and exits
//! with the function name, samples with resolved callchains, uevents,
//! pause/resume, snapshot boundaries and TRUNCATED/lost markers. Consumers
//! implement [`Sink`]:
//!
//! - [`stats::Collector`] + [`report::write_report`]: uftrace's report and
//!   graph for traces, perf report's histogram for samples;
//! - [`flame`]: flame graph and flame chart SVGs (inferno);
//! - [`perfetto`]: Perfetto's TracePacket protobuf (prost), streamed;
//! - [`chrome`]: Chrome trace-event JSON, streamed;
//! - [`firefox`]: the Firefox Profiler's processed format (the JSON of
//!   fxprof-processed-profile), its growing columns spooled to a temporary
//!   file.
//!
//! # Memory
//!
//! The pass keeps the open calls of the window it decodes (the deepest
//! stack), thread names, mappings and interned function names; consumers
//! keep aggregates keyed by function or call path. Nothing keeps events.
//! The trace bytes are read in place from perfaux's trace section, a
//! bounded piece of one window at a time: memory does not grow with the
//! trace.
//!
//! # Order
//!
//! A thread's trace events come in time order. The record stream (samples,
//! uevents, markers) comes first, then the trace windows: consumers that
//! need one time line (viewers) leave the sorting to the viewer, which
//! sorts anyway.

#![warn(missing_docs)]

pub mod chrome;
mod cxa_demangle;
pub mod event;
pub mod firefox;
pub mod flame;
pub mod flame_chart;
mod func_symbols;
mod intel_pt;
pub mod key_values;
pub mod object_files;
pub mod offcpu;
pub mod perfetto;
mod record_order;
pub mod report;
pub mod stats;
pub mod symbols;
pub mod unwind;
pub mod walk;

pub use event::{Call, FuncId, LostKind, Names, Sink, Tee, ViewEvent};
pub use walk::{Filter, Recording, Summary, UeventFormat, walk};

/// A view that could not be made: what and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewError(pub String);

impl std::fmt::Display for ViewError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ViewError {}

/// A timestamp as perf script prints it: seconds and nanoseconds.
pub fn fmt_timestamp(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}
