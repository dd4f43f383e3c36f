//! Arrays of fixed-size items inside a record (callchain ips, branch
//! entries, registers, namespace links, group read values).
//!
//! A parsed array borrows the record's bytes and decodes an item when asked;
//! a record built for writing borrows a slice of decoded items. Both compare
//! equal when their items are equal.

use core::fmt;

use crate::endian::Endianness;
use crate::error::ParseError;
use crate::raw::{RawData, RawReader};
use crate::sink::ByteSink;

/// An item of a fixed size (given its context) in a record array.
pub trait ArrayItem: Copy + PartialEq + fmt::Debug {
    /// What the layout of one item depends on (e.g. read_format for group
    /// read values); `()` for most.
    type Ctx: Copy + PartialEq + fmt::Debug + Default;
    /// Bytes per item.
    fn size(ctx: Self::Ctx) -> usize;
    /// Decodes one item.
    fn read(r: &mut RawReader<'_>, ctx: Self::Ctx) -> Result<Self, ParseError>;
    /// Encodes one item.
    fn write<S: ByteSink + ?Sized>(&self, ctx: Self::Ctx, endian: Endianness, sink: &mut S);
}

impl ArrayItem for u64 {
    type Ctx = ();
    #[inline]
    fn size(_: ()) -> usize {
        8
    }
    #[inline]
    fn read(r: &mut RawReader<'_>, _: ()) -> Result<Self, ParseError> {
        r.u64("u64 item")
    }
    #[inline]
    fn write<S: ByteSink + ?Sized>(&self, _: (), endian: Endianness, sink: &mut S) {
        sink.put(&endian.u64_bytes(*self));
    }
}

/// An array of `T` in a record: borrowed bytes, or borrowed items.
#[derive(Clone, Copy)]
pub enum Array<'a, T: ArrayItem> {
    /// As parsed: `data.len()` is a multiple of `T::size(ctx)`.
    Raw {
        /// The items' bytes, in the producer's byte order.
        data: RawData<'a>,
        /// The producer's byte order.
        endian: Endianness,
        /// What sizes and decodes an item (e.g. the read_format bits of a group).
        ctx: T::Ctx,
    },
    /// As built by a producer.
    Items(&'a [T]),
}

impl<T: ArrayItem> Default for Array<'_, T> {
    fn default() -> Self {
        Array::Items(&[])
    }
}

impl<'a, T: ArrayItem> Array<'a, T> {
    /// Reads `n` items from `r`.
    #[inline]
    pub fn parse(
        r: &mut RawReader<'a>,
        n: u64,
        ctx: T::Ctx,
        what: &'static str,
    ) -> Result<Self, ParseError> {
        let endian = r.endian();
        let data = r.items(n, T::size(ctx), what)?;
        Ok(Array::Raw { data, endian, ctx })
    }

    #[inline]
    /// The number of items.
    pub fn len(&self) -> usize {
        match self {
            Array::Raw { data, ctx, .. } => data.len() / T::size(*ctx).max(1),
            Array::Items(s) => s.len(),
        }
    }

    #[inline]
    /// Whether there are no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The item at `i`.
    pub fn get(&self, i: usize) -> Option<T> {
        match *self {
            Array::Raw { data, endian, ctx } => {
                let size = T::size(ctx);
                let item = data.slice(i.checked_mul(size)?, size)?;
                T::read(&mut RawReader::new(item, endian), ctx).ok()
            }
            Array::Items(s) => s.get(i).copied(),
        }
    }

    /// The items in order.
    pub fn iter(&self) -> ArrayIter<'a, T> {
        match *self {
            Array::Raw { data, endian, ctx } => ArrayIter::Raw {
                r: RawReader::new(data, endian),
                ctx,
            },
            Array::Items(s) => ArrayIter::Items(s.iter()),
        }
    }

    /// Bytes the array occupies when written with `ctx`.
    #[inline]
    pub fn encoded_len(&self, ctx: T::Ctx) -> usize {
        self.len() * T::size(ctx)
    }

    /// Writes the items with layout `ctx` in byte order `endian`; bytes that
    /// already have that layout are copied as they are.
    pub fn write<S: ByteSink + ?Sized>(&self, ctx: T::Ctx, endian: Endianness, sink: &mut S) {
        match *self {
            Array::Raw {
                data,
                endian: e,
                ctx: c,
            } if e == endian && c == ctx => data.write_to(sink),
            _ => {
                for item in self.iter() {
                    item.write(ctx, endian, sink);
                }
            }
        }
    }
}

impl<T: ArrayItem> PartialEq for Array<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<T: ArrayItem> fmt::Debug for Array<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Iterator over an [`Array`].
pub enum ArrayIter<'a, T: ArrayItem> {
    /// Decoding items from bytes as it goes.
    Raw {
        /// The cursor over the items' bytes.
        r: RawReader<'a>,
        /// What sizes and decodes an item.
        ctx: T::Ctx,
    },
    /// Copying borrowed items.
    Items(core::slice::Iter<'a, T>),
}

impl<T: ArrayItem> Iterator for ArrayIter<'_, T> {
    type Item = T;
    #[inline]
    fn next(&mut self) -> Option<T> {
        match self {
            ArrayIter::Raw { r, ctx } => {
                if r.remaining() < T::size(*ctx) || T::size(*ctx) == 0 {
                    return None;
                }
                T::read(r, *ctx).ok()
            }
            ArrayIter::Items(it) => it.next().copied(),
        }
    }
}
