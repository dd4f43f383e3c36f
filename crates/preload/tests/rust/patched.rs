// A stable-Rust program built with no instrumentation (rustc -O, std only), for
// `perfaux record -P`: calls on several threads, recursion, and panics that unwind through
// patched frames to a catch_unwind. It prints its own count of each function's calls
// ("calls NAME N"), which the test compares with the recording's.
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

static LEAF: AtomicU64 = AtomicU64::new(0);
static MID: AtomicU64 = AtomicU64::new(0);
static DEEP: AtomicU64 = AtomicU64::new(0);
static FAILS: AtomicU64 = AtomicU64::new(0);

#[inline(never)]
fn leaf(x: u64) -> u64 {
    LEAF.fetch_add(1, Ordering::Relaxed);
    black_box(x.wrapping_mul(31) ^ 7)
}

#[inline(never)]
fn mid(x: u64) -> u64 {
    MID.fetch_add(1, Ordering::Relaxed);
    leaf(x) + leaf(x + 1)
}

#[inline(never)]
fn deep(n: u64) -> u64 {
    DEEP.fetch_add(1, Ordering::Relaxed);
    if n == 0 { mid(n) } else { black_box(deep(n - 1)) + 1 }
}

#[inline(never)]
fn fails(n: u64) -> u64 {
    FAILS.fetch_add(1, Ordering::Relaxed);
    if black_box(n) % 2 == 0 {
        panic!("even {n}");
    }
    mid(n)
}

fn main() {
    let rounds: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(50);
    std::panic::set_hook(Box::new(|_| {}));
    let workers: Vec<_> = (0..3)
        .map(|t| {
            std::thread::spawn(move || {
                let mut s = 0u64;
                for i in 0..rounds {
                    s = s.wrapping_add(deep(i % 5 + t));
                }
                s
            })
        })
        .collect();
    let mut caught = 0;
    for i in 0..rounds {
        // Unwinds out of fails through deep's frames, all patched, to here.
        if std::panic::catch_unwind(|| deep(2) + fails(i)).is_err() {
            caught += 1;
        }
    }
    let sum: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    println!("sum {sum} caught {caught}");
    for (name, c) in [("leaf", &LEAF), ("mid", &MID), ("deep", &DEEP), ("fails", &FAILS)] {
        println!("calls {name} {}", c.load(Ordering::Relaxed));
    }
}
