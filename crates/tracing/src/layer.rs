//! The `tracing_subscriber::Layer`: spans as swtrace calls, events as uevents.
//!
//! While no [`crate::Recording`] is on, a span's entry does nothing past one relaxed load (is
//! any recording on?) and its exit nothing past one thread-local load (does this thread hold
//! an open call?), before any lookup.
//!
//! One swtrace [`Probe`] per span callsite, made at `register_callsite` and never freed (a
//! program has a fixed set of callsites), named `target::name`. A span keeps its callsite's
//! probe in its registry extensions, and the layer keeps it by span id in a table of its own
//! ([`crate::span_table`]), written when the span is made: an entry reads the table and enters
//! the probe, without the registry's lookup of the span (two locked compare-and-swaps on its
//! slot). A span whose slot another took, or whose fields are still to send, takes the
//! registry's way: a per-thread cache by callsite where the callsite declares no field, else
//! the extensions. The guard the entry returns waits on a per-thread stack for the exit.
//!
//! Spans are normally left in the reverse order of entry on a thread. One left out of order
//! (an exit for a span below the top) closes the spans entered above it as well, as a
//! function's return ends the calls it made: the trace is a call tree.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{OnceLock, RwLock};
use std::time::{Duration, Instant};

use perfaux_swtrace::{Probe, ProbeGuard};
use tracing_core::callsite::Identifier;
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::subscriber::Interest;
use tracing_core::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::fields::{KeyValues, payload};
use crate::recording;
use crate::span_table::{self, SpanTable};
use crate::{EVENT, SPAN_FIELDS, UEVENT_TYPES};

/// The layer ([`layer`]).
#[derive(Debug)]
pub struct PerfauxLayer {
    /// Its spans' probes by span id. Ids are a registry's own, so each layer value has a
    /// table of its own (a clone too: it may go into another subscriber).
    spans: Box<SpanTable>,
}

impl Clone for PerfauxLayer {
    /// A layer with a table of its own: a clone in a second subscriber sees that
    /// registry's ids, which the first's table would confuse with its own.
    fn clone(&self) -> Self {
        PerfauxLayer {
            spans: Box::new(SpanTable::new(span_table::SLOTS)),
        }
    }
}

impl Default for PerfauxLayer {
    /// [`layer`].
    fn default() -> Self {
        layer()
    }
}

/// The layer that records spans and events into the thread's perfaux recording.
pub fn layer() -> PerfauxLayer {
    for &(name, ty) in UEVENT_TYPES {
        perfaux_swtrace::name_uevent_type(ty, name);
    }
    // Under `perfaux record`: the layer records from now (its entries ask one flag).
    recording::note_recorder();
    recording::triggers_from_recorder();
    PerfauxLayer {
        spans: Box::new(SpanTable::new(span_table::SLOTS)),
    }
}

/// What a span keeps in its extensions.
struct SpanProbe {
    probe: &'static Probe,
    /// `span=NAME k=v...`, sent once, at the first entry.
    fields: String,
    sent: AtomicBool,
    /// Time entered, summed over its entries, while a slow-span trigger is on.
    busy_ns: AtomicU64,
    /// The slow-span trigger fired for it.
    slow: AtomicBool,
}

/// A span this thread is in: its id, its open call, and when it was entered (only while a
/// slow-span trigger needs it).
struct Open {
    id: u64,
    _call: ProbeGuard,
    since: Option<Instant>,
}

thread_local! {
    /// The text of the event this thread is recording (`key=value`), kept between events.
    static EVENT_TEXT: RefCell<String> = const { RefCell::new(String::new()) };
    /// The spans this thread is in, innermost last.
    static OPEN: RefCell<Vec<Open>> = const { RefCell::new(Vec::new()) };
    /// How many spans [`OPEN`] holds: what an exit reads first. No destructor, so one load
    /// (`OPEN`'s access checks its destructor's state and its borrow), and a thread that
    /// entered no span while recording looks no further.
    static OPEN_COUNT: Cell<usize> = const { Cell::new(0) };
}

/// The probe of each span callsite.
fn probes() -> &'static RwLock<HashMap<Identifier, &'static Probe>> {
    static P: OnceLock<RwLock<HashMap<Identifier, &'static Probe>>> = OnceLock::new();
    P.get_or_init(Default::default)
}

fn probe_of(meta: &'static Metadata<'static>) -> &'static Probe {
    let id = meta.callsite();
    if let Some(p) = probes().read().unwrap_or_else(|e| e.into_inner()).get(&id) {
        return p;
    }
    let mut map = probes().write().unwrap_or_else(|e| e.into_inner());
    map.entry(id).or_insert_with(|| {
        let name: &'static str = Box::leak(format!("{}::{}", meta.target(), meta.name()).into());
        let (file, line) = (meta.file().unwrap_or(""), meta.line().unwrap_or(0));
        Box::leak(Box::new(Probe::exact(name, file, line)))
    })
}

/// What [`SpanTable`] keeps for `probe`.
fn probe_addr(probe: &'static Probe) -> usize {
    probe as *const Probe as usize
}

/// Enters `probe` for span `id` on this thread: the call, tagged with the span's id, kept
/// open until the span's exit.
fn enter_call(probe: &'static Probe, id: &Id) {
    recording::join_thread();
    let call = probe.enter();
    // The span's id on each entry: an async task's polls, each a call, read as one span.
    call.tag(id.into_u64());
    let since = recording::slow_threshold().map(|_| Instant::now());
    // After this thread's thread-locals are gone (a span entered in a destructor) the call
    // is not kept open: it ends here, as its guard drops.
    let _ = OPEN.try_with(|o| {
        let mut open = o.borrow_mut();
        push_open(&mut open, id.into_u64(), call, since);
        let _ = OPEN_COUNT.try_with(|n| n.set(open.len()));
    });
}

/// Pushes an [`Open`] written field by field straight into the stack's spare room:
/// `Vec::push` built it on the machine stack and copied it with 16-byte loads spanning the
/// narrower stores that had just built it, a store-forwarding stall that was a third of the
/// entry's own time (perf, 2026-11-29). The room is reserved ahead.
#[inline(always)]
fn push_open(open: &mut Vec<Open>, id: u64, call: ProbeGuard, since: Option<Instant>) {
    if open.len() == open.capacity() {
        open.reserve(open.len().max(16));
    }
    let len = open.len();
    let dst = open.spare_capacity_mut().as_mut_ptr().cast::<Open>();
    // SAFETY: `dst` is the first spare element, room reserved above: a projection in bounds
    // of the allocation, aligned, unaliased (as are the two below).
    let p_id = unsafe { &raw mut (*dst).id };
    // SAFETY: as above.
    let p_call = unsafe { &raw mut (*dst)._call };
    // SAFETY: as above.
    let p_since = unsafe { &raw mut (*dst).since };
    // SAFETY: each field of the spare element written once, before `set_len` counts it.
    unsafe { p_id.write(id) };
    // SAFETY: as above.
    unsafe { p_call.write(call) };
    // SAFETY: as above.
    unsafe { p_since.write(since) };
    // SAFETY: the element at `len` (the first spare one) was just written whole.
    unsafe { open.set_len(len + 1) };
}

/// Slots of the thread's callsite cache ([`callsite_probe`]).
const CALLSITES: usize = 64;

thread_local! {
    /// Callsites' probes this thread entered, by the address of their metadata (static, so
    /// never another callsite's), direct-mapped.
    static CALLSITE_PROBES: [std::cell::Cell<(usize, Option<&'static Probe>)>; CALLSITES] =
        const { [const { std::cell::Cell::new((0, None)) }; CALLSITES] };
}

/// The probe of the callsite `meta` describes, from the thread's cache (else the map's).
fn callsite_probe(meta: &'static Metadata<'static>) -> &'static Probe {
    let key = meta as *const Metadata<'static> as usize;
    let slot = (key >> 4) % CALLSITES;
    CALLSITE_PROBES
        .try_with(|c| match c[slot].get() {
            (k, Some(p)) if k == key => p,
            _ => {
                let p = probe_of(meta);
                c[slot].set((key, Some(p)));
                p
            }
        })
        .unwrap_or_else(|_| probe_of(meta))
}

fn send(ty: u32, text: &str) {
    recording::uevent(ty, payload(text));
}

impl<S> Layer<S> for PerfauxLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if meta.is_span() {
            probe_of(meta);
        }
        Interest::always()
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let meta = attrs.metadata();
        let mut fields = String::new();
        if !attrs.fields().is_empty() {
            fields.push_str("span=");
            fields.push_str(meta.name());
            attrs.record(&mut KeyValues(&mut fields));
        }
        let probe = probe_of(meta);
        // Nothing to send at its entries: they find the probe in the table (until another
        // span takes the slot). Written before the span can be entered, and written in any
        // case: the registry gives a closed span's id again (after 8191 reuses of its slot),
        // and a pair left for the span that had it would be taken for this one's.
        let quick = if fields.is_empty() {
            probe_addr(probe)
        } else {
            0
        };
        self.spans.put(id.into_u64(), quick);
        // `replace`, not `insert` (which panics on a second): the layer twice in one stack
        // must not abort the program.
        span.extensions_mut().replace(SpanProbe {
            probe,
            fields,
            sent: AtomicBool::new(false),
            busy_ns: AtomicU64::new(0),
            slow: AtomicBool::new(false),
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(sp) = ext.get_mut::<SpanProbe>() {
            // A span that records its fields over and over (a running count) keeps the first
            // payload's worth: what a uevent carries.
            if sp.fields.len() >= crate::fields::MAX_PAYLOAD {
                return;
            }
            if sp.fields.is_empty() {
                sp.fields.push_str("span=");
                sp.fields.push_str(span.name());
            }
            values.record(&mut KeyValues(&mut sp.fields));
            // Fields recorded after the first entry go out at the next one, which must take
            // the way that sends them (the extensions' lock, held here, orders this against
            // an entry that sends and writes the pair under it).
            sp.sent.store(false, Ordering::Relaxed);
            self.spans.forget(id.into_u64());
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        // Nothing records: the span costs the registry's work and this load.
        if !recording::active() {
            return;
        }
        self.enter_recording(id, &ctx);
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        // No span open on this thread (nothing recorded it): the exit costs this load. Not
        // whether a recording is on: a span entered while recording may be left after it.
        if OPEN_COUNT.try_with(Cell::get) == Ok(0) {
            return;
        }
        self.exit_open(id, &ctx);
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        self.event(event);
    }
}

impl PerfauxLayer {
    /// A span's entry while a recording is on: out of line, as [`Self::exit_open`].
    #[inline(never)]
    fn enter_recording<S>(&self, id: &Id, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if let Some(addr) = self.spans.get(id.into_u64()) {
            // SAFETY: the table holds only `probe_addr` values of probes, which are leaked
            // (`probe_of`): a live `&'static Probe`.
            enter_call(unsafe { &*(addr as *const Probe) }, id);
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let meta = span.metadata();
        if meta.fields().is_empty() {
            // No field to send, ever: the probe is the callsite's, found by its (static)
            // metadata in the thread's cache, without the span's extensions and their lock.
            let probe = callsite_probe(meta);
            enter_call(probe, id);
            self.spans.try_put(id.into_u64(), probe_addr(probe));
            return;
        }
        let ext = span.extensions();
        let Some(sp) = ext.get::<SpanProbe>() else {
            return;
        };
        enter_call(sp.probe, id);
        if !sp.fields.is_empty() && recording::active() && !sp.sent.swap(true, Ordering::Relaxed) {
            send(SPAN_FIELDS, &sp.fields);
        }
        // Sent (or none): the next entries may skip the lookup. Under the extensions' read
        // lock, which `on_record`'s clearing of the pair waits for.
        if sp.fields.is_empty() || sp.sent.load(Ordering::Relaxed) {
            self.spans.try_put(id.into_u64(), probe_addr(sp.probe));
        }
    }

    /// A span's exit on a thread with open calls: out of line, so that the exit of a thread
    /// with none (nothing records) is a small function (no frame for this one's work).
    #[inline(never)]
    fn exit_open<S>(&self, id: &Id, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let raw = id.into_u64();
        let since = OPEN
            .try_with(|o| {
                let mut open = o.borrow_mut();
                // A span entered while nothing recorded has no open call (also after a recording).
                let i = open.iter().rposition(|s| s.id == raw)?;
                let since = open[i].since;
                // Innermost first: each call's drop marks its return.
                while open.len() > i {
                    open.pop();
                }
                let _ = OPEN_COUNT.try_with(|n| n.set(open.len()));
                since
            })
            .ok()
            .flatten();
        if let (Some(since), Some(limit)) = (since, recording::slow_threshold()) {
            self.account_busy(id, since.elapsed(), limit, ctx);
        }
    }

    fn event(&self, event: &Event<'_>) {
        if !recording::active() {
            return;
        }
        recording::join_thread();
        let meta = event.metadata();
        let write = |text: &mut String| {
            use std::fmt::Write;
            let _ = write!(text, "level={} target={}", meta.level(), meta.target());
            event.record(&mut KeyValues(text));
            send(EVENT, text);
        };
        // The thread's buffer, not an allocation an event; a field's Debug that records an
        // event of its own finds it taken and uses a String of its own.
        let reused = EVENT_TEXT.try_with(|t| match t.try_borrow_mut() {
            Ok(mut text) => {
                text.clear();
                write(&mut text);
                // A burst of long payloads keeps no more than one payload's worth.
                text.shrink_to(crate::fields::MAX_PAYLOAD);
                true
            }
            Err(_) => false,
        });
        if reused != Ok(true) {
            write(&mut String::new());
        }
        if recording::snapshots_at(meta.level()) {
            recording::trigger(recording::Trigger::Level(meta.level()));
        }
    }

    /// Adds one entry's time to the span's busy time; past `limit_ns` in all, the slow-span
    /// trigger fires, once for the span.
    fn account_busy<S>(&self, id: &Id, took: Duration, limit_ns: u64, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let Some(span) = ctx.span(id) else { return };
        let fire = {
            let ext = span.extensions();
            let Some(sp) = ext.get::<SpanProbe>() else {
                return;
            };
            let took = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
            let busy = sp
                .busy_ns
                .fetch_add(took, Ordering::Relaxed)
                .saturating_add(took);
            (busy >= limit_ns && !sp.slow.swap(true, Ordering::Relaxed))
                .then(|| (sp.probe.name(), Duration::from_nanos(busy)))
        };
        if let Some((span, busy)) = fire {
            recording::trigger(recording::Trigger::Slow { span, busy });
        }
    }
}
