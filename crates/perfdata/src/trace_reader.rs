//! perfaux's trace section read in place: its probe table, then its chunks
//! one header at a time, and their bytes in pieces, from the file.
//!
//! The section can be most of a recording (hundreds of MB), so a reader
//! never holds it: [`TraceSection::open`] reads the bytes before the chunks,
//! [`TraceSection::chunks`] walks the chunk headers (each checked against
//! the section before it is trusted: a bad one is an error naming the chunk
//! and its file offset, after the chunks before it), and
//! [`TraceSection::window`] reads the bytes of a run of chunks into any
//! buffer. What is held is the probe table and one chunk header at a time.
//! The layout is [`crate::trace_section`]'s.
//!
//! The bytes come through [`ReadAt`]: the file itself (positioned reads, so
//! any number of readers share one descriptor with the record stream's), or
//! the section in memory ([`InMemory`]) where a pipe carried it in records.

use std::fs::File;
use std::io::{self, Read};

use perfaux_swtrace::window::{Window, WindowChunk, Windows};

use crate::trace_section::{
    AuxDataError, CHUNK_HEADER, CHUNKS_FIRST_HEAD, ChunkHeader, ChunkKind, MAGIC,
    MAGIC_CHUNKS_FIRST, check_chunks_first_table,
};

/// Bytes read by position, without a shared cursor.
pub trait ReadAt {
    /// Reads into `buf` from file offset `offset`; 0 at the end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl ReadAt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }
}

impl<T: ReadAt + ?Sized> ReadAt for &T {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        (**self).read_at(buf, offset)
    }
}

/// A section held in memory (a pipe's HEADER_FEATURE records), addressed by
/// the offsets it had in the stream.
#[derive(Debug, Clone, Default)]
pub struct InMemory {
    /// Stream offset of `data[0]`.
    pub base: u64,
    /// The section's bytes.
    pub data: Vec<u8>,
}

impl ReadAt for InMemory {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let Some(from) = offset
            .checked_sub(self.base)
            .and_then(|o| usize::try_from(o).ok())
            .filter(|&o| o <= self.data.len())
        else {
            return Ok(0);
        };
        let n = buf.len().min(self.data.len() - from);
        buf[..n].copy_from_slice(&self.data[from..from + n]);
        Ok(n)
    }
}

/// Where a recording's trace section is read from: the file, or the
/// records of a pipe that carried it.
#[derive(Debug)]
pub enum SectionSource {
    /// The perf.data file (a descriptor of its own, read by position).
    File(File),
    /// The section's bytes, from a pipe.
    Memory(InMemory),
}

impl ReadAt for SectionSource {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        match self {
            SectionSource::File(f) => f.read_at(buf, offset),
            SectionSource::Memory(m) => m.read_at(buf, offset),
        }
    }
}

fn read_full(src: &impl ReadAt, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match src.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the file ends {done} bytes into {} needed", buf.len()),
                ));
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The largest probe table read (a real one holds a name per probe: kB).
pub const MAX_PROBE_TABLE: u64 = 16 << 20;

/// The trace section of a file, read on demand.
#[derive(Debug)]
pub struct TraceSection<S> {
    src: S,
    offset: u64,
    end: u64,
    probe_table: Vec<u8>,
    nr_chunks: u64,
    first_chunk: u64,
}

/// One chunk's header and where its bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkEntry {
    /// Its position among the section's chunks, from 0.
    pub index: u64,
    /// File offset of its header.
    pub header_offset: u64,
    /// Its header fields.
    pub header: ChunkHeader,
    /// File offset of its first byte.
    pub data_offset: u64,
    /// Number of bytes.
    pub size: u64,
}

impl TraceSection<InMemory> {
    /// The section of a pipe, whose bytes came in records: `data` was found
    /// at stream offset `offset`.
    pub fn in_memory(data: Vec<u8>, offset: u64) -> Result<Self, AuxDataError> {
        let size = data.len() as u64;
        Self::open(InMemory { base: offset, data }, offset, size)
    }
}

impl<S: ReadAt> TraceSection<S> {
    /// The section of `size` bytes at file offset `offset` of `src`: reads
    /// and checks its magic, probe table and chunk count.
    pub fn open(src: S, offset: u64, size: u64) -> Result<Self, AuxDataError> {
        let err = |at: u64, what: String| AuxDataError { offset: at, what };
        let end = offset
            .checked_add(size)
            .ok_or_else(|| err(offset, format!("section size {size} overflows")))?;
        let mut sec = TraceSection {
            src,
            offset,
            end,
            probe_table: Vec::new(),
            nr_chunks: 0,
            first_chunk: offset,
        };
        let mut magic = [0u8; 8];
        sec.read_field(&mut magic, offset, "magic")?;
        let (n, count_at) = if &magic == MAGIC {
            sec.open_table_first()?
        } else if &magic == MAGIC_CHUNKS_FIRST {
            sec.open_chunks_first()?
        } else {
            return Err(err(
                offset,
                "magic is not \"PFXAUX01\" nor \"PFXAUX02\"".into(),
            ));
        };
        let end = sec.end;
        // Each chunk needs at least its header: a count beyond that is corrupt.
        if n > (end - sec.first_chunk) / CHUNK_HEADER as u64 {
            return Err(err(
                count_at,
                format!("chunk count {n} does not fit the section"),
            ));
        }
        sec.nr_chunks = n;
        Ok(sec)
    }

    /// The table-first form after its magic: reads the table; the chunk count and its
    /// offset. The chunks follow the count.
    fn open_table_first(&mut self) -> Result<(u64, u64), AuxDataError> {
        let err = |at: u64, what: String| AuxDataError { offset: at, what };
        let (offset, end) = (self.offset, self.end);
        let mut len = [0u8; 8];
        self.read_field(&mut len, offset + 8, "probe table length")?;
        let tlen = u64::from_le_bytes(len);
        let at = offset + 16;
        let left = end - at;
        if tlen > left {
            return Err(err(
                offset + 8,
                format!("probe table length {tlen} exceeds the {left} bytes left"),
            ));
        }
        self.read_table(offset + 8, at, tlen)?;
        // Padding to 8 bytes, from the section's start, then the count.
        let count_at = offset + (16 + tlen).next_multiple_of(8);
        if count_at > end {
            let pad_at = at + tlen;
            return Err(err(
                pad_at,
                format!(
                    "probe table padding: {} bytes needed, {} left",
                    count_at - pad_at,
                    end - pad_at
                ),
            ));
        }
        let mut n = [0u8; 8];
        self.read_field(&mut n, count_at, "chunk count")?;
        self.first_chunk = count_at + 8;
        Ok((u64::from_le_bytes(n), count_at))
    }

    /// The chunks-first form after its magic: reads the table, then ends the section where
    /// it begins (the chunks lie before it); the chunk count and its offset.
    fn open_chunks_first(&mut self) -> Result<(u64, u64), AuxDataError> {
        let offset = self.offset;
        let mut head = [0u8; 24];
        self.read_field(&mut head, offset + 8, "head")?;
        let word =
            |k: usize| u64::from_le_bytes(head[k * 8..k * 8 + 8].try_into().unwrap_or_default());
        let (n, table_at, tlen) = (word(0), word(1), word(2));
        let (table_at, tlen) = check_chunks_first_table(table_at, tlen, self.end - offset)
            .map_err(|what| AuxDataError {
                offset: offset + 16,
                what,
            })?;
        self.read_table(offset + 24, offset + table_at, tlen)?;
        self.end = offset + table_at;
        self.first_chunk = offset + CHUNKS_FIRST_HEAD;
        Ok((n, offset + 8))
    }

    /// Reads the probe table of `tlen` bytes at `at` (its length field at `len_at`).
    fn read_table(&mut self, len_at: u64, at: u64, tlen: u64) -> Result<(), AuxDataError> {
        if tlen > MAX_PROBE_TABLE {
            return Err(AuxDataError {
                offset: len_at,
                what: format!("probe table length {tlen} exceeds the {MAX_PROBE_TABLE}-byte limit"),
            });
        }
        let mut table = vec![0u8; tlen as usize];
        self.read_field(&mut table, at, "probe table")?;
        self.probe_table = table;
        Ok(())
    }

    /// Reads `buf.len()` bytes of the section at file offset `at`, checking
    /// that they lie in it.
    fn read_field(&self, buf: &mut [u8], at: u64, what: &str) -> Result<(), AuxDataError> {
        let left = self.end.saturating_sub(at);
        if buf.len() as u64 > left {
            return Err(AuxDataError {
                offset: at,
                what: format!("{what}: {} bytes needed, {left} left", buf.len()),
            });
        }
        read_full(&self.src, buf, at).map_err(|e| AuxDataError {
            offset: at,
            what: format!("{what}: {e}"),
        })
    }

    /// The probe table's bytes (perfaux-swtrace's "SWTPROBE").
    pub fn probe_table(&self) -> &[u8] {
        &self.probe_table
    }

    /// File offset of the section.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Number of chunks the section says it holds.
    pub fn nr_chunks(&self) -> u64 {
        self.nr_chunks
    }

    /// Where the bytes come from.
    pub fn source(&self) -> &S {
        &self.src
    }

    /// The chunks' headers, in recording order, each checked against the
    /// section; after a bad one, its error and the end.
    pub fn chunks(&self) -> Chunks<'_, S> {
        Chunks {
            sec: self,
            at: self.first_chunk,
            index: 0,
            done: false,
        }
    }

    /// Reads bytes of a chunk from `at` bytes into it; returns how many
    /// (0 at its end).
    pub fn read_chunk(&self, c: &ChunkEntry, at: u64, buf: &mut [u8]) -> io::Result<usize> {
        let left = c.size.saturating_sub(at);
        let n = (buf.len() as u64).min(left) as usize;
        if n == 0 {
            return Ok(0);
        }
        read_full(&self.src, &mut buf[..n], c.data_offset + at)?;
        Ok(n)
    }

    /// The section's decode windows (perfaux-swtrace's grouping of the
    /// chunks that continue each other), in the order of their first chunks;
    /// a bad chunk ends them, after the window before it.
    pub fn windows(&self) -> Windows<Chunks<'_, S>, ChunkEntry, AuxDataError> {
        Windows::new(self.chunks())
    }

    /// The bytes of a window from [`Self::windows`].
    pub fn window_bytes(&self, w: &Window<ChunkEntry>) -> WindowBytes<'_, S> {
        self.window(&w.first, w.chunks)
    }

    /// The bytes of `count` chunks of `first`'s kind, `first` and the ones
    /// after it (chunks of other kinds between them left out), one after
    /// another: a decode window ([`crate::trace_section`]'s chunks that
    /// continue each other) read in place. A bad chunk header on the way
    /// is an `InvalidData` error naming it.
    pub fn window(&self, first: &ChunkEntry, count: u64) -> WindowBytes<'_, S> {
        WindowBytes {
            sec: self,
            kind: first.header.kind,
            cur: (count > 0).then_some(*first),
            pos: 0,
            left: count.saturating_sub(1),
            rest: Chunks {
                sec: self,
                at: first.data_offset + first.size.next_multiple_of(8),
                index: first.index + 1,
                done: false,
            },
        }
    }
}

/// A chunk as perfaux-swtrace's grouping into decode windows sees it.
impl WindowChunk for ChunkEntry {
    fn event_id(&self) -> u64 {
        self.header.event_id
    }
    fn tid(&self) -> u32 {
        self.header.tid
    }
    fn aux_offset(&self) -> u64 {
        self.header.aux_offset
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn continues(&self) -> bool {
        self.header.kind == ChunkKind::Trace
    }
    fn is_trace(&self) -> bool {
        self.header.kind != ChunkKind::UeventLog
    }
}

/// The chunk headers of a section, read one at a time.
pub struct Chunks<'s, S> {
    sec: &'s TraceSection<S>,
    at: u64,
    index: u64,
    done: bool,
}

impl<S: ReadAt> Chunks<'_, S> {
    fn entry(&mut self) -> Result<ChunkEntry, AuxDataError> {
        let (i, n, at) = (self.index, self.sec.nr_chunks, self.at);
        let err = |off: u64, what: String| AuxDataError {
            offset: off,
            what: format!("chunk {i} of {n}: {what}"),
        };
        let mut h = [0u8; CHUNK_HEADER];
        self.sec
            .read_field(&mut h, at, "header")
            .map_err(|e| err(e.offset, e.what))?;
        let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().unwrap_or_default());
        let u32_at = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().unwrap_or_default());
        let data_offset = at + CHUNK_HEADER as u64;
        let left = self.sec.end - data_offset;
        let size = u64_at(24);
        if size > left {
            return Err(err(
                at + 24,
                format!("size {size} exceeds the {left} bytes left in the section"),
            ));
        }
        let code = u32_at(32);
        let kind = ChunkKind::from_code(code)
            .ok_or_else(|| err(at + 32, format!("unknown chunk kind {code}")))?;
        let padded = size.next_multiple_of(8);
        if padded > left {
            return Err(err(
                data_offset + size,
                format!(
                    "chunk padding: {} bytes needed, {} left",
                    padded - size,
                    left - size
                ),
            ));
        }
        let header = ChunkHeader {
            event_id: u64_at(0),
            cpu: u32_at(8),
            tid: u32_at(12),
            aux_offset: u64_at(16),
            kind,
            flags: u32_at(36),
        };
        self.at = data_offset + padded;
        self.index += 1;
        Ok(ChunkEntry {
            index: i,
            header_offset: at,
            header,
            data_offset,
            size,
        })
    }
}

impl<S: ReadAt> Iterator for Chunks<'_, S> {
    type Item = Result<ChunkEntry, AuxDataError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.index >= self.sec.nr_chunks {
            return None;
        }
        let r = self.entry();
        self.done = r.is_err();
        Some(r)
    }
}

/// The bytes of a decode window, read from the section as they are asked
/// for ([`TraceSection::window`]).
pub struct WindowBytes<'s, S> {
    sec: &'s TraceSection<S>,
    kind: ChunkKind,
    cur: Option<ChunkEntry>,
    pos: u64,
    /// Chunks of `kind` still to read after `cur`.
    left: u64,
    rest: Chunks<'s, S>,
}

impl<S: ReadAt> Read for WindowBytes<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if let Some(c) = &self.cur {
                let n = self.sec.read_chunk(c, self.pos, buf)?;
                if n > 0 || buf.is_empty() {
                    self.pos += n as u64;
                    return Ok(n);
                }
            }
            if self.left == 0 {
                self.cur = None;
                return Ok(0);
            }
            let next = match self.rest.next() {
                Some(Ok(c)) => c,
                Some(Err(e)) => {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                }
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "the trace section ends {} chunks short of a window",
                            self.left
                        ),
                    ));
                }
            };
            if next.header.kind == self.kind {
                self.left -= 1;
                self.cur = Some(next);
                self.pos = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace_section::{AuxChunk, AuxData};

    fn sample() -> AuxData {
        let chunk = |event_id, aux_offset, kind, bytes: Vec<u8>| AuxChunk {
            event_id,
            cpu: u32::MAX,
            tid: 42,
            aux_offset,
            kind,
            flags: 0,
            bytes,
        };
        AuxData {
            probe_table: b"SWTPROBE\x01\0\0\0\0".to_vec(),
            chunks: vec![
                chunk(7, 0, ChunkKind::Trace, (0..13).collect()),
                chunk(7, 0, ChunkKind::UeventLog, vec![0xee; 8]),
                chunk(7, 13, ChunkKind::Trace, (13..40).collect()),
                chunk(8, 0, ChunkKind::Snapshot, vec![0xaa; 16]),
            ],
        }
    }

    /// The section in both its forms, table first and chunks first.
    fn forms(d: &AuxData) -> [Vec<u8>; 2] {
        [d.to_bytes(), d.to_bytes_chunks_first()]
    }

    #[test]
    fn chunks_read_in_place_are_the_parsed_ones() {
        let d = sample();
        for b in forms(&d) {
            chunks_read_in_place_are(&d, b);
        }
    }

    fn chunks_read_in_place_are(d: &AuxData, b: Vec<u8>) {
        assert_eq!(AuxData::parse(&b, 0x100).as_ref(), Ok(d));
        let sec = TraceSection::in_memory(b, 0x100).unwrap();
        assert_eq!(sec.probe_table(), &d.probe_table[..]);
        let entries: Vec<ChunkEntry> = sec.chunks().map(Result::unwrap).collect();
        assert_eq!(entries.len(), d.chunks.len());
        for (e, c) in entries.iter().zip(&d.chunks) {
            assert_eq!(
                (e.header.event_id, e.header.aux_offset, e.header.kind),
                (c.event_id, c.aux_offset, c.kind)
            );
            let mut got = Vec::new();
            sec.window(e, 1).read_to_end(&mut got).unwrap();
            assert_eq!(got, c.bytes);
        }
        // A window of the two trace chunks passes over the uevent log between.
        let mut joined = Vec::new();
        sec.window(&entries[0], 2).read_to_end(&mut joined).unwrap();
        assert_eq!(joined, (0..40).collect::<Vec<u8>>());
    }

    #[test]
    fn every_truncation_gives_the_chunks_before_it_then_an_error_inside_the_section() {
        let d = sample();
        for b in forms(&d) {
            truncations_fail_inside(&b);
        }
    }

    fn truncations_fail_inside(b: &[u8]) {
        for cut in 0..b.len() {
            let whole = AuxData::parse(&b[..cut], 0x100);
            let got = TraceSection::in_memory(b[..cut].to_vec(), 0x100).and_then(|s| {
                let mut n = 0;
                for c in s.chunks() {
                    c?;
                    n += 1;
                }
                Ok(n)
            });
            let e = got.expect_err("a cut section is an error");
            assert!(
                e.offset >= 0x100 && e.offset <= 0x100 + cut as u64,
                "cut {cut}: {e}"
            );
            assert!(whole.is_err());
        }
    }

    #[test]
    fn a_bad_chunk_is_named_after_the_good_ones() {
        let d = sample();
        for b in forms(&d) {
            a_bad_third_chunk_is_named(b);
        }
    }

    fn a_bad_third_chunk_is_named(mut b: Vec<u8>) {
        let sec = TraceSection::in_memory(b.clone(), 0).unwrap();
        let third = sec.chunks().nth(2).unwrap().unwrap();
        let at = third.header_offset as usize + 24;
        b[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let sec = TraceSection::in_memory(b, 0).unwrap();
        let got: Vec<_> = sec.chunks().collect();
        assert_eq!(got.len(), 3);
        assert!(got[0].is_ok() && got[1].is_ok());
        let e = got[2].clone().unwrap_err();
        assert_eq!(e.offset, at as u64);
        assert!(e.what.starts_with("chunk 2 of 4: size "), "{e}");
    }

    #[test]
    fn a_chunk_count_beyond_the_section_is_refused() {
        let d = sample();
        let [table_first, chunks_first] = forms(&d);
        let count_at = (16 + d.probe_table.len()).next_multiple_of(8);
        for (mut bad, count_at) in [(table_first, count_at), (chunks_first, 8)] {
            bad[count_at..count_at + 8].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
            let e = TraceSection::in_memory(bad, 0).unwrap_err();
            assert_eq!(e.offset, count_at as u64);
            assert!(e.what.contains("does not fit"), "{e}");
        }
    }

    #[test]
    fn a_chunks_first_table_outside_the_section_is_refused_before_any_chunk() {
        let b = sample().to_bytes_chunks_first();
        let mut bad = b.clone();
        bad[16..24].copy_from_slice(&(b.len() as u64 + 8).to_le_bytes());
        let e = TraceSection::in_memory(bad, 0x100).unwrap_err();
        assert_eq!(e.offset, 0x110);
        assert!(e.what.contains("probe table offset"), "{e}");
        let mut big = b.clone();
        big[24..32].copy_from_slice(&(MAX_PROBE_TABLE + 8).to_le_bytes());
        let e = TraceSection::in_memory(big, 0).unwrap_err();
        assert!(e.what.contains("probe table length"), "{e}");
    }
}
