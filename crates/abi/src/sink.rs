//! Where encoded records go.
//!
//! A record is written straight into its destination: a `Vec<u8>` for
//! perf.data, or a ring's output handle (perfaux-ring implements this trait
//! for it) so that the kernel-side path never allocates.

/// A destination for encoded bytes, written front to back.
pub trait ByteSink {
    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]);

    /// Appends `n` zero bytes (padding, `perf_output_skip` of fresh space).
    fn put_zeros(&mut self, n: usize) {
        const ZEROS: [u8; 64] = [0; 64];
        let mut left = n;
        while left > 0 {
            let k = left.min(ZEROS.len());
            self.put(&ZEROS[..k]);
            left -= k;
        }
    }
}

impl ByteSink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    #[inline]
    fn put_zeros(&mut self, n: usize) {
        self.resize(self.len() + n, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::ByteSink;

    #[test]
    fn zeros_longer_than_the_scratch_block_are_all_written() {
        struct Count(usize, bool);
        impl ByteSink for Count {
            fn put(&mut self, b: &[u8]) {
                self.0 += b.len();
                self.1 &= b.iter().all(|&x| x == 0);
            }
        }
        let mut c = Count(0, true);
        c.put_zeros(200);
        assert_eq!((c.0, c.1), (200, true));
        let mut v = vec![1u8];
        v.put_zeros(3);
        assert_eq!(v, [1, 0, 0, 0]);
    }
}
