//! `struct perf_buffer` as the core holds it: perfaux-ring's producer
//! halves plus the fields kernel/events keeps next to them (`aux_in_sampling`,
//! `aux_in_pause_resume`, the PMU's `aux_priv`).
//!
//! The data area and the AUX area are two [`RingMemory`]s here: the kernel
//! maps the AUX area after the data area exists, at an offset and size the
//! user wrote into the user page, and perfaux-ring's memory is laid out
//! once. The AUX memory's own user page carries `aux_head`/`aux_tail` for
//! its producer and consumer; the core mirrors `aux_head` into the data
//! user page at every `perf_aux_output_end`, so the page the user mapped
//! first reads as the kernel's would.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use perfaux_abi::mmap_page::offsets;
use perfaux_ring::{AuxBuffer, PerfBuffer, RingMemory, Wakeup};

use crate::grave::GraveCell;
use crate::pmu::{Pmu, PmuPrivate};

/// The AUX half of a buffer (`rb_alloc_aux`'s result).
pub struct AuxArea {
    pub(crate) mem: Arc<RingMemory>,
    pub(crate) aux: AuxBuffer,
    pub(crate) overwrite: bool,
    pub(crate) nr_pages: usize,
    pub(crate) pgoff: u64,
    /// `rb->aux_priv`, from `setup_aux`.
    pub(crate) aux_priv: std::sync::OnceLock<PmuPrivate>,
    pub(crate) pmu: Arc<dyn Pmu>,
    /// What the area was charged (`rb->aux_mmap_locked` and the user's
    /// share), given back at its last unmap.
    pub(crate) locked: crate::mlock::Charge,
}

impl AuxArea {
    /// The ring's AUX producer.
    pub fn aux_buffer(&self) -> &AuxBuffer {
        &self.aux
    }

    /// The AUX memory.
    pub fn memory(&self) -> &Arc<RingMemory> {
        &self.mem
    }

    /// `rb->aux_overwrite`: the area was mapped read-only.
    pub fn overwrite(&self) -> bool {
        self.overwrite
    }

    /// `aux_size` in bytes.
    pub fn aux_size(&self) -> u64 {
        self.aux.aux_size()
    }

    /// The PMU's `aux_priv`.
    pub fn aux_priv<T: 'static>(&self) -> Option<&T> {
        self.aux_priv.get()?.downcast_ref::<T>()
    }
}

impl Drop for AuxArea {
    fn drop(&mut self) {
        if let Some(p) = self.aux_priv.take() {
            self.pmu.free_aux(p);
        }
    }
}

/// One perf buffer: data area, optional AUX area, and the core's flags.
pub struct Buffer {
    pub(crate) mem: Arc<RingMemory>,
    pub(crate) data: PerfBuffer,
    pub(crate) wakeup: Arc<Wakeup>,
    pub(crate) data_pages: usize,
    pub(crate) aux: GraveCell<AuxArea>,
    /// Live mappings of the data area (`rb->mmap_count`).
    pub(crate) mmap_count: AtomicU64,
    /// Live mappings of the AUX area (`rb->aux_mmap_count`).
    pub(crate) aux_mmap_count: AtomicU64,
    /// `rb->aux_in_sampling`: a snapshot for an AUX sample is running.
    pub(crate) aux_in_sampling: AtomicBool,
    /// `rb->aux_in_pause_resume`: a pause or resume is running.
    pub(crate) aux_in_pause_resume: AtomicBool,
    /// The one thread that writes this buffer (with its signal handlers),
    /// for a buffer of an event that observes one thread on any CPU; `None`
    /// for a per-CPU buffer, which any thread running there may write.
    ///
    /// A per-thread buffer's data ring uses the kernel's `local_t`
    /// operations (`PerfBuffer::new_per_thread`), and its
    /// `aux_in_sampling` guard is taken as the kernel takes it on its CPU:
    /// a load and a store, since the only other taker is a signal handler
    /// that runs to completion inside the owner. What keeps every record
    /// of such a buffer on its thread is listed where it is made
    /// (`mmap::perf_mmap_data`).
    pub(crate) owner_tid: Option<i32>,
    /// What the data area was charged (`rb->mmap_locked` and the user's
    /// share), given back at its last unmap.
    pub(crate) locked: crate::mlock::Charge,
}

/// The thread that alone writes a buffer created for `event`: its target
/// thread when it observes that thread on every CPU (`cpu == -1`).
pub(crate) fn per_thread_owner(event: &crate::event::Event) -> Option<i32> {
    match event.target {
        crate::event::Target::Thread(tid) if event.cpu == -1 => Some(tid),
        _ => None,
    }
}

impl Buffer {
    /// `rb->paused` (`PERF_EVENT_IOC_PAUSE_OUTPUT`).
    pub(crate) fn pause_output(&self, paused: bool) {
        self.data.pause_output(paused);
    }

    /// The AUX area, if mapped (`rb_has_aux`).
    pub fn aux(&self) -> Option<&AuxArea> {
        if self.aux_mmap_count.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.aux.load()
    }

    /// The data producer.
    pub fn data(&self) -> &PerfBuffer {
        &self.data
    }

    /// The data memory (user page and data area).
    pub fn memory(&self) -> &Arc<RingMemory> {
        &self.mem
    }

    /// Copies the AUX producer's `aux_head` into the data user page.
    pub(crate) fn mirror_aux_head(&self, head: u64) {
        self.mem
            .user_word(offsets::AUX_HEAD)
            .store(head, Ordering::Release);
    }
}
