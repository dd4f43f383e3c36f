//! PERF_RECORD_HEADER_FEATURE (80): `{hdr; u64 feat_id; char data[]}`, one
//! feature section carried inline in a pipe. `data` is the section exactly
//! as file mode stores it after the data section (in the stream's byte
//! order); perfaux-perfdata parses it.

use super::UserRecordError;
use super::wire::{Put, Wire, check_size};
use crate::ByteSink;
use crate::consts::PERF_RECORD_HEADER_FEATURE;
use crate::endian::Endianness;

const NAME: &str = "PERF_RECORD_HEADER_FEATURE";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// PERF_RECORD_HEADER_FEATURE.
pub struct HeaderFeatureRecord<'a> {
    /// A `HEADER_*` feature number (perf.data's feature bit).
    pub feat_id: u64,
    /// The feature section's bytes.
    pub data: &'a [u8],
}

impl<'a> HeaderFeatureRecord<'a> {
    /// The header and `feat_id`.
    pub const MIN_SIZE: usize = 16;

    /// Parses a whole PERF_RECORD_HEADER_FEATURE, header included, in byte order `endian`.
    pub fn parse(record: &'a [u8], endian: Endianness) -> Result<Self, UserRecordError> {
        let (mut w, _) = Wire::open(
            record,
            endian,
            NAME,
            PERF_RECORD_HEADER_FEATURE,
            Self::MIN_SIZE,
        )?;
        let feat_id = w.u64()?;
        Ok(Self {
            feat_id,
            data: w.rest(),
        })
    }

    /// The record's size in bytes, header included (its `header.size`).
    pub fn size(&self) -> usize {
        Self::MIN_SIZE + self.data.len()
    }

    /// Writes the record. perf's feature writers keep sections 8-byte
    /// aligned; a ragged `data` is written as given.
    pub fn write<S: ByteSink + ?Sized>(
        &self,
        sink: &mut S,
        endian: Endianness,
    ) -> Result<(), UserRecordError> {
        check_size(NAME, self.size())?;
        let mut p = Put::header(sink, endian, PERF_RECORD_HEADER_FEATURE, self.size());
        p.u64(self.feat_id);
        p.bytes(self.data);
        Ok(())
    }
}
