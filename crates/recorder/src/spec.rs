//! What a recording is asked to record: its events ([`EventSpec`]) and the
//! sizes and mode of its rings ([`RecorderOptions`]), with the watermarks
//! the drain loop is woken at. Both the [`crate::Recorder`] and its rings
//! ([`crate::ring`]) read them; they sit below both.

use perfaux_abi::attr::{AttrFlags, PerfEventAttr};

/// One event of a recording: opened with `open` on every thread, written
/// to the file with the attr perf 6.1 accepts for it.
#[derive(Debug, Clone)]
pub struct EventSpec {
    /// Its name in the file (EVENT_DESC).
    pub name: String,
    /// The attr it is opened with.
    pub open: PerfEventAttr,
    /// Index of its group leader among the events (its own index if none).
    pub leader: usize,
    /// It carries the uevent stream (its uevents become BPF-output samples).
    pub uevent_stream: bool,
    /// Its PMU has an AUX area (the ring's buffer belongs to it).
    pub has_aux: bool,
    /// Its AUX area holds uevents, not trace packets.
    pub uevent_log: bool,
}

impl EventSpec {
    /// An event of its own group; AUX facts from the capabilities of the
    /// PMU registered under its type.
    pub fn new(name: impl Into<String>, open: PerfEventAttr, index: usize) -> Self {
        EventSpec {
            name: name.into(),
            has_aux: crate::pmus::has_aux(open.type_),
            uevent_log: crate::pmus::is_uevent_log(open.type_),
            open,
            leader: index,
            uevent_stream: false,
        }
    }
}

/// Sizes and mode of the rings.
#[derive(Debug, Clone)]
pub struct RecorderOptions {
    /// Data area bytes per ring (a power of two pages).
    pub data_size: u64,
    /// AUX area bytes per ring (a power of two pages).
    pub aux_size: u64,
    /// Overwrite AUX areas (flight recorder): read by [`crate::Recorder::snapshot`].
    pub overwrite: bool,
}

/// The largest default `aux_watermark`: a full-trace transaction ends (PERF_RECORD_AUX,
/// aux_head published) at least every 4 MiB however large the area, so the drain loop copies
/// and writes the trace while the producer runs, in pieces its buffer holds, instead of a
/// quarter of a large area at a time (with `-m ,64M`, 16 MiB read into memory at once and, at
/// the end, most of a short recording still to write after the program is gone).
pub const AUX_WATERMARK_MAX: u64 = 4 << 20;

/// Sets the watermarks the drain loop is woken at, unless the caller chose
/// them: a quarter of each area (the AUX one at most [`AUX_WATERMARK_MAX`]),
/// so that the consumer runs well before the producer has to drop anything.
/// Applied to every event [`Recorder::new`](crate::Recorder::new) opens; a
/// caller whose events another process opens applies it to their attrs too.
pub fn default_watermarks(ev: &mut EventSpec, opts: &RecorderOptions) {
    if !ev.open.flags.contains(AttrFlags::WATERMARK) && ev.open.wakeup_watermark() == 0 {
        ev.open.flags |= AttrFlags::WATERMARK;
        ev.open
            .set_wakeup_watermark((opts.data_size / 4).min(u64::from(u32::MAX)) as u32);
    }
    if ev.has_aux && !opts.overwrite && ev.open.aux_watermark == 0 {
        ev.open.aux_watermark = (opts.aux_size / 4).min(AUX_WATERMARK_MAX) as u32;
    }
}
