//! What the streaming pass hands its consumers: one [`ViewEvent`] at a time,
//! with function names interned in [`Names`] so that a consumer's memory
//! grows with the number of distinct functions, not with the trace.

use std::collections::HashMap;

/// An interned function (or symbol): an index into [`Names`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuncId(pub u32);

/// Distinct function names and the shared object each lives in.
#[derive(Debug, Default)]
pub struct Names {
    names: Vec<(String, String)>,
    index: HashMap<(String, String), FuncId>,
}

impl Names {
    /// The id of `name` in `dso`, interned on first use.
    pub fn intern(&mut self, name: &str, dso: &str) -> FuncId {
        if let Some(&id) = self.index.get(&(name.to_owned(), dso.to_owned())) {
            return id;
        }
        let id = FuncId(self.names.len() as u32);
        self.names.push((name.to_owned(), dso.to_owned()));
        self.index.insert((name.to_owned(), dso.to_owned()), id);
        id
    }

    /// The function's name.
    pub fn name(&self, id: FuncId) -> &str {
        self.names.get(id.0 as usize).map_or("[unknown]", |n| &n.0)
    }

    /// The shared object (DSO) the function lives in.
    pub fn dso(&self, id: FuncId) -> &str {
        self.names.get(id.0 as usize).map_or("[unknown]", |n| &n.1)
    }

    /// How many distinct functions there are.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when nothing is interned.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// What a loss marker stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostKind {
    /// PERF_RECORD_AUX with PERF_AUX_FLAG_TRUNCATED: trace data did not fit.
    AuxTruncated,
    /// PERF_RECORD_LOST: records the data area had no room for.
    Records,
    /// PERF_RECORD_LOST_SAMPLES.
    Samples,
    /// A LOST packet in the trace: probe events the writer could not write.
    ProbeEvents,
    /// Trace bytes the decoder skipped (gap, corrupt, before the first sync).
    SkippedBytes,
    /// Calls deeper than a view keeps open (perfaux-swtrace's `MAX_FRAMES`): counted as calls,
    /// their times not known.
    CallsPastDepth,
}

impl LostKind {
    /// Every kind.
    pub const ALL: [LostKind; 6] = [
        LostKind::AuxTruncated,
        LostKind::Records,
        LostKind::Samples,
        LostKind::ProbeEvents,
        LostKind::SkippedBytes,
        LostKind::CallsPastDepth,
    ];

    /// The kind whose [`LostKind::name`] is `name`.
    pub fn by_name(name: &str) -> Option<LostKind> {
        LostKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The word the views print.
    pub fn name(self) -> &'static str {
        match self {
            LostKind::AuxTruncated => "TRUNCATED",
            LostKind::Records => "LOST",
            LostKind::Samples => "LOST_SAMPLES",
            LostKind::ProbeEvents => "lost probe events",
            LostKind::SkippedBytes => "skipped trace bytes",
            LostKind::CallsPastDepth => "untimed calls past the view's depth",
        }
    }

    /// What the count is and why it happened, in the words `perfaux record` says it with.
    pub fn explanation(self) -> (&'static str, &'static str) {
        match self {
            LostKind::AuxTruncated => (
                "trace transactions cut short (PERF_AUX_FLAG_TRUNCATED)",
                "the AUX area was full (-m ,N enlarges it)",
            ),
            LostKind::Records => (
                "records lost (PERF_RECORD_LOST)",
                "the data area was full when they came (a larger -m keeps more)",
            ),
            LostKind::Samples => (
                "samples lost (PERF_RECORD_LOST_SAMPLES)",
                "the perf core could not write them",
            ),
            LostKind::ProbeEvents => (
                "probe events lost (LOST packets in the trace)",
                "calls the trace writer could not write: its AUX area was full, or a signal \
                 handler came inside a packet",
            ),
            LostKind::CallsPastDepth => (
                "untimed calls past the view's depth",
                "calls deeper than the open calls a reader follows (MAX_FRAMES): counted as \
                 calls, their times not known",
            ),
            LostKind::SkippedBytes => (
                "trace bytes skipped",
                "bytes the decoder passed over: before a window's first sync point, corrupt, \
                 or missing from the recording",
            ),
        }
    }
}

/// One thing that happened. Times are the recording's nanoseconds
/// (CLOCK_MONOTONIC for perfaux, perf's clock for perf's files). Events of
/// one thread's trace come in time order; across threads, and between the
/// record stream and the trace, they do not (see the crate doc).
#[derive(Clone, Debug)]
pub enum ViewEvent<'e> {
    /// A thread got its name (PERF_RECORD_COMM).
    Comm {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// The name.
        comm: &'e str,
    },
    /// A traced call began.
    Enter {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// When.
        time: u64,
        /// The function.
        func: FuncId,
        /// Open calls below it in this view of the thread.
        depth: u32,
    },
    /// A traced call returned. Every exit matches the last open enter of
    /// its thread; `closed` is true when the trace did not show the return
    /// (the window ended or resynced with the call open) and the view
    /// closed it at the last time it saw.
    Exit {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// When.
        time: u64,
        /// The function.
        func: FuncId,
        /// Open calls below it.
        depth: u32,
        /// The return was not in the trace.
        closed: bool,
    },
    /// A value tied to the open call at `depth` (its ENTER came just before: a TAG packet),
    /// perfaux-tracing's span id: the calls with one tag are the polls of one span.
    Tag {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// The tagged call's entry time (the tag has none of its own).
        time: u64,
        /// The tagged call's depth in this view of the thread.
        depth: u32,
        /// The value.
        value: u64,
    },
    /// A sample, with its callchain resolved, leaf first.
    Sample {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// When.
        time: u64,
        /// The sampling event's name.
        event: &'e str,
        /// The sample's period (weight).
        period: u64,
        /// The sampled instruction's function, then its callers.
        stack: &'e [FuncId],
    },
    /// A userspace event (uevent).
    Uevent {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// When.
        time: u64,
        /// Its type number.
        ty: u32,
        /// The type's name, when the recording's program names it.
        type_name: Option<&'e str>,
        /// Its payload.
        payload: &'e [u8],
    },
    /// The trace paused (`pause`) or resumed; `dropped` when the trace
    /// already was in that state (the kernel drops such a request).
    PauseResume {
        /// Thread.
        tid: u32,
        /// When.
        time: u64,
        /// Pause (true) or resume.
        pause: bool,
        /// A repeat of the state the trace was in.
        dropped: bool,
    },
    /// The trace was stopped (the writer removed).
    Stopped {
        /// Thread.
        tid: u32,
        /// When.
        time: u64,
    },
    /// An overwrite snapshot of a thread's trace: what it covers.
    Snapshot {
        /// Thread.
        tid: u32,
        /// First time in it.
        begin: u64,
        /// Last time in it.
        end: u64,
        /// Its size in bytes.
        bytes: u64,
        /// Whether it is the first thread's of one snapshot taken (the chunk's
        /// `SNAPSHOT_BEGIN`): snapshots are counted by it, once per taking, as
        /// `perfaux record` counts them.
        begins: bool,
    },
    /// The kernel switched a thread out of its CPU (`out`) or back in (PERF_RECORD_SWITCH).
    Switch {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// When.
        time: u64,
        /// Switched out (else in).
        out: bool,
        /// On a switch out, the thread was runnable (preempted), not waiting.
        preempt: bool,
    },
    /// Data the recording does not hold.
    Lost {
        /// Thread (0 when unknown).
        tid: u32,
        /// When (the last time seen, for skipped bytes).
        time: u64,
        /// What was lost.
        kind: LostKind,
        /// How many (records, samples, events or bytes).
        count: u64,
    },
}

/// A call's enter or exit as the pass hands it to [`Sink::enter`] and
/// [`Sink::exit`]: plain scalars, passed in registers. (A [`ViewEvent`]
/// built in memory and passed by reference is written field by field and
/// read back with wider loads: a store-forwarding stall per call.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// Process.
    pub pid: u32,
    /// Thread.
    pub tid: u32,
    /// When.
    pub time: u64,
    /// The function.
    pub func: FuncId,
    /// Open calls below it in this view of the thread.
    pub depth: u32,
}

impl Call {
    /// The call's beginning as a [`ViewEvent::Enter`].
    #[inline(always)]
    pub fn entered(self) -> ViewEvent<'static> {
        ViewEvent::Enter {
            pid: self.pid,
            tid: self.tid,
            time: self.time,
            func: self.func,
            depth: self.depth,
        }
    }

    /// The call's end as a [`ViewEvent::Exit`] (`closed` as there).
    #[inline(always)]
    pub fn exited(self, closed: bool) -> ViewEvent<'static> {
        ViewEvent::Exit {
            pid: self.pid,
            tid: self.tid,
            time: self.time,
            func: self.func,
            depth: self.depth,
            closed,
        }
    }
}

impl ViewEvent<'_> {
    /// The call a [`ViewEvent::Enter`] or [`ViewEvent::Exit`] carries (`None` for the others).
    #[inline(always)]
    pub fn call(&self) -> Option<Call> {
        match *self {
            ViewEvent::Enter {
                pid,
                tid,
                time,
                func,
                depth,
            }
            | ViewEvent::Exit {
                pid,
                tid,
                time,
                func,
                depth,
                ..
            } => Some(Call {
                pid,
                tid,
                time,
                func,
                depth,
            }),
            _ => None,
        }
    }
}

/// A consumer of the streaming pass.
pub trait Sink {
    /// Takes one event; `names` resolves its [`FuncId`]s.
    fn event(&mut self, names: &Names, ev: &ViewEvent<'_>) -> std::io::Result<()>;

    /// A traced call began: [`ViewEvent::Enter`], which is what the default
    /// hands to [`Sink::event`]. Calls are nearly all of a trace's events:
    /// consumers that care for speed take them here.
    #[inline(always)]
    fn enter(&mut self, names: &Names, c: Call) -> std::io::Result<()> {
        self.event(names, &c.entered())
    }

    /// A traced call returned: [`ViewEvent::Exit`] (`closed` as there).
    #[inline(always)]
    fn exit(&mut self, names: &Names, c: Call, closed: bool) -> std::io::Result<()> {
        self.event(names, &c.exited(closed))
    }
}

impl<S: Sink + ?Sized> Sink for &mut S {
    #[inline]
    fn event(&mut self, names: &Names, ev: &ViewEvent<'_>) -> std::io::Result<()> {
        (**self).event(names, ev)
    }

    #[inline(always)]
    fn enter(&mut self, names: &Names, c: Call) -> std::io::Result<()> {
        (**self).enter(names, c)
    }

    #[inline(always)]
    fn exit(&mut self, names: &Names, c: Call, closed: bool) -> std::io::Result<()> {
        (**self).exit(names, c, closed)
    }
}

/// Two consumers fed in one pass, each called directly (no `dyn`): the
/// report's collector and its flame chart.
impl<A: Sink, B: Sink> Sink for (A, B) {
    #[inline]
    fn event(&mut self, names: &Names, ev: &ViewEvent<'_>) -> std::io::Result<()> {
        self.0.event(names, ev)?;
        self.1.event(names, ev)
    }

    #[inline(always)]
    fn enter(&mut self, names: &Names, c: Call) -> std::io::Result<()> {
        self.0.enter(names, c)?;
        self.1.enter(names, c)
    }

    #[inline(always)]
    fn exit(&mut self, names: &Names, c: Call, closed: bool) -> std::io::Result<()> {
        self.0.exit(names, c, closed)?;
        self.1.exit(names, c, closed)
    }
}

/// Feeds every event to each of several consumers, for one pass over the file.
pub struct Tee<'s>(pub Vec<&'s mut dyn Sink>);

impl Sink for Tee<'_> {
    fn event(&mut self, names: &Names, ev: &ViewEvent<'_>) -> std::io::Result<()> {
        for s in &mut self.0 {
            s.event(names, ev)?;
        }
        Ok(())
    }

    fn enter(&mut self, names: &Names, c: Call) -> std::io::Result<()> {
        for s in &mut self.0 {
            s.enter(names, c)?;
        }
        Ok(())
    }

    fn exit(&mut self, names: &Names, c: Call, closed: bool) -> std::io::Result<()> {
        for s in &mut self.0 {
            s.exit(names, c, closed)?;
        }
        Ok(())
    }
}

/// A uevent's label: its type's name, or `uevent N`.
pub fn uevent_label(ty: u32, type_name: Option<&str>) -> String {
    type_name.map_or_else(|| format!("uevent {ty}"), str::to_owned)
}

/// A sample's label (`event: leaf function`) and its callchain, leaf first.
pub fn sample_label<'n>(names: &'n Names, event: &str, stack: &[FuncId]) -> (String, Vec<&'n str>) {
    let chain: Vec<&str> = stack.iter().map(|&f| names.name(f)).collect();
    let label = format!("{event}: {}", chain.first().unwrap_or(&"[unknown]"));
    (label, chain)
}
