//! Byte order of a producer. A kernel ring is always native; a perf.data file
//! says its own order through its magic, and perfaux reads either.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
/// The byte order of a producer's numbers.
pub enum Endianness {
    /// Least significant byte first (x86_64, most arm64 systems).
    Little,
    /// Most significant byte first (s390x, big-endian POWER).
    Big,
}

impl Endianness {
    #[cfg(target_endian = "little")]
    /// The running machine's order, that of every kernel ring it maps.
    pub const NATIVE: Self = Self::Little;
    #[cfg(target_endian = "big")]
    /// The running machine's order, that of every kernel ring it maps.
    pub const NATIVE: Self = Self::Big;

    #[inline]
    /// Decodes a `u16` stored in this order.
    pub fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            Self::Little => u16::from_le_bytes(b),
            Self::Big => u16::from_be_bytes(b),
        }
    }
    #[inline]
    /// Decodes a `u32` stored in this order.
    pub fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            Self::Little => u32::from_le_bytes(b),
            Self::Big => u32::from_be_bytes(b),
        }
    }
    #[inline]
    /// Decodes a `u64` stored in this order.
    pub fn u64(self, b: [u8; 8]) -> u64 {
        match self {
            Self::Little => u64::from_le_bytes(b),
            Self::Big => u64::from_be_bytes(b),
        }
    }
    #[inline]
    /// Encodes a `u16` in this order.
    pub fn u16_bytes(self, v: u16) -> [u8; 2] {
        match self {
            Self::Little => v.to_le_bytes(),
            Self::Big => v.to_be_bytes(),
        }
    }
    #[inline]
    /// Encodes a `u32` in this order.
    pub fn u32_bytes(self, v: u32) -> [u8; 4] {
        match self {
            Self::Little => v.to_le_bytes(),
            Self::Big => v.to_be_bytes(),
        }
    }
    #[inline]
    /// Encodes a `u64` in this order.
    pub fn u64_bytes(self, v: u64) -> [u8; 8] {
        match self {
            Self::Little => v.to_le_bytes(),
            Self::Big => v.to_be_bytes(),
        }
    }
}
