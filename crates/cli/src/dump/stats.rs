//! The "Aggregated stats" table at the end of `perf report -D`
//! (tools/perf/ui/stdio/hist.c `events_stats__fprintf`, and
//! `evlist__fprintf_nr_events` for the per-event lines).

use perfaux_abi::consts::{
    PERF_RECORD_AUXTRACE_INFO, PERF_RECORD_LOST_SAMPLES, PERF_RECORD_SAMPLE,
};
use perfaux_perfdata::RawRecord;

use super::EvInfo;
use super::names::{STATS_SLOTS, record_name, slot_type, stats_slot};

/// Record counts by type, and sample counts by event.
#[derive(Debug, Clone)]
pub struct Stats {
    pub by_type: [u64; STATS_SLOTS],
    pub samples: Vec<u64>,
    pub lost_samples: Vec<u64>,
    pub total: u64,
    has_auxtrace: bool,
}

impl Stats {
    pub(crate) fn new(n_events: usize) -> Self {
        Stats {
            by_type: [0; STATS_SLOTS],
            samples: vec![0; n_events],
            lost_samples: vec![0; n_events],
            total: 0,
            has_auxtrace: false,
        }
    }

    pub(crate) fn grow(&mut self, n_events: usize) {
        self.samples.resize(n_events, 0);
        self.lost_samples.resize(n_events, 0);
    }

    pub(crate) fn count(&mut self, rec: &RawRecord<'_>) {
        let t = rec.header.type_;
        self.by_type[stats_slot(t)] += 1;
        self.total += 1;
        if t == PERF_RECORD_AUXTRACE_INFO {
            self.has_auxtrace = true;
        }
        if let Some(i) = rec.attr_index.filter(|&i| i < self.samples.len()) {
            if t == PERF_RECORD_SAMPLE {
                self.samples[i] += 1;
            } else if t == PERF_RECORD_LOST_SAMPLES {
                self.lost_samples[i] += 1;
            }
        }
    }

    /// The count of records of perf type name `name` (`"SAMPLE"`, `"AUX"`...).
    pub fn count_of(&self, name: &str) -> u64 {
        (1..STATS_SLOTS)
            .filter(|&s| record_name(slot_type(s)) == name)
            .map(|s| self.by_type[s])
            .sum()
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>, evs: &[EvInfo]) {
        out.extend_from_slice(b"\nAggregated stats:");
        if self.has_auxtrace {
            out.extend_from_slice(
                b" (excludes AUX area (e.g. instruction trace) decoded / synthesized events)",
            );
        }
        out.push(b'\n');
        out.extend_from_slice(format!("{:>16} events: {:>10}\n", "TOTAL", self.total).as_bytes());
        for s in 1..STATS_SLOTS {
            let n = self.by_type[s];
            if n == 0 {
                continue;
            }
            let pct = n as f64 * 100.0 / self.total as f64;
            let name = record_name(slot_type(s));
            out.extend_from_slice(format!("{name:>16} events: {n:>10}  ({pct:4.1}%)\n").as_bytes());
        }
        for (i, ev) in evs.iter().enumerate() {
            let (n, lost) = (
                self.samples.get(i).copied().unwrap_or(0),
                self.lost_samples.get(i).copied().unwrap_or(0),
            );
            if n == 0 && lost == 0 {
                continue;
            }
            out.extend_from_slice(format!("{} stats:\n", ev.name).as_bytes());
            if n != 0 {
                out.extend_from_slice(format!("{:>16} events: {:>10}\n", "SAMPLE", n).as_bytes());
            }
            if lost != 0 {
                out.extend_from_slice(
                    format!("{:>16} events: {:>10}\n", "LOST_SAMPLES", lost).as_bytes(),
                );
            }
        }
    }
}

/// One row of an "Aggregated stats" table: a record type name and its count.
pub type StatsRow = (String, u64);

/// Parses the "Aggregated stats" table out of `perf report -D` text (perf's
/// or perfaux's): the TOTAL row and one row per record type, in order.
pub fn parse_aggregated_stats(text: &str) -> Option<Vec<StatsRow>> {
    let start = text.find("\nAggregated stats:")?;
    let mut rows = Vec::new();
    for line in text[start + 1..].lines().skip(1) {
        let Some((name, rest)) = line.split_once(" events:") else {
            break;
        };
        let name = name.trim();
        if name.is_empty() || name.contains(' ') {
            break;
        }
        let n: u64 = rest.split_whitespace().next()?.parse().ok()?;
        rows.push((name.to_string(), n));
    }
    Some(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_perfs_table_and_stops_at_the_per_event_part() {
        // From `perf report -D` of the intel_pt fixture (perf 6.1).
        let t = "x\n\nAggregated stats: (excludes AUX area (e.g. instruction trace) decoded / synthesized events)\n           TOTAL events:        257\n            MMAP events:         56  (21.8%)\n        AUXTRACE events:          2  ( 0.8%)\ncycles stats:\n          SAMPLE events:         15\n";
        let rows = parse_aggregated_stats(t).unwrap();
        assert_eq!(
            rows,
            [
                ("TOTAL".to_string(), 257),
                ("MMAP".to_string(), 56),
                ("AUXTRACE".to_string(), 2)
            ]
        );
    }
}
