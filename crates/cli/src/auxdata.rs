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
//! ```text
//! magic      "PFXAUX01"                    8 bytes
//! table_len  u64                           length of the probe table
//! table      perfaux-swtrace's probe table ("SWTPROBE", see perfaux_swtrace::table)
//! pad        zeros to a multiple of 8
//! nr_chunks  u64
//! chunk[nr_chunks]:
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
//!                    resynchronizes); 0 otherwise
//!   bytes      size bytes, then zeros to a multiple of 8
//! ```
//!
//! Every length is checked against the section before it is used; a bad one
//! is an error naming the byte offset in the file.

use std::fmt;

/// The feature bit of the section: far above perf's features (31 in perf
/// 6.1, PMU_CAPS) and simpleperf's (128 up), below the 256-bit table's end.
pub const PERFAUX_FEATURE_BIT: u32 = 250;

const MAGIC: &[u8; 8] = b"PFXAUX01";

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

    fn from_code(c: u32) -> Option<Self> {
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
    pub event_id: u64,
    pub cpu: u32,
    pub tid: u32,
    pub aux_offset: u64,
    pub kind: ChunkKind,
    pub flags: u32,
    pub bytes: Vec<u8>,
}

/// The chunk header fields, then the bytes; `CHUNK_HEADER` bytes before them.
const CHUNK_HEADER: usize = 8 + 4 + 4 + 8 + 8 + 4 + 4;

/// The whole section, decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuxData {
    /// perfaux-swtrace's probe table bytes ("SWTPROBE").
    pub probe_table: Vec<u8>,
    pub chunks: Vec<AuxChunk>,
}

/// A malformed section: what and at which file offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuxDataError {
    pub offset: u64,
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
    /// The section's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let total: usize = self
            .chunks
            .iter()
            .map(|c| CHUNK_HEADER + c.bytes.len() + 8)
            .sum();
        let mut v = Vec::with_capacity(32 + self.probe_table.len() + total);
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&(self.probe_table.len() as u64).to_le_bytes());
        v.extend_from_slice(&self.probe_table);
        pad8(&mut v);
        v.extend_from_slice(&(self.chunks.len() as u64).to_le_bytes());
        for c in &self.chunks {
            v.extend_from_slice(&c.event_id.to_le_bytes());
            v.extend_from_slice(&c.cpu.to_le_bytes());
            v.extend_from_slice(&c.tid.to_le_bytes());
            v.extend_from_slice(&c.aux_offset.to_le_bytes());
            v.extend_from_slice(&(c.bytes.len() as u64).to_le_bytes());
            v.extend_from_slice(&c.kind.code().to_le_bytes());
            v.extend_from_slice(&c.flags.to_le_bytes());
            v.extend_from_slice(&c.bytes);
            pad8(&mut v);
        }
        v
    }

    /// Decodes the section found at file offset `file_offset`.
    pub fn parse(b: &[u8], file_offset: u64) -> Result<Self, AuxDataError> {
        let mut r = Cursor {
            b,
            at: 0,
            base: file_offset,
        };
        if r.take(8, "magic")? != MAGIC {
            return Err(r.err(0, "magic is not \"PFXAUX01\""));
        }
        let tlen = r.len("probe table length")?;
        let probe_table = r.take(tlen, "probe table")?.to_vec();
        r.align8("probe table padding")?;
        let n = r.u64("chunk count")?;
        // Each chunk needs at least its header: a count beyond that is corrupt.
        if n > (r.b.len() - r.at) as u64 / CHUNK_HEADER as u64 {
            return Err(r.err(
                r.at - 8,
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

    fn align8(&mut self, what: &str) -> Result<(), AuxDataError> {
        let pad = self.at.next_multiple_of(8) - self.at;
        self.take(pad, what).map(|_| ())
    }
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

    #[test]
    fn every_truncation_is_an_error_with_an_offset_inside_the_section() {
        let b = sample().to_bytes();
        for cut in 0..b.len() {
            // Cuts that fall in a chunk's trailing padding still hold all
            // the data only when the padding is zero-length, never here.
            let e = AuxData::parse(&b[..cut], 0x100).unwrap_err();
            assert!(
                e.offset >= 0x100 && e.offset <= 0x100 + cut as u64,
                "cut {cut}: {e}"
            );
        }
    }

    #[test]
    fn lengths_beyond_the_section_are_refused() {
        let mut b = sample().to_bytes();
        b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = AuxData::parse(&b, 0).unwrap_err();
        assert_eq!(e.offset, 8);
        assert!(e.to_string().contains("probe table length"));
    }
}
