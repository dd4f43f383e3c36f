//! Native-endian puts for the records the core writes into its own rings.
//!
//! Record *layouts* (which field comes where) follow perfaux-abi's
//! definitions (include/uapi/linux/perf_event.h); this module only spares the
//! writers from spelling `to_ne_bytes` at every field. A ring the core
//! writes is always native-endian, as a kernel ring is.
//!
//! It also holds the two small stack sinks of the record path: one for a
//! trailer built before its reservation, one that gathers a record's small
//! fields into a single ring copy. Both are a few lines over a fixed
//! array, safe in a signal handler (no allocation), which no workspace
//! crate offers in this shape.

use perfaux_abi::{ByteSink, PerfEventHeader};

/// `perf_output_put` of the scalar types.
pub(crate) trait SinkExt: ByteSink {
    #[inline]
    fn put_u64(&mut self, v: u64) {
        self.put(&v.to_ne_bytes());
    }
    #[inline]
    fn put_u32(&mut self, v: u32) {
        self.put(&v.to_ne_bytes());
    }
    #[inline]
    fn put_header(&mut self, h: PerfEventHeader) {
        self.put_u64(h.to_native_u64());
    }
}

impl<S: ByteSink + ?Sized> SinkExt for S {}

/// A `ByteSink` over a fixed stack buffer, for records built before their
/// reservation (the LOST trailer) without allocating.
pub(crate) struct StackSink<const N: usize> {
    pub(crate) buf: [u8; N],
    pub(crate) len: usize,
}

impl<const N: usize> StackSink<N> {
    pub(crate) fn new() -> Self {
        Self {
            buf: [0; N],
            len: 0,
        }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl<const N: usize> ByteSink for StackSink<N> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(N - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }
}

/// Gathers a record's small fields on the stack and hands them to `inner`
/// in one `put`: a ring's `put` handles the wrap and the reservation for
/// every call, which for a record of eight-byte fields costs more than the
/// bytes. A put of `N` bytes or more (a payload, the AUX data of a sample)
/// goes straight through after what was gathered, so it is copied once.
/// [`BatchSink::flush`] must be called before the record ends.
pub(crate) struct BatchSink<'a, S: ByteSink + ?Sized, const N: usize> {
    inner: &'a mut S,
    buf: [std::mem::MaybeUninit<u8>; N],
    len: usize,
}

impl<'a, S: ByteSink + ?Sized, const N: usize> BatchSink<'a, S, N> {
    #[inline]
    pub(crate) fn new(inner: &'a mut S) -> Self {
        Self {
            inner,
            buf: [std::mem::MaybeUninit::uninit(); N],
            len: 0,
        }
    }

    /// The sink the bytes go to.
    #[inline]
    pub(crate) fn inner(&self) -> &S {
        self.inner
    }

    /// Hands what was gathered to the inner sink.
    #[inline]
    pub(crate) fn flush(&mut self) {
        if self.len != 0 {
            // SAFETY: the first `len` bytes of `buf` were written by `put`.
            let bytes =
                unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<u8>(), self.len) };
            self.inner.put(bytes);
            self.len = 0;
        }
    }
}

impl<S: ByteSink + ?Sized, const N: usize> ByteSink for BatchSink<'_, S, N> {
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        if bytes.len() <= N - self.len {
            let dst = &mut self.buf[self.len..self.len + bytes.len()];
            // SAFETY: `dst` and `bytes` have the same length and do not
            // overlap (one is this sink's own buffer); MaybeUninit<u8> has
            // u8's layout.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    dst.as_mut_ptr().cast::<u8>(),
                    bytes.len(),
                )
            };
            self.len += bytes.len();
            return;
        }
        self.flush();
        if bytes.len() >= N {
            self.inner.put(bytes);
        } else {
            self.put(bytes);
        }
    }
}
