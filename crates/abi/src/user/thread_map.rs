//! PERF_RECORD_THREAD_MAP (73): `{hdr; u64 nr; {u64 pid; char comm[16]}[nr]}`,
//! the threads a `perf stat`/`perf record -t` session watched.

use super::UserRecordError;
use super::wire::{Put, Wire, check_size};
use crate::ByteSink;
use crate::consts::PERF_RECORD_THREAD_MAP;
use crate::endian::Endianness;

const NAME: &str = "PERF_RECORD_THREAD_MAP";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
/// One thread of a THREAD_MAP.
pub struct ThreadMapEntry {
    /// The thread id.
    pub pid: u64,
    /// NUL-padded, as the kernel's `TASK_COMM_LEN` buffer.
    pub comm: [u8; 16],
}

impl ThreadMapEntry {
    /// The comm up to its first NUL.
    pub fn comm_bytes(&self) -> &[u8] {
        let n = self.comm.iter().position(|&b| b == 0).unwrap_or(16);
        &self.comm[..n]
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
/// PERF_RECORD_THREAD_MAP.
pub struct ThreadMapRecord {
    /// The threads.
    pub entries: Vec<ThreadMapEntry>,
}

impl ThreadMapRecord {
    const ENTRY: usize = 24;

    /// Parses a whole PERF_RECORD_THREAD_MAP, header included, in byte order `endian`.
    pub fn parse(record: &[u8], endian: Endianness) -> Result<Self, UserRecordError> {
        let (mut w, _) = Wire::open(record, endian, NAME, PERF_RECORD_THREAD_MAP, 16)?;
        let at = w.pos();
        let nr = w.u64()?;
        let n = w.count(nr, Self::ENTRY, at)?;
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let pid = w.u64()?;
            let comm = w.array::<16>()?;
            entries.push(ThreadMapEntry { pid, comm });
        }
        Ok(Self { entries })
    }

    /// The record's size in bytes, header included (its `header.size`).
    pub fn size(&self) -> usize {
        16 + Self::ENTRY * self.entries.len()
    }

    /// Writes the whole PERF_RECORD_THREAD_MAP, header included, in byte order `endian`.
    pub fn write<S: ByteSink + ?Sized>(
        &self,
        sink: &mut S,
        endian: Endianness,
    ) -> Result<(), UserRecordError> {
        check_size(NAME, self.size())?;
        let mut p = Put::header(sink, endian, PERF_RECORD_THREAD_MAP, self.size());
        p.u64(self.entries.len() as u64);
        for e in &self.entries {
            p.u64(e.pid);
            p.bytes(&e.comm);
        }
        Ok(())
    }
}
