//! A hand-stepped model check of the data area's head/tail protocol, run
//! by every `cargo test` (loom's check of the memory orderings on real
//! atomics is `tests/loom.rs`, under `--cfg loom`).
//!
//! Writers and a consumer run the real `perfaux_ring::protocol` code —
//! `reserve_with`, `put_handle_with` (the kernel's
//! `perf_output_put_handle()`), `load_head`, `store_tail` — over [`Word`],
//! an [`AtomicWord`] whose every action (load, store, CAS) is one step
//! that a scheduler interleaves with the other actors' steps. Rust code
//! cannot be suspended mid-call, so a call is stepped by running it again
//! from its start for each of its steps: the actions it already took are
//! answered from its log (and checked to be the same actions, the code
//! being deterministic), the next one acts on the shared world, and any
//! after it are answered without acting on the world (a load or
//! fetch_sub sees the word's value, a CAS succeeds, a store is dropped),
//! so that the call returns at once; that run's result is dropped. The call is over when it returns with no such answer. Between
//! the calls a writer stores its record's words (one step each) and the
//! consumer reads the published ones.
//!
//! The world is sequentially consistent (an action sees the latest value)
//! and tracks happens-before as the Rust (C++20) memory model defines it,
//! with vector clocks: an Acquire load or RMW joins the clock of the
//! release sequence it reads from, a Release store heads a new one, a
//! Relaxed store ends it, an RMW continues it. A data word whose store
//! does not happen-before a read of it (or whose read does not
//! happen-before a later store) is a data race and fails the check, so an
//! ordering made too weak in the real code fails here as a missing step
//! does.
//!
//! Schedules: every interleaving of two writers and a consumer (each
//! `reserve` taken as one step, `put_handle` stepped action by action),
//! random ones for three writers and two reads (every action a step), and
//! a "signal handler" writer run to completion between two steps of
//! another. After every step:
//!
//! - `data_head` never goes back;
//! - every word below `data_head` was written by the writer that reserved
//!   it (no published byte is unwritten);
//! - the consumer reads exactly what was written, after it was written;
//!
//! and when all have finished, `data_head` covers every reservation and
//! the nest is empty.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use perfaux_ring::protocol::{self, AtomicWord, POS_MASK, Smp};
use perfaux_ring::sync::Ordering;

const DATA_SIZE: u64 = 64;
const START: u64 = 48;

/// The shared words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loc {
    State = 0,
    DataHead = 1,
    DataTail = 2,
}

/// One atomic action, as the real code asked for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Load(Loc, Ordering),
    Store(Loc, u64, Ordering),
    Cas {
        loc: Loc,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    },
    FetchSub(Loc, u64, Ordering),
}

/// An action and what it returned (`Err` only for a failed CAS).
type Logged = (Action, Result<u64, u64>);

/// A vector clock: one counter per actor (writers, then the consumer).
type Clock = Vec<u32>;

fn join(into: &mut Clock, from: &Clock) {
    for (a, b) in into.iter_mut().zip(from) {
        *a = (*a).max(*b);
    }
}

fn acquires(o: Ordering) -> bool {
    matches!(o, Ordering::Acquire | Ordering::AcqRel | Ordering::SeqCst)
}

fn releases(o: Ordering) -> bool {
    matches!(o, Ordering::Release | Ordering::AcqRel | Ordering::SeqCst)
}

/// A shared word: its value and the clock an Acquire reading it joins.
#[derive(Clone, Debug)]
struct Shared {
    value: u64,
    release: Clock,
}

/// A ring word: its value, who stored it at which of their clock ticks,
/// and at which tick each actor last read it (0: not since the store).
#[derive(Clone, Debug)]
struct DataWord {
    value: u64,
    store: Option<(usize, u32)>,
    reads: Vec<u32>,
}

/// The shared memory, the actors' clocks, and the ghost state the checks use.
#[derive(Clone, Debug)]
struct World {
    shared: [Shared; 3],
    data: Vec<DataWord>,
    clocks: Vec<Clock>,
    /// What each ring word must hold once written (by position, unmasked).
    ghost: BTreeMap<u64, u64>,
    reserved_end: u64,
}

impl World {
    fn new(actors: usize) -> Self {
        let shared = |value| Shared {
            value,
            release: vec![0; actors],
        };
        World {
            shared: [shared(START), shared(START), shared(START)],
            data: vec![
                DataWord {
                    value: 0,
                    store: None,
                    reads: vec![0; actors],
                };
                (DATA_SIZE / 8) as usize
            ],
            // Ticks start at 1 so that 0 means "never".
            clocks: (0..actors)
                .map(|a| (0..actors).map(|b| u32::from(a == b)).collect())
                .collect(),
            ghost: BTreeMap::new(),
            reserved_end: START,
        }
    }

    fn value(&self, loc: Loc) -> u64 {
        self.shared[loc as usize].value
    }

    fn index(pos: u64) -> usize {
        ((pos & (DATA_SIZE - 1)) / 8) as usize
    }

    /// Performs `action` for actor `a`, with its happens-before effects.
    fn act(&mut self, a: usize, action: Action) -> Result<u64, u64> {
        let clocks = &mut self.clocks;
        let out = match action {
            Action::Load(loc, o) => {
                let s = &self.shared[loc as usize];
                if acquires(o) {
                    join(&mut clocks[a], &s.release);
                }
                Ok(s.value)
            }
            Action::Store(loc, v, o) => {
                let s = &mut self.shared[loc as usize];
                s.value = v;
                // A store heads a new release sequence (Release) or ends
                // the old one (Relaxed).
                s.release = if releases(o) {
                    clocks[a].clone()
                } else {
                    vec![0; clocks.len()]
                };
                Ok(0)
            }
            Action::Cas {
                loc,
                current,
                new,
                success,
                failure,
            } => {
                let s = &mut self.shared[loc as usize];
                if s.value == current {
                    rmw(&mut clocks[a], s, success, new);
                    Ok(current)
                } else {
                    if acquires(failure) {
                        join(&mut clocks[a], &s.release);
                    }
                    Err(s.value)
                }
            }
            Action::FetchSub(loc, v, o) => {
                let s = &mut self.shared[loc as usize];
                let old = s.value;
                rmw(&mut clocks[a], s, o, old.wrapping_sub(v));
                Ok(old)
            }
        };
        self.clocks[a][a] += 1;
        out
    }

    /// Writer `a` stores `value` into the ring word at `pos`.
    fn store_data(&mut self, a: usize, pos: u64, value: u64) {
        let clock = &self.clocks[a];
        let w = &mut self.data[Self::index(pos)];
        if let Some((b, tick)) = w.store {
            assert!(
                b == a || clock[b] >= tick,
                "writer {a} overwrote writer {b}'s word at {pos} with no happens-before"
            );
        }
        for (r, &tick) in w.reads.iter().enumerate() {
            assert!(
                r == a || tick == 0 || clock[r] >= tick,
                "writer {a} overwrote the word at {pos} that actor {r} read, with no \
                 happens-before (data_tail's release/acquire)"
            );
        }
        w.value = value;
        w.store = Some((a, clock[a]));
        w.reads.fill(0);
        self.clocks[a][a] += 1;
    }

    /// Actor `a` reads the ring word at `pos`.
    fn read_data(&mut self, a: usize, pos: u64) -> u64 {
        let clock = &self.clocks[a];
        let w = &mut self.data[Self::index(pos)];
        if let Some((b, tick)) = w.store {
            assert!(
                b == a || clock[b] >= tick,
                "actor {a} read the word at {pos} that writer {b} stored, with no \
                 happens-before: an ordering of the protocol is too weak"
            );
        }
        w.reads[a] = clock[a];
        self.clocks[a][a] += 1;
        w.value
    }
}

/// The successful RMW part of a CAS or fetch_sub: acquire what the release
/// sequence carries, store, and continue the sequence (adding this actor's
/// clock if the RMW releases).
fn rmw(clock: &mut Clock, s: &mut Shared, o: Ordering, new: u64) {
    if acquires(o) {
        join(clock, &s.release);
    }
    s.value = new;
    if releases(o) {
        join(&mut s.release, clock);
    }
}

/// One run of a real protocol call by `actor`, through its `log`.
struct Run<'a> {
    world: RefCell<&'a mut World>,
    actor: usize,
    log: RefCell<&'a mut Vec<Logged>>,
    /// Actions the call has asked for in this run.
    issued: Cell<usize>,
    /// Actions this run may still perform on the world.
    budget: Cell<usize>,
    /// Actions answered past the budget.
    beyond: Cell<usize>,
}

impl Run<'_> {
    fn act(&self, action: Action) -> Result<u64, u64> {
        let i = self.issued.get();
        self.issued.set(i + 1);
        let mut log = self.log.borrow_mut();
        if let Some(&(logged, out)) = log.get(i) {
            assert_eq!(logged, action, "the call's action {i} differs on replay");
            return out;
        }
        if self.budget.get() > 0 {
            self.budget.set(self.budget.get() - 1);
            let out = self.world.borrow_mut().act(self.actor, action);
            log.push((action, out));
            return out;
        }
        // Past this step: answer without acting, so that the call returns
        // at once (a successful CAS ends every loop of the protocol).
        self.beyond.set(self.beyond.get() + 1);
        assert!(
            self.beyond.get() <= 16,
            "the call does not return on answers that end it"
        );
        let world = self.world.borrow();
        match action {
            Action::Load(loc, _) | Action::FetchSub(loc, ..) => Ok(world.value(loc)),
            Action::Cas { current, .. } => Ok(current),
            Action::Store(..) => Ok(0),
        }
    }
}

/// A shared word as the real code sees it: each action goes through the run.
struct Word<'r, 'a> {
    run: &'r Run<'a>,
    loc: Loc,
}

fn either(r: Result<u64, u64>) -> u64 {
    match r {
        Ok(v) | Err(v) => v,
    }
}

impl AtomicWord for Word<'_, '_> {
    fn load(&self, order: Ordering) -> u64 {
        either(self.run.act(Action::Load(self.loc, order)))
    }

    fn store(&self, v: u64, order: Ordering) {
        self.run.act(Action::Store(self.loc, v, order)).ok();
    }

    fn compare_exchange_weak(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        self.run.act(Action::Cas {
            loc: self.loc,
            current,
            new,
            success,
            failure,
        })
    }

    fn fetch_sub(&self, v: u64, order: Ordering) -> u64 {
        either(self.run.act(Action::FetchSub(self.loc, v, order)))
    }
}

/// The shared words a call gets: the state word, `data_head`, `data_tail`.
struct Words<'r, 'a> {
    state: Word<'r, 'a>,
    head: Word<'r, 'a>,
    tail: Word<'r, 'a>,
}

/// One step of a real call by `actor` (all its steps with `whole`): runs
/// `call` from its start, replaying `log`. `Some(result)` once the call
/// has returned with every action real.
fn step_call<T>(
    world: &mut World,
    actor: usize,
    log: &mut Vec<Logged>,
    whole: bool,
    call: impl FnOnce(&Words<'_, '_>) -> T,
) -> Option<T> {
    let taken = log.len();
    let run = Run {
        world: RefCell::new(world),
        actor,
        log: RefCell::new(log),
        issued: Cell::new(0),
        budget: Cell::new(if whole { usize::MAX } else { 1 }),
        beyond: Cell::new(0),
    };
    let words = Words {
        state: Word {
            run: &run,
            loc: Loc::State,
        },
        head: Word {
            run: &run,
            loc: Loc::DataHead,
        },
        tail: Word {
            run: &run,
            loc: Loc::DataTail,
        },
    };
    let out = call(&words);
    assert!(
        run.log.borrow().len() > taken,
        "a step of the call took no action"
    );
    (run.beyond.get() == 0).then_some(out)
}

#[derive(Clone, Debug)]
enum Writer {
    /// `protocol::reserve_with`, the actions taken so far.
    Reserve(Vec<Logged>),
    Write {
        start: u64,
        word: u64,
    },
    /// `protocol::put_handle_with`, the actions taken so far.
    Put(Vec<Logged>),
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
    /// Step `reserve` action by action (else it is one step).
    step_reserve: bool,
}

impl Sim {
    fn new(writers: u64, reads: u32, words_per_record: u64, step_reserve: bool) -> Self {
        Sim {
            world: World::new(writers as usize + 1),
            writers: (0..writers)
                .map(|w| (w, Writer::Reserve(Vec::new())))
                .collect(),
            consumer: if reads == 0 {
                Consumer::Done
            } else {
                Consumer::LoadHead { rounds: reads }
            },
            tail: START,
            last_head: START,
            words_per_record,
            step_reserve,
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

    /// The ring word at `pos`, as the checks see it (not a read by an actor).
    fn ghost_read(&self, pos: u64) -> u64 {
        self.world.data[World::index(pos)].value
    }

    fn step(&mut self, actor: usize) {
        if actor == self.writers.len() {
            self.step_consumer(actor);
        } else {
            self.step_writer(actor);
        }
        // Invariants after every step.
        let head = self.world.value(Loc::DataHead);
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
                Some(self.ghost_read(pos)),
                want,
                "published word at {pos} is unwritten"
            );
            pos += 8;
        }
    }

    fn step_consumer(&mut self, actor: usize) {
        let world = &mut self.world;
        self.consumer = match self.consumer.clone() {
            Consumer::LoadHead { rounds } => {
                let head = step_call(world, actor, &mut Vec::new(), true, |w| {
                    protocol::load_head(&w.head)
                })
                .expect("a whole call returns");
                Consumer::Read { head, rounds }
            }
            Consumer::Read { head, rounds } => {
                let mut pos = self.tail;
                while pos != head {
                    let want = world.ghost[&pos];
                    let got = world.read_data(actor, pos);
                    assert_eq!(got, want, "consumer read an unwritten word at {pos}");
                    pos += 8;
                }
                Consumer::StoreTail { head, rounds }
            }
            Consumer::StoreTail { head, rounds } => {
                step_call(world, actor, &mut Vec::new(), true, |w| {
                    protocol::store_tail(&w.tail, head)
                })
                .expect("a whole call returns");
                self.tail = head;
                if rounds > 1 {
                    Consumer::LoadHead { rounds: rounds - 1 }
                } else {
                    Consumer::Done
                }
            }
            Consumer::Done => unreachable!(),
        };
    }

    fn step_writer(&mut self, actor: usize) {
        let (id, w) = self.writers[actor].clone();
        let words = self.words_per_record;
        let size = words * 8;
        let world = &mut self.world;
        let next = match w {
            Writer::Reserve(mut log) => {
                let whole = !self.step_reserve;
                let done = step_call(world, actor, &mut log, whole, |w| {
                    protocol::reserve_with::<Smp, _>(
                        &w.state, &w.tail, size, DATA_SIZE, true, false,
                    )
                });
                match done {
                    None => Writer::Reserve(log),
                    Some(r) => {
                        let r = r.expect("the model's ring has room for every record");
                        // The reserving CAS was this step's action: no other
                        // actor has reserved since.
                        let start = world.reserved_end;
                        assert_eq!(r.start, start & POS_MASK);
                        world.reserved_end += size;
                        for k in 0..words {
                            world.ghost.insert(start + 8 * k, (id + 1) << 8 | k);
                        }
                        Writer::Write { start, word: 0 }
                    }
                }
            }
            Writer::Write { start, word } => {
                world.store_data(actor, start + 8 * word, (id + 1) << 8 | word);
                if word + 1 == words {
                    Writer::Put(Vec::new())
                } else {
                    Writer::Write {
                        start,
                        word: word + 1,
                    }
                }
            }
            Writer::Put(mut log) => {
                let done = step_call(world, actor, &mut log, false, |w| {
                    protocol::put_handle_with::<Smp, _>(&w.state, &w.head, false)
                });
                match done {
                    None => Writer::Put(log),
                    Some(_published) => Writer::Done,
                }
            }
            Writer::Done => unreachable!(),
        };
        self.writers[actor].1 = next;
    }

    fn finished(&self) -> bool {
        self.runnable().is_empty()
    }

    fn check_end(&self) {
        assert_eq!(
            self.world.value(Loc::DataHead),
            self.world.reserved_end,
            "data_head covers every reservation"
        );
        assert_eq!(protocol::state_nest(self.world.value(Loc::State)), 0);
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
    let n = explore(&Sim::new(2, 1, 1, false));
    // Two writers of 4-6 steps (more when a leaving CAS fails and
    // put_handle looks again) and a consumer of 3: about 211,000 schedules.
    assert!(n > 100_000, "{n} interleavings");
}

#[test]
fn random_interleavings_of_three_writers_and_two_reads_are_safe() {
    // A small xorshift: reproducible schedules without a dependency.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..20_000 {
        let mut sim = Sim::new(3, 2, 2, true);
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
    let mut cuts = 0;
    for cut in 0.. {
        let mut sim = Sim::new(2, 1, 2, true);
        for _ in 0..cut {
            sim.step(0);
        }
        if matches!(sim.writers[0].1, Writer::Done) {
            break;
        }
        while !matches!(sim.writers[1].1, Writer::Done) {
            sim.step(1);
        }
        while !sim.finished() {
            let r = sim.runnable();
            sim.step(r[0]);
        }
        sim.check_end();
        cuts += 1;
    }
    // reserve (3 actions), two stores, put_handle (at least 2 actions).
    assert!(cuts >= 7, "writer 0 was interrupted at {cuts} points");
}
