//! PERF_RECORD_EXIT and PERF_RECORD_FORK share one layout:
//! `{ hdr; u32 pid, ppid; u32 tid, ptid; u64 time; sample_id }`.

use super::{EncodeRecord, split_trailer, write_trailer};
use crate::consts::{PERF_RECORD_EXIT, PERF_RECORD_FORK};
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

/// Which of the two types a [`TaskRecord`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TaskKind {
    #[default]
    Exit,
    Fork,
}

impl TaskKind {
    pub fn record_type(self) -> u32 {
        match self {
            TaskKind::Exit => PERF_RECORD_EXIT,
            TaskKind::Fork => PERF_RECORD_FORK,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskRecord {
    pub kind: TaskKind,
    pub misc: u16,
    pub pid: u32,
    pub ppid: u32,
    pub tid: u32,
    pub ptid: u32,
    pub time: u64,
    pub sample_id: SampleId,
}

impl TaskRecord {
    pub fn parse(
        kind: TaskKind,
        misc: u16,
        body: RawData<'_>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(kind.record_type(), body, info, e)?;
        Ok(Self {
            kind,
            misc,
            pid: r.u32("pid")?,
            ppid: r.u32("ppid")?,
            tid: r.u32("tid")?,
            ptid: r.u32("ptid")?,
            time: r.u64("time")?,
            sample_id,
        })
    }
}

impl EncodeRecord for TaskRecord {
    fn record_type(&self) -> u32 {
        self.kind.record_type()
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        24 + info.sample_id_len(self.record_type())
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u32_bytes(self.pid));
        sink.put(&e.u32_bytes(self.ppid));
        sink.put(&e.u32_bytes(self.tid));
        sink.put(&e.u32_bytes(self.ptid));
        sink.put(&e.u64_bytes(self.time));
        write_trailer(self.record_type(), &self.sample_id, info, e, sink);
    }
}

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
