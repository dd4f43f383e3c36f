//! A window of buffered bytes over a `Read`, so that records can be handed
//! out as slices without a copy or an allocation per record.
//!
//! The window grows only as bytes actually arrive (doubling, from
//! [`MIN_CHUNK`]), so a size field that promises more than the input holds
//! costs at most twice what was really read.

use crate::error::{Error, Result};
use std::io::{self, Read};

/// Bytes asked of the reader at a time, and the first buffer size.
pub(crate) const MIN_CHUNK: usize = 256 * 1024;

pub(crate) struct Input<R> {
    inner: R,
    pub(crate) buf: Vec<u8>,
    start: usize,
    end: usize,
    /// File offset of `buf[start]`.
    offset: u64,
    /// Absolute offset where the stream ends (file mode: end of the data
    /// section), so that bytes past it are never read as records.
    limit: Option<u64>,
    eof: bool,
}

impl<R: Read> Input<R> {
    pub(crate) fn new(inner: R, offset: u64, limit: Option<u64>) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            start: 0,
            end: 0,
            offset,
            limit,
            eof: false,
        }
    }

    /// The input.
    pub(crate) fn get_ref(&self) -> &R {
        &self.inner
    }

    /// File offset of the first unconsumed byte.
    #[inline]
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    #[inline]
    pub(crate) fn available(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Bytes the stream may still hold past the window (`None`: unknown).
    #[inline]
    pub(crate) fn remaining_limit(&self) -> Option<u64> {
        self.limit.map(|l| l.saturating_sub(self.offset))
    }

    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.start);
        self.start += n;
        self.offset += n as u64;
    }

    /// Makes `n` bytes available if the input has them; returns how many are
    /// (fewer than `n` only at the end of the input).
    pub(crate) fn fill(&mut self, n: usize) -> Result<usize> {
        if self.end - self.start >= n {
            return Ok(self.end - self.start);
        }
        if self.start > 0 && self.buf.len() - self.start < n.max(MIN_CHUNK) {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        while self.end - self.start < n && !self.eof {
            if self.end == self.buf.len() {
                let want = self.start + n;
                let grown = (self.buf.len() * 2).max(MIN_CHUNK).min(want.max(MIN_CHUNK));
                self.buf.resize(grown.max(self.end + 1), 0);
            }
            let mut room = self.buf.len() - self.end;
            if let Some(limit) = self.limit {
                let file_pos = self.offset + (self.end - self.start) as u64;
                let left = limit.saturating_sub(file_pos);
                room = room.min(usize::try_from(left).unwrap_or(usize::MAX));
                if room == 0 {
                    self.eof = true;
                    break;
                }
            }
            match self.inner.read(&mut self.buf[self.end..self.end + room]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let at = self.offset + (self.end - self.start) as u64;
                    return Err(Error::io(at, e));
                }
            }
        }
        Ok(self.end - self.start)
    }
}
