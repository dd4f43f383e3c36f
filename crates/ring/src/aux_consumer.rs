//! The consumer half of the AUX area: what `perf record` does in
//! tools/perf/util/auxtrace.c (`__auxtrace_mmap__read()`), in its two
//! modes.
//!
//! - **Full trace** ([`AuxMmap::read`]): the new bytes `[aux_tail,
//!   aux_head)`, copied once (two `memcpy`s at most) into consumer-owned
//!   memory, then given back by storing `aux_tail`. The offset they start at
//!   is the AUX stream position a `PERF_RECORD_AUXTRACE` carries.
//! - **Snapshot** ([`AuxMmap::read_snapshot`]): an overwrite area read
//!   after the PMU stopped: the valid bytes, oldest first, and whether the
//!   area wrapped (`aux_head >= aux_size`, since the producer's head is
//!   unmasked and grows), optionally only the newest `snapshot_size`.
//!
//! `aux_head` is the producer's word: one behind the consumer's own tail or
//! more than the area ahead of it is an error, never a read of bytes that
//! are not there.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use perfaux_abi::ByteSink;
use perfaux_abi::mmap_page::offsets;

use crate::aux::{copy_aux, copy_aux_to_slice};
use crate::error::RingError;
use crate::memory::RingMemory;

/// `struct auxtrace_mmap`: the consumer of one ring's AUX area.
pub struct AuxMmap {
    mem: Arc<RingMemory>,
    base: *const u8,
    aux_size: u64,
    /// `mm->prev`: the consumer's own `aux_tail`.
    prev: u64,
    buf: Vec<u8>,
}

// SAFETY: `base` points into `mem` (Send + Sync, kept alive by the Arc);
// the consumer reads the area only through copies.
unsafe impl Send for AuxMmap {}

/// New AUX bytes read in full-trace mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxRead<'a> {
    /// AUX position of `data[0]` (the AUXTRACE record's `offset`).
    pub offset: u64,
    /// The bytes, `[aux_tail, aux_head)` as read.
    pub data: &'a [u8],
}

/// The bytes of an overwrite AUX area, oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxSnapshot<'a> {
    /// AUX position of `data[0]`.
    pub offset: u64,
    /// `aux_head` when it was read.
    pub head: u64,
    /// The bytes, oldest first.
    pub data: &'a [u8],
    /// The producer wrote more than the whole area: the oldest bytes were
    /// overwritten and `data[0]` is not the start of the trace.
    pub wrapped: bool,
}

impl AuxMmap {
    /// A consumer of `mem`'s AUX area, starting at the current `aux_tail`.
    pub fn new(mem: Arc<RingMemory>) -> Result<Self, RingError> {
        let base = mem.aux_ptr().ok_or(RingError::NoAux)?;
        let prev = mem.user_word(offsets::AUX_TAIL).load(Ordering::Relaxed);
        Ok(AuxMmap {
            base,
            aux_size: mem.layout().aux_size as u64,
            prev,
            buf: Vec::new(),
            mem,
        })
    }

    /// `aux_size`.
    pub fn aux_size(&self) -> u64 {
        self.aux_size
    }

    /// The consumer's `aux_tail`.
    pub fn tail(&self) -> u64 {
        self.prev
    }

    /// `aux_head` as published now (untrusted).
    pub fn aux_head(&self) -> u64 {
        self.mem
            .user_word(offsets::AUX_HEAD)
            .load(Ordering::Acquire)
    }

    /// Full-trace mode: copies `[aux_tail, aux_head)` out and stores
    /// `aux_tail = aux_head` (when the mapping is writable).
    pub fn read(&mut self) -> Result<AuxRead<'_>, RingError> {
        let head = self.aux_head();
        let tail = self.prev;
        let len = head.wrapping_sub(tail);
        if (len as i64) < 0 {
            return Err(RingError::AuxHeadBehindTail { head, tail });
        }
        if len > self.aux_size {
            return Err(RingError::AuxHeadTooFarAhead {
                head,
                tail,
                size: self.aux_size,
            });
        }
        self.fill(tail, head)?;
        if self.mem.aux_writable() {
            self.mem
                .user_word(offsets::AUX_TAIL)
                .store(head, Ordering::Release);
        }
        self.prev = head;
        Ok(AuxRead {
            offset: tail,
            data: &self.buf,
        })
    }

    /// Snapshot (overwrite) mode, after the PMU stopped: the valid bytes
    /// ending at `aux_head`, oldest first; at most `snapshot_size` of them
    /// if it is not 0.
    pub fn read_snapshot(&mut self, snapshot_size: u64) -> Result<AuxSnapshot<'_>, RingError> {
        let head = self.aux_head();
        let wrapped = head >= self.aux_size;
        let mut len = head.min(self.aux_size);
        if snapshot_size != 0 {
            len = len.min(snapshot_size);
        }
        let from = head - len;
        self.fill(from, head)?;
        self.prev = head;
        Ok(AuxSnapshot {
            offset: from,
            head,
            data: &self.buf,
            wrapped,
        })
    }

    /// Copies AUX positions `[from, to)` (at most `aux_size` bytes) into
    /// `sink`: [`crate::AuxBuffer::copy_aux`] for the consumer.
    pub fn copy(&self, from: u64, to: u64, sink: &mut impl ByteSink) -> Result<u64, RingError> {
        copy_aux(self.base, self.aux_size, from, to, sink)
    }

    fn fill(&mut self, from: u64, to: u64) -> Result<(), RingError> {
        let len = to.wrapping_sub(from) as usize;
        self.buf.clear();
        self.buf.resize(len, 0);
        copy_aux_to_slice(self.base, self.aux_size, from, to, &mut self.buf)
    }
}
