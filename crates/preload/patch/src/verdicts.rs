//! The recorder's plan of the executable, handed to the runtime: which functions passed the
//! whole-function scan (their link-time address and size) and how many were refused, for the
//! file identified by its device, inode, size and modification time. The runtime then decodes
//! only each function's first instructions instead of every instruction of every function,
//! which is what patching at load costs otherwise (ten times more in a large program).
//!
//! The bytes come from a sealed memfd the recorder wrote, but are checked as any input is:
//! the magic, the count against the length, the identity against the file the runtime loaded;
//! anything else is no plan, and the runtime plans the object itself.

/// The plan of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdicts {
    /// The file's `st_dev`, `st_ino`, `st_size` and `st_mtime` in ns.
    pub identity: [u64; 4],
    /// Functions the rules named that were refused.
    pub refused: u64,
    /// Functions to patch: link-time address and size, ascending.
    pub patch: Vec<(u64, u64)>,
}

/// A file's identity as a plan records it: device, inode, size, modification time (ns).
pub fn identity(meta: &std::fs::Metadata) -> [u64; 4] {
    use std::os::unix::fs::MetadataExt;
    let mtime = (meta.mtime() as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(meta.mtime_nsec() as u64);
    [meta.dev(), meta.ino(), meta.size(), mtime]
}

const MAGIC: u64 = u64::from_le_bytes(*b"PXPLAN01");
const HEADER_WORDS: usize = 7;

impl Verdicts {
    /// The bytes: magic, identity, refused, count, then (address, size) pairs, little-endian.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut words = vec![MAGIC];
        words.extend_from_slice(&self.identity);
        words.push(self.refused);
        words.push(self.patch.len() as u64);
        for &(a, s) in &self.patch {
            words.extend_from_slice(&[a, s]);
        }
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// The plan in `bytes`, if they hold one whole.
    pub fn from_bytes(bytes: &[u8]) -> Option<Verdicts> {
        let word = |i: usize| -> Option<u64> {
            let b = bytes.get(i * 8..i * 8 + 8)?;
            Some(u64::from_le_bytes(b.try_into().ok()?))
        };
        if word(0)? != MAGIC {
            return None;
        }
        let count = usize::try_from(word(6)?).ok()?;
        let words = count.checked_mul(2)?.checked_add(HEADER_WORDS)?;
        if bytes.len() != words.checked_mul(8)? {
            return None;
        }
        let patch: Vec<(u64, u64)> = (0..count)
            .map(|k| Some((word(HEADER_WORDS + 2 * k)?, word(HEADER_WORDS + 2 * k + 1)?)))
            .collect::<Option<_>>()?;
        if !patch.windows(2).all(|w| w[0].0 < w[1].0) {
            return None;
        }
        Some(Verdicts {
            identity: [word(1)?, word(2)?, word(3)?, word(4)?],
            refused: word(5)?,
            patch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Verdicts {
        Verdicts {
            identity: [1, 2, 3, 4],
            refused: 5,
            patch: vec![(0x1000, 20), (0x1040, 8)],
        }
    }

    #[test]
    fn a_plan_reads_back_as_written() {
        assert_eq!(Verdicts::from_bytes(&sample().to_bytes()), Some(sample()));
    }

    #[test]
    fn damaged_bytes_are_no_plan() {
        let b = sample().to_bytes();
        assert_eq!(Verdicts::from_bytes(&b[..b.len() - 1]), None, "short");
        let mut more = b.clone();
        more.extend_from_slice(&[0; 8]);
        assert_eq!(Verdicts::from_bytes(&more), None, "long");
        let mut magic = b.clone();
        magic[0] ^= 1;
        assert_eq!(Verdicts::from_bytes(&magic), None, "magic");
        let mut count = b.clone();
        count[48..56].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(Verdicts::from_bytes(&count), None, "a count past the bytes");
        let mut order = sample();
        order.patch.reverse();
        assert_eq!(Verdicts::from_bytes(&order.to_bytes()), None, "unsorted");
    }
}
