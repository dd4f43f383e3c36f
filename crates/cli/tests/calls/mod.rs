//! Helpers of the tests that trace the project's C test program
//! (crates/preload/tests/c/calls.c) with `perfaux record -- ./prog`: build it, record it, and
//! read the calls back (perfaux's call trace and report, uftrace's report).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const PERFAUX: &str = env!("CARGO_BIN_EXE_perfaux");

pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `calls.c` compiled with `flags` into `dir`.
pub fn build_calls(dir: &Path, flags: &[&str], name: &str) -> PathBuf {
    build_c(dir, "calls.c", flags, name)
}

/// The C test program `source` (in crates/preload/tests/c) compiled by gcc with `flags` (and
/// -O1 -g -pthread) into `dir`.
pub fn build_c(dir: &Path, source: &str, flags: &[&str], name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../preload/tests/c")
        .join(source);
    let out = dir.join(name);
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-pthread"])
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .expect("gcc");
    assert!(st.success(), "gcc {flags:?} failed");
    out
}

/// The C++ test program `source` (in crates/preload/tests/c) compiled by g++ with `flags` (and
/// -O1 -g) into `dir`.
pub fn build_cxx(dir: &Path, source: &str, flags: &[&str], name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../preload/tests/c")
        .join(source);
    let out = dir.join(name);
    let st = Command::new("g++")
        .args(["-O1", "-g"])
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .expect("g++");
    assert!(st.success(), "g++ {flags:?} failed");
    out
}

/// crates/preload/tests/c's libmain in `dir`, with the library it links (libcallee.so) and the
/// one it dlopens (libplugin.so), each compiled by `gcc` (the arguments after the compiler's
/// own flags, run in `dir`); the program's path.
pub fn build_libmain(dir: &Path, gcc: impl Fn(&[&str])) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../preload/tests/c");
    let lib = src.join("lib.c");
    let lib = lib.to_str().unwrap();
    gcc(&["-fPIC", "-shared", "-o", "libcallee.so", lib]);
    gcc(&["-fPIC", "-shared", "-DPLUGIN", "-o", "libplugin.so", lib]);
    let main = src.join("libmain.c");
    gcc(&[
        "-o",
        "libmain",
        main.to_str().unwrap(),
        "-L.",
        "-lcallee",
        "-Wl,-rpath,$ORIGIN",
        "-ldl",
    ]);
    dir.join("libmain")
}

pub fn record(dir: &Path, prog: &Path, args: &[&str]) -> (Output, PathBuf) {
    record_with(dir, prog, args, &[], &[])
}

/// [`record`] with `perfaux record` options `opts` and the environment `env`.
pub fn record_with(
    dir: &Path,
    prog: &Path,
    args: &[&str],
    opts: &[&str],
    env: &[(&str, &Path)],
) -> (Output, PathBuf) {
    let data = dir.join(format!(
        "{}.data",
        prog.file_name().unwrap().to_string_lossy()
    ));
    // In `dir`: a -pg program writes gmon.out where it runs.
    let out = Command::new(PERFAUX)
        .current_dir(dir)
        .envs(env.iter().copied())
        .arg("record")
        .args(opts)
        .arg("-o")
        .arg(&data)
        .arg("--")
        .arg(prog)
        .args(args)
        .output()
        .expect("perfaux record");
    (out, data)
}

/// The call lines of `perfaux script --call-trace` (trace starts and ends left out), each
/// split into its whitespace-separated fields.
pub fn call_fields(data: &Path) -> Vec<Vec<String>> {
    let out = Command::new(PERFAUX)
        .args(["script", "--call-trace", "-i"])
        .arg(data)
        .output()
        .expect("perfaux script");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains("tr end") && !l.contains("tr strt"))
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// (tid, function) of every call of `perfaux script --call-trace`, in order.
pub fn calls_by_tid(data: &Path) -> Vec<(u32, String)> {
    call_fields(data)
        .into_iter()
        .map(|f| {
            let tid = f[1].parse().unwrap_or_else(|_| panic!("tid in {f:?}"));
            (tid, f[f.len() - 1].clone())
        })
        .collect()
}

/// The functions of `perfaux script --call-trace` (the last field) in order.
pub fn call_trace(data: &Path) -> Vec<String> {
    calls_by_tid(data).into_iter().map(|(_, f)| f).collect()
}

/// The rows of `perfaux report`'s function table, each split into its 12 fields: total, self,
/// calls, avg, min, max (each time a number and a unit), function. At least one row.
pub fn report_rows(data: &Path) -> Vec<Vec<String>> {
    let out = Command::new(PERFAUX)
        .args(["report", "--stdio", "-i"])
        .arg(data)
        .output()
        .expect("perfaux report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Vec<String>> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("===="))
        .skip(1)
        .map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .take_while(|f| f.len() >= 12)
        // A name with spaces (`operator new(unsigned long)`) is the twelfth field whole.
        .map(|mut f| {
            let name = f[11..].join(" ");
            f.truncate(11);
            f.push(name);
            f
        })
        .collect();
    assert!(!rows.is_empty(), "no rows in:\n{text}");
    rows
}

/// `perfaux report`'s Calls column per function (the report counts calls as uftrace's does).
pub fn report_counts(data: &Path) -> BTreeMap<String, u64> {
    report_rows(data)
        .into_iter()
        .map(|f| {
            let calls = f[4]
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("calls in {f:?}"));
            (f[11].clone(), calls)
        })
        .collect()
}

pub fn counts(names: &[String]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for n in names {
        *m.entry(n.clone()).or_insert(0) += 1;
    }
    m
}

/// `uftrace report`'s call count per function of the program (library calls and kernel
/// events left out: uftrace records PLT calls that -finstrument-functions does not see).
pub fn uftrace_counts(dir: &Path, prog: &Path, args: &[&str]) -> BTreeMap<String, u64> {
    uftrace_counts_of(dir, prog, args, |name| !name.contains(':'))
}

/// `uftrace report`'s call count of each function whose name `keep` takes.
pub fn uftrace_counts_of(
    dir: &Path,
    prog: &Path,
    args: &[&str],
    keep: impl Fn(&str) -> bool,
) -> BTreeMap<String, u64> {
    uftrace_counts_with(dir, prog, args, &["--no-libcall"], keep)
}

/// `uftrace record OPTS -d DIR/NAME PROG ARGS` (run in `dir`): the data directory.
pub fn uftrace_record(
    dir: &Path,
    prog: &Path,
    args: &[&str],
    opts: &[&str],
    name: &str,
) -> PathBuf {
    let d = dir.join(name);
    let st = Command::new("uftrace")
        .current_dir(dir)
        .arg("record")
        .args(opts)
        .arg("-d")
        .arg(&d)
        .arg(prog)
        .args(args)
        .output()
        .expect("uftrace record");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    d
}

/// [`uftrace_counts_of`] with the `uftrace record` options `opts` (library calls on unless
/// they say `--no-libcall`).
pub fn uftrace_counts_with(
    dir: &Path,
    prog: &Path,
    args: &[&str],
    opts: &[&str],
    keep: impl Fn(&str) -> bool,
) -> BTreeMap<String, u64> {
    let d = uftrace_record(dir, prog, args, opts, "uftrace.data");
    let rep = Command::new("uftrace")
        .args(["report", "-f", "call", "-d"])
        .arg(&d)
        .output()
        .expect("uftrace report");
    let mut m = BTreeMap::new();
    for l in String::from_utf8_lossy(&rep.stdout).lines() {
        let mut f = l.split_whitespace();
        let (Some(n), Some(name)) = (f.next().and_then(|n| n.parse::<u64>().ok()), f.next()) else {
            continue;
        };
        if keep(name) {
            m.insert(name.to_owned(), n);
        }
    }
    m
}

/// The first line of `perf ARGS -i data`'s output that `pick` takes (a panic naming `what`
/// and showing the output if none does).
pub fn perf_line(data: &Path, args: &[&str], what: &str, pick: impl Fn(&str) -> bool) -> String {
    let out = Command::new("perf")
        .args(args)
        .arg("-i")
        .arg(data)
        .output()
        .expect("perf");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| pick(l))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no {what} in perf {args:?}:\n{text}"))
}

/// `perf script --show-task-events` of `data` (perf 6.1 must read it without an error).
pub fn perf_task_events(data: &Path) -> String {
    let home = tempfile::tempdir().unwrap();
    let r =
        perfaux_testutil::perf_on_file(&["script", "--show-task-events"], data, false, home.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.stdout
}

/// The directory of package `name` (a dependency of the workspace: its bundled C sources),
/// from `cargo metadata`.
pub fn package_dir(name: &str) -> Option<PathBuf> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let manifest = meta["packages"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)?["manifest_path"]
        .as_str()?
        .to_owned();
    Path::new(&manifest).parent().map(Path::to_path_buf)
}
