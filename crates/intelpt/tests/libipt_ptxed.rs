//! libipt's decoder tests against `perfaux intel-pt decode`'s flow decoder: for every test in
//! the decoder's scope, each ptxed expectation pttc extracted from it equals the flow's
//! output under `diff -b`, run as libipt's runner runs ptxed (`--raw NAME.bin:ORG`, the
//! test's options, `--no-inst --check --pt NAME.pt`, then the sideband files pttc wrote with
//! the settings their names carry).
//!
//! The scope is what the decoder implements, read from each test's text, not from its
//! result: tests whose ptxed options are the implemented ones (`--cpu`, `--event:*`,
//! `--quiet`, `--stat*`, the decoder choice, the block options, clocks, address filters,
//! `--sb:*` and `--pevent:*`), whose packets are the flow's (PSB+, TNT, TIP family, MODE,
//! OVF, PIP, VMCS, TraceStop, MNT, timing, EXSTOP, MWAIT, PWRE, PWRX, PTWRITE, CFE, EVD,
//! TRIG). The others are counted and named, not hidden.

use std::path::{Path, PathBuf};

mod common;

use common::{diff_b, sideband_options};
use perfaux_intelpt::ptxed;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/libipt")
}

const FLOW_PACKETS: &[&str] = &[
    "trig",
    "cfe",
    "evd",
    "exstop",
    "mwait",
    "pwre",
    "pwrx",
    "ptw",
    "psb",
    "psbend",
    "mode.exec",
    "mode.tsx",
    "fup",
    "tip",
    "tip.pge",
    "tip.pgd",
    "tnt",
    "tnt64",
    "ovf",
    "pip",
    "vmcs",
    "stop",
    "pad",
    "mnt",
    "cyc",
    "tsc",
    "tma",
    "mtc",
    "cbr",
    "raw-8",
];

/// The packet kinds a test's `@pt` directives write.
fn packets(ptt: &str) -> Vec<String> {
    ptt.lines()
        .filter_map(|l| l.trim_start_matches(';').trim().strip_prefix("@pt "))
        .filter_map(|d| {
            let d = d.split_once(':').map_or(
                d,
                |(label, rest)| {
                    if label.contains('(') { d } else { rest }
                },
            );
            let name = d.trim().split('(').next()?.trim();
            (!name.starts_with('.')).then(|| name.to_owned())
        })
        .collect()
}

/// The options a `.ptt` gives ptxed: all its `opt:ptxed` lines, in order.
fn ptxed_options(ptt: &str) -> Vec<String> {
    ptt.lines()
        .filter_map(|l| l.trim_start_matches(';').trim().strip_prefix("opt:ptxed"))
        .flat_map(|rest| rest.split_whitespace().map(str::to_owned))
        .collect()
}

/// The ptxed options the flow implements.
const OPTIONS: &[&str] = &[
    "--event:tick",
    "--event:time",
    "--mtc-freq",
    "--nom-freq",
    "--cpuid-0x15.eax",
    "--cpuid-0x15.ebx",
    "--insn:keep-tcal-on-ovf",
    "--block:keep-tcal-on-ovf",
    "--filter:addr0_cfg",
    "--filter:addr0_a",
    "--filter:addr0_b",
    "--raw",
    "--cpu",
    "--event:ip",
    "--quiet",
    "--stat",
    "--stat:insn",
    "--stat:blocks",
    "--insn-decoder",
    "--block-decoder",
    "--block:show-blocks",
    "--resync-on-error",
    "--event:iflags",
    "--block:end-on-call",
    "--block:end-on-jump",
    "--sb",
    "--sb:compact",
    "--sb:verbose",
    "--sb:filename",
    "--sb:offset",
    "--sb:time",
    "--sb:switch",
    "--sb:warn",
    "--pevent:primary",
    "--pevent:secondary",
    "--pevent:sample-type",
    "--pevent:sample-config",
    "--pevent:time-zero",
    "--pevent:time-shift",
    "--pevent:time-mult",
    "--pevent:tsc-offset",
    "--pevent:kernel-start",
    "--pevent:sysroot",
    "--pevent:kcore",
    "--pevent:vdso-x64",
    "--pevent:vdso-x32",
    "--pevent:vdso-ia32",
];

fn org(ptt: &str) -> Option<String> {
    ptt.lines()
        .find_map(|l| l.trim().strip_prefix("org ").map(|o| o.trim().to_owned()))
}

#[test]
fn ptxed_expectations_match_for_every_test_in_the_flows_scope() {
    let dir = testdata();
    let outs: Vec<String> = std::fs::read_dir(dir.join("out"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    let mut names: Vec<String> = std::fs::read_dir(dir.join("ptt"))
        .unwrap()
        .filter_map(|e| {
            let n = e.ok()?.file_name().into_string().ok()?;
            Some(n.strip_suffix(".ptt")?.to_owned())
        })
        .collect();
    names.sort();
    let (mut passed, mut failed, mut outside) = (0, Vec::new(), Vec::new());
    let mut with_sideband = 0;
    for name in &names {
        let ptt = std::fs::read_to_string(dir.join("ptt").join(format!("{name}.ptt"))).unwrap();
        let exps: Vec<&String> = outs
            .iter()
            .filter(|o| o.starts_with(&format!("{name}-ptxed")) && o.ends_with(".exp"))
            .collect();
        if exps.is_empty() {
            continue;
        }
        let opts = ptxed_options(&ptt);
        let in_scope = opts
            .iter()
            .filter(|o| o.starts_with("--"))
            .all(|o| OPTIONS.contains(&o.as_str()))
            && packets(&ptt)
                .iter()
                .all(|p| FLOW_PACKETS.contains(&p.as_str()));
        if !in_scope {
            outside.push(name.clone());
            continue;
        }
        let org = org(&ptt).expect("org");
        let sideband = sideband_options(name, &ptt, &outs, &dir.join("out"));
        for exp in exps {
            let mut args = vec![
                "--raw".to_owned(),
                format!(
                    "{}:{org}",
                    dir.join("bin").join(format!("{name}.bin")).display()
                ),
            ];
            if let Some(cpu) = exp
                .strip_suffix(".exp")
                .and_then(|e| e.rsplit_once("-cpu_"))
                .map(|(_, c)| c.replace('_', "/"))
            {
                args.extend(["--cpu".to_owned(), cpu]);
            }
            // libipt's runner runs ptxed where the code files are: a `--raw` of the test's
            // names a file there.
            let bin_dir = dir.join("bin");
            let mut raw = false;
            args.extend(opts.iter().map(|o| {
                let o = if raw {
                    format!("{}/{o}", bin_dir.display())
                } else {
                    o.clone()
                };
                raw = o == "--raw";
                o
            }));
            args.extend([
                "--no-inst".into(),
                "--check".into(),
                "--pt".into(),
                dir.join("out")
                    .join(format!("{name}.pt"))
                    .display()
                    .to_string(),
            ]);
            // The sideband names the code files as the runner sees them, in its directory.
            if !sideband.is_empty() {
                args.extend([
                    "--pevent:sysroot".to_owned(),
                    format!("{}/", bin_dir.display()),
                ]);
            }
            args.extend(sideband.iter().cloned());
            with_sideband += usize::from(!sideband.is_empty());
            let setup = ptxed::parse_args(&args).unwrap();
            let mut out = Vec::new();
            ptxed::run(&setup, &mut out).unwrap();
            // And it names the sideband files from there.
            let ours = String::from_utf8(out)
                .unwrap()
                .replace(&format!("{}/", dir.join("out").display()), "");
            let theirs = std::fs::read_to_string(dir.join("out").join(exp)).unwrap();
            if diff_b(&ours) == diff_b(&theirs) {
                passed += 1;
            } else {
                failed.push(format!("{exp}:\n--- expected\n{theirs}--- perfaux\n{ours}"));
            }
        }
    }
    eprintln!(
        "ptxed: {passed} expectations match; {} tests outside the flow's scope: {}",
        outside.len(),
        outside.join(" ")
    );
    assert!(passed > 0);
    // Every decoder test of libipt's with a ptxed expectation is in scope now.
    assert!(outside.is_empty(), "outside the scope: {outside:?}");
    assert_eq!(
        with_sideband, 10,
        "libipt's ptxed expectations with perf_event sideband"
    );
    assert!(
        failed.is_empty(),
        "{} of {} expectations differ:\n{}",
        failed.len(),
        failed.len() + passed,
        failed.join("\n")
    );
}
