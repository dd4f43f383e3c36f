//! The running kernel as oracle: the same generated attrs, target (the
//! calling thread, any CPU), group and flags go through the real
//! `perf_event_open` and through perfaux-core's, and the two answers
//! (success, or the errno) must agree.
//!
//! Case families (`kernel_diff/gen.rs`):
//! 1. single rules: every bit of every bitwise attr field and of the open
//!    flags flipped alone (also with the sample_type bit that makes
//!    branch_sample_type and the register masks count, and on a sampling
//!    event), and a list of values for every other field (size, type,
//!    config, periods, freq, clockid with use_clockid, stack sizes, ...),
//!    on dummy and on task-clock;
//! 2. every pair of a list of violations (each refused alone, errnos from
//!    every stage of the syscall), on both events;
//! 3. 5,000 seeded random near-valid attrs (splitmix64, seed
//!    [`RANDOM_SEED`]), one to five mutations each, on every software
//!    event both sides have (cpu-clock, the fault, switch and migration
//!    counters, alignment/emulation faults, bpf-output, dummy,
//!    task-clock);
//! 4. group cases: every leader of a list with every member of the same
//!    list, under every member open flag (none, FD_NO_GROUP, FD_OUTPUT,
//!    both, FD_SAMPLE), with and without a buffer mapped on the leader, and
//!    bad group fds;
//! 5. group growth until refusal (perf_event_validate_size), for the
//!    leader's, the first sibling's and the new member's read_format, and
//!    groups that are never refused (capped): of counters, and of sampling
//!    task-clocks (each with its timer).
//!
//! Expected differences, the only ones tolerated (see [`explain`]):
//! - the kernel version: this kernel's `sizeof(struct perf_event_attr)`
//!   is read at run time from the E2BIG write-back of the real syscall;
//!   where it is below VER9 (144), the v6.19 additions perfaux models are
//!   refused by the kernel: non-zero bytes past its sizeof (config4) and
//!   flag bits 38/39 (defer_callchain, defer_output);
//! - perfaux's extensions: the open flag PERF_FLAG_FD_SAMPLE and
//!   `attr.uevents` (flag bit 63) (its record type and the uevent PMUs are
//!   not generated here);
//! - events only one side has: a software config whose plain attr opens
//!   on one side only (read at run time, printed), and PMU types other
//!   than PERF_TYPE_SOFTWARE;
//! - privilege, when not root: the kernel's EACCES for what
//!   perf_event_paranoid forbids.
//!
//! A random or paired case that disagrees is shrunk (its mutations dropped
//! one at a time while it still disagrees) and printed by field name and
//! value. Skips visibly where perf_event_open is not allowed.

#[path = "kernel_diff/gen.rs"]
mod generator;

use generator::{Base, Case, Field, MEMBER_FLAGS, Mutation};
use perfaux_abi::attr::PerfEventAttr;
use perfaux_abi::consts::*;
use perfaux_abi::errno;
use perfaux_core::{EventFd, Mmap, Prot, Target};

/// The seed of family 3.
const RANDOM_SEED: u64 = 0x5eed_0012;
/// Family 3's size.
const RANDOM_CASES: usize = 5_000;
/// Members a never-refused group grows to.
const GROWTH_CAP: usize = 700;

/// What the test learns of the kernel before it starts.
struct Env {
    kernel_size: u32,
    privileged: bool,
    /// Software configs whose plain attr opens on one side only.
    one_sided: Vec<u64>,
}

/// An answer: 0 for success, else the errno.
type Answer = i32;

fn errno_name(a: Answer) -> String {
    if a == 0 {
        "success".into()
    } else {
        errno::name(a).into()
    }
}

/// The real syscall on the calling thread, any CPU.
fn kernel_open(bytes: &mut [u8], group_fd: i32, flags: u64) -> Result<i32, i32> {
    // SAFETY: `bytes` is a writable attr buffer of at least a page (the
    // kernel reads at most `attr.size` <= PAGE_SIZE bytes of it and may
    // write `attr.size` back); the other arguments are plain integers.
    let r = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            bytes.as_mut_ptr(),
            0 as libc::pid_t,
            -1 as libc::c_int,
            group_fd as libc::c_int,
            flags as libc::c_ulong,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(r as i32)
    }
}

fn kernel_close(fd: i32) {
    // SAFETY: `fd` came from kernel_open and is closed once.
    unsafe { libc::close(fd) };
}

fn perfaux_open(bytes: &mut [u8], group_fd: i32, flags: u64) -> Result<EventFd, i32> {
    perfaux_pmus::register();
    let tid = perfaux_core::Target::current();
    debug_assert!(matches!(tid, Target::Thread(_)));
    perfaux_core::perf_event_open(bytes, tid, -1, group_fd, flags).map_err(|e| e.errno)
}

fn answer<T>(r: &Result<T, i32>) -> Answer {
    match r {
        Ok(_) => 0,
        Err(e) => *e,
    }
}

/// Both sides' answers to one open outside a group; every fd closed.
fn run_single(env: &Env, case: &Case) -> (Answer, Answer) {
    let (attr, flags) = case.build(env.kernel_size);
    let mut kb = Case::bytes(&attr);
    let mut pb = kb.clone();
    let k = kernel_open(&mut kb, -1, flags);
    let p = perfaux_open(&mut pb, -1, flags);
    if let Ok(fd) = k {
        kernel_close(fd);
    }
    (answer(&k), answer(&p))
}

/// Why a disagreement is expected, if it is (the module doc's list).
fn explain(
    env: &Env,
    attr: &PerfEventAttr,
    flags: u64,
    k: Answer,
    bytes: &[u8],
) -> Option<&'static str> {
    if flags & ext::PERF_FLAG_FD_SAMPLE != 0 {
        return Some("perfaux extension: PERF_FLAG_FD_SAMPLE");
    }
    if attr.flags.bits() & (1 << ext::ATTR_FLAG_UEVENTS_BIT) != 0 {
        return Some("perfaux extension: attr.uevents");
    }
    if env.kernel_size < PERF_ATTR_SIZE_VER9 {
        if attr.flags.bits() & (3 << 38) != 0 {
            return Some("newer than the kernel: defer_callchain/defer_output (v6.19)");
        }
        let end = (attr.size as usize).min(PERF_ATTR_SIZE_VER9 as usize);
        let start = env.kernel_size as usize;
        if attr.size as usize <= 4096 && end > start && bytes[start..end].iter().any(|&b| b != 0) {
            return Some("newer than the kernel: fields past its sizeof (config4, v6.19)");
        }
    }
    if attr.type_ != PERF_TYPE_SOFTWARE {
        return Some("events only one side has: another PMU type");
    }
    if env.one_sided.contains(&attr.config) {
        return Some("events only one side has: software config");
    }
    if !env.privileged && k == errno::EACCES {
        return Some("privilege: perf_event_paranoid");
    }
    None
}

fn disagrees(env: &Env, case: &Case) -> bool {
    let (k, p) = run_single(env, case);
    let (attr, flags) = case.build(env.kernel_size);
    k != p && explain(env, &attr, flags, k, &Case::bytes(&attr)).is_none()
}

/// Drops mutations one at a time while the case still disagrees.
fn shrink(env: &Env, case: &Case) -> Case {
    let mut best = case.clone();
    loop {
        let mut smaller = None;
        for i in 0..best.muts.len() {
            let mut c = best.clone();
            c.muts.remove(i);
            if disagrees(env, &c) {
                smaller = Some(c);
                break;
            }
        }
        match smaller {
            Some(c) => best = c,
            None => return best,
        }
    }
}

#[derive(Default)]
struct Tally {
    cases: usize,
    agreed: usize,
    explained: std::collections::BTreeMap<&'static str, usize>,
    failures: Vec<String>,
}

impl Tally {
    fn record(&mut self, what: &str, k: Answer, p: Answer, why: Option<&'static str>) {
        self.cases += 1;
        if k == p {
            self.agreed += 1;
        } else if let Some(why) = why {
            *self.explained.entry(why).or_default() += 1;
        } else if self.failures.len() < 40 {
            self.failures.push(format!(
                "{what}: kernel {}, perfaux {}",
                errno_name(k),
                errno_name(p)
            ));
        } else {
            self.failures.push(String::new());
        }
    }
}

fn single_family(env: &Env, t: &mut Tally, cases: &[Case], shrink_failures: bool) {
    for case in cases {
        let (k, p) = run_single(env, case);
        let (attr, flags) = case.build(env.kernel_size);
        let why = explain(env, &attr, flags, k, &Case::bytes(&attr));
        if k != p && why.is_none() && shrink_failures && t.failures.len() < 40 {
            let small = shrink(env, case);
            let (sk, sp) = run_single(env, &small);
            t.record(
                &format!("{} (shrunk from {})", small.describe(), case.describe()),
                sk,
                sp,
                None,
            );
        } else {
            t.record(&case.describe(), k, p, why);
        }
    }
}

/// An event open on both sides (kernel fd, perfaux fd) with its mappings.
struct Pair {
    kernel: Result<i32, i32>,
    perfaux: Result<EventFd, i32>,
    kernel_map: Option<(*mut libc::c_void, usize)>,
    perfaux_map: Option<Mmap>,
}

impl Pair {
    fn open(
        env: &Env,
        case: &Case,
        group: Option<&Pair>,
        extra_flags: u64,
    ) -> (Pair, Answer, Answer, Option<&'static str>) {
        let (attr, flags) = case.build(env.kernel_size);
        let flags = flags | extra_flags;
        let mut kb = Case::bytes(&attr);
        let mut pb = kb.clone();
        let (kg, pg) = match group {
            Some(g) => (
                *g.kernel.as_ref().unwrap_or(&-1),
                g.perfaux.as_ref().map_or(-1, |e| e.as_raw()),
            ),
            None => (-1, -1),
        };
        let kernel = kernel_open(&mut kb, kg, flags);
        let perfaux = perfaux_open(&mut pb, pg, flags);
        let (k, p) = (answer(&kernel), answer(&perfaux));
        let why = explain(env, &attr, flags, k, &Case::bytes(&attr));
        let pair = Pair {
            kernel,
            perfaux,
            kernel_map: None,
            perfaux_map: None,
        };
        (pair, k, p, why)
    }

    /// Maps a one-page data buffer on both sides; both answers.
    fn map(&mut self) -> (Answer, Answer) {
        let len = 2 * perfaux_core::page_size();
        let k = match self.kernel {
            Ok(fd) => {
                // SAFETY: a fresh shared mapping of a perf fd; unmapped in
                // Drop with the same length.
                let p = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_SHARED,
                        fd,
                        0,
                    )
                };
                if p == libc::MAP_FAILED {
                    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
                } else {
                    self.kernel_map = Some((p, len));
                    0
                }
            }
            Err(e) => e,
        };
        let p = match &self.perfaux {
            Ok(e) => match e.mmap(0, 2, Prot::READ_WRITE) {
                Ok(m) => {
                    self.perfaux_map = Some(m);
                    0
                }
                Err(e) => e.errno,
            },
            Err(e) => *e,
        };
        (k, p)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        if let Some((p, len)) = self.kernel_map.take() {
            // SAFETY: the mapping made in `map`, unmapped once.
            unsafe { libc::munmap(p, len) };
        }
        if let Ok(fd) = self.kernel {
            kernel_close(fd);
        }
    }
}

fn group_family(env: &Env, t: &mut Tally) {
    let specs = generator::group_specs();
    for leader in &specs {
        for member in &specs {
            for &mflags in &MEMBER_FLAGS {
                for mapped in [false, true] {
                    let what = format!(
                        "leader [{}]{}, member [{}], open flags {mflags:#x}",
                        leader.describe(),
                        if mapped { " mapped" } else { "" },
                        member.describe()
                    );
                    let (mut l, k, p, why) = Pair::open(env, leader, None, 0);
                    t.record(&format!("{what}: the leader"), k, p, why);
                    if k != 0 || p != 0 {
                        continue;
                    }
                    if mapped {
                        let (k, p) = l.map();
                        t.record(&format!("{what}: the leader's mmap"), k, p, None);
                    }
                    let (m, k, p, why) = Pair::open(env, member, Some(&l), mflags);
                    t.record(&what, k, p, why);
                    drop(m);
                }
            }
        }
    }
    // group_fd that is no perf event: -2, and a pipe's fd on both sides.
    let mut fds = [0; 2];
    // SAFETY: `fds` is a writable array of two ints.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    for g in [-2, fds[0]] {
        for base in [Base::Dummy, Base::TaskClock] {
            let case = Case::new(base, &[]);
            let (attr, flags) = case.build(env.kernel_size);
            let mut kb = Case::bytes(&attr);
            let mut pb = kb.clone();
            let k = kernel_open(&mut kb, g, flags);
            let p = perfaux_open(&mut pb, g, flags);
            if let Ok(fd) = k {
                kernel_close(fd);
            }
            t.record(
                &format!("group_fd {g} (no perf event)"),
                answer(&k),
                answer(&p),
                None,
            );
        }
    }
    for fd in fds {
        kernel_close(fd);
    }
}

/// Grows a group on one side; the answer of every open, up to and with the
/// first refusal.
fn grow<F, H>(leader: &Case, first: &Case, rest: &Case, env: &Env, mut open: F) -> Vec<Answer>
where
    F: FnMut(&mut [u8], i32) -> Result<H, i32>,
    H: GroupFd,
{
    let mut held = Vec::new();
    let mut answers = Vec::new();
    let (la, lflags) = leader.build(env.kernel_size);
    let _ = lflags;
    let l = match open(&mut Case::bytes(&la), -1) {
        Ok(h) => h,
        Err(e) => return vec![e],
    };
    answers.push(0);
    loop {
        let spec = if held.is_empty() { first } else { rest };
        let (a, _) = spec.build(env.kernel_size);
        match open(&mut Case::bytes(&a), l.fd()) {
            Ok(h) => {
                held.push(h);
                answers.push(0);
            }
            Err(e) => {
                answers.push(e);
                break;
            }
        }
        if held.len() >= GROWTH_CAP {
            break;
        }
    }
    answers
}

/// A group leader's fd on one side (closed on drop).
trait GroupFd {
    fn fd(&self) -> i32;
}

struct KernelFd(i32);

impl GroupFd for KernelFd {
    fn fd(&self) -> i32 {
        self.0
    }
}

impl Drop for KernelFd {
    fn drop(&mut self) {
        kernel_close(self.0);
    }
}

impl GroupFd for EventFd {
    fn fd(&self) -> i32 {
        self.as_raw()
    }
}

fn growth_family(env: &Env, t: &mut Tally) {
    let rf = |base, r: u64| Case::new(base, &[Mutation::Set(Field::ReadFormat, r)]);
    let all = PERF_FORMAT_TOTAL_TIME_ENABLED
        | PERF_FORMAT_TOTAL_TIME_RUNNING
        | PERF_FORMAT_ID
        | PERF_FORMAT_GROUP
        | PERF_FORMAT_LOST;
    let variants = [
        (
            "every read_format",
            rf(Base::Dummy, all),
            rf(Base::Dummy, all),
            rf(Base::Dummy, all),
        ),
        (
            "the leader's read_format",
            rf(Base::TaskClock, all),
            rf(Base::Dummy, 0),
            rf(Base::Dummy, 0),
        ),
        (
            "a sibling's read_format",
            rf(Base::Dummy, 0),
            rf(Base::Dummy, all),
            rf(Base::Dummy, 0),
        ),
        (
            "the new member's read_format",
            rf(Base::Dummy, 0),
            rf(Base::Dummy, 0),
            rf(Base::TaskClock, all & !PERF_FORMAT_LOST),
        ),
        (
            "no read_format (capped)",
            rf(Base::Dummy, 0),
            rf(Base::TaskClock, 0),
            rf(Base::Dummy, 0),
        ),
        (
            "sampling task-clocks (capped)",
            rf(Base::TaskClock, 0),
            rf(Base::TaskClock, 0),
            Case::new(
                Base::TaskClock,
                &[Mutation::Set(Field::SamplePeriod, 1_000_000)],
            ),
        ),
    ];
    for (what, leader, first, rest) in &variants {
        let k = grow(leader, first, rest, env, |b, g| {
            kernel_open(b, g, PERF_FLAG_FD_CLOEXEC).map(KernelFd)
        });
        let p = grow(leader, first, rest, env, |b, g| {
            perfaux_open(b, g, PERF_FLAG_FD_CLOEXEC)
        });
        for i in 0..k.len().max(p.len()) {
            let ka = k.get(i).copied().unwrap_or(0);
            let pa = p.get(i).copied().unwrap_or(0);
            t.record(&format!("group growth, {what}: open {i}"), ka, pa, None);
        }
    }
}

/// The kernel's sizeof(struct perf_event_attr), from the E2BIG write-back:
/// a page-sized attr with a non-zero last byte.
fn kernel_attr_size() -> u32 {
    let (a, flags) = Case::new(Base::Dummy, &[]).build(PERF_ATTR_SIZE_VER8);
    let mut b = Case::bytes(&a);
    b[4..8].copy_from_slice(&4096u32.to_ne_bytes());
    b[4095] = 1;
    let r = kernel_open(&mut b, -1, flags);
    assert_eq!(
        r,
        Err(errno::E2BIG),
        "a non-zero byte past the kernel's attr"
    );
    u32::from_ne_bytes(b[4..8].try_into().unwrap())
}

/// Whether perf_event_open is allowed here, or why not.
fn allowed() -> Result<(), String> {
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    let (a, flags) = Case::new(Base::Dummy, &[]).build(PERF_ATTR_SIZE_VER8);
    match kernel_open(&mut Case::bytes(&a), -1, flags) {
        Ok(fd) => {
            kernel_close(fd);
            Ok(())
        }
        Err(e) => Err(format!(
            "perf_event_open refused a plain dummy event: {} (perf_event_paranoid {paranoid:?}, or a seccomp filter)",
            errno::name(e)
        )),
    }
}

fn env() -> Env {
    let kernel_size = kernel_attr_size();
    // SAFETY: geteuid has no preconditions.
    let privileged = unsafe { libc::geteuid() } == 0;
    let mut env = Env {
        kernel_size,
        privileged,
        one_sided: Vec::new(),
    };
    for config in 0..=16u64 {
        let c = Case::new(Base::Dummy, &[Mutation::Set(Field::Config, config)]);
        let (k, p) = run_single(&env, &c);
        if (k == 0) != (p == 0) {
            env.one_sided.push(config);
        }
    }
    env
}

#[test]
fn perfaux_agrees_with_the_running_kernel() {
    if let Err(why) = allowed() {
        perfaux_testutil::skip(&why);
        return;
    }
    let env = env();
    eprintln!(
        "kernel attr size {}, software configs one side has: {:?}",
        env.kernel_size, env.one_sided
    );
    // task-clock samplers and sigtrap events may fire before they close:
    // SIGTRAP must not end the test.
    extern "C" fn ignore(_: libc::c_int) {}
    // SAFETY: installs a handler that does nothing (async-signal-safe).
    unsafe { libc::signal(libc::SIGTRAP, ignore as *const () as libc::sighandler_t) };

    let mut t = Tally::default();
    let mut counts = Vec::new();
    let mut family = |name: &'static str, t: &mut Tally, f: &mut dyn FnMut(&mut Tally)| {
        let before = t.cases;
        f(t);
        counts.push((name, t.cases - before));
    };
    family("single rules", &mut t, &mut |t| {
        single_family(&env, t, &generator::single_rules(), false)
    });
    family("pairs", &mut t, &mut |t| {
        single_family(&env, t, &generator::pairs(), true)
    });
    family("random", &mut t, &mut |t| {
        single_family(&env, t, &generator::random(RANDOM_SEED, RANDOM_CASES), true)
    });
    family("groups", &mut t, &mut |t| group_family(&env, t));
    family("group growth", &mut t, &mut |t| growth_family(&env, t));
    eprintln!(
        "{} cases {counts:?}: {} agree, expected differences {:?}",
        t.cases, t.agreed, t.explained
    );
    assert!(t.cases >= 10_000, "only {} cases", t.cases);
    let shown: Vec<_> = t.failures.iter().filter(|f| !f.is_empty()).collect();
    assert!(
        t.failures.is_empty(),
        "{} unexplained disagreements with the kernel, first {}:\n{}",
        t.failures.len(),
        shown.len(),
        shown
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The dance perf does with an attr larger than the kernel knows: E2BIG,
/// the kernel's sizeof written into `attr.size`, a retry at that size.
/// perfaux answers the same way with its own sizeof (VER9), and the
/// kernel's answer is checked beside it.
#[test]
fn an_attr_larger_than_the_kernel_knows_is_retried_at_the_written_back_size() {
    fn dance(open: &mut dyn FnMut(&mut [u8]) -> Result<(), i32>) -> u32 {
        let (a, _) = Case::new(Base::Dummy, &[]).build(PERF_ATTR_SIZE_VER8);
        let mut b = Case::bytes(&a);
        b[4..8].copy_from_slice(&160u32.to_ne_bytes());
        b[152] = 1;
        assert_eq!(open(&mut b), Err(errno::E2BIG), "a non-zero byte at 152");
        let size = u32::from_ne_bytes(b[4..8].try_into().unwrap());
        b[size as usize..].fill(0);
        assert_eq!(open(&mut b), Ok(()), "the retry at size {size}");
        size
    }
    let perfaux = dance(&mut |b| perfaux_open(b, -1, PERF_FLAG_FD_CLOEXEC).map(drop));
    assert_eq!(
        perfaux, PERF_ATTR_SIZE_LATEST,
        "perfaux writes back its sizeof"
    );
    if let Err(why) = allowed() {
        perfaux_testutil::skip(&format!("the kernel's side: {why}"));
        return;
    }
    let kernel = dance(&mut |b| kernel_open(b, -1, PERF_FLAG_FD_CLOEXEC).map(kernel_close));
    assert_eq!(kernel, kernel_attr_size());
    // An attr of the kernel's size opens in perfaux as it is (the fields
    // past it read as zero).
    let (a, flags) = Case::new(Base::TaskClock, &[]).build(kernel);
    assert!(perfaux_open(&mut Case::bytes(&a), -1, flags).is_ok());
}
