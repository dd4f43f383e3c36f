//! PERF_RECORD_CPU_MAP (74): `{hdr; struct perf_record_cpu_map_data}`, and the
//! same data inside EVENT_UPDATE's CPUS variant.
//!
//! `perf_record_cpu_map_data` is packed (an early version was unaligned and
//! perf kept the bytes): `u16 type` and then, at data offset 2,
//!
//! ```text
//! PERF_CPU_MAP__CPUS  0: u16 nr; u16 cpu[nr]
//! PERF_CPU_MAP__MASK  1: u16 nr; u16 long_size; long_size 4: u32 mask[nr] at 6
//!                                              long_size 8: 4 pad bytes, u64 mask[nr] at 10
//! PERF_CPU_MAP__RANGE_CPUS 2: u8 any_cpu; u8 pad; u16 start_cpu; u16 end_cpu
//! ```
//! A CPU of 65535 (`(u16)-1`) in the CPUS form is the "any CPU" entry.
//! The record's `header.size` is padded to 8.

use super::UserRecordError;
use super::wire::{Put, Wire, align8, check_size};
use crate::ByteSink;
use crate::consts::PERF_RECORD_CPU_MAP;
use crate::endian::Endianness;

const NAME: &str = "PERF_RECORD_CPU_MAP";
/// `PERF_CPU_MAP__CPUS`: an explicit list of CPU numbers.
pub const PERF_CPU_MAP__CPUS: u16 = 0;
/// `PERF_CPU_MAP__MASK`: a bitmap of CPUs.
pub const PERF_CPU_MAP__MASK: u16 = 1;
/// `PERF_CPU_MAP__RANGE_CPUS`: a contiguous range of CPUs.
pub const PERF_CPU_MAP__RANGE_CPUS: u16 = 2;

/// One encoding of a CPU list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuMapData {
    /// An explicit list; 65535 means "any CPU" (-1).
    Cpus(Vec<u16>),
    /// A bitmap in `long_size`-byte words (4 or 8); each word is held in a u64.
    Mask {
        /// Bytes per mask word as written: 4 or 8 (the writer's `long`).
        long_size: u16,
        /// The words, CPU 0 in bit 0 of the first.
        mask: Vec<u64>,
    },
    /// `start_cpu..=end_cpu`, plus -1 first if `any_cpu`.
    Range {
        /// Whether the map starts with the "any CPU" (-1) entry.
        any_cpu: bool,
        /// The first CPU of the range.
        start_cpu: u16,
        /// The last CPU of the range (inclusive).
        end_cpu: u16,
    },
}

impl CpuMapData {
    /// The CPUs listed, -1 standing for "any CPU", in perf's order.
    pub fn cpus(&self) -> Vec<i32> {
        match self {
            Self::Cpus(v) => v
                .iter()
                .map(|&c| if c == u16::MAX { -1 } else { i32::from(c) })
                .collect(),
            Self::Mask { long_size, mask } => {
                let bits = usize::from(*long_size) * 8;
                let mut out = Vec::new();
                for (w, &word) in mask.iter().enumerate() {
                    for b in 0..bits.min(64) {
                        if word >> b & 1 == 1 {
                            out.push((w * bits + b) as i32);
                        }
                    }
                }
                out
            }
            Self::Range {
                any_cpu,
                start_cpu,
                end_cpu,
            } => {
                let mut out: Vec<i32> = if *any_cpu { vec![-1] } else { Vec::new() };
                out.extend(i32::from(*start_cpu)..=i32::from(*end_cpu));
                out
            }
        }
    }

    /// Bytes of the packed data (type included), unpadded.
    pub fn encoded_len(&self) -> usize {
        match self {
            Self::Cpus(v) => 4 + 2 * v.len(),
            Self::Mask { long_size: 4, mask } => 6 + 4 * mask.len(),
            Self::Mask { mask, .. } => 10 + 8 * mask.len(),
            Self::Range { .. } => 8,
        }
    }

    /// Reads the packed data starting at the wire's position; `start` is
    /// that position, for error offsets.
    pub(crate) fn read(w: &mut Wire<'_>) -> Result<Self, UserRecordError> {
        let type_at = w.pos();
        let type_ = w.u16()?;
        match type_ {
            PERF_CPU_MAP__CPUS => {
                let at = w.pos();
                let nr = w.u16()?;
                let n = w.count(u64::from(nr), 2, at)?;
                let mut cpus = Vec::with_capacity(n);
                for _ in 0..n {
                    cpus.push(w.u16()?);
                }
                Ok(Self::Cpus(cpus))
            }
            PERF_CPU_MAP__MASK => {
                let nr_at = w.pos();
                let nr = w.u16()?;
                let ls_at = w.pos();
                let long_size = w.u16()?;
                let mut mask = Vec::new();
                match long_size {
                    4 => {
                        let n = w.count(u64::from(nr), 4, nr_at)?;
                        mask.reserve(n);
                        for _ in 0..n {
                            mask.push(u64::from(w.u32()?));
                        }
                    }
                    8 => {
                        w.bytes(4)?;
                        let n = w.count(u64::from(nr), 8, nr_at)?;
                        mask.reserve(n);
                        for _ in 0..n {
                            mask.push(w.u64()?);
                        }
                    }
                    other => {
                        return Err(
                            w.invalid(ls_at, format!("mask long_size {other}, expected 4 or 8"))
                        );
                    }
                }
                Ok(Self::Mask { long_size, mask })
            }
            PERF_CPU_MAP__RANGE_CPUS => {
                let any_cpu = w.u8()? != 0;
                w.u8()?;
                let start_cpu = w.u16()?;
                let end_cpu = w.u16()?;
                Ok(Self::Range {
                    any_cpu,
                    start_cpu,
                    end_cpu,
                })
            }
            other => Err(w.invalid(type_at, format!("unknown cpu map type {other}"))),
        }
    }

    pub(crate) fn put<S: ByteSink + ?Sized>(
        &self,
        p: &mut Put<'_, S>,
    ) -> Result<(), UserRecordError> {
        let too_many = |n: usize| UserRecordError::TooLarge {
            record: NAME,
            size: n,
        };
        match self {
            Self::Cpus(v) => {
                p.u16(PERF_CPU_MAP__CPUS);
                p.u16(u16::try_from(v.len()).map_err(|_| too_many(v.len()))?);
                for &c in v {
                    p.u16(c);
                }
            }
            Self::Mask { long_size, mask } => {
                p.u16(PERF_CPU_MAP__MASK);
                p.u16(u16::try_from(mask.len()).map_err(|_| too_many(mask.len()))?);
                p.u16(*long_size);
                if *long_size == 4 {
                    for &m in mask {
                        p.u32(m as u32);
                    }
                } else if *long_size == 8 {
                    p.zeros(4);
                    for &m in mask {
                        p.u64(m);
                    }
                } else {
                    return Err(UserRecordError::Invalid {
                        record: NAME,
                        offset: 12,
                        what: format!("mask long_size {long_size}, expected 4 or 8"),
                    });
                }
            }
            Self::Range {
                any_cpu,
                start_cpu,
                end_cpu,
            } => {
                p.u16(PERF_CPU_MAP__RANGE_CPUS);
                p.bytes(&[u8::from(*any_cpu), 0]);
                p.u16(*start_cpu);
                p.u16(*end_cpu);
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
/// PERF_RECORD_CPU_MAP.
pub struct CpuMapRecord {
    /// The CPUs, in the encoding the record uses.
    pub data: CpuMapData,
}

impl CpuMapRecord {
    /// Parses a whole PERF_RECORD_CPU_MAP, header included, in byte order `endian`.
    pub fn parse(record: &[u8], endian: Endianness) -> Result<Self, UserRecordError> {
        let (mut w, _) = Wire::open(record, endian, NAME, PERF_RECORD_CPU_MAP, 10)?;
        Ok(Self {
            data: CpuMapData::read(&mut w)?,
        })
    }

    /// The record's size in bytes, header included (its `header.size`).
    pub fn size(&self) -> usize {
        align8(8 + self.data.encoded_len())
    }

    /// Writes the whole PERF_RECORD_CPU_MAP, header included, in byte order `endian`.
    pub fn write<S: ByteSink + ?Sized>(
        &self,
        sink: &mut S,
        endian: Endianness,
    ) -> Result<(), UserRecordError> {
        let size = self.size();
        check_size(NAME, size)?;
        let mut p = Put::header(sink, endian, PERF_RECORD_CPU_MAP, size);
        self.data.put(&mut p)?;
        p.zeros(size - 8 - self.data.encoded_len());
        Ok(())
    }
}
