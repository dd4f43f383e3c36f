//! PERF_RECORD_AUXTRACE (71): a 48-byte record
//! `{hdr; u64 size; u64 offset; u64 reference; u32 idx; u32 tid; u32 cpu; u32 reserved}`
//! **followed by `size` bytes of AUX-area data that `header.size` does not
//! count**. A reader that steps by `header.size` alone lands inside the
//! payload; it must step by `header.size + size`.
//!
//! `size` is the payload length rounded up to 8 (perf record pads the copied
//! AUX data with zeros), `offset` the position of the data in the AUX stream,
//! `reference` a tracer-chosen value (perf uses the TSC or a counter), `idx`
//! the mmap index, `tid`/`cpu` may be -1 (as u32).

use super::UserRecordError;
use super::wire::{Put, Wire, align8};
use crate::ByteSink;
use crate::consts::PERF_RECORD_AUXTRACE;
use crate::endian::Endianness;

const NAME: &str = "PERF_RECORD_AUXTRACE";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
/// PERF_RECORD_AUXTRACE's fixed part (the payload follows it).
pub struct AuxtraceRecord {
    /// Payload bytes that follow the record (a multiple of 8 as perf writes it).
    pub size: u64,
    /// The payload's position in the AUX stream.
    pub offset: u64,
    /// A tracer-chosen reference (perf: the TSC or a counter).
    pub reference: u64,
    /// The index of the mmap the data came from.
    pub idx: u32,
    /// The traced thread, or -1 (as u32) for a CPU-wide trace.
    pub tid: u32,
    /// The traced CPU, or -1 (as u32) for a per-thread trace.
    pub cpu: u32,
    /// `reserved__`, kept for byte-exact round trips.
    pub reserved: u32,
}

impl AuxtraceRecord {
    /// `header.size` of the record (the payload is not included).
    pub const SIZE: usize = 48;

    /// A record describing `payload_len` bytes of AUX data; `size` is the
    /// length padded to 8, as perf record writes it.
    pub fn for_payload(
        payload_len: usize,
        offset: u64,
        reference: u64,
        idx: u32,
        tid: u32,
        cpu: u32,
    ) -> Self {
        Self {
            size: align8(payload_len) as u64,
            offset,
            reference,
            idx,
            tid,
            cpu,
            reserved: 0,
        }
    }

    /// Parses the 48-byte record (payload excluded). perf has only ever
    /// written 48; a longer `header.size` is read up to its first 48 bytes.
    pub fn parse(record: &[u8], endian: Endianness) -> Result<Self, UserRecordError> {
        let (mut w, _) = Wire::open(record, endian, NAME, PERF_RECORD_AUXTRACE, Self::SIZE)?;
        Ok(Self {
            size: w.u64()?,
            offset: w.u64()?,
            reference: w.u64()?,
            idx: w.u32()?,
            tid: w.u32()?,
            cpu: w.u32()?,
            reserved: w.u32()?,
        })
    }

    /// Writes the whole PERF_RECORD_AUXTRACE, header included, in byte order `endian`.
    pub fn write<S: ByteSink + ?Sized>(&self, sink: &mut S, endian: Endianness) {
        let mut p = Put::header(sink, endian, PERF_RECORD_AUXTRACE, Self::SIZE);
        p.u64(self.size);
        p.u64(self.offset);
        p.u64(self.reference);
        p.u32(self.idx);
        p.u32(self.tid);
        p.u32(self.cpu);
        p.u32(self.reserved);
    }

    /// Writes the record and its payload, zero-padded up to `self.size`.
    /// The payload must be at most `size` bytes and at least `size - 7`.
    pub fn write_with_payload<S: ByteSink + ?Sized>(
        &self,
        sink: &mut S,
        endian: Endianness,
        payload: &[u8],
    ) -> Result<(), UserRecordError> {
        let len = payload.len() as u64;
        if len > self.size || self.size - len >= 8 {
            return Err(UserRecordError::Invalid {
                record: NAME,
                offset: 8,
                what: format!(
                    "size {} does not describe a payload of {len} bytes padded to 8",
                    self.size
                ),
            });
        }
        self.write(sink, endian);
        sink.put(payload);
        sink.put_zeros((self.size - len) as usize);
        Ok(())
    }
}
