//! Async tasks on a multi-threaded tokio runtime, each `instrument`ed with a span: the span is
//! entered at every poll, on whichever worker polls it, and each poll is a call in that
//! worker's trace. Every poll, every inner span and every event equals what a counting layer
//! beside it saw. (One test in this binary: it sets the global default subscriber, which the
//! runtime's worker threads use.)

mod common;

use std::collections::BTreeSet;

use common::Counting;
use perfaux_tracing::{EVENT, Recording, RecordingOptions};
use tracing::{Instrument, debug_span, info, info_span};
use tracing_subscriber::prelude::*;

const TASKS: u64 = 40;
const STEPS: u64 = 10;

#[test]
fn every_poll_of_every_task_is_a_call_on_the_worker_that_polled_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("async.data");
    let counting = Counting::default();
    tracing_subscriber::registry()
        .with(perfaux_tracing::layer())
        .with(counting.clone())
        .init();
    let rec = Recording::start(&file, RecordingOptions::default()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(3)
        .build()
        .unwrap();
    rt.block_on(async {
        let handles: Vec<_> = (0..TASKS)
            .map(|task| {
                tokio::spawn(
                    async move {
                        for i in 0..STEPS {
                            tokio::task::yield_now().await;
                            let _s = debug_span!("step").entered();
                            info!(task, i, "stepped");
                        }
                    }
                    .instrument(info_span!("task", task)),
                )
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
    });
    // The workers exit here, before the recording ends: their traces stay.
    drop(rt);
    let summary = rec.finish().unwrap();
    assert_eq!(summary.lost, 0, "{summary:?}");

    let seen = common::read(&file);
    let counted = counting.enters.lock().unwrap().clone();
    // Each task: its first poll, one per yield, and `Instrumented`'s drop, which enters the
    // span to drop the future inside it.
    assert_eq!(
        counted.get("async_tasks::task"),
        Some(&(TASKS * (STEPS + 2)))
    );
    assert_eq!(counted.get("async_tasks::step"), Some(&(TASKS * STEPS)));
    assert_eq!(
        seen.enters,
        counted,
        "calls entered (polled on threads {:?})",
        seen.threads.get("async_tasks::task")
    );
    assert_eq!(seen.exits, counted, "calls returned");
    let events = seen.uevents.iter().filter(|(t, _)| *t == EVENT).count() as u64;
    assert_eq!(events, *counting.events.lock().unwrap());
    assert_eq!(events, TASKS * STEPS);
    let fields: BTreeSet<&str> = seen
        .uevents
        .iter()
        .filter(|(_, p)| p.starts_with("span=task "))
        .map(|(_, p)| p.as_str())
        .collect();
    assert_eq!(fields.len() as u64, TASKS, "each task's fields once");
}
