//! Best-of-batches cost of one call through a probe, per mode: a companion to the criterion
//! bench that stays meaningful on a loaded machine (the minimum over 2000 batches of 20000
//! calls filters out the batches another process preempted).
//!
//! `cargo run --release -p perfaux-swtrace --example hotpath -- <plain|none|paused|paused-tracked|traced|rdtsc> [timestamp_every]`
//! (`paused`: the default pause, the thread not observed; `paused-tracked`: with `track_paused`)
//! (`rdtsc`: the clock read alone, for the share of a traced call its two timestamps take)

use std::hint::black_box;

use perfaux_swtrace::{AuxRegion, Probe, WriterConfig, writer};

static PROBE: Probe = Probe::new("hotpath");

#[inline(never)]
fn plain(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

#[inline(never)]
fn traced(x: u64) -> u64 {
    let _g = PROBE.enter();
    black_box(x).wrapping_mul(3)
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "traced".into());
    let every: u32 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    PROBE.id().expect("probe table lock");
    let mut aux = vec![0u8; 1 << 20];
    // SAFETY: `aux` outlives the writer, uninstalled at the end of main.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.expect("region");
    let mut cfg = WriterConfig::overwrite(region);
    cfg.timestamp_every = every;
    cfg.start_paused = mode.starts_with("paused");
    cfg.track_paused = mode == "paused-tracked";
    let with_writer = cfg.start_paused || mode == "traced";
    if with_writer {
        writer::install(cfg).expect("install");
    }
    let n = 20_000u64;
    let mut best = f64::MAX;
    let mut acc = 0u64;
    for _ in 0..2000 {
        let t = std::time::Instant::now();
        for i in 0..n {
            acc = acc.wrapping_add(match mode.as_str() {
                "plain" => plain(i),
                "rdtsc" => perfaux_swtrace::clock::tsc(),
                _ => traced(i),
            });
        }
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
    }
    if with_writer {
        writer::uninstall().expect("uninstall");
    }
    println!(
        "{mode} (timestamp_every {every}): best {best:.2} ns/call [{}]",
        acc & 1
    );
}
