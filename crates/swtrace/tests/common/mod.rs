//! Shared helpers of the integration tests: a pool of probes, random call trees, and a writer
//! over a heap buffer.
#![allow(dead_code)]

use perfaux_swtrace::decode::Event;
use perfaux_swtrace::{AuxRegion, Probe, WriterConfig, writer};
use proptest::prelude::*;

/// 160 probes, so that some ids need the long ENTER form (ids from 128).
pub static POOL: [Probe; 160] = [const { Probe::new("pool") }; 160];

/// Registers the whole pool (ids in pool order when nothing else registered first).
pub fn register_pool() {
    for p in &POOL {
        p.id().expect("probe table lock");
    }
}

/// A call of `POOL[probe]` making the calls in `children`.
#[derive(Clone, Debug)]
pub struct Call {
    pub probe: usize,
    pub children: Vec<Call>,
}

pub fn tree_strategy(max_depth: u32) -> impl Strategy<Value = Vec<Call>> {
    let leaf = (0..POOL.len()).prop_map(|probe| Call {
        probe,
        children: Vec::new(),
    });
    let call = leaf.prop_recursive(max_depth, 64, 4, |inner| {
        ((0..POOL.len()), prop::collection::vec(inner, 0..4))
            .prop_map(|(probe, children)| Call { probe, children })
    });
    prop::collection::vec(call, 1..6)
}

/// Runs the calls through the real probes.
pub fn run(calls: &[Call]) {
    for c in calls {
        let _g = POOL[c.probe].enter();
        run(&c.children);
    }
}

/// (is_enter, id, depth) of each call and return `run` makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Enter(u32, u32),
    Exit(u32, u32),
}

pub fn expected(calls: &[Call], depth: u32, out: &mut Vec<Step>) {
    for c in calls {
        let id = POOL[c.probe].id().unwrap().0;
        out.push(Step::Enter(id, depth));
        expected(&c.children, depth + 1, out);
        out.push(Step::Exit(id, depth));
    }
}

/// The call/return steps of decoded events (ids of exits the decoder does not know are 0).
pub fn steps(events: &[Event]) -> Vec<Step> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Enter { id, depth, .. } => Some(Step::Enter(*id, *depth)),
            Event::Exit { id, depth, .. } => Some(Step::Exit(id.unwrap_or(0), *depth)),
            _ => None,
        })
        .collect()
}

/// Event times in order must never go backwards.
pub fn assert_times_monotonic(events: &[Event]) {
    let mut last = 0;
    for e in events {
        let Some(t) = e.time() else { continue };
        assert!(t >= last, "time went back from {last} to {t} at {e:?}");
        last = t;
    }
}

/// Traces `f` on this thread in full-trace mode over a fresh buffer of `size` bytes (large
/// enough that it does not fill) and returns the stream.
pub fn trace_full(size: usize, sync_period: u32, f: impl FnOnce()) -> Vec<u8> {
    trace_full_with(size, |cfg| cfg.sync_period = sync_period, f)
}

/// As [`trace_full`], with the configuration adjusted by `configure`.
pub fn trace_full_with(
    size: usize,
    configure: impl FnOnce(&mut WriterConfig),
    f: impl FnOnce(),
) -> Vec<u8> {
    let mut aux = vec![0u8; size];
    // SAFETY: `aux` outlives the writer, which is uninstalled before it is read or dropped.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
    let mut cfg = WriterConfig::full_trace(region, None);
    configure(&mut cfg);
    writer::install(cfg).unwrap();
    f();
    let status = writer::uninstall().unwrap();
    assert!(!status.full_stopped, "buffer of {size} bytes filled up");
    aux.truncate(status.aux_head as usize);
    aux
}
