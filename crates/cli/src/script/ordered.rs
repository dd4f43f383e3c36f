//! Time-ordered output with perf's round rule (tools/perf/util/ordered-events.c):
//! lines are queued by time, and at each PERF_RECORD_FINISHED_ROUND every
//! queued line not later than the newest time of the round before is printed.
//!
//! The queue is bounded whatever the file says: past [`QUEUE_BUDGET`] bytes
//! (a round larger than that, or a file with no FINISHED_ROUND) the oldest
//! lines are printed until half the budget is left, as perf does past its
//! queue size (`OE_FLUSH__HALF`). A line later queued with an earlier time
//! than one printed so is printed out of order, and counted: perf's
//! "Timestamp below last timeslice flush" warning.
//!
//! COMM records are queued with the lines and applied as they come out, so
//! each line is printed with the name its thread had at the line's time
//! ([`Line`]).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use super::line::Line;
use crate::error::CliError;

/// Most bytes of lines the queue holds (each line counted with its
/// allocation and its share of the tree, [`ENTRY_COST`]).
pub(crate) const QUEUE_BUDGET: usize = 32 << 20;

/// What a queued entry costs besides its text: its key (16 bytes) and
/// [`Entry`] (64) in a B-tree node, with the node's slack (nodes are at
/// least half full).
const ENTRY_COST: usize = 160;

/// What the queue holds: a line, or a thread's new name.
pub(super) enum Entry {
    Line(Line),
    Comm {
        tid: u32,
        name: String,
    },
    /// A thread `tid` made by thread `ptid` (PERF_RECORD_FORK): it bears `ptid`'s name as of
    /// then, as perf's `thread__fork` gives it.
    Fork {
        tid: u32,
        ptid: u32,
    },
}

impl Entry {
    fn cost(&self) -> usize {
        ENTRY_COST
            + match self {
                Entry::Line(l) => l.cost(),
                Entry::Comm { name, .. } => name.capacity(),
                Entry::Fork { .. } => 0,
            }
    }
}

pub(super) struct Ordered {
    queue: BTreeMap<(u64, u64), Entry>,
    /// Each thread's name as of the last entry printed.
    comms: HashMap<u32, String>,
    seq: u64,
    round_max: u64,
    flush_limit: Option<u64>,
    /// Bytes queued, as [`ENTRY_COST`] counts them.
    held: usize,
    /// The latest time printed because the queue was full.
    flushed_to: Option<u64>,
    /// Lines queued with a time before `flushed_to`.
    late: u64,
}

impl Ordered {
    pub(super) fn new() -> Self {
        Ordered {
            queue: BTreeMap::new(),
            comms: HashMap::new(),
            seq: 0,
            round_max: 0,
            flush_limit: None,
            held: 0,
            flushed_to: None,
            late: 0,
        }
    }

    pub(super) fn push(
        &mut self,
        time: u64,
        entry: Entry,
        out: &mut impl Write,
    ) -> Result<(), CliError> {
        if self.flushed_to.is_some_and(|t| time < t) && matches!(entry, Entry::Line(_)) {
            self.late += 1;
        }
        self.held += entry.cost();
        self.queue.insert((time, self.seq), entry);
        self.seq += 1;
        self.round_max = self.round_max.max(time);
        if self.held > QUEUE_BUDGET {
            self.flush_half(out)?;
        }
        Ok(())
    }

    /// The queue is full: the oldest lines go out until half the budget is left.
    #[cold]
    fn flush_half(&mut self, out: &mut impl Write) -> Result<(), CliError> {
        while self.held > QUEUE_BUDGET / 2
            && let Some(((time, _), entry)) = self.queue.pop_first()
        {
            self.held -= entry.cost();
            self.flushed_to = Some(self.flushed_to.map_or(time, |t| t.max(time)));
            self.emit(entry, out)?;
        }
        Ok(())
    }

    /// A line goes out with its thread's name; a name is taken.
    fn emit(&mut self, entry: Entry, out: &mut impl Write) -> Result<(), CliError> {
        match entry {
            Entry::Comm { tid, name } => {
                self.comms.insert(tid, name);
                Ok(())
            }
            Entry::Fork { tid, ptid } => {
                if let Some(name) = self.comms.get(&ptid).cloned() {
                    self.comms.insert(tid, name);
                }
                Ok(())
            }
            Entry::Line(l) => {
                let tid = l.tid();
                let unnamed;
                let comm = match self.comms.get(&(tid as u32)) {
                    Some(c) => c.as_str(),
                    None => {
                        unnamed = format!(":{tid}");
                        &unnamed
                    }
                };
                l.write_to(comm, out).map_err(CliError::output)
            }
        }
    }

    /// FINISHED_ROUND: print what the round before has made final.
    pub(super) fn round(&mut self, out: &mut impl Write) -> Result<(), CliError> {
        if let Some(limit) = self.flush_limit {
            let later = self.queue.split_off(&(limit.saturating_add(1), 0));
            for entry in std::mem::replace(&mut self.queue, later).into_values() {
                self.held -= entry.cost();
                self.emit(entry, out)?;
            }
        }
        self.flush_limit = Some(self.round_max);
        Ok(())
    }

    pub(super) fn finish(&mut self, out: &mut impl Write) -> Result<(), CliError> {
        for entry in std::mem::take(&mut self.queue).into_values() {
            self.emit(entry, out)?;
        }
        self.held = 0;
        Ok(())
    }

    /// What the output should say when the full queue put lines out of order.
    pub(super) fn late_note(&self) -> Option<String> {
        (self.late > 0).then(|| {
            format!(
                "{} lines printed out of time order: the time-ordering queue holds at most \
                 {} MiB of lines (the file's rounds are larger, or it has no FINISHED_ROUND)",
                self.late,
                QUEUE_BUDGET >> 20
            )
        })
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(t: u64) -> Entry {
        let mut l = Line::new(1);
        l.push_str(&format!("{:>60}\n", t));
        Entry::Line(l)
    }

    fn named(tid: i64, t: u64) -> Entry {
        let mut l = Line::new(tid);
        l.push_prefix(None, t);
        l.push_str("x\n");
        Entry::Line(l)
    }

    /// The first word of each line printed: the thread's name.
    fn first_words(out: Vec<u8>) -> Vec<String> {
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| l.split_whitespace().next().unwrap().to_string())
            .collect()
    }

    fn comm(tid: u32, name: &str) -> Entry {
        Entry::Comm {
            tid,
            name: name.into(),
        }
    }

    /// A thread exec'd on one CPU at time 50 and ran on another: the other
    /// CPU's samples (60, 70) come first in the file, its COMM after them.
    /// Each line has the name of its time, not of the file's order.
    #[test]
    fn a_comm_read_after_later_samples_names_them_as_of_their_time() {
        let mut q = Ordered::new();
        let mut out = Vec::new();
        q.push(0, comm(9, "perf-exec"), &mut out).unwrap();
        q.round(&mut out).unwrap();
        for (t, e) in [
            (60, named(9, 60)),
            (70, named(9, 70)),
            (40, named(9, 40)),
            (50, comm(9, "sh")),
        ] {
            q.push(t, e, &mut out).unwrap();
        }
        q.push(80, named(10, 80), &mut out).unwrap();
        q.finish(&mut out).unwrap();
        let names = first_words(out);
        assert_eq!(names, ["perf-exec", "sh", "sh", ":10"]);
        assert_eq!(q.late_note(), None);
    }

    /// A thread made at time 20 by a thread named "app" bears that name from then on, also
    /// for a line read before the FORK in the file; the maker's later name is not its.
    #[test]
    fn a_forked_thread_bears_its_makers_name_as_of_the_fork() {
        let mut q = Ordered::new();
        let mut out = Vec::new();
        for (t, e) in [
            (30, named(8, 30)),
            (10, comm(7, "app")),
            (5, named(8, 5)),
            (20, Entry::Fork { tid: 8, ptid: 7 }),
            (40, comm(7, "renamed")),
            (50, named(8, 50)),
        ] {
            q.push(t, e, &mut out).unwrap();
        }
        q.finish(&mut out).unwrap();
        let names = first_words(out);
        assert_eq!(names, [":8", "app", "app"]);
    }

    #[test]
    fn a_file_with_no_round_is_held_within_the_budget_and_late_lines_are_said() {
        let mut q = Ordered::new();
        let mut out = Vec::new();
        // 64 MiB of lines, with no FINISHED_ROUND: times rising, every
        // 1000th line far earlier than the rest (out of order).
        let n = (64 << 20) / (61 + ENTRY_COST);
        let mut most = 0;
        for i in 0..n as u64 {
            let t = if i % 1000 == 999 { i } else { i * 10 + 10_000 };
            q.push(t, line(t), &mut out).unwrap();
            most = most.max(q.held());
        }
        assert!(most <= QUEUE_BUDGET + 61 + ENTRY_COST, "{most} bytes held");
        assert!(!out.is_empty(), "lines went out before the end");
        q.finish(&mut out).unwrap();
        let printed = out.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count();
        assert_eq!(printed, n, "every line is printed once");
        let note = q.late_note().expect("the late lines are said");
        assert!(note.contains("out of time order"), "{note}");
        let late: u64 = note.split(' ').next().unwrap().parse().unwrap();
        assert!(late > 0 && late <= n as u64 / 1000, "{note}");
    }

    #[test]
    fn rounds_within_the_budget_print_in_time_order_with_no_note() {
        let mut q = Ordered::new();
        let mut out = Vec::new();
        for round in 0..3u64 {
            for i in (0..100u64).rev() {
                q.push(round * 100 + i, line(round * 100 + i), &mut out)
                    .unwrap();
            }
            q.round(&mut out).unwrap();
        }
        q.finish(&mut out).unwrap();
        let times: Vec<u64> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect();
        assert_eq!(times, (0..300).collect::<Vec<_>>());
        assert_eq!(q.late_note(), None);
    }
}
