//! perfaux-abi: one definition of every byte that the Linux perf_event ABI
//! and perf.data share.
//!
//! - [`consts`]: the UAPI numbers, and perfaux's extension numbers in
//!   [`consts::ext`];
//! - [`header`]: `struct perf_event_header`;
//! - [`mmap_page`]: `struct perf_event_mmap_page`, offsets checked at compile time;
//! - [`endian`]: byte order of a producer;
//! - [`sink`]: [`ByteSink`], where encoded records go;
//! - [`errno`]: the Linux errno values the kernel paths return;
//! - [`user`]: the perf tool's record types (64..86), perf.data only.
//!
//! Depends on nothing of perfaux's.

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
pub mod sample_id;
pub mod sink;
pub mod user;

pub use endian::Endianness;
pub use header::PerfEventHeader;
pub use mmap_page::PerfEventMmapPage;
pub use sink::ByteSink;
