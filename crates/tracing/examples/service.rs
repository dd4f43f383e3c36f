//! A small service that records its own spans and events with perfaux-tracing: worker
//! threads serve requests (a span each, with nested spans and events), and a slow request
//! now and then. Read the file with `perfaux report`, `perfaux script`, or `perf script`.
//!
//! cargo run --release -p perfaux-tracing --example service -- service.data
//!
//! The same binary under `perfaux record -o service.data -- ./service` is recorded by perfaux
//! record instead (its own recording then declines to start, and says so).

use std::time::Duration;

use tracing::{debug_span, info, info_span, warn};
use tracing_subscriber::prelude::*;

fn lookup(key: u64) -> u64 {
    let _s = debug_span!("lookup", key).entered();
    (0..key % 64).fold(key, |a, b| a.rotate_left(5) ^ b)
}

fn serve(worker: u32, req: u64) -> u64 {
    let _s = info_span!("request", worker, req).entered();
    let v = lookup(req);
    if req.is_multiple_of(97) {
        let _slow = info_span!("slow_path").entered();
        std::thread::sleep(Duration::from_millis(2));
        warn!(req, "slow request");
    }
    info!(status = 200, "done");
    v
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "service.data".into());
    let recording = match perfaux_tracing::Recording::start(&out, Default::default()) {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("service: {e}");
            None
        }
    };
    tracing_subscriber::registry()
        .with(perfaux_tracing::layer())
        .init();
    let workers: Vec<_> = (0..3)
        .map(|w| {
            std::thread::Builder::new()
                .name(format!("worker{w}"))
                .spawn(move || (0..1000).fold(0u64, |a, r| a.wrapping_add(serve(w, r))))
        })
        .collect::<Result<_, _>>()?;
    let sum = workers
        .into_iter()
        .fold(0u64, |a, h| a.wrapping_add(h.join().unwrap()));
    if let Some(recording) = recording {
        let s = recording.finish()?;
        println!(
            "{out}: {} bytes of trace, {} records, {} lost (checksum {sum:x})",
            s.aux_bytes, s.records, s.lost
        );
    }
    Ok(())
}
