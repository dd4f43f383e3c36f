//! Seeded mutations of real files through the whole path a file takes in
//! `perfaux`: the reader, the trace-section parser, `script`'s ordering and
//! decoding (`--call-trace` too) and `report -D`, run in process with the
//! CLI's own limits. For every mutant: no panic, memory bounded (a counting
//! allocator measures the thread's peak), and for a file cut short, every
//! line `script` prints is a line of the intact file, and a cut after the
//! data section (in the feature area) loses no line. The same reach as the
//! fuzz target (crates/perfdata/fuzz), deterministic, in every test run.

mod common;

use std::io::Write;
use std::path::Path;

use common::*;
use perfaux::progress::Progress;
use perfaux_testutil::{CountingAlloc, fixture_bytes};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Far above what these small files need (a few MB), far below what a
/// reader that trusts a size field would take.
const PEAK_LIMIT: usize = 48 << 20;

/// xorshift64*: the same mutants in every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// What one pass printed and how it ended.
struct Pass {
    script: (String, bool),
    call_trace: Option<(String, bool)>,
    dump_ok: bool,
}

/// Runs script, script --call-trace (when asked) and report -D on `file`;
/// asserts the memory bound on each.
fn pass(file: &Path, call_trace: bool, what: &str) -> Pass {
    let bounded = |name: &str, f: &mut dyn FnMut(&mut dyn Write) -> bool| {
        let level = CountingAlloc::reset_peak();
        f(&mut std::io::sink());
        let peak = CountingAlloc::peak_since(level);
        assert!(peak < PEAK_LIMIT, "{what}: {name} peaked at {peak} bytes");
        let mut out = Vec::new();
        let ok = f(&mut out);
        (String::from_utf8_lossy(&out).into_owned(), ok)
    };
    let script = |ct: bool| {
        move |out: &mut dyn Write| {
            let mut out = out;
            perfaux::script::script(file, ct, &mut out, &mut Progress::quiet()).is_ok()
        }
    };
    let s = bounded("script", &mut script(false));
    let c = call_trace.then(|| bounded("script --call-trace", &mut script(true)));
    let d = bounded("report -D", &mut |out: &mut dyn Write| {
        let mut out = out;
        perfaux::dump::dump(file, "f", &mut out, &mut Progress::quiet()).is_ok()
    });
    Pass {
        script: s,
        call_trace: c,
        dump_ok: d.1,
    }
}

fn lines(t: &str) -> std::collections::HashSet<&str> {
    t.lines().collect()
}

/// The end of the data section of a file-mode perf.data, if it is one.
fn data_end(bytes: &[u8]) -> Option<usize> {
    (bytes.len() >= 56 && &bytes[..8] == b"PERFILE2" && bytes[8..16] != 16u64.to_le_bytes()).then(
        || {
            let u = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap()) as usize;
            u(40) + u(48)
        },
    )
}

fn mutate_file(name: &str, bytes: &[u8], call_trace: bool, seed: u64) {
    let dir = tempdir();
    let intact_path = dir.path().join("intact.data");
    std::fs::write(&intact_path, bytes).unwrap();
    let intact = pass(&intact_path, call_trace, name);
    assert!(intact.script.1, "{name}: intact file fails script");
    assert!(intact.dump_ok, "{name}: intact file fails report -D");
    let all = lines(&intact.script.0);
    let mut rng = Rng(seed);
    let mutant = dir.path().join("mutant.data");
    for round in 0..24 {
        let mut bad = bytes.to_vec();
        let cut = round % 2 == 0;
        let what = if cut {
            let len = 16 + rng.below(bytes.len() - 16);
            bad.truncate(len);
            format!("{name} cut at {len}")
        } else {
            let at = rng.below(bad.len());
            bad[at] = match round % 3 {
                0 => 0xff,
                1 => bad[at] ^ (1 << rng.below(8)),
                _ => rng.next() as u8,
            };
            format!("{name} byte {at} changed")
        };
        std::fs::write(&mutant, &bad).unwrap();
        let p = pass(&mutant, call_trace, &what);
        if cut {
            // A file cut short prints only lines the intact file has (in
            // the tid, cpu and time columns: event and probe names live in
            // the feature area) and says it is damaged. The thread's name
            // is left out too: a line is named by the COMM of its time,
            // which can sit in the file after the line (another CPU's
            // buffer written later) and so beyond the cut.
            let prefix = |l: &str| {
                let rest = l.trim_start().split_once(' ').map_or(l, |(_, r)| r);
                rest.split_once(": ")
                    .map_or(rest, |(cols, _)| cols)
                    .to_string()
            };
            let intact_prefixes: std::collections::HashSet<String> =
                all.iter().map(|l| prefix(l)).collect();
            for l in p.script.0.lines() {
                assert!(
                    intact_prefixes.contains(&prefix(l)),
                    "{what}: line not in the intact file: {l}"
                );
            }
            assert!(!p.script.1, "{what}: script exit status 0 on a cut file");
            if data_end(bytes).is_some_and(|end| bad.len() >= end) {
                assert_eq!(
                    p.script.0.lines().count(),
                    all.len(),
                    "{what}: a cut in the feature area lost lines"
                );
            }
        }
        let _ = p.call_trace;
    }
}

#[test]
fn mutated_real_files_never_panic_stay_bounded_and_keep_the_lines_before_the_damage() {
    for (i, f) in [
        "intel_pt/perf.data.intel_pt-4.14",
        "intel_pt/perf.data.piped.intel_pt-4.14",
        "perf_data/fibo.compressed2.pipe.data",
        "simpleperf_etm/perf_etm.data",
    ]
    .into_iter()
    .enumerate()
    {
        mutate_file(f, &fixture_bytes(f), false, 0x5eed_0100 + i as u64);
    }
}

#[test]
fn mutated_perfaux_recordings_through_the_call_trace() {
    let dir = tempdir();
    for (i, args) in [
        &["--requests", "30"][..],
        &["-Se", "-e", "swtrace//", "-e", "uevent", "--requests", "30"][..],
    ]
    .into_iter()
    .enumerate()
    {
        let (f, _) = record(dir.path(), &format!("r{i}.data"), args);
        let bytes = std::fs::read(&f).unwrap();
        mutate_file(
            &format!("perfaux record {args:?}"),
            &bytes,
            true,
            0x5eed_0200 + i as u64,
        );
    }
}
