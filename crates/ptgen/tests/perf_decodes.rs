//! The oracle: Linux perf 6.1 decodes what ptgen writes, and finds in it exactly the flow
//! that ptgen single-stepped.
//!
//! The program is C compiled here with `gcc -O2`, dynamically linked (so the trace covers
//! the dynamic loader, libc's start-up and exit as well as main): a recursive fib (its
//! second call kept out of tail position, so that every invocation is a `call`), calls
//! through a function pointer (indirect calls), a switch that gcc makes a jump table
//! (indirect jumps), and a write(2) of the result. No vdso calls.

use perfaux_testutil::{perf_on_file, require_oracle};
use std::path::{Path, PathBuf};
use std::process::Command;

const PROGRAM: &str = r#"
#include <stdio.h>
#include <unistd.h>

static long fib_calls;

__attribute__((noinline)) long fib(long n) {
    fib_calls++;
    if (n < 2) return n;
    long a = fib(n - 1);
    long b = fib(n - 2);
    __asm__ volatile("" : "+r"(b)); /* no accumulator tail recursion: every fib is a call */
    return a + b;
}

__attribute__((noinline)) long twice(long x) { return 2 * x; }
__attribute__((noinline)) long plus3(long x) { return x + 3; }
long (*volatile op)(long) = twice;

__attribute__((noinline)) long sw(int k, long x) {
    switch (k) { /* a jump table at -O2 */
    case 0: return x + 11;
    case 1: return x * 7;
    case 2: return x - 5;
    case 3: return x ^ 0x55;
    case 4: return x << 2;
    case 5: return x / 3;
    case 6: return -x;
    default: return x;
    }
}

int main(int argc, char **argv) {
    long n = argc > 1 ? 10 + (argv[1][0] - '0') : 12;
    long r = fib(n);
    r = op(r);
    op = plus3;
    r = op(r);
    for (int k = 0; k < 8; k++)
        r = sw(k, r);
    char buf[64];
    int len = snprintf(buf, sizeof buf, "%ld %ld\n", r, fib_calls);
    write(1, buf, len);
    return 0;
}
"#;

/// Compiles the program into `dir`.
fn build(dir: &Path) -> PathBuf {
    let src = dir.join("prog.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("prog");
    let out = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("gcc");
    assert!(
        out.status.success(),
        "gcc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Records the program with `args`; returns the temp dir, the perf.data and what ptgen saw.
fn record(args: &[&str]) -> (tempfile::TempDir, PathBuf, perfaux_ptgen::Recorded) {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let data = dir.path().join("perf.data");
    let t = std::time::Instant::now();
    let rec = perfaux_ptgen::record(&exe, args, &data).unwrap_or_else(|e| panic!("ptgen: {e}"));
    let el = t.elapsed();
    eprintln!(
        "recorded {} instructions ({} taken branches, {} calls, {} syscalls) in {el:.2?}: {:.1} us per instruction; {} bytes of trace, {} PSBs",
        rec.instructions,
        rec.branches.len(),
        rec.calls,
        rec.syscalls,
        el.as_secs_f64() * 1e6 / rec.instructions as f64,
        rec.trace_bytes,
        rec.psbs
    );
    assert_eq!(rec.exit_code, 0);
    (dir, data, rec)
}

/// `perf script ARGS -i FILE` in `dir` (perf's HOME), which must succeed.
fn perf(args: &[&str], data: &Path, dir: &Path) -> String {
    let r = perf_on_file(args, data, false, dir);
    assert!(r.ok(), "perf {args:?} failed ({}): {}", r.code, r.stderr);
    r.stdout
}

/// One line of `perf script --itrace=be -F ip,addr,flags`: flags, from, to.
fn parse_branch(line: &str) -> Option<(String, u64, u64)> {
    let (left, right) = line.split_once("=>")?;
    let (flags, from) = left
        .trim_end()
        .rsplit_once(' ')
        .unwrap_or(("", left.trim()));
    let to = right.split_whitespace().next()?;
    Some((
        flags.trim().to_string(),
        u64::from_str_radix(from.trim(), 16).ok()?,
        u64::from_str_radix(to, 16).ok()?,
    ))
}

/// perf prints every taken branch of the ground truth, in order, and nothing else but the
/// trace's starts and ends at the system calls ("tr end syscall" from the `syscall` to 0,
/// "tr strt" from 0 to the instruction after it: the TIP.PGD/TIP.PGE pairs), and no
/// decoder errors. perf folds nothing here: with `noretcomp` every `ret` has its TIP, and
/// the not-taken conditional branches are not branches for perf either.
#[test]
fn perf_sees_every_branch_in_order() {
    require_oracle!("perf");
    require_oracle!("gcc");
    let (dir, data, rec) = record(&[]);
    let out = perf(
        &["script", "--itrace=be", "-F", "ip,addr,flags"],
        &data,
        dir.path(),
    );
    let errors: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("instruction trace error"))
        .collect();
    assert!(
        errors.is_empty(),
        "perf's decoder errors: {:#?}",
        &errors[..errors.len().min(10)]
    );
    let mut starts = 0;
    let mut ends = 0;
    let mut got = Vec::new();
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let (flags, from, to) =
            parse_branch(line).unwrap_or_else(|| panic!("unexpected perf line {line:?}"));
        if flags.starts_with("tr strt") {
            starts += 1;
        } else if flags.starts_with("tr end") {
            assert!(flags.contains("syscall"), "{line}");
            ends += 1;
        } else {
            got.push((from, to));
        }
    }
    let want: Vec<(u64, u64)> = rec.branches.iter().map(|b| (b.from, b.to)).collect();
    if let Some(i) = (0..want.len().max(got.len())).find(|&i| want.get(i) != got.get(i)) {
        let show = |v: &[(u64, u64)]| {
            v[i.saturating_sub(3)..(i + 3).min(v.len())]
                .iter()
                .map(|(f, t)| format!("{f:#x} => {t:#x}"))
                .collect::<Vec<_>>()
        };
        panic!(
            "branch {i} of {} (perf has {}) differs:\n ground truth {:#?}\n perf {:#?}",
            want.len(),
            got.len(),
            show(&want),
            show(&got)
        );
    }
    // One start at the exec, one after each system call but exit_group's; one end per call.
    assert_eq!(ends, rec.syscalls);
    assert_eq!(starts, rec.syscalls);
    assert!(
        rec.branches.len() > 10_000,
        "{} branches",
        rec.branches.len()
    );
}

/// perf's instruction samples, one per instruction (`--itrace=i1i`), are the instructions
/// ptgen stepped, address for address.
#[test]
fn perf_sees_every_instruction() {
    require_oracle!("perf");
    require_oracle!("gcc");
    let (dir, data, rec) = record(&["1"]);
    let out = perf(&["script", "--itrace=i1ie", "-F", "ip"], &data, dir.path());
    assert!(
        !out.contains("instruction trace error"),
        "perf's decoder errors"
    );
    let got: Vec<u64> = out
        .lines()
        .map(|l| u64::from_str_radix(l.trim(), 16).unwrap_or_else(|_| panic!("perf line {l:?}")))
        .collect();
    assert_eq!(rec.ips.len() as u64, rec.instructions);
    if let Some(i) = (0..got.len().max(rec.ips.len())).find(|&i| got.get(i) != rec.ips.get(i)) {
        panic!(
            "instruction {i} of {} (perf has {}): ground truth {:x?}, perf {:x?}",
            rec.ips.len(),
            got.len(),
            rec.ips.get(i),
            got.get(i)
        );
    }
}

/// The calls of fib that perf finds (`--itrace=cr` and `--call-trace`) are the program's
/// own count of fib's invocations.
#[test]
fn perf_counts_the_calls_of_fib() {
    require_oracle!("perf");
    require_oracle!("gcc");
    let (dir, data, rec) = record(&["3"]);
    let stdout = String::from_utf8_lossy(&rec.stdout).into_owned();
    let fib_calls: u64 = stdout
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("program printed {stdout:?}"));
    assert_eq!(fib_calls, 753, "fib(13) is 753 invocations");
    let out = perf(
        &["script", "--itrace=cr", "-F", "ip,sym,addr,flags"],
        &data,
        dir.path(),
    );
    let calls_to_fib = out
        .lines()
        .filter(|l| {
            // "call  FROM caller =>  TO fib"
            l.trim_start().starts_with("call")
                && l.split("=>")
                    .nth(1)
                    .and_then(|t| t.split_whitespace().nth(1))
                    == Some("fib")
        })
        .count() as u64;
    assert_eq!(calls_to_fib, fib_calls, "--itrace=cr");
    let returns = out
        .lines()
        .filter(|l| l.trim_start().starts_with("return"))
        .count() as u64;
    assert_eq!(returns, rec.returns, "--itrace=cr returns");
    let trace = perf(&["script", "--call-trace"], &data, dir.path());
    let in_trace = trace
        .lines()
        .filter(|l| l.rsplit('\t').next().is_some_and(|s| s.trim() == "fib"))
        .count() as u64;
    assert_eq!(in_trace, fib_calls, "--call-trace");
    assert!(rec.calls >= fib_calls + 3);
}

/// Code outside files (here the vdso's clock_gettime) cannot be decoded from a trace: ptgen
/// refuses it, naming the mapping.
#[test]
fn vdso_code_is_refused() {
    require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("vdso.c");
    std::fs::write(
        &src,
        "#include <time.h>\nint main(void) { struct timespec t; return clock_gettime(CLOCK_MONOTONIC, &t); }\n",
    )
    .unwrap();
    let exe = dir.path().join("vdso");
    let ok = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("gcc")
        .success();
    assert!(ok);
    let err = perfaux_ptgen::record(&exe, &[], &dir.path().join("perf.data"))
        .expect_err("the vdso is not traceable");
    assert!(err.contains("[vdso]"), "{err}");
}
