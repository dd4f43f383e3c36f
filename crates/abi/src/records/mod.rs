//! The kernel's record types (1..22) and perfaux's uevent, one file each,
//! and [`Record`], which dispatches on the header type.
//!
//! Every record parses from a [`RawData`] body (the bytes after the header,
//! possibly split at a ring's wrap) without allocating, and writes itself
//! into a [`ByteSink`] through [`EncodeRecord`]: `encoded_len` first (to
//! size a ring reservation), then `write`.

use crate::consts::*;
use crate::endian::Endianness;
use crate::error::{EncodeError, ParseError};
use crate::header::PerfEventHeader;
use crate::parse_info::RecordParseInfo;
use crate::raw::{RawData, RawReader};
use crate::sample::SampleRecord;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

pub mod aux;
pub mod aux_output_hw_id;
pub mod bpf_event;
pub mod callchain_deferred;
pub mod cgroup;
pub mod comm;
mod fixed;
pub mod itrace_start;
pub mod ksymbol;
pub mod lost;
pub mod lost_samples;
pub mod mmap;
pub mod mmap2;
pub mod namespaces;
pub mod read;
pub mod switch;
pub mod task;
pub mod text_poke;
pub mod throttle;
pub mod uevent;

pub use aux::AuxRecord;
pub use aux_output_hw_id::AuxOutputHwIdRecord;
pub use bpf_event::BpfEventRecord;
pub use callchain_deferred::CallchainDeferredRecord;
pub use cgroup::CgroupRecord;
pub use comm::CommRecord;
pub use itrace_start::ItraceStartRecord;
pub use ksymbol::KsymbolRecord;
pub use lost::LostRecord;
pub use lost_samples::LostSamplesRecord;
pub use mmap::MmapRecord;
pub use mmap2::{Mmap2FileId, Mmap2Record};
pub use namespaces::{NamespacesRecord, NsLinkInfo};
pub use read::ReadRecord;
pub use switch::{SwitchCpuWideRecord, SwitchRecord};
pub use task::{TaskKind, TaskRecord};
pub use text_poke::TextPokeRecord;
pub use throttle::{ThrottleKind, ThrottleRecord};
pub use uevent::UeventRecord;

/// A record that can be written: header, body, and (for non-SAMPLE types
/// under sample_id_all) the sample_id trailer.
pub trait EncodeRecord {
    /// `header.type`.
    fn record_type(&self) -> u32;
    /// `header.misc`.
    fn misc(&self) -> u16;
    /// Bytes after the header, sample_id included.
    fn body_len(&self, info: &RecordParseInfo) -> usize;
    /// Writes the bytes after the header, sample_id included.
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        endian: Endianness,
        sink: &mut S,
    );

    /// Bytes of the whole record, header and sample_id included.
    #[inline]
    fn encoded_len(&self, info: &RecordParseInfo) -> usize {
        PerfEventHeader::SIZE + self.body_len(info)
    }

    /// The header this record is written with.
    fn header(&self, info: &RecordParseInfo) -> Result<PerfEventHeader, EncodeError> {
        let len = self.encoded_len(info);
        let size = u16::try_from(len).map_err(|_| EncodeError::TooLarge {
            record_type: self.record_type(),
            len,
        })?;
        Ok(PerfEventHeader::new(self.record_type(), self.misc(), size))
    }

    /// Writes the whole record; nothing is written if it is too large for
    /// the 16-bit `header.size`.
    fn write<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        endian: Endianness,
        sink: &mut S,
    ) -> Result<(), EncodeError> {
        let h = self.header(info)?;
        sink.put(&h.to_bytes(endian));
        self.write_body(info, endian, sink);
        Ok(())
    }

    /// The whole record as bytes.
    fn to_vec(&self, info: &RecordParseInfo, endian: Endianness) -> Result<Vec<u8>, EncodeError> {
        let mut v = Vec::with_capacity(self.encoded_len(info));
        self.write(info, endian, &mut v)?;
        Ok(v)
    }
}

/// Splits a non-SAMPLE body of type `ty` into a reader over its payload and
/// its decoded sample_id trailer (empty unless sample_id_all).
pub(crate) fn split_trailer<'a>(
    ty: u32,
    body: RawData<'a>,
    info: &RecordParseInfo,
    endian: Endianness,
) -> Result<(RawReader<'a>, SampleId), ParseError> {
    let n = info.sample_id_len(ty);
    if n == 0 {
        return Ok((RawReader::new(body, endian), SampleId::default()));
    }
    let split = body.len().checked_sub(n).and_then(|k| body.split_at(k));
    let Some((payload, trailer)) = split else {
        return Err(ParseError::truncated("sample_id", 0, n, body.len()));
    };
    let sid = SampleId::parse(&mut RawReader::new(trailer, endian), info.sample_type).map_err(
        |mut e| {
            e.offset += payload.len();
            e
        },
    )?;
    Ok((RawReader::new(payload, endian), sid))
}

/// Writes the sample_id trailer of a type-`ty` record, if the info wants one.
#[inline]
pub(crate) fn write_trailer<S: ByteSink + ?Sized>(
    ty: u32,
    sid: &SampleId,
    info: &RecordParseInfo,
    e: Endianness,
    sink: &mut S,
) {
    if info.has_sample_id(ty) {
        sid.write(info.sample_type, e, sink);
    }
}

/// Bytes of a NUL-terminated string field padded to 8 (the kernel's
/// `ALIGN(strlen(s) + 1, sizeof(u64))`).
#[inline]
pub(crate) fn cstr_len(s: &RawData<'_>) -> usize {
    (s.len() + 1).next_multiple_of(8)
}

/// Writes `s`, its NUL and the zero padding to 8.
#[inline]
pub(crate) fn write_cstr<S: ByteSink + ?Sized>(s: &RawData<'_>, sink: &mut S) {
    s.write_to(sink);
    sink.put_zeros(cstr_len(s) - s.len());
}

/// A decoded record.
///
/// Samples are far larger than the other variants; they are kept inline
/// rather than boxed because a reader parses one record at a time and an
/// allocation per sample would cost more than the move.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Record<'a> {
    /// PERF_RECORD_MMAP.
    Mmap(MmapRecord<'a>),
    /// PERF_RECORD_LOST.
    Lost(LostRecord),
    /// PERF_RECORD_COMM.
    Comm(CommRecord<'a>),
    /// PERF_RECORD_EXIT or PERF_RECORD_FORK.
    Task(TaskRecord),
    /// PERF_RECORD_THROTTLE or PERF_RECORD_UNTHROTTLE.
    Throttle(ThrottleRecord),
    /// PERF_RECORD_READ.
    Read(ReadRecord<'a>),
    /// PERF_RECORD_SAMPLE.
    Sample(SampleRecord<'a>),
    /// PERF_RECORD_MMAP2.
    Mmap2(Mmap2Record<'a>),
    /// PERF_RECORD_AUX.
    Aux(AuxRecord),
    /// PERF_RECORD_ITRACE_START.
    ItraceStart(ItraceStartRecord),
    /// PERF_RECORD_LOST_SAMPLES.
    LostSamples(LostSamplesRecord),
    /// PERF_RECORD_SWITCH.
    Switch(SwitchRecord),
    /// PERF_RECORD_SWITCH_CPU_WIDE.
    SwitchCpuWide(SwitchCpuWideRecord),
    /// PERF_RECORD_NAMESPACES.
    Namespaces(NamespacesRecord<'a>),
    /// PERF_RECORD_KSYMBOL.
    Ksymbol(KsymbolRecord<'a>),
    /// PERF_RECORD_BPF_EVENT.
    BpfEvent(BpfEventRecord),
    /// PERF_RECORD_CGROUP.
    Cgroup(CgroupRecord<'a>),
    /// PERF_RECORD_TEXT_POKE.
    TextPoke(TextPokeRecord<'a>),
    /// PERF_RECORD_AUX_OUTPUT_HW_ID.
    AuxOutputHwId(AuxOutputHwIdRecord),
    /// PERF_RECORD_CALLCHAIN_DEFERRED.
    CallchainDeferred(CallchainDeferredRecord<'a>),
    /// perfaux's extension (seed 002), `consts::ext::PERF_RECORD_UEVENT`.
    Uevent(UeventRecord<'a>),
    /// Any other type (perf tool types, future kernel types): the body as is.
    Unknown {
        /// `header.type`.
        type_: u32,
        /// `header.misc`.
        misc: u16,
        /// The body, the bytes after the header.
        data: RawData<'a>,
    },
}

impl<'a> Record<'a> {
    /// Decodes a record body (the bytes after the header) of type `type_`.
    /// Unknown types are not an error: they come back as [`Record::Unknown`].
    #[inline(always)]
    pub fn parse(
        type_: u32,
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        endian: Endianness,
    ) -> Result<Self, ParseError> {
        // Both paths build the record straight into the caller's result
        // slot; a sample decoded into a temporary and then moved into the
        // enum would cost a copy of the whole (large) SampleRecord.
        if type_ == PERF_RECORD_SAMPLE {
            Self::parse_sample(misc, body, info, endian)
        } else {
            Self::parse_other(type_, misc, body, info, endian)
        }
    }

    #[inline(never)]
    fn parse_sample(
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        endian: Endianness,
    ) -> Result<Self, ParseError> {
        let st = info.sample_type;
        if let Some(head) = SampleRecord::fast_head(st, body) {
            return Ok(Record::Sample(SampleRecord::parse_head_in(
                misc, st, head, endian,
            )));
        }
        match SampleRecord::parse_general(misc, body, info, endian) {
            Ok(s) => Ok(Record::Sample(s)),
            Err(e) => Err(e.in_record(PERF_RECORD_SAMPLE)),
        }
    }

    #[inline(never)]
    fn parse_other(
        type_: u32,
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        endian: Endianness,
    ) -> Result<Self, ParseError> {
        let (b, i, e) = (body, info, endian);
        let rec = match type_ {
            PERF_RECORD_MMAP => MmapRecord::parse(misc, b, i, e).map(Record::Mmap),
            PERF_RECORD_LOST => LostRecord::parse(misc, b, i, e).map(Record::Lost),
            PERF_RECORD_COMM => CommRecord::parse(misc, b, i, e).map(Record::Comm),
            PERF_RECORD_EXIT => TaskRecord::parse(TaskKind::Exit, misc, b, i, e).map(Record::Task),
            PERF_RECORD_FORK => TaskRecord::parse(TaskKind::Fork, misc, b, i, e).map(Record::Task),
            PERF_RECORD_THROTTLE => {
                ThrottleRecord::parse(ThrottleKind::Throttle, misc, b, i, e).map(Record::Throttle)
            }
            PERF_RECORD_UNTHROTTLE => {
                ThrottleRecord::parse(ThrottleKind::Unthrottle, misc, b, i, e).map(Record::Throttle)
            }
            PERF_RECORD_READ => ReadRecord::parse(misc, b, i, e).map(Record::Read),
            PERF_RECORD_MMAP2 => Mmap2Record::parse(misc, b, i, e).map(Record::Mmap2),
            PERF_RECORD_AUX => AuxRecord::parse(misc, b, i, e).map(Record::Aux),
            PERF_RECORD_ITRACE_START => {
                ItraceStartRecord::parse(misc, b, i, e).map(Record::ItraceStart)
            }
            PERF_RECORD_LOST_SAMPLES => {
                LostSamplesRecord::parse(misc, b, i, e).map(Record::LostSamples)
            }
            PERF_RECORD_SWITCH => SwitchRecord::parse(misc, b, i, e).map(Record::Switch),
            PERF_RECORD_SWITCH_CPU_WIDE => {
                SwitchCpuWideRecord::parse(misc, b, i, e).map(Record::SwitchCpuWide)
            }
            PERF_RECORD_NAMESPACES => {
                NamespacesRecord::parse(misc, b, i, e).map(Record::Namespaces)
            }
            PERF_RECORD_KSYMBOL => KsymbolRecord::parse(misc, b, i, e).map(Record::Ksymbol),
            PERF_RECORD_BPF_EVENT => BpfEventRecord::parse(misc, b, i, e).map(Record::BpfEvent),
            PERF_RECORD_CGROUP => CgroupRecord::parse(misc, b, i, e).map(Record::Cgroup),
            PERF_RECORD_TEXT_POKE => TextPokeRecord::parse(misc, b, i, e).map(Record::TextPoke),
            PERF_RECORD_AUX_OUTPUT_HW_ID => {
                AuxOutputHwIdRecord::parse(misc, b, i, e).map(Record::AuxOutputHwId)
            }
            PERF_RECORD_CALLCHAIN_DEFERRED => {
                CallchainDeferredRecord::parse(misc, b, i, e).map(Record::CallchainDeferred)
            }
            ext::PERF_RECORD_UEVENT => UeventRecord::parse(misc, b, i, e).map(Record::Uevent),
            _ => Ok(Record::Unknown {
                type_,
                misc,
                data: body,
            }),
        };
        rec.map_err(|err| err.in_record(type_))
    }

    /// Splits the record at the start of `data` into its header and body,
    /// and returns the bytes after it: the step of a loop over a ring or a
    /// perf.data data section (then [`Record::parse`] the body, or skip it).
    #[inline]
    pub fn split_record(
        data: RawData<'a>,
        endian: Endianness,
    ) -> Result<(PerfEventHeader, RawData<'a>, RawData<'a>), ParseError> {
        let mut r = RawReader::new(data, endian);
        let h = PerfEventHeader::parse(r.byte_array::<8>("header")?, endian);
        let size = usize::from(h.size);
        if size < PerfEventHeader::SIZE {
            let err = ParseError::invalid(
                "header.size",
                6,
                u64::from(h.size),
                "smaller than the header",
            );
            return Err(err.in_record(h.type_));
        }
        let body = r
            .bytes(size - PerfEventHeader::SIZE, "record body")
            .map_err(|e| e.in_record(h.type_))?;
        Ok((h, body, r.rest()))
    }

    /// Decodes the record at the start of `data` (header included); returns
    /// it and `header.size`, the bytes it occupies. (A loop that wants every
    /// nanosecond uses [`Record::split_record`] and [`Record::parse`]: this
    /// returns the record inside a tuple, which costs a copy of it.)
    pub fn parse_record(
        data: RawData<'a>,
        info: &RecordParseInfo,
        endian: Endianness,
    ) -> Result<(Self, usize), ParseError> {
        let (h, body, _) = Self::split_record(data, endian)?;
        Ok((
            Self::parse(h.type_, h.misc, body, info, endian)?,
            usize::from(h.size),
        ))
    }

    /// The sample_id trailer, for types that carry one.
    pub fn sample_id(&self) -> Option<&SampleId> {
        Some(match self {
            Record::Mmap(r) => &r.sample_id,
            Record::Lost(r) => &r.sample_id,
            Record::Comm(r) => &r.sample_id,
            Record::Task(r) => &r.sample_id,
            Record::Throttle(r) => &r.sample_id,
            Record::Read(r) => &r.sample_id,
            Record::Mmap2(r) => &r.sample_id,
            Record::Aux(r) => &r.sample_id,
            Record::ItraceStart(r) => &r.sample_id,
            Record::LostSamples(r) => &r.sample_id,
            Record::Switch(r) => &r.sample_id,
            Record::SwitchCpuWide(r) => &r.sample_id,
            Record::Namespaces(r) => &r.sample_id,
            Record::Ksymbol(r) => &r.sample_id,
            Record::BpfEvent(r) => &r.sample_id,
            Record::Cgroup(r) => &r.sample_id,
            Record::TextPoke(r) => &r.sample_id,
            Record::AuxOutputHwId(r) => &r.sample_id,
            Record::CallchainDeferred(r) => &r.sample_id,
            Record::Uevent(r) => &r.sample_id,
            Record::Sample(_) | Record::Unknown { .. } => return None,
        })
    }
}

/// Calls `$body` with `$r` bound to the inner record of each variant
/// (Unknown handled by the caller).
macro_rules! each_known {
    ($self:expr, $r:ident => $body:expr, $unknown:pat => $ubody:expr) => {
        match $self {
            Record::Mmap($r) => $body,
            Record::Lost($r) => $body,
            Record::Comm($r) => $body,
            Record::Task($r) => $body,
            Record::Throttle($r) => $body,
            Record::Read($r) => $body,
            Record::Sample($r) => $body,
            Record::Mmap2($r) => $body,
            Record::Aux($r) => $body,
            Record::ItraceStart($r) => $body,
            Record::LostSamples($r) => $body,
            Record::Switch($r) => $body,
            Record::SwitchCpuWide($r) => $body,
            Record::Namespaces($r) => $body,
            Record::Ksymbol($r) => $body,
            Record::BpfEvent($r) => $body,
            Record::Cgroup($r) => $body,
            Record::TextPoke($r) => $body,
            Record::AuxOutputHwId($r) => $body,
            Record::CallchainDeferred($r) => $body,
            Record::Uevent($r) => $body,
            $unknown => $ubody,
        }
    };
}

impl EncodeRecord for Record<'_> {
    fn record_type(&self) -> u32 {
        each_known!(self, r => r.record_type(), Record::Unknown { type_, .. } => *type_)
    }
    fn misc(&self) -> u16 {
        each_known!(self, r => r.misc(), Record::Unknown { misc, .. } => *misc)
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        each_known!(self, r => r.body_len(info), Record::Unknown { data, .. } => data.len())
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        each_known!(self, r => r.write_body(info, e, sink), Record::Unknown { data, .. } => data.write_to(sink))
    }
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod testutil;
