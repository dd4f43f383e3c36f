//! Zero-copy input that may be split at a ring's wrap.
//!
//! A record in a perf ring can straddle the end of the data area; copying it
//! out to parse it would cost an allocation or a bounce buffer per record.
//! [`RawData`] is the record's bytes as one slice or two, and [`RawReader`]
//! a bounds-checked cursor over them whose one-slice path is a plain slice
//! read (the split path is taken only by the one read that crosses the wrap).
//! `bytes::Buf` has a similar chained cursor, but it panics on short input
//! and is not `Copy`; every read here returns an error instead.

use core::fmt;

use crate::endian::Endianness;
use crate::error::ParseError;
use crate::sink::ByteSink;

/// Bytes as one slice or two consecutive pieces.
#[derive(Clone, Copy)]
pub enum RawData<'a> {
    /// Contiguous bytes.
    Single(&'a [u8]),
    /// The first piece ends at the ring's end, the second starts at its base.
    Split(&'a [u8], &'a [u8]),
}

impl Default for RawData<'_> {
    fn default() -> Self {
        RawData::Single(&[])
    }
}

impl<'a> RawData<'a> {
    /// `first` followed by `second`; `Single` when either is empty.
    #[inline]
    pub fn new(first: &'a [u8], second: &'a [u8]) -> Self {
        if second.is_empty() {
            RawData::Single(first)
        } else if first.is_empty() {
            RawData::Single(second)
        } else {
            RawData::Split(first, second)
        }
    }

    #[inline]
    /// The total length of both pieces.
    pub fn len(&self) -> usize {
        match *self {
            RawData::Single(a) => a.len(),
            RawData::Split(a, b) => a.len() + b.len(),
        }
    }

    #[inline]
    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The two pieces (the second empty for `Single`).
    #[inline]
    pub fn pieces(&self) -> (&'a [u8], &'a [u8]) {
        match *self {
            RawData::Single(a) => (a, &[]),
            RawData::Split(a, b) => (a, b),
        }
    }

    /// The byte at `i`, if there is one.
    #[inline]
    pub fn get(&self, i: usize) -> Option<u8> {
        let (a, b) = self.pieces();
        match a.get(i) {
            Some(&x) => Some(x),
            None => b.get(i - a.len()).copied(),
        }
    }

    /// The bytes before and from `mid`, or `None` if `mid > len`.
    pub fn split_at(&self, mid: usize) -> Option<(Self, Self)> {
        let (a, b) = self.pieces();
        if mid <= a.len() {
            let (a0, a1) = a.split_at(mid);
            Some((RawData::Single(a0), RawData::new(a1, b)))
        } else {
            let (b0, b1) = b.split_at_checked(mid - a.len())?;
            Some((RawData::new(a, b0), RawData::Single(b1)))
        }
    }

    /// `len` bytes from `start`, or `None` if they are not all there.
    pub fn slice(&self, start: usize, len: usize) -> Option<Self> {
        let (_, tail) = self.split_at(start)?;
        let (mid, _) = tail.split_at(len)?;
        Some(mid)
    }

    /// The bytes as one slice, if they are not split.
    #[inline]
    pub fn as_single(&self) -> Option<&'a [u8]> {
        match *self {
            RawData::Single(a) => Some(a),
            RawData::Split(..) => None,
        }
    }

    /// The non-empty pieces, in order.
    pub fn chunks(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let (a, b) = self.pieces();
        [a, b].into_iter().filter(|c| !c.is_empty())
    }

    /// The bytes copied into one vector, pieces joined.
    pub fn to_vec(&self) -> Vec<u8> {
        let (a, b) = self.pieces();
        let mut v = Vec::with_capacity(a.len() + b.len());
        v.extend_from_slice(a);
        v.extend_from_slice(b);
        v
    }

    /// Copies the first `min(len, dst.len())` bytes into `dst`; returns how many.
    pub fn copy_to(&self, dst: &mut [u8]) -> usize {
        let (a, b) = self.pieces();
        let n = self.len().min(dst.len());
        let na = a.len().min(n);
        dst[..na].copy_from_slice(&a[..na]);
        dst[na..n].copy_from_slice(&b[..n - na]);
        n
    }

    /// Index of the first `byte`, if any (the end of a C string).
    pub fn position(&self, byte: u8) -> Option<usize> {
        let (a, b) = self.pieces();
        match a.iter().position(|&x| x == byte) {
            Some(i) => Some(i),
            None => b.iter().position(|&x| x == byte).map(|i| i + a.len()),
        }
    }

    /// The bytes before the first NUL (all of them if there is none).
    pub fn until_nul(&self) -> Self {
        match self.position(0) {
            Some(i) => self.split_at(i).map_or(*self, |(s, _)| s),
            None => *self,
        }
    }

    /// Writes the bytes into `sink`.
    pub fn write_to<S: ByteSink + ?Sized>(&self, sink: &mut S) {
        let (a, b) = self.pieces();
        sink.put(a);
        if !b.is_empty() {
            sink.put(b);
        }
    }
}

impl PartialEq for RawData<'_> {
    /// Equal when the bytes are equal, wherever the split falls.
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        let (a, b) = self.pieces();
        let (c, d) = other.pieces();
        if a.len() == c.len() {
            return a == c && b == d;
        }
        // Compare piecewise without allocating.
        let (mut x, mut y) = (RawReaderPieces::new(a, b), RawReaderPieces::new(c, d));
        loop {
            match (x.next_run(), y.next_run()) {
                (Some(p), Some(q)) => {
                    let n = p.len().min(q.len());
                    if p[..n] != q[..n] {
                        return false;
                    }
                    x.consume(n);
                    y.consume(n);
                }
                (None, None) => return true,
                _ => return false,
            }
        }
    }
}

impl Eq for RawData<'_> {}

impl PartialEq<[u8]> for RawData<'_> {
    fn eq(&self, other: &[u8]) -> bool {
        *self == RawData::Single(other)
    }
}

impl fmt::Debug for RawData<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 32;
        let (a, b) = self.pieces();
        let head: Vec<u8> = a.iter().chain(b).take(SHOWN).copied().collect();
        write!(f, "RawData[{}]{:02x?}", self.len(), head)?;
        if self.len() > SHOWN {
            f.write_str("..")?;
        }
        Ok(())
    }
}

impl<'a> From<&'a [u8]> for RawData<'a> {
    fn from(s: &'a [u8]) -> Self {
        RawData::Single(s)
    }
}

/// Two pieces consumed front to back (equality helper).
struct RawReaderPieces<'a> {
    cur: &'a [u8],
    next: &'a [u8],
}

impl<'a> RawReaderPieces<'a> {
    fn new(a: &'a [u8], b: &'a [u8]) -> Self {
        Self { cur: a, next: b }
    }
    fn next_run(&mut self) -> Option<&'a [u8]> {
        if self.cur.is_empty() {
            self.cur = core::mem::take(&mut self.next);
        }
        (!self.cur.is_empty()).then_some(self.cur)
    }
    fn consume(&mut self, n: usize) {
        self.cur = &self.cur[n..];
    }
}

/// A bounds-checked cursor over [`RawData`] in a given byte order.
///
/// Every read names the field it reads (`what`), for the error message.
#[derive(Clone, Copy, Debug)]
pub struct RawReader<'a> {
    cur: &'a [u8],
    next: &'a [u8],
    total: usize,
    endian: Endianness,
}

impl<'a> RawReader<'a> {
    #[inline]
    /// A reader at the start of `data`, decoding numbers in `endian`.
    pub fn new(data: RawData<'a>, endian: Endianness) -> Self {
        let (cur, next) = data.pieces();
        Self {
            cur,
            next,
            total: cur.len() + next.len(),
            endian,
        }
    }

    #[inline]
    /// The byte order numbers are decoded in.
    pub fn endian(&self) -> Endianness {
        self.endian
    }

    /// Bytes not yet read.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.cur.len() + self.next.len()
    }

    /// Bytes read so far (the offset of the next read).
    #[inline]
    pub fn offset(&self) -> usize {
        self.total - self.remaining()
    }

    /// The bytes not yet read, without consuming them.
    #[inline]
    pub fn rest(&self) -> RawData<'a> {
        RawData::new(self.cur, self.next)
    }

    fn short(&self, what: &'static str, need: usize) -> ParseError {
        ParseError::truncated(what, self.offset(), need, self.remaining())
    }

    #[inline]
    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ParseError> {
        if let Some((a, rest)) = self.cur.split_first_chunk::<N>() {
            self.cur = rest;
            return Ok(*a);
        }
        self.array_across(what)
    }

    /// The read that crosses from the first piece into the second.
    #[cold]
    fn array_across<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ParseError> {
        if self.remaining() < N {
            return Err(self.short(what, N));
        }
        let mut out = [0u8; N];
        let k = self.cur.len();
        out[..k].copy_from_slice(self.cur);
        out[k..].copy_from_slice(&self.next[..N - k]);
        self.cur = &self.next[N - k..];
        self.next = &[];
        Ok(out)
    }

    #[inline]
    /// Reads a `u8`; `what` names the field in an error.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, ParseError> {
        Ok(self.array::<1>(what)?[0])
    }
    #[inline]
    /// Reads a `u16`; `what` names the field in an error.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, ParseError> {
        Ok(self.endian.u16(self.array(what)?))
    }
    #[inline]
    /// Reads a `u32`; `what` names the field in an error.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, ParseError> {
        Ok(self.endian.u32(self.array(what)?))
    }
    #[inline]
    /// Reads an `i32`; `what` names the field in an error.
    pub fn i32(&mut self, what: &'static str) -> Result<i32, ParseError> {
        Ok(self.u32(what)? as i32)
    }
    #[inline]
    /// Reads a `u64`; `what` names the field in an error.
    pub fn u64(&mut self, what: &'static str) -> Result<u64, ParseError> {
        Ok(self.endian.u64(self.array(what)?))
    }
    /// `N` bytes as an array (tags, build ids).
    #[inline]
    pub fn byte_array<const N: usize>(
        &mut self,
        what: &'static str,
    ) -> Result<[u8; N], ParseError> {
        self.array(what)
    }

    /// The next `n` bytes, borrowed.
    #[inline]
    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<RawData<'a>, ParseError> {
        if let Some((a, rest)) = self.cur.split_at_checked(n) {
            self.cur = rest;
            return Ok(RawData::Single(a));
        }
        if self.remaining() < n {
            return Err(self.short(what, n));
        }
        let first = self.cur;
        let (second, rest) = self.next.split_at(n - first.len());
        self.cur = rest;
        self.next = &[];
        Ok(RawData::new(first, second))
    }

    /// Skips `n` bytes.
    #[inline]
    pub fn skip(&mut self, n: usize, what: &'static str) -> Result<(), ParseError> {
        self.bytes(n, what).map(|_| ())
    }

    /// `n` items of `size` bytes each, borrowed; the length is checked before
    /// it is multiplied, so a corrupt count cannot overflow.
    #[inline]
    pub fn items(
        &mut self,
        n: u64,
        size: usize,
        what: &'static str,
    ) -> Result<RawData<'a>, ParseError> {
        let bytes = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(size))
            .filter(|&b| b <= self.remaining());
        match bytes {
            Some(b) => self.bytes(b, what),
            None => Err(ParseError::invalid(
                what,
                self.offset(),
                n,
                "count exceeds the bytes left in the record",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_splits(v: &[u8]) -> impl Iterator<Item = RawData<'_>> {
        (0..=v.len()).map(move |k| RawData::new(&v[..k], &v[k..]))
    }

    #[test]
    fn split_data_reads_like_the_joined_bytes() {
        let v: Vec<u8> = (1..=23).collect();
        for d in all_splits(&v) {
            assert_eq!(d.len(), 23);
            assert_eq!(d.to_vec(), v);
            assert_eq!(d, RawData::Single(&v));
            assert_eq!((d.get(0), d.get(22), d.get(23)), (Some(1), Some(23), None));
            for mid in 0..=23 {
                let (l, r) = d.split_at(mid).unwrap();
                assert_eq!(
                    (l.to_vec(), r.to_vec()),
                    (v[..mid].to_vec(), v[mid..].to_vec())
                );
            }
            assert!(d.split_at(24).is_none());
            assert_eq!(d.slice(5, 10).unwrap().to_vec(), v[5..15].to_vec());
            assert!(d.slice(20, 4).is_none());
            let mut buf = [0u8; 30];
            assert_eq!(d.copy_to(&mut buf), 23);
            assert_eq!(&buf[..23], &v[..]);
            assert_eq!(d.chunks().map(<[u8]>::len).sum::<usize>(), 23);
            assert!(d.chunks().all(|c| !c.is_empty()));
            assert_eq!(d.position(7), Some(6));

            let mut r = RawReader::new(d, Endianness::Little);
            assert_eq!(r.u8("a").unwrap(), 1);
            assert_eq!(r.u16("b").unwrap(), u16::from_le_bytes([2, 3]));
            assert_eq!(r.u32("c").unwrap(), u32::from_le_bytes([4, 5, 6, 7]));
            assert_eq!(
                r.u64("d").unwrap(),
                u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15])
            );
            assert_eq!(r.bytes(3, "e").unwrap().to_vec(), [16, 17, 18]);
            assert_eq!(r.offset(), 18);
            let err = r.u64("f").unwrap_err();
            assert_eq!(err.offset, 18);
            assert_eq!(
                err.kind,
                crate::error::ParseErrorKind::Truncated { need: 8, have: 5 }
            );
            // A failed read consumes nothing.
            assert_eq!(r.remaining(), 5);
            r.skip(1, "g").unwrap();
            assert_eq!(r.u32("h").unwrap(), u32::from_le_bytes([20, 21, 22, 23]));
            assert_eq!(r.remaining(), 0);
        }
    }

    #[test]
    fn big_endian_reads() {
        let v = [
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0xff, 0xff, 0xff, 0xfe,
        ];
        for d in all_splits(&v) {
            let mut r = RawReader::new(d, Endianness::Big);
            assert_eq!(r.u64("x").unwrap(), 0x0102_0304_0506_0708);
            assert_eq!(r.i32("y").unwrap(), -2);
        }
    }

    #[test]
    fn item_counts_are_checked_before_multiplying() {
        let v = [0u8; 16];
        let mut r = RawReader::new(RawData::Single(&v), Endianness::Little);
        assert!(r.items(u64::MAX, 8, "ips").is_err());
        assert!(r.items(3, 8, "ips").is_err());
        assert_eq!(r.items(2, 8, "ips").unwrap().len(), 16);
    }

    #[test]
    fn equality_ignores_where_the_split_falls() {
        let v = [1u8, 2, 3, 4];
        let w = [1u8, 2, 3, 5];
        assert_eq!(
            RawData::new(&v[..1], &v[1..]),
            RawData::new(&v[..3], &v[3..])
        );
        assert_ne!(
            RawData::new(&v[..1], &v[1..]),
            RawData::new(&w[..3], &w[3..])
        );
        assert_ne!(RawData::Single(&v[..3]), RawData::Single(&v));
        assert_eq!(RawData::new(&v[..2], &[]).as_single(), Some(&v[..2]));
        assert_eq!(RawData::new(&[], &v).as_single(), Some(&v[..]));
        assert_eq!(RawData::new(b"ab\0cd", b"").until_nul().to_vec(), b"ab");
    }
}
