//! The trace section's chunks, written straight into the output at their final place.
//!
//! The trace is the bulk of a recording (megabytes a second of traced calls); the records
//! beside it are small. So the chunks go into the output file as they are drained, from the
//! section's start after the attrs, and the records into a file of their own that is moved
//! after the section when the recording ends (`PerfDataWriter::finish_around`): the trace is
//! written once and never copied. Its pages are handed to the disk as they come
//! (`sync_file_range` without waiting), so that the sync that ends the recording waits for
//! the last few megabytes, not for all of them.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;

/// Bytes written between two writeback requests.
const WRITEBACK_STEP: u64 = 8 << 20;

/// A `Write` that writes a file from an offset on, by position (the file's own offset is not
/// used), starting writeback of each [`WRITEBACK_STEP`] written.
#[derive(Debug)]
pub(crate) struct InPlace {
    file: File,
    /// The next byte's offset.
    pos: u64,
    /// Where the bytes not yet handed to writeback start.
    queued: u64,
    /// Writes go nowhere (they are taken and dropped): for emptying a buffer in front of this
    /// of bytes a full disk had no room for.
    discard: bool,
}

impl InPlace {
    /// Writes into `file` from offset `at` on.
    pub(crate) fn new(file: File, at: u64) -> Self {
        InPlace {
            file,
            pos: at,
            queued: at,
            discard: false,
        }
    }

    /// Drops what is written from now on (`true`) or writes it again (`false`).
    pub(crate) fn set_discard(&mut self, on: bool) {
        self.discard = on;
    }

    /// Goes back to offset `at`: the file is cut there (freeing what a full disk took of a
    /// chunk that did not fit) and the next byte goes there.
    pub(crate) fn rewind(&mut self, at: u64) -> io::Result<()> {
        self.file.set_len(at)?;
        self.pos = at;
        self.queued = self.queued.min(at);
        Ok(())
    }

    /// The offset the next byte goes to.
    pub(crate) fn position(&self) -> u64 {
        self.pos
    }

    /// The file, for reading what is written (a checkpoint's copy).
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// The file.
    pub(crate) fn into_file(self) -> File {
        self.file
    }

    /// Starts writeback of what was written since the last request, once that is a step.
    fn start_writeback(&mut self) {
        let len = self.pos - self.queued;
        if len < WRITEBACK_STEP {
            return;
        }
        // Only a hint: a file system without it (EINVAL, ESPIPE) or an error here leaves
        // the pages to the final sync, which reports what fails.
        let (Ok(from), Ok(n)) = (i64::try_from(self.queued), i64::try_from(len)) else {
            return;
        };
        // SAFETY: a plain system call on a descriptor this owns; no memory is passed.
        unsafe {
            libc::sync_file_range(self.file.as_raw_fd(), from, n, libc::SYNC_FILE_RANGE_WRITE)
        };
        self.queued = self.pos;
    }
}

impl Write for InPlace {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.discard {
            return Ok(buf.len());
        }
        let n = self.file.write_at(buf, self.pos)?;
        self.pos += n as u64;
        self.start_writeback();
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufWriter, Read, Seek};

    /// Bytes land from the offset on, one after another, past several writeback steps; the
    /// bytes before the offset and the file's own position are left alone.
    #[test]
    fn bytes_land_from_the_offset_on() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"head").unwrap();
        let bytes: Vec<u8> = (0..(WRITEBACK_STEP as u32 * 2 + 4097))
            .map(|i| (i % 251) as u8)
            .collect();
        let mut w = BufWriter::new(InPlace::new(f.try_clone().unwrap(), 100));
        for piece in bytes.chunks(777_777) {
            w.write_all(piece).unwrap();
        }
        let w = w.into_inner().unwrap();
        assert_eq!(w.position(), 100 + bytes.len() as u64);
        assert_eq!(f.stream_position().unwrap(), 4);
        f.rewind().unwrap();
        let mut all = Vec::new();
        f.read_to_end(&mut all).unwrap();
        assert_eq!(&all[..4], b"head");
        assert!(all[4..100].iter().all(|&b| b == 0));
        assert!(all[100..] == bytes[..]);
    }
}
