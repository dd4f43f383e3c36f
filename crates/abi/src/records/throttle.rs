//! PERF_RECORD_THROTTLE and PERF_RECORD_UNTHROTTLE share one layout:
//! `{ hdr; u64 time; u64 id; u64 stream_id; sample_id }`.

use super::fixed::fixed_record;
use crate::consts::{PERF_RECORD_THROTTLE, PERF_RECORD_UNTHROTTLE};
use crate::sample_id::SampleId;

/// Which of the two types a [`ThrottleRecord`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ThrottleKind {
    #[default]
    /// PERF_RECORD_THROTTLE.
    Throttle,
    /// PERF_RECORD_UNTHROTTLE.
    Unthrottle,
}

impl ThrottleKind {
    /// The `PERF_RECORD_*` number of this kind.
    pub fn record_type(self) -> u32 {
        match self {
            ThrottleKind::Throttle => PERF_RECORD_THROTTLE,
            ThrottleKind::Unthrottle => PERF_RECORD_UNTHROTTLE,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
/// PERF_RECORD_THROTTLE or PERF_RECORD_UNTHROTTLE.
pub struct ThrottleRecord {
    /// Which of the two records this is.
    pub kind: ThrottleKind,
    /// `header.misc`.
    pub misc: u16,
    /// When sampling stopped or restarted, in perf clock ns.
    pub time: u64,
    /// The event's primary id.
    pub id: u64,
    /// The id of the event instance that was throttled.
    pub stream_id: u64,
    /// The `sample_id` trailer (`attr.sample_id_all`).
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
