//! A hand-stepped model check of the data area's head/tail protocol, run
//! by every `cargo test` (loom's check of the memory orderings is
//! `tests/loom.rs`, under `--cfg loom`).
//!
//! Writers and a consumer are state machines whose steps are the
//! protocol's atomic actions: `reserve` (the real function: one CAS that
//! takes effect at once), the data stores (one per word), and
//! `put_handle` cut into its atomic actions (load the state word; if alone,
//! load `data_head` and store the `advance_head` of it; leave with a CAS,
//! looking again if it fails), and for the consumer `load_head`, the reads,
//! `store_tail`. A scheduler interleaves the steps: all interleavings for
//! two writers and a consumer, random ones for three writers (one of them
//! the "signal handler" that interrupts another) and two reads. After
//! every step:
//!
//! - `data_head` never goes back;
//! - every word below `data_head` was written by the writer that reserved
//!   it (no published byte is unwritten);
//! - the consumer reads exactly what was written;
//!
//! and when all have finished, `data_head` covers every reservation.

use perfaux_ring::protocol::{self, POS_MASK, Rmw, Smp};
use perfaux_ring::sync::{AtomicU64, Ordering};

const DATA_SIZE: u64 = 64;
const START: u64 = 48;

/// The shared memory and the ghost state the checks use.
struct World {
    state: AtomicU64,
    data_head: AtomicU64,
    data_tail: AtomicU64,
    data: Vec<u64>,
    /// What each ring word must hold once written (by position, unmasked).
    ghost: std::collections::BTreeMap<u64, u64>,
    reserved_end: u64,
}

impl Clone for World {
    fn clone(&self) -> Self {
        let o = Ordering::SeqCst;
        World {
            state: AtomicU64::new(self.state.load(o)),
            data_head: AtomicU64::new(self.data_head.load(o)),
            data_tail: AtomicU64::new(self.data_tail.load(o)),
            data: self.data.clone(),
            ghost: self.ghost.clone(),
            reserved_end: self.reserved_end,
        }
    }
}

#[derive(Clone, Debug)]
enum Writer {
    Reserve,
    Write {
        start: u64,
        word: u64,
    },
    /// put_handle: load the state word.
    PutLoad,
    /// Alone in the nest: load data_head.
    PutLoadHead {
        cur: u64,
    },
    /// Store the advanced data_head.
    PutStoreHead {
        cur: u64,
        new: u64,
    },
    /// Leave: CAS the state word, or look again.
    PutCas {
        cur: u64,
    },
    Done,
}

#[derive(Clone, Debug)]
enum Consumer {
    LoadHead { rounds: u32 },
    Read { head: u64, rounds: u32 },
    StoreTail { head: u64, rounds: u32 },
    Done,
}

#[derive(Clone)]
struct Sim {
    world: World,
    writers: Vec<(u64, Writer)>,
    consumer: Consumer,
    tail: u64,
    last_head: u64,
    words_per_record: u64,
}

impl Sim {
    fn new(writers: u64, reads: u32, words_per_record: u64) -> Self {
        Sim {
            world: World {
                state: AtomicU64::new(START),
                data_head: AtomicU64::new(START),
                data_tail: AtomicU64::new(START),
                data: vec![0; (DATA_SIZE / 8) as usize],
                ghost: Default::default(),
                reserved_end: START,
            },
            writers: (0..writers).map(|w| (w, Writer::Reserve)).collect(),
            consumer: if reads == 0 {
                Consumer::Done
            } else {
                Consumer::LoadHead { rounds: reads }
            },
            tail: START,
            last_head: START,
            words_per_record,
        }
    }

    /// The actors that can take a step: writers by index, then the consumer.
    fn runnable(&self) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.writers.len())
            .filter(|&i| !matches!(self.writers[i].1, Writer::Done))
            .collect();
        if !matches!(self.consumer, Consumer::Done) {
            v.push(self.writers.len());
        }
        v
    }

    fn word(&mut self, pos: u64) -> &mut u64 {
        &mut self.world.data[((pos & (DATA_SIZE - 1)) / 8) as usize]
    }

    fn step(&mut self, actor: usize) {
        let o = Ordering::SeqCst;
        if actor == self.writers.len() {
            self.consumer = match self.consumer.clone() {
                Consumer::LoadHead { rounds } => {
                    let head = protocol::load_head(&self.world.data_head);
                    Consumer::Read { head, rounds }
                }
                Consumer::Read { head, rounds } => {
                    let mut pos = self.tail;
                    while pos != head {
                        let want = self.world.ghost[&pos];
                        assert_eq!(
                            *self.word(pos),
                            want,
                            "consumer read an unwritten word at {pos}"
                        );
                        pos += 8;
                    }
                    Consumer::StoreTail { head, rounds }
                }
                Consumer::StoreTail { head, rounds } => {
                    protocol::store_tail(&self.world.data_tail, head);
                    self.tail = head;
                    if rounds > 1 {
                        Consumer::LoadHead { rounds: rounds - 1 }
                    } else {
                        Consumer::Done
                    }
                }
                Consumer::Done => unreachable!(),
            };
        } else {
            let (id, w) = self.writers[actor].clone();
            let words = self.words_per_record;
            let size = words * 8;
            let next = match w {
                Writer::Reserve => {
                    let r = protocol::reserve(
                        &self.world.state,
                        &self.world.data_tail,
                        size,
                        DATA_SIZE,
                        true,
                        false,
                    )
                    .expect("the model's ring has room for every record");
                    let start = self.world.reserved_end;
                    assert_eq!(r.start, start & POS_MASK);
                    self.world.reserved_end += size;
                    for k in 0..words {
                        self.world.ghost.insert(start + 8 * k, (id + 1) << 8 | k);
                    }
                    Writer::Write { start, word: 0 }
                }
                Writer::Write { start, word } => {
                    *self.word(start + 8 * word) = (id + 1) << 8 | word;
                    if word + 1 == words {
                        Writer::PutLoad
                    } else {
                        Writer::Write {
                            start,
                            word: word + 1,
                        }
                    }
                }
                Writer::PutLoad => {
                    let cur = self.world.state.load(o);
                    if protocol::state_nest(cur) == 1 {
                        Writer::PutLoadHead { cur }
                    } else {
                        Writer::PutCas { cur }
                    }
                }
                Writer::PutLoadHead { cur } => {
                    let head = self.world.data_head.load(o);
                    match protocol::advance_head(head, protocol::state_pos(cur), false) {
                        Some(new) => Writer::PutStoreHead { cur, new },
                        None => Writer::PutCas { cur },
                    }
                }
                Writer::PutStoreHead { cur, new } => {
                    self.world.data_head.store(new, o);
                    Writer::PutCas { cur }
                }
                Writer::PutCas { cur } => {
                    if Smp::cas(&self.world.state, cur, cur - protocol::NEST_ONE, o).is_ok() {
                        Writer::Done
                    } else {
                        Writer::PutLoad
                    }
                }
                Writer::Done => unreachable!(),
            };
            self.writers[actor].1 = next;
        }
        // Invariants after every step.
        let head = self.world.data_head.load(o);
        assert!(
            head >= self.last_head,
            "data_head went back: {} -> {head}",
            self.last_head
        );
        self.last_head = head;
        let mut pos = self.tail;
        while pos != head {
            let want = self.world.ghost.get(&pos).copied();
            assert_eq!(
                Some(*self.word(pos)),
                want,
                "published word at {pos} is unwritten"
            );
            pos += 8;
        }
    }

    fn finished(&self) -> bool {
        self.runnable().is_empty()
    }

    fn check_end(&self) {
        let head = self.world.data_head.load(Ordering::SeqCst);
        assert_eq!(
            head, self.world.reserved_end,
            "data_head covers every reservation"
        );
        assert_eq!(
            protocol::state_nest(self.world.state.load(Ordering::SeqCst)),
            0
        );
    }
}

/// Every interleaving below `sim`; returns how many were run.
fn explore(sim: &Sim) -> u64 {
    if sim.finished() {
        sim.check_end();
        return 1;
    }
    let mut n = 0;
    for actor in sim.runnable() {
        let mut next = sim.clone();
        next.step(actor);
        n += explore(&next);
    }
    n
}

#[test]
fn every_interleaving_of_two_writers_and_a_consumer_is_safe() {
    let n = explore(&Sim::new(2, 1, 1));
    // Two writers of 5-7 steps and a consumer of 3: many thousands of schedules.
    assert!(n > 10_000, "{n} interleavings");
}

#[test]
fn random_interleavings_of_three_writers_and_two_reads_are_safe() {
    // A small xorshift: reproducible schedules without a dependency.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..20_000 {
        let mut sim = Sim::new(3, 2, 2);
        while !sim.finished() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let r = sim.runnable();
            sim.step(r[(seed % r.len() as u64) as usize]);
        }
        sim.check_end();
    }
}

#[test]
fn a_signal_handler_that_runs_to_completion_inside_a_writer_is_safe() {
    // The nested case the kernel's nest count is for: writer 1 runs all its
    // steps between any two steps of writer 0.
    for cut in 0..8 {
        let mut sim = Sim::new(2, 1, 2);
        for _ in 0..cut {
            if !matches!(sim.writers[0].1, Writer::Done) {
                sim.step(0);
            }
        }
        while !matches!(sim.writers[1].1, Writer::Done) {
            sim.step(1);
        }
        while !sim.finished() {
            let r = sim.runnable();
            sim.step(r[0]);
        }
        sim.check_end();
    }
}
