//! `perfaux report -D`: perf's raw dump of every record.

pub mod fmt;
