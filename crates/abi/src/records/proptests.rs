//! parse(write(x)) == x for every record type, both byte orders, the bytes
//! split at every position (as a ring's wrap would split them).
//!
//! Records are generated canonical for their attr: a sample field is `Some`
//! iff its sample_type bit is set, variable parts have the kernel's padded
//! sizes, strings hold no NUL. Those are exactly the records a producer
//! following the ABI writes.

use proptest::prelude::*;

use super::testutil::round_trip;
use super::*;
use crate::array::Array;
use crate::read_format::{ReadFormat, ReadValue, ReadValues};
use crate::sample::{BranchEntry, BranchStack, Regs, StackUser};
use crate::sample_id::{CpuRes, PidTid};

/// Everything a record is built from; records borrow from it.
#[derive(Debug, Clone)]
struct Spec {
    kind: u8,
    misc: u16,
    w: [u64; 12],
    blob: Vec<u8>,
    lens: [usize; 4],
    words: Vec<u64>,
    sample_type: u64,
    read_format: u64,
    sample_id_all: bool,
    branch_bits: u64,
    regs_user_count: u32,
    regs_intr_count: u32,
    abi: [u64; 2],
}

const KINDS: u8 = 24;

fn spec() -> impl Strategy<Value = Spec> {
    (
        (
            0..KINDS,
            any::<u16>(),
            any::<[u64; 12]>(),
            proptest::collection::vec(1u8..=255, 64),
        ),
        (
            any::<[usize; 4]>(),
            proptest::collection::vec(any::<u64>(), 0..6),
        ),
        (
            0..PERF_SAMPLE_MAX,
            0..PERF_FORMAT_MAX,
            any::<bool>(),
            0u64..4,
            0u32..4,
            0u32..4,
            [0u64..3, 0u64..3],
        ),
    )
        .prop_map(
            |((kind, misc, w, blob), (lens, words), (st, rf, all, bb, ru, ri, abi))| Spec {
                kind,
                misc,
                w,
                blob,
                lens: lens.map(|l| l % 4),
                words,
                sample_type: st,
                read_format: rf,
                sample_id_all: all,
                branch_bits: (if bb & 1 != 0 {
                    PERF_SAMPLE_BRANCH_HW_INDEX
                } else {
                    0
                }) | (if bb & 2 != 0 {
                    PERF_SAMPLE_BRANCH_COUNTERS
                } else {
                    0
                }),
                regs_user_count: ru,
                regs_intr_count: ri,
                abi,
            },
        )
}

impl Spec {
    fn info(&self) -> RecordParseInfo {
        RecordParseInfo {
            sample_type: self.sample_type,
            read_format: self.read_format,
            sample_id_all: self.sample_id_all,
            branch_sample_type: self.branch_bits,
            regs_user_count: self.regs_user_count,
            regs_intr_count: self.regs_intr_count,
        }
    }

    fn on(&self, bit: u64) -> bool {
        self.sample_type & bit != 0
    }

    fn opt(&self, bit: u64, v: u64) -> Option<u64> {
        self.on(bit).then_some(v)
    }

    fn sample_id(&self) -> SampleId {
        if !self.sample_id_all {
            return SampleId::default();
        }
        let w = &self.w;
        SampleId {
            tid: self.on(PERF_SAMPLE_TID).then_some(PidTid {
                pid: w[0] as u32,
                tid: (w[0] >> 32) as u32,
            }),
            time: self.opt(PERF_SAMPLE_TIME, w[1]),
            id: self.opt(PERF_SAMPLE_ID, w[2]),
            stream_id: self.opt(PERF_SAMPLE_STREAM_ID, w[3]),
            cpu: self.on(PERF_SAMPLE_CPU).then_some(CpuRes {
                cpu: w[4] as u32,
                res: (w[4] >> 32) as u32,
            }),
            identifier: self.opt(PERF_SAMPLE_IDENTIFIER, w[5]),
        }
    }

    fn bytes(&self, n: usize) -> RawData<'_> {
        RawData::Single(&self.blob[..n.min(self.blob.len())])
    }

    fn read_format<'a>(&self, group: &'a [ReadValue]) -> ReadFormat<'a> {
        let rf = self.read_format;
        let w = &self.w;
        ReadFormat {
            time_enabled: (rf & PERF_FORMAT_TOTAL_TIME_ENABLED != 0).then_some(w[6]),
            time_running: (rf & PERF_FORMAT_TOTAL_TIME_RUNNING != 0).then_some(w[7]),
            values: if rf & PERF_FORMAT_GROUP != 0 {
                ReadValues::Group(Array::Items(group))
            } else {
                ReadValues::Single(group.first().copied().unwrap_or(ReadValue {
                    value: w[8],
                    id: (rf & PERF_FORMAT_ID != 0).then_some(w[9]),
                    lost: (rf & PERF_FORMAT_LOST != 0).then_some(w[10]),
                }))
            },
        }
    }

    fn group(&self) -> Vec<ReadValue> {
        let rf = self.read_format;
        self.words
            .iter()
            .map(|&v| ReadValue {
                value: v,
                id: (rf & PERF_FORMAT_ID != 0).then_some(v ^ 1),
                lost: (rf & PERF_FORMAT_LOST != 0).then_some(v ^ 2),
            })
            .collect()
    }
}

fn check(spec: &Spec) {
    let info = spec.info();
    let sid = spec.sample_id();
    let (w, misc) = (&spec.w, spec.misc);
    let name = spec.bytes(spec.lens[0] * 7 + spec.lens[1]);
    let group = spec.group();
    let branches: Vec<BranchEntry> = spec
        .words
        .iter()
        .map(|&v| BranchEntry {
            from: v,
            to: v ^ 3,
            flags: v >> 3,
        })
        .collect();
    let counters: Vec<u64> = spec.words.iter().map(|v| v.rotate_left(7)).collect();
    let links: Vec<NsLinkInfo> = spec
        .words
        .iter()
        .map(|&v| NsLinkInfo { dev: v, ino: !v })
        .collect();
    let regs_user: Vec<u64> = (0..spec.regs_user_count).map(|i| w[i as usize]).collect();
    let regs_intr: Vec<u64> = (0..spec.regs_intr_count)
        .map(|i| w[i as usize + 4])
        .collect();
    let rec = match spec.kind {
        0 => Record::Mmap(MmapRecord {
            misc,
            pid: w[0] as u32,
            tid: w[1] as u32,
            addr: w[2],
            len: w[3],
            pgoff: w[4],
            filename: name,
            sample_id: sid,
        }),
        1 => Record::Lost(LostRecord {
            misc,
            id: w[0],
            lost: w[1],
            sample_id: sid,
        }),
        2 => Record::Comm(CommRecord {
            misc,
            pid: w[0] as u32,
            tid: w[1] as u32,
            comm: name,
            sample_id: sid,
        }),
        3 | 4 => Record::Task(TaskRecord {
            kind: if spec.kind == 3 {
                TaskKind::Exit
            } else {
                TaskKind::Fork
            },
            misc,
            pid: w[0] as u32,
            ppid: w[1] as u32,
            tid: w[2] as u32,
            ptid: w[3] as u32,
            time: w[4],
            sample_id: sid,
        }),
        5 | 6 => Record::Throttle(ThrottleRecord {
            kind: if spec.kind == 5 {
                ThrottleKind::Throttle
            } else {
                ThrottleKind::Unthrottle
            },
            misc,
            time: w[0],
            id: w[1],
            stream_id: w[2],
            sample_id: sid,
        }),
        7 => Record::Read(ReadRecord {
            misc,
            pid: w[0] as u32,
            tid: w[1] as u32,
            values: spec.read_format(&group),
            sample_id: sid,
        }),
        8 => {
            let build_id = w[0] & 1 != 0;
            let file_id = if build_id {
                let mut id = [0u8; 20];
                id.copy_from_slice(&spec.blob[..20]);
                Mmap2FileId::BuildId {
                    build_id_size: w[1] as u8,
                    build_id: id,
                }
            } else {
                Mmap2FileId::Inode {
                    maj: w[1] as u32,
                    min: (w[1] >> 32) as u32,
                    ino: w[2],
                    ino_generation: w[3],
                }
            };
            let misc = if build_id {
                misc | PERF_RECORD_MISC_MMAP_BUILD_ID
            } else {
                misc & !PERF_RECORD_MISC_MMAP_BUILD_ID
            };
            Record::Mmap2(Mmap2Record {
                misc,
                pid: w[4] as u32,
                tid: w[5] as u32,
                addr: w[6],
                len: w[7],
                pgoff: w[8],
                file_id,
                prot: w[9] as u32,
                flags: w[10] as u32,
                filename: name,
                sample_id: sid,
            })
        }
        9 => Record::Aux(AuxRecord {
            misc,
            aux_offset: w[0],
            aux_size: w[1],
            flags: w[2],
            sample_id: sid,
        }),
        10 => Record::ItraceStart(ItraceStartRecord {
            misc,
            pid: w[0] as u32,
            tid: w[1] as u32,
            sample_id: sid,
        }),
        11 => Record::LostSamples(LostSamplesRecord {
            misc,
            lost: w[0],
            sample_id: sid,
        }),
        12 => Record::Switch(SwitchRecord {
            misc,
            sample_id: sid,
        }),
        13 => Record::SwitchCpuWide(SwitchCpuWideRecord {
            misc,
            next_prev_pid: w[0] as u32,
            next_prev_tid: w[1] as u32,
            sample_id: sid,
        }),
        14 => Record::Namespaces(NamespacesRecord {
            misc,
            pid: w[0] as u32,
            tid: w[1] as u32,
            link_info: Array::Items(&links),
            sample_id: sid,
        }),
        15 => Record::Ksymbol(KsymbolRecord {
            misc,
            addr: w[0],
            len: w[1] as u32,
            ksym_type: w[2] as u16,
            flags: w[3] as u16,
            name,
            sample_id: sid,
        }),
        16 => {
            let mut tag = [0u8; 8];
            tag.copy_from_slice(&spec.blob[..8]);
            Record::BpfEvent(BpfEventRecord {
                misc,
                type_: w[0] as u16,
                flags: w[1] as u16,
                id: w[2] as u32,
                tag,
                sample_id: sid,
            })
        }
        17 => Record::Cgroup(CgroupRecord {
            misc,
            id: w[0],
            path: name,
            sample_id: sid,
        }),
        18 => Record::TextPoke(TextPokeRecord {
            misc,
            addr: w[0],
            old_bytes: spec.bytes(spec.lens[0] * 5),
            new_bytes: spec.bytes(spec.lens[1] * 3 + spec.lens[2]),
            sample_id: sid,
        }),
        19 => Record::AuxOutputHwId(AuxOutputHwIdRecord {
            misc,
            hw_id: w[0],
            sample_id: sid,
        }),
        20 => Record::CallchainDeferred(CallchainDeferredRecord {
            misc,
            cookie: w[0],
            ips: Array::Items(&spec.words),
            sample_id: sid,
        }),
        21 => Record::Uevent(UeventRecord {
            misc,
            type_: w[0] as u32,
            data: spec.bytes(spec.lens[0] * 9 + spec.lens[1]),
            sample_id: sid,
        }),
        22 => {
            // A type no parser claims: perf tool types and future kernel ones.
            let type_ = [PERF_RECORD_MAX, 63, PERF_RECORD_AUXTRACE_INFO, 1000][spec.lens[0]];
            Record::Unknown {
                type_,
                misc,
                data: spec.bytes(spec.lens[1] * 8),
            }
        }
        _ => {
            let s = spec;
            let nr_branches = branches.len();
            Record::Sample(SampleRecord {
                misc,
                identifier: s.opt(PERF_SAMPLE_IDENTIFIER, w[0]),
                ip: s.opt(PERF_SAMPLE_IP, w[1]),
                tid: s.on(PERF_SAMPLE_TID).then_some(PidTid {
                    pid: w[2] as u32,
                    tid: (w[2] >> 32) as u32,
                }),
                time: s.opt(PERF_SAMPLE_TIME, w[3]),
                addr: s.opt(PERF_SAMPLE_ADDR, w[4]),
                id: s.opt(PERF_SAMPLE_ID, w[5]),
                stream_id: s.opt(PERF_SAMPLE_STREAM_ID, w[6]),
                cpu: s.on(PERF_SAMPLE_CPU).then_some(CpuRes {
                    cpu: w[7] as u32,
                    res: (w[7] >> 32) as u32,
                }),
                period: s.opt(PERF_SAMPLE_PERIOD, w[8]),
                read: s.on(PERF_SAMPLE_READ).then(|| s.read_format(&group)),
                callchain: s
                    .on(PERF_SAMPLE_CALLCHAIN)
                    .then_some(Array::Items(&s.words)),
                // size + 4 a multiple of 8.
                raw: s.on(PERF_SAMPLE_RAW).then(|| s.bytes(4 + 8 * s.lens[0])),
                branch_stack: s.on(PERF_SAMPLE_BRANCH_STACK).then(|| BranchStack {
                    hw_idx: (s.branch_bits & PERF_SAMPLE_BRANCH_HW_INDEX != 0).then_some(w[9]),
                    entries: Array::Items(&branches),
                    counters: (s.branch_bits & PERF_SAMPLE_BRANCH_COUNTERS != 0)
                        .then_some(Array::Items(&counters[..nr_branches])),
                }),
                regs_user: s.on(PERF_SAMPLE_REGS_USER).then(|| Regs {
                    abi: s.abi[0],
                    regs: Array::Items(if s.abi[0] == 0 { &[] } else { &regs_user }),
                }),
                stack_user: s.on(PERF_SAMPLE_STACK_USER).then(|| {
                    let data = s.bytes(8 * s.lens[1]);
                    StackUser {
                        data,
                        dyn_size: if data.is_empty() { 0 } else { w[10] },
                    }
                }),
                weight: (s.sample_type & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT) != 0)
                    .then_some(w[11]),
                data_src: s.opt(PERF_SAMPLE_DATA_SRC, w[0] ^ 1),
                transaction: s.opt(PERF_SAMPLE_TRANSACTION, w[1] ^ 1),
                regs_intr: s.on(PERF_SAMPLE_REGS_INTR).then(|| Regs {
                    abi: s.abi[1],
                    regs: Array::Items(if s.abi[1] == 0 { &[] } else { &regs_intr }),
                }),
                phys_addr: s.opt(PERF_SAMPLE_PHYS_ADDR, w[2] ^ 1),
                cgroup: s.opt(PERF_SAMPLE_CGROUP, w[3] ^ 1),
                data_page_size: s.opt(PERF_SAMPLE_DATA_PAGE_SIZE, w[4] ^ 1),
                code_page_size: s.opt(PERF_SAMPLE_CODE_PAGE_SIZE, w[5] ^ 1),
                aux: s.on(PERF_SAMPLE_AUX).then(|| s.bytes(8 * s.lens[2])),
            })
        }
    };
    let bytes = round_trip(&rec, &info);
    // Kernel records are 8-byte aligned; the header states the length.
    if !matches!(rec, Record::Unknown { .. }) {
        assert_eq!(bytes.len() % 8, 0, "{rec:?}");
    }
    assert_eq!(
        usize::from(u16::from_le_bytes([bytes[6], bytes[7]])),
        bytes.len()
    );
    // The id perf would use to pick the attr is the one in the record.
    let body = RawData::Single(&bytes[8..]);
    let ty = rec.record_type();
    let want = match &rec {
        Record::Sample(s) => Some(s.identifier.or(s.id)),
        Record::Unknown { .. } => None,
        other => other.sample_id().map(|s| s.identifier.or(s.id)),
    };
    if let Some(want) = want {
        assert_eq!(
            info.record_id(ty, body, Endianness::Little),
            want,
            "{rec:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]
    #[test]
    fn every_record_round_trips(spec in spec()) {
        check(&spec);
    }
}

#[test]
fn every_kind_is_generated() {
    // The round trip above covers kinds 0..KINDS; make sure each one builds
    // a different record type, so none is skipped by the dispatch.
    let mut seen = std::collections::BTreeSet::new();
    let base = Spec {
        kind: 0,
        misc: 0,
        w: [1; 12],
        blob: vec![1; 64],
        lens: [1; 4],
        words: vec![1, 2],
        sample_type: PERF_SAMPLE_IP,
        read_format: 0,
        sample_id_all: true,
        branch_bits: 0,
        regs_user_count: 0,
        regs_intr_count: 0,
        abi: [0; 2],
    };
    for kind in 0..KINDS {
        let spec = Spec {
            kind,
            ..base.clone()
        };
        check(&spec);
        seen.insert(kind);
    }
    assert_eq!(seen.len(), usize::from(KINDS));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// Garbage never panics or reads out of bounds: it parses or gives an
    /// error, split or not (the kernel ring and perf.data are untrusted input).
    #[test]
    fn garbage_never_panics(
        ty in prop_oneof![1u32..=23, Just(ext::PERF_RECORD_UEVENT), 64u32..90],
        misc in any::<u16>(),
        body in proptest::collection::vec(any::<u8>(), 0..200),
        k in any::<usize>(),
        st in 0..PERF_SAMPLE_MAX,
        rf in 0..PERF_FORMAT_MAX,
        all in any::<bool>(),
        bb in any::<u64>(),
        regs in (0u32..64, 0u32..64),
    ) {
        let info = RecordParseInfo {
            sample_type: st,
            read_format: rf,
            sample_id_all: all,
            branch_sample_type: bb,
            regs_user_count: regs.0,
            regs_intr_count: regs.1,
        };
        let k = k % (body.len() + 1);
        for e in [Endianness::Little, Endianness::Big] {
            let data = RawData::new(&body[..k], &body[k..]);
            let whole = Record::parse(ty, misc, RawData::Single(&body), &info, e);
            let split = Record::parse(ty, misc, data, &info, e);
            prop_assert_eq!(whole, split);
            if let Ok(rec) = whole {
                // Whatever parsed can be measured and written.
                let mut out = Vec::new();
                if rec.write(&info, e, &mut out).is_ok() {
                    prop_assert_eq!(out.len(), rec.encoded_len(&info));
                }
            }
            let _ = Record::parse_record(data, &info, e);
            let _ = info.record_id(ty, data, e);
            let _ = info.record_time(ty, data, e);
        }
    }
}
