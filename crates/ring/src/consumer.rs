//! The consumer half of the data area: what `perf record` does with a
//! mmapped ring (tools/lib/perf/mmap.c `perf_mmap__read_init/_event/_done`
//! and `perf_mmap__consume`).
//!
//! The consumer does not trust the producer's memory. [`PerfMmap::read_records`]
//! loads `data_head` once, checks it against its own tail (`md->prev`, never
//! re-read from the page), copies `[tail, head)` once into memory it owns
//! (two `memcpy`s at most, split at the wrap), gives the bytes back by
//! storing `data_tail`, and then parses records out of its copy, so a
//! writer that scribbles on the ring cannot change a record under the
//! parse. Every header is checked (size 0, not a multiple of 8, longer than
//! what was published) and a bad one ends the iteration with an error.
//!
//! Overwrite rings (the data area mapped read-only, where the kernel
//! ignores `data_tail`) are read as snapshots ([`PerfMmap::read_overwrite`]),
//! after pausing output as `perf record --overwrite` does with
//! `PERF_EVENT_IOC_PAUSE_OUTPUT`.

use std::sync::Arc;

use perfaux_abi::mmap_page::offsets;
use perfaux_abi::{Endianness, PerfEventHeader};

use crate::error::RingError;
use crate::memory::RingMemory;
use crate::protocol;

/// `struct perf_mmap`, data side: the consumer of one ring's data area.
pub struct PerfMmap {
    mem: Arc<RingMemory>,
    data: *const u8,
    data_size: u64,
    /// `md->prev`: the consumer's own tail.
    prev: u64,
    /// Consumer-owned copy of the bytes being parsed.
    buf: Vec<u8>,
}

// SAFETY: `data` points into `mem`, which is Send + Sync and kept alive by
// the Arc; the consumer only reads the area through copies.
unsafe impl Send for PerfMmap {}

impl PerfMmap {
    /// A consumer of `mem`'s data area, starting at the current `data_tail`.
    pub fn new(mem: Arc<RingMemory>) -> Self {
        let prev = mem
            .user_word(offsets::DATA_TAIL)
            .load(std::sync::atomic::Ordering::Relaxed);
        PerfMmap {
            data: mem.data_ptr(),
            data_size: mem.layout().data_size as u64,
            prev,
            buf: Vec::new(),
            mem,
        }
    }

    /// The memory under this consumer.
    pub fn memory(&self) -> &Arc<RingMemory> {
        &self.mem
    }

    /// The consumer's tail (`md->prev`).
    pub fn tail(&self) -> u64 {
        self.prev
    }

    /// `data_head` as published now (untrusted).
    pub fn data_head(&self) -> u64 {
        protocol::load_head(self.mem.user_word(offsets::DATA_HEAD))
    }

    /// Copies `len` bytes from ring position `pos` (unmasked, wrapping)
    /// into `self.buf`; `len <= data_size`.
    fn copy_out(&mut self, pos: u64, len: u64) {
        debug_assert!(len <= self.data_size);
        let len = len as usize;
        self.buf.clear();
        self.buf.reserve(len);
        if len == 0 {
            return;
        }
        let off = (pos & (self.data_size - 1)) as usize;
        let first = len.min(self.data_size as usize - off);
        let dst = self.buf.as_mut_ptr();
        // SAFETY: [off, off+first) and [0, len-first) lie in the data area
        // (off < data_size, len <= data_size); dst has capacity for len
        // bytes and does not overlap the mapping. The producer may write
        // the source concurrently (a broken or hostile one): the copy then
        // holds garbage, which the parser rejects, but reads stay in bounds.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data.wrapping_add(off), dst, first);
        }
        if first < len {
            // SAFETY: as above, the wrapped remainder.
            unsafe {
                std::ptr::copy_nonoverlapping(self.data, dst.wrapping_add(first), len - first);
            }
        }
        // SAFETY: all len bytes were initialized by the copies above.
        unsafe { self.buf.set_len(len) };
    }

    /// Checks a head against the consumer's tail: 8-aligned, not behind,
    /// at most the whole area ahead.
    fn check_head(&self, head: u64) -> Result<u64, RingError> {
        let tail = self.prev;
        if !head.is_multiple_of(8) {
            return Err(RingError::UnalignedHead { head });
        }
        let avail = head.wrapping_sub(tail);
        if (avail as i64) < 0 {
            return Err(RingError::HeadBehindTail { head, tail });
        }
        if avail > self.data_size {
            return Err(RingError::HeadTooFarAhead {
                head,
                tail,
                size: self.data_size,
            });
        }
        Ok(avail)
    }

    /// Drains the records published since the last call: copies `[tail,
    /// head)` out of the ring, stores `data_tail = head` (if the mapping is
    /// writable) and returns the records, oldest first, parsed from the
    /// copy.
    pub fn read_records(&mut self) -> Result<Records<'_>, RingError> {
        let head = self.data_head();
        let avail = self.check_head(head)?;
        let start = self.prev;
        self.copy_out(start, avail);
        if self.mem.data_writable() {
            protocol::store_tail(self.mem.user_word(offsets::DATA_TAIL), head);
        }
        self.prev = head;
        Ok(Records {
            buf: &self.buf,
            at: 0,
            base: start,
            failed: false,
        })
    }

    /// Reads an overwrite ring as `perf record --overwrite` does, after the
    /// producer was paused: the bytes written since the last snapshot (at
    /// most the whole area) with their record boundaries.
    ///
    /// - `write_backward`: `data_head` moves down (the kernel publishes
    ///   `rb->head` as it is); records lie from `data_head` upwards, newest
    ///   first; the oldest one may have been partly overwritten by the wrap
    ///   and is dropped (`Snapshot::truncated`), as perf's
    ///   `overwrite_rb_find_range()` drops it.
    /// - forward: readable only while the ring was not lapped since the
    ///   last snapshot (there is no record boundary to start from after
    ///   that): [`RingError::HeadTooFarAhead`].
    pub fn read_overwrite(&mut self, write_backward: bool) -> Result<Snapshot<'_>, RingError> {
        let head = self.data_head();
        let tail = self.prev;
        if !head.is_multiple_of(8) {
            return Err(RingError::UnalignedHead { head });
        }
        if !write_backward {
            let avail = self.check_head(head)?;
            self.copy_out(tail, avail);
            self.prev = head;
            return Ok(Snapshot {
                records: Records {
                    buf: &self.buf,
                    at: 0,
                    base: tail,
                    failed: false,
                },
                wrapped: false,
                truncated: false,
            });
        }
        // A backward ring's data_head moves down: bytes written since the
        // last snapshot are tail - head.
        let written = tail.wrapping_sub(head);
        if (written as i64) < 0 {
            return Err(RingError::HeadBehindTail { head, tail });
        }
        let wrapped = written > self.data_size;
        let len = written.min(self.data_size);
        let start = head;
        self.copy_out(start, len);
        // overwrite_rb_find_range(): walk headers from the newest; stop
        // before the record that runs past the bytes still intact. Only a
        // wrapped ring may end in such a record; anything else is kept up
        // to the bad header, so the iteration reports it.
        let len = self.buf.len();
        let mut at = 0usize;
        let mut truncated = false;
        let mut keep = len;
        while at < len {
            let size = usize::from(header_at(&self.buf, at).size);
            if size == 0 || size % 8 != 0 {
                keep = at + PerfEventHeader::SIZE;
                break;
            }
            if at + size > len {
                if wrapped {
                    truncated = true;
                    keep = at;
                }
                break;
            }
            at += size;
        }
        self.buf.truncate(keep);
        self.prev = head;
        Ok(Snapshot {
            records: Records {
                buf: &self.buf,
                at: 0,
                base: start,
                failed: false,
            },
            wrapped,
            truncated,
        })
    }
}

fn header_at(buf: &[u8], at: usize) -> PerfEventHeader {
    let mut h = [0u8; 8];
    h.copy_from_slice(&buf[at..at + 8]);
    PerfEventHeader::parse(h, Endianness::NATIVE)
}

/// An overwrite snapshot: its records and how the ring looked.
pub struct Snapshot<'a> {
    /// The records; newest first for a `write_backward` ring.
    pub records: Records<'a>,
    /// More than the whole area was written since the last snapshot.
    pub wrapped: bool,
    /// The oldest record was partly overwritten and is not in `records`.
    pub truncated: bool,
}

/// One record, copied out of the ring: header and body contiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Ring position (unmasked) of its header.
    pub position: u64,
    /// Its header, as the producer wrote it (already checked: size non-zero,
    /// aligned, within what was published).
    pub header: PerfEventHeader,
    /// The whole record, header included (`header.size` bytes).
    pub bytes: &'a [u8],
}

impl<'a> Record<'a> {
    /// The bytes after the header.
    pub fn body(&self) -> &'a [u8] {
        &self.bytes[PerfEventHeader::SIZE..]
    }
}

/// Records parsed from a consumer-owned copy; the first bad header is
/// returned as an error and ends the iteration.
pub struct Records<'a> {
    buf: &'a [u8],
    at: usize,
    base: u64,
    failed: bool,
}

impl<'a> Records<'a> {
    /// The copied bytes, all of them.
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, RingError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.buf.len() {
            return None;
        }
        let position = self.base.wrapping_add(self.at as u64);
        let available = (self.buf.len() - self.at) as u64;
        let err = |e| Some(Err(e));
        if available < PerfEventHeader::SIZE as u64 {
            self.failed = true;
            return err(RingError::RecordTruncated {
                at: position,
                size: PerfEventHeader::SIZE as u16,
                available,
            });
        }
        let header = header_at(self.buf, self.at);
        let size = header.size;
        let bad = if size == 0 {
            Some(RingError::RecordSizeZero { at: position })
        } else if !size.is_multiple_of(8) {
            Some(RingError::RecordUnaligned { at: position, size })
        } else if u64::from(size) > available {
            Some(RingError::RecordTruncated {
                at: position,
                size,
                available,
            })
        } else {
            None
        };
        if let Some(e) = bad {
            self.failed = true;
            return err(e);
        }
        let bytes = &self.buf[self.at..self.at + usize::from(size)];
        self.at += usize::from(size);
        Some(Ok(Record {
            position,
            header,
            bytes,
        }))
    }
}
