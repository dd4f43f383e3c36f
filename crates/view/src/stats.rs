//! The aggregates behind `perfaux report`: per-function call statistics
//! (uftrace report), the call tree (uftrace graph, flame graphs), the
//! sample histogram (perf report), uevent counts, pause/resume windows and
//! losses. Everything here grows with distinct functions, call paths,
//! threads and uevent types, never with the number of events.

use std::collections::BTreeMap;

// The per-call lookups hash small integer keys: FxHash, not SipHash.
use rustc_hash::FxHashMap as HashMap;

use crate::event::{FuncId, LostKind, Names, Sink, ViewEvent};

/// One function's calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FuncStat {
    /// Calls that began (each ENTER).
    pub calls: u64,
    /// Calls whose time is known (entered and returned inside the trace;
    /// only these count in the times).
    pub timed: u64,
    /// Sum of the calls' durations, ns.
    pub total: u64,
    /// Sum of the durations minus their callees', ns.
    pub self_time: u64,
    /// Shortest call, ns.
    pub min: u64,
    /// Longest call, ns.
    pub max: u64,
}

/// A node of the call tree: one call path.
#[derive(Clone, Debug)]
pub struct Node {
    /// The function (meaningless at the root).
    pub func: FuncId,
    /// Parent node (the root is its own parent).
    pub parent: u32,
    /// Child nodes, in first-seen order.
    pub children: Vec<u32>,
    /// Calls along this path.
    pub calls: u64,
    /// Time inside, ns.
    pub total: u64,
    /// Time inside minus callees, ns.
    pub self_time: u64,
}

/// The call tree of all threads, merged (node 0 is the root).
#[derive(Clone, Debug)]
pub struct CallTree {
    /// The nodes.
    pub nodes: Vec<Node>,
    index: HashMap<(u32, FuncId), u32>,
}

impl Default for CallTree {
    fn default() -> Self {
        CallTree {
            nodes: vec![Node {
                func: FuncId(u32::MAX),
                parent: 0,
                children: Vec::new(),
                calls: 0,
                total: 0,
                self_time: 0,
            }],
            index: HashMap::default(),
        }
    }
}

impl CallTree {
    /// The child of `parent` for `func`, made on first use.
    pub fn child(&mut self, parent: u32, func: FuncId) -> u32 {
        if let Some(&n) = self.index.get(&(parent, func)) {
            return n;
        }
        let n = self.nodes.len() as u32;
        self.nodes.push(Node {
            func,
            parent,
            children: Vec::new(),
            calls: 0,
            total: 0,
            self_time: 0,
        });
        self.nodes[parent as usize].children.push(n);
        self.index.insert((parent, func), n);
        n
    }

    /// The functions from the root to `node`, root first.
    pub fn path(&self, mut node: u32) -> Vec<FuncId> {
        let mut p = Vec::new();
        while node != 0 {
            p.push(self.nodes[node as usize].func);
            node = self.nodes[node as usize].parent;
        }
        p.reverse();
        p
    }
}

/// A histogram key of a sample (perf report's sort keys).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SampleKey {
    /// Sampling event.
    pub event: String,
    /// Thread name.
    pub comm: String,
    /// Process.
    pub pid: u32,
    /// Thread.
    pub tid: u32,
    /// Function at the sampled address.
    pub func: FuncId,
}

/// Pause/resume statistics of the trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PauseStats {
    /// Pause windows (a pause followed by its resume or the trace's end).
    pub windows: u64,
    /// Time inside them, ns.
    pub paused_time: u64,
    /// Pauses of a paused trace and resumes of a running one.
    pub dropped: u64,
}

struct Frame {
    node: u32,
    func: FuncId,
    start: u64,
    child: u64,
}

/// Everything `perfaux report` prints, gathered in one pass.
#[derive(Default)]
pub struct Collector {
    /// Per function.
    pub funcs: HashMap<FuncId, FuncStat>,
    /// Merged call tree of the traced calls.
    pub tree: CallTree,
    /// Merged tree of the sampled callchains, root first: `calls` counts
    /// the samples through a node, `self_time` the samples that end there.
    pub sample_tree: CallTree,
    /// Samples per key: (count, period sum).
    pub samples: HashMap<SampleKey, (u64, u64)>,
    /// Uevents per type: (name, count).
    pub uevents: BTreeMap<u32, (Option<String>, u64)>,
    /// Pause/resume.
    pub pauses: PauseStats,
    /// Losses per kind: (markers, count).
    pub lost: BTreeMap<&'static str, (u64, u64)>,
    /// Snapshots: (number, bytes).
    pub snapshots: (u64, u64),
    comms: HashMap<u32, String>,
    stacks: HashMap<u32, Vec<Frame>>,
    paused_since: HashMap<u32, u64>,
    last_time: HashMap<u32, u64>,
}

impl Collector {
    /// Closes the pause windows still open at the end of the pass.
    pub fn finish(&mut self) {
        for (tid, since) in std::mem::take(&mut self.paused_since) {
            let end = self.last_time.get(&tid).copied().unwrap_or(since);
            self.pauses.paused_time += end.saturating_sub(since);
        }
    }

    /// The thread's name, as the recording gave it.
    pub fn comm(&self, tid: u32) -> String {
        self.comms
            .get(&tid)
            .cloned()
            .unwrap_or_else(|| format!(":{tid}"))
    }

    fn lost(&mut self, kind: LostKind, count: u64) {
        let e = self.lost.entry(kind.name()).or_default();
        e.0 += 1;
        e.1 += count;
    }
}

impl Sink for Collector {
    fn event(&mut self, _names: &Names, ev: &ViewEvent<'_>) -> std::io::Result<()> {
        match *ev {
            ViewEvent::Comm { tid, comm, .. } => {
                self.comms.insert(tid, comm.to_owned());
            }
            ViewEvent::Enter {
                tid, time, func, ..
            } => {
                self.funcs.entry(func).or_default().calls += 1;
                let st = self.stacks.entry(tid).or_default();
                let parent = st.last().map_or(0, |f| f.node);
                let node = self.tree.child(parent, func);
                self.tree.nodes[node as usize].calls += 1;
                st.push(Frame {
                    node,
                    func,
                    start: time,
                    child: 0,
                });
            }
            ViewEvent::Exit {
                tid, time, closed, ..
            } => {
                self.last_time.insert(tid, time);
                let st = self.stacks.entry(tid).or_default();
                if let Some(f) = st.pop() {
                    let dur = time.saturating_sub(f.start);
                    let self_t = dur.saturating_sub(f.child);
                    if let Some(p) = st.last_mut() {
                        p.child += dur;
                    }
                    // A call the view closed has no known duration: it
                    // counts as a call, not in the times.
                    if !closed {
                        let s = self.funcs.entry(f.func).or_default();
                        s.min = if s.timed == 0 { dur } else { s.min.min(dur) };
                        s.max = s.max.max(dur);
                        s.timed += 1;
                        s.total += dur;
                        s.self_time += self_t;
                    }
                    let n = &mut self.tree.nodes[f.node as usize];
                    n.total += dur;
                    n.self_time += self_t;
                }
            }
            ViewEvent::Sample {
                pid,
                tid,
                event,
                period,
                stack,
                ..
            } => {
                let key = SampleKey {
                    event: event.to_owned(),
                    comm: self.comm(tid),
                    pid,
                    tid,
                    func: stack.first().copied().unwrap_or(FuncId(u32::MAX)),
                };
                let e = self.samples.entry(key).or_default();
                e.0 += 1;
                e.1 += period;
                let mut node = 0;
                for &f in stack.iter().rev() {
                    node = self.sample_tree.child(node, f);
                    self.sample_tree.nodes[node as usize].calls += 1;
                }
                self.sample_tree.nodes[node as usize].self_time += 1;
            }
            ViewEvent::Uevent { ty, type_name, .. } => {
                let e = self
                    .uevents
                    .entry(ty)
                    .or_insert_with(|| (type_name.map(str::to_owned), 0));
                e.1 += 1;
            }
            ViewEvent::PauseResume {
                tid,
                time,
                pause,
                dropped,
            } => {
                self.last_time.insert(tid, time);
                if dropped {
                    self.pauses.dropped += 1;
                } else if pause {
                    self.pauses.windows += 1;
                    self.paused_since.insert(tid, time);
                } else if let Some(since) = self.paused_since.remove(&tid) {
                    self.pauses.paused_time += time.saturating_sub(since);
                }
            }
            ViewEvent::Stopped { tid, time } => {
                self.last_time.insert(tid, time);
            }
            ViewEvent::Snapshot { bytes, .. } => {
                self.snapshots.0 += 1;
                self.snapshots.1 += bytes;
            }
            ViewEvent::Lost { kind, count, .. } => self.lost(kind, count),
        }
        Ok(())
    }
}
