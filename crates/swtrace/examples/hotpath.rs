//! Best-of-batches cost of one call through a probe, per mode, beside the uninstrumented call
//! measured in the same process: a companion to the criterion bench that stays meaningful on a
//! loaded machine (the minimum over many batches of 20000 calls filters out the batches another
//! process preempted).
//!
//! `cargo run --release -p perfaux-swtrace --example hotpath -- <plain|none|paused|paused-tracked|traced|rdtsc> [full|entry|periodic:N]`
//! (`paused`: the default pause, the thread not observed; `paused-tracked`: with `track_paused`)
//! (`rdtsc`: the clock read alone, for the share of a traced call its two timestamps take)
//!
//! The mode is chosen once, before any timing: each mode has its own timed loop
//! ([`best_batch`] monomorphised over the measured function), so no branch that picks the
//! function runs inside a timed loop. Batches of the mode and of the uninstrumented baseline
//! alternate, so both see the same machine.

use std::hint::black_box;

use perfaux_swtrace::{AuxRegion, Probe, Timing, WriterConfig, writer};

static PROBE: Probe = Probe::new("hotpath");

const CALLS: u64 = 20_000;
const ROUNDS: usize = 1000;

#[inline(never)]
fn plain(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

#[inline(never)]
fn traced(x: u64) -> u64 {
    let _g = PROBE.enter();
    black_box(x).wrapping_mul(3)
}

#[inline(never)]
fn rdtsc(_x: u64) -> u64 {
    perfaux_swtrace::clock::tsc()
}

/// One timed batch of `CALLS` calls of `f`, in ns per call.
#[inline(never)]
fn batch<F: Fn(u64) -> u64>(f: F, acc: &mut u64) -> f64 {
    let t = std::time::Instant::now();
    for i in 0..CALLS {
        *acc = acc.wrapping_add(f(black_box(i)));
    }
    t.elapsed().as_nanos() as f64 / CALLS as f64
}

/// The best batch of `f` and of the uninstrumented call, batches alternating.
fn best_batch<F: Fn(u64) -> u64 + Copy>(f: F) -> (f64, f64, u64) {
    let (mut best, mut base, mut acc) = (f64::MAX, f64::MAX, 0u64);
    for _ in 0..ROUNDS {
        best = best.min(batch(f, &mut acc));
        base = base.min(batch(plain, &mut acc));
    }
    (best, base, acc)
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "traced".into());
    let timing_arg = std::env::args().nth(2).unwrap_or_else(|| "full".into());
    let Some(timing) = Timing::parse(&timing_arg) else {
        eprintln!("unknown timing {timing_arg}: full, entry, periodic:N");
        std::process::exit(2);
    };
    PROBE.id().expect("probe table lock");
    let mut aux = vec![0u8; 1 << 20];
    // SAFETY: `aux` outlives the writer, uninstalled at the end of main.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.expect("region");
    let mut cfg = WriterConfig::overwrite(region);
    cfg.timing = timing;
    cfg.start_paused = mode.starts_with("paused");
    cfg.track_paused = mode == "paused-tracked";
    let with_writer = cfg.start_paused || mode == "traced";
    if with_writer {
        writer::install(cfg).expect("install");
    }
    let (best, base, acc) = match mode.as_str() {
        "plain" => best_batch(plain),
        "rdtsc" => best_batch(rdtsc),
        "none" | "paused" | "paused-tracked" | "traced" => best_batch(traced),
        other => {
            eprintln!("unknown mode {other}: plain, none, paused, paused-tracked, traced, rdtsc");
            std::process::exit(2);
        }
    };
    if with_writer {
        writer::uninstall().expect("uninstall");
    }
    println!(
        "{mode} (timing {}): best {best:.2} ns/call, uninstrumented {base:.2} \
         ns/call, +{:.2} ns [{}]",
        timing.name(),
        best - base,
        acc & 1
    );
}
