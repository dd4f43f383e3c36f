//! The events of a file (attrs with their sample ids and names) and the
//! lookup from a record's sample id to its event, as perf's
//! `evlist__event2evsel` does it.

use perfaux_abi::attr::PerfEventAttr;
use perfaux_abi::consts::{
    PERF_RECORD_SAMPLE, PERF_RECORD_USER_TYPE_START, PERF_SAMPLE_ADDR, PERF_SAMPLE_CPU,
    PERF_SAMPLE_ID, PERF_SAMPLE_IDENTIFIER, PERF_SAMPLE_IP, PERF_SAMPLE_STREAM_ID, PERF_SAMPLE_TID,
    PERF_SAMPLE_TIME,
};
use perfaux_abi::{Endianness, PerfEventHeader};
use std::collections::HashMap;

/// One event: its attr, the sample ids of its instances, and its name if
/// the file says it (EVENT_DESC, or EVENT_UPDATE in a pipe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventAttr {
    /// The attr as the file states it.
    pub attr: PerfEventAttr,
    /// Sample ids of its instances (`IDENTIFIER`/`ID` in its records).
    pub ids: Vec<u64>,
    /// Its name, when EVENT_DESC or EVENT_UPDATE gives one.
    pub name: Option<String>,
}

/// perf's `__perf_evsel__calc_id_pos`: the u64 index of the sample id in a
/// SAMPLE body, or `None` if samples carry no id.
pub fn id_pos(sample_type: u64) -> Option<usize> {
    if sample_type & PERF_SAMPLE_IDENTIFIER != 0 {
        return Some(0);
    }
    if sample_type & PERF_SAMPLE_ID == 0 {
        return None;
    }
    let before = [
        PERF_SAMPLE_IP,
        PERF_SAMPLE_TID,
        PERF_SAMPLE_TIME,
        PERF_SAMPLE_ADDR,
    ];
    Some(before.iter().filter(|&&b| sample_type & b != 0).count())
}

/// perf's `__perf_evsel__calc_is_pos`: the id's position counted in u64s
/// from the end of a non-sample record's `sample_id` trailer.
pub fn is_pos(sample_type: u64) -> Option<usize> {
    if sample_type & PERF_SAMPLE_IDENTIFIER != 0 {
        return Some(1);
    }
    if sample_type & PERF_SAMPLE_ID == 0 {
        return None;
    }
    let after = [PERF_SAMPLE_CPU, PERF_SAMPLE_STREAM_ID];
    Some(1 + after.iter().filter(|&&b| sample_type & b != 0).count())
}

/// id → attr index, with the positions taken from the first attr (perf
/// refuses files whose events disagree on them, `evlist__valid_sample_type`).
#[derive(Debug, Clone, Default)]
pub(crate) struct IdMap {
    n_attrs: usize,
    id_pos: Option<usize>,
    is_pos: Option<usize>,
    sample_id_all: bool,
    ids: HashMap<u64, usize>,
    /// `ids` as a list while it holds at most [`FEW_IDS`] (a file has an id
    /// per event and CPU or thread: a few), scanned instead of hashed:
    /// every record is looked up, and SipHash was most of the lookup.
    few: Vec<(u64, usize)>,
}

/// The most ids [`IdMap`] scans rather than hashes.
const FEW_IDS: usize = 16;

impl IdMap {
    pub(crate) fn add(&mut self, index: usize, attr: &PerfEventAttr, ids: &[u64]) {
        if self.n_attrs == 0 {
            self.id_pos = id_pos(attr.sample_type);
            self.is_pos = is_pos(attr.sample_type);
            self.sample_id_all = attr.sample_id_all();
        }
        self.n_attrs = self.n_attrs.max(index + 1);
        for &id in ids {
            self.ids.insert(id, index);
        }
        self.few.clear();
        if self.ids.len() <= FEW_IDS {
            self.few.extend(self.ids.iter().map(|(&id, &i)| (id, i)));
        }
    }

    /// The attr index of a record (`bytes` = the whole record).
    #[inline]
    pub(crate) fn lookup(&self, h: PerfEventHeader, bytes: &[u8], e: Endianness) -> Option<usize> {
        if self.n_attrs <= 1 {
            return (self.n_attrs == 1).then_some(0);
        }
        if h.type_ >= PERF_RECORD_USER_TYPE_START {
            return None;
        }
        let at = if h.type_ == PERF_RECORD_SAMPLE {
            8 + 8 * self.id_pos?
        } else {
            if !self.sample_id_all {
                return Some(0);
            }
            bytes
                .len()
                .checked_sub(8 * self.is_pos?)
                .filter(|&a| a >= 8)?
        };
        let b = bytes.get(at..at + 8)?;
        let id = e.u64(b.try_into().ok()?);
        // Synthesized records carry id 0: perf gives them the first event.
        if id == 0 {
            return Some(0);
        }
        if self.ids.len() <= FEW_IDS {
            return self.few.iter().find(|p| p.0 == id).map(|p| p.1);
        }
        self.ids.get(&id).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_positions_follow_perf() {
        // IDENTIFIER: first in a sample, last in a trailer.
        assert_eq!(
            id_pos(PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_ID),
            Some(0)
        );
        assert_eq!(is_pos(PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_CPU), Some(1));
        // ID after IP, TID, TIME, ADDR in a sample; before STREAM_ID, CPU in a trailer.
        let st =
            PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_CPU;
        assert_eq!(id_pos(st), Some(3));
        assert_eq!(is_pos(st), Some(2));
        assert_eq!(is_pos(st | PERF_SAMPLE_STREAM_ID), Some(3));
        assert_eq!(id_pos(PERF_SAMPLE_IP), None);
        assert_eq!(is_pos(PERF_SAMPLE_IP), None);
    }

    #[test]
    fn ids_are_found_scanned_or_hashed_alike() {
        let attr = PerfEventAttr {
            sample_type: PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP,
            ..Default::default()
        };
        let h = PerfEventHeader {
            type_: PERF_RECORD_SAMPLE,
            misc: 0,
            size: 24,
        };
        let sample = |id: u64| {
            let mut b = vec![0u8; 24];
            b[8..16].copy_from_slice(&id.to_le_bytes());
            b
        };
        // A few ids (scanned), then past FEW_IDS (hashed); a repeated id
        // takes its last event, as the map's insert does.
        for per_event in [2u64, FEW_IDS as u64] {
            let mut m = IdMap::default();
            let ids = |e: u64| (1 + e * per_event..1 + (e + 1) * per_event).collect::<Vec<_>>();
            m.add(0, &attr, &ids(0));
            m.add(1, &attr, &ids(1));
            m.add(2, &attr, &[1]);
            for e in 0..2u64 {
                for id in ids(e).into_iter().filter(|&id| id != 1) {
                    let got = m.lookup(h, &sample(id), Endianness::Little);
                    assert_eq!(got, Some(e as usize), "id {id}");
                }
            }
            assert_eq!(m.lookup(h, &sample(1), Endianness::Little), Some(2));
            assert_eq!(m.lookup(h, &sample(10_000), Endianness::Little), None);
            assert_eq!(m.lookup(h, &sample(0), Endianness::Little), Some(0));
        }
    }
}
