//! The program's threads open their events with the attrs the file records: the recorder's
//! default `aux_watermark` (a quarter of the AUX area, at most 4 MiB) reaches the program's
//! event table, so each full-trace transaction ends at it and the recorder drains while the
//! program runs. (The table once carried the attrs before the defaults: the file said 16 MiB
//! while the threads ran with the area's half, 32 MiB, drained only at the end.) Judged by
//! Linux perf: `perf evlist -v` for the attr, `perf report -D` for the PERF_RECORD_AUX sizes.

mod calls;

use std::process::Command;

use calls::*;

/// perfaux's cap on the default aux_watermark (perfaux_recorder::AUX_WATERMARK_MAX).
const WATERMARK: u64 = 4 << 20;

#[test]
fn program_transactions_end_at_the_aux_watermark_the_file_records() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("perf");
    let dir = tempfile::tempdir().unwrap();
    let prog = build_calls(dir.path(), &["-finstrument-functions"], "calls_fi");
    // fib(30): about 4 million calls, about 19 MiB of trace in a 32 MiB area.
    let args = ["0", "30", "nojmp"];
    let (out, data) = record_with(dir.path(), &prog, &args, &["-m", ",32M"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let line = perf_line(&data, &["evlist", "-v"], "swtrace event", |l| {
        l.starts_with("swtrace")
    });
    assert!(
        line.contains(&format!("aux_watermark: {WATERMARK}")),
        "the file's swtrace attr: {line}"
    );

    let dump = Command::new("perf")
        .args(["report", "-D", "-i"])
        .arg(&data)
        .output()
        .expect("perf report -D");
    let sizes: Vec<u64> = String::from_utf8_lossy(&dump.stdout)
        .lines()
        .filter(|l| l.contains("PERF_RECORD_AUX "))
        .map(|l| {
            let hex = l
                .split("size: 0x")
                .nth(1)
                .and_then(|s| s.split_whitespace().next())
                .unwrap_or_else(|| panic!("no size in {l:?}"));
            u64::from_str_radix(hex, 16).unwrap()
        })
        .collect();
    let total: u64 = sizes.iter().sum();
    assert!(
        total > 3 * WATERMARK,
        "trace of {total} bytes: too small to cross the watermark thrice"
    );
    // A transaction ends at the first writer step past the watermark: at most one step (a few
    // dozen bytes) over it, and, but for the last (what was left at the end), not far below it
    // (its start may lie a step past the last cut).
    let step = 4096;
    let (last, full) = sizes.split_last().expect("AUX records");
    assert!(
        full.len() >= 3
            && full
                .iter()
                .all(|&s| s + step >= WATERMARK && s <= WATERMARK + step)
            && *last <= WATERMARK + step,
        "AUX records of {sizes:?} bytes, watermark {WATERMARK}"
    );
}
