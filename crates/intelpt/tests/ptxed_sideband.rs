//! ptxed's sideband beyond libipt's tests: malformed files give positioned diagnostics and the
//! trace still decodes, and a process's image follows its parent's through a fork and finds
//! its `[vdso]` by the ABI of its first mapped ELF file.

use std::path::{Path, PathBuf};

use perfaux_intelpt::ptxed;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/libipt")
}

/// A record with no sample fields.
fn record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
    let mut v = kind.to_le_bytes().to_vec();
    v.extend(misc.to_le_bytes());
    v.extend(u16::try_from(8 + body.len()).unwrap().to_le_bytes());
    v.extend(body);
    v
}

/// A string field: NUL-terminated, padded to 8 bytes.
fn string(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v.resize(v.len().next_multiple_of(8), 0);
    v
}

fn comm(pid: u32, name: &str) -> Vec<u8> {
    let mut b = [pid.to_le_bytes(), pid.to_le_bytes()].concat();
    b.extend(string(name));
    record(3, 0, &b)
}

fn mmap(pid: u32, addr: u64, len: u64, pgoff: u64, name: &str) -> Vec<u8> {
    let mut b = [pid.to_le_bytes(), pid.to_le_bytes()].concat();
    for v in [addr, len, pgoff] {
        b.extend(v.to_le_bytes());
    }
    b.extend(string(name));
    record(1, 0, &b)
}

fn fork(pid: u32, ppid: u32) -> Vec<u8> {
    let mut b = Vec::new();
    for v in [pid, ppid, pid, ppid] {
        b.extend(v.to_le_bytes());
    }
    b.extend(0u64.to_le_bytes());
    record(7, 0, &b)
}

fn itrace_start(pid: u32) -> Vec<u8> {
    record(12, 0, &[pid.to_le_bytes(), pid.to_le_bytes()].concat())
}

/// ptxed on libipt's `pevent-warn` trace (tracing on at 0x1000 for one instruction), with
/// `sb` as primary sideband and the given options before it.
fn decode(sb: &[u8], opts: &[&str], code: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sb");
    std::fs::write(&file, sb).unwrap();
    let data = testdata();
    let mut args: Vec<String> = Vec::new();
    if code {
        args.push("--raw".into());
        args.push(format!(
            "{}:0x1000",
            data.join("bin/pevent-warn.bin").display()
        ));
    }
    args.push("--pt".into());
    args.push(data.join("out/pevent-warn.pt").display().to_string());
    args.extend(opts.iter().map(|o| o.to_string()));
    args.push("--pevent:primary".into());
    args.push(file.display().to_string());
    let setup = ptxed::parse_args(&args).unwrap();
    let mut out = Vec::new();
    ptxed::run(&setup, &mut out).unwrap();
    String::from_utf8(out)
        .unwrap()
        .replace(&file.display().to_string(), "SB")
}

#[test]
fn a_record_cut_short_by_a_huge_size_is_a_warning_where_it_starts() {
    let mut sb = comm(1, "sh");
    // Its size says 64 KiB, the file ends 16 bytes in.
    let mut cut = comm(1, "bash");
    cut[6..8].copy_from_slice(&u16::MAX.to_le_bytes());
    sb.extend(&cut[..16]);
    assert_eq!(
        decode(&sb, &["--sb:compact", "--sb:offset", "--sb:warn"], true),
        "0000000000000000  PERF_RECORD_COMM  1/1, sh  { }\n\
         [SB:0000000000000018 sideband warning: truncated record]\n\
         0000000000001000\n\
         [disabled]\n"
    );
    // libipt's ptxed takes it as the end without a word, and so does perfaux by default.
    assert_eq!(
        decode(&sb, &[], true),
        "0000000000001000\n\
         [disabled]\n"
    );
}

#[test]
fn records_whose_size_does_not_fit_them_are_errors_where_they_start() {
    // Smaller than its header.
    let mut small = comm(1, "sh");
    small.extend(record(3, 0, &[]));
    small[24 + 6..24 + 8].copy_from_slice(&4u16.to_le_bytes());
    // Larger than its fields, with the bytes there.
    let mut large = comm(1, "sh");
    let mut big = comm(1, "sh");
    big.resize(0x100, 0);
    big[6..8].copy_from_slice(&0x100u16.to_le_bytes());
    large.extend(big);
    for sb in [small, large] {
        assert_eq!(
            decode(&sb, &[], true),
            "[SB:0000000000000018 sideband error: decoder out of sync]\n\
             0000000000001000\n\
             [disabled]\n"
        );
    }
}

#[test]
fn a_forked_process_has_its_parents_code_and_vdso() {
    let dir = tempfile::tempdir().unwrap();
    // A 64-bit ELF file's identification, then a NOP: the process's ABI is x86-64.
    let mut prog = b"\x7fELF\x02\x01\x01".to_vec();
    prog.resize(0x40, 0);
    prog.push(0x90);
    std::fs::write(dir.path().join("prog"), &prog).unwrap();
    let vdso = dir.path().join("vdso64.so");
    std::fs::write(&vdso, [0x90]).unwrap();
    let sb = [
        mmap(1, 0x5000, 1, 0x40, "prog"),
        mmap(1, 0x1000, 1, 0, "[vdso]"),
        fork(2, 1),
        itrace_start(2),
    ]
    .concat();
    let sysroot = format!("{}/", dir.path().display());
    let vdso = vdso.display().to_string();
    let opts = [
        "--sb:switch",
        "--pevent:sysroot",
        &sysroot,
        "--pevent:vdso-x64",
        &vdso,
    ];
    // No code but the sideband's.
    assert_eq!(
        decode(&sb, &opts, false),
        "[context: pid-2]\n\
         0000000000001000\n\
         [disabled]\n"
    );
    // Without the vdso for its ABI, there is no code at 0x1000.
    assert_eq!(
        decode(&sb, &opts[..3], false),
        "[SB:0000000000000030 sideband error: bad configuration]\n\
         [context: pid-2]\n\
         [26, 1000: error: no memory mapped at this address]\n"
    );
}

#[test]
fn each_file_takes_the_settings_given_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let sb = dir.path().join("sb");
    std::fs::write(&sb, comm(1, "sh")).unwrap();
    let sb = sb.display().to_string();
    let pt = testdata().join("out/pevent-warn.pt").display().to_string();
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let setup = ptxed::parse_args(&args(&[
        "--pt",
        &pt,
        "--pevent:kernel-start",
        "0xffffffff80000000",
        "--pevent:sysroot",
        "/root/",
        "--pevent:primary",
        &sb,
        "--pevent:vdso-x64",
        "/vdso",
        "--pevent:secondary",
        &sb,
        "--sb:switch",
    ]))
    .unwrap();
    let files = &setup.sideband.options.files;
    assert!(setup.sideband.switch);
    assert_eq!(files.len(), 2);
    assert!(files[0].primary && !files[1].primary);
    assert_eq!(files[0].process.kernel_start, 0xffffffff80000000);
    assert_eq!(files[0].process.sysroot.as_deref(), Some("/root/"));
    assert_eq!(files[0].process.vdso_x64, None);
    assert_eq!(files[1].process.vdso_x64.as_deref(), Some("/vdso"));
    // ptdump's `--pevent` does not say which kind of file it is.
    assert!(ptxed::parse_args(&args(&["--pt", &pt, "--pevent", &sb])).is_err());
}
