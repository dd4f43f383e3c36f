//! The records inside PERF_RECORD_COMPRESSED / COMPRESSED2 chunks.
//!
//! The chunks' zstd frames form one stream of records, and a record may
//! start in one chunk and end in the next (perf record compresses whatever
//! the ring holds, split at the ring's wrap; perf 6.1's reader drops such a
//! record and everything after it). Here the decompressed bytes not yet
//! handed out are carried over to the next chunk, so a split record is
//! delivered whole. Output is produced in [`OUT_CHUNK`] steps, only as far as
//! the next record needs, so a small chunk that inflates enormously costs no
//! more memory than its largest record, and that record is capped at
//! [`MAX_COMPRESSED_RECORD`]: a few KB of zstd can claim a gigabyte.

use crate::error::{Error, Result};
use perfaux_abi::consts::{PERF_RECORD_AUXTRACE, PERF_RECORD_HEADER_TRACING_DATA};
use perfaux_abi::{Endianness, PerfEventHeader};
use std::collections::VecDeque;
use zstd::stream::raw::{Decoder, Operation};

const OUT_CHUNK: usize = 256 * 1024;

/// The largest record (header.size plus trailing payload) taken from a
/// compressed stream. perf record compresses only what the data ring holds,
/// where a record is at most 64 KiB (header.size is a u16); AUX data and
/// tracing data are written beside the chunks, never inside. 16 MiB leaves
/// room for other writers while bounding what a crafted chunk (zstd inflates
/// zeros some 40000-fold) makes the reader hold and decompress.
pub(crate) const MAX_COMPRESSED_RECORD: u64 = 16 << 20;

/// A record found in the decompressed stream: its bytes are
/// `out[start..start + len]` plus `payload` bytes after them.
pub(crate) struct Found {
    pub(crate) header: PerfEventHeader,
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) payload: usize,
    /// File offset of the chunk the record's first byte came from.
    pub(crate) container: u64,
    /// Offset of the record in the decompressed stream.
    pub(crate) stream_offset: u64,
}

pub(crate) struct Decompressor {
    dctx: Decoder<'static>,
    input: Vec<u8>,
    in_pos: usize,
    /// File offset of the chunk in `input`.
    container: u64,
    out: Vec<u8>,
    out_pos: usize,
    /// Decompressed-stream offset of `out[out_pos]`.
    stream_offset: u64,
    /// (stream offset where a chunk's output starts, chunk file offset).
    origins: VecDeque<(u64, u64)>,
    produced: u64,
    max_payload: u64,
}

impl Decompressor {
    pub(crate) fn new(max_payload: u64) -> Result<Self> {
        let dctx = Decoder::new().map_err(|e| Error::Unsupported {
            what: format!("cannot create a zstd decompressor: {e}"),
        })?;
        Ok(Self {
            dctx,
            input: Vec::new(),
            in_pos: 0,
            container: 0,
            out: Vec::new(),
            out_pos: 0,
            stream_offset: 0,
            origins: VecDeque::new(),
            produced: 0,
            max_payload: max_payload.min(MAX_COMPRESSED_RECORD),
        })
    }

    /// Takes the compressed bytes of the chunk at file offset `container`.
    pub(crate) fn feed(&mut self, data: &[u8], container: u64) {
        self.input.clear();
        self.input.extend_from_slice(data);
        self.in_pos = 0;
        self.container = container;
        self.origins.push_back((self.produced, container));
    }

    /// Bytes of a record started but not finished.
    pub(crate) fn pending(&self) -> usize {
        self.out.len() - self.out_pos
    }

    /// Where the pending bytes came from, for an error message.
    pub(crate) fn pending_origin(&self) -> (u64, u64) {
        (self.origin_of(self.stream_offset), self.stream_offset)
    }

    fn origin_of(&self, stream_offset: u64) -> u64 {
        self.origins
            .iter()
            .rev()
            .find(|(s, _)| *s <= stream_offset)
            .map_or(self.container, |&(_, c)| c)
    }

    /// Hands the bytes of the last [`Found`] back (they are consumed).
    pub(crate) fn consume(&mut self, n: usize) {
        self.out_pos += n;
        self.stream_offset += n as u64;
        while self.origins.len() > 1 && self.origins[1].0 <= self.stream_offset {
            self.origins.pop_front();
        }
    }

    /// Decompresses up to [`OUT_CHUNK`] more bytes; false if no progress is
    /// possible until the next chunk is fed.
    fn inflate(&mut self) -> Result<bool> {
        if self.out_pos > 0 {
            self.out.drain(..self.out_pos);
            self.out_pos = 0;
        }
        let old = self.out.len();
        self.out.resize(old + OUT_CHUNK, 0);
        let status = self
            .dctx
            .run_on_buffers(&self.input[self.in_pos..], &mut self.out[old..]);
        let status = match status {
            Ok(s) => s,
            Err(e) => {
                self.out.truncate(old);
                return Err(Error::corrupt(
                    self.container + self.in_pos as u64,
                    format!(
                        "zstd data of the compressed chunk at {:#x}: {e}",
                        self.container
                    ),
                ));
            }
        };
        self.in_pos += status.bytes_read;
        self.out.truncate(old + status.bytes_written);
        self.produced += status.bytes_written as u64;
        Ok(status.bytes_read > 0 || status.bytes_written > 0)
    }

    /// The next complete record, or `None` when the fed chunks hold no more.
    pub(crate) fn next(&mut self, e: Endianness) -> Result<Option<Found>> {
        loop {
            let avail = &self.out[self.out_pos..];
            if avail.len() >= 8 {
                let mut h = [0u8; 8];
                h.copy_from_slice(&avail[..8]);
                let header = PerfEventHeader::parse(h, e);
                let at = self.origin_of(self.stream_offset);
                let len = usize::from(header.size);
                if len < 8 {
                    return Err(Error::corrupt(
                        at,
                        format!(
                            "record in the compressed stream at byte {:#x}: header.size {len} is less than 8",
                            self.stream_offset
                        ),
                    ));
                }
                if avail.len() >= len {
                    let payload = match payload_len(header, &avail[..len], e) {
                        Some(p) if p <= self.max_payload => p as usize,
                        Some(p) => {
                            return Err(Error::corrupt(
                                at,
                                format!(
                                    "payload of {p} bytes in the compressed stream exceeds the {} byte limit",
                                    self.max_payload
                                ),
                            ));
                        }
                        None => {
                            return Err(Error::corrupt(
                                at,
                                format!(
                                    "record type {} of {len} bytes is too short for its payload size field",
                                    header.type_
                                ),
                            ));
                        }
                    };
                    if avail.len() - len >= payload {
                        return Ok(Some(Found {
                            header,
                            start: self.out_pos,
                            len,
                            payload,
                            container: at,
                            stream_offset: self.stream_offset,
                        }));
                    }
                }
            }
            if !self.inflate()? {
                return Ok(None);
            }
        }
    }

    pub(crate) fn out(&self) -> &[u8] {
        &self.out
    }
}

/// Bytes that follow a record without being counted in its `header.size`:
/// AUXTRACE's `size` and HEADER_TRACING_DATA's `size` (perf pads both to 8
/// when writing). `None` if the record is too short to hold the field.
pub(crate) fn payload_len(h: PerfEventHeader, record: &[u8], e: Endianness) -> Option<u64> {
    match h.type_ {
        PERF_RECORD_AUXTRACE => {
            let b = record.get(8..16)?;
            (usize::from(h.size) >= 16).then(|| e.u64(b.try_into().unwrap_or_default()))
        }
        PERF_RECORD_HEADER_TRACING_DATA => {
            let b = record.get(8..12)?;
            (usize::from(h.size) >= 12).then(|| u64::from(e.u32(b.try_into().unwrap_or_default())))
        }
        _ => Some(0),
    }
}
