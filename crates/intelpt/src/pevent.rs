//! perf_event sideband: the records perf writes beside a trace (mmaps, comms, forks, context
//! switches, lost data), stored back to back as in perf's data ring, each followed by the
//! `sample_id` fields its event's `sample_type` asks for. A trace's packets say where the code
//! went; these records say which process and which mappings that code belonged to, and their
//! sample time (converted to TSC) places them among the trace's timing packets.
//!
//! This is the format libipt's `--pevent` options read, so the reading follows libipt's where
//! it is defined: the record types it knows, the end of the stream at a header of type 0 or a
//! record cut short by the end of the data, the identifier lookup of `--pevent:sample-config`,
//! perf's `time_zero`/`time_shift`/`time_mult` conversion and the `tsc-offset` adjustment.
//!
//! A sideband file is untrusted input: any bytes give records or an [`Error`] at the offset of
//! the record that could not be read, and reading borrows the bytes (strings included), so it
//! allocates nothing whatever the file holds.

use std::fmt;

/// `perf_event_attr.sample_type` bits that `sample_id_all` appends to non-sample records.
pub mod sample {
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const IDENTIFIER: u64 = 1 << 16;
}

/// `perf_event_header.type` values with a body this reader decodes.
pub mod record_type {
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const THROTTLE: u32 = 5;
    pub const UNTHROTTLE: u32 = 6;
    pub const FORK: u32 = 7;
    pub const MMAP2: u32 = 10;
    pub const AUX: u32 = 11;
    pub const ITRACE_START: u32 = 12;
    pub const LOST_SAMPLES: u32 = 13;
    pub const SWITCH: u32 = 14;
    pub const SWITCH_CPU_WIDE: u32 = 15;
}

/// `perf_event_header.misc`: a COMM record caused by exec.
pub const MISC_COMM_EXEC: u16 = 1 << 13;
/// `perf_event_header.misc`: a SWITCH record for switching out (the same bit as COMM's exec).
pub const MISC_SWITCH_OUT: u16 = 1 << 13;
/// `perf_record_aux.flags`: the AUX data was truncated.
pub const AUX_FLAG_TRUNCATED: u64 = 1;

const HEADER: usize = 8;

/// How the records of one sideband stream were written: which `sample_id` fields follow each
/// record and how their time becomes TSC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The `sample_type` of the stream's events.
    pub sample_type: u64,
    /// Per-event sample types, by the `PERF_SAMPLE_IDENTIFIER` value that ends a record, for
    /// streams that mix events with different sample types. Each must include
    /// [`sample::IDENTIFIER`], or the identifier could not have been found.
    pub sample_types: Vec<(u64, u64)>,
    /// `perf_event_mmap_page`'s `time_zero`, `time_shift` and `time_mult`.
    pub time_zero: u64,
    /// Below 64.
    pub time_shift: u8,
    pub time_mult: u32,
    /// Ticks to move the stream's records earlier by (as two's complement, later).
    pub tsc_offset: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sample_type: 0,
            sample_types: Vec::new(),
            time_zero: 0,
            time_shift: 0,
            time_mult: 1,
            tsc_offset: 0,
        }
    }
}

impl Config {
    /// perf time as TSC: the inverse of perf's `time_zero + (tsc * mult) >> shift`, split into
    /// quotient and remainder so that it does not overflow. Time 0 marks records perf
    /// synthesized, which happened before anything, and stays 0.
    pub fn time_to_tsc(&self, time: u64) -> Result<u64, ErrorKind> {
        if time == 0 {
            return Ok(0);
        }
        if self.time_mult == 0 {
            return Err(ErrorKind::NoTimeMult);
        }
        let t = time.wrapping_sub(self.time_zero);
        let mult = u64::from(self.time_mult);
        let shift = u32::from(self.time_shift) & 63;
        let quot = (t / mult).wrapping_shl(shift);
        let rem = (t % mult).wrapping_shl(shift) / mult;
        Ok(quot.wrapping_add(rem))
    }

    /// The TSC a record is placed at: `tsc - tsc_offset`, held at 0 rather than wrapping to
    /// the far future (which would hold back the whole stream); an offset that is negative as
    /// two's complement moves records later instead.
    pub fn offset_tsc(&self, tsc: u64) -> u64 {
        let off = self.tsc_offset;
        if off <= tsc {
            tsc - off
        } else if (off as i64) >= 0 {
            0
        } else {
            tsc.wrapping_sub(off)
        }
    }

    fn sample_type_for(&self, identifier: Option<u64>) -> Result<u64, ErrorKind> {
        let Some(id) = identifier else {
            return Ok(self.sample_type);
        };
        match self.sample_types.iter().find(|&&(i, _)| i == id) {
            Some(&(_, st)) if st & sample::IDENTIFIER == 0 => Err(ErrorKind::SampleConfig),
            Some(&(_, st)) => Ok(st),
            None => Ok(self.sample_type),
        }
    }
}

/// The `sample_id` fields after a record, those its sample type has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Samples {
    pub pid_tid: Option<(u32, u32)>,
    /// perf time, as written.
    pub time: Option<u64>,
    pub id: Option<u64>,
    pub stream_id: Option<u64>,
    pub cpu: Option<u32>,
    pub identifier: Option<u64>,
}

/// EXIT's and FORK's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    pub pid: u32,
    pub ppid: u32,
    pub tid: u32,
    pub ptid: u32,
    pub time: u64,
}

/// THROTTLE's and UNTHROTTLE's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle {
    pub time: u64,
    pub id: u64,
    pub stream_id: u64,
}

/// A record's body; strings without their NUL, as the file holds them (not necessarily
/// UTF-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    Mmap {
        pid: u32,
        tid: u32,
        addr: u64,
        len: u64,
        pgoff: u64,
        filename: &'a [u8],
    },
    Lost {
        id: u64,
        lost: u64,
    },
    Comm {
        pid: u32,
        tid: u32,
        comm: &'a [u8],
    },
    Exit(Task),
    Throttle(Throttle),
    Unthrottle(Throttle),
    Fork(Task),
    Mmap2 {
        pid: u32,
        tid: u32,
        addr: u64,
        len: u64,
        pgoff: u64,
        maj: u32,
        min: u32,
        ino: u64,
        ino_generation: u64,
        prot: u32,
        flags: u32,
        filename: &'a [u8],
    },
    Aux {
        offset: u64,
        size: u64,
        flags: u64,
    },
    ItraceStart {
        pid: u32,
        tid: u32,
    },
    LostSamples {
        lost: u64,
    },
    Switch,
    /// The next task's (switch out) or the previous task's (switch in).
    SwitchCpuWide {
        pid: u32,
        tid: u32,
    },
    /// A type this reader does not decode (samples included): skipped whole, and without a
    /// time it is due at once.
    Other,
}

/// One record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Where the record starts in the bytes read.
    pub offset: usize,
    /// Its length, header included.
    pub size: usize,
    /// `perf_event_header.type` and `.misc`.
    pub kind: u32,
    pub misc: u16,
    pub body: Body<'a>,
    pub samples: Samples,
    /// The sample time as TSC, with [`Config::tsc_offset`] applied; `None` without a time
    /// sample.
    pub tsc: Option<u64>,
}

/// Why a record could not be read. Each kind is an error the stream cannot be read past:
/// there is no telling where the next record starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The header's size is smaller than the header.
    ShortHeader,
    /// The body and sample fields do not fill the record exactly.
    SizeMismatch,
    /// A record with a string is too short for the fields before the string.
    NoRoomForString,
    /// A string runs to the end of its record without a NUL.
    UnterminatedString,
    /// The record's identifier has a sample type without `PERF_SAMPLE_IDENTIFIER`.
    SampleConfig,
    /// A time to convert with a `time_mult` of 0.
    NoTimeMult,
}

impl ErrorKind {
    /// The words libipt's `pt_errstr` gives for the error its reader returns here.
    pub fn libipt_str(self) -> &'static str {
        match self {
            ErrorKind::ShortHeader | ErrorKind::SizeMismatch => "decoder out of sync",
            // libipt finds the string's start past the record's end only by comparing
            // pointers, and calls that an internal error.
            ErrorKind::NoRoomForString => "internal error",
            ErrorKind::UnterminatedString => "unknown packet",
            ErrorKind::SampleConfig | ErrorKind::NoTimeMult => "bad configuration",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::ShortHeader => "record size smaller than its header",
            ErrorKind::SizeMismatch => "record fields do not fill the record's size",
            ErrorKind::NoRoomForString => "record too short for its fields",
            ErrorKind::UnterminatedString => "string without a NUL in its record",
            ErrorKind::SampleConfig => "identifier's sample type lacks PERF_SAMPLE_IDENTIFIER",
            ErrorKind::NoTimeMult => "time conversion with time_mult 0",
        })
    }
}

/// A record that could not be read, and where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error {
    pub offset: usize,
    pub kind: ErrorKind,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "perf_event record at {:#x}: {}", self.offset, self.kind)
    }
}

impl std::error::Error for Error {}

/// Little-endian fields of one record, by offset from its start. Offsets past the record read
/// as `None`, so no field can come from the next record.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn bytes<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        self.0.get(at..at.checked_add(N)?)?.try_into().ok()
    }

    fn u16(&self, at: usize) -> Option<u16> {
        self.bytes(at).map(u16::from_le_bytes)
    }

    fn u32(&self, at: usize) -> Option<u32> {
        self.bytes(at).map(u32::from_le_bytes)
    }

    fn u64(&self, at: usize) -> Option<u64> {
        self.bytes(at).map(u64::from_le_bytes)
    }

    /// The NUL-terminated string at `at`, and where the 8-byte aligned field it fills ends.
    fn string(&self, at: usize) -> Result<(&'a [u8], usize), ErrorKind> {
        let rest = self.0.get(at..).ok_or(ErrorKind::NoRoomForString)?;
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(ErrorKind::UnterminatedString)?;
        Ok((&rest[..len], at + (len + 1).next_multiple_of(8)))
    }
}

/// Reads the record at `offset` of `buf`. `Ok(None)` is the end of the stream: fewer bytes
/// than a header, a header of type 0 (nothing was written there), or a record longer than
/// what is left (the data was cut off while perf wrote it).
pub fn read<'a>(buf: &'a [u8], offset: usize, cfg: &Config) -> Result<Option<Record<'a>>, Error> {
    let err = |kind| Error { offset, kind };
    let Some(rest) = buf.get(offset..).filter(|r| r.len() >= HEADER) else {
        return Ok(None);
    };
    let head = Fields(rest);
    let (Some(kind), Some(misc), Some(size)) = (head.u32(0), head.u16(4), head.u16(6)) else {
        return Ok(None);
    };
    let size = usize::from(size);
    if size < HEADER {
        return Err(err(ErrorKind::ShortHeader));
    }
    if kind == 0 || size > rest.len() {
        return Ok(None);
    }
    let f = Fields(&rest[..size]);
    let (body, at) = body(&f, kind).map_err(err)?;
    let mut rec = Record {
        offset,
        size,
        kind,
        misc,
        body,
        samples: Samples::default(),
        tsc: None,
    };
    // Other types carry samples too, but without the body's length there is no finding them.
    let Some(at) = at else {
        return Ok(Some(rec));
    };
    // The identifier, when asked for, is the record's last field: it says which event wrote
    // the record, and so which sample fields come before it.
    let identifier = (size.checked_sub(8).is_some_and(|last| last >= at))
        .then(|| f.u64(size - 8))
        .flatten();
    let st = cfg.sample_type_for(identifier).map_err(err)?;
    let mismatch = || err(ErrorKind::SizeMismatch);
    let mut at = at;
    let s = &mut rec.samples;
    if st & sample::TID != 0 {
        s.pid_tid = Some((
            f.u32(at).ok_or_else(mismatch)?,
            f.u32(at + 4).ok_or_else(mismatch)?,
        ));
        at += 8;
    }
    if st & sample::TIME != 0 {
        let time = f.u64(at).ok_or_else(mismatch)?;
        s.time = Some(time);
        rec.tsc = Some(cfg.offset_tsc(cfg.time_to_tsc(time).map_err(err)?));
        at += 8;
    }
    if st & sample::ID != 0 {
        s.id = Some(f.u64(at).ok_or_else(mismatch)?);
        at += 8;
    }
    if st & sample::STREAM_ID != 0 {
        s.stream_id = Some(f.u64(at).ok_or_else(mismatch)?);
        at += 8;
    }
    if st & sample::CPU != 0 {
        // The cpu and a reserved word.
        s.cpu = Some(f.u32(at).ok_or_else(mismatch)?);
        f.u32(at + 4).ok_or_else(mismatch)?;
        at += 8;
    }
    if st & sample::IDENTIFIER != 0 {
        s.identifier = Some(f.u64(at).ok_or_else(mismatch)?);
        at += 8;
    }
    if at != size {
        return Err(mismatch());
    }
    Ok(Some(rec))
}

/// The body of a record of type `kind`, and where its samples start (`None` for types this
/// reader does not decode). A body longer than the record gives a start past its end.
fn body<'a>(f: &Fields<'a>, kind: u32) -> Result<(Body<'a>, Option<usize>), ErrorKind> {
    use record_type as t;
    let h = HEADER;
    // Fixed-size bodies past the record's end are caught by the sample fields' bounds (or the
    // final size check): read them as zeros meanwhile.
    let u32_ = |at: usize| f.u32(h + at).unwrap_or(0);
    let u64_ = |at: usize| f.u64(h + at).unwrap_or(0);
    let task = || Task {
        pid: u32_(0),
        ppid: u32_(4),
        tid: u32_(8),
        ptid: u32_(12),
        time: u64_(16),
    };
    let throttle = || Throttle {
        time: u64_(0),
        id: u64_(8),
        stream_id: u64_(16),
    };
    Ok(match kind {
        t::MMAP => {
            let (filename, end) = f.string(h + 32)?;
            let b = Body::Mmap {
                pid: u32_(0),
                tid: u32_(4),
                addr: u64_(8),
                len: u64_(16),
                pgoff: u64_(24),
                filename,
            };
            (b, Some(end))
        }
        t::LOST => (
            Body::Lost {
                id: u64_(0),
                lost: u64_(8),
            },
            Some(h + 16),
        ),
        t::COMM => {
            let (comm, end) = f.string(h + 8)?;
            let b = Body::Comm {
                pid: u32_(0),
                tid: u32_(4),
                comm,
            };
            (b, Some(end))
        }
        t::EXIT => (Body::Exit(task()), Some(h + 24)),
        t::THROTTLE => (Body::Throttle(throttle()), Some(h + 24)),
        t::UNTHROTTLE => (Body::Unthrottle(throttle()), Some(h + 24)),
        t::FORK => (Body::Fork(task()), Some(h + 24)),
        t::MMAP2 => {
            let (filename, end) = f.string(h + 64)?;
            let b = Body::Mmap2 {
                pid: u32_(0),
                tid: u32_(4),
                addr: u64_(8),
                len: u64_(16),
                pgoff: u64_(24),
                maj: u32_(32),
                min: u32_(36),
                ino: u64_(40),
                ino_generation: u64_(48),
                prot: u32_(56),
                flags: u32_(60),
                filename,
            };
            (b, Some(end))
        }
        t::AUX => (
            Body::Aux {
                offset: u64_(0),
                size: u64_(8),
                flags: u64_(16),
            },
            Some(h + 24),
        ),
        t::ITRACE_START => (
            Body::ItraceStart {
                pid: u32_(0),
                tid: u32_(4),
            },
            Some(h + 8),
        ),
        t::LOST_SAMPLES => (Body::LostSamples { lost: u64_(0) }, Some(h + 8)),
        t::SWITCH => (Body::Switch, Some(h)),
        t::SWITCH_CPU_WIDE => (
            Body::SwitchCpuWide {
                pid: u32_(0),
                tid: u32_(4),
            },
            Some(h + 8),
        ),
        _ => (Body::Other, None),
    })
}

/// The records of a stream in order, up to its end or the first record that cannot be read.
pub struct Reader<'a, 'c> {
    buf: &'a [u8],
    pos: usize,
    cfg: &'c Config,
    done: bool,
    failed: bool,
}

impl<'a, 'c> Reader<'a, 'c> {
    pub fn new(buf: &'a [u8], cfg: &'c Config) -> Self {
        Reader {
            buf,
            pos: 0,
            cfg,
            done: false,
            failed: false,
        }
    }

    /// At the end of the stream, where the data stopped in the middle of a record (a part of
    /// a header, or a record longer than what was left): libipt's tools take that as the
    /// end, as [`read`] does, but it means records were lost.
    pub fn cut_short(&self) -> Option<usize> {
        let rest = self.buf.get(self.pos..).filter(|r| !r.is_empty())?;
        let kind = rest
            .get(..4)
            .map(|k| u32::from_le_bytes([k[0], k[1], k[2], k[3]]));
        (self.done && !self.failed && kind != Some(0)).then_some(self.pos)
    }
}

impl<'a> Iterator for Reader<'a, '_> {
    type Item = Result<Record<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match read(self.buf, self.pos, self.cfg) {
            Ok(Some(r)) => {
                self.pos += r.size;
                Some(Ok(r))
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut v = kind.to_le_bytes().to_vec();
        v.extend(misc.to_le_bytes());
        v.extend(((HEADER + body.len()) as u16).to_le_bytes());
        v.extend(body);
        v
    }

    #[test]
    fn a_comm_with_time_reads_and_converts() {
        let cfg = Config {
            sample_type: sample::TIME,
            time_zero: 100,
            time_mult: 3,
            time_shift: 1,
            ..Config::default()
        };
        let mut body = vec![1, 0, 0, 0, 2, 0, 0, 0];
        body.extend(b"sh\0\0\0\0\0\0");
        body.extend(130u64.to_le_bytes());
        let buf = record(record_type::COMM, MISC_COMM_EXEC, &body);
        let r = read(&buf, 0, &cfg).unwrap().unwrap();
        assert_eq!(
            r.body,
            Body::Comm {
                pid: 1,
                tid: 2,
                comm: b"sh"
            }
        );
        assert_eq!(r.samples.time, Some(130));
        // (130 - 100) / 3 << 1 = 20.
        assert_eq!(r.tsc, Some(20));
        assert_eq!(read(&buf, r.size, &cfg), Ok(None));
    }

    #[test]
    fn offsets_hold_at_zero_and_negative_ones_move_later() {
        let c = |off| Config {
            tsc_offset: off,
            ..Config::default()
        };
        assert_eq!(c(3).offset_tsc(10), 7);
        assert_eq!(c(30).offset_tsc(10), 0);
        assert_eq!(c((-5i64) as u64).offset_tsc(10), 15);
    }

    #[test]
    fn bad_records_are_errors_at_their_offset() {
        let cfg = Config {
            sample_type: sample::TIME,
            ..Config::default()
        };
        let mut buf = record(record_type::SWITCH, 0, &5u64.to_le_bytes());
        let first = buf.len();
        buf.extend(record(record_type::SWITCH, 0, &[]));
        let mut r = Reader::new(&buf, &cfg);
        assert!(r.next().unwrap().is_ok());
        assert_eq!(
            r.next(),
            Some(Err(Error {
                offset: first,
                kind: ErrorKind::SizeMismatch
            }))
        );
        assert_eq!(r.next(), None);
        let unterminated = record(record_type::COMM, 0, b"\x01\0\0\0\x01\0\0\0abc");
        assert_eq!(
            read(&unterminated, 0, &cfg).unwrap_err().kind,
            ErrorKind::UnterminatedString
        );
        let short = record(record_type::MMAP, 0, &[0; 8]);
        assert_eq!(
            read(&short, 0, &cfg).unwrap_err().kind,
            ErrorKind::NoRoomForString
        );
        let mut tiny = record(record_type::SWITCH, 0, &[]);
        tiny[6] = 4;
        assert_eq!(
            read(&tiny, 0, &cfg).unwrap_err().kind,
            ErrorKind::ShortHeader
        );
    }

    #[test]
    fn a_stream_cut_in_a_record_says_where() {
        let cfg = Config::default();
        let whole = record(record_type::SWITCH, 0, &[]);
        for (tail, cut) in [
            (vec![], None),
            (vec![0, 0, 0, 0, 0, 0, 8, 0], None),
            (vec![14, 0], Some(8)),
            (
                record(record_type::SWITCH, 0, &[0; 8])[..12].to_vec(),
                Some(8),
            ),
        ] {
            let buf = [whole.clone(), tail].concat();
            let mut r = Reader::new(&buf, &cfg);
            assert_eq!(r.cut_short(), None);
            assert!(r.next().unwrap().is_ok());
            assert_eq!(r.next(), None);
            assert_eq!(r.cut_short(), cut);
        }
        let bad = [whole.clone(), vec![14, 0, 0, 0, 0, 0, 4, 0]].concat();
        let mut r = Reader::new(&bad, &cfg);
        assert_eq!(r.nth(1).unwrap().unwrap_err().offset, 8);
        assert_eq!(r.cut_short(), None);
    }

    #[test]
    fn the_identifier_picks_the_sample_type() {
        let cfg = Config {
            sample_type: sample::TIME,
            sample_types: vec![(7, sample::TID | sample::IDENTIFIER)],
            ..Config::default()
        };
        let mut body = vec![3, 0, 0, 0, 4, 0, 0, 0];
        body.extend(7u64.to_le_bytes());
        let buf = record(record_type::SWITCH, MISC_SWITCH_OUT, &body);
        let r = read(&buf, 0, &cfg).unwrap().unwrap();
        assert_eq!(r.samples.pid_tid, Some((3, 4)));
        assert_eq!(r.samples.identifier, Some(7));
        assert_eq!(r.tsc, None);
    }
}
