//! PERF_RECORD_EXIT and PERF_RECORD_FORK share one layout:
//! `{ hdr; u32 pid, ppid; u32 tid, ptid; u64 time; sample_id }`.

use super::fixed::fixed_record;
use crate::consts::{PERF_RECORD_EXIT, PERF_RECORD_FORK};
use crate::sample_id::SampleId;

/// Which of the two types a [`TaskRecord`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TaskKind {
    #[default]
    /// PERF_RECORD_EXIT.
    Exit,
    /// PERF_RECORD_FORK.
    Fork,
}

impl TaskKind {
    /// The `PERF_RECORD_*` number of this kind.
    pub fn record_type(self) -> u32 {
        match self {
            TaskKind::Exit => PERF_RECORD_EXIT,
            TaskKind::Fork => PERF_RECORD_FORK,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
/// PERF_RECORD_EXIT or PERF_RECORD_FORK (`attr.task`).
pub struct TaskRecord {
    /// Which of the two records this is.
    pub kind: TaskKind,
    /// `header.misc`.
    pub misc: u16,
    /// The process id of the task.
    pub pid: u32,
    /// The parent's process id.
    pub ppid: u32,
    /// The thread id of the task.
    pub tid: u32,
    /// The parent's thread id.
    pub ptid: u32,
    /// When it happened, in perf clock ns.
    pub time: u64,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

fixed_record!(TaskRecord, kind: TaskKind {
    pid: u32,
    ppid: u32,
    tid: u32,
    ptid: u32,
    time: u64,
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::PERF_RECORD_MISC_FORK_EXEC;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        for (kind, ty, misc) in [
            (TaskKind::Exit, PERF_RECORD_EXIT, 0),
            (TaskKind::Fork, PERF_RECORD_FORK, PERF_RECORD_MISC_FORK_EXEC),
        ] {
            let rec = TaskRecord {
                kind,
                misc,
                pid: 10,
                ppid: 1,
                tid: 11,
                ptid: 2,
                time: 555,
                sample_id: sid(),
            };
            let want = Le::new()
                .u32(10)
                .u32(1)
                .u32(11)
                .u32(2)
                .u64(555)
                .sid()
                .with_header(ty, misc);
            check_layout(&Record::Task(rec), &sid_info(), &want);
        }
    }
}
