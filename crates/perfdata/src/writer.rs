//! The perf.data writer: file mode (seekable output, header rewritten at
//! [`PerfDataWriter::finish`]) and pipe mode ([`PerfPipeWriter`], any
//! `Write`), laid out as `perf record` lays them out so that Linux perf
//! reads them (tools/perf/util/header.c `perf_session__do_write_header`,
//! `perf_header__adds_write`, `perf_event__synthesize_attrs/features`).
//!
//! File layout: header (104 bytes, zeros until finish), the id arrays of
//! every event, the attrs section (`attr_size` = attr + 16-byte ids
//! section per event), the data section (records as given), then the
//! feature table (`{offset, size}` per set bit, in bit order) and the
//! feature sections.

use crate::attr_bits;
use crate::error::{Error, Result};
use crate::feature::{Feature, FeatureSet};
use crate::feature_data::{AuxtraceIndexEntry, SectionBuf};
use crate::header::{FILE_HEADER_SIZE, FileHeader, FileSection, Magic, pipe_header_bytes};
use crate::host::HostInfo;
use perfaux_abi::attr::{AttrFlags, PerfEventAttr};
use perfaux_abi::consts::*;
use perfaux_abi::user::{AuxtraceRecord, HeaderAttrRecord, HeaderFeatureRecord};
use perfaux_abi::{Endianness, PerfEventHeader};
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};

/// A feature section given at [`PerfDataWriter::finish_with`], when the
/// recording is over (as perf writes its header at exit).
pub enum FeatureBody<'a> {
    /// The whole section.
    Bytes(Vec<u8>),
    /// `head`, then exactly `tail_len` bytes read from `tail` (a section
    /// too large to hold in memory, kept in a file until now).
    Stream {
        /// The first bytes of the section.
        head: Vec<u8>,
        /// The rest of it.
        tail: &'a mut dyn Read,
        /// How many bytes `tail` gives.
        tail_len: u64,
    },
    /// A section the caller wrote into the final file itself, `len` bytes at `offset`
    /// (in the room [`PerfDataWriter::finish_around`] leaves before the data): the writer
    /// writes only its entry in the feature table.
    Placed {
        /// File offset of the section in the final file.
        offset: u64,
        /// Its length.
        len: u64,
    },
}

impl FeatureBody<'_> {
    /// Bytes the writer lays out for the section after the feature table.
    fn len(&self) -> u64 {
        match self {
            FeatureBody::Bytes(b) => b.len() as u64,
            FeatureBody::Stream { head, tail_len, .. } => head.len() as u64 + tail_len,
            FeatureBody::Placed { .. } => 0,
        }
    }
}

/// perf 6.1's `HEADER_LAST_FEATURE`: the `feat_id` of the empty
/// HEADER_FEATURE record that ends the features of a pipe (perf prints the
/// header when it sees it).
pub const HEADER_LAST_FEATURE: u64 = 32;

/// One event of the file: its attr, the sample ids of its instances (one
/// per CPU or thread it was opened on) and its name for EVENT_DESC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterEvent {
    /// The attr written for it.
    pub attr: PerfEventAttr,
    /// Sample ids of its instances.
    pub ids: Vec<u64>,
    /// Its name (EVENT_DESC).
    pub name: String,
}

/// What goes into the header besides the events.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Byte order to write in.
    pub endian: Endianness,
    /// Bytes per attr. `None`: 128 (VER7, perf 6.1's `sizeof(struct
    /// perf_event_attr)`; perf refuses larger attrs than it knows) unless an
    /// event uses config3/config4, which need 136/144.
    pub attr_size: Option<u32>,
    /// The machine's facts for the host features.
    pub host: HostInfo,
    /// `HEADER_CLOCKID`: the clock's resolution in ns. Written when set, or
    /// (as 1 ns, CLOCK_MONOTONIC's hrtimer resolution) when an event sets
    /// `use_clockid`.
    pub clockid_res_ns: Option<u64>,
    /// Further feature sections, already encoded in `endian`; they replace
    /// computed sections of the same number (except the AUXTRACE index,
    /// which the file writer always computes from what it wrote).
    pub raw_features: BTreeMap<Feature, Vec<u8>>,
    /// Write only `raw_features` (and the AUXTRACE index): for copying a
    /// file's features exactly, with none added.
    pub only_raw_features: bool,
}

impl WriterOptions {
    /// Options with `host` and the defaults.
    pub fn new(host: HostInfo) -> Self {
        Self {
            endian: Endianness::NATIVE,
            attr_size: None,
            host,
            clockid_res_ns: None,
            raw_features: BTreeMap::new(),
            only_raw_features: false,
        }
    }
}

impl Default for WriterOptions {
    /// Native byte order and this machine's values.
    fn default() -> Self {
        Self::new(HostInfo::from_machine())
    }
}

fn choose_attr_size(events: &[WriterEvent], opts: &WriterOptions) -> Result<u32> {
    let need = if events.iter().any(|e| e.attr.config4 != 0) {
        PERF_ATTR_SIZE_VER9
    } else if events.iter().any(|e| e.attr.config3 != 0) {
        PERF_ATTR_SIZE_VER8
    } else {
        PERF_ATTR_SIZE_VER0
    };
    let size = opts.attr_size.unwrap_or(need.max(PERF_ATTR_SIZE_VER7));
    if size < need || !size.is_multiple_of(8) || size > perfaux_abi::attr::PERF_ATTR_SIZE_MAX {
        return Err(Error::write(format!(
            "attr_size {size} cannot hold the events' attrs (needs {need}, a multiple of 8)"
        )));
    }
    Ok(size)
}

/// The feature sections both writers share, encoded in `opts.endian`.
fn feature_sections(
    events: &[WriterEvent],
    opts: &WriterOptions,
    attr_size: u32,
) -> BTreeMap<Feature, Vec<u8>> {
    if opts.only_raw_features {
        return opts.raw_features.clone();
    }
    let e = opts.endian;
    let h = &opts.host;
    let mut m = BTreeMap::new();
    let string = |s: &str| SectionBuf::new(e).string(s).bytes.clone();
    m.insert(Feature::HOSTNAME, string(&h.hostname));
    m.insert(Feature::OSRELEASE, string(&h.osrelease));
    m.insert(Feature::VERSION, string(&h.version));
    m.insert(Feature::ARCH, string(&h.arch));
    let mut b = SectionBuf::new(e);
    b.u32(h.nr_cpus_available).u32(h.nr_cpus_online);
    m.insert(Feature::NRCPUS, b.bytes);
    m.insert(Feature::CPUDESC, string(&h.cpudesc));
    m.insert(Feature::CPUID, string(&h.cpuid));
    let mut b = SectionBuf::new(e);
    b.u64(h.total_mem_kb);
    m.insert(Feature::TOTAL_MEM, b.bytes);
    let mut b = SectionBuf::new(e);
    b.u32(h.cmdline.len() as u32);
    for a in &h.cmdline {
        b.string(a);
    }
    m.insert(Feature::CMDLINE, b.bytes);
    // EVENT_DESC: u32 nre; u32 sz; per event {attr[sz]; u32 nr_ids; string name; u64 ids[]}.
    let mut b = SectionBuf::new(e);
    b.u32(events.len() as u32).u32(attr_size);
    for ev in events {
        b.raw(&attr_bits::to_file(ev.attr, e).to_bytes(attr_size, e));
        b.u32(ev.ids.len() as u32);
        b.string(&ev.name);
        for &id in &ev.ids {
            b.u64(id);
        }
    }
    m.insert(Feature::EVENT_DESC, b.bytes);
    let uses_clockid = events
        .iter()
        .any(|ev| ev.attr.flags.contains(AttrFlags::USE_CLOCKID));
    if let Some(res) = opts.clockid_res_ns.or(uses_clockid.then_some(1)) {
        let mut b = SectionBuf::new(e);
        b.u64(res);
        m.insert(Feature::CLOCKID, b.bytes);
    }
    for (f, data) in &opts.raw_features {
        m.insert(*f, data.clone());
    }
    m
}

fn check_record(record: &[u8], payload: &[u8], e: Endianness) -> Result<PerfEventHeader> {
    let Some(h) = record.first_chunk::<8>() else {
        return Err(Error::write(format!(
            "a record of {} bytes has no header",
            record.len()
        )));
    };
    let h = PerfEventHeader::parse(*h, e);
    if usize::from(h.size) != record.len() {
        return Err(Error::write(format!(
            "record type {}: header.size {} but {} bytes given",
            h.type_,
            h.size,
            record.len()
        )));
    }
    let expect = crate::decompress::payload_len(h, record, e).ok_or_else(|| {
        Error::write(format!(
            "record type {} is too short for its payload size",
            h.type_
        ))
    })?;
    if expect != payload.len() as u64 {
        return Err(Error::write(format!(
            "record type {} announces a {expect}-byte payload but {} bytes were given",
            h.type_,
            payload.len()
        )));
    }
    Ok(h)
}

/// Buffered output that knows its file offset.
struct Out<W> {
    w: W,
    buf: Vec<u8>,
    pos: u64,
}

impl<W: Write> Out<W> {
    const FLUSH_AT: usize = 256 * 1024;

    fn put(&mut self, b: &[u8]) -> Result<()> {
        self.buf.extend_from_slice(b);
        self.pos += b.len() as u64;
        if self.buf.len() >= Self::FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let at = self.pos - self.buf.len() as u64;
        self.w.write_all(&self.buf).map_err(|e| Error::io(at, e))?;
        self.buf.clear();
        Ok(())
    }
}

/// Copies exactly `len` bytes of `src` into `out`.
fn copy_exact<W: Write>(out: &mut Out<W>, src: &mut dyn Read, len: u64, f: Feature) -> Result<()> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut left = len;
    while left > 0 {
        let want = buf.len().min(left as usize);
        let n = match src.read(&mut buf[..want]) {
            Ok(0) => {
                return Err(Error::write(format!(
                    "feature {}: its source ended {left} bytes short of {len}",
                    f.name()
                )));
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io(out.pos, e)),
        };
        out.put(&buf[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// What ends a file-mode perf.data: [`PerfDataWriter`]'s plan, written at the finish or
/// copied into a checkpoint.
struct ClosingPlan<'a> {
    /// The feature table (it goes right after the data).
    table: Vec<u8>,
    sections: BTreeMap<Feature, FeatureBody<'a>>,
    /// The id arrays of events given ids after the data began, after the sections.
    late_ids: Vec<u8>,
    /// The attrs section rewritten (at its offset) to point at the late ids.
    attrs: Option<(u64, Vec<u8>)>,
    header: Vec<u8>,
}

/// A whole perf.data made of the writer's output so far ([`PerfDataWriter::checkpoint`]):
/// the output's first `data_end` bytes (the room for a placed section opened after the
/// attrs, as for [`PerfDataWriter::finish_around`]), then `tail`, with `attrs` and `header`
/// written over their places.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// The output's length that the checkpoint ends (the data's end).
    pub data_end: u64,
    /// The feature table, its sections and the late ids, after the data (and the room).
    pub tail: Vec<u8>,
    /// The attrs section to write at its offset, if ids were added after the data began.
    pub attrs: Option<(u64, Vec<u8>)>,
    /// The file header, at offset 0.
    pub header: Vec<u8>,
}

/// Writes a file-mode perf.data to a seekable output.
pub struct PerfDataWriter<W: Write + Seek> {
    out: Out<W>,
    events: Vec<WriterEvent>,
    opts: WriterOptions,
    attr_size: u32,
    attrs: FileSection,
    data_offset: u64,
    auxtrace_index: Vec<AuxtraceIndexEntry>,
    /// Ids were added after the data began: the id arrays go after the
    /// data and the attrs section is rewritten at finish.
    late_ids: bool,
}

impl<W: Write + Seek> PerfDataWriter<W> {
    /// Adds sample ids to event `event` (instances opened after the file
    /// was begun: threads that appear while recording).
    pub fn add_ids(&mut self, event: usize, ids: &[u64]) -> Result<()> {
        let n = self.events.len();
        let ev = self
            .events
            .get_mut(event)
            .ok_or_else(|| Error::write(format!("add_ids: event {event} of {n}")))?;
        ev.ids.extend_from_slice(ids);
        self.late_ids = true;
        Ok(())
    }

    /// Writes the ids and attrs and positions for the data section.
    pub fn new(mut w: W, events: Vec<WriterEvent>, opts: WriterOptions) -> Result<Self> {
        let attr_size = choose_attr_size(&events, &opts)?;
        let e = opts.endian;
        w.seek(SeekFrom::Start(0))
            .map_err(|err| Error::io(0, err))?;
        let mut out = Out {
            w,
            buf: Vec::new(),
            pos: 0,
        };
        out.put(&[0u8; FILE_HEADER_SIZE as usize])?;
        let mut id_sections = Vec::with_capacity(events.len());
        for ev in &events {
            let sec = FileSection {
                offset: out.pos,
                size: 8 * ev.ids.len() as u64,
            };
            for &id in &ev.ids {
                out.put(&e.u64_bytes(id))?;
            }
            id_sections.push(sec);
        }
        let attrs_start = out.pos;
        for (ev, sec) in events.iter().zip(&id_sections) {
            out.put(&attr_bits::to_file(ev.attr, e).to_bytes(attr_size, e))?;
            out.put(&sec.to_bytes(e))?;
        }
        let attrs = FileSection {
            offset: attrs_start,
            size: out.pos - attrs_start,
        };
        let data_offset = out.pos;
        Ok(Self {
            out,
            events,
            opts,
            attr_size,
            attrs,
            data_offset,
            auxtrace_index: Vec::new(),
            late_ids: false,
        })
    }

    /// Byte order the file is written in.
    pub fn endian(&self) -> Endianness {
        self.opts.endian
    }

    /// File offset the next record will have.
    pub fn offset(&self) -> u64 {
        self.out.pos
    }

    /// File offset of the data section's start (the end of the attrs).
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Writes one complete record (`header.size` bytes, in the writer's byte
    /// order); returns its file offset. AUXTRACE records go through
    /// [`Self::write_record_with_payload`] or [`Self::write_auxtrace`].
    pub fn write_record(&mut self, record: &[u8]) -> Result<u64> {
        self.write_record_with_payload(record, &[])
    }

    /// Writes a record and the payload that follows it uncounted (AUXTRACE,
    /// HEADER_TRACING_DATA); AUXTRACE records enter the AUXTRACE index.
    pub fn write_record_with_payload(&mut self, record: &[u8], payload: &[u8]) -> Result<u64> {
        let h = check_record(record, payload, self.opts.endian)?;
        let at = self.out.pos;
        self.out.put(record)?;
        self.out.put(payload)?;
        if h.type_ == PERF_RECORD_AUXTRACE {
            // perf's index holds the record's header.size, not the payload.
            self.auxtrace_index.push(AuxtraceIndexEntry {
                file_offset: at,
                sz: record.len() as u64,
            });
        }
        Ok(at)
    }

    /// Writes a PERF_RECORD_AUXTRACE and its data, zero-padded to `rec.size`.
    pub fn write_auxtrace(&mut self, rec: &AuxtraceRecord, data: &[u8]) -> Result<u64> {
        let mut v = Vec::with_capacity(AuxtraceRecord::SIZE + data.len() + 8);
        rec.write_with_payload(&mut v, self.opts.endian, data)
            .map_err(|err| Error::write(err.to_string()))?;
        let (r, p) = v.split_at(AuxtraceRecord::SIZE);
        self.write_record_with_payload(r, p)
    }

    /// Writes the feature sections and the final header; returns the output.
    pub fn finish(self) -> Result<W> {
        self.finish_with(Vec::new())
    }

    /// [`Self::finish`] with further feature sections known only now; they
    /// replace computed sections of the same number.
    pub fn finish_with(self, late: Vec<(Feature, FeatureBody<'_>)>) -> Result<W> {
        self.finish_inner(late, 0)
    }

    /// [`Self::finish_with`] for a final file with `room` bytes of the caller's between the
    /// attrs and the data section (a section it writes in place while recording, given here
    /// as [`FeatureBody::Placed`] at [`Self::data_offset`]): the offsets this writes (the
    /// data section's, the feature table's, the late ids', the AUXTRACE index's) are those
    /// of the final file, where everything this output holds from `data_offset` on lies
    /// `room` bytes further. The caller moves it there: the final file is this output's
    /// first `data_offset` bytes, its own `room` bytes, then the rest of this output.
    pub fn finish_around(self, late: Vec<(Feature, FeatureBody<'_>)>, room: u64) -> Result<W> {
        self.finish_inner(late, room)
    }

    fn finish_inner(mut self, late: Vec<(Feature, FeatureBody<'_>)>, room: u64) -> Result<W> {
        let plan = self.closing_plan(late, room)?;
        self.out.put(&plan.table)?;
        for (f, body) in plan.sections {
            match body {
                FeatureBody::Bytes(b) => self.out.put(&b)?,
                FeatureBody::Stream {
                    head,
                    tail,
                    tail_len,
                } => {
                    self.out.put(&head)?;
                    copy_exact(&mut self.out, tail, tail_len, f)?;
                }
                FeatureBody::Placed { .. } => {}
            }
        }
        self.out.put(&plan.late_ids)?;
        self.out.flush()?;
        let end = self.out.pos;
        let mut w = self.out.w;
        if let Some((at, attrs)) = &plan.attrs {
            w.seek(SeekFrom::Start(*at))
                .map_err(|err| Error::io(*at, err))?;
            w.write_all(attrs).map_err(|err| Error::io(*at, err))?;
        }
        w.seek(SeekFrom::Start(0))
            .map_err(|err| Error::io(0, err))?;
        w.write_all(&plan.header).map_err(|err| Error::io(0, err))?;
        w.seek(SeekFrom::Start(end))
            .map_err(|err| Error::io(end, err))?;
        w.flush().map_err(|err| Error::io(end, err))?;
        Ok(w)
    }

    /// Hands what the writer buffers to its output, so that the output holds every record
    /// given so far (for [`Self::checkpoint`]'s copy).
    pub fn flush(&mut self) -> Result<()> {
        self.out.flush()?;
        let at = self.out.pos;
        self.out.w.flush().map_err(|err| Error::io(at, err))
    }

    /// The output, as far as [`Self::flush`] took it.
    pub fn get_ref(&self) -> &W {
        &self.out.w
    }

    /// What would end the file now, without ending it: the bytes that make a copy of the
    /// output so far (after [`Self::flush`]) a whole perf.data, with `late` and `room` as in
    /// [`Self::finish_around`]. The writer goes on; a later checkpoint or the finish
    /// supersedes this one. Sections must be [`FeatureBody::Bytes`] or
    /// [`FeatureBody::Placed`] (a stream would be consumed).
    pub fn checkpoint(
        &self,
        late: Vec<(Feature, FeatureBody<'_>)>,
        room: u64,
    ) -> Result<Checkpoint> {
        let plan = self.closing_plan(late, room)?;
        let mut tail = plan.table;
        for (f, body) in plan.sections {
            match body {
                FeatureBody::Bytes(b) => tail.extend_from_slice(&b),
                FeatureBody::Placed { .. } => {}
                FeatureBody::Stream { .. } => {
                    return Err(Error::write(format!(
                        "feature {}: a streamed section cannot be checkpointed",
                        f.name()
                    )));
                }
            }
        }
        tail.extend_from_slice(&plan.late_ids);
        Ok(Checkpoint {
            data_end: self.out.pos,
            tail,
            attrs: plan.attrs,
            header: plan.header,
        })
    }

    /// The feature table and sections, the late ids and the header that end the file with
    /// its data as it stands (the table at the output's position now).
    fn closing_plan<'a>(
        &self,
        late: Vec<(Feature, FeatureBody<'a>)>,
        room: u64,
    ) -> Result<ClosingPlan<'a>> {
        let e = self.opts.endian;
        let moved = |off: u64| {
            off.checked_add(room)
                .ok_or_else(|| Error::write(format!("{room} bytes of room before the data")))
        };
        let data = FileSection {
            offset: moved(self.data_offset)?,
            size: self.out.pos - self.data_offset,
        };
        let mut sections: BTreeMap<Feature, FeatureBody<'a>> =
            feature_sections(&self.events, &self.opts, self.attr_size)
                .into_iter()
                .map(|(f, b)| (f, FeatureBody::Bytes(b)))
                .collect();
        sections.remove(&Feature::AUXTRACE);
        sections.extend(late);
        if !self.auxtrace_index.is_empty() {
            let mut b = SectionBuf::new(e);
            b.u64(self.auxtrace_index.len() as u64);
            for ent in &self.auxtrace_index {
                b.u64(moved(ent.file_offset)?).u64(ent.sz);
            }
            sections.insert(Feature::AUXTRACE, FeatureBody::Bytes(b.bytes));
        }
        let mut features = FeatureSet::default();
        for f in sections.keys() {
            features.insert(*f);
        }
        // Feature table right after the data, sections after the table.
        let table_at = self.out.pos;
        let mut off = table_at + (sections.len() * FileSection::SIZE) as u64;
        let mut table = Vec::new();
        for body in sections.values() {
            let entry = match body {
                FeatureBody::Placed { offset, len } => FileSection {
                    offset: *offset,
                    size: *len,
                },
                _ => FileSection {
                    offset: moved(off)?,
                    size: body.len(),
                },
            };
            table.extend_from_slice(&entry.to_bytes(e));
            off += body.len();
        }
        // Late ids go after the features: perf finds the feature table
        // right after the data (data.offset + data.size).
        let mut late_ids = Vec::new();
        let mut attrs = None;
        if self.late_ids {
            let mut b = Vec::with_capacity(self.attrs.size as usize);
            for ev in &self.events {
                let sec = FileSection {
                    offset: moved(off + late_ids.len() as u64)?,
                    size: 8 * ev.ids.len() as u64,
                };
                for &id in &ev.ids {
                    late_ids.extend_from_slice(&e.u64_bytes(id));
                }
                b.extend_from_slice(&attr_bits::to_file(ev.attr, e).to_bytes(self.attr_size, e));
                b.extend_from_slice(&sec.to_bytes(e));
            }
            attrs = Some((self.attrs.offset, b));
        }
        let header = FileHeader {
            magic: Magic::V2,
            endian: e,
            size: FILE_HEADER_SIZE,
            attr_size: u64::from(self.attr_size) + FileSection::SIZE as u64,
            attrs: self.attrs,
            data,
            event_types: FileSection::default(),
            features,
        };
        Ok(ClosingPlan {
            table,
            sections,
            late_ids,
            attrs,
            header: header.to_bytes().to_vec(),
        })
    }
}

/// Writes a pipe-mode perf.data: the 16-byte header, a HEADER_ATTR per
/// event, the features as HEADER_FEATURE records (ended by
/// [`HEADER_LAST_FEATURE`]), then records as given.
pub struct PerfPipeWriter<W: Write> {
    out: Out<W>,
    endian: Endianness,
}

impl<W: Write> PerfPipeWriter<W> {
    /// Begins a pipe-mode stream at `w`: its 16-byte header, then `events` as HEADER_ATTR
    /// records and the features as HEADER_FEATURE records.
    pub fn new(w: W, events: Vec<WriterEvent>, opts: WriterOptions) -> Result<Self> {
        let attr_size = choose_attr_size(&events, &opts)?;
        let e = opts.endian;
        let mut out = Out {
            w,
            buf: Vec::new(),
            pos: 0,
        };
        out.put(&pipe_header_bytes(e))?;
        let mut rec = Vec::new();
        for ev in &events {
            let mut attr = attr_bits::to_file(ev.attr, e);
            attr.size = attr_size;
            rec.clear();
            HeaderAttrRecord {
                attr,
                ids: ev.ids.clone(),
            }
            .write(&mut rec, e)
            .map_err(|err| Error::write(err.to_string()))?;
            out.put(&rec)?;
        }
        let mut sections = feature_sections(&events, &opts, attr_size);
        // No offsets to index in a pipe; perf does not write it there either.
        sections.remove(&Feature::AUXTRACE);
        for (f, data) in &sections {
            rec.clear();
            HeaderFeatureRecord {
                feat_id: u64::from(f.0),
                data,
            }
            .write(&mut rec, e)
            .map_err(|err| Error::write(format!("feature {}: {err}", f.name())))?;
            out.put(&rec)?;
        }
        rec.clear();
        HeaderFeatureRecord {
            feat_id: HEADER_LAST_FEATURE,
            data: &[],
        }
        .write(&mut rec, e)
        .map_err(|err| Error::write(err.to_string()))?;
        out.put(&rec)?;
        Ok(Self { out, endian: e })
    }

    /// Byte order the stream is written in.
    pub fn endian(&self) -> Endianness {
        self.endian
    }

    /// Stream offset the next record will have.
    pub fn offset(&self) -> u64 {
        self.out.pos
    }

    /// Writes one record (already encoded in the stream's byte order); returns its stream
    /// offset.
    pub fn write_record(&mut self, record: &[u8]) -> Result<u64> {
        self.write_record_with_payload(record, &[])
    }

    /// Writes a record followed by `payload` that its size does not count; returns its stream
    /// offset.
    pub fn write_record_with_payload(&mut self, record: &[u8], payload: &[u8]) -> Result<u64> {
        check_record(record, payload, self.endian)?;
        let at = self.out.pos;
        self.out.put(record)?;
        self.out.put(payload)?;
        Ok(at)
    }

    /// Writes a PERF_RECORD_AUXTRACE with its AUX data inline, as a pipe carries it.
    pub fn write_auxtrace(&mut self, rec: &AuxtraceRecord, data: &[u8]) -> Result<u64> {
        let mut v = Vec::with_capacity(AuxtraceRecord::SIZE + data.len() + 8);
        rec.write_with_payload(&mut v, self.endian, data)
            .map_err(|err| Error::write(err.to_string()))?;
        let (r, p) = v.split_at(AuxtraceRecord::SIZE);
        self.write_record_with_payload(r, p)
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> Result<W> {
        self.out.flush()?;
        let at = self.out.pos;
        self.out.w.flush().map_err(|e| Error::io(at, e))?;
        Ok(self.out.w)
    }
}
