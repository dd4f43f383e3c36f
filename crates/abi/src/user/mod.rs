//! The perf tool's own record types (64..86): they exist only in perf.data
//! and a perf pipe, never in a kernel ring.
//!
//! One module per record, each with `parse` (the whole record, header
//! included, exactly `header.size` bytes, in the file's byte order) and
//! `write` into a [`ByteSink`](crate::ByteSink). Layouts are those of
//! tools/lib/perf/include/perf/event.h; where perf grew a record over the
//! years (TIME_CONV, ID_INDEX, AUXTRACE_ERROR, CPU_MAP), every size it has
//! written is read and the struct says which one it was.
//!
//! PERF_RECORD_AUXTRACE is the odd one: its `size` payload bytes follow the
//! 48-byte record and are *not* counted in `header.size`; see [`auxtrace`].

pub mod auxtrace;
pub mod auxtrace_error;
pub mod auxtrace_info;
pub mod compressed;
pub mod cpu_map;
pub mod event_update;
pub mod finished;
pub mod header_attr;
pub mod header_feature;
pub mod id_index;
pub mod thread_map;
pub mod time_conv;
mod wire;

#[cfg(test)]
mod tests;

pub use auxtrace::AuxtraceRecord;
pub use auxtrace_error::{AuxtraceErrorGuest, AuxtraceErrorRecord};
pub use auxtrace_info::AuxtraceInfoRecord;
pub use compressed::{Compressed2Record, CompressedRecord};
pub use cpu_map::{CpuMapData, CpuMapRecord};
pub use event_update::{EventUpdate, EventUpdateRecord};
pub use finished::{FinishedInitRecord, FinishedRoundRecord};
pub use header_attr::HeaderAttrRecord;
pub use header_feature::HeaderFeatureRecord;
pub use id_index::{IdIndexEntry, IdIndexGuest, IdIndexRecord};
pub use thread_map::{ThreadMapEntry, ThreadMapRecord};
pub use time_conv::{TimeConvExt, TimeConvRecord};

/// Why a user record could not be parsed or written. Offsets are byte
/// offsets inside the record, header included.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserRecordError {
    #[error("{record}: {size} bytes, needs at least {need}")]
    /// The record is shorter than its fixed part.
    TooShort {
        /// The record type's name.
        record: &'static str,
        /// The record's bytes.
        size: usize,
        /// The bytes its fixed part needs.
        need: usize,
    },
    #[error("{record}: header.type is {found}, expected {expected}")]
    /// `header.type` is not the parser's type.
    WrongType {
        /// The record type's name.
        record: &'static str,
        /// The parser's `PERF_RECORD_*` number.
        expected: u32,
        /// The header's.
        found: u32,
    },
    #[error("{record}: header.size is {header_size} but {len} bytes were given")]
    /// `header.size` disagrees with the bytes given.
    SizeMismatch {
        /// The record type's name.
        record: &'static str,
        /// `header.size`.
        header_size: u16,
        /// The bytes given.
        len: usize,
    },
    #[error("{record}: at byte {offset}: {what}")]
    /// A field holds a value the layout cannot have.
    Invalid {
        /// The record type's name.
        record: &'static str,
        /// Byte offset of the field, header included.
        offset: usize,
        /// What is wrong.
        what: String,
    },
    #[error("{record}: {size} bytes do not fit the 16-bit header.size")]
    /// The record would not fit the 16-bit `header.size`.
    TooLarge {
        /// The record type's name.
        record: &'static str,
        /// The bytes it would take.
        size: usize,
    },
}
