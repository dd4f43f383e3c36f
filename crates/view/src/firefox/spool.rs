//! The spool: the profile's columns whose length grows with the trace
//! (samples, markers, strings), kept in one anonymous temporary file until
//! the profile is written.
//!
//! Each column is a [`Stream`]: bytes appended in memory and handed to the
//! file a block at a time. A block is a 12-byte header (the offset of the
//! stream's next block, `u64`, patched when that block is written, 0 for
//! none; the block's length, `u32`) and the bytes. The blocks of a stream
//! are a list in the file, so that a stream's memory is its one buffer
//! whatever its length, and one file serves every thread (a file per column
//! and thread would be a descriptor each).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// A stream's buffer size at which it goes to the file as a block (small in
/// unit tests, so that they go through many blocks).
pub(super) const BLOCK: usize = if cfg!(test) { 64 } else { 32 * 1024 };

/// The most bytes all streams' buffers may hold together: past it, every
/// buffer goes to the file and is freed (many threads, each with a part of
/// a block, would otherwise hold a block each).
pub(super) const BUDGET: usize = if cfg!(test) { 4096 } else { 4 << 20 };

/// A block's header: the next block's offset and the block's length.
const HEADER: usize = 12;

/// Bytes a reader takes from the file at a time.
const PIECE: usize = 64 * 1024;

/// An error of the temporary file, saying so (the caller names the input
/// or output file: this is neither).
fn spool_error(e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("the Firefox export's temporary file (in $TMPDIR or /tmp): {e}"),
    )
}

/// The temporary file and where its end is.
#[derive(Default)]
pub(super) struct Spool {
    /// Made at the first block: a small profile needs no file.
    file: Option<File>,
    end: u64,
    /// What the streams' buffers hold (their capacity).
    buffered: usize,
}

/// One column: its blocks in the file and the bytes not yet there.
#[derive(Default)]
pub(super) struct Stream {
    buf: Vec<u8>,
    head: Option<u64>,
    tail: Option<u64>,
    /// Bytes in the stream, in the file and in `buf`.
    len: u64,
}

impl Spool {
    fn file(&mut self) -> io::Result<&File> {
        if self.file.is_none() {
            // Offset 0 is "no next block": the first block starts after a
            // header's worth of nothing.
            self.file = Some(tempfile::tempfile().map_err(spool_error)?);
            self.end = HEADER as u64;
        }
        Ok(self.file.as_ref().expect("made above"))
    }

    /// Appends `b` to `s`.
    #[inline]
    pub(super) fn put(&mut self, s: &mut Stream, b: &[u8]) -> io::Result<()> {
        self.put_with(s, |buf| buf.extend_from_slice(b))
    }

    /// Appends to `s` what `f` appends to the buffer it is given (formatted
    /// in place: no copy through a scratch buffer).
    #[inline]
    pub(super) fn put_with(
        &mut self,
        s: &mut Stream,
        f: impl FnOnce(&mut Vec<u8>),
    ) -> io::Result<()> {
        let (cap, len) = (s.buf.capacity(), s.buf.len());
        f(&mut s.buf);
        s.len += (s.buf.len() - len) as u64;
        self.buffered += s.buf.capacity() - cap;
        if s.buf.len() >= BLOCK {
            self.flush(s)?;
        }
        Ok(())
    }

    /// True when the streams' buffers hold more than [`BUDGET`].
    #[inline]
    pub(super) fn over_budget(&self) -> bool {
        self.buffered > BUDGET
    }

    /// Hands `s`'s buffer to the file as a block.
    pub(super) fn flush(&mut self, s: &mut Stream) -> io::Result<()> {
        if s.buf.is_empty() {
            return Ok(());
        }
        self.file()?;
        let offset = self.end;
        let len = u32::try_from(s.buf.len()).map_err(io::Error::other)?;
        let mut header = [0u8; HEADER];
        header[8..].copy_from_slice(&len.to_le_bytes());
        let f = self.file.as_ref().expect("made by file()");
        f.write_all_at(&header, offset).map_err(spool_error)?;
        f.write_all_at(&s.buf, offset + HEADER as u64)
            .map_err(spool_error)?;
        match s.tail {
            Some(t) => f
                .write_all_at(&offset.to_le_bytes(), t)
                .map_err(spool_error)?,
            None => s.head = Some(offset),
        }
        s.tail = Some(offset);
        self.end += (HEADER + s.buf.len()) as u64;
        s.buf.clear();
        Ok(())
    }

    /// Hands `s`'s buffer to the file and frees it.
    pub(super) fn release(&mut self, s: &mut Stream) -> io::Result<()> {
        self.flush(s)?;
        self.buffered -= s.buf.capacity();
        s.buf = Vec::new();
        Ok(())
    }

    /// Writes the stream's bytes to `out`, all but the last `drop_last`.
    pub(super) fn copy(
        &self,
        s: &Stream,
        drop_last: u64,
        out: &mut impl io::Write,
    ) -> io::Result<()> {
        let mut left = s.len.saturating_sub(drop_last);
        let mut r = Reader::new(s, PIECE);
        while left > 0 {
            let b = r.piece(self)?;
            if b.is_empty() {
                break;
            }
            let n = b.len().min(left as usize);
            out.write_all(&b[..n])?;
            left -= n as u64;
        }
        Ok(())
    }
}

/// Reads a stream's bytes in order: its blocks in the file, then what its
/// buffer holds.
pub(super) struct Reader<'s> {
    next: Option<u64>,
    /// Bytes of the current block not yet read, and where they are.
    left: u64,
    at: u64,
    tail: &'s [u8],
    buf: Vec<u8>,
    pos: usize,
    piece: usize,
}

impl<'s> Reader<'s> {
    /// A reader of `s` from its beginning, `piece` bytes at a time (a
    /// multiple of the stream's record size: blocks hold whole records).
    pub(super) fn new(s: &'s Stream, piece: usize) -> Self {
        Reader {
            next: s.head,
            left: 0,
            at: 0,
            tail: &s.buf,
            buf: Vec::new(),
            pos: 0,
            piece,
        }
    }

    /// The next bytes of the stream (empty at its end), from `spool`'s file.
    pub(super) fn piece(&mut self, spool: &Spool) -> io::Result<&[u8]> {
        self.pos = 0;
        while self.left == 0 {
            let (Some(at), Some(f)) = (self.next, spool.file.as_ref()) else {
                let t = std::mem::take(&mut self.tail);
                self.buf.clear();
                self.buf.extend_from_slice(t);
                return Ok(&self.buf);
            };
            let mut header = [0u8; HEADER];
            f.read_exact_at(&mut header, at).map_err(spool_error)?;
            let next = u64::from_le_bytes(header[..8].try_into().expect("8 bytes"));
            self.next = (next != 0).then_some(next);
            self.left = u64::from(u32::from_le_bytes(header[8..].try_into().expect("4 bytes")));
            self.at = at + HEADER as u64;
        }
        let n = (self.left as usize).min(self.piece);
        self.buf.resize(n, 0);
        spool
            .file
            .as_ref()
            .expect("a block was read")
            .read_exact_at(&mut self.buf, self.at)
            .map_err(spool_error)?;
        self.at += n as u64;
        self.left -= n as u64;
        Ok(&self.buf)
    }

    /// The next `N`-byte record, or `None` at the stream's end.
    pub(super) fn record<const N: usize>(&mut self, spool: &Spool) -> io::Result<Option<[u8; N]>> {
        if self.pos + N > self.buf.len() && self.piece(spool)?.is_empty() {
            return Ok(None);
        }
        let r = self.buf[self.pos..self.pos + N]
            .try_into()
            .expect("blocks hold whole records");
        self.pos += N;
        Ok(Some(r))
    }
}
