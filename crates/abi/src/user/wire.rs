//! Bounds-checked reading and endian-aware writing of the fixed-width fields
//! the user records are made of.
//!
//! Hand-written rather than a crate because the records need exactly three
//! things no general crate combines: a runtime byte order, a record name and
//! byte offset in every error, and output into a [`ByteSink`].

use super::UserRecordError;
use crate::ByteSink;
use crate::endian::Endianness;
use crate::header::PerfEventHeader;

/// A read position in one record's bytes (header included, so that error
/// offsets are offsets in the record).
pub(crate) struct Wire<'a> {
    bytes: &'a [u8],
    pos: usize,
    endian: Endianness,
    record: &'static str,
}

impl<'a> Wire<'a> {
    /// Checks the header of `record` (type, and `size` equal to the bytes
    /// given, at least `min_size`) and positions after it.
    pub(crate) fn open(
        record: &'a [u8],
        endian: Endianness,
        name: &'static str,
        type_: u32,
        min_size: usize,
    ) -> Result<(Self, PerfEventHeader), UserRecordError> {
        if record.len() < PerfEventHeader::SIZE {
            return Err(UserRecordError::TooShort {
                record: name,
                size: record.len(),
                need: PerfEventHeader::SIZE,
            });
        }
        let mut h = [0u8; 8];
        h.copy_from_slice(&record[..8]);
        let header = PerfEventHeader::parse(h, endian);
        if header.type_ != type_ {
            return Err(UserRecordError::WrongType {
                record: name,
                expected: type_,
                found: header.type_,
            });
        }
        if usize::from(header.size) != record.len() {
            return Err(UserRecordError::SizeMismatch {
                record: name,
                header_size: header.size,
                len: record.len(),
            });
        }
        if record.len() < min_size {
            return Err(UserRecordError::TooShort {
                record: name,
                size: record.len(),
                need: min_size,
            });
        }
        Ok((
            Self {
                bytes: record,
                pos: PerfEventHeader::SIZE,
                endian,
                record: name,
            },
            header,
        ))
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub(crate) fn invalid(&self, offset: usize, what: String) -> UserRecordError {
        UserRecordError::Invalid {
            record: self.record,
            offset,
            what,
        }
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], UserRecordError> {
        if n > self.remaining() {
            return Err(UserRecordError::TooShort {
                record: self.record,
                size: self.bytes.len(),
                need: self.pos.saturating_add(n),
            });
        }
        let b = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], UserRecordError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, UserRecordError> {
        Ok(self.bytes(1)?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, UserRecordError> {
        let a = self.array::<2>()?;
        Ok(self.endian.u16(a))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, UserRecordError> {
        let a = self.array::<4>()?;
        Ok(self.endian.u32(a))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, UserRecordError> {
        let a = self.array::<8>()?;
        Ok(self.endian.u64(a))
    }

    /// Everything after the read position.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let b = &self.bytes[self.pos..];
        self.pos = self.bytes.len();
        b
    }

    /// A count of `elem`-byte elements read from the record, checked to fit
    /// in the bytes that are left (so a corrupt count cannot allocate).
    pub(crate) fn count(&self, n: u64, elem: usize, at: usize) -> Result<usize, UserRecordError> {
        let fits = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(elem).map(|b| (n, b)))
            .filter(|&(_, b)| b <= self.remaining());
        match fits {
            Some((n, _)) => Ok(n),
            None => Err(self.invalid(
                at,
                format!(
                    "count {n} of {elem}-byte entries exceeds the {} bytes left",
                    self.remaining()
                ),
            )),
        }
    }
}

/// Field writers over a [`ByteSink`] in a given byte order.
pub(crate) struct Put<'s, S: ByteSink + ?Sized> {
    pub(crate) sink: &'s mut S,
    pub(crate) endian: Endianness,
}

impl<'s, S: ByteSink + ?Sized> Put<'s, S> {
    /// Starts a record: writes its header (misc 0, as perf writes its own
    /// records). `size` is checked by the caller to fit 16 bits.
    pub(crate) fn header(sink: &'s mut S, endian: Endianness, type_: u32, size: usize) -> Self {
        let size = u16::try_from(size).unwrap_or(u16::MAX);
        sink.put(&PerfEventHeader::new(type_, 0, size).to_bytes(endian));
        Self { sink, endian }
    }

    pub(crate) fn u16(&mut self, v: u16) {
        self.sink.put(&self.endian.u16_bytes(v));
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.sink.put(&self.endian.u32_bytes(v));
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.sink.put(&self.endian.u64_bytes(v));
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.sink.put(b);
    }
    pub(crate) fn zeros(&mut self, n: usize) {
        self.sink.put_zeros(n);
    }
}

/// `n` rounded up to a multiple of 8 (`PERF_ALIGN(n, sizeof(u64))`).
pub(crate) const fn align8(n: usize) -> usize {
    (n + 7) & !7
}

/// Refuses a record that does not fit the 16-bit `header.size`.
pub(crate) fn check_size(record: &'static str, size: usize) -> Result<(), UserRecordError> {
    if size > usize::from(u16::MAX) {
        return Err(UserRecordError::TooLarge { record, size });
    }
    Ok(())
}
