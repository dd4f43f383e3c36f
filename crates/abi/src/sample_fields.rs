//! The few fields of a PERF_RECORD_SAMPLE that a viewer reads (who, when,
//! where, the call chain and the RAW data), found by their offsets from the
//! sample_type instead of decoding the whole [`SampleRecord`].
//!
//! A [`SampleRecord`] holds every sample_type field (some 500 bytes, each
//! `Option` written per sample); a stream of small samples, such as
//! perfaux's uevents (IDENTIFIER|IP|TID|TIME|CPU|RAW), spent more on building
//! it than on reading the bytes. [`SampleFields::parse`] reads the same bytes
//! with the same bounds checks and returns the same errors: for layouts it
//! does not locate by offset (fields after the head other than CALLCHAIN and
//! RAW, or a body split by the ring) it runs the full parser and keeps its
//! fields.

use crate::array::Array;
use crate::consts::*;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::{RawData, RawReader};
use crate::sample::{HEAD_BITS, SampleRecord, parse_callchain, parse_raw};
use crate::sample_id::PidTid;

/// The sample_type bits [`SampleFields::parse`] locates by offset: the
/// fixed head, then CALLCHAIN and RAW, which follow each other in the
/// kernel's order (READ, before CALLCHAIN, is not among these).
const LOCATED_BITS: u64 = HEAD_BITS | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW;

/// A sample's fields as a viewer reads them; a field is `Some` iff its
/// sample_type bit is set, as in [`SampleRecord`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SampleFields<'a> {
    /// `PERF_SAMPLE_IP`: the instruction pointer.
    pub ip: Option<u64>,
    /// `PERF_SAMPLE_TID`: pid and tid.
    pub tid: Option<PidTid>,
    /// `PERF_SAMPLE_TIME`: the timestamp in ns.
    pub time: Option<u64>,
    /// `PERF_SAMPLE_PERIOD`: the events this sample stands for.
    pub period: Option<u64>,
    /// `PERF_SAMPLE_CALLCHAIN`: `ips[nr]`, with `PERF_CONTEXT_*` markers.
    pub callchain: Option<Array<'a, u64>>,
    /// `PERF_SAMPLE_RAW`: the raw data (its padding included).
    pub raw: Option<RawData<'a>>,
}

impl<'a> From<&SampleRecord<'a>> for SampleFields<'a> {
    fn from(s: &SampleRecord<'a>) -> Self {
        SampleFields {
            ip: s.ip,
            tid: s.tid,
            time: s.time,
            period: s.period,
            callchain: s.callchain,
            raw: s.raw,
        }
    }
}

impl<'a> SampleFields<'a> {
    /// Reads a SAMPLE body (the bytes after the header): what
    /// `SampleRecord::parse` would give for these fields, the same error
    /// where it fails. Inlined (always), so that the fields reach the
    /// caller in registers: returned through memory, they were read back
    /// with wider loads than their stores (a store-forwarding stall each).
    #[inline(always)]
    pub fn parse(
        body: RawData<'a>,
        info: &RecordParseInfo,
        endian: Endianness,
    ) -> Result<Self, ParseError> {
        let st = info.sample_type;
        if st & !LOCATED_BITS == 0
            && let Some(b) = body.as_single()
        {
            let head_len = (st & HEAD_BITS).count_ones() as usize * 8;
            if let Some(head) = b.get(..head_len) {
                let mut s = match endian {
                    Endianness::Little => Self::head::<false>(st, head),
                    Endianness::Big => Self::head::<true>(st, head),
                };
                if st & !HEAD_BITS != 0 {
                    s.tail(st, body, head_len, endian)?;
                }
                return Ok(s);
            }
        }
        Self::parse_full(body, info, endian)
    }

    /// A split or short body, or fields [`Self::parse`] does not locate:
    /// the full parser, whose errors name the field that is missing.
    #[inline(never)]
    fn parse_full(
        body: RawData<'a>,
        info: &RecordParseInfo,
        endian: Endianness,
    ) -> Result<Self, ParseError> {
        SampleRecord::parse(0, body, info, endian).map(|s| Self::from(&s))
    }

    /// The head fields read from `head`, which holds all of the head's words.
    #[inline(always)]
    fn head<const BIG: bool>(st: u64, head: &[u8]) -> Self {
        // The head's words in the kernel's order (not the bits' order:
        // IDENTIFIER comes first, STREAM_ID before CPU and PERIOD).
        let mut at = 0;
        let mut next = |bit: u64| -> Option<[u8; 8]> {
            if st & bit == 0 {
                return None;
            }
            let w = head.get(at..at + 8)?.try_into().ok();
            at += 8;
            w
        };
        let u64_of = |a: [u8; 8]| {
            if BIG {
                u64::from_be_bytes(a)
            } else {
                u64::from_le_bytes(a)
            }
        };
        let u32_of = |a: [u8; 4]| {
            if BIG {
                u32::from_be_bytes(a)
            } else {
                u32::from_le_bytes(a)
            }
        };
        next(PERF_SAMPLE_IDENTIFIER);
        let ip = next(PERF_SAMPLE_IP).map(u64_of);
        // Two u32 in one slot: pid at the lower address.
        let tid = next(PERF_SAMPLE_TID).map(|w| PidTid {
            pid: u32_of([w[0], w[1], w[2], w[3]]),
            tid: u32_of([w[4], w[5], w[6], w[7]]),
        });
        let time = next(PERF_SAMPLE_TIME).map(u64_of);
        next(PERF_SAMPLE_ADDR);
        next(PERF_SAMPLE_ID);
        next(PERF_SAMPLE_STREAM_ID);
        next(PERF_SAMPLE_CPU);
        let period = next(PERF_SAMPLE_PERIOD).map(u64_of);
        SampleFields {
            ip,
            tid,
            time,
            period,
            callchain: None,
            raw: None,
        }
    }

    /// CALLCHAIN and RAW after the head, read as the full parser reads them
    /// (same checks, same field names and offsets in an error).
    #[inline(always)]
    fn tail(
        &mut self,
        st: u64,
        body: RawData<'a>,
        head_len: usize,
        endian: Endianness,
    ) -> Result<(), ParseError> {
        let r = &mut RawReader::new(body, endian);
        r.skip(head_len, "sample head")?;
        if st & PERF_SAMPLE_CALLCHAIN != 0 {
            self.callchain = Some(parse_callchain(r)?);
        }
        if st & PERF_SAMPLE_RAW != 0 {
            self.raw = Some(parse_raw(r)?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
