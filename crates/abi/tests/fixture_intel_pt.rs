//! Real kernel records: the Intel PT recording in the repository's testdata/
//! (perf 4.14, Skylake; see testdata/PROVENANCE.md). Every kernel record of the
//! file is parsed with the attr it belongs to and written back, and must come
//! out byte for byte as the kernel (or perf's synthesizer) wrote it. A few
//! values are checked against perf 6.1's own `perf report -D` of the file.
//!
//! The perf.data walk here is the minimum needed to reach the records (the
//! perf.data reader proper is perfaux-perfdata's).

use std::collections::{BTreeMap, HashMap};

use perfaux_abi::attr::PerfEventAttr;
use perfaux_abi::consts::*;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::{EncodeRecord, Record};
use perfaux_abi::{Endianness, PerfEventHeader};

/// The fixture, in the repository's testdata/.
fn fixture_file() -> std::path::PathBuf {
    perfaux_testutil::fixture("intel_pt/perf.data.intel_pt-4.14")
}
const LE: Endianness = Endianness::Little;

/// Whether byte `i` of a record (its bytes before the sample_id trailer) is
/// padding after the NUL of the record's string (COMM's comm, MMAP's and
/// MMAP2's filename): inside the string field and after the first NUL in
/// it. A wrong byte in a number, in the string itself or in the trailer is
/// never excused.
fn in_string_padding(ty: u32, rec: &[u8], i: usize) -> bool {
    let start = match ty {
        PERF_RECORD_COMM => 16,
        PERF_RECORD_MMAP => 40,
        PERF_RECORD_MMAP2 => 72,
        _ => return false,
    };
    i < rec.len() && i >= start && rec[start..i].contains(&0) && rec[i] == 0
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

struct Attrs {
    infos: Vec<RecordParseInfo>,
    by_id: HashMap<u64, usize>,
}

/// perf.data file header: magic, size, attr_size, attrs {off,size}, data {off,size}.
fn attrs(file: &[u8]) -> (Attrs, usize, usize) {
    assert_eq!(&file[..8], b"PERFILE2");
    let attr_size = u64_at(file, 16) as usize;
    let (attrs_off, attrs_size) = (u64_at(file, 24) as usize, u64_at(file, 32) as usize);
    let (data_off, data_size) = (u64_at(file, 40) as usize, u64_at(file, 48) as usize);
    let mut infos = Vec::new();
    let mut by_id = HashMap::new();
    for (i, entry) in file[attrs_off..attrs_off + attrs_size]
        .chunks_exact(attr_size)
        .enumerate()
    {
        let (attr, n) = PerfEventAttr::parse(entry, LE).expect("attr parses");
        assert_eq!(n, attr_size - 16, "attr {i} states the file's attr size");
        // The attr re-encodes to the same bytes.
        assert_eq!(attr.to_bytes(n as u32, LE), entry[..n], "attr {i}");
        infos.push(RecordParseInfo::new(&attr));
        let (ids_off, ids_size) = (u64_at(entry, n) as usize, u64_at(entry, n + 8) as usize);
        for id in file[ids_off..ids_off + ids_size].chunks_exact(8) {
            by_id.insert(u64::from_le_bytes(id.try_into().unwrap()), i);
        }
    }
    (Attrs { infos, by_id }, data_off, data_size)
}

#[test]
fn every_kernel_record_parses_and_re_encodes_byte_for_byte() {
    let file = std::fs::read(fixture_file()).expect("testdata/ fixture readable");
    let (attrs, data_off, data_size) = attrs(&file);
    assert_eq!(attrs.infos.len(), 4);
    let data = &file[data_off..data_off + data_size];
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    let mut checked = Vec::new();
    let mut synthesized = 0;
    let mut off = 0;
    while off < data.len() {
        let h = PerfEventHeader::parse(data[off..off + 8].try_into().unwrap(), LE);
        let size = usize::from(h.size);
        let bytes = &data[off..off + size];
        let body = RawData::Single(&bytes[8..]);
        *counts.entry(h.type_).or_default() += 1;
        if h.type_ < PERF_RECORD_USER_TYPE_START {
            // Find the attr by id, as perf does (id position from attr 0).
            let id = attrs.infos[0]
                .record_id(h.type_, body, LE)
                .expect("records carry ids");
            // perf's evlist__event2evsel(): id 0 (records perf synthesized
            // from /proc) belongs to the first attr.
            let found = if id == 0 {
                Some(&0)
            } else {
                attrs.by_id.get(&id)
            };
            let Some(&idx) = found else {
                panic!(
                    "type {} at data+{off:#x}: id {id} in no attr; ids {:?}",
                    h.type_, attrs.by_id
                )
            };
            let info = &attrs.infos[idx];
            let rec = Record::parse(h.type_, h.misc, body, info, LE)
                .unwrap_or_else(|e| panic!("record at data+{off:#x}: {e}"));
            assert!(
                !matches!(rec, Record::Unknown { .. }),
                "type {} is a kernel type",
                h.type_
            );
            let ours = rec.to_vec(info, LE).unwrap();
            if id == 0 {
                // perf's /proc synthesizer reuses its buffer, so the string
                // padding after the NUL holds leftovers of longer names; we
                // write zeros there. Everything else is identical.
                assert_eq!(ours.len(), bytes.len(), "length of {rec:?}");
                let trailer = ours.len() - info.sample_id_len(h.type_);
                for (i, (a, b)) in ours.iter().zip(bytes).enumerate() {
                    assert!(
                        a == b || in_string_padding(h.type_, &ours[..trailer], i),
                        "byte {i} of {rec:?} at data+{off:#x}: ours {a:#x}, perf's {b:#x}"
                    );
                }
                synthesized += 1;
            } else {
                assert_eq!(ours, bytes, "re-encoding {rec:?} at data+{off:#x}");
            }
            // Splitting the record anywhere changes nothing.
            for k in [1, 7, 8, 9, size / 2, size - 1] {
                let split = RawData::new(&bytes[..k], &bytes[k..]);
                assert_eq!(Record::parse_record(split, info, LE).unwrap(), (rec, size));
            }
            checked.push(data_off + off);
        }
        off += size;
        if h.type_ == PERF_RECORD_AUXTRACE {
            // The payload follows the record, outside header.size.
            off += u64_at(bytes, 8) as usize;
        }
    }
    // The record census of the fixtures README.
    let want = [
        (PERF_RECORD_MMAP, 56),
        (PERF_RECORD_COMM, 3),
        (PERF_RECORD_EXIT, 1),
        (PERF_RECORD_SAMPLE, 15),
        (PERF_RECORD_MMAP2, 10),
        (PERF_RECORD_AUX, 10),
        (PERF_RECORD_ITRACE_START, 2),
        (PERF_RECORD_SWITCH_CPU_WIDE, 152),
    ];
    for (ty, n) in want {
        assert_eq!(counts.get(&ty), Some(&n), "records of type {ty}");
    }
    assert_eq!(checked.len(), want.iter().map(|w| w.1).sum::<usize>());
    // Most records come from the kernel and were compared byte for byte.
    assert!(
        synthesized < checked.len() / 2,
        "{synthesized} of {}",
        checked.len()
    );
}

#[test]
fn values_match_perf_report_dump() {
    let file = std::fs::read(fixture_file()).expect("testdata/ fixture readable");
    let (attrs, _, _) = attrs(&file);
    let at = |file_off: usize| {
        let h = PerfEventHeader::parse(file[file_off..file_off + 8].try_into().unwrap(), LE);
        let body = RawData::Single(&file[file_off + 8..file_off + usize::from(h.size)]);
        let id = attrs.infos[0].record_id(h.type_, body, LE).unwrap();
        let info = &attrs.infos[attrs.by_id[&id]];
        (
            Record::parse(h.type_, h.misc, body, info, LE).unwrap(),
            info.record_time(h.type_, body, LE),
        )
    };
    // perf report -D: "3 641256973321 0x6768 [0x40]: PERF_RECORD_AUX offset: 0 size: 0x3370 flags: 0 []"
    let (rec, time) = at(0x6768);
    let Record::Aux(aux) = rec else {
        panic!("{rec:?}")
    };
    assert_eq!((aux.aux_offset, aux.aux_size, aux.flags), (0, 0x3370, 0));
    assert_eq!(
        (time, aux.sample_id.cpu.map(|c| c.cpu)),
        (Some(641_256_973_321), Some(3))
    );
    // "3 641257003418 0x6898 [0x40]: PERF_RECORD_AUX offset: 0x3370 size: 0x3c0 flags: 0 []"
    let (rec, time) = at(0x6898);
    let Record::Aux(aux) = rec else {
        panic!("{rec:?}")
    };
    assert_eq!(
        (aux.aux_offset, aux.aux_size, time),
        (0x3370, 0x3c0, Some(641_257_003_418))
    );
    // "3 641256974461 0x67a8 [0x30]: PERF_RECORD_SWITCH_CPU_WIDE IN prev pid/tid: 3174/3174"
    let (rec, time) = at(0x67a8);
    let Record::SwitchCpuWide(sw) = rec else {
        panic!("{rec:?}")
    };
    assert_eq!(
        (
            sw.next_prev_pid,
            sw.next_prev_tid,
            sw.misc & PERF_RECORD_MISC_SWITCH_OUT
        ),
        (3174, 3174, 0)
    );
    assert_eq!(time, Some(641_256_974_461));
}
