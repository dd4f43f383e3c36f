//! PERF_RECORD_AUX_OUTPUT_HW_ID: `{ hdr; u64 hw_id; sample_id }`: the
//! hardware id that AUX output of this event is tagged with.

use super::fixed::fixed_record;
use crate::consts::PERF_RECORD_AUX_OUTPUT_HW_ID;
use crate::sample_id::SampleId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
/// PERF_RECORD_AUX_OUTPUT_HW_ID: the hardware id of this event's AUX output.
pub struct AuxOutputHwIdRecord {
    /// `header.misc`.
    pub misc: u16,
    /// The PMU-specific hardware id the AUX data is tagged with.
    pub hw_id: u64,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

fixed_record!(
    AuxOutputHwIdRecord,
    PERF_RECORD_AUX_OUTPUT_HW_ID { hw_id: u64 }
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let rec = AuxOutputHwIdRecord {
            misc: 0,
            hw_id: 0x55,
            sample_id: sid(),
        };
        let want = Le::new()
            .u64(0x55)
            .sid()
            .with_header(PERF_RECORD_AUX_OUTPUT_HW_ID, 0);
        check_layout(&Record::AuxOutputHwId(rec), &sid_info(), &want);
    }
}
