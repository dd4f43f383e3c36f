//! Reading real files written by other tools (shared/fixtures, see its
//! README): every record count must equal what `perf report -D` counted
//! (golden text parsed here, or perf run live), header fields must equal
//! `perf report --header-only`, and AUXTRACE payloads must be the bytes
//! perf cut out of the same files.

mod common;

use common::*;
use perfaux_abi::consts::*;
use perfaux_perfdata::header::Magic;
use perfaux_perfdata::{DataFormat, Feature, PerfDataReader, ReaderOptions};
use std::collections::BTreeMap;
use std::fs;

/// `# key : value` lines of `perf report --header-only`.
fn header_only(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for l in text.lines() {
        if let Some((k, v)) = l.strip_prefix("# ").and_then(|l| l.split_once(':')) {
            m.entry(k.trim().to_string())
                .or_default()
                .push(v.trim().to_string());
        }
    }
    m
}

fn assert_counts_match(name: &str, ours: &BTreeMap<u32, u64>, perf_text: &str) {
    let (mut perf, mut total) = parse_perf_stats(perf_text);
    // Records perf synthesized itself (its decoders add attrs for the
    // events they synthesize) are dumped at "0@(null)": not in the file.
    for l in perf_text.lines() {
        if let Some(rest) = l.strip_prefix("0@(null) [") {
            let t: u32 = rest
                .rsplit("event: ")
                .next()
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            *perf.get_mut(&t).unwrap() -= 1;
            total -= 1;
        }
    }
    perf.retain(|_, n| *n > 0);
    assert!(!perf.is_empty(), "{name}: perf's stats table is empty");
    assert_eq!(
        ours, &perf,
        "{name}: record counts by type (ours vs perf report -D)"
    );
    assert_eq!(ours.values().sum::<u64>(), total, "{name}: TOTAL");
}

#[test]
fn intel_pt_file_mode_matches_perf_and_quipper() {
    let path = fixture("intel_pt/perf.data.intel_pt-4.14");
    let r = read_all(&path);
    assert!(r.error.is_none(), "{:?}", r.error);
    let golden = fixture_text("intel_pt/quipper_intel_pt-4.14.records.perf-D.txt.xz");
    assert_counts_match("intel_pt-4.14", &r.counts, &golden);

    // Header fields against perf report --header-only.
    let h = header_only(
        &fs::read_to_string(fixture("intel_pt/quipper_intel_pt-4.14.header-only.txt")).unwrap(),
    );
    let DataFormat::File(fh) = r.meta.format else {
        panic!("file mode expected")
    };
    assert_eq!(fh.magic, Magic::V2);
    assert_eq!(fh.data.offset.to_string(), h["data offset"][0]);
    assert_eq!(fh.data.size.to_string(), h["data size"][0]);
    assert_eq!(
        (fh.data.offset + fh.data.size).to_string(),
        h["feat offset"][0]
    );
    let f = &r.meta.features;
    assert_eq!(f.hostname().unwrap().unwrap(), h["hostname"][0]);
    assert_eq!(f.osrelease().unwrap().unwrap(), h["os release"][0]);
    assert_eq!(f.arch().unwrap().unwrap(), h["arch"][0]);
    assert_eq!(f.cpudesc().unwrap().unwrap(), h["cpudesc"][0]);
    assert_eq!(f.cpuid().unwrap().unwrap(), h["cpuid"][0]);
    let n = f.nrcpus().unwrap().unwrap();
    assert_eq!(n.nr_cpus_online.to_string(), h["nrcpus online"][0]);
    assert_eq!(n.nr_cpus_available.to_string(), h["nrcpus avail"][0]);
    assert_eq!(
        format!("{} kB", f.total_mem().unwrap().unwrap()),
        h["total memory"][0]
    );
    assert_eq!(f.cmdline().unwrap().unwrap().join(" "), h["cmdline"][0]);
    // Events: names, ids and attr fields in order.
    let events = &h["event"];
    assert_eq!(events.len(), r.meta.attrs.len());
    for (a, line) in r.meta.attrs.iter().zip(events) {
        let ids = a
            .ids
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        assert!(
            line.starts_with(&format!(
                "name = {}, , id = {{ {ids} }}",
                a.name.as_deref().unwrap()
            )),
            "{line}"
        );
        assert!(line.contains(&format!("size = {}", a.attr.size)), "{line}");
    }
    assert_eq!(r.meta.attrs[0].attr.type_, 6, "intel_pt PMU type");
    // pmu mappings, in file order.
    let pmus = f.pmu_mappings().unwrap().unwrap();
    let text = pmus
        .iter()
        .map(|(t, n)| format!("{n} = {t}"))
        .collect::<Vec<_>>()
        .join(", ");
    assert_eq!(text, h["pmu mappings"][0]);

    // AUXTRACE payloads: the streams cut out of this file, byte for byte.
    assert_eq!(r.auxtrace_payloads.len(), 2);
    for (i, p) in r.auxtrace_payloads.iter().enumerate() {
        let bin = fs::read(fixture(&format!(
            "intel_pt/quipper_intel_pt-4.14.auxtrace{i}.bin"
        )))
        .unwrap();
        assert_eq!(p, &bin, "auxtrace payload {i}");
    }
    // The AUXTRACE index points at the AUXTRACE records.
    let idx = f.auxtrace_index().unwrap().unwrap();
    let at: Vec<u64> = r
        .records
        .iter()
        .filter(|x| x.1 == PERF_RECORD_AUXTRACE)
        .map(|x| x.0)
        .collect();
    assert_eq!(idx.iter().map(|e| e.file_offset).collect::<Vec<_>>(), at);
    // perf's index entry size is the record's header.size (auxtrace.c
    // auxtrace_index__auxtrace_event), not counting the payload.
    assert!(idx.iter().all(|e| e.sz == 48));
    assert_eq!(our_auxtrace_lines(&r), perf_auxtrace_lines(&golden));
}

#[test]
fn intel_pt_pipe_mode_matches_perf() {
    let path = fixture("intel_pt/perf.data.piped.intel_pt-4.14");
    // Pipe files read from a plain stream as well as a seekable file.
    let stream =
        PerfDataReader::from_stream(fs::File::open(&path).unwrap(), ReaderOptions::default())
            .unwrap();
    let r = read_all_from(stream);
    assert!(r.error.is_none(), "{:?}", r.error);
    assert!(r.meta.is_pipe());
    let golden = fixture_text("intel_pt/quipper_piped_intel_pt-4.14.records.perf-D.txt.xz");
    assert_counts_match("piped intel_pt-4.14", &r.counts, &golden);
    assert_eq!(
        r.meta.attrs.len() as u64,
        r.counts[&PERF_RECORD_HEADER_ATTR]
    );
    assert_eq!(
        r.meta.features.features().count() as u64,
        r.counts[&PERF_RECORD_HEADER_FEATURE]
    );
    // perf counts pipe offsets from after the 16-byte pipe header; ours are
    // byte positions in the stream.
    let mut perf_lines = perf_auxtrace_lines(&golden);
    perf_lines.iter_mut().for_each(|l| l.0 += 16);
    assert_eq!(our_auxtrace_lines(&r), perf_lines);
    for (i, p) in r.auxtrace_payloads.iter().enumerate() {
        let bin = fs::read(fixture(&format!(
            "intel_pt/quipper_piped_intel_pt-4.14.auxtrace{i}.bin"
        )))
        .unwrap();
        assert_eq!(p, &bin, "piped auxtrace payload {i}");
    }
    let h = header_only(
        &fs::read_to_string(fixture(
            "intel_pt/quipper_piped_intel_pt-4.14.header-only.txt",
        ))
        .unwrap(),
    );
    assert_eq!(
        r.meta.features.hostname().unwrap().unwrap(),
        h["hostname"][0]
    );
}

#[test]
fn simpleperf_files_match_perf() {
    for name in [
        "perf_etm",
        "perf_kernel",
        "perf_with_missing_aux_data",
        "perf_with_unformatted_trace",
    ] {
        let r = read_all(&fixture(&format!("simpleperf_etm/{name}.data")));
        assert!(r.error.is_none(), "{name}: {:?}", r.error);
        assert!(r.meta.is_simpleperf(), "{name}: simpleperf's feature bits");
        let golden = fixture_text(&format!("simpleperf_etm/simpleperf_{name}.perf-D.txt.xz"));
        assert_counts_match(name, &r.counts, &golden);
        let info = r
            .counts
            .get(&PERF_RECORD_AUXTRACE_INFO)
            .copied()
            .unwrap_or(0);
        assert_eq!(info, 1, "{name}: one AUXTRACE_INFO");
    }
    // perf_etm's single AUXTRACE payload is the stream perf cut out.
    let r = read_all(&fixture("simpleperf_etm/perf_etm.data"));
    assert_eq!(
        r.auxtrace_payloads,
        vec![fs::read(fixture("simpleperf_etm/simpleperf_perf_etm.auxtrace0.bin")).unwrap()]
    );
    // perf_kernel: 3 AUXTRACE, one continuing at AUX offset 0x3ff0: every
    // field as perf printed it.
    let r = read_all(&fixture("simpleperf_etm/perf_kernel.data"));
    let golden = fixture_text("simpleperf_etm/simpleperf_perf_kernel.perf-D.txt.xz");
    assert_eq!(our_auxtrace_lines(&r), perf_auxtrace_lines(&golden));
    assert_eq!(r.auxtrace.len(), 3);
}

// The old "PERFFILE" magic (v1) had its test on KDAB/hotspot's `perf record
// true` files; they are GPL and so not in testdata/ (see its PROVENANCE.md),
// and perf 6.1 refuses a newer file given that magic, so no oracle-judged v1
// file is left: that test was removed.

#[test]
fn sleep_pipe_files_match_perf() {
    // perf 6.1 reads the COMPRESSED (81) pipe file whole.
    let path = fixture("perf_data/sleep.compressed.pipe.data");
    let r = read_all(&path);
    assert!(r.error.is_none(), "{:?}", r.error);
    if have_perf() {
        let (ok, out, err) = perf_report_d(&path, true);
        assert!(ok, "{err}");
        assert_counts_match("sleep.compressed.pipe", &r.counts, &out);
    }
    assert_eq!(r.meta.attrs[0].name.as_deref(), Some("cycles:P"));
}

/// Records decompressed from chunks: every one has a decompressed offset,
/// and they follow their container in the stream.
#[test]
fn compressed_records_span_chunks() {
    // perf 6.1 stops at the first COMPRESSED2 chunk of this file ("failed
    // to process type: 83"); every chunk must be read, including records
    // split between two chunks.
    let path = fixture("perf_data/fibo.compressed2.pipe.data");
    let mut rd = PerfDataReader::open(&path).unwrap();
    let mut chunks = 0;
    let mut inner = 0u64;
    let mut samples = 0;
    let mut last_stream_off = None;
    let mut split = 0;
    let mut chunk_offsets = Vec::new();
    while let Some(rec) = rd.next_record().unwrap() {
        match (rec.header.type_, rec.location.decompressed_offset) {
            (PERF_RECORD_COMPRESSED2, None) => {
                chunks += 1;
                chunk_offsets.push(rec.location.file_offset);
            }
            (_, Some(off)) => {
                inner += 1;
                // Decompressed offsets are contiguous: each record starts where the last ended.
                if let Some((prev, len)) = last_stream_off {
                    assert_eq!(off, prev + len);
                }
                last_stream_off = Some((off, rec.bytes.len() as u64));
                if rec.location.file_offset != *chunk_offsets.last().unwrap() {
                    split += 1;
                }
                // Every decompressed record parses as the kernel record it claims to be.
                if let Some(p) = rec.parse() {
                    p.unwrap_or_else(|e| panic!("record at {:?}: {e}", rec.location));
                }
                if rec.header.type_ == PERF_RECORD_SAMPLE {
                    samples += 1;
                    assert!(rec.attr_index.is_some(), "sample id resolves to an event");
                }
            }
            _ => {}
        }
    }
    assert!(chunks > 1, "several chunks");
    assert!(
        split > 0,
        "some record started in an earlier chunk than the one it ended in"
    );
    assert!(inner > chunks && samples > 0);
}

#[test]
fn compressed_file_and_pipe_twins_agree() {
    // sleep.compressed.data and sleep.compressed.pipe.data hold the same
    // kernel records (perf 6.1 cannot read the file-mode one: attr_size 152).
    let file = read_all(&fixture("perf_data/sleep.compressed.data"));
    let pipe = read_all(&fixture("perf_data/sleep.compressed.pipe.data"));
    assert!(file.error.is_none() && pipe.error.is_none());
    let kernel = |m: &BTreeMap<u32, u64>| {
        m.iter()
            .filter(|(t, _)| **t < 64)
            .map(|(a, b)| (*a, *b))
            .collect::<Vec<_>>()
    };
    assert_eq!(kernel(&file.counts), kernel(&pipe.counts));
    let DataFormat::File(h) = file.meta.format else {
        panic!()
    };
    assert_eq!(h.attr_size, 152);
    let c = file.meta.features.compressed().unwrap().unwrap();
    assert_eq!((c.type_, c.level), (1, 1), "zstd level 1 (perf record -z)");
    assert!(c.mmap_len > 0);
}

#[test]
fn sleep_files_match_linux_perf_data() {
    // Cross-check the uncompressed file against the linux-perf-data crate.
    let path = fixture("perf_data/sleep.data");
    let r = read_all(&path);
    assert!(r.error.is_none());
    let f = std::io::BufReader::new(fs::File::open(&path).unwrap());
    let linux_perf_data::PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = linux_perf_data::PerfFileReader::parse_file(f).unwrap();
    let mut theirs: BTreeMap<u32, u64> = BTreeMap::new();
    while let Some(rec) = record_iter.next_record(&mut perf_file).unwrap() {
        let t = match rec {
            linux_perf_data::PerfFileRecord::EventRecord { record, .. } => record.record_type.0,
            linux_perf_data::PerfFileRecord::UserRecord(u) => {
                linux_perf_data::linux_perf_event_reader::RecordType::from(u.record_type).0
            }
        };
        *theirs.entry(t).or_insert(0) += 1;
    }
    // linux-perf-data consumes FINISHED_ROUND for its sort by time instead
    // of handing it out; every other record must be there.
    let mut ours = r.counts.clone();
    assert_eq!(ours.remove(&PERF_RECORD_FINISHED_ROUND), Some(1));
    assert_eq!(ours, theirs);
    assert_eq!(r.meta.attrs[0].name.as_deref(), Some("cycles:Pu"));
    // COMPRESSED2 file: same kind of recording, its records all decompress and parse.
    let c2 = read_all(&fixture("perf_data/sleep.compressed2.data"));
    assert!(c2.error.is_none(), "{:?}", c2.error);
    assert_eq!(c2.counts[&PERF_RECORD_COMPRESSED2], 1);
    assert!(c2.counts[&PERF_RECORD_SAMPLE] > 0);
    assert!(c2.meta.features.contains(Feature::COMPRESSED));
}

#[test]
fn trailing_garbage_ends_with_an_error_after_every_record() {
    // This fixture has perf record's stderr appended after the last record:
    // every record is delivered, then an error naming the garbage's offset.
    let r = read_all(&fixture("perf_data/sleep.compressed2.pipe.data"));
    let e = r.error.expect("the appended text is not a record");
    let last = r.records.last().unwrap();
    assert_eq!(last.1, PERF_RECORD_FINISHED_ROUND);
    assert_eq!(e.offset(), Some(last.0 + 8), "{e}");
    assert!(e.to_string().contains("0x7c40"), "{e}");
    assert!(r.counts[&PERF_RECORD_MMAP] > 0);
}

#[test]
fn owned_iterator_yields_the_records_then_the_error() {
    let path = fixture("perf_data/sleep.compressed2.pipe.data");
    let lent = read_all(&path);
    let items: Vec<_> = PerfDataReader::open(&path)
        .unwrap()
        .into_records()
        .collect();
    let (ok, err): (Vec<_>, Vec<_>) = items.into_iter().partition(|r| r.is_ok());
    assert_eq!(err.len(), 1, "one error, last");
    let owned: Vec<(u64, u32, usize)> = ok
        .into_iter()
        .map(|r| r.unwrap())
        .map(|r| (r.location.file_offset, r.header.type_, r.payload.len()))
        .collect();
    assert_eq!(owned, lent.records);
}

#[test]
fn file_mode_needs_a_seekable_input() {
    let f = fs::File::open(fixture("perf_data/sleep.data")).unwrap();
    let err = PerfDataReader::from_stream(f, ReaderOptions::default())
        .err()
        .unwrap();
    assert!(
        matches!(err, perfaux_perfdata::Error::Unsupported { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("seekable"), "{err}");
}

/// The features of a perf 6.5 pipe file against perf's own `--header-only`
/// (perf 6.1 reads this pipe; its file-mode twin has attr_size 152).
#[test]
fn pipe_features_match_perf_header_only() {
    if !have_perf() {
        return;
    }
    let path = fixture("perf_data/sleep.compressed.pipe.data");
    let r = read_all(&path);
    let (ok, out, err) = run_perf(&["report", "--header-only"], &path, true);
    assert!(ok, "{err}");
    let h = header_only(&out);
    let f = &r.meta.features;
    assert_eq!(f.hostname().unwrap().unwrap(), h["hostname"][0]);
    assert_eq!(f.osrelease().unwrap().unwrap(), h["os release"][0]);
    assert_eq!(f.version().unwrap().unwrap(), h["perf version"][0]);
    assert_eq!(f.arch().unwrap().unwrap(), h["arch"][0]);
    assert_eq!(f.cpuid().unwrap().unwrap(), h["cpuid"][0]);
    let n = f.nrcpus().unwrap().unwrap();
    assert_eq!(n.nr_cpus_online.to_string(), h["nrcpus online"][0]);
    assert_eq!(n.nr_cpus_available.to_string(), h["nrcpus avail"][0]);
    assert_eq!(
        format!("{} kB", f.total_mem().unwrap().unwrap()),
        h["total memory"][0]
    );
    assert_eq!(f.cmdline().unwrap().unwrap().join(" "), h["cmdline"][0]);
    let a = &r.meta.attrs[0];
    let ids = a
        .ids
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let want = format!(
        "name = {}, , id = {{ {ids} }}, size = {}",
        a.name.as_deref().unwrap(),
        a.attr.size
    );
    assert!(
        h["event"][0].starts_with(&want),
        "{} vs {want}",
        h["event"][0]
    );
    assert!(h["event"][0].contains(&format!("clockid = {}", a.attr.clockid)));
    let pmus = f.pmu_mappings().unwrap().unwrap();
    let text = pmus
        .iter()
        .map(|(t, n)| format!("{n} = {t}"))
        .collect::<Vec<_>>()
        .join(", ");
    assert_eq!(text, h["pmu mappings"][0]);
    // "clockid frequency: 1000 MHz" is 1000 / resolution in ns.
    let res = f.clockid_res_ns().unwrap().unwrap();
    assert_eq!(format!("{} MHz", 1000 / res), h["clockid frequency"][0]);
    let c = f.compressed().unwrap().unwrap();
    assert_eq!(c.type_, 1, "PERF_COMP_ZSTD");
    assert_eq!(
        format!("Zstd, level = {}, ratio = {}", c.level, c.ratio),
        h["compressed"][0]
    );
    let cd = f.clock_data().unwrap().unwrap();
    assert_eq!(format!("monotonic ({})", cd.clockid), h["clockid"][0]);
    // "reference time: <date> = <s>.<us> (TOD) = <s>.<ns> (monotonic)"
    let rt = &h["reference time"][0];
    let tod = format!(
        "{}.{:06} (TOD)",
        cd.wall_clock_ns / 1_000_000_000,
        cd.wall_clock_ns % 1_000_000_000 / 1000
    );
    let mono = format!(
        "{}.{:09} (monotonic)",
        cd.clockid_time_ns / 1_000_000_000,
        cd.clockid_time_ns % 1_000_000_000
    );
    assert!(
        rt.contains(&tod) && rt.ends_with(&mono),
        "{rt} vs {tod} / {mono}"
    );
}
