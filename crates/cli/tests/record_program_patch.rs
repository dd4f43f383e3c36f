//! `perfaux record -P PATTERN -- ./prog`: programs built with no instrumentation at all, their
//! function entries patched by the runtime when they start (perfaux-patch, the runtime's
//! `patch` module). Judged by `uftrace record -P` on the same binary (the call count of every
//! function both patch is equal, and perfaux patches every function uftrace does), by the
//! programs' own counts, and by their output, which tracing must not change.

mod calls;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use calls::*;

/// uftrace's call count of each of the program's functions under `uftrace record -P .`
/// (library calls off).
fn uftrace_patched_counts(dir: &Path, prog: &Path, args: &[&str]) -> BTreeMap<String, u64> {
    uftrace_counts_with(dir, prog, args, &["--no-libcall", "-P", "."], |n| {
        !n.contains(':')
    })
}

/// `perfaux record -P .` of `prog`: its stdout, and the report's counts.
fn perfaux_patched(dir: &Path, prog: &Path, args: &[&str]) -> (Vec<u8>, BTreeMap<String, u64>) {
    let (out, data) = record_with(dir, prog, args, &["-P", "."], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.stdout, report_counts(&data))
}

/// `perfaux record OPTS -- PROG ARGS` in `dir`, which must succeed: its stdout and the
/// report's counts.
fn recorded(
    dir: &Path,
    prog: &Path,
    args: &[&str],
    opts: &[&str],
) -> (String, BTreeMap<String, u64>) {
    let (out, data) = record_with(dir, prog, args, opts, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        report_counts(&data),
    )
}

/// The counts `pairs` give.
fn counts_of(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|&(f, n)| (f.to_string(), n)).collect()
}

/// Every function uftrace patched is patched by perfaux with the same count of calls.
fn assert_agrees(what: &str, ours: &BTreeMap<String, u64>, uftrace: &BTreeMap<String, u64>) {
    assert!(!uftrace.is_empty(), "{what}: uftrace traced nothing");
    for (f, n) in uftrace {
        assert_eq!(
            ours.get(f),
            Some(n),
            "{what}: {f}: perfaux's count against uftrace's\nperfaux: {ours:?}\nuftrace: {uftrace:?}"
        );
    }
}

#[test]
fn patched_calls_equal_uftraces_in_pie_and_non_pie_builds_with_and_without_library_calls() {
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    for (flags, name) in [
        (&["-O2"][..], "calls_pie"),
        (&["-O2", "-no-pie", "-fno-pie"][..], "calls_nopie"),
        (&["-O2", "-fomit-frame-pointer"][..], "calls_nofp"),
    ] {
        let prog = build_calls(dir.path(), flags, name);
        for args in [&["3"][..], &["2", "6"][..]] {
            let what = format!("{name} {args:?}");
            let alone = Command::new(&prog).args(args).output().unwrap();
            let want = uftrace_patched_counts(dir.path(), &prog, args);
            let (out, data) =
                record_with(dir.path(), &prog, args, &["-P", ".", "--no-libcall"], &[]);
            assert!(
                out.status.success(),
                "{what}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(out.stdout, alone.stdout, "{what}: the program's output");
            let ours = report_counts(&data);
            assert_agrees(&what, &ours, &want);
            assert!(!ours.contains_key("printf"), "--no-libcall: {ours:?}");
            // uftrace's default: library calls on (perfaux's too). perfaux never hooks the
            // setjmp family (they return twice), which uftrace handles apart.
            let want = uftrace_counts_with(dir.path(), &prog, args, &["-P", "."], |n| {
                !n.contains(':') && !n.contains("setjmp")
            });
            assert!(
                want.contains_key("printf") && want.contains_key("strcmp"),
                "{want:?}"
            );
            let (stdout, ours) = perfaux_patched(dir.path(), &prog, args);
            assert_eq!(stdout, alone.stdout, "{what}: the program's output");
            assert_agrees(&format!("{what} with library calls"), &ours, &want);
        }
    }
}

/// zstd's library sources, as the zstd-sys crate (a dependency of the workspace) bundles them.
fn zstd_sources() -> Option<PathBuf> {
    let lib = package_dir("zstd-sys")?.join("zstd/lib");
    lib.join("zstd.h").is_file().then_some(lib)
}

#[test]
fn a_real_library_zstd_is_traced_as_uftrace_traces_it() {
    perfaux_testutil::require_oracle!("uftrace");
    let lib = zstd_sources().expect("zstd-sys's bundled sources (cargo fetch)");
    let dir = tempfile::tempdir().unwrap();
    let prog = dir.path().join("zstd_rounds");
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("../preload/tests/c/zstd_rounds.c");
    let mut gcc = Command::new("gcc");
    gcc.args(["-O2", "-DZSTD_MULTITHREAD=0", "-DZSTD_DISABLE_ASM", "-I"])
        .arg(&lib)
        .arg("-o")
        .arg(&prog)
        .arg(&driver);
    for part in ["common", "compress", "decompress"] {
        for f in std::fs::read_dir(lib.join(part)).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "c") {
                gcc.arg(f);
            }
        }
    }
    assert!(gcc.status().expect("gcc").success(), "building zstd");
    let alone = Command::new(&prog).arg("3").output().unwrap();
    let want = uftrace_patched_counts(dir.path(), &prog, &["3"]);
    assert!(want.len() > 50, "uftrace traced {} functions", want.len());
    let (stdout, ours) = perfaux_patched(dir.path(), &prog, &["3"]);
    assert_eq!(stdout, alone.stdout, "zstd's output");
    assert_agrees("zstd", &ours, &want);
}

#[test]
fn entries_the_compiler_prepared_are_traced_without_p() {
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    for (flags, name, how) in [
        (
            &["-O2", "-fpatchable-function-entry=5"][..],
            "calls_pfe",
            "-fpatchable-function-entry",
        ),
        (
            &[
                "-O2",
                "-no-pie",
                "-fno-pie",
                "-pg",
                "-mfentry",
                "-mnop-mcount",
                "-mrecord-mcount",
            ][..],
            "calls_nop_mcount",
            "-mnop-mcount",
        ),
    ] {
        let prog = build_calls(dir.path(), flags, name);
        let want = uftrace_patched_counts(dir.path(), &prog, &["3"]);
        let (out, data) = record(dir.path(), &prog, &["3"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {err}");
        assert!(
            err.contains(&format!("patchable function entries ({how})")),
            "{name}: the way said in one line: {err}"
        );
        assert_agrees(name, &report_counts(&data), &want);
    }
}

/// A program clang built with `-fxray-instrument` is traced without -P through the functions
/// whose entries XRay prepared (a sled each), and only those: not XRay's own runtime linked
/// into it, nor the sanitizer library beside it, which `-P .` would patch too. Their calls
/// are uftrace's (`-P .` on the same binary).
#[test]
fn xray_sleds_are_traced_without_p_and_only_their_functions() {
    perfaux_testutil::require_oracle!("clang");
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../preload/tests/c/calls.c");
    let prog = dir.path().join("calls_xray");
    let st = Command::new("clang")
        .args(["-O1", "-g", "-pthread", "-fxray-instrument"])
        // Every function gets its sleds, not only those of 200 instructions or more.
        .arg("-fxray-instruction-threshold=1")
        .arg("-o")
        .arg(&prog)
        .arg(&src)
        .status()
        .expect("clang");
    assert!(
        st.success(),
        "clang -fxray-instrument (Debian: apt-get install clang libclang-rt-dev)"
    );
    let want = uftrace_patched_counts(dir.path(), &prog, &["3"]);
    let (out, data) = record(dir.path(), &prog, &["3"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("patchable function entries (-fxray-instrument)"),
        "the way said in one line: {err}"
    );
    let ours = report_counts(&data);
    assert_agrees("xray", &ours, &want);
    let runtime: Vec<&String> = ours
        .keys()
        .filter(|f| f.starts_with("__xray") || f.starts_with("__sanitizer"))
        .collect();
    assert!(
        runtime.is_empty(),
        "XRay's runtime was patched: {runtime:?}"
    );
}

/// A program built with compiler hooks is traced through them, and `record` says so in one
/// line naming the flags (the prepared entries' line is the test above's): the three flavours.
#[test]
fn the_compiler_hooks_a_program_calls_are_said_in_one_line() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    for (flags, name, how) in [
        (
            &["-O2", "-finstrument-functions"][..],
            "calls_fi_way",
            "-finstrument-functions",
        ),
        (&["-O2", "-pg"][..], "calls_pg_way", "-pg"),
        (
            &["-O2", "-pg", "-mfentry"][..],
            "calls_fentry_way",
            "-pg -mfentry",
        ),
    ] {
        let prog = build_calls(dir.path(), flags, name);
        let (out, _) = record(dir.path(), &prog, &["1"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {err}");
        let ways: Vec<&str> = err
            .lines()
            .filter(|l| l.contains(" through its "))
            .collect();
        assert_eq!(
            ways,
            [format!(
                "perfaux record: tracing {} through its compiler hooks ({how})",
                prog.display()
            )],
            "{name}"
        );
    }
}

#[test]
fn a_cet_build_keeps_its_endbr64_and_its_calls() {
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    let cet = build_calls(dir.path(), &["-O2", "-fcf-protection=full"], "calls_cet");
    let dis = Command::new("objdump")
        .args(["-d", "--disassemble=fib"])
        .arg(&cet)
        .output()
        .expect("objdump");
    assert!(
        String::from_utf8_lossy(&dis.stdout).contains("endbr64"),
        "the build has CET entries"
    );
    // uftrace 0.13 patches a CET function's loop back into its first bytes and dies: the same
    // source built without CET is its judge (the same functions make the same calls).
    let plain = build_calls(dir.path(), &["-O2"], "calls_plain");
    let want = uftrace_patched_counts(dir.path(), &plain, &["3"]);
    let (_, ours) = perfaux_patched(dir.path(), &cet, &["3"]);
    assert_agrees("CET", &ours, &want);
}

#[test]
fn cxx_exceptions_unwind_through_patched_frames() {
    perfaux_testutil::require_oracle!("g++");
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    let build = |flags: &[&str], name: &str| build_cxx(dir.path(), "exceptions.cpp", flags, name);
    // uftrace dies unwinding through its own hijacked returns at -O2 (docs): its report of
    // the -finstrument-functions build counts the calls of the program's own functions.
    let judge = build(&["-finstrument-functions"], "ex_judge");
    let plain = build(&[], "ex_plain");
    let want = uftrace_counts_of(dir.path(), &judge, &["12"], |n| {
        !n.starts_with("std::") && !n.contains(':') || n.starts_with("Guard::")
    });
    let alone = Command::new(&plain).arg("12").output().unwrap();
    let (out, data) = record_with(dir.path(), &plain, &["12"], &["-P", "."], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, alone.stdout, "the program's output");
    let ours: BTreeMap<String, u64> = report_counts(&data)
        .into_iter()
        .map(|(f, n)| (f.split('(').next().unwrap().to_string(), n))
        .collect();
    assert_agrees("exceptions", &ours, &want);
}

#[test]
fn a_stable_rust_release_binary_is_traced_with_its_panics() {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../preload/tests/rust/patched.rs");
    let prog = dir.path().join("rust_patched");
    let st = Command::new("rustc")
        .args(["-O", "--edition", "2021", "-o"])
        .arg(&prog)
        .arg(&src)
        .status()
        .expect("rustc");
    assert!(st.success());
    let (out, data) = record_with(dir.path(), &prog, &["40"], &["-P", "^patched::"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("caught 20"),
        "the panics were caught: {stdout}"
    );
    let printed: BTreeMap<String, u64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("calls "))
        .map(|l| {
            let (f, n) = l.split_once(' ').unwrap();
            (format!("patched::{f}"), n.parse().unwrap())
        })
        .collect();
    let ours = report_counts(&data);
    for (f, n) in &printed {
        assert_eq!(ours.get(f), Some(n), "{f}: {ours:?}");
    }
}

#[test]
fn signal_handlers_and_many_threads_are_traced_patched() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(dir.path(), "hostile.c", &["-O2"], "hostile");
    let (out, data) = record_with(dir.path(), &prog, &["signals", "100"], &["-P", "."], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ran: u64 = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .expect("the handler's count");
    assert!(ran > 0);
    assert_eq!(report_counts(&data).get("on_alarm"), Some(&ran));
    let (out, data) = record_with(dir.path(), &prog, &["threads", "300"], &["-P", "."], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report_counts(&data).get("body"), Some(&300));
}

#[test]
fn forked_and_execd_processes_run_patched_code_traced() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_calls(dir.path(), &["-O2"], "calls_fork");
    for how in ["fork", "forkexec", "exec"] {
        // Library calls off: a child's execl would make it traced before it execs.
        let opts = ["-P", ".", "--no-libcall"];
        let (out, data) = record_with(dir.path(), &prog, &["1", "4", how], &opts, &[]);
        assert!(
            out.status.success(),
            "{how}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tids: std::collections::BTreeSet<u32> =
            calls_by_tid(&data).into_iter().map(|(t, _)| t).collect();
        let want = if how == "exec" { 2 } else { 3 };
        assert_eq!(tids.len(), want, "{how}: calls from {tids:?}");
        let counts = report_counts(&data);
        // The first image's main and the child's (or the exec'd image's) own main.
        assert_eq!(counts.get("main"), Some(&2), "{how}: {counts:?}");
    }
}

#[test]
fn a_crash_in_a_patched_function_keeps_the_calls_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_calls(dir.path(), &["-O2"], "calls_crash");
    // Library calls off: boom's own strcmp would be the last call.
    let (out, data) = record_with(
        dir.path(),
        &prog,
        &["1", "4", "segv"],
        &["-P", ".", "--no-libcall"],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(128 + 11),
        "the program's SIGSEGV as the exit code"
    );
    let trace = call_trace(&data);
    assert_eq!(
        trace.last().map(String::as_str),
        Some("boom"),
        "the trace ends in boom"
    );
}

#[test]
fn without_p_an_uninstrumented_program_hears_what_p_would_patch() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_calls(dir.path(), &["-O2"], "calls_plain");
    let (out, _) = record(dir.path(), &prog, &["1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // What -v -P . says it patches is the number the hint gives.
    let (verbose, _) = record_with(dir.path(), &prog, &["1"], &["-v", "-P", "."], &[]);
    let said = String::from_utf8_lossy(&verbose.stderr);
    let line = said
        .lines()
        .find(|l| l.contains("function(s) of"))
        .unwrap_or_else(|| panic!("no plan line in:\n{said}"));
    let n: u64 = line
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap();
    assert!(n >= 8, "{line}");
    assert!(
        err.contains(&format!("-P . would patch {n} of its")),
        "{err}"
    );
}

#[test]
fn a_pattern_that_patches_nothing_leaves_the_program_unchanged_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(dir.path(), "hostile.c", &["-O2"], "hostile_f");
    let alone = Command::new(&prog).args(["threads", "3"]).output().unwrap();
    // `f` is 4 bytes at -O2 (xor; ret), shorter than the jump: refused, with its reason.
    let (out, _) = record_with(
        dir.path(),
        &prog,
        &["threads", "3"],
        &["-v", "-P", "^f$", "--no-libcall"],
        &[],
    );
    assert_eq!(out.stdout, alone.stdout, "the program ran as alone");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("f: not patched: 4 bytes, shorter than the 5-byte jump"),
        "{err}"
    );
    assert!(
        err.contains("-P named 1 function(s), and none could be patched safely"),
        "{err}"
    );
    let (out, _) = record_with(
        dir.path(),
        &prog,
        &["threads", "3"],
        &["-P", "no_such_fn", "--no-libcall"],
        &[],
    );
    assert_eq!(out.stdout, alone.stdout);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("-P named no function of it"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_bad_pattern_is_refused_before_the_program_runs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let (out, _) = record_with(
        dir.path(),
        Path::new("/bin/sh"),
        &["-c", &format!("touch {}", marker.display())],
        &["-P", "fib("],
        &[],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("record: -P/-U: pattern \"fib(\": "),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!marker.exists(), "the program did not run");
}

#[test]
fn a_librarys_functions_are_patched_when_named_with_at_lib() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let prog = build_libmain(d, |args| {
        let st = Command::new("gcc")
            .current_dir(d)
            .arg("-O2")
            .args(args)
            .status()
            .expect("gcc");
        assert!(st.success(), "gcc {args:?}");
    });
    let opts = ["-P", "main", "-P", "callee_.*@libcallee", "--no-libcall"];
    let (stdout, counts) = recorded(d, &prog, &[d.to_str().unwrap()], &opts);
    assert_eq!(stdout, "30 91\n", "the program's output");
    // sum(5) squares 0..4; run_plugin is not named, nor the dlopen'd plugin.
    let want = counts_of(&[("main", 1), ("callee_sum", 1), ("callee_square", 5)]);
    assert_eq!(counts, want);
}

#[test]
fn a_dlopened_library_is_patched_while_other_threads_run_patched_code() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let gcc = |args: &[&str]| {
        let st = Command::new("gcc")
            .current_dir(d)
            .args(["-O2", "-pthread"])
            .args(args)
            .status()
            .expect("gcc");
        assert!(st.success(), "gcc {args:?}");
    };
    build_libmain(d, gcc);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../preload/tests/c/dlopen_threads.c");
    gcc(&["-o", "dlopen_threads", src.to_str().unwrap(), "-ldl"]);
    let prog = d.join("dlopen_threads");
    let opts = ["-P", "spin", "-P", "plugin_.*@libplugin", "--no-libcall"];
    let (stdout, counts) = recorded(d, &prog, &[d.to_str().unwrap(), "4", "20000"], &opts);
    assert_eq!(stdout, "80000 calls, sum 910\n");
    let want = counts_of(&[("spin", 80000), ("plugin_sum", 10), ("plugin_square", 70)]);
    assert_eq!(counts, want);
}

#[test]
fn a_library_function_both_patched_and_called_through_the_plt_counts_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let prog = build_calls(d, &["-O2"], "calls_twice");
    let (_, through_plt) = recorded(d, &prog, &["1"], &["-P", "."]);
    let n = through_plt
        .get("strtol")
        .copied()
        .expect("strtol as a library call");
    let (_, both) = recorded(d, &prog, &["1"], &["-P", ".", "-P", "strtol@libc"]);
    assert_eq!(both.get("strtol"), Some(&n), "{both:?}");
}
