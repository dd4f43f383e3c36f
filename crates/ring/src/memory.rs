//! [`RingMemory`]: the bytes of one perf buffer, from one of three backings.
//!
//! - **heap**: a page-aligned, zeroed allocation holding the user page, the
//!   data area and the AUX area back to back (producer and consumer in one
//!   process);
//! - **shared**: a sealed memfd mapped `MAP_SHARED`; the writer creates it
//!   and writes the layout into the user page, a reader in another process
//!   maps the same fd and checks that layout against the file before it
//!   trusts it. The writer seals the file's size (`F_SEAL_SHRINK |
//!   F_SEAL_GROW`) and the reader insists on that, so a hostile writer cannot
//!   truncate the file under the reader's mapping (which would raise SIGBUS);
//! - **kernel**: the mmap of a `perf_event_open` fd (consumer only): `1 +
//!   2^n` pages, then, for AUX, `aux_offset`/`aux_size` written into the user
//!   page and a second mapping at `aux_offset`, read-only for overwrite mode.
//!
//! Every access to the bytes goes through the ring protocol: the control
//! words of the user page through atomics ([`RingMemory::user_word`]), the
//! areas through raw copies at positions the protocol hands out. No Rust
//! reference to the shared bytes is ever formed, because another process
//! may write them at any time.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;

use memmap2::{MmapOptions, MmapRaw};
use perfaux_abi::mmap_page::offsets;

use crate::error::RingError;
use crate::layout::RingLayout;
use crate::sync::AtomicU64;

/// The memory of one perf buffer. Shared between the producer
/// ([`crate::PerfBuffer`]) and the consumer ([`crate::PerfMmap`]) of one
/// process through an `Arc`.
pub struct RingMemory {
    layout: RingLayout,
    /// The user page; the data area follows at `data_offset`.
    user: NonNull<u8>,
    /// The AUX area, if mapped.
    aux: Option<NonNull<u8>>,
    data_writable: bool,
    aux_writable: bool,
    backing: Backing,
}

enum Backing {
    Heap(std::alloc::Layout),
    Shared {
        /// The creator's memfd, to hand over; a reader's is closed once mapped (a traced
        /// process with a thousand threads would hold two descriptors a thread against its
        /// RLIMIT_NOFILE, for nothing: the mapping keeps the file).
        fd: Option<OwnedFd>,
        _map: MmapRaw,
    },
    Kernel {
        _data: MmapRaw,
        _aux: Option<MmapRaw>,
    },
}

// SAFETY: RingMemory owns its allocation or mappings; the raw pointers are
// only dereferenced through atomics (user page words) or through copies at
// positions the ring protocol (crate::protocol) hands to one writer at a
// time, which is what makes sharing the bytes between threads sound.
unsafe impl Send for RingMemory {}
// SAFETY: see Send: no method hands out a Rust reference to the bytes
// except the `&AtomicU64` control words, which are Sync.
unsafe impl Sync for RingMemory {}

/// How the AUX area of a kernel perf mmap is mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelAux {
    /// `2^m` pages.
    pub pages: usize,
    /// `PROT_WRITE`: without it the kernel runs the AUX area in overwrite
    /// mode (`rb_alloc_aux` without `RING_BUFFER_WRITABLE`).
    pub writable: bool,
}

impl RingMemory {
    /// A zeroed, page-aligned heap allocation for `layout`, with the layout
    /// written into the user page as the kernel writes it.
    pub fn heap(layout: RingLayout) -> Result<Self, RingError> {
        layout.validate()?;
        let alloc = std::alloc::Layout::from_size_align(layout.total_len(), layout.page_size)
            .map_err(|_| RingError::Layout {
                what: "total length",
                value: layout.total_len() as u64,
            })?;
        // SAFETY: the size is at least one page (validate() requires
        // page_size >= 4096), so the layout is not zero-sized.
        let ptr = unsafe { std::alloc::alloc_zeroed(alloc) };
        let user = NonNull::new(ptr).ok_or(RingError::Os {
            what: "heap ring allocation",
            errno: perfaux_abi::errno::ENOMEM,
        })?;
        let mem = RingMemory {
            layout,
            user,
            aux: (layout.aux_size != 0)
                // SAFETY: aux_offset + aux_size == total_len, inside the allocation.
                .then(|| unsafe { user.add(layout.aux_offset) }),
            data_writable: true,
            aux_writable: true,
            backing: Backing::Heap(alloc),
        };
        mem.write_layout_fields();
        Ok(mem)
    }

    /// A new sealed memfd holding `layout`, mapped shared, with the layout
    /// written into its user page. Hand [`RingMemory::shared_fd`] to the
    /// reader process, which calls [`RingMemory::open_shared`].
    pub fn shared(layout: RingLayout) -> Result<Self, RingError> {
        layout.validate()?;
        Self::shared_in(Self::memfd()?, layout)
    }

    /// An empty memfd that [`RingMemory::shared_in`] makes a ring of later (close-on-exec,
    /// sealable): a descriptor to hand a reader process before the ring is wanted, which
    /// costs its creator no pages and no mapping until then.
    pub fn memfd() -> Result<OwnedFd, RingError> {
        use rustix::fs::MemfdFlags;
        rustix::fs::memfd_create(
            "perfaux-ring",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )
        .map_err(|e| RingError::os("memfd_create", e))
    }

    /// [`RingMemory::shared`] in `fd`, a memfd from [`RingMemory::memfd`]: emptied (a reader
    /// that held it may have written into it), sized, sealed, mapped and its layout written.
    pub fn shared_in(fd: OwnedFd, layout: RingLayout) -> Result<Self, RingError> {
        use rustix::fs::SealFlags;
        layout.validate()?;
        rustix::fs::ftruncate(&fd, 0)
            .map_err(|e| RingError::os("ftruncate of the ring memfd", e))?;
        rustix::fs::ftruncate(&fd, layout.total_len() as u64)
            .map_err(|e| RingError::os("ftruncate of the ring memfd", e))?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
            .map_err(|e| RingError::os("sealing the ring memfd", e))?;
        let map = MmapOptions::new()
            .len(layout.total_len())
            .map_raw(&fd)
            .map_err(|e| RingError::os("mmap of the ring memfd", e))?;
        let mem = Self::from_shared_map(layout, Some(fd), map)?;
        mem.write_layout_fields();
        Ok(mem)
    }

    /// Maps a ring memfd another process created with
    /// [`RingMemory::shared`], after checking that its size is sealed and
    /// that the layout in its user page is one a perf buffer can have and
    /// fits the file.
    pub fn open_shared(fd: OwnedFd) -> Result<Self, RingError> {
        use rustix::fs::SealFlags;
        let seals = rustix::fs::fcntl_get_seals(&fd)
            .map_err(|e| RingError::os("F_GET_SEALS on the ring memfd", e))?;
        if !seals.contains(SealFlags::SHRINK) {
            return Err(RingError::UserPage {
                field: "memfd seals (F_SEAL_SHRINK)",
                found: u64::from(seals.bits()),
                expected: u64::from(SealFlags::SHRINK.bits()),
            });
        }
        let st = rustix::fs::fstat(&fd).map_err(|e| RingError::os("fstat of the ring memfd", e))?;
        let file_len = st.st_size as u64;
        let page_size = crate::layout::page_size();
        if file_len < page_size as u64 {
            return Err(RingError::Layout {
                what: "memfd size",
                value: file_len,
            });
        }
        let map = MmapOptions::new()
            .len(file_len as usize)
            .map_raw(&fd)
            .map_err(|e| RingError::os("mmap of the ring memfd", e))?;
        let base = map.as_mut_ptr();
        let field = |off: usize| {
            // SAFETY: off + 8 <= offsets::END <= page_size <= file_len; the
            // word is 8-aligned in a page-aligned mapping; a volatile read
            // of shared memory another process may change.
            unsafe { std::ptr::read_volatile(base.wrapping_add(off) as *const u64) }
        };
        let as_usize = |what: &'static str, v: u64| {
            usize::try_from(v).map_err(|_| RingError::Layout { what, value: v })
        };
        let layout = RingLayout {
            page_size,
            data_offset: as_usize("data_offset", field(offsets::DATA_OFFSET))?,
            data_size: as_usize("data_size", field(offsets::DATA_SIZE))?,
            aux_offset: as_usize("aux_offset", field(offsets::AUX_OFFSET))?,
            aux_size: as_usize("aux_size", field(offsets::AUX_SIZE))?,
        };
        layout.validate()?;
        if layout.total_len() as u64 > file_len {
            return Err(RingError::UserPage {
                field: "aux_offset + aux_size (or data_offset + data_size)",
                found: layout.total_len() as u64,
                expected: file_len,
            });
        }
        drop(fd);
        Self::from_shared_map(layout, None, map)
    }

    fn from_shared_map(
        layout: RingLayout,
        fd: Option<OwnedFd>,
        map: MmapRaw,
    ) -> Result<Self, RingError> {
        let user = NonNull::new(map.as_mut_ptr()).ok_or(RingError::Os {
            what: "mmap of the ring memfd",
            errno: perfaux_abi::errno::ENOMEM,
        })?;
        Ok(RingMemory {
            layout,
            user,
            aux: (layout.aux_size != 0)
                // SAFETY: the caller checked total_len() <= the mapping's length.
                .then(|| unsafe { user.add(layout.aux_offset) }),
            data_writable: true,
            aux_writable: true,
            backing: Backing::Shared { fd, _map: map },
        })
    }

    /// The mmap of a perf event fd, as `perf record` makes it: `1 +
    /// data_pages` pages (read-only when `data_writable` is false, which puts
    /// the data area in overwrite mode), then, if `aux` is given, the AUX
    /// area: `aux_offset`/`aux_size` are written into the user page and the
    /// area is mapped at `aux_offset`. The kernel's `data_offset` and
    /// `data_size` are checked against the mapping.
    pub fn kernel(
        fd: BorrowedFd<'_>,
        data_pages: usize,
        data_writable: bool,
        aux: Option<KernelAux>,
    ) -> Result<Self, RingError> {
        let aux_pages = aux.map_or(0, |a| a.pages);
        let layout = RingLayout::new(data_pages, aux_pages)?;
        if aux.is_some() && !data_writable {
            return Err(RingError::ReadOnly {
                what: "setting aux_offset/aux_size in the user page",
            });
        }
        let mut opts = MmapOptions::new();
        opts.len(layout.data_mapping_len());
        let data = if data_writable {
            opts.map_raw(&fd)
        } else {
            opts.map_raw_read_only(&fd)
        }
        .map_err(|e| RingError::os("mmap of the perf event data area", e))?;
        let user = NonNull::new(data.as_mut_ptr()).ok_or(RingError::Os {
            what: "mmap of the perf event data area",
            errno: perfaux_abi::errno::ENOMEM,
        })?;
        let mut mem = RingMemory {
            layout,
            user,
            aux: None,
            data_writable,
            aux_writable: aux.is_some_and(|a| a.writable),
            backing: Backing::Kernel {
                _data: data,
                _aux: None,
            },
        };
        for (field, off, expected) in [
            ("data_offset", offsets::DATA_OFFSET, layout.data_offset),
            ("data_size", offsets::DATA_SIZE, layout.data_size),
        ] {
            let found = mem.user_word(off).load(crate::sync::Ordering::Relaxed);
            if found != expected as u64 {
                return Err(RingError::UserPage {
                    field,
                    found,
                    expected: expected as u64,
                });
            }
        }
        if let Some(a) = aux {
            let o = crate::sync::Ordering::Relaxed;
            mem.user_word(offsets::AUX_OFFSET)
                .store(layout.aux_offset as u64, o);
            mem.user_word(offsets::AUX_SIZE)
                .store(layout.aux_size as u64, o);
            let mut opts = MmapOptions::new();
            opts.len(layout.aux_size).offset(layout.aux_offset as u64);
            let map = if a.writable {
                opts.map_raw(&fd)
            } else {
                opts.map_raw_read_only(&fd)
            }
            .map_err(|e| RingError::os("mmap of the perf event AUX area", e))?;
            mem.aux = NonNull::new(map.as_mut_ptr());
            if let Backing::Kernel { _aux, .. } = &mut mem.backing {
                *_aux = Some(map);
            }
        }
        Ok(mem)
    }

    /// The memfd of a shared ring, to hand to the reader process (its creator's only: a
    /// reader's is closed once mapped).
    pub fn shared_fd(&self) -> Option<BorrowedFd<'_>> {
        match &self.backing {
            Backing::Shared { fd, .. } => fd.as_ref().map(AsFd::as_fd),
            _ => None,
        }
    }

    /// The layout this memory was created or validated with. The consumer
    /// uses this copy, never the live user page fields.
    pub fn layout(&self) -> &RingLayout {
        &self.layout
    }

    /// Whether this process may write the data area's control words
    /// (`data_tail`): false for a read-only kernel mapping (overwrite mode).
    pub fn data_writable(&self) -> bool {
        self.data_writable
    }

    /// Whether the AUX area is mapped writable here.
    pub fn aux_writable(&self) -> bool {
        self.aux_writable
    }

    /// The 8-byte control word of the user page at `off` (one of
    /// [`perfaux_abi::mmap_page::offsets`]'s u64 fields).
    ///
    /// # Panics
    /// If `off` is not an 8-aligned offset below `offsets::END`: offsets are
    /// the crate's constants, so this is a bug in the caller, not bad input.
    #[inline]
    pub fn user_word(&self, off: usize) -> &AtomicU64 {
        assert!(
            off.is_multiple_of(8) && off + 8 <= offsets::END,
            "user page word {off}"
        );
        // SAFETY: the user page is at least 4096 bytes, page aligned, and
        // lives as long as self; off is 8-aligned and in bounds (checked
        // above); AtomicU64 has the layout of u64 and every bit pattern is
        // valid; all accesses to these words (here and in any other process)
        // are atomic.
        unsafe { &*(self.user.as_ptr().wrapping_add(off) as *const AtomicU64) }
    }

    /// The first byte of the data area.
    #[inline]
    pub(crate) fn data_ptr(&self) -> *mut u8 {
        // SAFETY: data_offset + data_size is inside the mapping (layout validated).
        unsafe { self.user.as_ptr().add(self.layout.data_offset) }
    }

    /// The first byte of the AUX area, if any.
    pub(crate) fn aux_ptr(&self) -> Option<*mut u8> {
        self.aux.map(NonNull::as_ptr)
    }

    /// The first byte of the AUX area (`layout().aux_size` bytes), if one is
    /// mapped: for a PMU that writes the area in place, as trace hardware
    /// writes the kernel's AUX pages. Writing through it is the caller's
    /// contract with the ring protocol: only inside the space an open
    /// [`crate::AuxHandle`] grants (or anywhere in overwrite mode), and only
    /// while this memory lives.
    pub fn aux_base(&self) -> Option<NonNull<u8>> {
        self.aux
    }

    /// Writes the layout into the user page again, as [`RingMemory::shared`] did (the next
    /// user of shared memory another process had: its `set_aux_area` wrote `aux_offset` and
    /// `aux_size` into a data-only ring's page, which [`RingMemory::open_shared`] would then
    /// read as an AUX area). The heads and tails are left: the ring goes on from them.
    pub fn restore_layout_fields(&self) {
        self.write_layout_fields();
        if self.layout.aux_size == 0 {
            let o = crate::sync::Ordering::Relaxed;
            self.user_word(offsets::AUX_OFFSET).store(0, o);
            self.user_word(offsets::AUX_SIZE).store(0, o);
        }
    }

    /// Writes `data_offset`, `data_size`, `aux_offset` and `aux_size` into
    /// the user page, as `perf_mmap()` (and the AUX mmap) leave them.
    fn write_layout_fields(&self) {
        let o = crate::sync::Ordering::Relaxed;
        let l = self.layout;
        self.user_word(offsets::DATA_OFFSET)
            .store(l.data_offset as u64, o);
        self.user_word(offsets::DATA_SIZE)
            .store(l.data_size as u64, o);
        if l.aux_size != 0 {
            self.user_word(offsets::AUX_OFFSET)
                .store(l.aux_offset as u64, o);
            self.user_word(offsets::AUX_SIZE)
                .store(l.aux_size as u64, o);
        }
    }
}

impl Drop for RingMemory {
    fn drop(&mut self) {
        if let Backing::Heap(alloc) = self.backing {
            // SAFETY: user was returned by alloc_zeroed with this layout and
            // is freed once, here.
            unsafe { std::alloc::dealloc(self.user.as_ptr(), alloc) };
        }
    }
}

impl std::fmt::Debug for RingMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.backing {
            Backing::Heap(_) => "heap",
            Backing::Shared { .. } => "shared memfd",
            Backing::Kernel { .. } => "kernel perf mmap",
        };
        f.debug_struct("RingMemory")
            .field("backing", &kind)
            .field("layout", &self.layout)
            .finish()
    }
}
