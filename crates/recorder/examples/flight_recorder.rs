//! An embedded flight recorder: trace a function with perfaux probes into
//! an overwrite AUX area, take a snapshot, write a perf.data that both
//! `perf script` and `perfaux script --call-trace` read.
//!
//! cargo run -p perfaux-recorder --example flight_recorder -- flight.data

use perfaux_perfdata::record_attrs::base_attr;
use perfaux_recorder::{EventSpec, Output, Recorder, RecorderOptions, pmus, synth};

fn fib(n: u32) -> u64 {
    let _probe = perfaux_swtrace::probe!("fib");
    if n < 2 {
        u64::from(n)
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "flight.data".into());
    let (pid, tid) = (std::process::id(), perfaux_core::gettid());
    // The trace PMU on this thread, its AUX area overwritten in a ring.
    let trace = EventSpec::new("swtrace//", base_attr(pmus::SWTRACE_TYPE, 0), 0);
    let opts = RecorderOptions {
        data_size: 64 << 10,
        aux_size: 64 << 10,
        overwrite: true,
    };
    let mut rec = Recorder::new(vec![trace], opts, &[tid], Output::File(out.clone().into()))?;
    synth::synth_comm(&mut rec, pid, tid as u32, "flight")?;
    rec.enable()?;
    for _ in 0..2000 {
        std::hint::black_box(fib(std::hint::black_box(8)));
    }
    rec.snapshot()?; // the last 64 KiB of calls, flagged if the ring wrapped
    let s = rec.finish()?;
    println!(
        "{out}: {} snapshot(s), {} bytes of trace",
        s.snapshots, s.aux_bytes
    );
    Ok(())
}
