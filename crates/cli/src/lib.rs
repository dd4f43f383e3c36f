//! perfaux's command line as a library: the `perfaux` binary is a thin
//! `main` over these modules, and the benches and tests call them directly.
//!
//! - [`cli`]: the subcommands and options (clap);
//! - [`events`]: `-e` with perf's event syntax;
//! - [`dump`]: `report -D`, perf's raw dump of every record;
//! - [`record`]: `record`, the built-in workload under perfaux's perf core;
//! - [`report`], [`export`], [`view_input`]: `report` without -D and
//!   `export`, over perfaux-view;
//! - [`script`]: `script`, one line per event, and `--call-trace`;
//!
//! The recording format (trace section, uevent samples, attr rules) is
//! perfaux-perfdata's; the recorder itself is perfaux-recorder's.
//! - [`workload`]: the built-in instrumented workload;
//! - [`error`], [`progress`]: one-line errors, progress on stderr.

pub mod cli;
pub mod dump;
pub mod error;
pub mod events;
pub mod export;
pub mod input;
pub mod progress;
pub mod record;
pub mod report;
pub mod script;
pub mod view_input;
pub mod workload;
