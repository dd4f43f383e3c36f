//! PERF_RECORD_TIME_CONV (79): the user page's TSC conversion, so that a
//! decoder can turn trace timestamps into perf time.
//!
//! Two sizes exist: 32 bytes `{hdr; time_shift; time_mult; time_zero}`
//! (perf < 5.12) and 56 bytes, which add `time_cycles; time_mask;
//! u8 cap_user_time_zero; u8 cap_user_time_short; u8 reserved[6]`.

use super::UserRecordError;
use super::wire::{Put, Wire};
use crate::ByteSink;
use crate::consts::PERF_RECORD_TIME_CONV;
use crate::endian::Endianness;

const NAME: &str = "PERF_RECORD_TIME_CONV";

/// The fields of the 56-byte version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeConvExt {
    /// `perf_event_mmap_page.time_cycles` (for `cap_user_time_short`).
    pub time_cycles: u64,
    /// `perf_event_mmap_page.time_mask` (for `cap_user_time_short`).
    pub time_mask: u64,
    /// Whether `time_zero` is valid (`cap_user_time_zero`).
    pub cap_user_time_zero: u8,
    /// Whether `time_cycles`/`time_mask` are valid (`cap_user_time_short`).
    pub cap_user_time_short: u8,
    /// `reserved[6]`, kept for byte-exact round trips.
    pub reserved: [u8; 6],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
/// PERF_RECORD_TIME_CONV.
pub struct TimeConvRecord {
    /// `perf_event_mmap_page.time_shift`.
    pub time_shift: u64,
    /// `perf_event_mmap_page.time_mult`.
    pub time_mult: u64,
    /// `perf_event_mmap_page.time_zero`.
    pub time_zero: u64,
    /// `None` for the 32-byte version.
    pub ext: Option<TimeConvExt>,
}

impl TimeConvRecord {
    /// The size of the first version (perf < 5.12).
    pub const SIZE_V1: usize = 32;
    /// The size with [`TimeConvExt`] (perf 5.12+).
    pub const SIZE_V2: usize = 56;

    /// Parses either size; fields past 56 bytes (a newer perf) are ignored,
    /// and a size between the two versions reads as the first.
    pub fn parse(record: &[u8], endian: Endianness) -> Result<Self, UserRecordError> {
        let (mut w, _) = Wire::open(record, endian, NAME, PERF_RECORD_TIME_CONV, Self::SIZE_V1)?;
        let time_shift = w.u64()?;
        let time_mult = w.u64()?;
        let time_zero = w.u64()?;
        let ext = if record.len() >= Self::SIZE_V2 {
            Some(TimeConvExt {
                time_cycles: w.u64()?,
                time_mask: w.u64()?,
                cap_user_time_zero: w.u8()?,
                cap_user_time_short: w.u8()?,
                reserved: w.array::<6>()?,
            })
        } else {
            None
        };
        Ok(Self {
            time_shift,
            time_mult,
            time_zero,
            ext,
        })
    }

    /// The record's size in bytes, header included (its `header.size`).
    pub fn size(&self) -> usize {
        if self.ext.is_some() {
            Self::SIZE_V2
        } else {
            Self::SIZE_V1
        }
    }

    /// Writes the whole PERF_RECORD_TIME_CONV, header included, in byte order `endian`.
    pub fn write<S: ByteSink + ?Sized>(&self, sink: &mut S, endian: Endianness) {
        let mut p = Put::header(sink, endian, PERF_RECORD_TIME_CONV, self.size());
        p.u64(self.time_shift);
        p.u64(self.time_mult);
        p.u64(self.time_zero);
        if let Some(x) = self.ext {
            p.u64(x.time_cycles);
            p.u64(x.time_mask);
            p.bytes(&[x.cap_user_time_zero, x.cap_user_time_short]);
            p.bytes(&x.reserved);
        }
    }
}
