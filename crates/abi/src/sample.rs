//! PERF_RECORD_SAMPLE: every sample_type field, in the kernel's order
//! (`perf_output_sample()`; the body order of include/uapi/linux/perf_event.h).
//!
//! Variable parts borrow the record's bytes ([`RawData`], [`Array`]), so
//! parsing allocates nothing.

use crate::array::{Array, ArrayItem};
use crate::consts::*;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::{RawData, RawReader};
use crate::read_format::ReadFormat;
use crate::records::EncodeRecord;
use crate::sample_id::{CpuRes, PidTid};
use crate::sink::ByteSink;

/// `struct perf_branch_entry`: from, to, and the packed flags word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BranchEntry {
    /// `from`: the branch instruction's address.
    pub from: u64,
    /// `to`: the branch target's address.
    pub to: u64,
    /// mispred:1 predicted:1 in_tx:1 abort:1 cycles:16 type:4 spec:2
    /// new_type:4 priv:3 reserved:31, as the kernel packs them.
    pub flags: u64,
}

impl ArrayItem for BranchEntry {
    type Ctx = ();
    #[inline]
    fn size(_: ()) -> usize {
        24
    }
    #[inline]
    fn read(r: &mut RawReader<'_>, _: ()) -> Result<Self, ParseError> {
        Ok(Self {
            from: r.u64("branch from")?,
            to: r.u64("branch to")?,
            flags: r.u64("branch flags")?,
        })
    }
    #[inline]
    fn write<S: ByteSink + ?Sized>(&self, _: (), e: Endianness, sink: &mut S) {
        sink.put(&e.u64_bytes(self.from));
        sink.put(&e.u64_bytes(self.to));
        sink.put(&e.u64_bytes(self.flags));
    }
}

/// PERF_SAMPLE_BRANCH_STACK: `u64 nr; [u64 hw_idx]; entries[nr]; [u64 counters[nr]]`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BranchStack<'a> {
    /// Present iff branch_sample_type has PERF_SAMPLE_BRANCH_HW_INDEX.
    pub hw_idx: Option<u64>,
    /// `lbr[bnr]`: the branches, newest first.
    pub entries: Array<'a, BranchEntry>,
    /// Present iff branch_sample_type has PERF_SAMPLE_BRANCH_COUNTERS; as
    /// many as entries when written.
    pub counters: Option<Array<'a, u64>>,
}

/// REGS_USER / REGS_INTR: `u64 abi; u64 regs[popcount(mask)]`, no regs when abi is 0.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Regs<'a> {
    /// PERF_SAMPLE_REGS_ABI_NONE (0), _32 (1) or _64 (2).
    pub abi: u64,
    /// The registers selected by the mask, lowest bit first.
    pub regs: Array<'a, u64>,
}

/// PERF_SAMPLE_STACK_USER: `u64 size; char data[size]; u64 dyn_size` (no
/// dyn_size when size is 0).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StackUser<'a> {
    /// `data[size]`: the stack copy from the user stack pointer up, padded.
    pub data: RawData<'a>,
    /// Bytes of `data` that hold stack (the rest is padding).
    pub dyn_size: u64,
}

/// A decoded sample. A field is `Some` iff its sample_type bit is set
/// (WEIGHT and WEIGHT_STRUCT share `weight`).
///
/// Writing follows the [`RecordParseInfo`]'s sample_type: a selected field
/// that is `None` is written as zero (an empty block for variable parts), a
/// field whose bit is clear is not written. Writing pads RAW so that
/// `size + 4` is a multiple of 8, and AUX and STACK_USER data to a multiple
/// of 8, with zeros, the size fields counting the padding, as the kernel does.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SampleRecord<'a> {
    /// `header.misc`: the CPU mode (`PERF_RECORD_MISC_CPUMODE_MASK`) and
    /// `PERF_RECORD_MISC_EXACT_IP`.
    pub misc: u16,
    /// `PERF_SAMPLE_IDENTIFIER`: the event id, first in the sample.
    pub identifier: Option<u64>,
    /// `PERF_SAMPLE_IP`: the instruction pointer.
    pub ip: Option<u64>,
    /// `PERF_SAMPLE_TID`: pid and tid.
    pub tid: Option<PidTid>,
    /// `PERF_SAMPLE_TIME`: the timestamp in ns.
    pub time: Option<u64>,
    /// `PERF_SAMPLE_ADDR`: the data address.
    pub addr: Option<u64>,
    /// `PERF_SAMPLE_ID`: the event's primary id.
    pub id: Option<u64>,
    /// `PERF_SAMPLE_STREAM_ID`: the id of the event instance that wrote it.
    pub stream_id: Option<u64>,
    /// `PERF_SAMPLE_CPU`: cpu and res.
    pub cpu: Option<CpuRes>,
    /// `PERF_SAMPLE_PERIOD`: the events this sample stands for.
    pub period: Option<u64>,
    /// `PERF_SAMPLE_READ`: counter values by `read_format`.
    pub read: Option<ReadFormat<'a>>,
    /// `PERF_SAMPLE_CALLCHAIN`: `ips[nr]`, with `PERF_CONTEXT_*` markers.
    pub callchain: Option<Array<'a, u64>>,
    /// `PERF_SAMPLE_RAW`: the raw data (its padding included).
    pub raw: Option<RawData<'a>>,
    /// `PERF_SAMPLE_BRANCH_STACK`: the branch records.
    pub branch_stack: Option<BranchStack<'a>>,
    /// `PERF_SAMPLE_REGS_USER`: the user registers.
    pub regs_user: Option<Regs<'a>>,
    /// `PERF_SAMPLE_STACK_USER`: the user stack copy.
    pub stack_user: Option<StackUser<'a>>,
    /// `PERF_SAMPLE_WEIGHT` (u64), or `PERF_SAMPLE_WEIGHT_STRUCT`'s
    /// `union perf_sample_weight` as its u64.
    pub weight: Option<u64>,
    /// `PERF_SAMPLE_DATA_SRC`: `union perf_mem_data_src`.
    pub data_src: Option<u64>,
    /// `PERF_SAMPLE_TRANSACTION`: the transaction abort flags.
    pub transaction: Option<u64>,
    /// `PERF_SAMPLE_REGS_INTR`: the interrupted registers.
    pub regs_intr: Option<Regs<'a>>,
    /// `PERF_SAMPLE_PHYS_ADDR`: the physical data address.
    pub phys_addr: Option<u64>,
    /// `PERF_SAMPLE_CGROUP`: the cgroup id.
    pub cgroup: Option<u64>,
    /// `PERF_SAMPLE_DATA_PAGE_SIZE`: the page size at `addr`.
    pub data_page_size: Option<u64>,
    /// `PERF_SAMPLE_CODE_PAGE_SIZE`: the page size at `ip`.
    pub code_page_size: Option<u64>,
    /// `PERF_SAMPLE_AUX`: the AUX snapshot (its padding included).
    pub aux: Option<RawData<'a>>,
}

#[inline]
fn opt_u64(
    r: &mut RawReader<'_>,
    st: u64,
    bit: u64,
    what: &'static str,
) -> Result<Option<u64>, ParseError> {
    if st & bit != 0 {
        r.u64(what).map(Some)
    } else {
        Ok(None)
    }
}

fn parse_regs<'a>(
    r: &mut RawReader<'a>,
    count: u32,
    what: &'static str,
) -> Result<Regs<'a>, ParseError> {
    let abi = r.u64(what)?;
    let n = if abi == 0 { 0 } else { u64::from(count) };
    Ok(Regs {
        abi,
        regs: Array::parse(r, n, (), what)?,
    })
}

fn regs_len(regs: Option<&Regs<'_>>, count: u32) -> usize {
    match regs {
        Some(r) if r.abi != 0 => 8 + count as usize * 8,
        _ => 8,
    }
}

fn write_regs<S: ByteSink + ?Sized>(
    regs: Option<&Regs<'_>>,
    count: u32,
    e: Endianness,
    sink: &mut S,
) {
    let Some(r) = regs else {
        sink.put(&e.u64_bytes(0));
        return;
    };
    sink.put(&e.u64_bytes(r.abi));
    if r.abi == 0 {
        return;
    }
    let count = count as usize;
    if r.regs.len() == count {
        r.regs.write((), e, sink);
    } else {
        // The mask decides how many registers follow: extra ones are
        // dropped, missing ones are zero.
        let mut n = 0;
        for v in r.regs.iter().take(count) {
            sink.put(&e.u64_bytes(v));
            n += 1;
        }
        sink.put_zeros((count - n) * 8);
    }
}

/// `RAW`'s size field for `n` data bytes: padded so `size + 4` is a multiple of 8.
#[inline]
fn raw_size(n: usize) -> usize {
    (n + 4).next_multiple_of(8) - 4
}

impl<'a> SampleRecord<'a> {
    /// Decodes a SAMPLE body (the bytes after the header).
    #[inline(always)]
    pub fn parse(
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        endian: Endianness,
    ) -> Result<Self, ParseError> {
        // Fast path: a sample of head fields only, in one slice. It is read
        // with one bounds check, and built as the return value itself (a
        // SampleRecord is large: building it aside and moving it would cost
        // more than decoding it).
        if let Some(head) = Self::fast_head(info.sample_type, body) {
            return Ok(Self::parse_head_in(misc, info.sample_type, head, endian));
        }
        Self::parse_general(misc, body, info, endian)
    }

    /// The head bytes, if the sample is head fields only and not split.
    #[inline(always)]
    pub(crate) fn fast_head(st: u64, body: RawData<'a>) -> Option<&'a [u8]> {
        if st & !HEAD_BITS != 0 {
            return None;
        }
        let head_len = (st & HEAD_BITS).count_ones() as usize * 8;
        body.as_single()?.get(..head_len)
    }

    /// [`Self::parse_head`] in byte order `endian`.
    #[inline(always)]
    pub(crate) fn parse_head_in(misc: u16, st: u64, head: &[u8], endian: Endianness) -> Self {
        match endian {
            Endianness::Little => Self::parse_head::<false>(misc, st, head),
            Endianness::Big => Self::parse_head::<true>(misc, st, head),
        }
    }

    /// Any sample: the head field by field, then the variable tail.
    #[inline(never)]
    pub(crate) fn parse_general(
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        endian: Endianness,
    ) -> Result<Self, ParseError> {
        let r = &mut RawReader::new(body, endian);
        let st = info.sample_type;
        let mut s = Self::parse_head_checked(misc, st, r)?;
        if st & !HEAD_BITS != 0 {
            s.parse_tail(r, info)?;
        }
        Ok(s)
    }

    /// The fixed head (IDENTIFIER..PERIOD) from a slice known to hold it.
    #[inline(always)]
    fn parse_head<const BIG: bool>(misc: u16, st: u64, head: &[u8]) -> Self {
        let mut words = head.chunks_exact(8).map(|c| {
            let a: [u8; 8] = c.try_into().unwrap_or_default();
            if BIG {
                u64::from_be_bytes(a)
            } else {
                u64::from_le_bytes(a)
            }
        });
        let mut next = |bit: u64| if st & bit != 0 { words.next() } else { None };
        // Two u32 in one u64 slot: the first is at the lower address.
        let split = |w: u64| {
            let b = if BIG {
                w.to_be_bytes()
            } else {
                w.to_le_bytes()
            };
            let (lo, hi) = ([b[0], b[1], b[2], b[3]], [b[4], b[5], b[6], b[7]]);
            if BIG {
                (u32::from_be_bytes(lo), u32::from_be_bytes(hi))
            } else {
                (u32::from_le_bytes(lo), u32::from_le_bytes(hi))
            }
        };
        let identifier = next(PERF_SAMPLE_IDENTIFIER);
        let ip = next(PERF_SAMPLE_IP);
        let tid = next(PERF_SAMPLE_TID).map(|w| {
            let (pid, tid) = split(w);
            PidTid { pid, tid }
        });
        let time = next(PERF_SAMPLE_TIME);
        let addr = next(PERF_SAMPLE_ADDR);
        let id = next(PERF_SAMPLE_ID);
        let stream_id = next(PERF_SAMPLE_STREAM_ID);
        let cpu = next(PERF_SAMPLE_CPU).map(|w| {
            let (cpu, res) = split(w);
            CpuRes { cpu, res }
        });
        let period = next(PERF_SAMPLE_PERIOD);
        SampleRecord {
            misc,
            identifier,
            ip,
            tid,
            time,
            addr,
            id,
            stream_id,
            cpu,
            period,
            ..Default::default()
        }
    }

    /// The fixed head read field by field, from a split or short body too
    /// (an error then names the field that is missing).
    #[inline(always)]
    fn parse_head_checked(misc: u16, st: u64, r: &mut RawReader<'a>) -> Result<Self, ParseError> {
        Ok(SampleRecord {
            misc,
            identifier: opt_u64(r, st, PERF_SAMPLE_IDENTIFIER, "identifier")?,
            ip: opt_u64(r, st, PERF_SAMPLE_IP, "ip")?,
            tid: if st & PERF_SAMPLE_TID != 0 {
                Some(PidTid::read(r)?)
            } else {
                None
            },
            time: opt_u64(r, st, PERF_SAMPLE_TIME, "time")?,
            addr: opt_u64(r, st, PERF_SAMPLE_ADDR, "addr")?,
            id: opt_u64(r, st, PERF_SAMPLE_ID, "id")?,
            stream_id: opt_u64(r, st, PERF_SAMPLE_STREAM_ID, "stream_id")?,
            cpu: if st & PERF_SAMPLE_CPU != 0 {
                Some(CpuRes::read(r)?)
            } else {
                None
            },
            period: opt_u64(r, st, PERF_SAMPLE_PERIOD, "period")?,
            ..Default::default()
        })
    }

    #[inline(always)]
    fn parse_tail(
        &mut self,
        r: &mut RawReader<'a>,
        info: &RecordParseInfo,
    ) -> Result<(), ParseError> {
        let st = info.sample_type;
        if st & PERF_SAMPLE_READ != 0 {
            self.read = Some(ReadFormat::parse(r, info.read_format)?);
        }
        if st & PERF_SAMPLE_CALLCHAIN != 0 {
            self.callchain = Some(parse_callchain(r)?);
        }
        if st & PERF_SAMPLE_RAW != 0 {
            self.raw = Some(parse_raw(r)?);
        }
        if st & PERF_SAMPLE_BRANCH_STACK != 0 {
            let nr = r.u64("branch nr")?;
            let hw_idx = if info.branch_sample_type & PERF_SAMPLE_BRANCH_HW_INDEX != 0 {
                Some(r.u64("branch hw_idx")?)
            } else {
                None
            };
            let entries = Array::parse(r, nr, (), "branch entries")?;
            let counters = if info.branch_sample_type & PERF_SAMPLE_BRANCH_COUNTERS != 0 {
                Some(Array::parse(r, nr, (), "branch counters")?)
            } else {
                None
            };
            self.branch_stack = Some(BranchStack {
                hw_idx,
                entries,
                counters,
            });
        }
        if st & PERF_SAMPLE_REGS_USER != 0 {
            self.regs_user = Some(parse_regs(r, info.regs_user_count, "regs_user")?);
        }
        if st & PERF_SAMPLE_STACK_USER != 0 {
            let size = r.u64("stack_user size")?;
            let data = r.items(size, 1, "stack_user data")?;
            let dyn_size = if size != 0 {
                r.u64("stack_user dyn_size")?
            } else {
                0
            };
            self.stack_user = Some(StackUser { data, dyn_size });
        }
        if st & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT) != 0 {
            self.weight = Some(r.u64("weight")?);
        }
        self.data_src = opt_u64(r, st, PERF_SAMPLE_DATA_SRC, "data_src")?;
        self.transaction = opt_u64(r, st, PERF_SAMPLE_TRANSACTION, "transaction")?;
        if st & PERF_SAMPLE_REGS_INTR != 0 {
            self.regs_intr = Some(parse_regs(r, info.regs_intr_count, "regs_intr")?);
        }
        self.phys_addr = opt_u64(r, st, PERF_SAMPLE_PHYS_ADDR, "phys_addr")?;
        self.cgroup = opt_u64(r, st, PERF_SAMPLE_CGROUP, "cgroup")?;
        self.data_page_size = opt_u64(r, st, PERF_SAMPLE_DATA_PAGE_SIZE, "data_page_size")?;
        self.code_page_size = opt_u64(r, st, PERF_SAMPLE_CODE_PAGE_SIZE, "code_page_size")?;
        if st & PERF_SAMPLE_AUX != 0 {
            let size = r.u64("aux size")?;
            self.aux = Some(r.items(size, 1, "aux data")?);
        }
        Ok(())
    }
}

/// The fixed head of a sample: IDENTIFIER through PERIOD, one u64 slot each.
pub(crate) const HEAD_BITS: u64 = PERF_SAMPLE_IDENTIFIER
    | PERF_SAMPLE_IP
    | PERF_SAMPLE_TID
    | PERF_SAMPLE_TIME
    | PERF_SAMPLE_ADDR
    | PERF_SAMPLE_ID
    | PERF_SAMPLE_STREAM_ID
    | PERF_SAMPLE_CPU
    | PERF_SAMPLE_PERIOD;

/// sample_type bits that are one u64 (or two u32) each.
const FIXED_WORDS: u64 = PERF_SAMPLE_IDENTIFIER
    | PERF_SAMPLE_IP
    | PERF_SAMPLE_TID
    | PERF_SAMPLE_TIME
    | PERF_SAMPLE_ADDR
    | PERF_SAMPLE_ID
    | PERF_SAMPLE_STREAM_ID
    | PERF_SAMPLE_CPU
    | PERF_SAMPLE_PERIOD
    | PERF_SAMPLE_DATA_SRC
    | PERF_SAMPLE_TRANSACTION
    | PERF_SAMPLE_PHYS_ADDR
    | PERF_SAMPLE_CGROUP
    | PERF_SAMPLE_DATA_PAGE_SIZE
    | PERF_SAMPLE_CODE_PAGE_SIZE;

impl EncodeRecord for SampleRecord<'_> {
    fn record_type(&self) -> u32 {
        PERF_RECORD_SAMPLE
    }

    fn misc(&self) -> u16 {
        self.misc
    }

    fn body_len(&self, info: &RecordParseInfo) -> usize {
        let st = info.sample_type;
        let mut n = (st & FIXED_WORDS).count_ones() as usize * 8;
        if st & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT) != 0 {
            n += 8;
        }
        if st & PERF_SAMPLE_READ != 0 {
            n += self.read.unwrap_or_default().encoded_len(info.read_format);
        }
        if st & PERF_SAMPLE_CALLCHAIN != 0 {
            n += 8 + self.callchain.map_or(0, |c| c.encoded_len(()));
        }
        if st & PERF_SAMPLE_RAW != 0 {
            n += 4 + raw_size(self.raw.map_or(0, |d| d.len()));
        }
        if st & PERF_SAMPLE_BRANCH_STACK != 0 {
            let b = self.branch_stack.unwrap_or_default();
            let nr = b.entries.len();
            n += 8 + nr * 24;
            if info.branch_sample_type & PERF_SAMPLE_BRANCH_HW_INDEX != 0 {
                n += 8;
            }
            if info.branch_sample_type & PERF_SAMPLE_BRANCH_COUNTERS != 0 {
                n += nr * 8;
            }
        }
        if st & PERF_SAMPLE_REGS_USER != 0 {
            n += regs_len(self.regs_user.as_ref(), info.regs_user_count);
        }
        if st & PERF_SAMPLE_STACK_USER != 0 {
            let size = self
                .stack_user
                .map_or(0, |s| s.data.len())
                .next_multiple_of(8);
            n += 8 + size + if size != 0 { 8 } else { 0 };
        }
        if st & PERF_SAMPLE_REGS_INTR != 0 {
            n += regs_len(self.regs_intr.as_ref(), info.regs_intr_count);
        }
        if st & PERF_SAMPLE_AUX != 0 {
            n += 8 + self.aux.map_or(0, |d| d.len()).next_multiple_of(8);
        }
        n
    }

    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        let st = info.sample_type;
        let word = |bit: u64, v: Option<u64>, sink: &mut S| {
            if st & bit != 0 {
                sink.put(&e.u64_bytes(v.unwrap_or(0)));
            }
        };
        word(PERF_SAMPLE_IDENTIFIER, self.identifier, sink);
        word(PERF_SAMPLE_IP, self.ip, sink);
        if st & PERF_SAMPLE_TID != 0 {
            self.tid.unwrap_or_default().write(e, sink);
        }
        word(PERF_SAMPLE_TIME, self.time, sink);
        word(PERF_SAMPLE_ADDR, self.addr, sink);
        word(PERF_SAMPLE_ID, self.id, sink);
        word(PERF_SAMPLE_STREAM_ID, self.stream_id, sink);
        if st & PERF_SAMPLE_CPU != 0 {
            self.cpu.unwrap_or_default().write(e, sink);
        }
        word(PERF_SAMPLE_PERIOD, self.period, sink);
        if st & PERF_SAMPLE_READ != 0 {
            self.read
                .unwrap_or_default()
                .write(info.read_format, e, sink);
        }
        if st & PERF_SAMPLE_CALLCHAIN != 0 {
            let c = self.callchain.unwrap_or_default();
            sink.put(&e.u64_bytes(c.len() as u64));
            c.write((), e, sink);
        }
        if st & PERF_SAMPLE_RAW != 0 {
            let d = self.raw.unwrap_or_default();
            let size = raw_size(d.len());
            sink.put(&e.u32_bytes(size as u32));
            d.write_to(sink);
            sink.put_zeros(size - d.len());
        }
        if st & PERF_SAMPLE_BRANCH_STACK != 0 {
            let b = self.branch_stack.unwrap_or_default();
            let nr = b.entries.len();
            sink.put(&e.u64_bytes(nr as u64));
            if info.branch_sample_type & PERF_SAMPLE_BRANCH_HW_INDEX != 0 {
                sink.put(&e.u64_bytes(b.hw_idx.unwrap_or(0)));
            }
            b.entries.write((), e, sink);
            if info.branch_sample_type & PERF_SAMPLE_BRANCH_COUNTERS != 0 {
                let c = b.counters.unwrap_or_default();
                let mut k = 0;
                for v in c.iter().take(nr) {
                    sink.put(&e.u64_bytes(v));
                    k += 1;
                }
                sink.put_zeros((nr - k) * 8);
            }
        }
        if st & PERF_SAMPLE_REGS_USER != 0 {
            write_regs(self.regs_user.as_ref(), info.regs_user_count, e, sink);
        }
        if st & PERF_SAMPLE_STACK_USER != 0 {
            let s = self.stack_user.unwrap_or_default();
            let size = s.data.len().next_multiple_of(8);
            sink.put(&e.u64_bytes(size as u64));
            if size != 0 {
                s.data.write_to(sink);
                sink.put_zeros(size - s.data.len());
                sink.put(&e.u64_bytes(s.dyn_size));
            }
        }
        if st & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT) != 0 {
            sink.put(&e.u64_bytes(self.weight.unwrap_or(0)));
        }
        word(PERF_SAMPLE_DATA_SRC, self.data_src, sink);
        word(PERF_SAMPLE_TRANSACTION, self.transaction, sink);
        if st & PERF_SAMPLE_REGS_INTR != 0 {
            write_regs(self.regs_intr.as_ref(), info.regs_intr_count, e, sink);
        }
        word(PERF_SAMPLE_PHYS_ADDR, self.phys_addr, sink);
        word(PERF_SAMPLE_CGROUP, self.cgroup, sink);
        word(PERF_SAMPLE_DATA_PAGE_SIZE, self.data_page_size, sink);
        word(PERF_SAMPLE_CODE_PAGE_SIZE, self.code_page_size, sink);
        if st & PERF_SAMPLE_AUX != 0 {
            let d = self.aux.unwrap_or_default();
            let size = d.len().next_multiple_of(8);
            sink.put(&e.u64_bytes(size as u64));
            d.write_to(sink);
            sink.put_zeros(size - d.len());
        }
    }
}

/// PERF_SAMPLE_CALLCHAIN: `u64 nr; u64 ips[nr]`.
pub(crate) fn parse_callchain<'a>(r: &mut RawReader<'a>) -> Result<Array<'a, u64>, ParseError> {
    let nr = r.u64("callchain nr")?;
    Array::parse(r, nr, (), "callchain ips")
}

/// PERF_SAMPLE_RAW: `u32 size; char data[size]`.
pub(crate) fn parse_raw<'a>(r: &mut RawReader<'a>) -> Result<RawData<'a>, ParseError> {
    let size = r.u32("raw size")?;
    r.bytes(size as usize, "raw data")
}

#[cfg(test)]
mod tests;
