//! The calls an Intel PT recording holds, for the views: each thread's trace (perf's
//! AUXTRACE payloads of a `--per-thread` recording) decoded over the code its process mapped
//! (the MMAP/MMAP2 records' files, read from disk), its calls and returns turned into
//! [`ViewEvent::Enter`]/[`ViewEvent::Exit`] as perf's thread-stack pairs them, on the perf
//! clock (the AUXTRACE_INFO's TSC conversion, perf's `tsc_to_perf_time`).
//!
//! A return goes back to the innermost open call whose return address it lands on; the calls
//! above that one ended without a return the trace shows (a longjmp, an exception, a tail
//! call's callee) and are closed there. A return to no open call is the end of a call made
//! before the trace began: nothing to show. Where the decode loses the flow (an overflow,
//! code that is not at hand, a corrupt packet) every open call is closed and the bytes
//! passed over are counted as [`LostKind::SkippedBytes`].
//!
//! A process's code is the union of its mappings over the whole recording (a later map at
//! an address hides an earlier one): code unmapped and replaced during the trace would be
//! decoded as the later file. Memory: each mapped file once (the files the recording names,
//! not the trace), and at most [`MAX_TRACE`] bytes of trace; more is counted as skipped.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use perfaux_abi::user::{AuxtraceInfoRecord, AuxtraceRecord, TimeConvRecord};
use std::ops::ControlFlow;

use perfaux_intelpt::calls::{CallEvent, CallKind, Setup, walk_calls};
use perfaux_intelpt::image::Image;
use perfaux_intelpt::overlap::{Overlap, find_overlap};
use perfaux_intelpt::timing::ClockConfig;

use crate::event::{Call, FuncId, LostKind, Names, Sink, ViewEvent};
use crate::symbols::{Symbolizer, UNKNOWN};

/// perf's `PERF_AUXTRACE_INTEL_PT`.
const PERF_AUXTRACE_INTEL_PT: u32 = 1;

/// The most trace bytes held for decoding, all threads together.
pub const MAX_TRACE: usize = 1 << 30;

/// perf's `enum intel_pt_info` (tools/perf/util/intel-pt.h): the AUXTRACE_INFO's words.
mod info {
    pub const TIME_SHIFT: usize = 1;
    pub const TIME_MULT: usize = 2;
    pub const TIME_ZERO: usize = 3;
    pub const CAP_USER_TIME_ZERO: usize = 4;
    pub const SNAPSHOT_MODE: usize = 8;
    pub const PER_CPU_MMAPS: usize = 9;
    pub const MTC_FREQ_BITS: usize = 11;
    pub const TSC_CTC_N: usize = 12;
    pub const TSC_CTC_D: usize = 13;
    pub const MAX_NONTURBO_RATIO: usize = 15;
}

/// perf's TSC to perf-clock conversion (`struct perf_tsc_conversion`).
#[derive(Debug, Clone, Copy, Default)]
struct TscConversion {
    time_shift: u16,
    time_mult: u32,
    time_zero: u64,
    /// `cap_user_time_short`: the counter is `time_mask` wide, from `time_cycles`.
    short: Option<(u64, u64)>,
}

impl TscConversion {
    /// perf's `tsc_to_perf_time`.
    fn perf_time(&self, tsc: u64) -> u64 {
        let tsc = match self.short {
            Some((cycles, mask)) => cycles.wrapping_add(tsc.wrapping_sub(cycles) & mask),
            None => tsc,
        };
        let shift = u32::from(self.time_shift).min(63);
        let quot = tsc >> shift;
        let rem = tsc & ((1u64 << shift) - 1);
        let mult = u64::from(self.time_mult);
        self.time_zero
            .wrapping_add(quot.wrapping_mul(mult))
            .wrapping_add(rem.wrapping_mul(mult) >> shift)
    }
}

/// One trace buffer's bytes (perf's queue: one per thread or per CPU).
struct Queue {
    tid: u32,
    cpu: u32,
    /// Its trace as stretches that follow on from each other; a snapshot that shares no
    /// bytes with the one before begins a new stretch (the trace between them was lost).
    segments: Vec<Vec<u8>>,
    /// Where the last buffer added begins in the last stretch: the next snapshot is compared
    /// with that one (the buffer before it), not with the whole stretch.
    last_start: usize,
}

/// The most zero bytes that pad a copy of the AUX area to 8 (perf's MAX_PADDING).
const PADDING: usize = 7;

/// The queues of the samples' AUX snippets, after the AUXTRACE buffers'.
const SAMPLE_QUEUES: u64 = 1 << 32;

/// The most context switches kept (16 bytes each): a CPU's later switches are not followed,
/// its trace from there shown as the last thread's.
pub const MAX_SWITCHES: usize = 1 << 24;

/// What the record pass gathers of an Intel PT recording.
#[derive(Default)]
pub(crate) struct PtTrace {
    /// The AUXTRACE_INFO's words, if it is Intel PT's.
    info: Option<Vec<u64>>,
    /// By AUXTRACE `idx`; the snippets of samples by [`SAMPLE_QUEUES`] and their thread or
    /// CPU.
    queues: BTreeMap<u64, Queue>,
    held: usize,
    /// Payload bytes past [`MAX_TRACE`].
    dropped: u64,
    /// cpu -> (time, pid, tid) of each thread switched in, in the records' time order.
    switches: HashMap<u32, Vec<(u64, u32, u32)>>,
    switches_held: usize,
    time_conv: Option<TimeConvRecord>,
}

impl PtTrace {
    pub(crate) fn info(&mut self, i: &AuxtraceInfoRecord) {
        if i.type_ == PERF_AUXTRACE_INTEL_PT {
            self.info = Some(i.priv_.clone());
        }
    }

    pub(crate) fn auxtrace(&mut self, a: &AuxtraceRecord, payload: &[u8]) {
        let snapshots = self.word(info::SNAPSHOT_MODE) != 0;
        self.add(u64::from(a.idx), a.tid, a.cpu, payload, snapshots);
    }

    /// A sample's AUX snippet (PERF_SAMPLE_AUX): the last bytes of the trace of its thread
    /// (`--per-thread`) or CPU when it was taken, decoded as a snapshot is (perf's
    /// `auxtrace_queues__add_sample`).
    pub(crate) fn aux_sample(&mut self, tid: u32, cpu: u32, snippet: &[u8]) {
        let cpu_wide = self.word(info::PER_CPU_MMAPS) != 0;
        let (key, tid) = if cpu_wide {
            (cpu, u32::MAX)
        } else {
            (tid, tid)
        };
        self.add(SAMPLE_QUEUES | u64::from(key), tid, cpu, snippet, true);
    }

    fn add(&mut self, key: u64, tid: u32, cpu: u32, payload: &[u8], snapshots: bool) {
        if self.info.is_none() {
            return;
        }
        let q = self.queues.entry(key).or_insert_with(|| Queue {
            tid,
            cpu,
            segments: Vec::new(),
            last_start: 0,
        });
        // A snapshot is the last bytes of the AUX area: what it shares with the one before
        // is decoded once (perf's intel_pt_find_overlap); a full trace's buffers follow on.
        // The copy before may end in zeros that pad it to 8 bytes (an AUXTRACE payload's
        // padding, the kernel's for a PERF_SAMPLE_AUX of a size not a multiple of 8): where
        // this one holds real bytes. As perf's `adj_for_padding`, they are left out of the
        // comparison, and out of the stretch when this one continues it.
        let (payload, new_segment) = match q.segments.last_mut() {
            None => (payload, true),
            Some(_) if !snapshots => (payload, false),
            Some(prev) => {
                let pad = prev
                    .iter()
                    .rev()
                    .take(PADDING)
                    .take_while(|&&b| b == 0)
                    .count();
                let kept = prev.len() - pad;
                let from = q.last_start.min(kept);
                match find_overlap(&prev[from..kept], payload) {
                    Overlap::ContinuesAt(k) => {
                        prev.truncate(kept);
                        self.held -= pad;
                        // This buffer's first byte in the stretch.
                        q.last_start = kept.saturating_sub(k);
                        (&payload[k..], false)
                    }
                    Overlap::Disjoint => (payload, true),
                }
            }
        };
        let room = MAX_TRACE - self.held;
        let n = payload.len().min(room);
        if new_segment {
            q.segments.push(Vec::new());
            q.last_start = 0;
        }
        if let Some(seg) = q.segments.last_mut() {
            seg.extend_from_slice(&payload[..n]);
        }
        self.held += n;
        self.dropped += (payload.len() - n) as u64;
    }

    /// A thread switched in on `cpu` at `time` (PERF_RECORD_SWITCH or _CPU_WIDE).
    pub(crate) fn switch_in(&mut self, cpu: u32, time: u64, pid: u32, tid: u32) {
        if self.switches_held < MAX_SWITCHES {
            self.switches_held += 1;
            self.switches.entry(cpu).or_default().push((time, pid, tid));
        }
    }

    fn word(&self, i: usize) -> u64 {
        self.info
            .as_ref()
            .and_then(|w| w.get(i))
            .copied()
            .unwrap_or(0)
    }

    /// The AUXTRACE_INFO's conversion, with the TIME_CONV's short-counter fields (perf 5.12+);
    /// the TIME_CONV's alone where the AUXTRACE_INFO has none.
    fn conversion(&self) -> Option<TscConversion> {
        let short = self
            .time_conv
            .and_then(|t| t.ext)
            .and_then(|e| (e.cap_user_time_short != 0).then_some((e.time_cycles, e.time_mask)));
        if self.word(info::CAP_USER_TIME_ZERO) != 0 {
            return Some(TscConversion {
                time_shift: self.word(info::TIME_SHIFT) as u16,
                time_mult: self.word(info::TIME_MULT) as u32,
                time_zero: self.word(info::TIME_ZERO),
                short,
            });
        }
        let t = self.time_conv?;
        t.ext
            .is_none_or(|e| e.cap_user_time_zero != 0)
            .then_some(TscConversion {
                time_shift: t.time_shift as u16,
                time_mult: t.time_mult as u32,
                time_zero: t.time_zero,
                short,
            })
    }

    /// The recording's PERF_RECORD_TIME_CONV.
    pub(crate) fn time_conv(&mut self, t: &TimeConvRecord) {
        self.time_conv = Some(*t);
    }

    /// The clocks as the flow decoder wants them; `config` is the intel_pt event's attr
    /// config (its MTC period bits).
    fn clock(&self, config: u64) -> ClockConfig {
        let bits = self.word(info::MTC_FREQ_BITS);
        let mtc_freq = if bits == 0 {
            0
        } else {
            ((config & bits) >> bits.trailing_zeros()) as u8
        };
        ClockConfig {
            mtc_freq,
            nom_freq: self.word(info::MAX_NONTURBO_RATIO) as u8,
            cpuid_0x15_eax: self.word(info::TSC_CTC_D) as u32,
            cpuid_0x15_ebx: self.word(info::TSC_CTC_N) as u32,
        }
    }

    /// The intel_pt PMU's type number: the attr of the trace's event has it.
    pub(crate) fn pmu_type(&self) -> u64 {
        self.word(0)
    }

    /// Whether the trace is recorded per CPU (perf's default), not `--per-thread`.
    pub(crate) fn cpu_wide(&self) -> bool {
        self.word(info::PER_CPU_MMAPS) != 0
    }

    /// Whether the recording is Intel PT's.
    pub(crate) fn is_intel_pt(&self) -> bool {
        self.info.is_some()
    }
}

/// Where the views' calls come from: the threads, their names and code.
pub(crate) struct PtContext<'a, S> {
    pub sym: &'a mut Symbolizer,
    pub names: &'a mut Names,
    pub sink: &'a mut S,
    /// tid -> pid.
    pub pid_of: &'a dyn Fn(u32) -> u32,
    /// Whether a thread is shown.
    pub keep: &'a mut dyn FnMut(u32) -> bool,
    /// The intel_pt event's attr config.
    pub config: u64,
    /// Each time seen, for the summary.
    pub saw: &'a mut dyn FnMut(u64),
}

/// One thread's open calls as the trace shows them.
struct Stack {
    pid: u32,
    tid: u32,
    /// (function, return address), outermost first.
    frames: Vec<(FuncId, u64)>,
    /// Calls past [`MAX_DEPTH`] still open: counted, not kept.
    past_depth: u64,
    last: u64,
}

/// The most open calls a thread's stack keeps (as swtrace's readers: deeper ones are counted
/// as [`LostKind::CallsPastDepth`]); memory stays bounded whatever the trace.
const MAX_DEPTH: usize = 1 << 16;

impl Stack {
    fn exit<S: Sink>(&mut self, names: &Names, sink: &mut S, closed: bool) -> std::io::Result<()> {
        let Some((func, _)) = self.frames.pop() else {
            return Ok(());
        };
        let c = Call {
            pid: self.pid,
            tid: self.tid,
            time: self.last,
            func,
            depth: self.frames.len() as u32,
        };
        sink.exit(names, c, closed)
    }

    fn close_all<S: Sink>(&mut self, names: &Names, sink: &mut S) -> std::io::Result<()> {
        while !self.frames.is_empty() {
            self.exit(names, sink, true)?;
        }
        Ok(())
    }
}

/// Who ran on a queue from when: (time, pid, tid) of each switch in.
type Timeline = Vec<(u64, u32, u32)>;

/// One event of the trace placed on its thread, on the perf clock (0: no time known).
#[derive(Debug, Clone, Copy)]
struct Placed {
    time: u64,
    pid: u32,
    tid: u32,
    kind: CallKind,
}

/// What a queue's decode hands on: its events, and the end of each stretch (its bytes).
enum Msg {
    Ev(Placed),
    StretchEnd(u64),
}

/// How one queue is decoded: who ran from when (a CPU-wide buffer's switches, or its one
/// thread), and the code of each process.
struct QueueWalk<'a> {
    timeline: Timeline,
    cpu_wide: bool,
    setup: Setup,
    conv: Option<TscConversion>,
    images: &'a HashMap<u32, Image>,
}

impl QueueWalk<'_> {
    /// Decodes the queue's stretches in order, handing on what each holds; `put` false: stop.
    fn run(&self, segments: &[Vec<u8>], put: &mut dyn FnMut(Msg) -> bool) {
        let mut next = 0;
        // The thread running, and the process whose code the decode reads.
        let mut cur: Option<(u32, u32)> = None;
        let mut last = 0u64;
        for seg in segments {
            let mut decoding: Option<u32> = None;
            let mut stopped = false;
            walk_calls(seg, &Image::default(), &self.setup, |e: &CallEvent| {
                if let (Some(tsc), Some(c)) = (e.tsc, self.conv) {
                    // Times never go back (a TSC estimate may).
                    last = last.max(c.perf_time(tsc));
                }
                // Without times a CPU-wide buffer's switches cannot be placed: no thread.
                while let Some(&(t, pid, tid)) = self.timeline.get(next)
                    && (!self.cpu_wide || (self.conv.is_some() && t <= last))
                {
                    cur = Some((pid, tid));
                    next += 1;
                }
                // Before the first switch on its CPU the thread is not known: not shown.
                let Some((pid, tid)) = cur else {
                    return ControlFlow::Continue(None);
                };
                let image = (decoding != Some(pid)).then(|| {
                    decoding = Some(pid);
                    self.images.get(&pid).cloned().unwrap_or_default()
                });
                let ev = Placed {
                    time: last,
                    pid,
                    tid,
                    kind: e.kind,
                };
                if put(Msg::Ev(ev)) {
                    ControlFlow::Continue(image)
                } else {
                    stopped = true;
                    ControlFlow::Break(())
                }
            });
            if stopped || !put(Msg::StretchEnd(seg.len() as u64)) {
                return;
            }
        }
    }
}

/// Where the events go: each thread's open calls (one stack a thread, whichever CPU's buffer
/// its events come from), and the stretches' spans for the snapshots.
struct Apply<'c, S> {
    sym: &'c mut Symbolizer,
    names: &'c mut Names,
    sink: &'c mut S,
    keep: &'c mut dyn FnMut(u32) -> bool,
    saw: &'c mut dyn FnMut(u64),
    stacks: HashMap<u32, Stack>,
    /// Per queue: each thread's first and last time in the current stretch.
    spans: Vec<BTreeMap<u32, (u64, u64)>>,
    snapshots: bool,
}

impl<S: Sink> Apply<'_, S> {
    fn ev(&mut self, q: usize, p: Placed) -> std::io::Result<()> {
        if p.time != 0 {
            (self.saw)(p.time);
        }
        if !(self.keep)(p.tid) {
            return Ok(());
        }
        let st = self.stacks.entry(p.tid).or_insert_with(|| Stack {
            pid: p.pid,
            tid: p.tid,
            frames: Vec::new(),
            past_depth: 0,
            last: 0,
        });
        st.pid = p.pid;
        st.last = st.last.max(p.time);
        // A stretch's span opens at its first sync point: the bytes skipped before it (a
        // snapshot begins mid-packet) have no time of their own.
        let spans = &mut self.spans[q];
        if let Some(span) = spans.get_mut(&p.tid) {
            span.1 = st.last;
        } else if !matches!(p.kind, CallKind::Gap { .. }) {
            spans.insert(p.tid, (st.last, st.last));
        }
        on_call(p.kind, st, self.sym, self.names, self.sink)
    }

    /// A stretch of queue `q` ended: a snapshot's open calls end with it; it is said.
    fn stretch_end(&mut self, q: usize, bytes: u64, begins: bool) -> std::io::Result<()> {
        let spans = std::mem::take(&mut self.spans[q]);
        if !self.snapshots {
            return Ok(());
        }
        let mut begins = begins;
        let mut bytes = bytes;
        for (&tid, &(begin, end)) in &spans {
            if let Some(st) = self.stacks.get_mut(&tid) {
                st.close_all(self.names, self.sink)?;
            }
            self.sink.event(
                self.names,
                &ViewEvent::Snapshot {
                    tid,
                    begin,
                    end,
                    bytes,
                    begins,
                },
            )?;
            // Counted once: the stretch's bytes and its taking with its first thread.
            begins = false;
            bytes = 0;
        }
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        let mut open: Vec<_> = self.stacks.values_mut().collect();
        open.sort_by_key(|s| s.tid);
        for st in open {
            st.close_all(self.names, self.sink)?;
        }
        Ok(())
    }
}

/// Decodes every thread's trace and hands its calls to the sink. A `--per-thread`
/// recording's buffers are each one thread's, decoded one after the other; a CPU-wide
/// recording's are decoded side by side and merged by time, so that a thread that moves
/// between CPUs keeps its open calls, its events in time order.
pub(crate) fn emit_calls<S: Sink>(trace: PtTrace, cx: PtContext<'_, S>) -> std::io::Result<()> {
    let conv = trace.conversion();
    let setup = Setup {
        clock: trace.clock(cx.config),
        ..Setup::default()
    };
    let per_cpu = trace.word(info::PER_CPU_MMAPS) != 0;
    let snapshots = trace.word(info::SNAPSHOT_MODE) != 0;
    let PtContext {
        sym,
        names,
        sink,
        pid_of,
        keep,
        saw,
        ..
    } = cx;
    if trace.dropped > 0 {
        sink.event(
            names,
            &ViewEvent::Lost {
                tid: 0,
                time: 0,
                kind: LostKind::SkippedBytes,
                count: trace.dropped,
            },
        )?;
    }
    let PtTrace {
        queues, switches, ..
    } = trace;
    let queues: Vec<Queue> = queues.into_values().collect();
    // Who ran on each queue from when; every process's code, made once.
    let timelines: Vec<(bool, Timeline)> = queues
        .iter()
        .map(|q| {
            let cpu_wide = per_cpu || q.tid == u32::MAX;
            if cpu_wide {
                let mut t = switches.get(&q.cpu).cloned().unwrap_or_default();
                t.sort_by_key(|s| s.0);
                (true, t)
            } else {
                (false, vec![(0, pid_of(q.tid), q.tid)])
            }
        })
        .collect();
    if conv.is_none() && timelines.iter().any(|t| t.0) {
        sym.files().note(
            "[intel_pt time]",
            "Intel PT: the recording has no TSC conversion (cap_user_time_zero): a CPU-wide \
             buffer's threads cannot be told apart by time, so its calls are not shown"
                .to_owned(),
        );
    }
    let mut files: HashMap<String, Option<Arc<[u8]>>> = HashMap::new();
    let mut images: HashMap<u32, Image> = HashMap::new();
    for (_, t) in &timelines {
        for &(_, pid, _) in t {
            if let std::collections::hash_map::Entry::Vacant(e) = images.entry(pid) {
                e.insert(process_image(sym, pid, &mut files));
            }
        }
    }
    drop(files);
    let mut apply = Apply {
        sym,
        names,
        sink,
        keep,
        saw,
        stacks: HashMap::new(),
        spans: vec![BTreeMap::new(); queues.len()],
        snapshots,
    };
    let walk = |i: usize| QueueWalk {
        timeline: timelines[i].1.clone(),
        cpu_wide: timelines[i].0,
        setup,
        conv,
        images: &images,
    };
    // The per-thread buffers, one at a time.
    let mut first = true;
    for (i, q) in queues.iter().enumerate().filter(|(i, _)| !timelines[*i].0) {
        let mut result = Ok(());
        walk(i).run(&q.segments, &mut |m| {
            result = match m {
                Msg::Ev(p) => apply.ev(i, p),
                Msg::StretchEnd(b) => apply.stretch_end(i, b, first),
            };
            result.is_ok()
        });
        result?;
        apply.finish()?;
        apply.stacks.clear();
        first = false;
    }
    // The CPU-wide buffers, side by side, merged by time.
    let wide: Vec<usize> = (0..queues.len()).filter(|&i| timelines[i].0).collect();
    if !wide.is_empty() {
        merge_by_time(&wide, &queues, &walk, &mut apply, first)?;
    }
    apply.finish()
}

/// Events a CPU-wide buffer's decode may run ahead of the merge.
const MERGE_AHEAD: usize = 1024;

/// Decodes the queues `wide` each on its own thread and applies their events in time order.
fn merge_by_time<'i, S: Sink>(
    wide: &[usize],
    queues: &[Queue],
    walk: &(dyn Fn(usize) -> QueueWalk<'i> + Sync),
    apply: &mut Apply<'_, S>,
    first: bool,
) -> std::io::Result<()> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::sync::mpsc::sync_channel;
    std::thread::scope(|scope| {
        let mut rx = Vec::new();
        for &i in wide {
            let (tx, r) = sync_channel::<Msg>(MERGE_AHEAD);
            rx.push((i, r));
            let segments = &queues[i].segments;
            scope.spawn(move || walk(i).run(segments, &mut |m| tx.send(m).is_ok()));
        }
        // Each queue's next message, keyed by its time (a stretch's end: its last event's).
        let mut heads: Vec<Option<Msg>> = rx.iter().map(|(_, r)| r.recv().ok()).collect();
        let mut last = vec![0u64; rx.len()];
        let mut heap = BinaryHeap::new();
        let key = |m: &Msg, last: u64| match m {
            Msg::Ev(p) => p.time.max(last),
            Msg::StretchEnd(_) => last,
        };
        for (k, h) in heads.iter().enumerate() {
            if let Some(m) = h {
                heap.push(Reverse((key(m, 0), k)));
            }
        }
        // A snapshot is taken of every CPU's area at once: counted with the first CPU's.
        let begins: Vec<bool> = (0..rx.len()).map(|k| first && k == 0).collect();
        let result = (|| {
            while let Some(Reverse((t, k))) = heap.pop() {
                let Some(m) = heads[k].take() else { continue };
                last[k] = t;
                let q = rx[k].0;
                match m {
                    Msg::Ev(p) => apply.ev(q, Placed { time: t, ..p })?,
                    Msg::StretchEnd(b) => apply.stretch_end(q, b, begins[k])?,
                }
                heads[k] = rx[k].1.recv().ok();
                if let Some(m) = &heads[k] {
                    heap.push(Reverse((key(m, last[k]), k)));
                }
            }
            Ok(())
        })();
        // On an error the receivers go: each decode stops at its next event.
        drop(rx);
        result
    })
}

fn on_call<S: Sink>(
    kind: CallKind,
    st: &mut Stack,
    sym: &mut Symbolizer,
    names: &mut Names,
    sink: &mut S,
) -> std::io::Result<()> {
    match kind {
        CallKind::Call { .. } if st.frames.len() >= MAX_DEPTH => {
            st.past_depth += 1;
            sink.event(
                names,
                &ViewEvent::Lost {
                    tid: st.tid,
                    time: st.last,
                    kind: LostKind::CallsPastDepth,
                    count: 1,
                },
            )
        }
        CallKind::Return { .. } if st.past_depth > 0 => {
            st.past_depth -= 1;
            Ok(())
        }
        CallKind::Call { ret, to, .. } => {
            let func = if to == 0 {
                names.intern(UNKNOWN, UNKNOWN)
            } else {
                sym.resolve(st.pid, to, names)
            };
            let c = Call {
                pid: st.pid,
                tid: st.tid,
                time: st.last,
                func,
                depth: st.frames.len() as u32,
            };
            st.frames.push((func, ret));
            sink.enter(names, c)
        }
        CallKind::Return { to, .. } => {
            let k = if to == 0 {
                st.frames.len().checked_sub(1)
            } else {
                st.frames.iter().rposition(|&(_, r)| r == to)
            };
            // A return to no open call ends one made before the trace began.
            let Some(k) = k else { return Ok(()) };
            while st.frames.len() > k + 1 {
                st.exit(names, sink, true)?;
            }
            st.exit(names, sink, false)
        }
        CallKind::Gap {
            offset, resumed, ..
        } => {
            st.past_depth = 0;
            st.close_all(names, sink)?;
            let bytes = resumed.saturating_sub(offset) as u64;
            if bytes > 0 {
                sink.event(
                    names,
                    &ViewEvent::Lost {
                        tid: st.tid,
                        time: st.last,
                        kind: LostKind::SkippedBytes,
                        count: bytes,
                    },
                )?;
            }
            Ok(())
        }
        CallKind::KernelPassed { .. } => {
            sym.files().note(
                "[kernel]",
                "the trace passes through the kernel, whose code is not in the recording \
                 (perf record --kcore keeps it): those passages are passed over, the calls on \
                 either side kept"
                    .into(),
            );
            Ok(())
        }
        CallKind::Enabled { .. }
        | CallKind::Synced { .. }
        | CallKind::Disabled
        | CallKind::Paging { .. } => Ok(()),
    }
}

/// The code process `pid` mapped, from the files its maps name.
fn process_image(
    sym: &mut Symbolizer,
    pid: u32,
    files: &mut HashMap<String, Option<Arc<[u8]>>>,
) -> Image {
    let mut image = Image::default();
    let maps: Vec<(u64, u64, u64, String)> = sym
        .maps_of(pid)
        .map(|(a, b, c, n)| (a, b, c, n.to_owned()))
        .collect();
    for (start, end, pgoff, name) in maps {
        // Of the kernel's special maps only the vdso holds code a user-space trace runs.
        if name.starts_with('[') && name != "[vdso]" {
            continue;
        }
        let data = files
            .entry(name.clone())
            .or_insert_with(|| sym.files().read(&name).map(Arc::from));
        if let Some(d) = data {
            let (Ok(off), Ok(len)) = (usize::try_from(pgoff), usize::try_from(end - start)) else {
                continue;
            };
            image.map(start, d.clone(), off, len);
        }
    }
    image
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perf's arithmetic, checked on numbers worked by hand: a 2.5 GHz TSC (mult 0.4 ns in
    /// 2^-10 units: 410 with shift 10 rounds to 0.400390625).
    #[test]
    fn tsc_becomes_perf_time_as_perf_converts_it() {
        let c = TscConversion {
            time_shift: 10,
            time_mult: 410,
            time_zero: 1_000,
            short: None,
        };
        // 2^10 ticks: exactly 410 ns.
        assert_eq!(c.perf_time(1 << 10), 1_000 + 410);
        // 1024 + 512: 410 + 205.
        assert_eq!(c.perf_time(1536), 1_000 + 615);
        let id = TscConversion {
            time_shift: 0,
            time_mult: 1,
            time_zero: 0,
            short: None,
        };
        assert_eq!(id.perf_time(123_456_789), 123_456_789);
        // A 32-bit counter (cap_user_time_short) from 0xffff_0000: a TSC past its wrap is
        // taken from the counter's base.
        let short = TscConversion {
            short: Some((0x1_ffff_0000, 0xffff_ffff)),
            ..id
        };
        assert_eq!(short.perf_time(0x2_0000_0010), 0x2_0000_0010);
        assert_eq!(short.perf_time(0x0000_0010), 0x2_0000_0010);
    }
}

#[cfg(test)]
mod migration_tests {
    use super::*;

    /// The calls and returns a sink sees, as text.
    #[derive(Default)]
    struct Seen(Vec<String>);

    impl Sink for Seen {
        fn event(&mut self, _: &Names, ev: &ViewEvent<'_>) -> std::io::Result<()> {
            if let ViewEvent::Lost { kind, count, .. } = ev {
                self.0.push(format!("lost {} {count}", kind.name()));
            }
            Ok(())
        }
        fn enter(&mut self, _: &Names, c: Call) -> std::io::Result<()> {
            self.0
                .push(format!("enter {} {} {}", c.tid, c.time, c.depth));
            Ok(())
        }
        fn exit(&mut self, _: &Names, c: Call, closed: bool) -> std::io::Result<()> {
            self.0
                .push(format!("exit {} {} {} {closed}", c.tid, c.time, c.depth));
            Ok(())
        }
    }

    fn psb_tsc(tsc: u64) -> Vec<u8> {
        let mut v = [0x02u8, 0x82].repeat(8);
        v.push(0x19);
        v.extend_from_slice(&tsc.to_le_bytes()[..7]);
        v.extend_from_slice(&[0x02, 0x23]);
        v
    }

    /// MODE.Exec 64-bit and TIP.PGE to `ip` (six IP bytes, sign-extended).
    fn enable(ip: u64) -> Vec<u8> {
        let mut v = vec![0x99, 0x01, 0x71];
        v.extend_from_slice(&ip.to_le_bytes()[..6]);
        v
    }

    /// A thread calls on CPU 0, is moved to CPU 1 and returns there: the return ends the
    /// call made on CPU 0 (one stack a thread, the CPUs' buffers merged by time), not a call
    /// left open on CPU 0's buffer while CPU 1's return finds none.
    #[test]
    fn a_call_made_on_one_cpu_returns_on_another() {
        // 0x1000: call 0x1010; 0x1005: jmp *%rax (tracing stops)
        // 0x1010: jmp *%rax (preempted: tracing stops); 0x1012: ret
        let mut code = vec![0x90u8; 0x1000];
        code[..5].copy_from_slice(&[0xe8, 0x0b, 0, 0, 0]);
        code[5..7].copy_from_slice(&[0xff, 0xe0]);
        code[0x10..0x12].copy_from_slice(&[0xff, 0xe0]);
        code[0x12] = 0xc3;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("code");
        std::fs::write(&file, &code).unwrap();
        let (pid, tid) = (7, 8);
        let mut sym = Symbolizer::default();
        sym.mmap(pid, 0x1000, 0x1000, 0, file.to_str().unwrap());

        let mut pt = PtTrace::default();
        // pmu type, time shift 0, mult 1, zero 0, cap_user_time_zero, ..., per-CPU buffers.
        let mut words = vec![0u64; 17];
        words[info::TIME_MULT] = 1;
        words[info::CAP_USER_TIME_ZERO] = 1;
        words[info::PER_CPU_MMAPS] = 1;
        pt.info(&AuxtraceInfoRecord {
            type_: PERF_AUXTRACE_INTEL_PT,
            reserved: 0,
            priv_: words,
        });
        let mut cpu0 = psb_tsc(100);
        cpu0.extend(enable(0x1000));
        cpu0.push(0x01); // TIP.PGD at 0x1010's jmp
        let mut cpu1 = psb_tsc(300);
        cpu1.extend(enable(0x1012));
        cpu1.push(0x6d); // TIP 0x1005: the return
        cpu1.extend_from_slice(&0x1005u64.to_le_bytes()[..6]);
        cpu1.push(0x01); // TIP.PGD at 0x1005's jmp
        for (cpu, bytes) in [(0u32, &cpu0), (1, &cpu1)] {
            let rec = AuxtraceRecord::for_payload(bytes.len(), 0, 0, cpu, u32::MAX, cpu);
            pt.auxtrace(&rec, bytes);
        }
        pt.switch_in(0, 50, pid, tid);
        pt.switch_in(1, 200, pid, tid);

        let mut names = Names::default();
        let mut seen = Seen::default();
        let pid_of = |_| pid;
        let mut keep = |_| true;
        let mut saw = |_| {};
        emit_calls(
            pt,
            PtContext {
                sym: &mut sym,
                names: &mut names,
                sink: &mut seen,
                pid_of: &pid_of,
                keep: &mut keep,
                config: 0,
                saw: &mut saw,
            },
        )
        .unwrap();
        assert_eq!(seen.0, vec!["enter 8 100 0", "exit 8 300 0 false"]);
    }
}
