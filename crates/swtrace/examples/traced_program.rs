//! A Rust program instrumented with perfaux-swtrace's probe macros, for
//! `perfaux record -- ./traced_program` (the probes go to the recorder's preload runtime, as a
//! C program's -finstrument-functions hooks do). Runs `fib(N)` on the main thread and
//! `worker(k)` on two threads, and prints how many times each function ran (the test compares
//! the call trace with it).
//!
//! Usage: traced_program [N]

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static FIB: AtomicU64 = AtomicU64::new(0);
static LEAF: AtomicU64 = AtomicU64::new(0);
static WORKER: AtomicU64 = AtomicU64::new(0);

perfaux_swtrace::traced! {
    /// The leaf every base case of `fib` calls.
    #[inline(never)]
    fn leaf(x: u64) -> u64 {
        LEAF.fetch_add(1, Relaxed);
        std::hint::black_box(x)
    }

    /// Naive Fibonacci: many short nested calls.
    #[inline(never)]
    fn fib(n: u64) -> u64 {
        FIB.fetch_add(1, Relaxed);
        if n < 2 { leaf(n) } else { fib(n - 1) + fib(n - 2) }
    }
}

/// A thread's work, with a probe by function path (`trace_fn!`).
#[inline(never)]
fn worker(k: u64) -> u64 {
    let _g = perfaux_swtrace::trace_fn!();
    WORKER.fetch_add(1, Relaxed);
    (0..k).map(leaf).sum::<u64>() + fib(8)
}

fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(15);
    let threads: Vec<_> = (1..=2u64)
        .map(|i| std::thread::spawn(move || worker(10 * i)))
        .collect();
    for t in threads {
        t.join().expect("worker");
    }
    println!("fib({n}) = {}", fib(n));
    println!("calls fib {}", FIB.load(Relaxed));
    println!("calls leaf {}", LEAF.load(Relaxed));
    println!("calls worker {}", WORKER.load(Relaxed));
}
