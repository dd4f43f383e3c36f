//! A record as the reader hands it out: raw bytes plus where they came from
//! and which event they belong to; typed parsing on request.

use perfaux_abi::consts::*;
use perfaux_abi::error::ParseError;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::Record;
use perfaux_abi::user::{
    AuxtraceErrorRecord, AuxtraceInfoRecord, AuxtraceRecord, Compressed2Record, CompressedRecord,
    CpuMapRecord, EventUpdateRecord, FinishedInitRecord, FinishedRoundRecord, HeaderAttrRecord,
    HeaderFeatureRecord, IdIndexRecord, ThreadMapRecord, TimeConvRecord, UserRecordError,
};
use perfaux_abi::{Endianness, PerfEventHeader};

const PERF_RECORD_UEVENT_EXT: u32 = ext::PERF_RECORD_UEVENT;

/// Where a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordLocation {
    /// File offset of the record, or, for a record that came out of a
    /// COMPRESSED/COMPRESSED2 chunk, of the chunk its first byte came from.
    pub file_offset: u64,
    /// For a record from a compressed chunk: its offset in the decompressed
    /// stream (which runs across all chunks of the file).
    pub decompressed_offset: Option<u64>,
}

/// One record, borrowed from the reader until its next call.
#[derive(Debug, Clone, Copy)]
pub struct RawRecord<'a> {
    /// The record's header.
    pub header: PerfEventHeader,
    /// Where it was in the input.
    pub location: RecordLocation,
    /// The whole record, header included: `header.size` bytes.
    pub bytes: &'a [u8],
    /// Bytes that follow the record uncounted by `header.size`: the AUX data
    /// of a PERF_RECORD_AUXTRACE, the tracing data of HEADER_TRACING_DATA.
    pub payload: &'a [u8],
    /// The event (index into the reader's attrs) the record belongs to, by
    /// its sample id; `None` for the tool's own records and unknown ids.
    pub attr_index: Option<usize>,
    /// The layout facts of that event's attr (its sample_type, read_format,
    /// sample_id_all...), for typed parsing.
    pub parse_info: Option<RecordParseInfo>,
    /// Byte order of the record.
    pub endian: Endianness,
}

/// A perf tool record (types 64..), parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum UserRecord<'a> {
    /// PERF_RECORD_HEADER_ATTR (pipe mode): an attr and its ids.
    HeaderAttr(HeaderAttrRecord),
    /// PERF_RECORD_FINISHED_ROUND: records before it may be sorted by time.
    FinishedRound(FinishedRoundRecord),
    /// PERF_RECORD_ID_INDEX: each sample id's cpu and tid.
    IdIndex(IdIndexRecord),
    /// PERF_RECORD_AUXTRACE_INFO: the AUX decoder's parameters.
    AuxtraceInfo(AuxtraceInfoRecord),
    /// The record and its AUX data.
    Auxtrace(AuxtraceRecord, &'a [u8]),
    /// PERF_RECORD_AUXTRACE_ERROR: a decoder error perf recorded.
    AuxtraceError(AuxtraceErrorRecord),
    /// PERF_RECORD_THREAD_MAP: the threads recorded.
    ThreadMap(ThreadMapRecord),
    /// PERF_RECORD_CPU_MAP: the CPUs recorded.
    CpuMap(CpuMapRecord),
    /// PERF_RECORD_EVENT_UPDATE: an event's name, unit, scale or cpus.
    EventUpdate(EventUpdateRecord),
    /// PERF_RECORD_TIME_CONV: TSC to perf time conversion.
    TimeConv(TimeConvRecord),
    /// PERF_RECORD_HEADER_FEATURE (pipe mode): a feature section.
    HeaderFeature(HeaderFeatureRecord<'a>),
    /// PERF_RECORD_COMPRESSED: zstd-compressed records.
    Compressed(CompressedRecord<'a>),
    /// PERF_RECORD_FINISHED_INIT: the end of the synthesized records.
    FinishedInit(FinishedInitRecord),
    /// PERF_RECORD_COMPRESSED2: compressed records, with their data size.
    Compressed2(Compressed2Record<'a>),
    /// A user type without a parsed form here (EVENT_TYPE, TRACING_DATA,
    /// BUILD_ID, STAT*, BPF_METADATA, SCHEDSTAT_*, simpleperf's 32768+).
    Other,
}

impl<'a> RawRecord<'a> {
    /// The record body after the 8-byte header.
    #[inline]
    pub fn body(&self) -> &'a [u8] {
        &self.bytes[PerfEventHeader::SIZE..]
    }

    /// Whether this is a record the kernel writes (types below 64).
    #[inline]
    pub fn is_kernel_record(&self) -> bool {
        self.header.type_ < PERF_RECORD_USER_TYPE_START
    }

    /// Parses a kernel record (types below 64, and perfaux's uevent) with
    /// its event's layout; `None` for the tool's records, or when the
    /// record's event is unknown.
    pub fn parse(&self) -> Option<Result<Record<'a>, ParseError>> {
        if !self.is_kernel_record() && self.header.type_ != PERF_RECORD_UEVENT_EXT {
            return None;
        }
        let info = self.parse_info?;
        Some(Record::parse(
            self.header.type_,
            self.header.misc,
            RawData::new(self.body(), &[]),
            &info,
            self.endian,
        ))
    }

    /// Parses a perf tool record; `None` for kernel records.
    pub fn user_record(&self) -> Option<Result<UserRecord<'a>, UserRecordError>> {
        let (b, e) = (self.bytes, self.endian);
        let r = match self.header.type_ {
            t if t < PERF_RECORD_USER_TYPE_START => return None,
            PERF_RECORD_HEADER_ATTR => HeaderAttrRecord::parse(b, e).map(|mut r| {
                r.attr = crate::attr_bits::from_file(r.attr, e);
                UserRecord::HeaderAttr(r)
            }),
            PERF_RECORD_FINISHED_ROUND => {
                FinishedRoundRecord::parse(b, e).map(UserRecord::FinishedRound)
            }
            PERF_RECORD_ID_INDEX => IdIndexRecord::parse(b, e).map(UserRecord::IdIndex),
            PERF_RECORD_AUXTRACE_INFO => {
                AuxtraceInfoRecord::parse(b, e).map(UserRecord::AuxtraceInfo)
            }
            PERF_RECORD_AUXTRACE => {
                AuxtraceRecord::parse(b, e).map(|r| UserRecord::Auxtrace(r, self.payload))
            }
            PERF_RECORD_AUXTRACE_ERROR => {
                AuxtraceErrorRecord::parse(b, e).map(UserRecord::AuxtraceError)
            }
            PERF_RECORD_THREAD_MAP => ThreadMapRecord::parse(b, e).map(UserRecord::ThreadMap),
            PERF_RECORD_CPU_MAP => CpuMapRecord::parse(b, e).map(UserRecord::CpuMap),
            PERF_RECORD_EVENT_UPDATE => EventUpdateRecord::parse(b, e).map(UserRecord::EventUpdate),
            PERF_RECORD_TIME_CONV => TimeConvRecord::parse(b, e).map(UserRecord::TimeConv),
            PERF_RECORD_HEADER_FEATURE => {
                HeaderFeatureRecord::parse(b, e).map(UserRecord::HeaderFeature)
            }
            PERF_RECORD_COMPRESSED => CompressedRecord::parse(b, e).map(UserRecord::Compressed),
            PERF_RECORD_FINISHED_INIT => {
                FinishedInitRecord::parse(b, e).map(UserRecord::FinishedInit)
            }
            PERF_RECORD_COMPRESSED2 => Compressed2Record::parse(b, e).map(UserRecord::Compressed2),
            _ => Ok(UserRecord::Other),
        };
        Some(r)
    }
}
