//! `-P` seen from the recorder: the executable a command runs, what the runtime would patch
//! in it (perfaux-patch's plans over its file, the same the runtime makes in memory), and the
//! words for a program that ran without a traced call.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use perfaux_patch::{MatchKind, ObjectPlan, PatchSpec, Verdicts};

pub use perfaux_preload_abi::{ENV_LIBCALL, ENV_PATCH, ENV_PATCH_PLAN_FD, ENV_PATCH_PLAN_ONLY};

use crate::error::NO_HOOKS;

/// The file `prog` runs: itself if it names a path, else the first executable file of that
/// name in `PATH` (as execvp finds it).
pub fn executable(prog: &str) -> Option<PathBuf> {
    if prog.contains('/') {
        return Some(PathBuf::from(prog));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What `spec` would patch in the executable `path`, from its file.
pub fn plan_executable(path: &Path, spec: &PatchSpec) -> Result<ObjectPlan, String> {
    let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    perfaux_patch::plan_file(&data, spec, &path.to_string_lossy(), true).map_err(|e| {
        format!(
            "{}: not an ELF object perfaux can read: {e}",
            path.display()
        )
    })
}

/// How `record -- PROG` traces a program without `-P` ([`trace_way`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceWay {
    /// It calls compiler hooks (built with the flags named): the runtime's hooks trace it.
    Hooks(&'static str),
    /// No hooks, but the compiler prepared its function entries for patching (the flag named),
    /// this many: `-P .` patches them.
    Prepared(&'static str, usize),
}

/// How a binary traces without `-P`: through the compiler hooks it calls (an undefined
/// `__cyg_profile_func_enter`, `__fentry__` or `mcount`), else through the entries the
/// compiler prepared: clang's `-fxray-instrument` (sleds listed in `xray_instr_map`, for the
/// functions it chose), gcc's `-fpatchable-function-entry=N` (a
/// `__patchable_function_entries` section of entry addresses) or `-pg -mfentry -mnop-mcount
/// -mrecord-mcount` (`__mcount_loc`, with no hook to call). `None`: neither (only `-P` traces
/// its own functions), or not an ELF file.
pub fn trace_way(path: &Path) -> Option<TraceWay> {
    use object::{Object, ObjectSection, ObjectSymbol};
    // Read as parsed (headers, the symbol tables, a section's header), not whole: every
    // `record -- PROG` without -P asks this of its program, which may be large.
    let cache = object::ReadCache::new(std::fs::File::open(path).ok()?);
    let file = object::File::parse(&cache).ok()?;
    let hooks = [
        ("__cyg_profile_func_enter", "-finstrument-functions"),
        ("__fentry__", "-pg -mfentry"),
        ("mcount", "-pg"),
    ];
    let called = hooks.into_iter().find(|&(hook, _)| {
        file.dynamic_symbols()
            .chain(file.symbols())
            .any(|s| s.is_undefined() && s.name() == Ok(hook))
    });
    if let Some((_, how)) = called {
        return Some(TraceWay::Hooks(how));
    }
    if let Some(f) = xray_functions(&file).filter(|f| !f.is_empty()) {
        return Some(TraceWay::Prepared(XRAY, f.len()));
    }
    [
        ("__patchable_function_entries", "-fpatchable-function-entry"),
        ("__mcount_loc", "-mnop-mcount"),
    ]
    .into_iter()
    .find_map(|(name, how)| {
        let sec = file.section_by_name(name)?;
        Some(TraceWay::Prepared(how, (sec.size() / 8) as usize))
            .filter(|&w| w != TraceWay::Prepared(how, 0))
    })
}

/// The flag [`TraceWay::Prepared`] names for XRay's sleds.
pub const XRAY: &str = "-fxray-instrument";

/// Size of an `xray_instr_map` entry (LLVM's XRaySledEntry): the sled's address, its
/// function's, the kind (0: function entry), always-instrument, the version, padding.
const XRAY_SLED: usize = 32;

/// The functions whose entries clang's `-fxray-instrument` prepared (an entry sled each in
/// `xray_instr_map`), by link-time address. Sleds of version 2 and later hold their
/// addresses relative to the field's own place, earlier ones absolute. `None`: no such
/// section, or one that does not hold whole entries.
pub fn xray_functions<'d, R: object::ReadRef<'d>>(
    file: &object::File<'d, R>,
) -> Option<std::collections::BTreeSet<u64>> {
    use object::{Object, ObjectSection};
    let sec = file.section_by_name("xray_instr_map")?;
    let data = sec.data().ok()?;
    if data.len() % XRAY_SLED != 0 {
        return None;
    }
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let functions = data
        .chunks_exact(XRAY_SLED)
        .enumerate()
        // Kinds 0 (function entry) and 3 (an entry that logs its arguments).
        .filter(|(_, e)| e[16] == 0 || e[16] == 3)
        .filter_map(|(i, e)| {
            let function = word(&e[8..16]);
            if e[18] >= 2 {
                let field = sec.address() + (i * XRAY_SLED) as u64 + 8;
                Some(field.wrapping_add(function))
            } else {
                // Absolute, and in a PIE left to a dynamic relocation the file may hold as 0:
                // no function there.
                (function != 0).then_some(function)
            }
        })
        .collect();
    Some(functions)
}

/// The plan of the executable `prog` runs, for the runtime, as a sealed memfd (close-on-exec:
/// the caller hands it to the program); `None` if the rules do not name the executable or its
/// file cannot be read (the runtime then plans itself). `prepared_only`: of the functions the
/// rules name, only those whose entries the compiler prepared where it chose some (XRay's),
/// not its runtime's nor any it left out.
pub fn plan_memfd(prog: &str, spec: &PatchSpec, prepared_only: bool) -> Option<OwnedFd> {
    let path = executable(prog)?;
    if !spec.wants_object(&path.to_string_lossy(), true) {
        return None;
    }
    let meta = std::fs::metadata(&path).ok()?;
    let mut plan = plan_executable(&path, spec).ok()?;
    if prepared_only && let Some(chosen) = xray_functions_of(&path) {
        let keep: Vec<bool> = plan
            .plans
            .iter()
            .map(|p| chosen.contains(&p.entry))
            .collect();
        let mut k = keep.iter();
        plan.plans.retain(|_| *k.next().unwrap_or(&false));
        let mut k = keep.iter();
        plan.sizes.retain(|_| *k.next().unwrap_or(&false));
    }
    let verdicts = Verdicts {
        identity: perfaux_patch::verdicts::identity(&meta),
        refused: plan.refused.len() as u64,
        patch: plan.plans.iter().map(|p| p.entry).zip(plan.sizes).collect(),
    };
    let fd = rustix::fs::memfd_create(
        "perfaux-patch-plan",
        rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
    )
    .ok()?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&verdicts.to_bytes()).ok()?;
    let fd = OwnedFd::from(file);
    rustix::fs::fcntl_add_seals(
        &fd,
        rustix::fs::SealFlags::SHRINK
            | rustix::fs::SealFlags::GROW
            | rustix::fs::SealFlags::WRITE
            | rustix::fs::SealFlags::SEAL,
    )
    .ok()?;
    Some(fd)
}

/// [`xray_functions`] of the file at `path`.
fn xray_functions_of(path: &Path) -> Option<std::collections::BTreeSet<u64>> {
    let cache = object::ReadCache::new(std::fs::File::open(path).ok()?);
    let file = object::File::parse(&cache).ok()?;
    xray_functions(&file)
}

/// The hint for a program that called no hook: build it with hooks, or use `-P`, saying how
/// many of its functions `-P .` would trace when its file can be read.
pub fn no_hooks_hint(prog: &str) -> String {
    let every = PatchSpec::parse(&[".".into()], &[], MatchKind::Regex).expect("'.' parses");
    let plan = executable(prog).and_then(|p| plan_executable(&p, &every).ok());
    match plan {
        Some(p) if !p.plans.is_empty() => format!(
            "{NO_HOOKS}; or trace it as it is with -P PATTERN (uftrace's syntax: -P . would \
             patch {} of its {} functions)",
            p.plans.len(),
            p.plans.len() + p.refused.len()
        ),
        _ => NO_HOOKS.to_string(),
    }
}

/// The hint for a program that ran with `-P` and made no traced call.
pub fn nothing_ran_hint(patched: u64, refused: u64) -> String {
    match (patched, refused) {
        (0, 0) => "-P named no function of it: check the pattern against `nm -C` of the \
                   program, or name a library's functions with FUNC@LIB"
            .to_string(),
        (0, r) => format!(
            "-P named {r} function(s), and none could be patched safely (-v lists each with \
             its reason)"
        ),
        (p, r) => format!("-P patched {p} function(s) ({r} refused), and none of them was called"),
    }
}
