//! perfaux's private perf.data feature section: the software trace bytes
//! and the probe table that names them.
//!
//! # Why a feature section
//!
//! perf 6.1 accepts PERF_RECORD_AUXTRACE_INFO and PERF_RECORD_AUXTRACE only
//! for the AUX PMUs it decodes (Intel PT, BTS, CoreSight, SPE, ...): with an
//! unknown type it fails with `failed to process type: 70` and `perf script`
//! exits 234 (docs/PERF-COMPAT.md). An unknown feature
//! bit in a file-mode perf.data, on the other hand, is skipped silently by
//! `perf report -D`, `perf script` and `--header-only`. So the
//! trace bytes go into a feature section that only perfaux reads, written
//! when the file is finished, while the PERF_RECORD_AUX and ITRACE_START
//! records that describe them stay in the record stream where perf shows
//! them. The bytes are kept exactly as the AUX area held them.
//!
//! # Byte format (feature bit [`PERFAUX_FEATURE_BIT`], little-endian)
//!
//! Two forms, told apart by their magic; readers take both.
//!
//! ```text
//! table first ("PFXAUX01"), assembled when the recording ends:
//!   magic      "PFXAUX01"                    8 bytes
//!   table_len  u64                           length of the probe table
//!   table      perfaux-swtrace's probe table ("SWTPROBE", see perfaux_swtrace::table)
//!   pad        zeros to a multiple of 8
//!   nr_chunks  u64
//!   chunk[nr_chunks]
//!
//! chunks first ("PFXAUX02"), written in place while recording (the chunks stream into
//! the output file as they are drained; the head is filled in at the end):
//!   magic      "PFXAUX02"                    8 bytes
//!   nr_chunks  u64
//!   table_at   u64   offset of the probe table from the section's start
//!                    (32 + the chunks' bytes; a multiple of 8)
//!   table_len  u64
//!   chunk[nr_chunks]
//!   table      table_len bytes, then zeros to a multiple of 8
//!
//! chunk:
//!   event_id   u64   sample id of the AUX event the bytes came from
//!   cpu        u32   CPU the event counted on, or u32::MAX (per-thread event)
//!   tid        u32   thread the event observed
//!   aux_offset u64   position of the first byte in the event's AUX stream
//!                    (the PERF_RECORD_AUX aux_offset it belongs to)
//!   size       u64   number of trace bytes that follow
//!   kind       u32   0 = software trace data, 1 = software trace snapshot (-S),
//!                    2 = uevent log (the `uevent_aux` PMU's AUX area, full or snapshot)
//!   flags      u32   PERF_AUX_FLAG_OVERWRITE (0x2) on a snapshot whose area had
//!                    wrapped: its first bytes start mid-stream (the decoder
//!                    resynchronizes); 0 otherwise. perfaux's own bit
//!                    [`SNAPSHOT_BEGIN`] (0x10000, above the kernel's PERF_AUX_FLAG_* bits)
//!                    on the first snapshot chunk of each snapshot taken (all the
//!                    areas at once on SIGUSR2 or -Se, or an ended thread's area):
//!                    a snapshot is counted once however many threads it holds
//!   bytes      size bytes, then zeros to a multiple of 8
//! ```
//!
//! Every length is checked against the section before it is used; a bad one
//! is an error naming the byte offset in the file.
//!
//! A reader does not hold it either: [`crate::trace_reader`] walks the
//! chunk headers one at a time and reads their bytes in pieces from the
//! file ([`crate::PerfDataReader::trace_section`]); [`AuxData`] is the
//! whole section in memory, for writers and small sections.
//!
//! A recorder writes the section without holding the trace in memory:
//! [`ChunkStream`] appends each chunk (header, bytes, padding) to any
//! `Write` as it is drained. Into a file of its own, the table-first form:
//! [`ChunkStream::section_prefix`] gives the bytes that go before the chunks
//! once their number is known. Straight into the output, the chunks-first
//! form: the chunks start [`CHUNKS_FIRST_HEAD`] bytes into the section, and
//! [`probe_table_tail`] and [`ChunkStream::chunks_first_head`] are written
//! after and before them at the end, so that the trace is never copied.

use std::fmt;
use std::io::{self, Write};

/// The feature bit of the section: far above perf's features (31 in perf
/// 6.1, PMU_CAPS) and simpleperf's (128 up), below the 256-bit table's end.
pub const PERFAUX_FEATURE_BIT: u32 = 250;

/// The table-first form's magic.
pub(crate) const MAGIC: &[u8; 8] = b"PFXAUX01";
/// The chunks-first form's magic.
pub(crate) const MAGIC_CHUNKS_FIRST: &[u8; 8] = b"PFXAUX02";

/// Bytes of the chunks-first form before its first chunk (magic, chunk count, table
/// offset, table length).
pub const CHUNKS_FIRST_HEAD: u64 = 32;

/// Chunk flag bit: this snapshot chunk is the first of one snapshot taken.
/// The recorder's summary and the views count snapshots by it, so that
/// both give the same number: one per taking, not one per thread in it.
pub const SNAPSHOT_BEGIN: u32 = 0x1_0000;

/// What a chunk of trace bytes is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkKind {
    /// Bytes of a full-trace AUX area between two PERF_RECORD_AUX records.
    Trace,
    /// A snapshot of an overwrite (`-S`) AUX area.
    Snapshot,
    /// AUX bytes of the `uevent_aux` PMU: `{u32 type; u32 size; data; pad}`
    /// per uevent, not software trace packets.
    UeventLog,
}

impl ChunkKind {
    fn code(self) -> u32 {
        match self {
            ChunkKind::Trace => 0,
            ChunkKind::Snapshot => 1,
            ChunkKind::UeventLog => 2,
        }
    }

    pub(crate) fn from_code(c: u32) -> Option<Self> {
        match c {
            0 => Some(ChunkKind::Trace),
            1 => Some(ChunkKind::Snapshot),
            2 => Some(ChunkKind::UeventLog),
            _ => None,
        }
    }

    /// The word perfaux prints for the kind.
    pub fn name(self) -> &'static str {
        match self {
            ChunkKind::Trace => "trace",
            ChunkKind::Snapshot => "snapshot",
            ChunkKind::UeventLog => "uevent-log",
        }
    }
}

/// One run of trace bytes from one AUX event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuxChunk {
    /// Sample id of the AUX event the bytes came from.
    pub event_id: u64,
    /// CPU the event counted on, or `u32::MAX` for a per-thread event.
    pub cpu: u32,
    /// Thread the event observed.
    pub tid: u32,
    /// Position of the first byte in the event's AUX stream.
    pub aux_offset: u64,
    /// What the bytes are.
    pub kind: ChunkKind,
    /// `PERF_AUX_FLAG_OVERWRITE` on a snapshot whose area had wrapped.
    pub flags: u32,
    /// The bytes exactly as the AUX area held them.
    pub bytes: Vec<u8>,
}

impl AuxChunk {
    /// Its header fields.
    pub fn header(&self) -> ChunkHeader {
        ChunkHeader {
            event_id: self.event_id,
            cpu: self.cpu,
            tid: self.tid,
            aux_offset: self.aux_offset,
            kind: self.kind,
            flags: self.flags,
        }
    }
}

/// A chunk's header fields, without its bytes (for [`ChunkStream`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Sample id of the AUX event the bytes came from.
    pub event_id: u64,
    /// CPU the event counted on, or `u32::MAX` for a per-thread event.
    pub cpu: u32,
    /// Thread the event observed.
    pub tid: u32,
    /// Position of the first byte in the event's AUX stream.
    pub aux_offset: u64,
    /// What the bytes are.
    pub kind: ChunkKind,
    /// `PERF_AUX_FLAG_OVERWRITE` on a snapshot whose area had wrapped.
    pub flags: u32,
}

impl ChunkHeader {
    fn put(&self, len: usize, v: &mut Vec<u8>) {
        v.extend_from_slice(&self.event_id.to_le_bytes());
        v.extend_from_slice(&self.cpu.to_le_bytes());
        v.extend_from_slice(&self.tid.to_le_bytes());
        v.extend_from_slice(&self.aux_offset.to_le_bytes());
        v.extend_from_slice(&(len as u64).to_le_bytes());
        v.extend_from_slice(&self.kind.code().to_le_bytes());
        v.extend_from_slice(&self.flags.to_le_bytes());
    }
}

/// Chunks appended to a `Write` as they come: the chunk part of the
/// section, whose count and length are known only at the end.
#[derive(Debug)]
pub struct ChunkStream<W> {
    sink: W,
    chunks: u64,
    len: u64,
    scratch: Vec<u8>,
}

impl<W: Write> ChunkStream<W> {
    /// A stream of no chunks into `sink`.
    pub fn new(sink: W) -> Self {
        ChunkStream {
            sink,
            chunks: 0,
            len: 0,
            scratch: Vec::with_capacity(CHUNK_HEADER),
        }
    }

    /// Appends one chunk whose bytes are `parts` one after another (an AUX
    /// area that wrapped hands out its bytes in two parts).
    pub fn push(&mut self, h: &ChunkHeader, parts: &[&[u8]]) -> io::Result<()> {
        let size: usize = parts.iter().map(|p| p.len()).sum();
        self.scratch.clear();
        h.put(size, &mut self.scratch);
        self.sink.write_all(&self.scratch)?;
        for p in parts {
            self.sink.write_all(p)?;
        }
        let pad = size.next_multiple_of(8) - size;
        self.sink.write_all(&[0u8; 8][..pad])?;
        self.chunks += 1;
        self.len += (CHUNK_HEADER + size + pad) as u64;
        Ok(())
    }

    /// Chunks so far.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// The sink.
    pub fn get_ref(&self) -> &W {
        &self.sink
    }

    /// The sink, to put it back where [`Self::rewind`] says.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.sink
    }

    /// Forgets every chunk after the first `chunks`, which end `len` bytes into the stream
    /// (values [`Self::chunks`] and [`Self::len`] had then): for a sink that failed part-way
    /// (a full disk), which the caller puts back at `len`.
    pub fn rewind(&mut self, chunks: u64, len: u64) {
        self.chunks = chunks;
        self.len = len;
    }

    /// Bytes written to the sink so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no chunk was pushed.
    pub fn is_empty(&self) -> bool {
        self.chunks == 0
    }

    /// The bytes of the section before the chunks: magic, probe table and
    /// chunk count.
    pub fn section_prefix(&self, probe_table: &[u8]) -> Vec<u8> {
        section_prefix(probe_table, self.chunks)
    }

    /// The chunks-first form's head for these chunks, followed by [`probe_table_tail`] of a
    /// table of `table_len` bytes.
    pub fn chunks_first_head(&self, table_len: u64) -> [u8; CHUNKS_FIRST_HEAD as usize] {
        let mut h = [0u8; CHUNKS_FIRST_HEAD as usize];
        h[..8].copy_from_slice(MAGIC_CHUNKS_FIRST);
        h[8..16].copy_from_slice(&self.chunks.to_le_bytes());
        h[16..24].copy_from_slice(&(CHUNKS_FIRST_HEAD + self.len).to_le_bytes());
        h[24..].copy_from_slice(&table_len.to_le_bytes());
        h
    }

    /// The sink, flushed.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.sink.flush()?;
        Ok(self.sink)
    }
}

fn section_prefix(probe_table: &[u8], chunks: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(32 + probe_table.len());
    v.extend_from_slice(MAGIC);
    v.extend_from_slice(&(probe_table.len() as u64).to_le_bytes());
    v.extend_from_slice(probe_table);
    pad8(&mut v);
    v.extend_from_slice(&chunks.to_le_bytes());
    v
}

/// What follows the chunks in the chunks-first form: the table, padded to 8 bytes.
pub fn probe_table_tail(probe_table: &[u8]) -> Vec<u8> {
    let mut v = probe_table.to_vec();
    pad8(&mut v);
    v
}

/// The chunk header fields, then the bytes; `CHUNK_HEADER` bytes before them.
pub(crate) const CHUNK_HEADER: usize = 8 + 4 + 4 + 8 + 8 + 4 + 4;

/// The whole section, decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuxData {
    /// perfaux-swtrace's probe table bytes ("SWTPROBE").
    pub probe_table: Vec<u8>,
    /// The chunks in the order they were recorded.
    pub chunks: Vec<AuxChunk>,
}

/// A malformed section: what and at which file offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuxDataError {
    /// File offset of the bad field.
    pub offset: u64,
    /// What is wrong there.
    pub what: String,
}

impl fmt::Display for AuxDataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "perfaux trace section (feature {PERFAUX_FEATURE_BIT}) corrupt at file offset {:#x}: {}",
            self.offset, self.what
        )
    }
}

impl std::error::Error for AuxDataError {}

fn pad8(v: &mut Vec<u8>) {
    v.resize(v.len().next_multiple_of(8), 0);
}

impl AuxData {
    /// The section's bytes, table first.
    pub fn to_bytes(&self) -> Vec<u8> {
        let chunks = self.chunk_bytes();
        let mut out = section_prefix(&self.probe_table, self.chunks.len() as u64);
        out.extend_from_slice(&chunks.sink);
        out
    }

    /// The section's bytes, chunks first (as a recorder writes it in place).
    pub fn to_bytes_chunks_first(&self) -> Vec<u8> {
        let chunks = self.chunk_bytes();
        let mut out = chunks
            .chunks_first_head(self.probe_table.len() as u64)
            .to_vec();
        out.extend_from_slice(&chunks.sink);
        out.extend_from_slice(&probe_table_tail(&self.probe_table));
        out
    }

    /// The chunks, streamed into memory.
    fn chunk_bytes(&self) -> ChunkStream<Vec<u8>> {
        let total: usize = self
            .chunks
            .iter()
            .map(|c| CHUNK_HEADER + c.bytes.len() + 8)
            .sum();
        let mut s = ChunkStream::new(Vec::with_capacity(total));
        for c in &self.chunks {
            // Writing to a Vec cannot fail.
            let _ = s.push(&c.header(), &[&c.bytes]);
        }
        s
    }

    /// Decodes the section found at file offset `file_offset`.
    pub fn parse(b: &[u8], file_offset: u64) -> Result<Self, AuxDataError> {
        let mut r = Cursor {
            b,
            at: 0,
            base: file_offset,
        };
        let (probe_table, n, count_at) = match r.take(8, "magic")? {
            m if m == MAGIC => {
                let tlen = r.len("probe table length")?;
                let table = r.take(tlen, "probe table")?.to_vec();
                r.align8("probe table padding")?;
                let count_at = r.at;
                (table, r.u64("chunk count")?, count_at)
            }
            m if m == MAGIC_CHUNKS_FIRST => {
                let n = r.u64("chunk count")?;
                let (table_at, tlen) = r.chunks_first_table()?;
                let table = b[table_at..table_at + tlen].to_vec();
                // The chunks end where the table begins.
                r.b = &b[..table_at];
                (table, n, 8)
            }
            _ => return Err(r.err(0, "magic is not \"PFXAUX01\" nor \"PFXAUX02\"")),
        };
        // Each chunk needs at least its header: a count beyond that is corrupt.
        if n > (r.b.len() - r.at) as u64 / CHUNK_HEADER as u64 {
            return Err(r.err(
                count_at,
                format!("chunk count {n} does not fit the section"),
            ));
        }
        let mut chunks = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let at = r.at;
            let event_id = r.u64("event_id")?;
            let cpu = r.u32("cpu")?;
            let tid = r.u32("tid")?;
            let aux_offset = r.u64("aux_offset")?;
            let size = r.len("size")?;
            let kind = r.u32("kind")?;
            let kind = ChunkKind::from_code(kind)
                .ok_or_else(|| r.err(at + 32, format!("unknown chunk kind {kind}")))?;
            let flags = r.u32("flags")?;
            let bytes = r.take(size, "trace bytes")?.to_vec();
            r.align8("chunk padding")?;
            chunks.push(AuxChunk {
                event_id,
                cpu,
                tid,
                aux_offset,
                kind,
                flags,
                bytes,
            });
        }
        Ok(AuxData {
            probe_table,
            chunks,
        })
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
    base: u64,
}

impl<'a> Cursor<'a> {
    fn err(&self, at: usize, what: impl Into<String>) -> AuxDataError {
        AuxDataError {
            offset: self.base + at as u64,
            what: what.into(),
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], AuxDataError> {
        let left = self.b.len() - self.at;
        if n > left {
            return Err(self.err(self.at, format!("{what}: {n} bytes needed, {left} left")));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn u64(&mut self, what: &str) -> Result<u64, AuxDataError> {
        let s = self.take(8, what)?;
        Ok(u64::from_le_bytes(s.try_into().unwrap_or_default()))
    }

    fn u32(&mut self, what: &str) -> Result<u32, AuxDataError> {
        let s = self.take(4, what)?;
        Ok(u32::from_le_bytes(s.try_into().unwrap_or_default()))
    }

    /// A u64 length that must fit in what is left of the section.
    fn len(&mut self, what: &str) -> Result<usize, AuxDataError> {
        let at = self.at;
        let n = self.u64(what)?;
        let left = (self.b.len() - self.at) as u64;
        if n > left {
            return Err(self.err(at, format!("{what} {n} exceeds the {left} bytes left")));
        }
        Ok(n as usize)
    }

    /// The chunks-first form's table offset and length (after its magic and chunk count),
    /// checked: the table lies after the head, 8-aligned, inside the section.
    fn chunks_first_table(&mut self) -> Result<(usize, usize), AuxDataError> {
        let at = self.at;
        let table_at = self.u64("probe table offset")?;
        let tlen = self.u64("probe table length")?;
        let size = self.b.len() as u64;
        let (table_at, tlen) =
            check_chunks_first_table(table_at, tlen, size).map_err(|what| self.err(at, what))?;
        Ok((table_at as usize, tlen as usize))
    }

    fn align8(&mut self, what: &str) -> Result<(), AuxDataError> {
        let pad = self.at.next_multiple_of(8) - self.at;
        self.take(pad, what).map(|_| ())
    }
}

/// A chunks-first head's table offset and length against a section of `size` bytes:
/// both, or what is wrong with them.
pub(crate) fn check_chunks_first_table(
    table_at: u64,
    tlen: u64,
    size: u64,
) -> Result<(u64, u64), String> {
    if table_at < CHUNKS_FIRST_HEAD || !table_at.is_multiple_of(8) || table_at > size {
        return Err(format!(
            "probe table offset {table_at} is not an 8-byte boundary between the head's \
             {CHUNKS_FIRST_HEAD} bytes and the section's end ({size})"
        ));
    }
    if tlen
        .checked_next_multiple_of(8)
        .is_none_or(|padded| padded > size - table_at)
    {
        return Err(format!(
            "probe table length {tlen} (padded to 8 bytes) exceeds the {} bytes after its \
             offset",
            size - table_at
        ));
    }
    Ok((table_at, tlen))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> AuxData {
        AuxData {
            probe_table: b"SWTPROBE\x01\0\0\0\0\0\0\0".to_vec(),
            chunks: vec![
                AuxChunk {
                    event_id: 7,
                    cpu: u32::MAX,
                    tid: 1234,
                    aux_offset: 0x1000,
                    kind: ChunkKind::Trace,
                    flags: 0,
                    bytes: (0..13).collect(),
                },
                AuxChunk {
                    event_id: 8,
                    cpu: 1,
                    tid: 1235,
                    aux_offset: 0,
                    kind: ChunkKind::Snapshot,
                    flags: 2,
                    bytes: vec![0xaa; 16],
                },
            ],
        }
    }

    #[test]
    fn round_trip_keeps_the_exact_bytes() {
        let d = sample();
        let b = d.to_bytes();
        assert_eq!(b.len() % 8, 0);
        assert_eq!(AuxData::parse(&b, 0x100).unwrap(), d);
    }

    /// In both forms. Cuts that fall in a chunk's trailing padding still hold all the data
    /// only when the padding is zero-length, never here.
    #[test]
    fn every_truncation_is_an_error_with_an_offset_inside_the_section() {
        let d = sample();
        for b in [d.to_bytes(), d.to_bytes_chunks_first()] {
            for cut in 0..b.len() {
                let e = AuxData::parse(&b[..cut], 0x100).unwrap_err();
                assert!(
                    e.offset >= 0x100 && e.offset <= 0x100 + cut as u64,
                    "cut {cut}: {e}"
                );
            }
        }
    }

    #[test]
    fn a_streamed_section_equals_the_whole_one() {
        let d = sample();
        let mut s = ChunkStream::new(Vec::new());
        for c in &d.chunks {
            let (a, b) = c.bytes.split_at(c.bytes.len() / 2);
            s.push(&c.header(), &[a, b]).unwrap();
        }
        let mut out = s.section_prefix(&d.probe_table);
        let len = s.len();
        let tail = s.into_inner().unwrap();
        assert_eq!(tail.len() as u64, len);
        out.extend_from_slice(&tail);
        assert_eq!(out, d.to_bytes());
    }

    #[test]
    fn lengths_beyond_the_section_are_refused() {
        let mut b = sample().to_bytes();
        b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = AuxData::parse(&b, 0).unwrap_err();
        assert_eq!(e.offset, 8);
        assert!(e.to_string().contains("probe table length"));
    }

    #[test]
    fn the_chunks_first_form_reads_as_the_table_first_one() {
        let d = sample();
        let b = d.to_bytes_chunks_first();
        assert_eq!(&b[..8], b"PFXAUX02");
        assert_eq!(b.len() % 8, 0);
        assert_eq!(AuxData::parse(&b, 0x100).unwrap(), d);
        let empty = AuxData::default();
        assert_eq!(
            AuxData::parse(&empty.to_bytes_chunks_first(), 0).unwrap(),
            empty
        );
    }

    #[test]
    fn a_section_streamed_chunks_first_equals_the_whole_one() {
        let d = sample();
        let mut s = ChunkStream::new(Vec::new());
        for c in &d.chunks {
            s.push(&c.header(), &[&c.bytes]).unwrap();
        }
        let mut out = s.chunks_first_head(d.probe_table.len() as u64).to_vec();
        out.extend_from_slice(&s.into_inner().unwrap());
        out.extend_from_slice(&probe_table_tail(&d.probe_table));
        assert_eq!(out, d.to_bytes_chunks_first());
    }

    #[test]
    fn a_chunks_first_table_outside_the_section_is_refused() {
        let b = sample().to_bytes_chunks_first();
        for (at, tlen, says) in [
            (8u64, 0u64, "probe table offset 8"),
            (b.len() as u64 + 8, 0, "probe table offset"),
            (36, 0, "probe table offset 36"),
            (32, b.len() as u64, "probe table length"),
            (32, u64::MAX, "probe table length"),
        ] {
            let mut c = b.clone();
            c[16..24].copy_from_slice(&at.to_le_bytes());
            c[24..32].copy_from_slice(&tlen.to_le_bytes());
            let e = AuxData::parse(&c, 0).unwrap_err();
            assert_eq!(e.offset, 16, "{at} {tlen}: {e}");
            assert!(e.what.contains(says), "{at} {tlen}: {e}");
        }
        // A table offset inside the chunks leaves them no room: the count is refused.
        let mut c = b.clone();
        c[16..24].copy_from_slice(&40u64.to_le_bytes());
        c[24..32].copy_from_slice(&0u64.to_le_bytes());
        let e = AuxData::parse(&c, 0).unwrap_err();
        assert_eq!(e.offset, 8, "{e}");
        assert!(e.what.contains("chunk count 2"), "{e}");
        // One that cuts a chunk's bytes: that chunk's size is refused.
        let mut c = b.clone();
        c[16..24].copy_from_slice(&(32u64 + 56 + 40).to_le_bytes());
        c[24..32].copy_from_slice(&0u64.to_le_bytes());
        let e = AuxData::parse(&c, 0).unwrap_err();
        assert_eq!(e.offset, 32 + 56 + 24, "{e}");
        assert!(e.what.contains("size"), "{e}");
    }
}
