//! Recording the process in-process: a [`Recorder`] with the trace PMU and the uevent stream
//! on each thread that takes part, drained by a thread of its own.
//!
//! A thread joins at its first span or event ([`join_thread`]: one load and one thread-local
//! compare once joined): it opens its events on itself, under the recorder's lock, so its
//! trace starts with that span. A thread that exits while recording keeps its trace (the
//! core's task exit ends its AUX transaction). One recording at a time per process.
//!
//! Not handled yet: `fork` without `exec` while recording. The child inherits the recording's
//! state and rings; it must not record, nor finish the parent's recording (it should
//! `_exit`, as a forked child of a threaded program does anyway).

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use perfaux_perfdata::record_attrs::{base_attr, uevent_stream_attr};
use perfaux_recorder::{
    EventSpec, Output, RecordError, RecordSummary, Recorder, RecorderOptions, Waiter, pmus, synth,
};
use perfaux_swtrace::Timing;

/// The recording's generation, 0 while none is on: a thread that joined this one has it in
/// [`JOINED`].
static GENERATION: AtomicU64 = AtomicU64::new(0);
static CURRENT: Mutex<Option<Arc<Shared>>> = Mutex::new(None);

thread_local! {
    static JOINED: Cell<u64> = const { Cell::new(0) };
    /// Set while this thread holds a recording's recorder: a panic there (the panic hook runs
    /// before unwinding, the lock still held) must not take it again.
    static HOLDING: Cell<bool> = const { Cell::new(false) };
}

/// The recorder, locked, with [`HOLDING`] set while the guard lives.
struct Held<'a>(std::sync::MutexGuard<'a, Option<Recorder>>);

impl Held<'_> {
    fn lock(m: &Mutex<Option<Recorder>>) -> Held<'_> {
        let g = m.lock().unwrap_or_else(|e| e.into_inner());
        let _ = HOLDING.try_with(|h| h.set(true));
        Held(g)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let _ = HOLDING.try_with(|h| h.set(false));
    }
}

impl std::ops::Deref for Held<'_> {
    type Target = Option<Recorder>;
    fn deref(&self) -> &Option<Recorder> {
        &self.0
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut Option<Recorder> {
        &mut self.0
    }
}

/// Whether this thread holds a recorder now (see [`HOLDING`]).
fn holding() -> bool {
    HOLDING.try_with(Cell::get).unwrap_or(true)
}

/// How often the drain thread empties the rings when no watermark woke it (and how long a
/// finish waits for it to stop).
const DRAIN_EVERY: Duration = Duration::from_millis(10);

/// Sizes and mode of a [`Recording`].
#[derive(Debug, Clone)]
pub struct RecordingOptions {
    /// Trace bytes per thread (the AUX area; a power of two pages).
    pub aux_size: u64,
    /// Record bytes per thread (uevents; a power of two pages). Events that find it full
    /// before the drain thread emptied it are lost and counted (`RecordSummary::lost`): a
    /// burst of about 8,000 events (1 MiB) between two drains fills the default.
    pub data_size: u64,
    /// A flight recorder: each thread's area is overwritten in a ring and only what
    /// [`Recording::snapshot`] and the triggers below take is kept.
    pub flight_recorder: bool,
    /// Flight recorder: a snapshot when an event at this level or a more severe one is
    /// recorded (`Some(Level::ERROR)`: on every `error!`).
    pub snapshot_on_level: Option<tracing_core::Level>,
    /// Flight recorder: a snapshot when a span has been entered for longer than this in all
    /// (its busy time, summed over its entries: an async task's polls), once per span.
    pub snapshot_on_slow: Option<Duration>,
    /// Flight recorder: a snapshot when a thread panics, after a `level=ERROR target=panic`
    /// event with the panic's message and place (a panic hook, chained to the one before it).
    pub snapshot_on_panic: bool,
    /// The triggers take at most one snapshot per this interval; the others are counted
    /// ([`Recording::snapshots_suppressed`]). [`Recording::snapshot`] is not limited.
    pub snapshot_interval: Duration,
    /// Flight recorder: each snapshot keeps this much of each thread's newest trace, from its
    /// first packet in it, with the calls open there (`perfaux record -S --window`);
    /// `aux_size` stays the cap. `None`: all the area holds.
    pub window: Option<Duration>,
    /// Which span entries and exits read the clock, as `perfaux record -e
    /// swtrace/timing=.../` chooses it: [`Timing::Full`] (the default) times every one;
    /// [`Timing::Periodic`] `{ every: N }` reads the clock once in N packets (and at each
    /// SYNC), the decoder interpolates the others and the views mark them (`~sec.nsec` in
    /// `perfaux script --call-trace`). Reading the clock is most of a recorded span's cost
    /// past the registry's (two reads an entry and exit, BENCHMARKS.md); periodic timing
    /// trades the exact durations of short spans for it. [`Timing::EntryOnly`] times the
    /// entries only.
    pub timing: Timing,
}

impl Default for RecordingOptions {
    fn default() -> Self {
        RecordingOptions {
            aux_size: 4 << 20,
            data_size: 1 << 20,
            flight_recorder: false,
            snapshot_on_level: None,
            snapshot_on_slow: None,
            snapshot_on_panic: false,
            snapshot_interval: Duration::from_secs(1),
            window: None,
            timing: Timing::Full,
        }
    }
}

struct Shared {
    generation: u64,
    rec: Mutex<Option<Recorder>>,
    stop: AtomicBool,
    /// The first error the drain thread met (it stops draining then).
    drain_error: Mutex<Option<RecordError>>,
    opts: RecordingOptions,
    /// When a trigger last took a snapshot.
    last_triggered: Mutex<Option<Instant>>,
    /// Triggers that found the interval not yet over.
    suppressed: AtomicU64,
    /// Snapshots the triggers took.
    triggered: AtomicU64,
}

/// A recording of this process's spans and events into a perf.data.
pub struct Recording {
    shared: Arc<Shared>,
    drain: Option<JoinHandle<()>>,
    path: PathBuf,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("path", &self.path)
            .field("generation", &self.shared.generation)
            .finish()
    }
}

/// Set while a recording is on: this process's own (from its start to its end), or `perfaux
/// record`'s around it (from [`note_recorder`]). A span's entry reads it first, alone.
static ON: AtomicBool = AtomicBool::new(false);

/// Whether a recording is on: this process's own, or `perfaux record`'s around it.
#[inline]
pub(crate) fn active() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Under `perfaux record` the recording is on from the process's start: [`active`] from
/// now. Called by [`crate::layer`] (the layer is made by it alone).
pub(crate) fn note_recorder() {
    if under_perfaux_record() {
        ON.store(true, Ordering::Relaxed);
    }
}

/// Whether the process runs under `perfaux record` (its preload runtime took the probes):
/// the runtime records every thread, and uevents go to it.
#[inline]
pub(crate) fn under_perfaux_record() -> bool {
    static RUNTIME: OnceLock<bool> = OnceLock::new();
    *RUNTIME.get_or_init(perfaux_swtrace::probes_to_runtime)
}

/// A uevent into the calling thread's recording; errors are the recording's business (a
/// thread not recorded, or a full buffer, which counts the loss).
pub(crate) fn uevent(ty: u32, payload: &[u8]) {
    if GENERATION.load(Ordering::Relaxed) != 0 {
        let _ = perfaux_core::perf_uevent(ty, payload, 0);
    } else if under_perfaux_record() {
        let _ = perfaux_swtrace::forward::uevent(ty, payload);
    }
}

/// Makes the calling thread part of the recording that is on, if it is not yet.
#[inline]
pub(crate) fn join_thread() {
    // Under `perfaux record` every thread is recorded already: GENERATION stays 0.
    let g = GENERATION.load(Ordering::Acquire);
    // After this thread's thread-locals are gone (a span left in a destructor), it stays out.
    if g != 0 && JOINED.try_with(Cell::get).is_ok_and(|j| j != g) {
        join_slow(g);
    }
}

#[cold]
#[inline(never)]
fn join_slow(g: u64) {
    let _ = JOINED.try_with(|j| j.set(g));
    let Some(shared) = CURRENT.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
        return;
    };
    if shared.generation != g {
        return;
    }
    let mut rec = Held::lock(&shared.rec);
    let Some(rec) = rec.as_mut() else { return };
    let tid = perfaux_core::gettid();
    // A thread the recorder cannot open events on stays unrecorded; the recording goes on.
    if rec.add_thread(tid).is_ok() {
        let _ = synth::synth_comm(rec, std::process::id(), tid as u32, &thread_name());
    }
}

fn thread_name() -> String {
    let mut buf = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into `buf`.
    let r = unsafe { libc::prctl(libc::PR_GET_NAME, buf.as_mut_ptr()) };
    if r != 0 {
        return String::from("?");
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

impl Recording {
    /// Starts recording into `path` (written when the recording finishes). The calling
    /// thread is part of it from now; other threads join at their first span or event.
    pub fn start(path: impl AsRef<Path>, opts: RecordingOptions) -> Result<Recording, RecordError> {
        let path = path.as_ref().to_path_buf();
        if under_perfaux_record() {
            return Err(RecordError::Config(format!(
                "this process runs under `perfaux record`, which records its spans and events \
                 into its own file: {} is not written",
                path.display()
            )));
        }
        let mut current = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
        if current.is_some() {
            return Err(RecordError::Config(
                "a perfaux-tracing recording is already on in this process".into(),
            ));
        }
        if matches!(opts.timing, Timing::Periodic { every: 0 }) {
            return Err(RecordError::Config(
                "timing: periodic timing needs at least 1 packet per timestamp".into(),
            ));
        }
        // The trace PMU's timing field, as `perfaux record -e swtrace/timing=.../` sets it
        // (attr.config bits 1-2 and 32-63): the driver gives it to each thread's writer.
        let (name, config) = match opts.timing {
            Timing::Full => ("swtrace//".to_string(), 0),
            t => (
                format!("swtrace/timing={}/", t.name()),
                perfaux_pmus::swtrace::timing_config(t),
            ),
        };
        let trace = EventSpec::new(name, base_attr(pmus::SWTRACE_TYPE, config), 0);
        let mut uevents = EventSpec::new(
            perfaux_perfdata::uevent_sample::UEVENT_EVENT_NAME,
            uevent_stream_attr(),
            1,
        );
        uevents.uevent_stream = true;
        let rec_opts = RecorderOptions {
            data_size: opts.data_size,
            aux_size: opts.aux_size,
            overwrite: opts.flight_recorder,
        };
        let tid = perfaux_core::gettid();
        let mut rec = Recorder::new(
            vec![trace, uevents],
            rec_opts,
            &[tid],
            Output::File(path.clone()),
        )?;
        rec.set_window(opts.window.filter(|_| opts.flight_recorder));
        synth::synth_comm(&mut rec, std::process::id(), tid as u32, &thread_name())?;
        rec.enable()?;
        let rec_waiter = rec.waiter();
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let generation = NEXT.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            generation,
            rec: Mutex::new(Some(rec)),
            stop: AtomicBool::new(false),
            drain_error: Mutex::new(None),
            opts: opts.clone(),
            last_triggered: Mutex::new(None),
            suppressed: AtomicU64::new(0),
            triggered: AtomicU64::new(0),
        });
        SLOW_NS.store(
            opts.snapshot_on_slow
                .filter(|_| opts.flight_recorder)
                .map_or(0, |d| d.as_nanos().clamp(1, u64::MAX as u128) as u64),
            Ordering::Relaxed,
        );
        LEVEL_AT.store(
            opts.snapshot_on_level
                .filter(|_| opts.flight_recorder)
                .map_or(0, |l| severity(&l)),
            Ordering::Relaxed,
        );
        if opts.flight_recorder && opts.snapshot_on_panic {
            install_panic_hook();
            PANIC_ON.store(true, Ordering::Release);
        }
        let drainer = Arc::clone(&shared);
        let waiter = rec_waiter;
        let drain = std::thread::Builder::new()
            .name("perfaux-drain".into())
            .spawn(move || drain_loop(&drainer, waiter))
            .map_err(|e| RecordError::Config(format!("the drain thread: {e}")))?;
        *current = Some(Arc::clone(&shared));
        JOINED.with(|j| j.set(generation));
        GENERATION.store(generation, Ordering::Release);
        ON.store(true, Ordering::Release);
        Ok(Recording {
            shared,
            drain: Some(drain),
            path,
        })
    }

    /// Flight recorder: writes what each thread's area holds now into the file (the newest
    /// trace, up to the area's size), and the file so far at its path, whole (see
    /// [`Recorder::checkpoint`]): the snapshot is there if the process dies before
    /// [`Self::finish`]. Returns whether anything was written.
    pub fn snapshot(&self) -> Result<bool, RecordError> {
        let mut rec = Held::lock(&self.shared.rec);
        match rec.as_mut() {
            Some(r) => snapshot_and_checkpoint(r),
            None => Ok(false),
        }
    }

    /// Snapshots the triggers took so far.
    pub fn snapshots_triggered(&self) -> u64 {
        self.shared.triggered.load(Ordering::Relaxed)
    }

    /// Triggers that took no snapshot because one was taken less than
    /// [`RecordingOptions::snapshot_interval`] before.
    pub fn snapshots_suppressed(&self) -> u64 {
        self.shared.suppressed.load(Ordering::Relaxed)
    }

    /// Ends the recording: the last drain, and the file written at its path.
    pub fn finish(mut self) -> Result<RecordSummary, RecordError> {
        self.end()
    }

    fn end(&mut self) -> Result<RecordSummary, RecordError> {
        // Not under `perfaux record` (start refuses it there): nothing records after this.
        ON.store(false, Ordering::Release);
        GENERATION.store(0, Ordering::Release);
        SLOW_NS.store(0, Ordering::Relaxed);
        LEVEL_AT.store(0, Ordering::Relaxed);
        PANIC_ON.store(false, Ordering::Release);
        *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.shared.stop.store(true, Ordering::Release);
        if let Some(d) = self.drain.take() {
            let _ = d.join();
        }
        let rec = self
            .shared
            .rec
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(rec) = rec else {
            return Err(RecordError::Config("the recording has ended".into()));
        };
        let summary = rec.finish()?;
        match self
            .shared
            .drain_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            Some(e) => Err(e),
            None => Ok(summary),
        }
    }
}

impl Drop for Recording {
    /// A recording dropped unfinished is finished: what it recorded is written.
    fn drop(&mut self) {
        if self.drain.is_some() {
            let _ = self.end();
        }
    }
}

/// Drains when a ring's producer passed its watermark (as perf polls its fds), or every
/// [`DRAIN_EVERY`]; the recorder is taken only to drain, so a thread joining waits at most one
/// drain.
fn drain_loop(shared: &Shared, mut waiter: Waiter) {
    loop {
        waiter.wait(DRAIN_EVERY);
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let mut rec = Held::lock(&shared.rec);
        let Some(r) = rec.as_mut() else { return };
        if let Err(e) = r.drain() {
            *shared.drain_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
            return;
        }
    }
}

/// Whether a recording (this process's flight recording, or `perfaux record`'s) asked for the
/// panic trigger: the hook, once installed, stays, and asks this.
static PANIC_ON: AtomicBool = AtomicBool::new(false);

/// [`RecordingOptions::snapshot_on_slow`] in ns while a flight recording has it (0: off).
static SLOW_NS: AtomicU64 = AtomicU64::new(0);

/// The busy time past which a span triggers a snapshot, if a recording asks for it.
#[inline]
pub(crate) fn slow_threshold() -> Option<u64> {
    match SLOW_NS.load(Ordering::Relaxed) {
        0 => None,
        ns => Some(ns),
    }
}

/// Why a trigger fired, said in the `tracing_snapshot` uevent before the snapshot.
pub(crate) enum Trigger<'a> {
    Level(&'a tracing_core::Level),
    Slow { span: &'a str, busy: Duration },
    Panic,
}

/// [`RecordingOptions::snapshot_on_level`] while a flight recording has it, as
/// [`severity`] (0: off).
static LEVEL_AT: AtomicU8 = AtomicU8::new(0);

/// ERROR 1 ... TRACE 5: the larger, the more verbose (tracing's order).
fn severity(l: &tracing_core::Level) -> u8 {
    use tracing_core::Level;
    match *l {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        Level::DEBUG => 4,
        _ => 5,
    }
}

/// Whether an event at `level` triggers a snapshot: it is as severe as the level asked, or
/// more.
#[inline]
pub(crate) fn snapshots_at(level: &tracing_core::Level) -> bool {
    let at = LEVEL_AT.load(Ordering::Relaxed);
    at != 0 && severity(level) <= at
}

/// A trigger fired on this thread: a snapshot now, unless one was taken less than the
/// interval ago (then it is counted). Taken on the triggering thread, so the trace it keeps
/// ends where the trigger happened.
pub(crate) fn trigger(why: Trigger<'_>) {
    if GENERATION.load(Ordering::Acquire) == 0 && under_perfaux_record() {
        trigger_recorder(&why);
        return;
    }
    let Some(shared) = CURRENT.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
        return;
    };
    if !shared.opts.flight_recorder || shared.generation != GENERATION.load(Ordering::Acquire) {
        return;
    }
    if !interval_passed(&shared.last_triggered, shared.opts.snapshot_interval) {
        shared.suppressed.fetch_add(1, Ordering::Relaxed);
        return;
    }
    uevent(crate::SNAPSHOT, why.reason().as_bytes());
    let mut rec = Held::lock(&shared.rec);
    let Some(r) = rec.as_mut() else { return };
    match snapshot_and_checkpoint(r) {
        Ok(true) => {
            shared.triggered.fetch_add(1, Ordering::Relaxed);
        }
        Ok(false) => {}
        // A trigger has no caller to tell: said once, and the recording goes on (the
        // snapshot that was taken is in the file at the finish).
        Err(e) => {
            static SAID: AtomicBool = AtomicBool::new(false);
            if !SAID.swap(true, Ordering::Relaxed) {
                eprintln!("perfaux-tracing: a triggered snapshot: {e}");
            }
        }
    }
}

/// A snapshot, then the file so far put at the output's path ([`Recorder::checkpoint`]), so
/// that the snapshot outlives a crash or a SIGKILL of the process. Whether the snapshot
/// held anything. A checkpoint that fails (a file system that cannot take the copy) is said
/// once on stderr: the snapshot is taken all the same, and is in the file at the finish.
fn snapshot_and_checkpoint(r: &mut Recorder) -> Result<bool, RecordError> {
    let took = r.snapshot()?;
    if took {
        // The records drained since the last pass (the trigger's uevent) go with it.
        r.drain()?;
        if let Err(e) = r.checkpoint() {
            static SAID: AtomicBool = AtomicBool::new(false);
            if !SAID.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "perfaux-tracing: the snapshot is taken, but the file could not be put in \
                     place before the recording's end: {e}"
                );
            }
        }
    }
    Ok(took)
}

impl Trigger<'_> {
    /// The `tracing_snapshot` uevent's payload.
    fn reason(&self) -> String {
        match self {
            Trigger::Level(l) => format!("reason=level level={l}"),
            Trigger::Slow { span, busy } => {
                format!("reason=slow span={span} busy_us={}", busy.as_micros())
            }
            Trigger::Panic => "reason=panic".to_string(),
        }
    }
}

/// How often, at most, a trigger asks `perfaux record` for a snapshot.
const RECORDER_INTERVAL: Duration = Duration::from_secs(1);

/// Under `perfaux record -S --snapshot-on...`: the trigger is a `tracing_snapshot` uevent,
/// on which the recorder takes the snapshot (at its next pass, a millisecond or so later),
/// at most one per [`RECORDER_INTERVAL`].
fn trigger_recorder(why: &Trigger<'_>) {
    static LAST: Mutex<Option<Instant>> = Mutex::new(None);
    if interval_passed(&LAST, RECORDER_INTERVAL) {
        uevent(crate::SNAPSHOT, why.reason().as_bytes());
    }
}

/// Whether `interval` has passed since the time in `last` (or none is there); if so, now
/// becomes the time in `last`.
fn interval_passed(last: &Mutex<Option<Instant>>, interval: Duration) -> bool {
    let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    if last.is_some_and(|t| now.duration_since(t) < interval) {
        return false;
    }
    *last = Some(now);
    true
}

/// Under `perfaux record`: the triggers `record -S --snapshot-on...` asked for, through the
/// environment (perfaux-preload-abi's `tracing` contract). Once, from [`crate::layer`].
pub(crate) fn triggers_from_recorder() {
    use perfaux_preload_abi::tracing::*;
    if !under_perfaux_record() {
        return;
    }
    if let Some(level) = std::env::var(ENV_SNAPSHOT_ON)
        .ok()
        .and_then(|l| l.parse::<tracing_core::Level>().ok())
    {
        LEVEL_AT.store(severity(&level), Ordering::Relaxed);
    }
    if let Some(ns) = std::env::var(ENV_SNAPSHOT_ON_SLOW_NS)
        .ok()
        .and_then(|n| n.parse::<u64>().ok())
        .filter(|&n| n > 0)
    {
        SLOW_NS.store(ns, Ordering::Relaxed);
    }
    if std::env::var(ENV_SNAPSHOT_ON_PANIC).is_ok_and(|v| v == "1") {
        install_panic_hook();
        PANIC_ON.store(true, Ordering::Release);
    }
}

/// Chains a hook before the panic hook in place: the panic becomes an event, then a snapshot.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if PANIC_ON.load(Ordering::Acquire) && !holding() {
                join_thread();
                let msg = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "Box<dyn Any>".into());
                let place = info.location().map_or_else(String::new, |l| {
                    format!(" location=\"{}:{}\"", l.file(), l.line())
                });
                let text = format!("level=ERROR target=panic message={msg:?}{place}");
                uevent(crate::EVENT, crate::fields::payload(&text));
                trigger(Trigger::Panic);
            }
            before(info);
        }));
    });
}
