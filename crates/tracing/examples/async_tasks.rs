//! Async tasks on a multi-threaded tokio runtime, each `instrument`ed with a span that is
//! entered at every poll, on whichever worker polls it. Each poll is a call of its own in that
//! worker's trace, tagged with the span's id: the exports link the polls of one task
//! (Perfetto flows, Chrome flow events).
//!
//! cargo run -p perfaux-tracing --example async_tasks -- tasks.data
//! perfaux export -F perfetto -i tasks.data -o tasks.perfetto-trace
//!
//! Under `perfaux record -o tasks.data -- ./async_tasks` the recorder records the same spans.

use tracing::{Instrument, info, info_span};
use tracing_subscriber::prelude::*;

const TASKS: u64 = 8;
const STEPS: u64 = 5;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "tasks.data".into());
    let recording = match perfaux_tracing::Recording::start(&out, Default::default()) {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("async_tasks: {e}");
            None
        }
    };
    tracing_subscriber::registry()
        .with(perfaux_tracing::layer())
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(3)
        .build()?;
    rt.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                tokio::spawn(
                    async move {
                        for step in 0..STEPS {
                            tokio::task::yield_now().await;
                            info!(task, step, "stepped");
                        }
                    }
                    .instrument(info_span!("task", task)),
                )
            })
            .collect();
        for t in tasks {
            t.await?;
        }
        Ok::<_, tokio::task::JoinError>(())
    })?;
    drop(rt);
    // Each task's span: its first poll, one per yield, and the drop of its future.
    println!("tasks {TASKS} polls_each {}", STEPS + 2);
    if let Some(r) = recording {
        let s = r.finish()?;
        println!("{out}: {} bytes of trace, {} lost", s.aux_bytes, s.lost);
    }
    Ok(())
}
