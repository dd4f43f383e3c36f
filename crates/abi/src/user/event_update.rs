//! PERF_RECORD_EVENT_UPDATE (78): `{hdr; u64 type; u64 id; union}`, a late
//! fact about the event with sample id `id`:
//! UNIT 0 and NAME 2 carry a NUL-terminated string padded to 8, SCALE 1 a
//! `double`, CPUS 3 a packed `perf_record_cpu_map_data` (see [`super::cpu_map`]).

use super::UserRecordError;
use super::cpu_map::CpuMapData;
use super::wire::{Put, Wire, align8, check_size};
use crate::ByteSink;
use crate::consts::PERF_RECORD_EVENT_UPDATE;
use crate::endian::Endianness;

const NAME: &str = "PERF_RECORD_EVENT_UPDATE";
/// `PERF_EVENT_UPDATE__UNIT`: the event's unit (e.g. "MiB").
pub const PERF_EVENT_UPDATE__UNIT: u64 = 0;
/// `PERF_EVENT_UPDATE__SCALE`: the factor counts are multiplied by.
pub const PERF_EVENT_UPDATE__SCALE: u64 = 1;
/// `PERF_EVENT_UPDATE__NAME`: the event's name.
pub const PERF_EVENT_UPDATE__NAME: u64 = 2;
/// `PERF_EVENT_UPDATE__CPUS`: the CPUs the event is opened on.
pub const PERF_EVENT_UPDATE__CPUS: u64 = 3;

#[derive(Debug, Clone, PartialEq)]
/// What an EVENT_UPDATE says, by its `type`.
pub enum EventUpdate {
    /// UNIT: the unit string, without its NUL.
    Unit(Vec<u8>),
    /// SCALE: the scale factor.
    Scale(f64),
    /// NAME: the name string, without its NUL.
    Name(Vec<u8>),
    /// CPUS: the event's CPU map.
    Cpus(CpuMapData),
}

#[derive(Debug, Clone, PartialEq)]
/// PERF_RECORD_EVENT_UPDATE.
pub struct EventUpdateRecord {
    /// A sample id of the event the update is about.
    pub id: u64,
    /// The update.
    pub update: EventUpdate,
}

fn c_string(b: &[u8]) -> Vec<u8> {
    let n = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    b[..n].to_vec()
}

impl EventUpdateRecord {
    /// Parses a whole PERF_RECORD_EVENT_UPDATE, header included, in byte order `endian`.
    pub fn parse(record: &[u8], endian: Endianness) -> Result<Self, UserRecordError> {
        let (mut w, _) = Wire::open(record, endian, NAME, PERF_RECORD_EVENT_UPDATE, 24)?;
        let type_at = w.pos();
        let type_ = w.u64()?;
        let id = w.u64()?;
        let update = match type_ {
            PERF_EVENT_UPDATE__UNIT => EventUpdate::Unit(c_string(w.rest())),
            PERF_EVENT_UPDATE__NAME => EventUpdate::Name(c_string(w.rest())),
            PERF_EVENT_UPDATE__SCALE => EventUpdate::Scale(f64::from_bits(w.u64()?)),
            PERF_EVENT_UPDATE__CPUS => EventUpdate::Cpus(CpuMapData::read(&mut w)?),
            other => return Err(w.invalid(type_at, format!("unknown event update type {other}"))),
        };
        Ok(Self { id, update })
    }

    fn body_len(&self) -> usize {
        match &self.update {
            EventUpdate::Unit(s) | EventUpdate::Name(s) => align8(s.len() + 1),
            EventUpdate::Scale(_) => 8,
            EventUpdate::Cpus(c) => align8(c.encoded_len()),
        }
    }

    /// The record's size in bytes, header included (its `header.size`).
    pub fn size(&self) -> usize {
        24 + self.body_len()
    }

    /// Writes the whole PERF_RECORD_EVENT_UPDATE, header included, in byte order `endian`.
    pub fn write<S: ByteSink + ?Sized>(
        &self,
        sink: &mut S,
        endian: Endianness,
    ) -> Result<(), UserRecordError> {
        let size = self.size();
        check_size(NAME, size)?;
        let mut p = Put::header(sink, endian, PERF_RECORD_EVENT_UPDATE, size);
        let type_ = match &self.update {
            EventUpdate::Unit(_) => PERF_EVENT_UPDATE__UNIT,
            EventUpdate::Scale(_) => PERF_EVENT_UPDATE__SCALE,
            EventUpdate::Name(_) => PERF_EVENT_UPDATE__NAME,
            EventUpdate::Cpus(_) => PERF_EVENT_UPDATE__CPUS,
        };
        p.u64(type_);
        p.u64(self.id);
        match &self.update {
            EventUpdate::Unit(s) | EventUpdate::Name(s) => {
                if s.contains(&0) {
                    return Err(UserRecordError::Invalid {
                        record: NAME,
                        offset: 24,
                        what: "string contains a NUL".into(),
                    });
                }
                p.bytes(s);
                p.zeros(self.body_len() - s.len());
            }
            EventUpdate::Scale(v) => p.u64(v.to_bits()),
            EventUpdate::Cpus(c) => {
                c.put(&mut p)?;
                p.zeros(self.body_len() - c.encoded_len());
            }
        }
        Ok(())
    }
}
