//! PERF_RECORD_LOST_SAMPLES: `{ hdr; u64 lost; sample_id }`: samples the PMU
//! dropped (`perf_log_lost_samples()`).

use super::fixed::fixed_record;
use crate::consts::PERF_RECORD_LOST_SAMPLES;
use crate::sample_id::SampleId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
/// PERF_RECORD_LOST_SAMPLES: samples dropped before they reached the ring.
pub struct LostSamplesRecord {
    /// `header.misc`.
    pub misc: u16,
    /// How many samples were lost.
    pub lost: u64,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

fixed_record!(LostSamplesRecord, PERF_RECORD_LOST_SAMPLES { lost: u64 });

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let rec = LostSamplesRecord {
            misc: 0,
            lost: 99,
            sample_id: sid(),
        };
        let want = Le::new()
            .u64(99)
            .sid()
            .with_header(PERF_RECORD_LOST_SAMPLES, 0);
        check_layout(&Record::LostSamples(rec), &sid_info(), &want);
    }
}
