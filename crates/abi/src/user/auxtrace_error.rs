//! PERF_RECORD_AUXTRACE_ERROR (72): a decoder's or tracer's error report.
//!
//! ```text
//!   8 u32 type (1 = PERF_AUXTRACE_ERROR_ITRACE)   12 u32 code
//!  16 u32 cpu   20 u32 pid   24 u32 tid   28 u32 fmt   32 u64 ip
//!  fmt 0:  40 char msg[64]                       (size 104, perf < 4.19)
//!  fmt 1+: 40 u64 time; 48 char msg[64]          (size 112)
//!  size >= 120: 112 u32 machine_pid; 116 u32 vcpu (perf 5.19+)
//! ```
//! perf's reader takes the message from `&time` when fmt is 0.

use super::UserRecordError;
use super::wire::{Put, Wire};
use crate::ByteSink;
use crate::consts::PERF_RECORD_AUXTRACE_ERROR;
use crate::endian::Endianness;

const NAME: &str = "PERF_RECORD_AUXTRACE_ERROR";
/// `MAX_AUXTRACE_ERROR_MSG`.
pub const MAX_AUXTRACE_ERROR_MSG: usize = 64;
/// `PERF_AUXTRACE_ERROR_ITRACE`.
pub const PERF_AUXTRACE_ERROR_ITRACE: u32 = 1;

/// The guest fields perf 5.19 appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AuxtraceErrorGuest {
    /// The guest machine's pid (0 for the host).
    pub machine_pid: u32,
    /// The guest's virtual CPU.
    pub vcpu: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
/// PERF_RECORD_AUXTRACE_ERROR.
pub struct AuxtraceErrorRecord {
    /// `type`: `PERF_AUXTRACE_ERROR_ITRACE` (1).
    pub type_: u32,
    /// The decoder's error code.
    pub code: u32,
    /// The CPU of the trace the error is in.
    pub cpu: u32,
    /// The process being traced.
    pub pid: u32,
    /// The thread being traced.
    pub tid: u32,
    /// 0: no `time` field; 1: `time` present; 2: guest fields meaningful.
    pub fmt: u32,
    /// The instruction address where decoding failed.
    pub ip: u64,
    /// `None` exactly when `fmt` is 0.
    pub time: Option<u64>,
    /// The message up to its first NUL (at most 64 bytes).
    pub msg: Vec<u8>,
    /// Present when the record is 120 bytes or more.
    pub guest: Option<AuxtraceErrorGuest>,
}

impl AuxtraceErrorRecord {
    const FMT0_SIZE: usize = 104;
    const TIME_SIZE: usize = 112;
    const GUEST_SIZE: usize = 120;

    /// Parses a whole PERF_RECORD_AUXTRACE_ERROR, header included, in byte order `endian`.
    pub fn parse(record: &[u8], endian: Endianness) -> Result<Self, UserRecordError> {
        let (mut w, _) = Wire::open(record, endian, NAME, PERF_RECORD_AUXTRACE_ERROR, 40)?;
        let type_ = w.u32()?;
        let code = w.u32()?;
        let cpu = w.u32()?;
        let pid = w.u32()?;
        let tid = w.u32()?;
        let fmt = w.u32()?;
        let ip = w.u64()?;
        let (time, msg_area) = if fmt == 0 {
            let n = w.remaining().min(Self::FMT0_SIZE - 40);
            (None, w.bytes(n)?)
        } else {
            let t = w.u64()?;
            let n = w.remaining().min(MAX_AUXTRACE_ERROR_MSG);
            (Some(t), w.bytes(n)?)
        };
        let msg_len = msg_area
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(msg_area.len())
            .min(MAX_AUXTRACE_ERROR_MSG);
        let msg = msg_area[..msg_len].to_vec();
        let guest = if record.len() >= Self::GUEST_SIZE {
            let mut g = Wire::open(record, endian, NAME, PERF_RECORD_AUXTRACE_ERROR, 0)?.0;
            g.bytes(Self::TIME_SIZE - 8)?;
            Some(AuxtraceErrorGuest {
                machine_pid: g.u32()?,
                vcpu: g.u32()?,
            })
        } else {
            None
        };
        Ok(Self {
            type_,
            code,
            cpu,
            pid,
            tid,
            fmt,
            ip,
            time,
            msg,
            guest,
        })
    }

    /// The record's size in bytes, header included (its `header.size`).
    pub fn size(&self) -> usize {
        match (self.guest, self.time) {
            (Some(_), _) => Self::GUEST_SIZE,
            (None, Some(_)) => Self::TIME_SIZE,
            (None, None) => Self::FMT0_SIZE,
        }
    }

    /// Writes the record; `time` must be `Some` unless `fmt` is 0, and the
    /// message must fit 63 bytes (perf keeps a NUL at the end).
    pub fn write<S: ByteSink + ?Sized>(
        &self,
        sink: &mut S,
        endian: Endianness,
    ) -> Result<(), UserRecordError> {
        if (self.fmt == 0) != self.time.is_none() {
            return Err(UserRecordError::Invalid {
                record: NAME,
                offset: 28,
                what: format!("fmt {} disagrees with time being {:?}", self.fmt, self.time),
            });
        }
        if self.msg.len() >= MAX_AUXTRACE_ERROR_MSG {
            return Err(UserRecordError::Invalid {
                record: NAME,
                offset: 48,
                what: format!(
                    "message of {} bytes leaves no room for its NUL",
                    self.msg.len()
                ),
            });
        }
        let size = self.size();
        let mut p = Put::header(sink, endian, PERF_RECORD_AUXTRACE_ERROR, size);
        p.u32(self.type_);
        p.u32(self.code);
        p.u32(self.cpu);
        p.u32(self.pid);
        p.u32(self.tid);
        p.u32(self.fmt);
        p.u64(self.ip);
        let mut msg_area = 64;
        match self.time {
            Some(t) => p.u64(t),
            // fmt 0 in a 112/120-byte record: the time slot holds message bytes.
            None => msg_area = size.min(Self::TIME_SIZE) - 40,
        }
        p.bytes(&self.msg);
        p.zeros(msg_area - self.msg.len());
        if let Some(g) = self.guest {
            p.u32(g.machine_pid);
            p.u32(g.vcpu);
        }
        Ok(())
    }
}
