//! libipt's own decoder tests (testdata/libipt, BSD-3): for every test, every ptdump
//! expectation pttc extracted from it equals `perfaux intel-pt dump`'s output under `diff -b`,
//! with the options libipt's test runner gives ptdump (the cpu of the expectation's name, the
//! test's `opt:ptdump` lines, and the sideband files pttc wrote with the settings their names
//! carry).

use std::path::{Path, PathBuf};

mod common;

use common::{diff_b, sideband_options};
use perfaux_intelpt::ptdump;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/libipt")
}

/// The options a `.ptt` gives a tool: all its `opt:TOOL` lines, in order.
fn tool_options(ptt: &str, tool: &str) -> Vec<String> {
    let key = format!("opt:{tool}");
    ptt.lines()
        .filter_map(|l| l.trim_start_matches(';').trim().strip_prefix(&key))
        .flat_map(|rest| rest.split_whitespace().map(str::to_owned))
        .collect()
}

/// The `--cpu` of an expectation's name (`NAME-ptdump-cpu_6_142.exp`).
fn cpu_of(exp: &str) -> Option<String> {
    let tail = exp.strip_suffix(".exp")?.rsplit_once("-cpu_")?.1;
    Some(tail.replace('_', "/"))
}

struct Case {
    name: String,
    exp: PathBuf,
    args: Vec<String>,
}

fn cases() -> Vec<Case> {
    let dir = testdata();
    let mut names: Vec<String> = std::fs::read_dir(dir.join("ptt"))
        .expect("testdata/libipt/ptt")
        .filter_map(|e| {
            let n = e.ok()?.file_name().into_string().ok()?;
            Some(n.strip_suffix(".ptt")?.to_owned())
        })
        .collect();
    names.sort();
    let outs: Vec<String> = std::fs::read_dir(dir.join("out"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    let mut cases = Vec::new();
    for name in names {
        let ptt = std::fs::read_to_string(dir.join("ptt").join(format!("{name}.ptt"))).unwrap();
        let opts = tool_options(&ptt, "ptdump");
        let sideband = sideband_options(&name, &ptt, &outs, &dir.join("out"));
        let prefix = format!("{name}-ptdump");
        let mut exps: Vec<&String> = outs
            .iter()
            .filter(|o| {
                o.ends_with(".exp")
                    && o.strip_prefix(&prefix)
                        .is_some_and(|r| r == ".exp" || r.starts_with("-cpu_"))
            })
            .collect();
        exps.sort();
        for exp in exps {
            let mut args = Vec::new();
            if let Some(cpu) = cpu_of(exp) {
                args.extend(["--cpu".to_owned(), cpu]);
            }
            args.extend(opts.iter().cloned());
            args.extend(sideband.iter().cloned());
            args.push(
                dir.join("out")
                    .join(format!("{name}.pt"))
                    .display()
                    .to_string(),
            );
            cases.push(Case {
                name: name.clone(),
                exp: dir.join("out").join(exp),
                args,
            });
        }
    }
    cases
}

fn run(c: &Case) -> Result<(), String> {
    let (opts, input) = ptdump::parse_args(&c.args).map_err(|e| format!("options: {e}"))?;
    let buf = input.load()?;
    let mut out = Vec::new();
    ptdump::dump(&buf, &opts, &mut out).unwrap();
    let ours = String::from_utf8(out).unwrap();
    let theirs = std::fs::read_to_string(&c.exp).unwrap();
    if diff_b(&ours) == diff_b(&theirs) {
        Ok(())
    } else {
        Err(format!("--- expected\n{theirs}--- perfaux\n{ours}"))
    }
}

#[test]
fn every_libipt_test_dumps_as_ptdump_expects() {
    let cases = cases();
    let tests: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        tests.len(),
        242,
        "libipt's decoder tests with a ptdump expectation"
    );
    // Every sideband file pttc wrote goes to its test's ptdump.
    let sb_files: Vec<String> = std::fs::read_dir(testdata().join("out"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".sb"))
        .collect();
    for f in &sb_files {
        assert!(
            cases.iter().any(|c| c
                .args
                .iter()
                .any(|a| Path::new(a).file_name() == Some(f.as_ref()))),
            "{f} is given to no ptdump run"
        );
    }
    let mut failed = Vec::new();
    let mut passed = 0;
    for c in &cases {
        match run(c) {
            Ok(()) => passed += 1,
            Err(e) => failed.push(format!(
                "{} ({}):\n{e}",
                c.name,
                c.exp.file_name().unwrap().to_string_lossy()
            )),
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} expectations differ:\n{}",
        failed.len(),
        failed.len() + passed,
        failed.join("\n")
    );
}
