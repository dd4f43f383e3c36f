//! What a writer is configured with ([`WriterConfig`] over an [`AuxRegion`], in an
//! [`AuxMode`], with an [`OnFull`] slow path) and what it reports ([`WriterStatus`],
//! [`WriterError`]).

use std::ptr::NonNull;

use thiserror::Error;

use crate::clock::ClockSource;

/// Smallest AUX region the writer accepts: room for the largest SYNC and many packets.
pub const MIN_REGION: usize = 256;
/// Default `sync_period`: a SYNC at least every 512 bytes of stream.
pub const DEFAULT_SYNC_PERIOD: u32 = 512;

/// Errors of the writer's control calls.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum WriterError {
    /// The region's size is not a power of two of at least [`MIN_REGION`] bytes.
    #[error("AUX region size {0} is not a power of two >= 256")]
    BadRegionSize(usize),
    /// The region's base pointer is null.
    #[error("AUX region base is null")]
    NullRegion,
    /// This thread already has a writer.
    #[error("this thread already has a trace writer installed")]
    AlreadyInstalled,
    /// This thread has no writer.
    #[error("this thread has no trace writer installed")]
    NotInstalled,
    /// The call came from a signal handler (or the on_full slow path) that interrupted the
    /// writer in the middle of a packet.
    #[error("the trace writer is in the middle of a packet (called from a signal handler?)")]
    Busy,
    /// A full-trace limit lies before the head or more than the region's size beyond it.
    #[error("full-trace limit {limit} outside [aux_head {head}, aux_head + size {size}]")]
    BadLimit {
        /// The limit asked for.
        limit: u64,
        /// The writer's head.
        head: u64,
        /// The region's size.
        size: usize,
    },
    /// [`Timing::Periodic`] with `every` 0.
    #[error("timing: a timestamp every 0 packets (periodic timing needs at least 1)")]
    BadTimestampEvery,
    /// `sync_period` below the largest SYNC would make a stream of SYNCs.
    #[error("sync_period {0} is below the minimum of 128 bytes")]
    BadSyncPeriod(u32),
}

/// The AUX memory a writer fills.
#[derive(Debug)]
pub struct AuxRegion {
    base: NonNull<u8>,
    size: usize,
}

// SAFETY: an AuxRegion is only an address and a size; the constructor's contract makes the
// memory the writer's while installed, whichever thread built the region.
unsafe impl Send for AuxRegion {}

impl AuxRegion {
    /// A region of `size` bytes at `base`.
    ///
    /// # Safety
    ///
    /// From [`install`](super::install) until [`uninstall`](super::uninstall) returns (or the installing thread exits), `base ..
    /// base + size` must stay valid for writes, and nothing else may write it. In full-trace
    /// mode the writer only writes stream positions below the limit the core grants, so the
    /// core may hand out and read back the rest (the consumer's unread data) concurrently.
    /// Readers of bytes the writer may be writing (an overwrite-mode snapshot) must stop or
    /// pause the writer first, or read from a signal handler of the writer's own thread.
    pub unsafe fn new(base: *mut u8, size: usize) -> Result<AuxRegion, WriterError> {
        if !size.is_power_of_two() || size < MIN_REGION {
            return Err(WriterError::BadRegionSize(size));
        }
        let base = NonNull::new(base).ok_or(WriterError::NullRegion)?;
        Ok(AuxRegion { base, size })
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Base address.
    pub fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }
}

/// How the writer treats the end of its space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuxMode {
    /// Wrap freely, overwriting the oldest bytes (PERF_AUX_FLAG_OVERWRITE, snapshot mode).
    Overwrite,
    /// Never write at or beyond `limit` (a stream position, at most `aux_head + size`).
    FullTrace {
        /// The first stream position the writer may not write.
        limit: u64,
    },
}

/// The full-trace slow path: called with the head and the bytes the next packet needs when they
/// do not fit below the limit. Returns the new limit (after perf_aux_output_end/begin), or
/// `None` to stop writing until [`set_limit`](super::set_limit), or until the slow path gives
/// space when asked again: a stopped writer asks once in
/// [`FULL_RETRY_EVERY`](super::FULL_RETRY_EVERY) dropped events (with the head it stopped at).
/// Runs inside the writer's busy section: probes it enters are counted as lost, and control
/// calls it makes are deferred.
pub type OnFull = fn(aux_head: u64, needed: u64) -> Option<u64>;

/// What [`install`](super::install) sets up.
#[derive(Debug)]
pub struct WriterConfig {
    /// The AUX memory.
    pub region: AuxRegion,
    /// Overwrite or full-trace.
    pub mode: AuxMode,
    /// Stream position of the first byte to write (the AUX area's aux_head).
    pub aux_head: u64,
    /// Bytes of stream after which a SYNC is due (>= 128; [`DEFAULT_SYNC_PERIOD`]).
    pub sync_period: u32,
    /// Start paused (`aux_start_paused`): nothing is written before [`resume`](super::resume).
    pub start_paused: bool,
    /// The timestamp clock.
    pub clock: ClockSource,
    /// Full-trace slow path.
    pub on_full: Option<OnFull>,
    /// Which ENTER/EXIT packets carry a timestamp ([`Timing::Full`] by default: every one).
    pub timing: Timing,
    /// Follow calls while paused, so that the SYNC a resume writes names the calls opened
    /// meanwhile (see [`pause`](super::pause)). Off: a paused thread is not observed at all, and a paused
    /// call costs what a call with no writer costs (about 0.8 ns against 2.5 ns,
    /// BENCHMARKS.md); the trace after a resume then knows the calls that were open when it
    /// paused, as Intel PT's decoder knows nothing of what ran while tracing was off.
    pub track_paused: bool,
}

impl WriterConfig {
    /// An overwrite-mode configuration over `region` with the defaults.
    pub fn overwrite(region: AuxRegion) -> WriterConfig {
        WriterConfig {
            region,
            mode: AuxMode::Overwrite,
            aux_head: 0,
            sync_period: DEFAULT_SYNC_PERIOD,
            start_paused: false,
            clock: ClockSource::default(),
            on_full: None,
            timing: Timing::Full,
            track_paused: false,
        }
    }

    /// A full-trace configuration over `region`, with the whole region as space.
    pub fn full_trace(region: AuxRegion, on_full: Option<OnFull>) -> WriterConfig {
        let limit = region.size as u64;
        WriterConfig {
            region,
            mode: AuxMode::FullTrace { limit },
            aux_head: 0,
            sync_period: DEFAULT_SYNC_PERIOD,
            start_paused: false,
            clock: ClockSource::default(),
            on_full,
            timing: Timing::Full,
            track_paused: false,
        }
    }
}

/// Which ENTER/EXIT packets read the clock, as Intel PT's MTC/CYC timing packets trade
/// precision for speed: reading the TSC is most of a traced call's cost (BENCHMARKS.md). The
/// packets without a reading are marked in the stream (format module doc, "Sparse timing"),
/// and the decoder interpolates their times and flags them (`Event::Enter`'s `interpolated`).
/// PAUSED, RESUMED, STOPPED, LOST and SYNC are always timed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Timing {
    /// Every ENTER and EXIT timed: exact durations (the default).
    #[default]
    Full,
    /// ENTERs timed, EXITs not: when each call began is exact, its return is interpolated.
    EntryOnly,
    /// One ENTER/EXIT in `every` timed (counting both), the others interpolated; `every` 1 is
    /// [`Timing::Full`]. The cheapest mode.
    Periodic {
        /// Packets per timestamp (>= 1).
        every: u32,
    },
}

impl Timing {
    /// The name of the mode for a config term (`full`, `entry`, `periodic:N`), as
    /// [`Timing::parse`] reads it.
    pub fn name(self) -> String {
        match self {
            Timing::Full => String::from("full"),
            Timing::EntryOnly => String::from("entry"),
            Timing::Periodic { every } => format!("periodic:{every}"),
        }
    }

    /// Parses `full`, `entry` or `periodic:N` (N >= 1), for a PMU config term such as
    /// `swtrace/timing=periodic:16/`.
    pub fn parse(s: &str) -> Option<Timing> {
        match s {
            "full" => Some(Timing::Full),
            "entry" => Some(Timing::EntryOnly),
            _ => {
                let every = s.strip_prefix("periodic:")?.parse().ok()?;
                (every >= 1).then_some(Timing::Periodic { every })
            }
        }
    }
}

/// The writer's counters, from [`status`](super::status) and [`uninstall`](super::uninstall).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct WriterStatus {
    /// Position after the last complete packet.
    pub aux_head: u64,
    /// Current full-trace limit (`u64::MAX` in overwrite mode).
    pub limit: u64,
    /// Paused by [`pause`](super::pause).
    pub paused: bool,
    /// Stopped for lack of space (full-trace).
    pub full_stopped: bool,
    /// Probe events dropped because a signal handler hit a busy writer.
    pub lost_nested: u64,
    /// Probe events dropped for lack of space.
    pub lost_full: u64,
    /// SYNC packets written.
    pub syncs: u64,
}
