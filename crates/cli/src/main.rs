//! `perfaux`: record, report -D and script for the perf AUX area.

fn main() {}
