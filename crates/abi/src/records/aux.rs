//! PERF_RECORD_AUX: `{ hdr; u64 aux_offset; u64 aux_size; u64 flags; sample_id }`,
//! emitted by `perf_aux_output_end()` (flags: `PERF_AUX_FLAG_*`).

use super::fixed::fixed_record;
use crate::consts::PERF_RECORD_AUX;
use crate::sample_id::SampleId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
/// PERF_RECORD_AUX: `aux_size` new bytes at `aux_offset` in the AUX area.
pub struct AuxRecord {
    /// `header.misc`.
    pub misc: u16,
    /// Where the new data starts, as an offset into the AUX stream (`aux_head`
    /// before the write, not wrapped).
    pub aux_offset: u64,
    /// Bytes of new data (0 with TRUNCATED when nothing fit).
    pub aux_size: u64,
    /// `PERF_AUX_FLAG_*` bits.
    pub flags: u64,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

fixed_record!(
    AuxRecord,
    PERF_RECORD_AUX {
        aux_offset: u64,
        aux_size: u64,
        flags: u64,
    }
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::{PERF_AUX_FLAG_OVERWRITE, PERF_AUX_FLAG_TRUNCATED};
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let flags = PERF_AUX_FLAG_OVERWRITE | PERF_AUX_FLAG_TRUNCATED;
        let rec = AuxRecord {
            misc: 0,
            aux_offset: 0x10000,
            aux_size: 0x2000,
            flags,
            sample_id: sid(),
        };
        let want = Le::new()
            .u64(0x10000)
            .u64(0x2000)
            .u64(3)
            .sid()
            .with_header(PERF_RECORD_AUX, 0);
        assert_eq!(want.len(), 48);
        check_layout(&Record::Aux(rec), &sid_info(), &want);
    }
}
