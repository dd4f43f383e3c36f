//! Each slot's ring mappings, kept by the process from one of its threads to the next that
//! takes the slot: a thread's start then maps nothing and its end unmaps nothing. Unmapping
//! 12 MiB of rings at each thread's end cost a TLB shootdown of every CPU running the
//! process's other threads, and most of a short thread's life (100,000 threads one after
//! another: 150 us a thread under perfaux, 5 us without).
//!
//! A kept mapping is the same memfd (its header word, number and inode, names it); the recorder
//! puts the ring's layout back in its user page before it gives the slot to the next thread,
//! and nothing writes the mapping between two threads (the first one's events are closed before
//! its slot is ENDED). A forked child inherits the mappings, which are shared: the same files.
//! The table is taken with `try_lock` only (a fork can leave a lock held in the child, and a
//! thread's start must not wait): a thread that finds it taken maps its rings for itself.

use std::sync::{Arc, Mutex, OnceLock};

use perfaux_preload_abi::MAX_SLOTS;
use perfaux_ring::RingMemory;

/// Per slot, its data and AUX ring: (header word, mapping).
type Kept = [Option<(u64, Arc<RingMemory>)>; 2];

fn table() -> &'static Mutex<Vec<Kept>> {
    static T: OnceLock<Mutex<Vec<Kept>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(Vec::new()))
}

/// Which of a slot's rings.
#[derive(Clone, Copy)]
pub(crate) enum Which {
    Data = 0,
    Aux = 1,
}

/// The mapping of slot `i`'s ring `which`, whose memfd header word is `word`: the one this
/// process kept for it, or a new one from `open` (then kept).
pub(crate) fn ring(
    i: usize,
    which: Which,
    word: u64,
    open: impl FnOnce() -> Result<RingMemory, i32>,
) -> Result<Arc<RingMemory>, i32> {
    let Ok(mut t) = table().try_lock() else {
        return open().map(Arc::new);
    };
    if i >= MAX_SLOTS {
        return open().map(Arc::new);
    }
    if t.len() <= i {
        t.resize_with(i + 1, Default::default);
    }
    let kept = &mut t[i][which as usize];
    if let Some((w, mem)) = kept
        && *w == word
    {
        return Ok(mem.clone());
    }
    let mem = Arc::new(open()?);
    *kept = Some((word, mem.clone()));
    Ok(mem)
}
