//! The attr's bitfield word in a big-endian perf.data.
//!
//! `perf_event_attr`'s flags (disabled, inherit, ... sample_id_all ...) are
//! C bitfields in a u64. A big-endian compiler allocates bitfields from the
//! most significant bit, so in a file written on a big-endian machine
//! `disabled` is bit 63 of the word, not bit 0. perf reads such a file by
//! swapping the word's bytes and then the bits of every byte
//! (`perf_event__attr_swap`, `swap_bitfield`): a reversal of all 64 bits.
//! perfaux-abi decodes the word as a plain u64, so the reader and writer
//! apply that reversal for big-endian files here.

use perfaux_abi::Endianness;
use perfaux_abi::attr::{AttrFlags, PerfEventAttr};

/// An attr as decoded from a file of byte order `e`, made right.
pub(crate) fn from_file(mut attr: PerfEventAttr, e: Endianness) -> PerfEventAttr {
    if e == Endianness::Big {
        attr.flags = AttrFlags::from_bits_retain(attr.flags.bits().reverse_bits());
    }
    attr
}

/// An attr prepared for encoding as a u64 in a file of byte order `e`.
pub(crate) fn to_file(mut attr: PerfEventAttr, e: Endianness) -> PerfEventAttr {
    if e == Endianness::Big {
        attr.flags = AttrFlags::from_bits_retain(attr.flags.bits().reverse_bits());
    }
    attr
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_endian_bitfields_start_at_the_top_bit() {
        let a = PerfEventAttr {
            flags: AttrFlags::DISABLED | AttrFlags::SAMPLE_ID_ALL,
            ..Default::default()
        };
        let be = to_file(a, Endianness::Big);
        // disabled is bit 0 little-endian, bit 63 big-endian; sample_id_all 18 → 45.
        assert_eq!(be.flags.bits(), (1 << 63) | (1 << 45));
        assert_eq!(from_file(be, Endianness::Big), a);
        assert_eq!(to_file(a, Endianness::Little), a);
    }
}
