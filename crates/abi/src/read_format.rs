//! The `read_format` block of PERF_RECORD_READ and PERF_SAMPLE_READ
//! (include/uapi/linux/perf_event.h, `enum perf_event_read_format`):
//! - without GROUP: `{ value; [time_enabled]; [time_running]; [id]; [lost] }`;
//! - with GROUP: `{ nr; [time_enabled]; [time_running]; { value; [id]; [lost] } cntr[nr] }`.

use crate::array::{Array, ArrayItem};
use crate::consts::{
    PERF_FORMAT_GROUP, PERF_FORMAT_ID, PERF_FORMAT_LOST, PERF_FORMAT_TOTAL_TIME_ENABLED,
    PERF_FORMAT_TOTAL_TIME_RUNNING,
};
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::raw::RawReader;
use crate::sink::ByteSink;

/// One counter: `{ value; [id]; [lost] }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReadValue {
    /// `value`: the counter's count.
    pub value: u64,
    /// `id` (PERF_FORMAT_ID): the counter's event id.
    pub id: Option<u64>,
    /// `lost` (PERF_FORMAT_LOST): samples the counter lost.
    pub lost: Option<u64>,
}

/// The read_format bits that shape one [`ReadValue`] (the array context).
#[inline]
fn value_ctx(read_format: u64) -> u64 {
    read_format & (PERF_FORMAT_ID | PERF_FORMAT_LOST)
}

impl ArrayItem for ReadValue {
    type Ctx = u64;
    #[inline]
    fn size(rf: u64) -> usize {
        8 * (1 + (value_ctx(rf)).count_ones() as usize)
    }
    #[inline]
    fn read(r: &mut RawReader<'_>, rf: u64) -> Result<Self, ParseError> {
        Ok(Self {
            value: r.u64("read value")?,
            id: if rf & PERF_FORMAT_ID != 0 {
                Some(r.u64("read id")?)
            } else {
                None
            },
            lost: if rf & PERF_FORMAT_LOST != 0 {
                Some(r.u64("read lost")?)
            } else {
                None
            },
        })
    }
    #[inline]
    fn write<S: ByteSink + ?Sized>(&self, rf: u64, e: Endianness, sink: &mut S) {
        sink.put(&e.u64_bytes(self.value));
        if rf & PERF_FORMAT_ID != 0 {
            sink.put(&e.u64_bytes(self.id.unwrap_or(0)));
        }
        if rf & PERF_FORMAT_LOST != 0 {
            sink.put(&e.u64_bytes(self.lost.unwrap_or(0)));
        }
    }
}

/// The counters: one, or a group's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReadValues<'a> {
    /// Without PERF_FORMAT_GROUP: this event's counter.
    Single(ReadValue),
    /// With PERF_FORMAT_GROUP: `u64 nr` counters, the leader's first.
    Group(Array<'a, ReadValue>),
}

impl Default for ReadValues<'_> {
    fn default() -> Self {
        ReadValues::Single(ReadValue::default())
    }
}

/// A decoded read_format block.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ReadFormat<'a> {
    /// `time_enabled` (PERF_FORMAT_TOTAL_TIME_ENABLED): ns the event was enabled.
    pub time_enabled: Option<u64>,
    /// `time_running` (PERF_FORMAT_TOTAL_TIME_RUNNING): ns it was on the PMU.
    pub time_running: Option<u64>,
    /// The counter values.
    pub values: ReadValues<'a>,
}

impl<'a> ReadFormat<'a> {
    /// Decodes a block laid out for `read_format`.
    pub fn parse(r: &mut RawReader<'a>, read_format: u64) -> Result<Self, ParseError> {
        let rf = read_format;
        if rf & PERF_FORMAT_GROUP != 0 {
            let nr = r.u64("read nr")?;
            let time_enabled = Self::opt(r, rf, PERF_FORMAT_TOTAL_TIME_ENABLED, "time_enabled")?;
            let time_running = Self::opt(r, rf, PERF_FORMAT_TOTAL_TIME_RUNNING, "time_running")?;
            let values = Array::parse(r, nr, value_ctx(rf), "read cntr[]")?;
            Ok(Self {
                time_enabled,
                time_running,
                values: ReadValues::Group(values),
            })
        } else {
            let value = r.u64("read value")?;
            let time_enabled = Self::opt(r, rf, PERF_FORMAT_TOTAL_TIME_ENABLED, "time_enabled")?;
            let time_running = Self::opt(r, rf, PERF_FORMAT_TOTAL_TIME_RUNNING, "time_running")?;
            let id = Self::opt(r, rf, PERF_FORMAT_ID, "read id")?;
            let lost = Self::opt(r, rf, PERF_FORMAT_LOST, "read lost")?;
            Ok(Self {
                time_enabled,
                time_running,
                values: ReadValues::Single(ReadValue { value, id, lost }),
            })
        }
    }

    #[inline]
    fn opt(
        r: &mut RawReader<'_>,
        rf: u64,
        bit: u64,
        what: &'static str,
    ) -> Result<Option<u64>, ParseError> {
        if rf & bit != 0 {
            r.u64(what).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The counters, as many as the block holds.
    pub fn iter(&self) -> impl Iterator<Item = ReadValue> + '_ {
        let (single, group) = match &self.values {
            ReadValues::Single(v) => (Some(*v), None),
            ReadValues::Group(a) => (None, Some(a.iter())),
        };
        single.into_iter().chain(group.into_iter().flatten())
    }

    fn group_len(&self) -> usize {
        match &self.values {
            ReadValues::Single(_) => 1,
            ReadValues::Group(a) => a.len(),
        }
    }

    /// Bytes of the block laid out for `read_format`.
    pub fn encoded_len(&self, read_format: u64) -> usize {
        let rf = read_format;
        let times = (rf & (PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING))
            .count_ones() as usize
            * 8;
        if rf & PERF_FORMAT_GROUP != 0 {
            8 + times + self.group_len() * ReadValue::size(rf)
        } else {
            times + ReadValue::size(rf)
        }
    }

    /// Encodes the block laid out for `read_format`. Selected fields that
    /// are `None` are zero; a single value written as a group is a group of
    /// one; a group written without GROUP keeps its first counter.
    pub fn write<S: ByteSink + ?Sized>(&self, read_format: u64, e: Endianness, sink: &mut S) {
        let rf = read_format;
        let times = |sink: &mut S| {
            if rf & PERF_FORMAT_TOTAL_TIME_ENABLED != 0 {
                sink.put(&e.u64_bytes(self.time_enabled.unwrap_or(0)));
            }
            if rf & PERF_FORMAT_TOTAL_TIME_RUNNING != 0 {
                sink.put(&e.u64_bytes(self.time_running.unwrap_or(0)));
            }
        };
        if rf & PERF_FORMAT_GROUP != 0 {
            sink.put(&e.u64_bytes(self.group_len() as u64));
            times(sink);
            match &self.values {
                ReadValues::Single(v) => v.write(value_ctx(rf), e, sink),
                ReadValues::Group(a) => a.write(value_ctx(rf), e, sink),
            }
        } else {
            let first = self.iter().next().unwrap_or_default();
            sink.put(&e.u64_bytes(first.value));
            times(sink);
            if rf & PERF_FORMAT_ID != 0 {
                sink.put(&e.u64_bytes(first.id.unwrap_or(0)));
            }
            if rf & PERF_FORMAT_LOST != 0 {
                sink.put(&e.u64_bytes(first.lost.unwrap_or(0)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::RawData;

    fn words(ws: &[u64]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn non_group_layout() {
        // value, time_enabled, time_running, id, lost.
        let rf = PERF_FORMAT_TOTAL_TIME_ENABLED
            | PERF_FORMAT_TOTAL_TIME_RUNNING
            | PERF_FORMAT_ID
            | PERF_FORMAT_LOST;
        let bytes = words(&[100, 2000, 1500, 9, 3]);
        let f = ReadFormat::parse(
            &mut RawReader::new(RawData::Single(&bytes), Endianness::Little),
            rf,
        )
        .unwrap();
        assert_eq!(f.time_enabled, Some(2000));
        assert_eq!(f.time_running, Some(1500));
        assert_eq!(
            f.values,
            ReadValues::Single(ReadValue {
                value: 100,
                id: Some(9),
                lost: Some(3)
            })
        );
        assert_eq!(f.encoded_len(rf), 40);
        let mut out = Vec::new();
        f.write(rf, Endianness::Little, &mut out);
        assert_eq!(out, bytes);
    }

    #[test]
    fn group_layout() {
        // nr, time_enabled, {value, id}[2] (no running, no lost).
        let rf = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_ID;
        let bytes = words(&[2, 500, 11, 1, 22, 2]);
        let f = ReadFormat::parse(
            &mut RawReader::new(RawData::Single(&bytes), Endianness::Little),
            rf,
        )
        .unwrap();
        assert_eq!(f.time_enabled, Some(500));
        assert_eq!(f.time_running, None);
        let vals: Vec<_> = f.iter().collect();
        assert_eq!(
            vals,
            [
                ReadValue {
                    value: 11,
                    id: Some(1),
                    lost: None
                },
                ReadValue {
                    value: 22,
                    id: Some(2),
                    lost: None
                },
            ]
        );
        let mut out = Vec::new();
        f.write(rf, Endianness::Little, &mut out);
        assert_eq!(out, bytes);
        // Built from items, big-endian.
        let items = [
            ReadValue {
                value: 11,
                id: Some(1),
                lost: None,
            },
            ReadValue {
                value: 22,
                id: Some(2),
                lost: None,
            },
        ];
        let built = ReadFormat {
            time_enabled: Some(500),
            time_running: None,
            values: ReadValues::Group(Array::Items(&items)),
        };
        assert_eq!(built, f);
        let mut be = Vec::new();
        built.write(rf, Endianness::Big, &mut be);
        let back = ReadFormat::parse(
            &mut RawReader::new(RawData::Single(&be), Endianness::Big),
            rf,
        )
        .unwrap();
        assert_eq!(back, f);
    }

    #[test]
    fn group_count_beyond_the_record_is_an_error() {
        let rf = PERF_FORMAT_GROUP;
        let bytes = words(&[1 << 60, 1]);
        assert!(
            ReadFormat::parse(
                &mut RawReader::new(RawData::Single(&bytes), Endianness::Little),
                rf
            )
            .is_err()
        );
    }
}
