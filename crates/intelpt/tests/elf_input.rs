//! `--elf FILE[:BASE]`: code from an ELF file's loadable segments. Each of these libipt tests'
//! code, linked by binutils' `ld` into an executable at the test's `org`, decodes to the same
//! ptxed expectation as the raw code; and at another BASE the code is elsewhere.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::diff_b;
use perfaux_intelpt::ptxed;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/libipt")
}

const TESTS: &[&str] = &[
    "call_direct-ret_compressed",
    "call_indirect-ret_uncompressed",
    "fup-tip",
    "int-iret",
    "loop-tnt-64",
    "ovf-fup",
    "syscall-sysret",
    "tsx-abort",
];

fn org(name: &str) -> String {
    let ptt = std::fs::read_to_string(testdata().join("ptt").join(format!("{name}.ptt"))).unwrap();
    ptt.lines()
        .find_map(|l| l.trim().strip_prefix("org ").map(|o| o.trim().to_owned()))
        .unwrap()
}

fn decode(args: &[String]) -> String {
    let setup = ptxed::parse_args(args).unwrap();
    let mut out = Vec::new();
    ptxed::run(&setup, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn code_from_an_elf_file_decodes_as_the_raw_code() {
    perfaux_testutil::require_oracle!("ld");
    let dir = tempfile::tempdir().unwrap();
    for name in TESTS {
        let org = org(name);
        let bin = dir.path().join(format!("{name}.bin"));
        std::fs::copy(testdata().join("bin").join(format!("{name}.bin")), &bin).unwrap();
        let elf = dir.path().join(format!("{name}.elf"));
        let st = Command::new("ld")
            .current_dir(dir.path())
            .args(["-m", "elf_x86_64", "-b", "binary", "-e", &org, "-o"])
            .arg(&elf)
            .arg(format!("--section-start=.data={org}"))
            .arg(format!("{name}.bin"))
            .status()
            .expect("ld");
        assert!(st.success(), "ld {name}");
        let pt = testdata().join("out").join(format!("{name}.pt"));
        let ours = decode(&[
            "--elf".into(),
            elf.display().to_string(),
            "--pt".into(),
            pt.display().to_string(),
        ]);
        let theirs =
            std::fs::read_to_string(testdata().join("out").join(format!("{name}-ptxed.exp")))
                .unwrap();
        assert_eq!(diff_b(&ours), diff_b(&theirs), "{name}");
        // At a BASE far from `org` the trace's addresses have no code.
        let moved = decode(&[
            "--elf".into(),
            format!("{}:0x7f0000000000", elf.display()),
            "--pt".into(),
            pt.display().to_string(),
        ]);
        assert!(
            moved.contains("no memory mapped at this address"),
            "{name}: {moved}"
        );
    }
}
