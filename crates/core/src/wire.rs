//! Native-endian puts for the records the core writes into its own rings.
//!
//! Record *layouts* (which field comes where) follow perfaux-abi's
//! definitions and UPSTREAM.md section 2; this module only spares the
//! writers from spelling `to_ne_bytes` at every field. A ring the core
//! writes is always native-endian, as a kernel ring is.

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
