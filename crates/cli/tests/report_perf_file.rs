//! `perfaux report` on a file of Linux perf's own (`perf record -g` of a threaded C program
//! on this machine), judged by `perf report --stdio` on the same file (issue 22 item 17):
//! every thread under its name, and every user-space row (command, object, symbol,
//! overhead) as perf prints it, local functions of libraries named from their debug file's
//! .symtab as perf names them.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use common::*;

/// Two threads (the second made by clone, so without a COMM record of its own) in a loop
/// that calls into libc (snprintf, whose helpers are local functions of libc).
const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdio.h>
volatile double sink;
__attribute__((noinline)) double leaf(int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += i * 0.5;
    return s;
}
__attribute__((noinline)) double mid(int n) {
    char b[64];
    double s = 0;
    for (int i = 0; i < n / 100; i++) {
        snprintf(b, sizeof b, "%d %f", i, s);
        s += leaf(100) + b[0];
    }
    return s;
}
void *worker(void *a) {
    for (int k = 0; k < 400; k++) sink += mid(20000);
    return a;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, worker, 0);
    worker(0);
    pthread_join(t, 0);
    return 0;
}
"#;

/// The user-space rows (`[.]`) of a report's histogram: `(command, object, symbol)` to the
/// sum of their overheads in percent and the number of rows. perf keeps a row per symbol
/// and perfaux one per name, so two symbols of one name (libc's ifunc PLT entries, all
/// `@plt`) are two rows of perf's and one of perfaux's: compared summed, each row rounded
/// to 0.01%.
fn user_rows(text: &str) -> BTreeMap<(String, String, String), (f64, u32)> {
    let mut rows = BTreeMap::new();
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((left, sym)) = l.split_once(" [.] ") else {
            continue;
        };
        let w: Vec<&str> = left.split_whitespace().collect();
        let [pct, comm, dso] = w[..] else {
            continue;
        };
        let Some(Ok(pct)) = pct.strip_suffix('%').map(str::parse::<f64>) else {
            continue;
        };
        // A sample in a PLT stub: perfaux names it by the stub's target (`snprintf@plt`);
        // perf 6.1 does too where it synthesizes PLT symbols, and otherwise names it by the
        // symbol before the PLT (`_init`). Both are the stub.
        let sym = sym.trim();
        let sym = if sym.ends_with("@plt") || sym == "_init" {
            "<plt>"
        } else {
            sym
        };
        let e = rows
            .entry((comm.to_owned(), dso.to_owned(), sym.to_owned()))
            .or_insert((0.0, 0));
        e.0 += pct;
        e.1 += 1;
    }
    rows
}

#[test]
fn a_perf_record_g_file_reads_as_perf_reads_it() {
    require_oracle!("gcc");
    require_oracle!("perf");
    let dir = tempdir();
    std::fs::write(dir.path().join("threads.c"), PROGRAM).unwrap();
    let st = Command::new("gcc")
        .current_dir(dir.path())
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-pthread"])
        .args(["threads.c", "-o", "threads"])
        .status()
        .expect("gcc");
    assert!(st.success());
    let data = dir.path().join("perf.data");
    let r = run({
        let mut c = perfaux_testutil::perf_command(
            &[
                "record",
                "-g",
                "-e",
                "task-clock",
                "-o",
                path_str(&data),
                "./threads",
            ],
            dir.path(),
        );
        c.current_dir(dir.path());
        c
    });
    assert!(r.ok(), "perf record: {}", r.stderr);
    let theirs = perf_report_sorted("comm,dso,sym", &data, dir.path());
    assert!(theirs.ok(), "perf report: {}", theirs.stderr);
    let ours = perfaux(&["report", "-i", path_str(&data)]);
    assert!(ours.ok(), "perfaux report: {}", ours.stderr);

    let (t, o) = (user_rows(&theirs.stdout), user_rows(&ours.stdout));
    let show = format!(
        "perfaux report:\n{}\nperf report:\n{}",
        ours.stdout, theirs.stdout
    );
    assert!(
        t.keys().any(|k| k.2 == "leaf"),
        "perf saw no sample in leaf:\n{show}"
    );
    let comms: BTreeSet<&str> = o.keys().map(|k| k.0.as_str()).collect();
    assert_eq!(comms, BTreeSet::from(["threads"]), "{show}");
    assert_eq!(
        o.keys().collect::<Vec<_>>(),
        t.keys().collect::<Vec<_>>(),
        "{show}"
    );
    for (k, &(theirs_pct, rows)) in &t {
        let ours_pct = o[k].0;
        assert!(
            (ours_pct - theirs_pct).abs() <= 0.005 * f64::from(rows + 1),
            "{k:?}: {ours_pct}% against perf's {theirs_pct}%\n{show}"
        );
    }
}
