//! Helpers the perfaux test suites share, so that each lives once: where the
//! repository's test data is (`testdata/` at the root, see its
//! PROVENANCE.md), reading its `.xz` oracle texts in Rust (no `xz`
//! program), and running the oracle tools (Linux `perf`) with the
//! project's skip rule.
//!
//! The skip rule: a test whose oracle tool is absent says so on stderr
//! (`skipped: perf not found`) and returns, unless `PERFAUX_REQUIRE_ORACLES`
//! is set (CI sets it after installing every oracle), where the same absence
//! fails the test.

pub mod layers;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The environment variable under which a missing oracle tool fails a test.
pub const REQUIRE_ORACLES: &str = "PERFAUX_REQUIRE_ORACLES";

/// The repository's `testdata/` directory.
pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// A file under `testdata/` (`rel` as "perf_data/sleep.data"); panics naming
/// the path when it is missing, since every listed file is committed.
pub fn fixture(rel: &str) -> PathBuf {
    let p = testdata().join(rel);
    assert!(
        p.is_file(),
        "test data {} missing (testdata/ is part of the repository)",
        p.display()
    );
    p
}

/// The bytes of a file under `testdata/`.
pub fn fixture_bytes(rel: &str) -> Vec<u8> {
    let p = fixture(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The text of a file under `testdata/`, decompressed when it ends in
/// `.xz`.
pub fn fixture_text(rel: &str) -> String {
    let bytes = fixture_bytes(rel);
    let bytes = if rel.ends_with(".xz") {
        let mut out = Vec::new();
        lzma_rs::xz_decompress(&mut bytes.as_slice(), &mut out)
            .unwrap_or_else(|e| panic!("{rel}: bad xz data: {e:?}"));
        out
    } else {
        bytes
    };
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Whether `tool --version` runs and succeeds (no message either way).
pub fn tool_present(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether the oracle tool is there. When it is not: fails (panics) if
/// [`REQUIRE_ORACLES`] is set, else prints `skipped: TOOL not found` on
/// stderr and returns false. Use through [`require_oracle!`].
pub fn oracle(tool: &str) -> bool {
    if tool_present(tool) {
        return true;
    }
    skip(&format!("{tool} not found"));
    false
}

/// Says, past the test harness's capture, that the calling test skips
/// because `why` (an oracle that is not a program on PATH: a Python
/// package, a browser that would not start); under [`REQUIRE_ORACLES`] it
/// fails the test instead.
pub fn skip(why: &str) {
    let required = std::env::var_os(REQUIRE_ORACLES).is_some_and(|v| !v.is_empty() && v != "0");
    assert!(
        !required,
        "{why}, and {REQUIRE_ORACLES} makes the oracle tools required"
    );
    // Straight to the process's stderr: the test harness captures what
    // eprintln! prints and shows it only for failures.
    let _ = writeln!(
        std::io::stderr(),
        "skipped: {why} ({})",
        std::thread::current().name().unwrap_or("test")
    );
}

/// Returns from the calling test, visibly, when the oracle tool is absent
/// (see [`oracle`]): `require_oracle!("perf");`.
#[macro_export]
macro_rules! require_oracle {
    ($tool:expr) => {
        if !$crate::oracle($tool) {
            return;
        }
    };
}

/// What a child process gave.
#[derive(Debug)]
pub struct Run {
    /// Exit code, -1 when killed by a signal.
    pub code: i32,
    /// Standard output, lossily UTF-8.
    pub stdout: String,
    /// Standard error, lossily UTF-8.
    pub stderr: String,
}

impl Run {
    /// Whether it exited with 0.
    pub fn ok(&self) -> bool {
        self.code == 0
    }
}

/// Runs `cmd`, feeding `stdin` through a real pipe when given (perf 6.1
/// misreads AUXTRACE payloads when stdin is a regular file), and collects
/// its output. Panics naming the program when it cannot be started.
pub fn run(mut cmd: Command, stdin: Option<Vec<u8>>) -> Run {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let name = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
    let feeder = stdin.map(|bytes| {
        let mut pipe = child.stdin.take().expect("piped stdin");
        // The reader may stop early on bad input: a broken pipe is its answer.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        })
    });
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    if let Some(f) = feeder {
        f.join().expect("stdin feeder");
    }
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A `perf` command with a private HOME (so no ~/.perfconfig or buildid
/// cache of the machine changes what it prints) and no pager.
pub fn perf_command(args: &[&str], home: &Path) -> Command {
    let mut c = Command::new("perf");
    c.args(args).env("HOME", home).env("PAGER", "cat");
    c
}

/// `perf ARGS -i FILE`, or `perf ARGS -i -` with the file fed through a
/// pipe when `pipe` (the way perf 6.1 reads pipe-format files right).
pub fn perf_on_file(args: &[&str], file: &Path, pipe: bool, home: &Path) -> Run {
    let mut c = perf_command(args, home);
    if pipe {
        c.args(["-i", "-"]);
        let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        run(c, Some(bytes))
    } else {
        c.arg("-i").arg(file);
        run(c, None)
    }
}

/// A global allocator that counts, per thread, the bytes live and the peak
/// since [`CountingAlloc::reset_peak`], over the system allocator. Declare it
/// in a test binary (`#[global_allocator] static A: CountingAlloc =
/// CountingAlloc;`) to assert what a piece of code allocates; counts are per
/// thread, so tests running beside each other do not mix.
pub struct CountingAlloc;

thread_local! {
    static LIVE: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
    static PEAK: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
}

fn count(delta: isize) {
    // try_with: the thread's counters may be gone while it exits.
    let _ = LIVE.try_with(|l| {
        let v = l.get() + delta;
        l.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

impl CountingAlloc {
    /// Starts a new peak at the bytes live now; returns that level.
    pub fn reset_peak() -> isize {
        let live = LIVE.with(|l| l.get());
        PEAK.with(|p| p.set(live));
        live
    }

    /// The most bytes this thread had live since [`Self::reset_peak`],
    /// above the level it returned.
    pub fn peak_since(level: isize) -> usize {
        PEAK.with(|p| p.get() - level).max(0) as usize
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counters are thread-local cells that never allocate.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: as for `alloc`.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        count(-(layout.size() as isize));
        // SAFETY: `ptr` came from this allocator, that is from System.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        count(new as isize - layout.size() as isize);
        // SAFETY: as for `dealloc` and `alloc`.
        unsafe { std::alloc::System.realloc(ptr, layout, new) }
    }
}

/// Blocks SIGUSR2 in `cmd`'s process from before its exec: perfaux unblocks it once its
/// handlers are in, so a SIGUSR2 sent at once stays pending instead of ending the process
/// (SIGUSR2's default action) in the window before them.
pub fn block_sigusr2_until_handled(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let block = || {
        // SAFETY: an all-zero sigset_t is a valid value of the C type.
        let mut s: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `s` is a valid sigset_t on this stack.
        unsafe { libc::sigaddset(&mut s, libc::SIGUSR2) };
        // SAFETY: `s` is initialized; the old mask is not asked for.
        unsafe { libc::sigprocmask(libc::SIG_BLOCK, &s, std::ptr::null_mut()) };
        Ok(())
    };
    // SAFETY: the closure runs in the forked child before exec and calls only async-signal-safe
    // functions on its own stack.
    unsafe { cmd.pre_exec(block) };
}

/// Runs `gcc` in `dir` with `-O1 -g -finstrument-functions` and `args`; panics naming the
/// arguments if it fails (the C test programs' builds).
pub fn gcc_instrumented(dir: &Path, args: &[&str]) {
    let st = Command::new("gcc")
        .current_dir(dir)
        .args(["-O1", "-g", "-finstrument-functions"])
        .args(args)
        .status()
        .expect("gcc");
    assert!(st.success(), "gcc {args:?}");
}
