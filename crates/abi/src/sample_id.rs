//! The `sample_id` trailer that `sample_id_all` appends to every record but
//! PERF_RECORD_SAMPLE (include/uapi/linux/perf_event.h, `struct sample_id`):
//! `{u32 pid,tid}[TID] {u64 time}[TIME] {u64 id}[ID] {u64 stream_id}[STREAM_ID]
//! {u32 cpu,res}[CPU] {u64 id}[IDENTIFIER]`.

use crate::consts::{
    PERF_SAMPLE_CPU, PERF_SAMPLE_ID, PERF_SAMPLE_IDENTIFIER, PERF_SAMPLE_STREAM_ID,
    PERF_SAMPLE_TID, PERF_SAMPLE_TIME,
};
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::raw::RawReader;
use crate::sink::ByteSink;

/// `{ u32 pid, tid; }` (PERF_SAMPLE_TID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PidTid {
    /// The process id (thread group id).
    pub pid: u32,
    /// The thread id.
    pub tid: u32,
}

/// `{ u32 cpu, res; }` (PERF_SAMPLE_CPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CpuRes {
    /// The CPU number.
    pub cpu: u32,
    /// `res`, reserved (zero).
    pub res: u32,
}

impl PidTid {
    #[inline]
    pub(crate) fn read(r: &mut RawReader<'_>) -> Result<Self, ParseError> {
        Ok(Self {
            pid: r.u32("pid")?,
            tid: r.u32("tid")?,
        })
    }
    #[inline]
    pub(crate) fn write<S: ByteSink + ?Sized>(self, e: Endianness, sink: &mut S) {
        sink.put(&e.u32_bytes(self.pid));
        sink.put(&e.u32_bytes(self.tid));
    }
}

impl CpuRes {
    #[inline]
    pub(crate) fn read(r: &mut RawReader<'_>) -> Result<Self, ParseError> {
        Ok(Self {
            cpu: r.u32("cpu")?,
            res: r.u32("cpu res")?,
        })
    }
    #[inline]
    pub(crate) fn write<S: ByteSink + ?Sized>(self, e: Endianness, sink: &mut S) {
        sink.put(&e.u32_bytes(self.cpu));
        sink.put(&e.u32_bytes(self.res));
    }
}

/// The decoded trailer; a field is `Some` iff its sample_type bit is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SampleId {
    /// PERF_SAMPLE_TID: pid and tid.
    pub tid: Option<PidTid>,
    /// PERF_SAMPLE_TIME: the timestamp in ns.
    pub time: Option<u64>,
    /// PERF_SAMPLE_ID: the event's primary id.
    pub id: Option<u64>,
    /// PERF_SAMPLE_STREAM_ID: the id of the event instance that wrote the record.
    pub stream_id: Option<u64>,
    /// PERF_SAMPLE_CPU: cpu and res.
    pub cpu: Option<CpuRes>,
    /// PERF_SAMPLE_IDENTIFIER: the event id, last in the trailer.
    pub identifier: Option<u64>,
}

/// The sample_type bits that the trailer carries.
pub const SAMPLE_ID_BITS: u64 = PERF_SAMPLE_TID
    | PERF_SAMPLE_TIME
    | PERF_SAMPLE_ID
    | PERF_SAMPLE_STREAM_ID
    | PERF_SAMPLE_CPU
    | PERF_SAMPLE_IDENTIFIER;

impl SampleId {
    /// Bytes of the trailer for `sample_type` (8 per selected field).
    #[inline]
    pub const fn len(sample_type: u64) -> usize {
        (sample_type & SAMPLE_ID_BITS).count_ones() as usize * 8
    }

    /// Decodes the trailer laid out for `sample_type`.
    #[inline]
    pub fn parse(r: &mut RawReader<'_>, sample_type: u64) -> Result<Self, ParseError> {
        let st = sample_type;
        Ok(Self {
            tid: if st & PERF_SAMPLE_TID != 0 {
                Some(PidTid::read(r)?)
            } else {
                None
            },
            time: if st & PERF_SAMPLE_TIME != 0 {
                Some(r.u64("sample_id time")?)
            } else {
                None
            },
            id: if st & PERF_SAMPLE_ID != 0 {
                Some(r.u64("sample_id id")?)
            } else {
                None
            },
            stream_id: if st & PERF_SAMPLE_STREAM_ID != 0 {
                Some(r.u64("sample_id stream_id")?)
            } else {
                None
            },
            cpu: if st & PERF_SAMPLE_CPU != 0 {
                Some(CpuRes::read(r)?)
            } else {
                None
            },
            identifier: if st & PERF_SAMPLE_IDENTIFIER != 0 {
                Some(r.u64("sample_id identifier")?)
            } else {
                None
            },
        })
    }

    /// Encodes the trailer laid out for `sample_type`: a selected field that
    /// is `None` is written as zero, a field whose bit is clear is left out.
    pub fn write<S: ByteSink + ?Sized>(&self, sample_type: u64, e: Endianness, sink: &mut S) {
        let st = sample_type;
        if st & PERF_SAMPLE_TID != 0 {
            self.tid.unwrap_or_default().write(e, sink);
        }
        if st & PERF_SAMPLE_TIME != 0 {
            sink.put(&e.u64_bytes(self.time.unwrap_or(0)));
        }
        if st & PERF_SAMPLE_ID != 0 {
            sink.put(&e.u64_bytes(self.id.unwrap_or(0)));
        }
        if st & PERF_SAMPLE_STREAM_ID != 0 {
            sink.put(&e.u64_bytes(self.stream_id.unwrap_or(0)));
        }
        if st & PERF_SAMPLE_CPU != 0 {
            self.cpu.unwrap_or_default().write(e, sink);
        }
        if st & PERF_SAMPLE_IDENTIFIER != 0 {
            sink.put(&e.u64_bytes(self.identifier.unwrap_or(0)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::RawData;

    #[test]
    fn trailer_layout_matches_upstream() {
        // All six fields, little-endian, built by hand in the UAPI's order.
        let st = SAMPLE_ID_BITS;
        let mut want = Vec::new();
        want.extend_from_slice(&7u32.to_le_bytes()); // pid
        want.extend_from_slice(&8u32.to_le_bytes()); // tid
        want.extend_from_slice(&1000u64.to_le_bytes()); // time
        want.extend_from_slice(&42u64.to_le_bytes()); // id
        want.extend_from_slice(&43u64.to_le_bytes()); // stream_id
        want.extend_from_slice(&3u32.to_le_bytes()); // cpu
        want.extend_from_slice(&0u32.to_le_bytes()); // res
        want.extend_from_slice(&42u64.to_le_bytes()); // identifier (last)
        let sid = SampleId {
            tid: Some(PidTid { pid: 7, tid: 8 }),
            time: Some(1000),
            id: Some(42),
            stream_id: Some(43),
            cpu: Some(CpuRes { cpu: 3, res: 0 }),
            identifier: Some(42),
        };
        let mut got = Vec::new();
        sid.write(st, Endianness::Little, &mut got);
        assert_eq!(got, want);
        assert_eq!(SampleId::len(st), 48);
        let back = SampleId::parse(
            &mut RawReader::new(RawData::Single(&want), Endianness::Little),
            st,
        )
        .unwrap();
        assert_eq!(back, sid);
        // Only TIME|CPU: 16 bytes, others absent.
        let st2 = PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | crate::consts::PERF_SAMPLE_IP;
        let mut got = Vec::new();
        sid.write(st2, Endianness::Big, &mut got);
        assert_eq!(got.len(), SampleId::len(st2));
        assert_eq!(&got[..8], &1000u64.to_be_bytes());
        assert_eq!(&got[8..12], &3u32.to_be_bytes());
    }
}
