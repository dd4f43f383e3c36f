//! A thread's samples: spooled as 12-byte records (time in ns, stack index
//! or [`NO_STACK`]), written as the processed format's sample table. The
//! format wants them in time order (fxprof-processed-profile sorts a
//! thread's samples when they came out of order: perf's records of a thread
//! that moved between CPUs, or a thread's samples before its traced calls);
//! here such a thread's records are sorted on disk, in bounded memory.

use std::collections::BinaryHeap;
use std::io::{self, Write};

use super::json::{f64_ms, u32_elem};
use super::spool::{Reader, Spool, Stream};

/// A sample's stack when it has none (`null` in the JSON).
pub(super) const NO_STACK: u32 = u32::MAX;

/// A record: time (ns, little-endian u64), stack (u32).
const REC: usize = 12;

/// Records sorted in memory at a time (3 MiB of records, 4 MiB sorted;
/// small in unit tests, so that they merge runs of several levels).
const RUN: usize = if cfg!(test) { 100 } else { 256 * 1024 };

/// Runs merged at a time (each reader takes a 48 KiB piece).
const FANIN: usize = if cfg!(test) { 3 } else { 32 };

/// Bytes a sample reader takes from the spool at a time.
const PIECE: usize = REC * 4096;

/// A thread's samples.
#[derive(Default)]
pub(super) struct Samples {
    pub(super) stream: Stream,
    count: u64,
    last: u64,
    unsorted: bool,
}

impl Samples {
    /// Adds a sample.
    #[inline]
    pub(super) fn add(&mut self, spool: &mut Spool, time: u64, stack: u32) -> io::Result<()> {
        let r = record(time, stack);
        if time < self.last {
            self.unsorted = true;
        }
        self.last = time;
        self.count += 1;
        spool.put(&mut self.stream, &r)
    }

    /// Writes the sample table (`"samples":` is the caller's).
    pub(super) fn write(self, spool: &mut Spool, out: &mut impl Write) -> io::Result<()> {
        let n = self.count;
        let stream = if self.unsorted {
            sort(spool, self.stream)?
        } else {
            self.stream
        };
        write!(
            out,
            "{{\"length\":{n},\"weightType\":\"samples\",\"stack\":["
        )?;
        let mut buf = Vec::with_capacity(PIECE);
        let mut r = Reader::new(&stream, PIECE);
        let mut first = true;
        while let Some(rec) = r.record::<REC>(spool)? {
            if !first {
                buf.push(b',');
            }
            first = false;
            match stack_of(&rec) {
                NO_STACK => buf.extend_from_slice(b"null"),
                s => u32_elem(&mut buf, s),
            }
            if buf.len() >= PIECE {
                out.write_all(&buf)?;
                buf.clear();
            }
        }
        buf.extend_from_slice(b"],\"timeDeltas\":[");
        let mut r = Reader::new(&stream, PIECE);
        let (mut first, mut prev) = (true, 0);
        while let Some(rec) = r.record::<REC>(spool)? {
            if !first {
                buf.push(b',');
            }
            first = false;
            let t = time_of(&rec);
            f64_ms(&mut buf, t - prev);
            prev = t;
            if buf.len() >= PIECE {
                out.write_all(&buf)?;
                buf.clear();
            }
        }
        out.write_all(&buf)?;
        out.write_all(b"],\"weight\":")?;
        repeat(out, b"1", n)?;
        out.write_all(b",\"threadCPUDelta\":")?;
        repeat(out, b"0", n)?;
        out.write_all(b"}")
    }
}

fn record(time: u64, stack: u32) -> [u8; REC] {
    let mut r = [0u8; REC];
    r[..8].copy_from_slice(&time.to_le_bytes());
    r[8..].copy_from_slice(&stack.to_le_bytes());
    r
}

fn time_of(r: &[u8; REC]) -> u64 {
    u64::from_le_bytes(r[..8].try_into().expect("8 bytes"))
}

fn stack_of(r: &[u8; REC]) -> u32 {
    u32::from_le_bytes(r[8..].try_into().expect("4 bytes"))
}

/// A JSON array of `n` times `v`.
pub(super) fn repeat(out: &mut impl Write, v: &[u8], n: u64) -> io::Result<()> {
    let mut one = Vec::with_capacity(v.len() + 1);
    one.push(b',');
    one.extend_from_slice(v);
    let block: Vec<u8> = one.iter().copied().cycle().take(one.len() * 1024).collect();
    out.write_all(b"[")?;
    if n > 0 {
        out.write_all(v)?;
        let mut left = (n - 1) as usize;
        while left > 0 {
            let k = left.min(1024);
            out.write_all(&block[..k * one.len()])?;
            left -= k;
        }
    }
    out.write_all(b"]")
}

/// The records of `s` in time order, equal times in the order they came:
/// runs of [`RUN`] records sorted in memory, merged [`FANIN`] at a time
/// into runs of the next level (a level's runs are all later than the next
/// level's, so the final merge, oldest level first, keeps the order).
fn sort(spool: &mut Spool, s: Stream) -> io::Result<Stream> {
    let mut levels: Vec<Vec<Stream>> = Vec::new();
    let mut r = Reader::new(&s, PIECE);
    // Time, stack and place in the run: sorted by time and place, which is
    // a stable sort that needs no scratch memory (the standard stable sort
    // takes as much again). Grown as records come: a thread with a few
    // samples sorts a few.
    let mut run: Vec<(u64, u32, u32)> = Vec::new();
    loop {
        let rec = r.record::<REC>(spool)?;
        if let Some(rec) = &rec {
            run.push((time_of(rec), stack_of(rec), run.len() as u32));
        }
        if run.len() == RUN || (rec.is_none() && !run.is_empty()) {
            run.sort_unstable_by_key(|&(t, _, i)| (t, i));
            let mut sorted = Stream::default();
            for &(t, st, _) in &run {
                spool.put(&mut sorted, &record(t, st))?;
            }
            spool.release(&mut sorted)?;
            run.clear();
            push_run(spool, &mut levels, 0, sorted)?;
        }
        if rec.is_none() {
            break;
        }
    }
    drop(run);
    let all: Vec<Stream> = levels.into_iter().rev().flatten().collect();
    merge(spool, all)
}

/// Adds a sorted run to `level`; a level of [`FANIN`] runs becomes one run
/// of the next.
fn push_run(
    spool: &mut Spool,
    levels: &mut Vec<Vec<Stream>>,
    level: usize,
    run: Stream,
) -> io::Result<()> {
    if levels.len() <= level {
        levels.push(Vec::new());
    }
    levels[level].push(run);
    if levels[level].len() == FANIN {
        let runs = std::mem::take(&mut levels[level]);
        let merged = merge(spool, runs)?;
        push_run(spool, levels, level + 1, merged)?;
    }
    Ok(())
}

/// Merges sorted runs (given oldest first) into one; equal times keep the
/// runs' order.
fn merge(spool: &mut Spool, runs: Vec<Stream>) -> io::Result<Stream> {
    let mut out = Stream::default();
    let mut readers: Vec<_> = runs.iter().map(|s| Reader::new(s, PIECE)).collect();
    let mut heads = BinaryHeap::new();
    let mut recs = Vec::with_capacity(readers.len());
    for (i, r) in readers.iter_mut().enumerate() {
        let rec = r.record::<REC>(spool)?;
        if let Some(rec) = &rec {
            heads.push(std::cmp::Reverse((time_of(rec), i)));
        }
        recs.push(rec);
    }
    let mut pending = Vec::with_capacity(PIECE);
    while let Some(std::cmp::Reverse((_, i))) = heads.pop() {
        pending.extend_from_slice(&recs[i].expect("a head has its record"));
        recs[i] = readers[i].record::<REC>(spool)?;
        if let Some(rec) = &recs[i] {
            heads.push(std::cmp::Reverse((time_of(rec), i)));
        }
        if pending.len() >= PIECE {
            drop_into(spool, &mut out, &mut pending)?;
        }
    }
    drop(readers);
    drop_into(spool, &mut out, &mut pending)?;
    spool.release(&mut out)?;
    Ok(out)
}

fn drop_into(spool: &mut Spool, out: &mut Stream, pending: &mut Vec<u8>) -> io::Result<()> {
    spool.put(out, pending)?;
    pending.clear();
    Ok(())
}
