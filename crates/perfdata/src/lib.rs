//! perfaux-perfdata: perf.data files, read and written as Linux perf does.
//!
//! - [`PerfDataReader`]: file mode (seekable input) and pipe mode (any
//!   `Read`), either byte order, the old "PERFFILE" magic, zstd-compressed
//!   chunks (COMPRESSED and COMPRESSED2, records spanning chunks included),
//!   AUXTRACE payloads handed out with their record. File metadata
//!   ([`Metadata`]: header, attrs with ids and names, feature sections) is
//!   kept apart from the record stream, which is read with bounded memory.
//! - [`PerfDataWriter`]: file mode (header rewritten at finish, feature
//!   sections, AUXTRACE index) and pipe mode (HEADER_ATTR and HEADER_FEATURE
//!   records), with feature values taken from the machine or given.
//!
//! - perfaux's recording format: [`trace_section`] (the software trace
//!   bytes in a private feature section, which the reader locates but does
//!   not read; [`trace_reader`] reads it in place), [`uevent_sample`] (uevents as
//!   BPF-output samples) and [`record_attrs`] (the attrs perf 6.1 accepts,
//!   FINISHED_ROUND).
//!
//! Record layouts are perfaux-abi's ([`perfaux_abi::user`] for the tool's
//! own records).
//!
//! ```no_run
//! use perfaux_perfdata::{PerfDataReader, UserRecord};
//!
//! let mut reader = PerfDataReader::open("perf.data")?;
//! for event in &reader.metadata().attrs {
//!     println!("{:?}: {} ids", event.name, event.ids.len());
//! }
//! while let Some(rec) = reader.next_record()? {
//!     match rec.user_record() {
//!         Some(Ok(UserRecord::Auxtrace(at, data))) => println!("AUX data {:#x}+{}", at.offset, data.len()),
//!         Some(_) => {}
//!         // A kernel record: parsed with its event's layout.
//!         None => {
//!             if let Some(Ok(record)) = rec.parse() {
//!                 println!("{:#x}: {record:?}", rec.location.file_offset);
//!             }
//!         }
//!     }
//! }
//! # Ok::<(), perfaux_perfdata::Error>(())
//! ```

#![warn(missing_docs)]

pub mod error;
pub mod events;
pub mod feature;
pub mod feature_data;
pub mod features;
pub mod header;
pub mod host;
pub mod reader;
pub mod record;
pub mod record_attrs;
pub mod trace_reader;
pub mod trace_section;
pub mod tracepoint_format;
pub mod uevent_sample;
pub mod writer;

mod attr_bits;
mod decompress;
mod input;

pub use error::{Error, Result};
pub use events::EventAttr;
pub use feature::{Feature, FeatureSet};
pub use features::{FeatureSection, FeatureSections};
pub use header::{FileHeader, FileSection};
pub use host::HostInfo;
pub use reader::{DataFormat, Metadata, OwnedRecord, PerfDataReader, ReaderOptions, Records};
pub use record::{RawRecord, RecordLocation, UserRecord};
pub use writer::{
    Checkpoint, FeatureBody, PerfDataWriter, PerfPipeWriter, WriterEvent, WriterOptions,
};
