//! PERF_RECORD_THROTTLE and PERF_RECORD_UNTHROTTLE share one layout:
//! `{ hdr; u64 time; u64 id; u64 stream_id; sample_id }`.

use super::fixed::fixed_record;
use crate::consts::{PERF_RECORD_THROTTLE, PERF_RECORD_UNTHROTTLE};
use crate::sample_id::SampleId;

/// Which of the two types a [`ThrottleRecord`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ThrottleKind {
    #[default]
    Throttle,
    Unthrottle,
}

impl ThrottleKind {
    pub fn record_type(self) -> u32 {
        match self {
            ThrottleKind::Throttle => PERF_RECORD_THROTTLE,
            ThrottleKind::Unthrottle => PERF_RECORD_UNTHROTTLE,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThrottleRecord {
    pub kind: ThrottleKind,
    pub misc: u16,
    pub time: u64,
    pub id: u64,
    pub stream_id: u64,
    pub sample_id: SampleId,
}

fixed_record!(ThrottleRecord, kind: ThrottleKind {
    time: u64,
    id: u64,
    stream_id: u64,
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        for (kind, ty) in [
            (ThrottleKind::Throttle, PERF_RECORD_THROTTLE),
            (ThrottleKind::Unthrottle, PERF_RECORD_UNTHROTTLE),
        ] {
            let rec = ThrottleRecord {
                kind,
                misc: 0,
                time: 1,
                id: 2,
                stream_id: 3,
                sample_id: sid(),
            };
            let want = Le::new().u64(1).u64(2).u64(3).sid().with_header(ty, 0);
            check_layout(&Record::Throttle(rec), &sid_info(), &want);
        }
    }
}
