//! What a consumer must know about an event's attr to parse its records, and
//! how to find which attr a record belongs to when a stream mixes several
//! (perf's `id_pos`/`is_pos`, tools/perf/util/evsel.c).

use crate::attr::PerfEventAttr;
use crate::consts::{
    PERF_RECORD_SAMPLE, PERF_RECORD_USER_TYPE_START, PERF_SAMPLE_ADDR, PERF_SAMPLE_CPU,
    PERF_SAMPLE_ID, PERF_SAMPLE_IDENTIFIER, PERF_SAMPLE_IP, PERF_SAMPLE_STREAM_ID, PERF_SAMPLE_TID,
    PERF_SAMPLE_TIME, ext,
};
use crate::endian::Endianness;
use crate::raw::{RawData, RawReader};
use crate::sample_id::SampleId;

/// The attr fields that shape record layouts, with derived sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RecordParseInfo {
    /// `attr.sample_type`: the fields of samples and of the `sample_id` trailer.
    pub sample_type: u64,
    /// `attr.read_format`: the layout of READ records and PERF_SAMPLE_READ.
    pub read_format: u64,
    /// `attr.sample_id_all`: whether non-sample records carry the trailer.
    pub sample_id_all: bool,
    /// `attr.branch_sample_type`: HW_INDEX and COUNTERS shape the branch stack.
    pub branch_sample_type: u64,
    /// popcount(sample_regs_user): registers in a REGS_USER block.
    pub regs_user_count: u32,
    /// popcount(sample_regs_intr): registers in a REGS_INTR block.
    pub regs_intr_count: u32,
}

impl RecordParseInfo {
    /// The layout facts of `attr`.
    pub fn new(attr: &PerfEventAttr) -> Self {
        Self {
            sample_type: attr.sample_type,
            read_format: attr.read_format,
            sample_id_all: attr.sample_id_all(),
            branch_sample_type: attr.branch_sample_type,
            regs_user_count: attr.sample_regs_user.count_ones(),
            regs_intr_count: attr.sample_regs_intr.count_ones(),
        }
    }

    /// Whether a record of type `ty` ends in a sample_id trailer: every
    /// kernel type but SAMPLE (and perfaux's uevent), when sample_id_all.
    #[inline]
    pub fn has_sample_id(&self, ty: u32) -> bool {
        self.sample_id_all
            && ty != PERF_RECORD_SAMPLE
            && (ty < PERF_RECORD_USER_TYPE_START || ty == ext::PERF_RECORD_UEVENT)
    }

    /// Bytes of the sample_id trailer on records of type `ty`.
    #[inline]
    pub fn sample_id_len(&self, ty: u32) -> usize {
        if self.has_sample_id(ty) {
            SampleId::len(self.sample_type)
        } else {
            0
        }
    }

    /// Where a SAMPLE body holds the event id (perf's `id_pos`, in bytes):
    /// IDENTIFIER is first; else ID follows IP, TID, TIME and ADDR.
    pub fn sample_id_offset(&self) -> Option<usize> {
        let st = self.sample_type;
        if st & PERF_SAMPLE_IDENTIFIER != 0 {
            Some(0)
        } else if st & PERF_SAMPLE_ID != 0 {
            let before = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR;
            Some((st & before).count_ones() as usize * 8)
        } else {
            None
        }
    }

    /// How far before the end of a non-SAMPLE body its sample_id holds the
    /// event id (perf's `is_pos`, in bytes): IDENTIFIER is last; else ID is
    /// followed by STREAM_ID and CPU.
    pub fn nonsample_id_offset_from_end(&self) -> Option<usize> {
        let st = self.sample_type;
        if !self.sample_id_all {
            None
        } else if st & PERF_SAMPLE_IDENTIFIER != 0 {
            Some(8)
        } else if st & PERF_SAMPLE_ID != 0 {
            let after = PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU;
            Some(8 + (st & after).count_ones() as usize * 8)
        } else {
            None
        }
    }

    /// Where a SAMPLE body holds its time: after IDENTIFIER, IP and TID.
    pub fn sample_time_offset(&self) -> Option<usize> {
        let st = self.sample_type;
        (st & PERF_SAMPLE_TIME != 0).then(|| {
            let before = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID;
            (st & before).count_ones() as usize * 8
        })
    }

    /// How far before the end of a non-SAMPLE body its sample_id holds the
    /// time: TIME is followed by ID, STREAM_ID, CPU and IDENTIFIER.
    pub fn nonsample_time_offset_from_end(&self) -> Option<usize> {
        let st = self.sample_type;
        (self.sample_id_all && st & PERF_SAMPLE_TIME != 0).then(|| {
            let after =
                PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER;
            8 + (st & after).count_ones() as usize * 8
        })
    }

    /// The time of a record body without decoding the record: what a reader
    /// sorting a stream by time (perf's ordered events) needs per record.
    #[inline]
    pub fn record_time(&self, ty: u32, body: RawData<'_>, endian: Endianness) -> Option<u64> {
        let off = if ty == PERF_RECORD_SAMPLE {
            self.sample_time_offset()?
        } else if self.has_sample_id(ty) {
            body.len()
                .checked_sub(self.nonsample_time_offset_from_end()?)?
        } else {
            return None;
        };
        let field = body.slice(off, 8)?;
        RawReader::new(field, endian).u64("time").ok()
    }

    /// The event id of a record body (after the header), if this attr's
    /// layout puts one there. A reader with several attrs that all share
    /// the id position (perf requires it: IDENTIFIER, or the same bits
    /// before ID) uses the result to pick the attr.
    pub fn record_id(&self, ty: u32, body: RawData<'_>, endian: Endianness) -> Option<u64> {
        let off = if ty == PERF_RECORD_SAMPLE {
            self.sample_id_offset()?
        } else if self.has_sample_id(ty) {
            body.len()
                .checked_sub(self.nonsample_id_offset_from_end()?)?
        } else {
            return None;
        };
        let field = body.slice(off, 8)?;
        RawReader::new(field, endian).u64("id").ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::*;

    fn info(st: u64, all: bool) -> RecordParseInfo {
        RecordParseInfo {
            sample_type: st,
            sample_id_all: all,
            ..Default::default()
        }
    }

    #[test]
    fn id_positions_follow_perf() {
        // IDENTIFIER: first in a sample, last in sample_id.
        let i = info(
            PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_ID | PERF_SAMPLE_CPU,
            true,
        );
        assert_eq!(
            (i.sample_id_offset(), i.nonsample_id_offset_from_end()),
            (Some(0), Some(8))
        );
        // ID after IP|TID|TIME (ADDR absent); before STREAM_ID and CPU.
        let st = PERF_SAMPLE_IP
            | PERF_SAMPLE_TID
            | PERF_SAMPLE_TIME
            | PERF_SAMPLE_ID
            | PERF_SAMPLE_STREAM_ID
            | PERF_SAMPLE_CPU
            | PERF_SAMPLE_PERIOD;
        let i = info(st, true);
        assert_eq!(
            (i.sample_id_offset(), i.nonsample_id_offset_from_end()),
            (Some(24), Some(24))
        );
        assert_eq!(info(st, false).nonsample_id_offset_from_end(), None);
        assert_eq!(info(PERF_SAMPLE_IP, true).sample_id_offset(), None);
    }

    #[test]
    fn record_time_reads_both_kinds() {
        let st = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
        let i = info(st, true);
        assert_eq!(
            (i.sample_time_offset(), i.nonsample_time_offset_from_end()),
            (Some(16), Some(24))
        );
        // SAMPLE body: identifier, pid/tid, time, cpu/res.
        let mut s = Vec::new();
        for w in [7u64, 5 | (6 << 32), 123_456, 1] {
            s.extend_from_slice(&w.to_be_bytes());
        }
        assert_eq!(
            i.record_time(PERF_RECORD_SAMPLE, RawData::Single(&s), Endianness::Big),
            Some(123_456)
        );
        // ITRACE_START body: pid/tid, then sample_id {pid/tid, time, cpu/res, identifier}.
        let mut t = Vec::new();
        for w in [5u64 | (6 << 32), 5 | (6 << 32), 99, 1, 7] {
            t.extend_from_slice(&w.to_be_bytes());
        }
        assert_eq!(
            i.record_time(
                PERF_RECORD_ITRACE_START,
                RawData::Single(&t),
                Endianness::Big
            ),
            Some(99)
        );
        assert_eq!(
            info(st, false).record_time(
                PERF_RECORD_ITRACE_START,
                RawData::Single(&t),
                Endianness::Big
            ),
            None
        );
        assert_eq!(
            info(PERF_SAMPLE_IP, true).record_time(
                PERF_RECORD_SAMPLE,
                RawData::Single(&s),
                Endianness::Big
            ),
            None
        );
    }

    #[test]
    fn record_id_reads_both_kinds() {
        let st = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_ID | PERF_SAMPLE_CPU;
        let i = info(st, true);
        // SAMPLE body: ip, pid/tid, id, cpu/res.
        let mut s = Vec::new();
        for w in [0x1000u64, 5 | (6 << 32), 77, 1] {
            s.extend_from_slice(&w.to_le_bytes());
        }
        assert_eq!(
            i.record_id(PERF_RECORD_SAMPLE, RawData::Single(&s), Endianness::Little),
            Some(77)
        );
        // LOST_SAMPLES body: lost, then sample_id {pid/tid, id, cpu/res}.
        let mut l = Vec::new();
        for w in [9u64, 5 | (6 << 32), 78, 1] {
            l.extend_from_slice(&w.to_le_bytes());
        }
        assert_eq!(
            i.record_id(
                PERF_RECORD_LOST_SAMPLES,
                RawData::Single(&l),
                Endianness::Little
            ),
            Some(78)
        );
        assert_eq!(
            i.record_id(
                PERF_RECORD_FINISHED_ROUND,
                RawData::Single(&l),
                Endianness::Little
            ),
            None
        );
        assert_eq!(
            i.record_id(
                PERF_RECORD_LOST_SAMPLES,
                RawData::Single(&l[..8]),
                Endianness::Little
            ),
            None
        );
    }
}
