//! PERF_RECORD_ITRACE_START: `{ hdr; u32 pid, tid; sample_id }`, logged when
//! an instruction-trace event is scheduled in, until the driver says it started.

use super::fixed::fixed_record;
use crate::consts::PERF_RECORD_ITRACE_START;
use crate::sample_id::SampleId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
/// PERF_RECORD_ITRACE_START: instruction tracing started for a task.
pub struct ItraceStartRecord {
    /// `header.misc`.
    pub misc: u16,
    /// The traced process id.
    pub pid: u32,
    /// The traced thread id.
    pub tid: u32,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

fixed_record!(
    ItraceStartRecord,
    PERF_RECORD_ITRACE_START { pid: u32, tid: u32 }
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let rec = ItraceStartRecord {
            misc: 0,
            pid: 1234,
            tid: 1235,
            sample_id: sid(),
        };
        let want = Le::new()
            .u32(1234)
            .u32(1235)
            .sid()
            .with_header(PERF_RECORD_ITRACE_START, 0);
        check_layout(&Record::ItraceStart(rec), &sid_info(), &want);
    }
}
