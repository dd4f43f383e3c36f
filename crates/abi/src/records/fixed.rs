//! Records whose body is a fixed list of scalar fields followed by the
//! sample_id trailer (`{ hdr; <fields>; sample_id }`): LOST, LOST_SAMPLES,
//! AUX, ITRACE_START, SWITCH_CPU_WIDE, BPF_EVENT, AUX_OUTPUT_HW_ID, and the
//! shared layouts of EXIT/FORK and THROTTLE/UNTHROTTLE.
//!
//! Their parse and encode differ only in the field list, so
//! [`fixed_record!`] generates both from it; each record's file keeps its
//! struct (with the UAPI layout in its doc) and names the fields in the
//! order the kernel writes them. A hand-written macro rather than a derive
//! crate: the whole shape is "read in order, then the trailer", which a
//! proc-macro dependency would not make any clearer.

use crate::endian::Endianness;
use crate::error::ParseError;
use crate::raw::RawReader;
use crate::sink::ByteSink;

/// A field of a fixed-layout record: how many bytes it takes, how it is read
/// and how it is written.
pub(crate) trait FixedField: Sized {
    /// Bytes the field takes in the record body.
    const SIZE: usize;
    /// Reads the field; `what` names it in the error.
    fn read(r: &mut RawReader<'_>, what: &'static str) -> Result<Self, ParseError>;
    /// Writes the field in `e` byte order.
    fn put<S: ByteSink + ?Sized>(&self, e: Endianness, sink: &mut S);
}

impl FixedField for u16 {
    const SIZE: usize = 2;
    #[inline]
    fn read(r: &mut RawReader<'_>, what: &'static str) -> Result<Self, ParseError> {
        r.u16(what)
    }
    #[inline]
    fn put<S: ByteSink + ?Sized>(&self, e: Endianness, sink: &mut S) {
        sink.put(&e.u16_bytes(*self));
    }
}

impl FixedField for u32 {
    const SIZE: usize = 4;
    #[inline]
    fn read(r: &mut RawReader<'_>, what: &'static str) -> Result<Self, ParseError> {
        r.u32(what)
    }
    #[inline]
    fn put<S: ByteSink + ?Sized>(&self, e: Endianness, sink: &mut S) {
        sink.put(&e.u32_bytes(*self));
    }
}

impl FixedField for u64 {
    const SIZE: usize = 8;
    #[inline]
    fn read(r: &mut RawReader<'_>, what: &'static str) -> Result<Self, ParseError> {
        r.u64(what)
    }
    #[inline]
    fn put<S: ByteSink + ?Sized>(&self, e: Endianness, sink: &mut S) {
        sink.put(&e.u64_bytes(*self));
    }
}

/// Byte arrays (e.g. BPF_EVENT's `tag`) are copied as is, in any byte order.
impl<const N: usize> FixedField for [u8; N] {
    const SIZE: usize = N;
    #[inline]
    fn read(r: &mut RawReader<'_>, what: &'static str) -> Result<Self, ParseError> {
        r.byte_array(what)
    }
    #[inline]
    fn put<S: ByteSink + ?Sized>(&self, _e: Endianness, sink: &mut S) {
        sink.put(self);
    }
}

/// Generates `parse` and [`EncodeRecord`](super::EncodeRecord) for a record
/// struct with fields `misc`, the listed fields (in layout order) and
/// `sample_id`:
///
/// ```text
/// fixed_record!(LostRecord, PERF_RECORD_LOST { id: u64, lost: u64 });
/// ```
///
/// A field written `type_: u16 as "type"` is named "type" in parse errors
/// (the UAPI name, where the Rust one must differ); otherwise the field's own
/// name is used. `fixed_record!(TaskRecord, kind: TaskKind { .. })` is the
/// form for a layout two types share, told apart by the struct's `kind`.
macro_rules! fixed_record {
    ($rec:ident, $ty_const:path { $($field:ident: $fty:ty $(as $what:literal)?),+ $(,)? }) => {
        impl $rec {
            /// Decodes a record body (the bytes after the header) in byte order `e`;
            /// `misc` is the header's, and `info` lays out the `sample_id` trailer.
            pub fn parse(
                misc: u16,
                body: $crate::raw::RawData<'_>,
                info: &$crate::parse_info::RecordParseInfo,
                e: $crate::endian::Endianness,
            ) -> Result<Self, $crate::error::ParseError> {
                let (mut r, sample_id) = $crate::records::split_trailer($ty_const, body, info, e)?;
                Ok(Self {
                    misc,
                    $($field: $crate::records::fixed::fixed_record!(@read r $field $fty $(as $what)?),)+
                    sample_id,
                })
            }
        }
        $crate::records::fixed::fixed_record!(@encode $rec, |_this| $ty_const, $($field: $fty),+);
    };
    // One layout shared by two types (EXIT/FORK, THROTTLE/UNTHROTTLE): the
    // struct's `kind` field says which, and `parse` takes it first.
    ($rec:ident, kind: $kind:ty { $($field:ident: $fty:ty $(as $what:literal)?),+ $(,)? }) => {
        impl $rec {
            /// Decodes a record body (the bytes after the header) in byte order `e`;
            /// `misc` is the header's, and `info` lays out the `sample_id` trailer.
            pub fn parse(
                kind: $kind,
                misc: u16,
                body: $crate::raw::RawData<'_>,
                info: &$crate::parse_info::RecordParseInfo,
                e: $crate::endian::Endianness,
            ) -> Result<Self, $crate::error::ParseError> {
                let (mut r, sample_id) =
                    $crate::records::split_trailer(kind.record_type(), body, info, e)?;
                Ok(Self {
                    kind,
                    misc,
                    $($field: $crate::records::fixed::fixed_record!(@read r $field $fty $(as $what)?),)+
                    sample_id,
                })
            }
        }
        $crate::records::fixed::fixed_record!(@encode $rec, |this| this.kind.record_type(), $($field: $fty),+);
    };
    (@read $r:ident $field:ident $fty:ty as $what:literal) => {
        <$fty as $crate::records::fixed::FixedField>::read(&mut $r, $what)?
    };
    (@read $r:ident $field:ident $fty:ty) => {
        <$fty as $crate::records::fixed::FixedField>::read(&mut $r, stringify!($field))?
    };
    (@encode $rec:ident, |$this:ident| $ty:expr, $($field:ident: $fty:ty),+) => {
        impl $crate::records::EncodeRecord for $rec {
            fn record_type(&self) -> u32 {
                let $this = self;
                $ty
            }
            fn misc(&self) -> u16 {
                self.misc
            }
            fn body_len(&self, info: &$crate::parse_info::RecordParseInfo) -> usize {
                use $crate::records::fixed::FixedField;
                0 $(+ <$fty as FixedField>::SIZE)+ + info.sample_id_len(self.record_type())
            }
            fn write_body<S: $crate::sink::ByteSink + ?Sized>(
                &self,
                info: &$crate::parse_info::RecordParseInfo,
                e: $crate::endian::Endianness,
                sink: &mut S,
            ) {
                use $crate::records::fixed::FixedField;
                $(<$fty as FixedField>::put(&self.$field, e, sink);)+
                $crate::records::write_trailer(self.record_type(), &self.sample_id, info, e, sink);
            }
        }
    };
}

pub(crate) use fixed_record;
