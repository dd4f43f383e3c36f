//! Context switches (attr.context_switch):
//! - PERF_RECORD_SWITCH: `{ hdr; sample_id }` (per-task events);
//! - PERF_RECORD_SWITCH_CPU_WIDE: `{ hdr; u32 next_prev_pid; u32 next_prev_tid; sample_id }`.
//!
//! `misc & PERF_RECORD_MISC_SWITCH_OUT` says out (else in);
//! `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT` says the task was preempted.

use super::fixed::fixed_record;
use super::{EncodeRecord, split_trailer, write_trailer};
use crate::consts::{PERF_RECORD_SWITCH, PERF_RECORD_SWITCH_CPU_WIDE};
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
/// PERF_RECORD_SWITCH: the event's task was switched in or out.
pub struct SwitchRecord {
    /// `header.misc`: `PERF_RECORD_MISC_SWITCH_OUT` (else in), and
    /// `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT` on a preemption.
    pub misc: u16,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

impl SwitchRecord {
    /// Decodes a PERF_RECORD_SWITCH body (the bytes after the header) in byte order
    /// `e`; `misc` is the header's, and `info` lays out the `sample_id` trailer.
    pub fn parse(
        misc: u16,
        body: RawData<'_>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (_, sample_id) = split_trailer(PERF_RECORD_SWITCH, body, info, e)?;
        Ok(Self { misc, sample_id })
    }
}

impl EncodeRecord for SwitchRecord {
    fn record_type(&self) -> u32 {
        PERF_RECORD_SWITCH
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        info.sample_id_len(PERF_RECORD_SWITCH)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        write_trailer(PERF_RECORD_SWITCH, &self.sample_id, info, e, sink);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
/// PERF_RECORD_SWITCH_CPU_WIDE: a context switch on the CPU a CPU-wide event
/// watches.
pub struct SwitchCpuWideRecord {
    /// `header.misc`: `PERF_RECORD_MISC_SWITCH_OUT` (else in), and
    /// `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT` on a preemption.
    pub misc: u16,
    /// The task switched to (on out) or from (on in).
    pub next_prev_pid: u32,
    /// The thread id of the task switched to (on out) or from (on in).
    pub next_prev_tid: u32,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

fixed_record!(
    SwitchCpuWideRecord,
    PERF_RECORD_SWITCH_CPU_WIDE {
        next_prev_pid: u32,
        next_prev_tid: u32,
    }
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::{PERF_RECORD_MISC_SWITCH_OUT, PERF_RECORD_MISC_SWITCH_OUT_PREEMPT};
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layouts() {
        let out = PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT;
        let rec = SwitchRecord {
            misc: out,
            sample_id: sid(),
        };
        check_layout(
            &Record::Switch(rec),
            &sid_info(),
            &Le::new().sid().with_header(PERF_RECORD_SWITCH, out),
        );
        // Without sample_id_all a switch is a bare header.
        let bare = SwitchRecord {
            misc: 0,
            sample_id: SampleId::default(),
        };
        check_layout(
            &Record::Switch(bare),
            &RecordParseInfo::default(),
            &Le::new().with_header(PERF_RECORD_SWITCH, 0),
        );
        let wide = SwitchCpuWideRecord {
            misc: out,
            next_prev_pid: 4,
            next_prev_tid: 5,
            sample_id: sid(),
        };
        let want = Le::new()
            .u32(4)
            .u32(5)
            .sid()
            .with_header(PERF_RECORD_SWITCH_CPU_WIDE, out);
        check_layout(&Record::SwitchCpuWide(wide), &sid_info(), &want);
    }
}
