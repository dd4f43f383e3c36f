//! `-e` event lists with perf's syntax: [`parse`] reads the text,
//! [`resolve`] looks the names up and applies perf's grouping rules.

pub mod aux_pmu;
pub mod max_rate;
pub mod parse;
pub mod resolve;

pub use parse::{EventError, EventSpec, parse_events};
pub use resolve::{
    Event, EventKind, SamplerOptions, apply_sampler_options, call_graph_mode, dwarf_stack_size,
    resolve_events,
};
