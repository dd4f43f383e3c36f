//! PERF_RECORD_AUXTRACE_INFO (70): `{hdr; u32 type; u32 reserved; u64 priv[]}`.
//! `type` is a `PERF_AUXTRACE_*` number; `priv` is the tracer's own
//! configuration (Intel PT: 16 words of pmu type, time conversion, caps...),
//! as many words as `header.size` leaves room for.

use super::UserRecordError;
use super::wire::{Put, Wire, check_size};
use crate::ByteSink;
use crate::consts::PERF_RECORD_AUXTRACE_INFO;
use crate::endian::Endianness;

const NAME: &str = "PERF_RECORD_AUXTRACE_INFO";

#[derive(Debug, Clone, PartialEq, Eq, Default)]
/// PERF_RECORD_AUXTRACE_INFO.
pub struct AuxtraceInfoRecord {
    /// `type`: a `PERF_AUXTRACE_*` number.
    pub type_: u32,
    /// `reserved__`: zero as perf writes it, kept for byte-exact round trips.
    pub reserved: u32,
    /// `priv[]`: the tracer's configuration words.
    pub priv_: Vec<u64>,
}

impl AuxtraceInfoRecord {
    /// Header plus `type` and `reserved`.
    pub const MIN_SIZE: usize = 16;

    /// Parses a whole PERF_RECORD_AUXTRACE_INFO, header included, in byte order `endian`.
    pub fn parse(record: &[u8], endian: Endianness) -> Result<Self, UserRecordError> {
        let (mut w, _) = Wire::open(
            record,
            endian,
            NAME,
            PERF_RECORD_AUXTRACE_INFO,
            Self::MIN_SIZE,
        )?;
        let type_ = w.u32()?;
        let reserved = w.u32()?;
        // perf sizes priv[] as (header.size - 16) / 8; a ragged tail is ignored.
        let n = w.remaining() / 8;
        let mut priv_ = Vec::with_capacity(n);
        for _ in 0..n {
            priv_.push(w.u64()?);
        }
        Ok(Self {
            type_,
            reserved,
            priv_,
        })
    }

    /// The record's size in bytes, header included (its `header.size`).
    pub fn size(&self) -> usize {
        Self::MIN_SIZE + 8 * self.priv_.len()
    }

    /// Writes the whole PERF_RECORD_AUXTRACE_INFO, header included, in byte order `endian`.
    pub fn write<S: ByteSink + ?Sized>(
        &self,
        sink: &mut S,
        endian: Endianness,
    ) -> Result<(), UserRecordError> {
        check_size(NAME, self.size())?;
        let mut p = Put::header(sink, endian, PERF_RECORD_AUXTRACE_INFO, self.size());
        p.u32(self.type_);
        p.u32(self.reserved);
        for &v in &self.priv_ {
            p.u64(v);
        }
        Ok(())
    }
}
