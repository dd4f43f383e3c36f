//! Records whose body is a fixed list of scalar fields followed by the
//! sample_id trailer (`{ hdr; <fields>; sample_id }`): LOST, LOST_SAMPLES,
//! AUX, ITRACE_START, SWITCH_CPU_WIDE, BPF_EVENT, AUX_OUTPUT_HW_ID.
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
/// name is used.
macro_rules! fixed_record {
    ($rec:ident, $ty_const:path { $($field:ident: $fty:ty $(as $what:literal)?),+ $(,)? }) => {
        impl $rec {
            pub fn parse(
                misc: u16,
                body: $crate::raw::RawData<'_>,
                info: &$crate::parse_info::RecordParseInfo,
                e: $crate::endian::Endianness,
            ) -> Result<Self, $crate::error::ParseError> {
                use $crate::records::fixed::FixedField;
                let (mut r, sample_id) = $crate::records::split_trailer($ty_const, body, info, e)?;
                Ok(Self {
                    misc,
                    $($field: <$fty as FixedField>::read(
                        &mut r,
                        $crate::records::fixed::fixed_record!(@what $field $($what)?),
                    )?,)+
                    sample_id,
                })
            }
        }

        impl $crate::records::EncodeRecord for $rec {
            fn record_type(&self) -> u32 {
                $ty_const
            }
            fn misc(&self) -> u16 {
                self.misc
            }
            fn body_len(&self, info: &$crate::parse_info::RecordParseInfo) -> usize {
                use $crate::records::fixed::FixedField;
                0 $(+ <$fty as FixedField>::SIZE)+ + info.sample_id_len($ty_const)
            }
            fn write_body<S: $crate::sink::ByteSink + ?Sized>(
                &self,
                info: &$crate::parse_info::RecordParseInfo,
                e: $crate::endian::Endianness,
                sink: &mut S,
            ) {
                use $crate::records::fixed::FixedField;
                $(<$fty as FixedField>::put(&self.$field, e, sink);)+
                $crate::records::write_trailer($ty_const, &self.sample_id, info, e, sink);
            }
        }
    };
    (@what $field:ident $what:literal) => {
        $what
    };
    (@what $field:ident) => {
        stringify!($field)
    };
}

pub(crate) use fixed_record;
