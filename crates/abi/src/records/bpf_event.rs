//! PERF_RECORD_BPF_EVENT: `{ hdr; u16 type; u16 flags; u32 id; u8 tag[8]; sample_id }`
//! (type: PERF_BPF_EVENT_PROG_LOAD 1, PROG_UNLOAD 2).

use super::fixed::fixed_record;
use crate::consts::PERF_RECORD_BPF_EVENT;
use crate::sample_id::SampleId;

/// `BPF_TAG_SIZE`.
pub const BPF_TAG_SIZE: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
/// PERF_RECORD_BPF_EVENT: a BPF program was loaded or unloaded.
pub struct BpfEventRecord {
    /// `header.misc`.
    pub misc: u16,
    /// `type`: `PERF_BPF_EVENT_PROG_LOAD` (1) or `PERF_BPF_EVENT_PROG_UNLOAD` (2).
    pub type_: u16,
    /// `flags`, none defined (zero).
    pub flags: u16,
    /// The BPF program id.
    pub id: u32,
    /// The program's tag (a hash of its instructions).
    pub tag: [u8; BPF_TAG_SIZE],
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

fixed_record!(BpfEventRecord, PERF_RECORD_BPF_EVENT {
    type_: u16 as "type",
    flags: u16,
    id: u32,
    tag: [u8; BPF_TAG_SIZE],
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let tag = [1, 2, 3, 4, 5, 6, 7, 8];
        let rec = BpfEventRecord {
            misc: 0,
            type_: 1,
            flags: 0,
            id: 42,
            tag,
            sample_id: sid(),
        };
        let want = Le::new()
            .u16(1)
            .u16(0)
            .u32(42)
            .bytes(&tag)
            .sid()
            .with_header(PERF_RECORD_BPF_EVENT, 0);
        check_layout(&Record::BpfEvent(rec), &sid_info(), &want);
    }
}
