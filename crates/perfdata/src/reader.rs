//! The perf.data reader: file metadata (header, attrs, feature sections)
//! read up front, then the record stream handed out one record at a time.
//!
//! Memory is bounded by the largest record (with its AUXTRACE payload) and
//! the metadata, never by the file: records are slices of a window over the
//! input that is reused from record to record. Every size field is checked
//! against the bytes the file can still hold before it is trusted.
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
use crate::header::{FileHeader, FileSection, Preamble};
use crate::input::Input;
use crate::record::{RawRecord, RecordLocation};
use perfaux_abi::attr::{PERF_ATTR_SIZE_MAX, PerfEventAttr};
use perfaux_abi::consts::*;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::user::{
    Compressed2Record, CompressedRecord, EventUpdate, EventUpdateRecord, HeaderAttrRecord,
    HeaderFeatureRecord,
};
use perfaux_abi::{Endianness, PerfEventHeader};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

/// Limits the reader applies to what the file asks of it.
#[derive(Debug, Clone, Copy)]
pub struct ReaderOptions {
    /// The largest AUXTRACE (or tracing data) payload held in memory.
    pub max_payload: u64,
    /// The largest feature section read.
    pub max_feature_size: u64,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        Self {
            max_payload: 1 << 30,
            max_feature_size: 256 << 20,
        }
    }
}

/// File mode or pipe mode, with the file header in file mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataFormat {
    /// A perf.data file, with its header.
    File(FileHeader),
    /// A pipe-mode stream, with its 16-byte preamble.
    Pipe(Preamble),
}

/// Everything about the file that is not the record stream. In pipe mode
/// the attrs and features arrive as records and are added as they pass.
#[derive(Debug, Clone)]
pub struct Metadata {
    /// File or pipe mode.
    pub format: DataFormat,
    /// Byte order of the file.
    pub endian: Endianness,
    /// The events, in the attrs section's (or HEADER_ATTR records') order.
    pub attrs: Vec<EventAttr>,
    /// The feature sections read so far.
    pub features: FeatureSections,
    /// Why some feature sections of a file could not be read (the features
    /// read before the damage are kept; the records are unaffected).
    pub feature_error: Option<Arc<Error>>,
}

impl Metadata {
    /// Whether the input is a pipe-mode stream.
    pub fn is_pipe(&self) -> bool {
        matches!(self.format, DataFormat::Pipe(_))
    }

    /// Whether simpleperf wrote the file (it sets feature bits from 128).
    pub fn is_simpleperf(&self) -> bool {
        self.features
            .features()
            .any(|f| f >= Feature::SIMPLEPERF_START)
    }
}

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
}

fn read_exact_at<R: Read>(r: &mut R, buf: &mut [u8], offset: u64, what: &str) -> Result<()> {
    r.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::truncated(offset, format!("{what}: {} bytes expected", buf.len()))
        } else {
            Error::io(offset, e)
        }
    })
}

/// Reads `section` of a seekable file after checking it lies in the file.
fn read_section<R: Read + Seek>(
    r: &mut R,
    section: FileSection,
    file_len: u64,
    max: u64,
    what: &str,
) -> Result<Vec<u8>> {
    let end = section.end().filter(|&e| e <= file_len).ok_or_else(|| {
        Error::corrupt(
            section.offset,
            format!(
                "{what} section {:#x}+{:#x} runs past the end of the {file_len:#x}-byte file",
                section.offset, section.size
            ),
        )
    })?;
    if section.size > max {
        return Err(Error::corrupt(
            section.offset,
            format!(
                "{what} section of {} bytes exceeds the {max}-byte limit",
                section.size
            ),
        ));
    }
    debug_assert!(end <= file_len);
    r.seek(SeekFrom::Start(section.offset))
        .map_err(|e| Error::io(section.offset, e))?;
    let mut v = vec![0u8; section.size as usize];
    read_exact_at(r, &mut v, section.offset, what)?;
    Ok(v)
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
        let file_len = r.seek(SeekFrom::End(0)).map_err(|e| Error::io(0, e))?;
        r.seek(SeekFrom::Start(16)).map_err(|e| Error::io(16, e))?;
        let mut rest = vec![0u8; (p.size - 16) as usize];
        read_exact_at(&mut r, &mut rest, 16, "perf.data file header")?;
        let header = FileHeader::parse(p, &rest)?;
        let e = header.endian;

        // Attrs: each entry is the attr (attr_size - 16 bytes) and its ids section.
        let entry = header.attr_size;
        let min_entry = u64::from(PERF_ATTR_SIZE_VER0) + FileSection::SIZE as u64;
        let max_entry = u64::from(PERF_ATTR_SIZE_MAX) + FileSection::SIZE as u64;
        if !(min_entry..=max_entry).contains(&entry) {
            return Err(Error::corrupt(
                16,
                format!("attr_size {entry} is outside {min_entry}..={max_entry}"),
            ));
        }
        let attrs_raw = read_section(&mut r, header.attrs, file_len, file_len, "attrs")?;
        let mut attrs = Vec::new();
        let mut ids = IdMap::default();
        for (i, ent) in attrs_raw.chunks_exact(entry as usize).enumerate() {
            let at = header.attrs.offset + i as u64 * entry;
            let attr_len = entry as usize - FileSection::SIZE;
            let (attr, _) = PerfEventAttr::parse(&ent[..attr_len], e)
                .map_err(|err| Error::corrupt(at, format!("attr {i}: {err}")))?;
            let attr = attr_bits::from_file(attr, e);
            let sec = FileSection::parse(&ent[attr_len..], e);
            let raw = read_section(&mut r, sec, file_len, file_len, "attr ids")?;
            let id_list: Vec<u64> = raw
                .chunks_exact(8)
                .map(|c| e.u64(c.try_into().unwrap_or_default()))
                .collect();
            ids.add(i, &attr, &id_list);
            attrs.push(EventAttr {
                attr,
                ids: id_list,
                name: None,
            });
        }

        // Feature sections: a table of {offset, size} after the data, one per set bit.
        let mut features = FeatureSections::new(e);
        let data_end = header.data.end().ok_or_else(|| {
            Error::corrupt(40, "data section offset + size overflows".to_string())
        })?;
        // A file cut short (perf record killed, a partial copy) loses its
        // features first: they are reported, and the records still read.
        let mut feature_error = None;
        let nfeat = header.features.len() as u64;
        if nfeat > 0 {
            let table = FileSection {
                offset: data_end,
                size: nfeat * FileSection::SIZE as u64,
            };
            let mut read_features = || -> Result<()> {
                let raw = read_section(&mut r, table, file_len, file_len, "feature table")?;
                for (f, s) in header.features.iter().zip(raw.chunks_exact(16)) {
                    let sec = FileSection::parse(s, e);
                    let what = f.name();
                    let data = read_section(&mut r, sec, file_len, opts.max_feature_size, what)?;
                    features.insert(f, sec.offset, data);
                }
                Ok(())
            };
            feature_error = read_features().err().map(Arc::new);
        }
        if let Some(Ok(descs)) = features.event_desc() {
            for (a, d) in attrs.iter_mut().zip(descs) {
                a.name = Some(d.name);
            }
        }

        r.seek(SeekFrom::Start(header.data.offset))
            .map_err(|err| Error::io(header.data.offset, err))?;
        let meta = Metadata {
            format: DataFormat::File(header),
            endian: e,
            attrs,
            features,
            feature_error,
        };
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

/// A record copied out of the reader (see [`PerfDataReader::into_records`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRecord {
    /// The record's header.
    pub header: PerfEventHeader,
    /// Where it was in the input.
    pub location: RecordLocation,
    /// The whole record, header included.
    pub bytes: Vec<u8>,
    /// Bytes that follow it uncounted by its size (an AUXTRACE's data).
    pub payload: Vec<u8>,
    /// Its event, as an index into the metadata's attrs.
    pub attr_index: Option<usize>,
    /// That event's layout facts, for typed parsing.
    pub parse_info: Option<RecordParseInfo>,
    /// Byte order of the record.
    pub endian: Endianness,
}

impl OwnedRecord {
    /// The borrowed form, for typed parsing.
    pub fn as_raw(&self) -> RawRecord<'_> {
        RawRecord {
            header: self.header,
            location: self.location,
            bytes: &self.bytes,
            payload: &self.payload,
            attr_index: self.attr_index,
            parse_info: self.parse_info,
            endian: self.endian,
        }
    }
}

/// Iterator over owned records; see [`PerfDataReader::into_records`].
pub struct Records<R> {
    reader: PerfDataReader<R>,
}

impl<R> Records<R> {
    /// The metadata as far as it is known (in pipe mode it grows as the
    /// records pass).
    pub fn metadata(&self) -> &Metadata {
        &self.reader.meta
    }
}

impl<R: Read> Iterator for Records<R> {
    type Item = Result<OwnedRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.reader.next_record() {
            Ok(Some(r)) => Some(Ok(OwnedRecord {
                header: r.header,
                location: r.location,
                bytes: r.bytes.to_vec(),
                payload: r.payload.to_vec(),
                attr_index: r.attr_index,
                parse_info: r.parse_info,
                endian: r.endian,
            })),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::pipe_header_bytes;
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
