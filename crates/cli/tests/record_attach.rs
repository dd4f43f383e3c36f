//! `perfaux record -p PID` and `-t TID` (issue 23 item 5): the running kernel's events of a
//! process already running, as `perf record -p` records them. Judged by perf 6.1 recording
//! the same process at the same time: samples per function within 10%; the threads it has
//! and the threads it makes are sampled and named; its switches are recorded; Ctrl-C ends the
//! recording and the process goes on; what cannot be had is refused saying why.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{PERFAUX, path_str, perfaux, tempdir};

/// `attachee ROUNDS NAPS [GO]`: waits 150 ms (or until the file GO exists), then works about
/// 0.3 s a round in heavy, medium and light (3:2:1), with frame pointers, while a second
/// thread made then spins in `late_worker_spin`; then sleeps NAPS times 20 ms in `nap`
/// (switches out and in).
const PROG: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#define UNIT 40000000UL
static volatile unsigned long sink;
__attribute__((noinline)) unsigned long mix(unsigned long x) { return x ^ (x >> 7); }
__attribute__((noinline)) unsigned long heavy(unsigned long x) {
    for (unsigned long i = 0; i < 3 * UNIT; i++) x = x * 6364136223846793005UL + i;
    return mix(x);
}
__attribute__((noinline)) unsigned long medium(unsigned long x) {
    for (unsigned long i = 0; i < 2 * UNIT; i++) x = x * 2862933555777941757UL + i;
    return mix(x);
}
__attribute__((noinline)) unsigned long light(unsigned long x) {
    for (unsigned long i = 0; i < UNIT; i++) x = x * 3935559000370003845UL + i;
    return mix(x);
}
__attribute__((noinline)) void nap(void) {
    struct timespec t = {0, 20000000};
    nanosleep(&t, 0);
}
__attribute__((noinline)) unsigned long late_worker_spin(unsigned long x) {
    for (unsigned long i = 0; i < 4 * UNIT; i++) x = x * 6364136223846793005UL + i;
    return mix(x);
}
static void *late_worker(void *a) {
    sink = late_worker_spin((unsigned long)a);
    return a;
}
int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 1;
    int naps = argc > 2 ? atoi(argv[2]) : 0;
    /* The work starts once the file argv[3] exists (the recorders attached), else 150 ms in. */
    struct timespec tick = {0, 10000000};
    for (int i = 0; argc > 3 ? access(argv[3], F_OK) != 0 : i < 15; i++) nanosleep(&tick, 0);
    pthread_t t;
    pthread_create(&t, 0, late_worker, (void *)1);
    unsigned long x = 1;
    for (int i = 0; i < rounds; i++) { x = heavy(x); x = medium(x); x = light(x); }
    pthread_join(t, 0);
    for (int i = 0; i < naps; i++) nap();
    printf("%lu\n", x & 1);
    return 0;
}
"#;

fn build(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("attachee.c"), PROG).unwrap();
    let st = Command::new("gcc")
        .current_dir(dir)
        .args(["-O2", "-g", "-pthread", "-fno-omit-frame-pointer"])
        .args([
            "-fno-optimize-sibling-calls",
            "attachee.c",
            "-o",
            "attachee",
        ])
        .status()
        .expect("gcc");
    assert!(st.success());
    dir.join("attachee")
}

/// The program running, started by the test (it is the test's child: root or not, its
/// owner may record it).
fn start(prog: &Path, args: &[&str]) -> Child {
    let child = Command::new(prog)
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The spawn returns once the exec replaced the child's memory, a moment before the
    // kernel renames it (`begin_new_exec`): the name /proc gives the recorder is the
    // program's only after that.
    let comm = format!("/proc/{}/comm", child.id());
    let name = prog.file_name().unwrap().to_string_lossy().to_string();
    for _ in 0..1000 {
        if std::fs::read_to_string(&comm).is_ok_and(|c| c.trim_end() == name) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    child
}

/// `perfaux record -p PID OPTS -o DATA`, started (it ends with the process).
fn perfaux_attach(pid: u32, data: &Path, opts: &[&str]) -> Child {
    Command::new(PERFAUX)
        .args(["record", "-p", &pid.to_string(), "-o", path_str(data)])
        .args(opts)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finished(c: Child, what: &str) -> String {
    let out = c.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{what}: {stderr}");
    stderr
}

/// perf script's samples of `data`: (tid, comm, leaf symbol).
fn samples(data: &Path, home: &Path) -> Vec<(u32, String, String)> {
    let r = perfaux_testutil::perf_on_file(
        &["script", "-F", "comm,tid,ip,sym", "-G"],
        data,
        false,
        home,
    );
    assert!(r.ok(), "perf script: {}", r.stderr);
    r.stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((
                f.get(1)?.parse().ok()?,
                f[0].to_string(),
                f.get(3)?.to_string(),
            ))
        })
        .collect()
}

/// `perfaux record -p` and `perf record -p` on the same running process at once: every
/// function with 5% of the samples or more has as many in both within 10%, perf reads
/// perfaux's file without warnings, and the thread the process made after the attach is
/// sampled too, under the process's name.
#[test]
fn attaching_samples_a_running_process_as_perf_record_p_does() {
    perfaux_testutil::require_oracle!("perf");
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    let prog = build(d.path());
    let go = d.path().join("go");
    let child = start(&prog, &["3", "0", path_str(&go)]);
    let pid = child.id();
    let ours = d.path().join("perfaux.data");
    let theirs = d.path().join("perf.data");
    let a = perfaux_attach(pid, &ours, &["-F", "999", "-g"]);
    let b = perfaux_testutil::perf_command(
        &[
            "record",
            "-q",
            "-e",
            "cpu-clock:u",
            "-F",
            "999",
            "-g",
            "-p",
            &pid.to_string(),
            "-o",
        ],
        d.path(),
    )
    .arg(path_str(&theirs))
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Both attached (perf takes some 100 ms to start), the work begins: both see all of it.
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::write(&go, b"").unwrap();
    let stderr = finished(a, "perfaux record -p");
    assert!(stderr.contains(&format!("process {pid}")), "{stderr}");
    finished(b, "perf record -p");
    let mut child = child;
    assert!(child.wait().unwrap().success());
    let (x, y) = (
        common::perf_samples_by_symbol(&ours, d.path()),
        common::perf_samples_by_symbol(&theirs, d.path()),
    );
    let total: u64 = y.values().sum();
    let mut big: Vec<&String> = y.keys().filter(|k| y[*k] * 20 >= total).collect();
    big.sort();
    assert!(
        ["heavy", "late_worker_spin", "medium"]
            .iter()
            .all(|f| big.iter().any(|b| b == f)),
        "perf {y:?}"
    );
    for f in big {
        let (a, b) = (x.get(f).copied().unwrap_or(0) as f64, y[f] as f64);
        assert!(
            (a - b).abs() <= 0.10 * b,
            "{f}: perfaux {a}, perf {b}\nperfaux {x:?}\nperf {y:?}"
        );
    }
    // The worker made after the attach: its own tid, the process's name.
    let s = samples(&ours, d.path());
    let late: Vec<_> = s
        .iter()
        .filter(|(_, _, f)| f == "late_worker_spin")
        .collect();
    assert!(!late.is_empty());
    assert!(
        late.iter().all(|(t, c, _)| *t != pid && c == "attachee"),
        "{late:?}"
    );
    assert!(s.iter().all(|(_, c, _)| c == "attachee"), "{:?}", &s[..3]);
}

/// A process's context switches are recorded as with a program started under perfaux: its
/// 5 naps of 20 ms each switch out and back in.
#[test]
fn attaching_records_the_processs_switches() {
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    let prog = build(d.path());
    let child = start(&prog, &["0", "5"]);
    let pid = child.id();
    let data = d.path().join("sw.data");
    // Only the switches: a counter the kernel has in user mode, never sampled here.
    let a = perfaux_attach(pid, &data, &["-e", "page-faults", "-c", "1000000000"]);
    finished(a, "perfaux record -p");
    let mut child = child;
    assert!(child.wait().unwrap().success());
    let r = perfaux(&["script", "--show-switch-events", "-i", path_str(&data)]);
    assert!(r.ok(), "{}", r.stderr);
    let outs = r
        .stdout
        .lines()
        .filter(|l| l.contains("PERF_RECORD_SWITCH") && l.contains("OUT"))
        .count();
    assert!(outs >= 5, "{outs} switches out:\n{}", r.stdout);
}

/// Ctrl-C (SIGINT to perfaux) ends the recording: the file is written and readable, and the
/// process goes on running.
#[test]
fn ctrl_c_ends_the_recording_and_the_process_goes_on() {
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    let prog = build(d.path());
    let mut child = start(&prog, &["6"]);
    let pid = child.id();
    let data = d.path().join("int.data");
    let a = perfaux_attach(pid, &data, &["-F", "999"]);
    std::thread::sleep(Duration::from_millis(400));
    // SAFETY: kill(2) of our own child process.
    assert_eq!(unsafe { libc::kill(a.id() as i32, libc::SIGINT) }, 0);
    finished(a, "perfaux record -p");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the process ended with the recording"
    );
    let r = perfaux(&["report", "-i", path_str(&data)]);
    assert!(r.ok(), "{}", r.stderr);
    assert!(r.stdout.contains("cpu-clock"), "{}", r.stdout);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// What `-p` cannot do is refused with why: no such process; an event of the trace; a
/// command besides; `-t` threads of two processes; -S.
#[test]
fn what_attaching_cannot_do_is_refused_with_why() {
    let d = tempdir();
    let data = d.path().join("x.data");
    let x = path_str(&data);
    let me = std::process::id().to_string();
    let cases: [(&[&str], &str); 5] = [
        (&["-p", "999999999"], "no process 999999999"),
        (&["-p", &me, "-e", "swtrace//"], "needs the call trace"),
        (&["-p", &me, "--", "true"], "give one of them"),
        (&["-t", &format!("{me},1")], "more than one process"),
        (&["-p", &me, "-S"], "-S with -p"),
    ];
    for (args, says) in cases {
        let mut a = vec!["record", "-o", x];
        a.extend_from_slice(args);
        let r = perfaux(&a);
        assert!(!r.ok(), "{args:?}");
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
        assert!(!data.exists(), "{args:?} left a file");
    }
}

/// `-t TID`: only that thread, as perf's `-t` (no inherit: not the threads it makes): the
/// process's main thread spins in heavy, medium and light, and none of its worker's samples
/// are taken.
#[test]
fn a_thread_alone_is_recorded_with_t() {
    perfaux_testutil::require_oracle!("perf");
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    let prog = build(d.path());
    let mut child = start(&prog, &["2"]);
    let pid = child.id();
    let data = d.path().join("t.data");
    let a = Command::new(PERFAUX)
        .args([
            "record",
            "-t",
            &pid.to_string(),
            "-F",
            "999",
            "-o",
            path_str(&data),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finished(a, "perfaux record -t");
    assert!(child.wait().unwrap().success());
    let s = samples(&data, d.path());
    assert!(s.iter().any(|(_, _, f)| f == "heavy"), "{s:?}");
    assert!(
        s.iter().all(|(t, _, _)| *t == pid),
        "{:?}",
        s.iter().find(|(t, _, _)| *t != pid)
    );
}

/// As root: an ordinary user (uid 65534) records their own running process (with
/// `perf_event_paranoid` 2 or lower), and is refused another user's, told whose it is and
/// what would allow it; no file is left then.
#[test]
fn an_ordinary_user_records_their_own_process_and_not_anothers() {
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    let Some(_) = common::perfaux_as_ordinary_user(d.path()) else {
        return;
    };
    let prog = build(d.path());
    let paranoid = common::perf_event_paranoid();
    // Root's process.
    let mut roots = start(&prog, &["2"]);
    let data = d.path().join("other.data");
    let out = common::perfaux_as_ordinary_user(d.path())
        .unwrap()
        .args([
            "record",
            "-p",
            &roots.id().to_string(),
            "-o",
            path_str(&data),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("process {} is uid 0's, not yours", roots.id())),
        "{stderr}"
    );
    assert!(!data.exists());
    roots.kill().unwrap();
    roots.wait().unwrap();
    if paranoid > 2 {
        return;
    }
    // Their own.
    let mut own = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&prog)
        .arg("2")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // setpriv execs the program: the same pid.
    std::thread::sleep(Duration::from_millis(20));
    let data = d.path().join("own.data");
    let out = common::perfaux_as_ordinary_user(d.path())
        .unwrap()
        .args([
            "record",
            "-p",
            &own.id().to_string(),
            "-F",
            "999",
            "-o",
            path_str(&data),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(own.wait().unwrap().success());
    let r = perfaux(&["report", "-i", path_str(&data), "--sort", "sym"]);
    assert!(r.ok(), "{}", r.stderr);
    assert!(r.stdout.contains("heavy"), "{}", r.stdout);
}
