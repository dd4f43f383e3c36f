//! perfaux-abi: one definition of every byte that the Linux perf_event ABI
//! and perf.data share.
//!
//! - [`consts`]: the UAPI numbers, and perfaux's extension numbers in
//!   [`consts::ext`];
//! - [`attr`]: `struct perf_event_attr` (VER0..VER9), its flags and
//!   `aux_action`; parsing from perf.data and the kernel's `perf_copy_attr()`
//!   rules for `perf_event_open` callers;
//! - [`header`]: `struct perf_event_header`;
//! - [`mmap_page`]: `struct perf_event_mmap_page`, offsets checked at compile time;
//! - [`endian`]: byte order of a producer;
//! - [`raw`]: [`raw::RawData`] (bytes as one slice, or two where a ring
//!   wraps) and [`raw::RawReader`], the bounds-checked cursor records are
//!   parsed with;
//! - [`mod@array`]: arrays of fixed-size items in a record, borrowed either way;
//! - [`parse_info`]: [`parse_info::RecordParseInfo`], what parsing needs
//!   from an attr, and perf's id/time positions for multi-attr streams;
//! - [`records`]: the kernel's record types 1..22 and perfaux's uevent, the
//!   [`records::Record`] dispatcher and the [`records::EncodeRecord`] writer;
//! - [`sample`]: PERF_RECORD_SAMPLE for every sample_type bit;
//! - [`sample_fields`]: the fields of a sample a viewer reads, located by offset;
//! - [`sample_id`]: the sample_id_all trailer;
//! - [`read_format`]: the read_format block (READ records, PERF_SAMPLE_READ);
//! - [`error`]: parse and encode errors;
//! - [`sink`]: [`ByteSink`], where encoded records go;
//! - [`errno`]: the Linux errno values the kernel paths return;
//! - [`user`]: the perf tool's record types (64..86), perf.data only.
//!
//! Depends on nothing of perfaux's.
//!
//! Writing a record into a sink and reading it back, here with its bytes
//! split as a ring's wrap would split them:
//!
//! ```
//! use perfaux_abi::attr::{AttrFlags, PerfEventAttr};
//! use perfaux_abi::consts::*;
//! use perfaux_abi::parse_info::RecordParseInfo;
//! use perfaux_abi::raw::RawData;
//! use perfaux_abi::records::{AuxRecord, EncodeRecord, Record};
//! use perfaux_abi::sample_id::SampleId;
//! use perfaux_abi::Endianness;
//!
//! let attr = PerfEventAttr {
//!     sample_type: PERF_SAMPLE_TIME | PERF_SAMPLE_ID,
//!     flags: AttrFlags::SAMPLE_ID_ALL,
//!     ..Default::default()
//! };
//! let info = RecordParseInfo::new(&attr);
//! let aux = AuxRecord {
//!     aux_offset: 0,
//!     aux_size: 4096,
//!     flags: PERF_AUX_FLAG_TRUNCATED,
//!     sample_id: SampleId { time: Some(1000), id: Some(7), ..Default::default() },
//!     ..Default::default()
//! };
//! let mut bytes = Vec::new();
//! aux.write(&info, Endianness::NATIVE, &mut bytes).unwrap();
//! assert_eq!(bytes.len(), aux.encoded_len(&info)); // 8 + 24 + 16
//!
//! let wrapped = RawData::new(&bytes[..13], &bytes[13..]);
//! let (rec, size) = Record::parse_record(wrapped, &info, Endianness::NATIVE).unwrap();
//! assert_eq!((rec, size), (Record::Aux(aux), 48));
//! let body = RawData::Single(&bytes[8..]);
//! assert_eq!(info.record_id(PERF_RECORD_AUX, body, Endianness::NATIVE), Some(7));
//! ```

#![warn(missing_docs)]

pub mod array;
pub mod attr;
pub mod consts;
pub mod endian;
pub mod errno;
pub mod error;
pub mod header;
pub mod mmap_page;
pub mod parse_info;
pub mod raw;
pub mod read_format;
pub mod records;
pub mod sample;
pub mod sample_fields;
pub mod sample_id;
pub mod sink;
pub mod user;

pub use endian::Endianness;
pub use header::PerfEventHeader;
pub use mmap_page::PerfEventMmapPage;
pub use sink::ByteSink;
