//! The perf.data reader: file metadata (header, attrs, feature sections)
//! read up front, then the record stream handed out one record at a time.
//!
//! Memory is bounded by the largest record (with its AUXTRACE payload) and
//! the metadata, never by the file: records are slices of a window over the
//! input that is reused from record to record. Every size field is checked
//! against the bytes the file can still hold before it is trusted. The
//! metadata ([`metadata`]: header, attrs, features) holds every feature
//! section but perfaux's trace section, which can be most of the file: it
//! is located, and read in place ([`PerfDataReader::trace_section`]).
//!
//! After an error the reader is finished: the records before the damage have
//! been handed out, then the error (naming the file offset) is returned, then
//! `Ok(None)`.

use crate::attr_bits;
use crate::decompress::{Decompressor, payload_len};
use crate::error::{Error, Result};
use crate::events::{EventAttr, IdMap};
use crate::feature::Feature;
use crate::features::{FeatureSection, FeatureSections};
use crate::header::Preamble;
use crate::input::Input;
use crate::record::{RawRecord, RecordLocation};
use crate::trace_reader::{InMemory, SectionSource, TraceSection};
use crate::trace_section::{AuxDataError, PERFAUX_FEATURE_BIT};
use perfaux_abi::PerfEventHeader;
use perfaux_abi::consts::*;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::user::{
    Compressed2Record, CompressedRecord, EventUpdate, EventUpdateRecord, HeaderAttrRecord,
    HeaderFeatureRecord,
};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

mod metadata;
mod owned;

pub use metadata::{DataFormat, Metadata, ReaderOptions};
use metadata::{read_exact_at, read_file_metadata};
pub use owned::{OwnedRecord, Records};

enum Pending {
    None,
    Outer(usize),
    Inner(usize),
}

enum Next {
    Outer {
        header: PerfEventHeader,
        offset: u64,
        len: usize,
        payload: usize,
    },
    Inner(crate::decompress::Found),
}

/// Reads a perf.data file or pipe record by record.
pub struct PerfDataReader<R> {
    meta: Metadata,
    input: Input<R>,
    ids: IdMap,
    /// Per attr: what typed parsing needs.
    infos: Vec<RecordParseInfo>,
    decomp: Option<Decompressor>,
    pending: Pending,
    done: bool,
    opts: ReaderOptions,
    /// File mode: end of the data section.
    data_end: Option<u64>,
}

impl PerfDataReader<BufReader<File>> {
    /// Opens a perf.data file (file or pipe format) by path.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let f = File::open(path.as_ref()).map_err(|e| Error::io(0, e))?;
        Self::new(BufReader::with_capacity(64 * 1024, f))
    }

    /// perfaux's trace section (feature [`PERFAUX_FEATURE_BIT`]), if the
    /// recording has one, ready to be read in place: from the file (on a
    /// descriptor of its own, by position, so the records read on), or
    /// from the records of a pipe that carried it. Its magic, probe table
    /// and chunk count are read and checked here.
    pub fn trace_section(
        &self,
    ) -> Option<std::result::Result<TraceSection<SectionSource>, AuxDataError>> {
        let f = Feature(PERFAUX_FEATURE_BIT);
        let features = &self.meta.features;
        if let Some(sec) = features.location(f) {
            let file = match self.get_ref().get_ref().try_clone() {
                Ok(file) => file,
                Err(e) => {
                    return Some(Err(AuxDataError {
                        offset: sec.offset,
                        what: format!("opening the file again to read it: {e}"),
                    }));
                }
            };
            return Some(TraceSection::open(
                SectionSource::File(file),
                sec.offset,
                sec.size,
            ));
        }
        let raw = features.raw(f)?;
        let mem = InMemory {
            base: raw.offset,
            data: raw.data.clone(),
        };
        Some(TraceSection::open(
            SectionSource::Memory(mem),
            raw.offset,
            raw.data.len() as u64,
        ))
    }
}

impl<R: Read + Seek> PerfDataReader<R> {
    /// Reads the metadata of a file-mode or pipe-mode perf.data from a
    /// seekable input (positioned anywhere; the file starts at offset 0).
    pub fn new(r: R) -> Result<Self> {
        Self::with_options(r, ReaderOptions::default())
    }

    /// A reader of `r` with limits other than the defaults.
    pub fn with_options(mut r: R, opts: ReaderOptions) -> Result<Self> {
        r.seek(SeekFrom::Start(0)).map_err(|e| Error::io(0, e))?;
        let mut pre = [0u8; 16];
        read_exact_at(&mut r, &mut pre, 0, "perf.data header")?;
        let p = Preamble::parse(&pre)?;
        if p.is_pipe() {
            return Ok(Self::pipe(r, p, opts));
        }
        let (meta, ids, header, data_end) = read_file_metadata(&mut r, p, &opts)?;
        r.seek(SeekFrom::Start(header.data.offset))
            .map_err(|err| Error::io(header.data.offset, err))?;
        Ok(Self {
            input: Input::new(r, header.data.offset, Some(data_end)),
            infos: meta
                .attrs
                .iter()
                .map(|a| RecordParseInfo::new(&a.attr))
                .collect(),
            meta,
            ids,
            decomp: None,
            pending: Pending::None,
            done: false,
            opts,
            data_end: Some(data_end),
        })
    }
}

impl<R: Read> PerfDataReader<R> {
    /// Reads a pipe-mode perf.data from a stream that cannot seek (stdin, a
    /// socket). A file-mode stream is refused: its feature sections are at
    /// the end and its attrs are found by offset.
    pub fn from_stream(mut r: R, opts: ReaderOptions) -> Result<Self> {
        let mut pre = [0u8; 16];
        read_exact_at(&mut r, &mut pre, 0, "perf.data header")?;
        let p = Preamble::parse(&pre)?;
        if !p.is_pipe() {
            return Err(Error::Unsupported {
                what: "a file-mode perf.data needs a seekable input (use PerfDataReader::new)"
                    .into(),
            });
        }
        Ok(Self::pipe(r, p, opts))
    }

    fn pipe(r: R, p: Preamble, opts: ReaderOptions) -> Self {
        Self {
            meta: Metadata {
                format: DataFormat::Pipe(p),
                endian: p.endian,
                attrs: Vec::new(),
                features: FeatureSections::new(p.endian),
                feature_error: None,
            },
            input: Input::new(r, 16, None),
            ids: IdMap::default(),
            infos: Vec::new(),
            decomp: None,
            pending: Pending::None,
            done: false,
            opts,
            data_end: None,
        }
    }

    /// The input the reader reads (a file, for [`Self::open`]). Reading it
    /// by position (`FileExt::read_at`, [`crate::trace_reader::ReadAt`])
    /// leaves the record stream where it is: this is how perfaux's trace
    /// section, which the reader locates but does not read, is read.
    pub fn get_ref(&self) -> &R {
        self.input.get_ref()
    }

    /// The file's metadata: header, attrs, features.
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }

    /// Takes a feature section out of the metadata (see
    /// [`FeatureSections::take`]): afterwards the metadata no longer has it.
    pub fn take_feature(&mut self, f: Feature) -> Option<FeatureSection> {
        self.meta.features.take(f)
    }

    /// The records as a standard iterator of owned copies: every record,
    /// then the error that ended the stream, if any. [`Self::next_record`]
    /// lends records without copying and is the faster way.
    pub fn into_records(self) -> Records<R> {
        Records { reader: self }
    }

    /// The next record, `Ok(None)` at the end, or the error that ends the
    /// stream (after which `Ok(None)`).
    pub fn next_record(&mut self) -> Result<Option<RawRecord<'_>>> {
        if self.done {
            return Ok(None);
        }
        let next = match self.advance() {
            Ok(Some(n)) => n,
            Ok(None) => {
                self.done = true;
                return Ok(None);
            }
            Err(e) => {
                self.done = true;
                return Err(e);
            }
        };
        let e = self.meta.endian;
        let rec = match next {
            Next::Outer {
                header,
                offset,
                len,
                payload,
            } => {
                self.pending = Pending::Outer(len + payload);
                let all = &self.input.available()[..len + payload];
                let bytes = &all[..len];
                let attr_index = self.ids.lookup(header, bytes, e);
                RawRecord {
                    header,
                    location: RecordLocation {
                        file_offset: offset,
                        decompressed_offset: None,
                    },
                    bytes,
                    payload: &all[len..],
                    attr_index,
                    parse_info: attr_index.and_then(|i| self.infos.get(i).copied()),
                    endian: e,
                }
            }
            Next::Inner(f) => {
                self.pending = Pending::Inner(f.len + f.payload);
                let d = self.decomp.as_ref().map_or(&[][..], |d| d.out());
                let all = &d[f.start..f.start + f.len + f.payload];
                let bytes = &all[..f.len];
                let attr_index = self.ids.lookup(f.header, bytes, e);
                RawRecord {
                    header: f.header,
                    location: RecordLocation {
                        file_offset: f.container,
                        decompressed_offset: Some(f.stream_offset),
                    },
                    bytes,
                    payload: &all[f.len..],
                    attr_index,
                    parse_info: attr_index.and_then(|i| self.infos.get(i).copied()),
                    endian: e,
                }
            }
        };
        Ok(Some(rec))
    }

    fn advance(&mut self) -> Result<Option<Next>> {
        match std::mem::replace(&mut self.pending, Pending::None) {
            Pending::None => {}
            Pending::Outer(n) => self.input.consume(n),
            Pending::Inner(n) => {
                if let Some(d) = self.decomp.as_mut() {
                    d.consume(n);
                }
            }
        }
        let e = self.meta.endian;
        if let Some(d) = self.decomp.as_mut()
            && let Some(f) = d.next(e)?
        {
            return Ok(Some(Next::Inner(f)));
        }

        let off = self.input.offset();
        let avail = self.input.fill(8)?;
        if avail == 0 {
            if let Some(d) = &self.decomp
                && d.pending() > 0
            {
                let (chunk, at) = d.pending_origin();
                return Err(Error::truncated(
                    chunk,
                    format!(
                        "the compressed stream ends inside a record: {} bytes at decompressed offset {at:#x}",
                        d.pending()
                    ),
                ));
            }
            if let Some(end) = self.data_end
                && off < end
            {
                return Err(Error::truncated(
                    off,
                    format!(
                        "the data section should end at {end:#x} but the file ends at {off:#x}"
                    ),
                ));
            }
            return Ok(None);
        }
        if avail < 8 {
            return Err(Error::truncated(
                off,
                format!("record header cut off after {avail} of 8 bytes"),
            ));
        }
        let mut hb = [0u8; 8];
        hb.copy_from_slice(&self.input.available()[..8]);
        let header = PerfEventHeader::parse(hb, e);
        let len = usize::from(header.size);
        if len < 8 {
            return Err(Error::corrupt(
                off,
                format!(
                    "record type {} has header.size {len}, less than its 8-byte header",
                    header.type_
                ),
            ));
        }
        let section_left = self.input.remaining_limit();
        if let Some(left) = section_left
            && len as u64 > left
        {
            return Err(Error::corrupt(
                off,
                format!(
                    "record type {} of {len} bytes runs past the end of the data section ({left} bytes left)",
                    header.type_
                ),
            ));
        }
        let have = self.input.fill(len)?;
        if have < len {
            return Err(Error::truncated(
                off,
                format!(
                    "record type {} of {len} bytes: the input ends after {have}",
                    header.type_
                ),
            ));
        }
        let payload = payload_len(header, &self.input.available()[..len], e).ok_or_else(|| {
            Error::corrupt(
                off,
                format!(
                    "record type {} of {len} bytes is too short for its payload size field",
                    header.type_
                ),
            )
        })?;
        let room = section_left.map_or(self.opts.max_payload, |l| l - len as u64);
        if payload > room.min(self.opts.max_payload) {
            return Err(Error::corrupt(
                off,
                format!(
                    "record type {} claims a payload of {payload} bytes but only {} may follow",
                    header.type_,
                    room.min(self.opts.max_payload)
                ),
            ));
        }
        let payload = payload as usize;
        let have = self.input.fill(len + payload)?;
        if have < len + payload {
            return Err(Error::truncated(
                off,
                format!(
                    "record type {} with a {payload}-byte payload: the input ends {} bytes into the payload",
                    header.type_,
                    have - len
                ),
            ));
        }
        self.absorb(header, off, len)?;
        Ok(Some(Next::Outer {
            header,
            offset: off,
            len,
            payload,
        }))
    }

    /// Takes what the stream says about the file: attrs, features and names
    /// in pipe mode, compressed chunks in both.
    fn absorb(&mut self, header: PerfEventHeader, off: u64, len: usize) -> Result<()> {
        let e = self.meta.endian;
        let bytes = &self.input.available()[..len];
        let bad = |err: perfaux_abi::user::UserRecordError| Error::corrupt(off, err.to_string());
        match header.type_ {
            PERF_RECORD_HEADER_ATTR => {
                let mut r = HeaderAttrRecord::parse(bytes, e).map_err(bad)?;
                r.attr = attr_bits::from_file(r.attr, e);
                let idx = self.meta.attrs.len();
                self.ids.add(idx, &r.attr, &r.ids);
                self.infos.push(RecordParseInfo::new(&r.attr));
                self.meta.attrs.push(EventAttr {
                    attr: r.attr,
                    ids: r.ids,
                    name: None,
                });
            }
            PERF_RECORD_HEADER_FEATURE => {
                let r = HeaderFeatureRecord::parse(bytes, e).map_err(bad)?;
                // perf ends a pipe's features with an empty record of id
                // HEADER_LAST_FEATURE (32 in perf 6.1); it is kept as an
                // empty section, since the number depends on perf's version.
                if let Ok(f) = u32::try_from(r.feat_id) {
                    self.meta
                        .features
                        .insert(Feature(f), off + 16, r.data.to_vec());
                    if f == Feature::EVENT_DESC.0
                        && let Some(Ok(descs)) = self.meta.features.event_desc()
                    {
                        for (a, d) in self.meta.attrs.iter_mut().zip(descs) {
                            a.name = Some(d.name);
                        }
                    }
                }
            }
            PERF_RECORD_EVENT_UPDATE => {
                // Unknown update types are left to the caller; names are kept.
                if let Ok(EventUpdateRecord {
                    id,
                    update: EventUpdate::Name(n),
                }) = EventUpdateRecord::parse(bytes, e)
                    && let Some(a) = self.meta.attrs.iter_mut().find(|a| a.ids.contains(&id))
                {
                    a.name = Some(String::from_utf8_lossy(&n).into_owned());
                }
            }
            PERF_RECORD_COMPRESSED | PERF_RECORD_COMPRESSED2 => {
                let data = if header.type_ == PERF_RECORD_COMPRESSED {
                    CompressedRecord::parse(bytes, e).map_err(bad)?.data
                } else {
                    Compressed2Record::parse(bytes, e).map_err(bad)?.data
                };
                if self.decomp.is_none() {
                    self.decomp = Some(Decompressor::new(self.opts.max_payload)?);
                }
                if let Some(d) = self.decomp.as_mut() {
                    d.feed(data, off);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::pipe_header_bytes;
    use perfaux_abi::Endianness;
    use perfaux_abi::user::AuxtraceRecord;

    /// A pipe of `n` 64-byte records with one 4 MiB AUXTRACE in the middle,
    /// produced on the fly so the test holds no copy of it.
    struct Generated {
        n: u64,
        made: u64,
        pending: Vec<u8>,
        pos: usize,
    }

    impl Read for Generated {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.pos == self.pending.len() {
                if self.made == self.n {
                    return Ok(0);
                }
                self.pending.clear();
                self.pos = 0;
                let e = Endianness::Little;
                if self.made == self.n / 2 {
                    AuxtraceRecord::for_payload(4 << 20, 0, 0, 0, 1, 0).write(&mut self.pending, e);
                    self.pending.resize(self.pending.len() + (4 << 20), 0xaa);
                } else {
                    let h = PerfEventHeader::new(PERF_RECORD_HEADER_EVENT_TYPE, 0, 64);
                    self.pending.extend_from_slice(&h.to_bytes(e));
                    self.pending.resize(64, 0);
                }
                self.made += 1;
            }
            let k = buf.len().min(self.pending.len() - self.pos);
            buf[..k].copy_from_slice(&self.pending[self.pos..self.pos + k]);
            self.pos += k;
            Ok(k)
        }
    }

    #[test]
    fn memory_is_bounded_by_the_largest_record_not_the_stream() {
        let n = 400_000; // 25 MiB of records plus the 4 MiB payload
        let src = pipe_header_bytes(Endianness::Little).to_vec();
        let gen_ = Generated {
            n,
            made: 0,
            pending: src,
            pos: 0,
        };
        let mut r = PerfDataReader::from_stream(gen_, ReaderOptions::default()).unwrap();
        let mut count = 0;
        let mut payload = 0;
        while let Some(rec) = r.next_record().unwrap() {
            count += 1;
            payload += rec.payload.len();
        }
        assert_eq!((count, payload), (n, 4 << 20));
        // The window grew to hold the AUXTRACE record and its payload (at
        // most doubling), never towards the stream's 29 MiB.
        assert!(
            r.input.buf.len() <= 2 * ((4 << 20) + 48) + input_chunk(),
            "{}",
            r.input.buf.len()
        );
    }

    fn input_chunk() -> usize {
        crate::input::MIN_CHUNK
    }
}
