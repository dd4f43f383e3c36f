//! `perf_mmap` and `perf_mmap_aux`: mapping an event's data area and AUX
//! area, with the kernel's rules (`perf_mmap()` in kernel/events/core.c).
//!
//! The "mapping" is a [`Mmap`] handle over the buffer's memory in this
//! process: dropping it is `munmap`. The data mapping comes first
//! (`pgoff` 0, `1 + 2^n` pages); then the user writes `aux_offset` and
//! `aux_size` into its user page ([`Mmap::set_aux_area`]) and maps the AUX
//! area at that offset (`2^m` pages). Mapping the AUX area read-only
//! selects overwrite mode. A new buffer is charged against the locked-memory
//! limits first (`crate::mlock`, EPERM), but for memory the caller provides
//! (`EventFd::mmap_over`), which pins nothing.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use perfaux_abi::attr::AttrFlags;
use perfaux_abi::errno;
use perfaux_abi::mmap_page::offsets;
use perfaux_ring::{
    AuxBuffer, AuxConfig, AuxMmap, DataConfig, PerfBuffer, PerfMmap, RingLayout, RingMemory, Wakeup,
};

use crate::buffer::{AuxArea, Buffer};
use crate::control::EventFd;
use crate::error::{Error, Result, einval, eopnotsupp};
use crate::event::Event;

/// `mmap(2)` protection and sharing, as far as perf cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prot {
    /// `PROT_WRITE`: the consumer owns the tail (full-trace / non-overwrite).
    pub write: bool,
    /// `MAP_SHARED` (required).
    pub shared: bool,
}

impl Prot {
    /// `PROT_READ | PROT_WRITE, MAP_SHARED`.
    pub const READ_WRITE: Prot = Prot {
        write: true,
        shared: true,
    };
    /// `PROT_READ, MAP_SHARED` (overwrite mode).
    pub const READ_ONLY: Prot = Prot {
        write: false,
        shared: true,
    };
}

/// The page size perf buffers are counted in (`PAGE_SIZE`).
pub fn page_size() -> usize {
    perfaux_ring::layout::page_size()
}

/// A mapping of an event's data area or AUX area. Dropping it unmaps.
pub struct Mmap {
    event: Arc<Event>,
    buffer: Arc<Buffer>,
    kind: Kind,
}

enum Kind {
    Data { reader: PerfMmap, writable: bool },
    Aux { reader: AuxMmap },
}

impl EventFd {
    /// `mmap(NULL, nr_pages * PAGE_SIZE, prot, flags, fd, pgoff * PAGE_SIZE)`.
    pub fn mmap(&self, pgoff: u64, nr_pages: usize, prot: Prot) -> Result<Mmap> {
        perf_mmap(&self.event, pgoff, nr_pages, prot, None)
    }

    /// [`EventFd::mmap`] with the new buffer's bytes in `mem`, memory the caller provides
    /// (a recorder's memfd shared with this process, so that what the event writes outlives
    /// the process). `mem`'s layout must be the one the mapping would get: `nr_pages - 1` data
    /// pages and no AUX area for `pgoff` 0, else no data pages and `nr_pages` AUX pages
    /// (EINVAL otherwise). A mapping of an existing buffer (or AUX area) ignores `mem`, as the
    /// kernel's second mmap shares the first one's pages. Provided memory is not charged
    /// against the locked-memory limits (`perf_event_mlock_kb`, RLIMIT_MEMLOCK): the core pins
    /// nothing for it.
    pub fn mmap_over(
        &self,
        pgoff: u64,
        nr_pages: usize,
        prot: Prot,
        mem: Arc<RingMemory>,
    ) -> Result<Mmap> {
        perf_mmap(&self.event, pgoff, nr_pages, prot, Some(mem))
    }
}

/// The memory of a new buffer or AUX area: `provided` if its layout is `layout`, else fresh heap.
fn buffer_memory(layout: RingLayout, provided: Option<Arc<RingMemory>>) -> Result<Arc<RingMemory>> {
    match provided {
        None => Ok(Arc::new(RingMemory::heap(layout).map_err(ring_err)?)),
        Some(mem) if *mem.layout() == layout => Ok(mem),
        Some(_) => Err(einval(
            "perf_mmap: the provided memory's layout differs from the mapping's",
        )),
    }
}

/// The locked-memory charge of a new buffer of `nr_pages` (`crate::mlock`), or none for
/// memory the caller provides ([`EventFd::mmap_over`]): the limits stand for the pages the
/// kernel allocates and pins for a buffer, and the core allocates nothing there (the memory
/// is the caller's, accounted as the caller's: a recorder's memfd is ordinary shared memory),
/// so a program traced with many threads is not refused what the kernel would never have
/// pinned.
fn charge_of(nr_pages: usize, provided: bool) -> Result<crate::mlock::Charge> {
    if provided {
        return Ok(crate::mlock::Charge::default());
    }
    crate::mlock::check(nr_pages as u64, page_size() as u64)
}

fn perf_mmap(
    event: &Arc<Event>,
    pgoff: u64,
    nr_pages: usize,
    prot: Prot,
    mem: Option<Arc<RingMemory>>,
) -> Result<Mmap> {
    if !prot.shared {
        return Err(einval("perf_mmap: mapping must be MAP_SHARED"));
    }
    // Per-task inherited events (cpu == -1 && inherit) cannot be mapped.
    if event.cpu == -1 && event.flag(AttrFlags::INHERIT) {
        return Err(einval("perf_mmap: per-task inherited event"));
    }
    if pgoff == 0 {
        perf_mmap_data(event, nr_pages, prot, mem)
    } else {
        perf_mmap_aux(event, pgoff, nr_pages, prot, mem)
    }
}

fn perf_mmap_data(
    event: &Arc<Event>,
    nr_pages: usize,
    prot: Prot,
    provided: Option<Arc<RingMemory>>,
) -> Result<Mmap> {
    // 1 + 2^n pages (n may be 0 pages of data).
    let Some(data_pages) = nr_pages.checked_sub(1) else {
        return Err(einval("perf_mmap: zero pages"));
    };
    if data_pages != 0 && !data_pages.is_power_of_two() {
        return Err(einval("perf_mmap: data area must be 1 + 2^n pages"));
    }
    let _g = crate::control::mmap_lock();
    if let Some(rb) = event.rb.load() {
        // A second mapping of the same buffer must have its size.
        if rb.data_pages != data_pages {
            return Err(einval("perf_mmap: buffer exists with another size"));
        }
    }
    // `atomic_inc_not_zero(&rb->mmap_count)`: a buffer whose last mapping
    // went (the event reaches it through SET_OUTPUT) is not mapped again:
    // the event lets go of it and gets a buffer of its own, charged anew.
    if let Some(buffer) = event.rb.get()
        && buffer.mmap_count.load(Ordering::Acquire) == 0
    {
        event.rb.store(None);
    }
    if let Some(buffer) = event.rb.get() {
        buffer.mmap_count.fetch_add(1, Ordering::AcqRel);
        event.mmap_count.fetch_add(1, Ordering::AcqRel);
        let reader = PerfMmap::new(buffer.mem.clone());
        return Ok(Mmap {
            event: event.clone(),
            buffer,
            kind: Kind::Data {
                reader,
                writable: prot.write,
            },
        });
    }
    let locked = charge_of(nr_pages, provided.is_some())?;
    let layout = RingLayout::new(data_pages, 0).map_err(ring_err)?;
    let mem = buffer_memory(layout, provided)?;
    let wakeup = Arc::new(Wakeup::new());
    let watermark = if event.flag(AttrFlags::WATERMARK) {
        event.attr.wakeup_watermark()
    } else {
        0
    };
    let config = DataConfig {
        writable: prot.write,
        write_backward: event.flag(AttrFlags::WRITE_BACKWARD),
        wakeup_watermark: watermark,
    };
    let owner_tid = crate::buffer::per_thread_owner(event);
    let data = if owner_tid.is_some() {
        // SAFETY: a per-thread buffer (its event observes one thread on any
        // CPU) is written only by that thread and its signal handlers, the
        // kernel's per-task buffer written by the CPU the task runs on and
        // its NMIs: `set_output` only redirects events of the same thread
        // into it (SET_OUTPUT rules: same cpu, and for cpu -1 the same
        // target); the records are samples, uevents and AUX records of
        // events in that thread's context, emitted on it (probe hooks,
        // `perf_uevent`, its thread-directed timer signal, the trace PMU's
        // start/stop run there), and ITRACE_START, which
        // `perf_log_itrace_start` writes on the thread too. See
        // `Buffer::owner_tid`.
        unsafe { PerfBuffer::new_per_thread(mem.clone(), config, wakeup.clone()) }
    } else {
        PerfBuffer::with_wakeup(mem.clone(), config, wakeup.clone())
    }
    .map_err(ring_err)?;
    let buffer = Arc::new(Buffer {
        mem: mem.clone(),
        data,
        wakeup,
        data_pages,
        aux: Default::default(),
        mmap_count: 1.into(),
        aux_mmap_count: 0.into(),
        aux_in_sampling: false.into(),
        aux_in_pause_resume: false.into(),
        owner_tid,
        locked,
    });
    crate::mlock::charge(locked);
    event.rb.store(Some(buffer.clone()));
    event.mmap_count.fetch_add(1, Ordering::AcqRel);
    Ok(Mmap {
        event: event.clone(),
        buffer,
        kind: Kind::Data {
            reader: PerfMmap::new(mem),
            writable: prot.write,
        },
    })
}

fn perf_mmap_aux(
    event: &Arc<Event>,
    pgoff: u64,
    nr_pages: usize,
    prot: Prot,
    provided: Option<Arc<RingMemory>>,
) -> Result<Mmap> {
    let _g = crate::control::mmap_lock();
    let Some(buffer) = event.rb.get() else {
        return Err(einval("perf_mmap_aux: the data area must be mapped first"));
    };
    let page = page_size() as u64;
    let data_size = buffer.data_pages as u64 * page;
    let aux_offset = buffer
        .mem
        .user_word(offsets::AUX_OFFSET)
        .load(Ordering::Acquire);
    let aux_size = buffer
        .mem
        .user_word(offsets::AUX_SIZE)
        .load(Ordering::Acquire);
    if aux_offset < data_size + page {
        return Err(einval(
            "perf_mmap_aux: user page aux_offset overlaps the data area",
        ));
    }
    if pgoff.checked_mul(page) != Some(aux_offset) {
        return Err(einval(
            "perf_mmap_aux: mmap offset differs from user page aux_offset",
        ));
    }
    if (nr_pages as u64).checked_mul(page) != Some(aux_size) {
        return Err(einval(
            "perf_mmap_aux: mapping length differs from user page aux_size",
        ));
    }
    if !nr_pages.is_power_of_two() {
        return Err(einval("perf_mmap_aux: AUX area must be 2^n pages"));
    }
    if let Some(existing) = buffer.aux() {
        if existing.pgoff != pgoff || existing.nr_pages != nr_pages {
            return Err(einval(
                "perf_mmap_aux: AUX area exists with another offset or size",
            ));
        }
        buffer.aux_mmap_count.fetch_add(1, Ordering::AcqRel);
        let reader = AuxMmap::new(existing.mem.clone()).map_err(ring_err)?;
        return Ok(Mmap {
            event: event.clone(),
            buffer,
            kind: Kind::Aux { reader },
        });
    }
    let locked = charge_of(nr_pages, provided.is_some())?;
    // rb_alloc_aux
    if !event.has_aux() {
        return Err(eopnotsupp(
            "rb_alloc_aux: the PMU has no AUX area (no setup_aux)",
        ));
    }
    // The page pointer array is one kcalloc, which cannot exceed
    // PAGE_SIZE << MAX_PAGE_ORDER bytes (x86's MAX_PAGE_ORDER is 10): with
    // 4 KiB pages, AUX areas above 2 GiB.
    const MAX_PAGE_ORDER: u32 = 10;
    if (nr_pages as u64).saturating_mul(8) > page << MAX_PAGE_ORDER {
        return Err(Error::new(
            errno::ENOMEM,
            "rb_alloc_aux: the AUX page array exceeds one MAX_PAGE_ORDER allocation",
        ));
    }
    let overwrite = !prot.write;
    let layout = RingLayout::new(0, nr_pages).map_err(ring_err)?;
    let mem = buffer_memory(layout, provided)?;
    let aux = AuxBuffer::new(
        mem.clone(),
        AuxConfig {
            writable: prot.write,
            aux_watermark: event.attr.aux_watermark,
        },
        buffer.wakeup.clone(),
    )
    .map_err(ring_err)?;
    let area = Arc::new(AuxArea {
        mem: mem.clone(),
        aux,
        overwrite,
        nr_pages,
        pgoff,
        aux_priv: Default::default(),
        pmu: event.pmu.clone(),
        locked,
    });
    // The kernel's setup_aux returns a pointer: any refusal is ENOMEM.
    let aux_priv = event
        .pmu
        .setup_aux(event, &area, overwrite)
        .map_err(|e| Error::with_cause(errno::ENOMEM, e.reason, e))?;
    let _ = area.aux_priv.set(aux_priv);
    // The reader before the charge: nothing may fail after it.
    let reader = AuxMmap::new(mem).map_err(ring_err)?;
    crate::mlock::charge(locked);
    buffer.aux.store(Some(area));
    buffer.aux_mmap_count.store(1, Ordering::Release);
    Ok(Mmap {
        event: event.clone(),
        buffer,
        kind: Kind::Aux { reader },
    })
}

fn ring_err(e: perfaux_ring::RingError) -> Error {
    let errno = match e {
        perfaux_ring::RingError::Os { errno, .. } => errno,
        _ => errno::EINVAL,
    };
    Error::with_cause(errno, "perf buffer memory refused the layout", e)
}

impl Mmap {
    /// Whether this maps the AUX area.
    pub fn is_aux(&self) -> bool {
        matches!(self.kind, Kind::Aux { .. })
    }

    /// The buffer behind the mapping.
    pub fn buffer(&self) -> &Arc<Buffer> {
        &self.buffer
    }

    /// Writes `aux_offset` and `aux_size` into the user page, as a user
    /// does before mapping the AUX area. EACCES (the kernel's SIGSEGV) if
    /// this is not a writable data mapping.
    pub fn set_aux_area(&self, aux_offset: u64, aux_size: u64) -> Result<()> {
        match &self.kind {
            Kind::Data { writable: true, .. } => {
                let m = &self.buffer.mem;
                m.user_word(offsets::AUX_OFFSET)
                    .store(aux_offset, Ordering::Release);
                m.user_word(offsets::AUX_SIZE)
                    .store(aux_size, Ordering::Release);
                Ok(())
            }
            _ => Err(Error::new(
                errno::EACCES,
                "user page is not mapped writable: cannot store aux_offset/aux_size",
            )),
        }
    }

    /// The data-area reader (`perf record`'s side of the ring).
    pub fn data_reader(&mut self) -> Option<&mut PerfMmap> {
        match &mut self.kind {
            Kind::Data { reader, .. } => Some(reader),
            Kind::Aux { .. } => None,
        }
    }

    /// The AUX-area reader.
    pub fn aux_reader(&mut self) -> Option<&mut AuxMmap> {
        match &mut self.kind {
            Kind::Aux { reader } => Some(reader),
            Kind::Data { .. } => None,
        }
    }

    /// The event this maps.
    pub fn event(&self) -> &Arc<Event> {
        &self.event
    }
}

impl Drop for Mmap {
    /// `perf_mmap_close`: the last AUX unmap stops the PMU's output and
    /// frees the AUX area; the last data unmap detaches the buffer from the
    /// event.
    fn drop(&mut self) {
        let _g = crate::control::mmap_lock();
        match self.kind {
            Kind::Aux { .. } => {
                if self.buffer.aux_mmap_count.fetch_sub(1, Ordering::AcqRel) == 1 {
                    crate::control::perf_pmu_output_stop(&self.event);
                    if let Some(aux) = self.buffer.aux.load() {
                        crate::mlock::uncharge(aux.locked);
                    }
                    self.buffer.aux.store(None);
                }
            }
            Kind::Data { .. } => {
                self.event.mmap_count.fetch_sub(1, Ordering::AcqRel);
                if self.buffer.mmap_count.fetch_sub(1, Ordering::AcqRel) == 1 {
                    crate::mlock::uncharge(self.buffer.locked);
                    let owns = self
                        .event
                        .rb
                        .load()
                        .is_some_and(|rb| std::ptr::eq(rb, Arc::as_ptr(&self.buffer)));
                    if owns {
                        self.event.rb.store(None);
                    }
                }
            }
        }
    }
}
