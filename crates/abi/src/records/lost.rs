//! PERF_RECORD_LOST: `{ hdr; u64 id; u64 lost; sample_id }`: records the
//! data area had no room for, emitted once room returns.

use super::fixed::fixed_record;
use crate::consts::PERF_RECORD_LOST;
use crate::sample_id::SampleId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
/// PERF_RECORD_LOST: records dropped because the ring buffer was full.
pub struct LostRecord {
    /// `header.misc`.
    pub misc: u16,
    /// The id of the event whose records were lost.
    pub id: u64,
    /// How many records were lost.
    pub lost: u64,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

fixed_record!(LostRecord, PERF_RECORD_LOST { id: u64, lost: u64 });

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_info::RecordParseInfo;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let rec = LostRecord {
            misc: 0,
            id: 7,
            lost: 12,
            sample_id: sid(),
        };
        let want = Le::new()
            .u64(7)
            .u64(12)
            .sid()
            .with_header(PERF_RECORD_LOST, 0);
        check_layout(&Record::Lost(rec), &sid_info(), &want);
        let bare = LostRecord {
            sample_id: SampleId::default(),
            ..rec
        };
        let want = Le::new().u64(7).u64(12).with_header(PERF_RECORD_LOST, 0);
        check_layout(&Record::Lost(bare), &RecordParseInfo::default(), &want);
    }
}
