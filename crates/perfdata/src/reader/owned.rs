//! Records copied out of the reader, for callers that want a standard
//! iterator.

use crate::error::Result;
use crate::reader::{Metadata, PerfDataReader};
use crate::record::{RawRecord, RecordLocation};
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::{Endianness, PerfEventHeader};
use std::io::Read;

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
    pub(super) reader: PerfDataReader<R>,
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
