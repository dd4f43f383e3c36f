//! perfaux's command line as a library: the `perfaux` binary is a thin
//! `main` over these modules, and the benches and tests call them directly.
//!
//! - [`events`]: `-e` with perf's event syntax;
//! - [`dump`]: `report -D`, perf's raw dump of every record.

pub mod dump;
pub mod events;
