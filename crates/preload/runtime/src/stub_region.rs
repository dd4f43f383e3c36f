//! Memory for patched functions' stubs, within a `jmp rel32`'s reach (±2 GiB) of the code they
//! serve: mapped read-write at a free address near the object (`MAP_FIXED_NOREPLACE` tried at
//! steps outward from it), filled, then made read-execute (never writable and executable at
//! once).

/// Step between the addresses tried.
const STEP: usize = 1 << 20;
/// How far from the object a region may start or end (a margin under 2 GiB).
const REACH: usize = (1 << 31) - (16 << 20);

/// A mapping near an object, writable until [`StubRegion::seal`].
pub(crate) struct StubRegion {
    base: *mut u8,
    len: usize,
}

impl StubRegion {
    /// `len` bytes within reach of every address in `[lo, hi)`, or `None` if no free address
    /// is found there (or the object spans more than the reach).
    pub(crate) fn near(lo: usize, hi: usize, len: usize) -> Option<StubRegion> {
        let len = len.next_multiple_of(4096);
        let above = (hi.next_multiple_of(STEP)..)
            .step_by(STEP)
            .take_while(move |&a| a + len - lo <= REACH);
        let below = (1..)
            .map(move |k| lo.saturating_sub(len + k * STEP) & !(STEP - 1))
            .take_while(move |&a| a > 0 && hi - a <= REACH);
        above
            .chain(below)
            .take(4096)
            .find_map(|addr| Self::map_at(addr, len))
    }

    fn map_at(addr: usize, len: usize) -> Option<StubRegion> {
        // SAFETY: a new private anonymous mapping at an address the kernel checks is free
        // (MAP_FIXED_NOREPLACE never replaces a mapping).
        let p = unsafe {
            libc::mmap(
                addr as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        if p as usize != addr {
            // A kernel older than 4.17 takes the flag as a hint.
            // SAFETY: the mapping just made, used by nothing.
            unsafe { libc::munmap(p, len) };
            return None;
        }
        Some(StubRegion {
            base: p.cast(),
            len,
        })
    }

    pub(crate) fn base(&self) -> usize {
        self.base as usize
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Writes `bytes` at `offset` (within the region; before [`StubRegion::seal`]).
    pub(crate) fn write(&mut self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.len, "stub past its region");
        let dst = self.base.wrapping_add(offset);
        // SAFETY: in bounds (checked), and the region is a writable mapping of our own that
        // nothing executes yet.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
    }

    /// Makes the region read-execute; the region stays mapped for the process's life (the
    /// patched entries jump here).
    pub(crate) fn seal(self) -> bool {
        // SAFETY: the region is our own mapping of `len` bytes.
        let ok = unsafe {
            libc::mprotect(
                self.base.cast(),
                self.len,
                libc::PROT_READ | libc::PROT_EXEC,
            )
        } == 0;
        if !ok {
            // SAFETY: as above; nothing jumps here yet (the entries are written after this).
            unsafe { libc::munmap(self.base.cast(), self.len) };
        }
        std::mem::forget(self);
        ok
    }
}

impl Drop for StubRegion {
    /// A region given up before it was sealed (nothing jumps into it).
    fn drop(&mut self) {
        // SAFETY: our own mapping, which no patched entry reaches yet.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
