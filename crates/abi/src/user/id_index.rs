//! PERF_RECORD_ID_INDEX (69): `{hdr; u64 nr; {u64 id, idx, cpu, tid}[nr]}`,
//! which mmap (idx), CPU and thread each sample id belongs to. perf 5.19
//! appended a second array `{u64 machine_pid, vcpu}[nr]` after the first for
//! guest machines; it is present when `header.size` has room for it.

use super::UserRecordError;
use super::wire::{Put, Wire, check_size};
use crate::ByteSink;
use crate::consts::PERF_RECORD_ID_INDEX;
use crate::endian::Endianness;

const NAME: &str = "PERF_RECORD_ID_INDEX";

/// `struct id_index_entry_2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdIndexGuest {
    /// The guest machine's pid (0 for the host).
    pub machine_pid: u64,
    /// The guest's virtual CPU.
    pub vcpu: u64,
}

/// `struct id_index_entry`, with its `id_index_entry_2` if the record has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdIndexEntry {
    /// The sample id.
    pub id: u64,
    /// The index of the mmap the id's records are read from.
    pub idx: u64,
    /// The CPU the event instance is opened on (-1 as u64 for any).
    pub cpu: u64,
    /// The thread the event instance is opened on (-1 as u64 for any).
    pub tid: u64,
    /// The `id_index_entry_2` part (perf 5.19+).
    pub guest: Option<IdIndexGuest>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
/// PERF_RECORD_ID_INDEX.
pub struct IdIndexRecord {
    /// Either every entry has `guest` or none does.
    pub entries: Vec<IdIndexEntry>,
}

impl IdIndexRecord {
    const E1: usize = 32;
    const E2: usize = 16;

    /// Parses a whole PERF_RECORD_ID_INDEX, header included, in byte order `endian`.
    pub fn parse(record: &[u8], endian: Endianness) -> Result<Self, UserRecordError> {
        let (mut w, _) = Wire::open(record, endian, NAME, PERF_RECORD_ID_INDEX, 16)?;
        let at = w.pos();
        let nr = w.u64()?;
        let n = w.count(nr, Self::E1, at)?;
        let has_guest = w.remaining() >= n * (Self::E1 + Self::E2);
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            entries.push(IdIndexEntry {
                id: w.u64()?,
                idx: w.u64()?,
                cpu: w.u64()?,
                tid: w.u64()?,
                guest: None,
            });
        }
        if has_guest && n > 0 {
            for e in &mut entries {
                e.guest = Some(IdIndexGuest {
                    machine_pid: w.u64()?,
                    vcpu: w.u64()?,
                });
            }
        }
        Ok(Self { entries })
    }

    fn has_guest(&self) -> bool {
        self.entries.first().is_some_and(|e| e.guest.is_some())
    }

    /// The record's size in bytes, header included (its `header.size`).
    pub fn size(&self) -> usize {
        let per = if self.has_guest() {
            Self::E1 + Self::E2
        } else {
            Self::E1
        };
        16 + per * self.entries.len()
    }

    /// Writes the whole PERF_RECORD_ID_INDEX, header included, in byte order `endian`.
    pub fn write<S: ByteSink + ?Sized>(
        &self,
        sink: &mut S,
        endian: Endianness,
    ) -> Result<(), UserRecordError> {
        let guest = self.has_guest();
        if self.entries.iter().any(|e| e.guest.is_some() != guest) {
            return Err(UserRecordError::Invalid {
                record: NAME,
                offset: 16,
                what: "some entries have guest fields and some do not".into(),
            });
        }
        check_size(NAME, self.size())?;
        let mut p = Put::header(sink, endian, PERF_RECORD_ID_INDEX, self.size());
        p.u64(self.entries.len() as u64);
        for e in &self.entries {
            p.u64(e.id);
            p.u64(e.idx);
            p.u64(e.cpu);
            p.u64(e.tid);
        }
        for g in self.entries.iter().filter_map(|e| e.guest) {
            p.u64(g.machine_pid);
            p.u64(g.vcpu);
        }
        Ok(())
    }
}
