//! The record stream in time order, as perf's ordered-events queue gives it
//! (tools/perf/util/ordered-events.c): records are queued by time, and at each
//! PERF_RECORD_FINISHED_ROUND every queued record not later than the newest time of the round
//! before is handed on; the rest at the end. A thread's COMM, FORK and MMAP records can lie
//! in the file after its samples (perf and perfaux write each buffer whole, one after
//! another), and must come first to name and place them.
//!
//! Memory is bounded by two rounds of records, and whatever the rounds (huge ones, or none)
//! by [`QUEUE_BUDGET`]: past it the oldest records are handed on early, and a record older
//! than what was handed on is handed on at once (perf calls these out of order).

use perfaux_abi::Endianness;
use perfaux_abi::consts::PERF_RECORD_SAMPLE;
use perfaux_abi::header::PerfEventHeader;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::raw::RawData;
use perfaux_abi::sample_fields::SampleFields;
use perfaux_perfdata::RawRecord;
use perfaux_perfdata::record::RecordLocation;

/// Bytes of records held at most, each counted with its bookkeeping ([`ENTRY_COST`]; the
/// arena may have twice the room): a round of perf's or perfaux's recorder is far less
/// (perfaux writes one every 100 ms).
pub const QUEUE_BUDGET: usize = 4 << 20;

/// What a held record costs besides its bytes (its [`Held`] entry).
const ENTRY_COST: usize = 96;

/// A record held: its place in the arena and what its [`RawRecord`] says besides its bytes.
struct Held {
    time: u64,
    start: usize,
    len: usize,
    header: PerfEventHeader,
    location: RecordLocation,
    attr_index: Option<usize>,
    parse_info: Option<RecordParseInfo>,
    endian: Endianness,
}

impl Held {
    fn raw<'a>(&self, arena: &'a [u8]) -> RawRecord<'a> {
        RawRecord {
            header: self.header,
            location: self.location,
            bytes: &arena[self.start..self.start + self.len],
            payload: &[],
            attr_index: self.attr_index,
            parse_info: self.parse_info,
            endian: self.endian,
        }
    }
}

/// What takes the records in time order.
pub(crate) trait TakeRecord<E> {
    fn take(&mut self, r: &RawRecord<'_>) -> Result<(), E>;
}

/// The queue: the records' bytes back to back in one arena and their entries in arrival
/// order, sorted by time (stably: records of one time keep their order) when some go on. No
/// allocation per record: a round's records are copied once, and sorted once.
#[derive(Default)]
pub(crate) struct RecordQueue {
    arena: Vec<u8>,
    held: Vec<Held>,
    /// The newest time queued so far, and as of the last round.
    newest: u64,
    round_newest: u64,
    /// Records at or before this time were handed on: an older one is late.
    handed: Option<u64>,
}

impl RecordQueue {
    /// Queues `r`, of time `t`, or hands it on at once if it is late.
    pub(crate) fn push<E>(
        &mut self,
        t: u64,
        r: &RawRecord<'_>,
        to: &mut impl TakeRecord<E>,
    ) -> Result<(), E> {
        if self.handed.is_some_and(|h| t < h) {
            return to.take(r);
        }
        self.newest = self.newest.max(t);
        self.held.push(Held {
            time: t,
            start: self.arena.len(),
            len: r.bytes.len(),
            header: r.header,
            location: r.location,
            attr_index: r.attr_index,
            parse_info: r.parse_info,
            endian: r.endian,
        });
        self.arena.extend_from_slice(r.bytes);
        if self.arena.len() + self.held.len() * ENTRY_COST > QUEUE_BUDGET {
            // The oldest half goes on early.
            let half = self.held.len() / 2;
            self.sort();
            let limit = self.held[half.saturating_sub(1)].time;
            self.hand_on(limit, to)?;
        }
        Ok(())
    }

    /// A PERF_RECORD_FINISHED_ROUND: what is not later than the round before's newest goes on.
    pub(crate) fn round<E>(&mut self, to: &mut impl TakeRecord<E>) -> Result<(), E> {
        let limit = self.round_newest;
        self.sort();
        self.hand_on(limit, to)?;
        self.round_newest = self.newest;
        Ok(())
    }

    /// The end: everything goes on.
    pub(crate) fn finish<E>(&mut self, to: &mut impl TakeRecord<E>) -> Result<(), E> {
        self.sort();
        self.hand_on(u64::MAX, to)
    }

    fn sort(&mut self) {
        if !self.held.is_sorted_by_key(|h| h.time) {
            self.held.sort_by_key(|h| h.time);
        }
    }

    /// Hands on the (sorted) records not later than `limit`; the others stay, their bytes
    /// moved to the arena's front.
    fn hand_on<E>(&mut self, limit: u64, to: &mut impl TakeRecord<E>) -> Result<(), E> {
        let n = self.held.partition_point(|h| h.time <= limit);
        if n == 0 {
            return Ok(());
        }
        for h in &self.held[..n] {
            self.handed = Some(self.handed.map_or(h.time, |x| x.max(h.time)));
            to.take(&h.raw(&self.arena))?;
        }
        self.held.drain(..n);
        if self.held.is_empty() {
            self.arena.clear();
        } else {
            let mut arena = Vec::with_capacity(self.held.iter().map(|h| h.len).sum());
            for h in &mut self.held {
                let start = arena.len();
                arena.extend_from_slice(&self.arena[h.start..h.start + h.len]);
                h.start = start;
            }
            self.arena = arena;
        }
        Ok(())
    }
}

/// A kernel record's time: a sample's own, another's sample_id's; `None` without one (such
/// a record is handed on at once, as perf does).
pub(crate) fn record_time(r: &RawRecord<'_>) -> Option<u64> {
    if r.header.type_ == PERF_RECORD_SAMPLE {
        let info = r.parse_info?;
        let body = RawData::new(r.body(), &[]);
        return SampleFields::parse(body, &info, r.endian).ok()?.time;
    }
    let parsed = r.parse()?.ok()?;
    parsed.sample_id()?.time
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes records, keeping their first body byte as their name.
    struct Names(Vec<u8>);

    impl TakeRecord<()> for Names {
        fn take(&mut self, r: &RawRecord<'_>) -> Result<(), ()> {
            self.0.push(r.bytes[8]);
            Ok(())
        }
    }

    fn rec(bytes: &[u8]) -> RawRecord<'_> {
        RawRecord {
            header: PerfEventHeader {
                type_: 3,
                misc: 0,
                size: bytes.len() as u16,
            },
            location: RecordLocation {
                file_offset: 0,
                decompressed_offset: None,
            },
            bytes,
            payload: &[],
            attr_index: None,
            parse_info: None,
            endian: Endianness::NATIVE,
        }
    }

    #[test]
    fn a_round_hands_on_what_the_round_before_reached_in_time_order() {
        let mut q = RecordQueue::default();
        let mut out = Names(Vec::new());
        let b = |c: u8| {
            let mut v = vec![0u8; 8];
            v.push(c);
            v
        };
        // Round 1: a sample at 60 before its thread's COMM at 50 (another CPU's buffer).
        let (s60, c50) = (b(b's'), b(b'c'));
        q.push(60, &rec(&s60), &mut out).unwrap();
        q.push(50, &rec(&c50), &mut out).unwrap();
        q.round(&mut out).unwrap();
        assert!(out.0.is_empty(), "nothing is known to be complete yet");
        // Round 2: 55 arrives; the round hands on up to 60.
        let m55 = b(b'm');
        q.push(55, &rec(&m55), &mut out).unwrap();
        q.round(&mut out).unwrap();
        assert_eq!(out.0, b"cms");
        // A record older than what went on is late: on at once.
        let l10 = b(b'l');
        q.push(10, &rec(&l10), &mut out).unwrap();
        assert_eq!(out.0, b"cmsl");
        let e70 = b(b'e');
        q.push(70, &rec(&e70), &mut out).unwrap();
        q.finish(&mut out).unwrap();
        assert_eq!(out.0, b"cmsle");
    }
}
