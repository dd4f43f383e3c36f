//! `struct perf_event_header`: the 8 bytes in front of every record, in a
//! kernel ring and in perf.data alike.

use crate::endian::Endianness;

/// `struct perf_event_header { u32 type; u16 misc; u16 size; }`.
///
/// `size` counts the whole record, header included. Records are 8-byte
/// aligned in a ring, so a valid `size` is a non-zero multiple of 8 there;
/// the perf.data reader checks alignment where the writer promises it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PerfEventHeader {
    /// `type`: a `PERF_RECORD_*` number.
    pub type_: u32,
    /// `misc`: the CPU mode (`PERF_RECORD_MISC_CPUMODE_MASK`) and the type's own
    /// `PERF_RECORD_MISC_*` flags.
    pub misc: u16,
    /// `size`: the record's bytes, this header included.
    pub size: u16,
}

impl PerfEventHeader {
    /// `sizeof(struct perf_event_header)`.
    pub const SIZE: usize = 8;

    /// A header of type `type_`, `misc` and total size `size`.
    pub const fn new(type_: u32, misc: u16, size: u16) -> Self {
        Self { type_, misc, size }
    }

    /// Decodes the first 8 bytes of `bytes`.
    pub fn parse(bytes: [u8; 8], endian: Endianness) -> Self {
        let [t0, t1, t2, t3, m0, m1, s0, s1] = bytes;
        Self {
            type_: endian.u32([t0, t1, t2, t3]),
            misc: endian.u16([m0, m1]),
            size: endian.u16([s0, s1]),
        }
    }

    /// Encodes the header as 8 bytes.
    pub fn to_bytes(self, endian: Endianness) -> [u8; 8] {
        let t = endian.u32_bytes(self.type_);
        let m = endian.u16_bytes(self.misc);
        let s = endian.u16_bytes(self.size);
        [t[0], t[1], t[2], t[3], m[0], m[1], s[0], s[1]]
    }

    /// The same header as the native-endian `u64` a ring stores, so a writer
    /// can put it with one store.
    pub fn to_native_u64(self) -> u64 {
        u64::from_ne_bytes(self.to_bytes(Endianness::NATIVE))
    }

    /// The cpumode bits of `misc` (`PERF_RECORD_MISC_CPUMODE_MASK`).
    pub fn cpumode(self) -> u16 {
        self.misc & crate::consts::PERF_RECORD_MISC_CPUMODE_MASK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_matches_the_kernel() {
        // type 11 (AUX), misc 2 (USER), size 0x30: as `perf report -D` shows it.
        let h = PerfEventHeader::new(11, 2, 0x30);
        assert_eq!(h.to_bytes(Endianness::Little), [11, 0, 0, 0, 2, 0, 0x30, 0]);
        assert_eq!(h.to_bytes(Endianness::Big), [0, 0, 0, 11, 0, 2, 0, 0x30]);
        for e in [Endianness::Little, Endianness::Big] {
            assert_eq!(PerfEventHeader::parse(h.to_bytes(e), e), h);
        }
    }
}
