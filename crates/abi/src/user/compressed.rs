//! PERF_RECORD_COMPRESSED (81) `{hdr; char data[]}` and PERF_RECORD_COMPRESSED2
//! (83) `{hdr; u64 data_size; char data[]}`: one zstd frame of records.
//!
//! COMPRESSED's `header.size` is the exact byte count, so the next record may
//! start unaligned; COMPRESSED2 (perf 6.x) pads the record to 8 and says how
//! many of its bytes are compressed data. The frames of consecutive records
//! form one stream: a record can start in one chunk and end in the next.

use super::UserRecordError;
use super::wire::{Put, Wire, align8, check_size};
use crate::ByteSink;
use crate::consts::{PERF_RECORD_COMPRESSED, PERF_RECORD_COMPRESSED2};
use crate::endian::Endianness;

const NAME: &str = "PERF_RECORD_COMPRESSED";
const NAME2: &str = "PERF_RECORD_COMPRESSED2";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// PERF_RECORD_COMPRESSED: `{hdr; char data[]}`.
pub struct CompressedRecord<'a> {
    /// The zstd frame(s); decompressed they are a sequence of records.
    pub data: &'a [u8],
}

impl<'a> CompressedRecord<'a> {
    /// Parses a whole PERF_RECORD_COMPRESSED, header included, in byte order `endian`.
    pub fn parse(record: &'a [u8], endian: Endianness) -> Result<Self, UserRecordError> {
        let (mut w, _) = Wire::open(record, endian, NAME, PERF_RECORD_COMPRESSED, 8)?;
        Ok(Self { data: w.rest() })
    }

    /// The record's size in bytes, header included (its `header.size`).
    pub fn size(&self) -> usize {
        8 + self.data.len()
    }

    /// Writes the whole PERF_RECORD_COMPRESSED, header included, in byte order `endian`.
    pub fn write<S: ByteSink + ?Sized>(
        &self,
        sink: &mut S,
        endian: Endianness,
    ) -> Result<(), UserRecordError> {
        check_size(NAME, self.size())?;
        Put::header(sink, endian, PERF_RECORD_COMPRESSED, self.size()).bytes(self.data);
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// PERF_RECORD_COMPRESSED2: `{hdr; u64 data_size; char data[]}`, padded to 8.
pub struct Compressed2Record<'a> {
    /// The `data_size` bytes of zstd frame(s), without the padding.
    pub data: &'a [u8],
}

impl<'a> Compressed2Record<'a> {
    /// The header and `data_size`.
    pub const MIN_SIZE: usize = 16;

    /// Parses a whole PERF_RECORD_COMPRESSED2, header included, in byte order `endian`.
    pub fn parse(record: &'a [u8], endian: Endianness) -> Result<Self, UserRecordError> {
        let (mut w, _) = Wire::open(
            record,
            endian,
            NAME2,
            PERF_RECORD_COMPRESSED2,
            Self::MIN_SIZE,
        )?;
        let at = w.pos();
        let data_size = w.u64()?;
        let n = w.count(data_size, 1, at)?;
        Ok(Self { data: w.bytes(n)? })
    }

    /// `header.size`: header, `data_size` and data, padded to 8.
    pub fn size(&self) -> usize {
        align8(Self::MIN_SIZE + self.data.len())
    }

    /// Writes the whole PERF_RECORD_COMPRESSED2, header included, in byte order `endian`.
    pub fn write<S: ByteSink + ?Sized>(
        &self,
        sink: &mut S,
        endian: Endianness,
    ) -> Result<(), UserRecordError> {
        let size = self.size();
        check_size(NAME2, size)?;
        let mut p = Put::header(sink, endian, PERF_RECORD_COMPRESSED2, size);
        p.u64(self.data.len() as u64);
        p.bytes(self.data);
        p.zeros(size - Self::MIN_SIZE - self.data.len());
        Ok(())
    }
}
