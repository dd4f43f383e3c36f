//! loom's model check of the data area's memory orderings: the real
//! `perfaux_ring::protocol` code over loom atomics (see `src/sync.rs`),
//! with one producer thread whose record is interrupted by a nested one
//! (a signal handler), a second producer thread, and a consumer.
//!
//! The data words are loom atomics written and read `Relaxed`, so only the
//! protocol's own orderings (Acquire/Release on the state word, `data_head`
//! and `data_tail`) can make a consumer see them: a missing or too weak
//! ordering shows up as a consumer reading a stale word.
//!
//! Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p perfaux-ring --release --test loom
//! ```
//!
//! (about a second, with the preemption bound at 2).
//!
//! It has teeth: it found that `reserve` loaded the state word before
//! `data_tail`, so that on a weakly ordered CPU a stale position under a
//! newer tail looked like a full ring (fixed: the tail is loaded first);
//! and it fails if `put_handle` publishes while another writer is in
//! flight, if the `data_head` store is `Relaxed`, if the state word is
//! loaded `Relaxed` in `put_handle`, or if the consumer loads `data_head`
//! `Relaxed` (each tried by hand on the code).

#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::AtomicU64;
use perfaux_ring::protocol;
use perfaux_ring::sync::Ordering;

const DATA_SIZE: u64 = 64;
const WORDS: usize = (DATA_SIZE / 8) as usize;

struct Ring {
    state: AtomicU64,
    data_head: AtomicU64,
    data_tail: AtomicU64,
    data: Vec<AtomicU64>,
}

impl Ring {
    fn new() -> Self {
        Ring {
            state: AtomicU64::new(0),
            data_head: AtomicU64::new(0),
            data_tail: AtomicU64::new(0),
            data: (0..WORDS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn word(&self, pos: u64) -> &AtomicU64 {
        &self.data[((pos & (DATA_SIZE - 1)) / 8) as usize]
    }

    /// begin; write `words` words tagged `tag`, calling `nested` after the
    /// first; end. Returns the start position.
    fn write(&self, tag: u64, words: u64, nested: impl FnOnce()) -> u64 {
        let r = protocol::reserve(
            &self.state,
            &self.data_tail,
            words * 8,
            DATA_SIZE,
            true,
            false,
        )
        .expect("room for every record");
        let mut nested = Some(nested);
        for k in 0..words {
            self.word(r.start + 8 * k)
                .store(tag << 8 | k, Ordering::Relaxed);
            if let Some(f) = nested.take() {
                f();
            }
        }
        protocol::put_handle(&self.state, &self.data_head, false);
        r.start
    }
}

/// The consumer: every word below data_head carries a writer's tag.
fn consume(ring: &Ring, tail: u64) -> u64 {
    let head = protocol::load_head(&ring.data_head);
    let mut pos = tail;
    while pos != head {
        let w = ring.word(pos).load(Ordering::Relaxed);
        assert_ne!(w >> 8, 0, "published word at {pos} is unwritten");
        pos += 8;
    }
    protocol::store_tail(&ring.data_tail, head);
    head
}

#[test]
fn published_words_are_visible_with_a_nested_and_a_concurrent_writer() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(|| {
        let ring = Arc::new(Ring::new());
        let r1 = ring.clone();
        let t1 = loom::thread::spawn(move || {
            let inner = r1.clone();
            r1.write(1, 2, move || {
                inner.write(2, 1, || {});
            });
        });
        let r3 = ring.clone();
        let t3 = loom::thread::spawn(move || {
            r3.write(3, 1, || {});
        });
        // Let the writers run before the first read (loom's scheduler does
        // not otherwise move a load of data_head after their CAS on it).
        loom::thread::yield_now();
        let tail = consume(&ring, 0);
        t1.join().unwrap();
        t3.join().unwrap();
        let head = consume(&ring, tail);
        assert_eq!(head, 4 * 8, "everything reserved is published at the end");
    });
}
