//! The aggregates behind `perfaux report`: per-function call statistics
//! (uftrace report), the call tree (uftrace graph, flame graphs), the
//! sample histogram (perf report), uevent counts, pause/resume windows and
//! losses. Everything here grows with distinct functions, call paths,
//! threads and uevent types, never with the number of events.

use std::collections::BTreeMap;

// The per-call lookups hash small integer keys: FxHash, not SipHash.
use rustc_hash::FxHashMap as HashMap;

use crate::event::{Call, FuncId, LostKind, Names, Sink, ViewEvent};
use crate::offcpu::{MAX_SWITCHES, OffCpu};

/// One function's calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FuncStat {
    /// Calls that began (each ENTER), once [`Collector::finish`] ran.
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
    /// Of `total`, the time its thread was switched out (the kernel's context switches;
    /// 0 in a recording without them).
    pub off_cpu: u64,
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
    /// Calls along this path (in the traced calls' tree: once
    /// [`Collector::finish`] ran).
    pub calls: u64,
    /// Time inside, ns.
    pub total: u64,
    /// Time inside minus callees, ns.
    pub self_time: u64,
    /// Of `total`, the time switched out, ns.
    pub off_total: u64,
    /// Of `self_time`, the time switched out, ns.
    pub self_off: u64,
    /// What the functions' statistics are summed from by
    /// [`Collector::finish`] (so that a return updates one node, not a node
    /// and its function).
    times: NodeTimes,
}

/// A node's returns: how many, the shortest and longest of those whose
/// time is known, and the ones the view closed (no known time: rare, so
/// the known times' sums are the node's totals less theirs, and a return
/// adds to the totals only).
#[derive(Clone, Copy, Debug)]
struct NodeTimes {
    returns: u64,
    min: u64,
    max: u64,
    closed: u64,
    closed_total: u64,
    closed_self: u64,
    /// Time of the returned calls made inside another call of the same
    /// function on their thread (recursion): in the path's total, not in
    /// the function's, which counts the outermost frames only (uftrace's
    /// report does the same; summing the nested frames counts the same
    /// time once per level).
    nested_total: u64,
    /// The switched-out time of the closed and of the nested calls, left out of the
    /// function's as their times are.
    closed_off: u64,
    nested_off: u64,
}

impl NodeTimes {
    const NEW: NodeTimes = NodeTimes {
        returns: 0,
        min: u64::MAX,
        max: 0,
        closed: 0,
        closed_total: 0,
        closed_self: 0,
        nested_total: 0,
        closed_off: 0,
        nested_off: 0,
    };
}

/// The call tree of all threads, merged (node 0 is the root).
#[derive(Clone, Debug)]
pub struct CallTree {
    /// The nodes.
    pub nodes: Vec<Node>,
    /// Each node's first [`EDGES`] children as (function, node), beside
    /// `nodes` so that a lookup reads one line, not a node's `children`
    /// then each child (a chain of dependent loads per call). Node 0 (the
    /// root, never a child) marks a free slot.
    edges: Vec<[(FuncId, u32); EDGES]>,
    index: HashMap<(u32, FuncId), u32>,
}

/// Children per node [`CallTree::child`] finds in the node's `edges`.
const EDGES: usize = 4;

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
                off_total: 0,
                self_off: 0,
                times: NodeTimes::NEW,
            }],
            edges: vec![[(FuncId(0), 0); EDGES]],
            index: HashMap::default(),
        }
    }
}

impl CallTree {
    /// The child of `parent` for `func`, made on first use.
    #[inline(always)]
    pub fn child(&mut self, parent: u32, func: FuncId) -> u32 {
        for &(f, n) in &self.edges[parent as usize] {
            if n != 0 && f == func {
                return n;
            }
        }
        self.child_beyond_edges(parent, func)
    }

    /// [`CallTree::child`] of a node with more than [`EDGES`] children, or
    /// of a new path.
    #[inline(never)]
    fn child_beyond_edges(&mut self, parent: u32, func: FuncId) -> u32 {
        // Most nodes have a handful of children: a scan of them is cheaper
        // than hashing the (parent, function) pair on every call.
        let kids = &self.nodes[parent as usize].children;
        if kids.len() <= Self::SCAN {
            for &k in kids {
                if self.nodes[k as usize].func == func {
                    return k;
                }
            }
        } else if let Some(&n) = self.index.get(&(parent, func)) {
            return n;
        }
        self.add(parent, func)
    }

    /// Children a lookup scans before it hashes.
    const SCAN: usize = 8;

    #[cold]
    fn add(&mut self, parent: u32, func: FuncId) -> u32 {
        let n = self.nodes.len() as u32;
        self.nodes.push(Node {
            func,
            parent,
            children: Vec::new(),
            calls: 0,
            total: 0,
            self_time: 0,
            off_total: 0,
            self_off: 0,
            times: NodeTimes::NEW,
        });
        self.nodes[parent as usize].children.push(n);
        self.edges.push([(FuncId(0), 0); EDGES]);
        if let Some(e) = self.edges[parent as usize].iter_mut().find(|e| e.1 == 0) {
            *e = (func, n);
        }
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
    start: u64,
    child: u64,
    /// The callees' switched-out time (with switches).
    child_off: u64,
    /// Another call of the same function is open below it.
    nested: bool,
}

/// Per-function statistics, indexed by [`FuncId`] (ids are dense: one per
/// interned name); a function is in it once it was entered.
#[derive(Clone, Debug, Default)]
pub struct FuncStats(Vec<FuncStat>);

impl FuncStats {
    /// The function's entry, made on first use.
    #[inline(always)]
    pub fn entry(&mut self, f: FuncId) -> &mut FuncStat {
        let i = f.0 as usize;
        if i >= self.0.len() {
            self.grow(i);
        }
        &mut self.0[i]
    }

    #[cold]
    fn grow(&mut self, i: usize) {
        self.0.resize(i + 1, FuncStat::default());
    }

    /// The function's statistics, if it was entered.
    pub fn get(&self, f: FuncId) -> Option<&FuncStat> {
        self.0.get(f.0 as usize).filter(|s| s.calls > 0)
    }

    /// The functions entered, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (FuncId, &FuncStat)> {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, s)| s.calls > 0)
            .map(|(i, s)| (FuncId(i as u32), s))
    }

    /// How many functions were entered.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// True when no function was entered.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|s| s.calls == 0)
    }
}

/// One thread's open calls and last time seen.
#[derive(Default)]
struct ThreadState {
    stack: Vec<Frame>,
    last_time: Option<u64>,
    /// Open calls per function (indexed by [`FuncId`]), to tell a
    /// recursive call from an outermost one.
    open: Vec<u32>,
    /// The thread's context switches.
    off: OffCpu,
}

impl ThreadState {
    /// Counts a call of `func` opening; true when one was open already.
    #[inline(always)]
    fn open_call(&mut self, func: FuncId) -> bool {
        let i = func.0 as usize;
        if i >= self.open.len() {
            self.open.resize(i + 1, 0);
        }
        self.open[i] += 1;
        self.open[i] > 1
    }

    #[inline(always)]
    fn close_call(&mut self, func: FuncId) {
        if let Some(n) = self.open.get_mut(func.0 as usize) {
            *n = n.saturating_sub(1);
        }
    }
}

/// The snapshots whose span of time the report lists (the newest ones).
pub const MAX_SNAPSHOT_SPANS: usize = 16;

/// Everything `perfaux report` prints, gathered in one pass.
#[derive(Default)]
pub struct Collector {
    /// Per function.
    pub funcs: FuncStats,
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
    /// The span of time each of the newest [`MAX_SNAPSHOT_SPANS`] snapshots holds: (first,
    /// last) time of all its threads' trace.
    pub snapshot_spans: std::collections::VecDeque<(u64, u64)>,
    /// The threads' context switches: (kept, past [`MAX_SWITCHES`] and left out of the
    /// off-CPU times).
    pub switches: (u64, u64),
    comms: HashMap<u32, String>,
    /// tid -> index into `thread_state`.
    thread_index: HashMap<u32, u32>,
    thread_state: Vec<ThreadState>,
    /// The thread of the last call (a window is one thread's calls): its
    /// tid and index, so that most calls look up no map.
    current: Option<(u32, u32)>,
    /// That thread's state, moved out of `thread_state` (whose entry is
    /// left empty) while it is current: a call reaches its stack without
    /// going through the table.
    cur: ThreadState,
    paused_since: HashMap<u32, u64>,
}

impl Collector {
    /// Sums each function's statistics from its call tree nodes and
    /// closes the pause windows still open at the end of the pass: what the
    /// statistics say holds once this ran.
    pub fn finish(&mut self) {
        // A path's calls: those that returned, and those still open.
        for n in &mut self.tree.nodes {
            n.calls = n.times.returns;
        }
        for th in self.thread_state.iter().chain([&self.cur]) {
            for f in &th.stack {
                self.tree.nodes[f.node as usize].calls += 1;
            }
        }
        self.funcs.0.clear();
        for n in &self.tree.nodes[1..] {
            let s = self.funcs.entry(n.func);
            s.calls += n.calls;
            let t = &n.times;
            let timed = t.returns - t.closed;
            if timed > 0 {
                s.min = if s.timed == 0 {
                    t.min
                } else {
                    s.min.min(t.min)
                };
                s.max = s.max.max(t.max);
                s.timed += timed;
                // The sums wrap as the node's totals do: the difference is
                // the known times' sum either way.
                s.total += n
                    .total
                    .wrapping_sub(t.closed_total)
                    .wrapping_sub(t.nested_total);
                s.self_time += n.self_time.wrapping_sub(t.closed_self);
                s.off_cpu += n
                    .off_total
                    .wrapping_sub(t.closed_off)
                    .wrapping_sub(t.nested_off);
            }
        }
        for (tid, since) in std::mem::take(&mut self.paused_since) {
            let end = self.last_time(tid).unwrap_or(since);
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

    fn last_time(&self, tid: u32) -> Option<u64> {
        if matches!(self.current, Some((t, _)) if t == tid) {
            return self.cur.last_time;
        }
        let i = *self.thread_index.get(&tid)?;
        self.thread_state[i as usize].last_time
    }

    /// The thread's state (`cur`), made on first use.
    #[inline(always)]
    fn thread(&mut self, tid: u32) -> &mut ThreadState {
        if !matches!(self.current, Some((t, _)) if t == tid) {
            self.switch_thread(tid);
        }
        &mut self.cur
    }

    /// Puts the current thread's state back and takes `tid`'s out.
    #[cold]
    #[inline(never)]
    fn switch_thread(&mut self, tid: u32) {
        if let Some((_, i)) = self.current {
            self.thread_state[i as usize] = std::mem::take(&mut self.cur);
        }
        let n = self.thread_state.len() as u32;
        let i = *self.thread_index.entry(tid).or_insert(n);
        if i == n {
            self.thread_state.push(ThreadState::default());
        }
        self.cur = std::mem::take(&mut self.thread_state[i as usize]);
        self.current = Some((tid, i));
    }

    #[inline(always)]
    fn enter_call(&mut self, tid: u32, time: u64, func: FuncId) {
        // A node's calls are counted as they return (its line is written
        // then anyway) and by `finish` for the ones still open; a
        // function's calls are its nodes' calls, summed by `finish`.
        self.thread(tid);
        let parent = self.cur.stack.last().map_or(0, |f| f.node);
        let node = self.tree.child(parent, func);
        let nested = self.cur.open_call(func);
        self.cur.stack.push(Frame {
            node,
            start: time,
            child: 0,
            child_off: 0,
            nested,
        });
    }

    #[inline(always)]
    fn exit_call(&mut self, tid: u32, time: u64, closed: bool) {
        self.thread(tid);
        let th = &mut self.cur;
        th.last_time = Some(time);
        if let Some(f) = th.stack.pop() {
            let dur = time.saturating_sub(f.start);
            let self_t = dur.saturating_sub(f.child);
            // Without switches (most recordings) this costs one test per call.
            let off = if th.off.is_empty() {
                0
            } else {
                th.off.between(f.start, time)
            };
            if let Some(p) = th.stack.last_mut() {
                p.child += dur;
                p.child_off += off;
            }
            let n = &mut self.tree.nodes[f.node as usize];
            th.close_call(n.func);
            n.times.returns += 1;
            n.total += dur;
            n.self_time += self_t;
            n.off_total += off;
            n.self_off += off.saturating_sub(f.child_off);
            // A call the view closed has no known duration: it counts as a
            // call, not in the functions' times.
            if closed {
                let t = &mut n.times;
                t.closed += 1;
                t.closed_total += dur;
                t.closed_self += self_t;
                t.closed_off += off;
            } else {
                n.times.min = n.times.min.min(dur);
                n.times.max = n.times.max.max(dur);
                if f.nested {
                    n.times.nested_total += dur;
                    n.times.nested_off += off;
                }
            }
        }
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
            } => self.enter_call(tid, time, func),
            ViewEvent::Exit {
                tid, time, closed, ..
            } => self.exit_call(tid, time, closed),
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
                self.thread(tid).last_time = Some(time);
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
                self.thread(tid).last_time = Some(time);
            }
            ViewEvent::Snapshot {
                bytes,
                begins,
                begin,
                end,
                ..
            } => {
                self.snapshots.0 += u64::from(begins);
                self.snapshots.1 += bytes;
                let spans = &mut self.snapshot_spans;
                match spans.back_mut() {
                    Some(last) if !begins => *last = (last.0.min(begin), last.1.max(end)),
                    _ => {
                        if spans.len() == MAX_SNAPSHOT_SPANS {
                            spans.pop_front();
                        }
                        spans.push_back((begin, end));
                    }
                }
            }
            ViewEvent::Lost { kind, count, .. } => self.lost(kind, count),
            ViewEvent::Tag { .. } => {}
            ViewEvent::Switch { tid, time, out, .. } => {
                if self.switches.0 < MAX_SWITCHES {
                    self.switches.0 += 1;
                    self.thread(tid).off.push(time, out);
                } else {
                    self.switches.1 += 1;
                }
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn enter(&mut self, _names: &Names, c: Call) -> std::io::Result<()> {
        self.enter_call(c.tid, c.time, c.func);
        Ok(())
    }

    #[inline(always)]
    fn exit(&mut self, _names: &Names, c: Call, closed: bool) -> std::io::Result<()> {
        self.exit_call(c.tid, c.time, closed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tid: u32, time: u64, func: u32) -> Call {
        Call {
            pid: 1,
            tid,
            time,
            func: FuncId(func),
            depth: 0,
        }
    }

    #[test]
    fn interleaved_threads_keep_their_own_stacks() {
        let names = Names::default();
        let mut c = Collector::default();
        // tid 1: f0 [0, 100] calling f1 [10, 30]; tid 2: f1 [5, 50],
        // interleaved event by event.
        c.enter(&names, call(1, 0, 0)).unwrap();
        c.enter(&names, call(2, 5, 1)).unwrap();
        c.enter(&names, call(1, 10, 1)).unwrap();
        c.exit(&names, call(1, 30, 1), false).unwrap();
        c.exit(&names, call(2, 50, 1), false).unwrap();
        c.exit(&names, call(1, 100, 0), false).unwrap();
        // Twice: the counts are made, not added to.
        c.finish();
        c.finish();
        let f0 = c.funcs.get(FuncId(0)).unwrap();
        assert_eq!((f0.calls, f0.total, f0.self_time), (1, 100, 80));
        let f1 = c.funcs.get(FuncId(1)).unwrap();
        assert_eq!((f1.calls, f1.total, f1.min, f1.max), (2, 65, 20, 45));
        assert_eq!(c.funcs.len(), 2);
        assert!(c.funcs.get(FuncId(2)).is_none());
        // Paths: root -> f0 -> f1 (tid 1), root -> f1 (tid 2).
        assert_eq!(c.tree.nodes.len(), 4);
        let ids: Vec<(Vec<FuncId>, u64)> = (1..4)
            .map(|n| (c.tree.path(n), c.tree.nodes[n as usize].total))
            .collect();
        assert!(ids.contains(&(vec![FuncId(0)], 100)));
        assert!(ids.contains(&(vec![FuncId(0), FuncId(1)], 20)));
        assert!(ids.contains(&(vec![FuncId(1)], 45)));
    }

    #[test]
    fn calls_still_open_at_the_end_count_as_calls_not_in_the_times() {
        let names = Names::default();
        let mut c = Collector::default();
        // f0 [0, -) calling f1 [10, 30] then f1 [40, -): the pass ends.
        c.enter(&names, call(1, 0, 0)).unwrap();
        c.enter(&names, call(1, 10, 1)).unwrap();
        c.exit(&names, call(1, 30, 1), false).unwrap();
        c.enter(&names, call(1, 40, 1)).unwrap();
        c.finish();
        let f0 = *c.funcs.get(FuncId(0)).unwrap();
        assert_eq!((f0.calls, f0.timed, f0.total), (1, 0, 0));
        let f1 = *c.funcs.get(FuncId(1)).unwrap();
        assert_eq!((f1.calls, f1.timed, f1.total), (2, 1, 20));
        let calls: Vec<(Vec<FuncId>, u64)> = (1..c.tree.nodes.len() as u32)
            .map(|n| (c.tree.path(n), c.tree.nodes[n as usize].calls))
            .collect();
        assert_eq!(
            calls,
            [(vec![FuncId(0)], 1), (vec![FuncId(0), FuncId(1)], 2)]
        );
    }

    #[test]
    fn calls_the_view_closed_count_as_calls_not_in_the_functions_times() {
        let names = Names::default();
        let mut c = Collector::default();
        // f0 [0, 100] calling f1 [10, 30) (closed by the view) and f1 [40, 45].
        c.enter(&names, call(1, 0, 0)).unwrap();
        c.enter(&names, call(1, 10, 1)).unwrap();
        c.exit(&names, call(1, 30, 1), true).unwrap();
        c.enter(&names, call(1, 40, 1)).unwrap();
        c.exit(&names, call(1, 45, 1), false).unwrap();
        c.exit(&names, call(1, 100, 0), false).unwrap();
        c.finish();
        let f1 = *c.funcs.get(FuncId(1)).unwrap();
        assert_eq!(
            (f1.calls, f1.timed, f1.total, f1.self_time, f1.min, f1.max),
            (2, 1, 5, 5, 5, 5)
        );
        // The closed call's time is still its caller's callees' time, and
        // its path's.
        let f0 = *c.funcs.get(FuncId(0)).unwrap();
        assert_eq!((f0.timed, f0.total, f0.self_time), (1, 100, 75));
        assert_eq!(c.tree.nodes[2].func, FuncId(1));
        assert_eq!((c.tree.nodes[2].calls, c.tree.nodes[2].total), (2, 25));
    }

    #[test]
    fn calls_as_events_and_as_calls_give_the_same_statistics() {
        let names = Names::default();
        let (mut a, mut b) = (Collector::default(), Collector::default());
        let mut t = 0;
        for i in 0..200u32 {
            let tid = 1 + i % 3;
            let f = i % 11;
            t += 7;
            a.enter(&names, call(tid, t, f)).unwrap();
            b.event(&names, &call(tid, t, f).entered()).unwrap();
            if i % 4 == 3 {
                t += 3;
                let closed = i % 8 == 7;
                a.exit(&names, call(tid, t, f), closed).unwrap();
                b.event(&names, &call(tid, t, f).exited(closed)).unwrap();
            }
        }
        a.finish();
        b.finish();
        let stats = |c: &Collector| c.funcs.iter().map(|(f, s)| (f, *s)).collect::<Vec<_>>();
        assert_eq!(stats(&a), stats(&b));
        assert_eq!(a.tree.nodes.len(), b.tree.nodes.len());
        for (x, y) in a.tree.nodes.iter().zip(&b.tree.nodes) {
            assert_eq!((x.func, x.calls, x.total), (y.func, y.calls, y.total));
        }
    }

    #[test]
    fn a_recursive_functions_total_counts_its_outermost_calls_only() {
        let names = Names::default();
        let mut c = Collector::default();
        // f0 [0, 100] calling f1 [10, 90] calling f1 [20, 80] calling
        // f1 [30, 70]; then f1 [95, 99] on its own.
        c.enter(&names, call(1, 0, 0)).unwrap();
        for (t, _) in [(10, 0), (20, 1), (30, 2)] {
            c.enter(&names, call(1, t, 1)).unwrap();
        }
        for t in [70, 80, 90] {
            c.exit(&names, call(1, t, 1), false).unwrap();
        }
        c.enter(&names, call(1, 95, 1)).unwrap();
        c.exit(&names, call(1, 99, 1), false).unwrap();
        c.exit(&names, call(1, 100, 0), false).unwrap();
        c.finish();
        let f0 = *c.funcs.get(FuncId(0)).unwrap();
        let f1 = *c.funcs.get(FuncId(1)).unwrap();
        assert_eq!((f1.calls, f1.timed), (4, 4));
        assert_eq!(f1.total, 80 + 4, "the outermost frames' time");
        assert!(f1.total <= f0.total, "{f1:?} above its caller {f0:?}");
        // Self time is each frame's own, summed: the time inside f1 less f0's.
        assert_eq!(f1.self_time, 84);
        assert_eq!((f1.min, f1.max), (4, 80));
        // The call graph's paths keep each level's time.
        let totals: Vec<u64> = (2..5).map(|n| c.tree.nodes[n].total).collect();
        assert_eq!(totals, [84, 60, 40]);
    }

    #[test]
    fn a_node_with_many_children_finds_each_again() {
        let mut t = CallTree::default();
        let n = 3 * CallTree::SCAN as u32;
        let first: Vec<u32> = (0..n).map(|f| t.child(0, FuncId(f))).collect();
        let again: Vec<u32> = (0..n).rev().map(|f| t.child(0, FuncId(f))).collect();
        assert_eq!(first, again.into_iter().rev().collect::<Vec<_>>());
        assert_eq!(t.nodes.len(), n as usize + 1);
        assert_eq!(t.nodes[0].children, first);
    }
}
