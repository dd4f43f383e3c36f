//! PERF_RECORD_HEADER_ATTR (64): `{hdr; perf_event_attr attr; u64 id[]}`, an
//! event's attr and sample ids carried inline in a pipe. The attr is
//! `attr.size` bytes; the ids fill the rest of `header.size`.

use super::UserRecordError;
use super::wire::{Put, Wire, check_size};
use crate::ByteSink;
use crate::attr::PerfEventAttr;
use crate::consts::{PERF_ATTR_SIZE_VER0, PERF_RECORD_HEADER_ATTR};
use crate::endian::Endianness;

const NAME: &str = "PERF_RECORD_HEADER_ATTR";

#[derive(Debug, Clone, PartialEq, Eq, Default)]
/// PERF_RECORD_HEADER_ATTR.
pub struct HeaderAttrRecord {
    /// `attr.size` is the size written (and the size read).
    pub attr: PerfEventAttr,
    /// The sample ids of the event's instances.
    pub ids: Vec<u64>,
}

impl HeaderAttrRecord {
    /// Parses a whole PERF_RECORD_HEADER_ATTR, header included, in byte order `endian`.
    pub fn parse(record: &[u8], endian: Endianness) -> Result<Self, UserRecordError> {
        let min = 8 + PERF_ATTR_SIZE_VER0 as usize;
        let (mut w, _) = Wire::open(record, endian, NAME, PERF_RECORD_HEADER_ATTR, min)?;
        let at = w.pos();
        let (attr, attr_len) = PerfEventAttr::parse(&record[at..], endian)
            .map_err(|e| w.invalid(at, e.to_string()))?;
        w.bytes(attr_len)?;
        // perf: n_ids = (header.size - sizeof(header) - attr.size) / 8.
        let n = w.remaining() / 8;
        let mut ids = Vec::with_capacity(n);
        for _ in 0..n {
            ids.push(w.u64()?);
        }
        Ok(Self { attr, ids })
    }

    fn attr_size(&self) -> u32 {
        if self.attr.size == 0 {
            PERF_ATTR_SIZE_VER0
        } else {
            self.attr.size
        }
    }

    /// The record's size in bytes, header included (its `header.size`).
    pub fn size(&self) -> usize {
        8 + self.attr_size() as usize + 8 * self.ids.len()
    }

    /// Writes the record with the attr at `attr.size` bytes (which must be a
    /// multiple of 8 so that the ids stay aligned).
    pub fn write<S: ByteSink + ?Sized>(
        &self,
        sink: &mut S,
        endian: Endianness,
    ) -> Result<(), UserRecordError> {
        let attr_size = self.attr_size();
        if !attr_size.is_multiple_of(8) || attr_size < PERF_ATTR_SIZE_VER0 {
            return Err(UserRecordError::Invalid {
                record: NAME,
                offset: 12,
                what: format!("attr.size {attr_size} is not a valid 8-aligned attr size"),
            });
        }
        check_size(NAME, self.size())?;
        let mut p = Put::header(sink, endian, PERF_RECORD_HEADER_ATTR, self.size());
        p.bytes(&self.attr.to_bytes(attr_size, endian));
        for &id in &self.ids {
            p.u64(id);
        }
        Ok(())
    }
}
