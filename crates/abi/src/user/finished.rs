//! PERF_RECORD_FINISHED_ROUND (68) and PERF_RECORD_FINISHED_INIT (82): a bare
//! header. FINISHED_ROUND tells a sorting reader that every record before it
//! is older than any after the previous round; FINISHED_INIT marks the end of
//! the synthesized records that precede the workload's.

use super::UserRecordError;
use super::wire::{Put, Wire};
use crate::ByteSink;
use crate::consts::{PERF_RECORD_FINISHED_INIT, PERF_RECORD_FINISHED_ROUND};
use crate::endian::Endianness;

macro_rules! bare_record {
    ($name:ident, $type_:expr, $label:literal) => {
        #[doc = concat!("`", $label, "`: the header alone.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name;

        impl $name {
            /// The header alone: the record has no body.
            pub const SIZE: usize = 8;

            /// Parses the record; perf never puts a body in it, but a longer
            /// one is accepted (perf itself only reads the header).
            pub fn parse(record: &[u8], endian: Endianness) -> Result<Self, UserRecordError> {
                Wire::open(record, endian, $label, $type_, Self::SIZE)?;
                Ok(Self)
            }

            /// The record's size: the bare 8-byte header.
            pub fn size(&self) -> usize {
                Self::SIZE
            }

            /// Writes the bare header in byte order `endian`.
            pub fn write<S: ByteSink + ?Sized>(&self, sink: &mut S, endian: Endianness) {
                Put::header(sink, endian, $type_, Self::SIZE);
            }
        }
    };
}

bare_record!(
    FinishedRoundRecord,
    PERF_RECORD_FINISHED_ROUND,
    "PERF_RECORD_FINISHED_ROUND"
);
bare_record!(
    FinishedInitRecord,
    PERF_RECORD_FINISHED_INIT,
    "PERF_RECORD_FINISHED_INIT"
);
