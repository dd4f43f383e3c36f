//! Where a snapshot's trace takes up from the one before it. A snapshot (`perf record -S`) of
//! an AUX area in overwrite mode is the last N bytes the processor wrote: two snapshots close
//! in time hold some of the same bytes, and a decode of both must show those once (perf's
//! `intel_pt_find_overlap`). The bytes are compared, not the AUXTRACE records' offsets: those
//! are positions in a ring that wraps.
//!
//! The later buffer's first PSB is looked for in the earlier at the earlier's PSBs: where the
//! earlier buffer's rest, from such a PSB, is the later buffer's bytes from its first PSB,
//! the later one goes on from where the earlier ended.

use crate::decode::next_psb;

/// How a buffer relates to the one before it of the same trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// The bytes from this offset of the later buffer continue the earlier one (the offset
    /// may be its length: nothing new).
    ContinuesAt(usize),
    /// No bytes shared: trace was lost between them (or the later one has no PSB).
    Disjoint,
}

/// The least bytes two buffers must share to be taken as overlapping: more than a PSB, so
/// that its header's TSC and FUP say they are the same place.
const MIN_SHARED: usize = 32;

/// How `later` continues `earlier`.
pub fn find_overlap(earlier: &[u8], later: &[u8]) -> Overlap {
    let Some(q) = next_psb(later, 0) else {
        return Overlap::Disjoint;
    };
    let rest = &later[q..];
    let mut from = 0;
    while let Some(s) = next_psb(earlier, from) {
        let tail = &earlier[s..];
        let n = tail.len().min(rest.len());
        // The earlier buffer's end is inside the later one. A later buffer that ends inside
        // the earlier is no later snapshot of the same area (perf: "cannot end within"):
        // bytes that repeat, not the same place.
        if n >= MIN_SHARED && tail.len() <= rest.len() && tail[..n] == rest[..n] {
            return Overlap::ContinuesAt(q + tail.len());
        }
        from = s + 1;
    }
    Overlap::Disjoint
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of PSB+ sections, each with a distinct TSC, like a trace's.
    fn stream(sections: usize) -> Vec<u8> {
        let mut v = Vec::new();
        for i in 0..sections {
            v.extend_from_slice(&[0x02, 0x82].repeat(8));
            v.push(0x19);
            v.extend_from_slice(&(1_000_000 + i as u64 * 977).to_le_bytes()[..7]);
            v.extend_from_slice(&[0x02, 0x23]);
            // Some TNTs.
            v.extend((0..40).map(|k| (((i + k) as u8) << 2) | 0x04));
        }
        v
    }

    #[test]
    fn a_later_window_continues_after_the_shared_bytes() {
        let all = stream(10);
        // Windows of the ring at two times: [100, 400) and [250, 600).
        let (a, b) = (&all[100..400], &all[250..600]);
        match find_overlap(a, b) {
            Overlap::ContinuesAt(k) => assert_eq!(&b[k..], &all[400..600]),
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn windows_with_nothing_shared_are_disjoint() {
        let all = stream(20);
        assert_eq!(
            find_overlap(&all[0..300], &all[500..900]),
            Overlap::Disjoint
        );
    }

    /// A later buffer cannot end inside the earlier: its bytes are taken as another place's.
    #[test]
    fn a_window_inside_the_earlier_one_is_not_its_continuation() {
        let all = stream(10);
        let (a, b) = (&all[0..600], &all[100..300]);
        assert_eq!(find_overlap(a, b), Overlap::Disjoint);
    }

    #[test]
    fn the_same_window_twice_adds_nothing() {
        let all = stream(10);
        let a = &all[50..500];
        assert_eq!(find_overlap(a, a), Overlap::ContinuesAt(a.len()));
    }
}
