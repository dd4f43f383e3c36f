//! `perfaux record -P`: the entries of an unmodified program's functions, patched in the
//! constructor, before `main` and before any of the program's threads runs (the loader runs
//! preloaded constructors before the program's own; only a library constructor that starts a
//! thread would be earlier, and its thread then runs in code patched under it).
//!
//! For each loaded object a `-P` rule names (the executable, unless a rule says `@lib`), its
//! functions come from its file's symbol tables, and perfaux-patch plans each named one: its
//! first instructions move to a stub in a region within ±2 GiB ([`crate::stub_region`]) that
//! calls [`crate::trampoline`]'s common entry, which enters the call and hijacks its return as
//! `-pg` does. The entry then gets a `jmp rel32` to the stub. Text is made writable for the
//! writes (and executable throughout: the object may be libc, whose `mprotect` is called to
//! put it back) and returned to read-execute.
//!
//! Anything that fails leaves the object as it was: a file that does not parse, no free
//! memory in reach, text that cannot be made writable. Refused functions are counted in the
//! control area (`functions_refused`) for the recorder to say; the recorder lists them with
//! their reasons itself (`-v`), from the same plans.
//!
//! Objects a `dlopen` brings in later are patched when the loader has mapped them, before
//! their relocation and constructors ([`crate::dl_watch`]), if a rule names a library
//! (`FUNC@LIB`: a dlopen'd object is never the executable).

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use perfaux_patch::{
    Cells, PatchSpec, Plan, Verdicts, encode_stub, patched_bytes, plan_object, plan_window,
};
use perfaux_preload_abi::Control;

use crate::stub_region::StubRegion;

/// [`perfaux_preload_abi::ENV_PATCH`], for getenv.
const ENV_PATCH: &CStr = c"PERFAUX_PATCH";

/// A loaded object: its path, load bias, executable and readable segments and its span that
/// is read-only after relocation (loaded addresses).
struct Loaded {
    path: String,
    bias: u64,
    is_main: bool,
    exec: Vec<(u64, u64)>,
    readable: Vec<(u64, u64)>,
    relro: Option<(u64, u64)>,
}

/// Patches the entries the recording's `-P` rules name, if it has any. From the constructor.
pub(crate) fn install(ctl: &Control) {
    debug_assert_eq!(perfaux_preload_abi::ENV_PATCH, "PERFAUX_PATCH");
    let Some(text) = crate::env_at_start(ENV_PATCH) else {
        return;
    };
    let Ok(spec) = PatchSpec::decode(&text) else {
        return;
    };
    debug_assert_eq!(perfaux_preload_abi::ENV_LIBCALL, "PERFAUX_LIBCALL");
    LIBCALLS.store(
        crate::env_at_start(c"PERFAUX_LIBCALL").as_deref() == Some("1"),
        Ordering::Relaxed,
    );
    debug_assert_eq!(
        perfaux_preload_abi::ENV_PATCH_PLAN_ONLY,
        "PERFAUX_PATCH_PLAN_ONLY"
    );
    PLAN_ONLY.store(
        crate::env_at_start(c"PERFAUX_PATCH_PLAN_ONLY").as_deref() == Some("1"),
        Ordering::Relaxed,
    );
    if spec.is_empty() {
        return;
    }
    crate::trampoline::keep_every_register();
    let verdicts = recorders_plan();
    let spec = SPEC.get_or_init(|| spec);
    patch_new_objects(ctl, spec, verdicts.as_ref());
    if spec.names_libraries() {
        crate::dl_watch::install(on_loader_change);
    }
}

/// The rules, for the loads after the constructor.
static SPEC: OnceLock<PatchSpec> = OnceLock::new();

/// The entries patched, sorted: a library call to one is entered there, not at its PLT slot
/// too.
static PATCHED_ENTRIES: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// The objects looked at already: (load bias, path).
static SEEN: Mutex<Vec<(u64, String)>> = Mutex::new(Vec::new());

/// Patches the objects loaded since the last call that the rules name (the executable from the
/// recorder's plan `given`, if it is of the same file).
fn patch_new_objects(ctl: &Control, spec: &PatchSpec, given: Option<&Verdicts>) {
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let own = install as *const () as u64;
    let now = loaded();
    for o in &now {
        if seen.iter().any(|(b, p)| *b == o.bias && *p == o.path)
            || o.exec.iter().any(|&(s, e)| (s..e).contains(&own))
            || !spec.wants_object(&o.path, o.is_main)
        {
            continue;
        }
        let (patched, refused) = patch_object(o, spec, given.filter(|_| o.is_main));
        let h = ctl.header();
        h.functions_patched.fetch_add(patched, Ordering::Relaxed);
        h.functions_refused.fetch_add(refused, Ordering::Relaxed);
    }
    // After every object's entries: a library call to a patched entry is entered there.
    let first = seen.is_empty();
    if let Some(main) = now
        .iter()
        .find(|o| o.is_main)
        .filter(|_| first && libcalls())
    {
        hook_library_calls(main, &now);
    }
    // What is loaded now (an object a dlclose took away is forgotten).
    *seen = now.into_iter().map(|o| (o.bias, o.path)).collect();
}

/// Whether the executable is patched only from the recorder's plan
/// ([`perfaux_preload_abi::ENV_PATCH_PLAN_ONLY`], read in the constructor).
static PLAN_ONLY: AtomicBool = AtomicBool::new(false);

/// Whether the recording traces library calls ([`perfaux_preload_abi::ENV_LIBCALL`], read
/// in the constructor).
static LIBCALLS: AtomicBool = AtomicBool::new(false);

fn libcalls() -> bool {
    LIBCALLS.load(Ordering::Relaxed)
}

/// Points the PLT slots of `o` at stubs that enter the library calls; a function in `o`
/// itself, in the runtime or in the loader is left alone.
fn hook_library_calls(o: &Loaded, all: &[Loaded]) {
    let Some(file) = MappedFile::open(&o.path) else {
        return;
    };
    let Ok(slots) = perfaux_patch::plt::jump_slots(file.bytes()) else {
        return;
    };
    let own = install as *const () as u64;
    let in_exec = |l: &Loaded, a: u64| l.exec.iter().any(|&(s, e)| (s..e).contains(&a));
    let entries = PATCHED_ENTRIES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let left_alone = |a: u64| {
        in_exec(o, a)
            || entries.binary_search(&a).is_ok()
            || all
                .iter()
                .any(|l| in_exec(l, a) && (in_exec(l, own) || l.path.contains("/ld-linux")))
    };
    crate::plt_hooks::hook(o.bias, &slots, left_alone, o.relro);
}

/// The loader's call after each load or unload ([`crate::dl_watch`]): the new objects are
/// mapped, not yet relocated or initialised.
extern "C" fn on_loader_change() {
    if !crate::dl_watch::consistent() {
        return;
    }
    if let (Some(ctl), Some(spec)) = (crate::control(), SPEC.get()) {
        patch_new_objects(&ctl, spec, None);
    }
}

/// The loaded objects with a path (not the vDSO), the executable first.
fn loaded() -> Vec<Loaded> {
    let mut out: Vec<Loaded> = Vec::new();
    // SAFETY: the callback matches dl_iterate_phdr's signature; `data` is the Vec above, alive
    // for the call and touched by the callback only.
    unsafe {
        libc::dl_iterate_phdr(Some(collect), std::ptr::from_mut(&mut out).cast());
    }
    out
}

unsafe extern "C" fn collect(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut libc::c_void,
) -> i32 {
    // SAFETY: dl_iterate_phdr passes a valid info.
    let info = unsafe { &*info };
    // SAFETY: our data pointer (see `loaded`), a live Vec used by nothing else meanwhile.
    let out = unsafe { &mut *data.cast::<Vec<Loaded>>() };
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: the loader's NUL-terminated name.
        unsafe { CStr::from_ptr(info.dlpi_name) }
            .to_string_lossy()
            .into_owned()
    };
    let is_main = out.is_empty() && name.is_empty();
    let path = if is_main {
        match std::fs::read_link("/proc/self/exe") {
            Ok(p) => p.to_string_lossy().into_owned(),
            Err(_) => return 0,
        }
    } else {
        name
    };
    if !path.starts_with('/') {
        return 0;
    }
    let mut exec = Vec::new();
    let mut readable = Vec::new();
    let mut relro = None;
    for k in 0..info.dlpi_phnum as usize {
        // SAFETY: dlpi_phdr has dlpi_phnum entries, so the k-th lies within them.
        let ph = unsafe { &*info.dlpi_phdr.wrapping_add(k) };
        let start = info.dlpi_addr.wrapping_add(ph.p_vaddr);
        if ph.p_type == libc::PT_GNU_RELRO {
            relro = Some((start, start + ph.p_memsz));
        }
        if ph.p_type != libc::PT_LOAD {
            continue;
        }
        if ph.p_flags & libc::PF_X != 0 {
            exec.push((start, start + ph.p_memsz));
        }
        if ph.p_flags & libc::PF_R != 0 {
            readable.push((start, start + ph.p_memsz));
        }
    }
    out.push(Loaded {
        path,
        bias: info.dlpi_addr,
        is_main,
        exec,
        readable,
        relro,
    });
    0
}

/// A file mapped read-only for its symbol tables.
struct MappedFile {
    ptr: *mut libc::c_void,
    len: usize,
}

impl MappedFile {
    fn open(path: &str) -> Option<MappedFile> {
        let f = std::fs::File::open(path).ok()?;
        let len = usize::try_from(f.metadata().ok()?.len()).ok()?;
        if len == 0 {
            return None;
        }
        // SAFETY: a private read-only mapping of an open file; it outlives the descriptor.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                std::os::fd::AsRawFd::as_raw_fd(&f),
                0,
            )
        };
        (ptr != libc::MAP_FAILED).then_some(MappedFile { ptr, len })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes for self's life. (A file truncated under
        // it would raise SIGBUS: the loader holds the object's file in use, as every debugger
        // and profiler reading it assumes.)
        unsafe { std::slice::from_raw_parts(self.ptr.cast(), self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// The most bytes the stub of `p` may take (perfaux-patch's encoding: a 6-byte push and call,
/// each moved instruction, a short branch grown to a long form, and the jump back), aligned.
fn stub_bound(p: &Plan) -> usize {
    12 + 16 * p.moved() + 16 + 16
}

/// The recorder's plan of the executable ([`perfaux_preload_abi::ENV_PATCH_PLAN_FD`]), if the
/// descriptor named is a sealed memfd holding one; the descriptor is closed once read.
fn recorders_plan() -> Option<Verdicts> {
    debug_assert_eq!(
        perfaux_preload_abi::ENV_PATCH_PLAN_FD,
        "PERFAUX_PATCH_PLAN_FD"
    );
    let fd: Option<i32> = crate::env_at_start(c"PERFAUX_PATCH_PLAN_FD")?.parse().ok();
    // The variable is for this image only: an image exec'd later finds the number closed or
    // reused for another file.
    // SAFETY: unsetenv with a NUL-terminated name, from the constructor (no other thread).
    unsafe { libc::unsetenv(c"PERFAUX_PATCH_PLAN_FD".as_ptr()) };
    let fd = fd?;
    // Only the recorder's sealed memfd of that name is read (and closed).
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    if !link
        .to_string_lossy()
        .starts_with("/memfd:perfaux-patch-plan")
    {
        return None;
    }
    let need = libc::F_SEAL_WRITE | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
    // SAFETY: fcntl on a descriptor number; a closed or foreign one fails or lacks the seals.
    let seals = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
    if seals < 0 || seals & need != need {
        return None;
    }
    // SAFETY: the descriptor is the recorder's memfd (sealed, checked above), which this
    // process owns from here: the runtime closes it once read.
    let file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let len = file.metadata().ok()?.len();
    if len > MAX_PLAN_BYTES {
        return None;
    }
    // By position: the descriptor's offset is the recorder's, which wrote the plan through
    // it (a read from there found nothing, and every plan was made again here).
    let mut bytes = vec![0u8; len as usize];
    std::os::unix::fs::FileExt::read_exact_at(&file, &mut bytes, 0).ok()?;
    Verdicts::from_bytes(&bytes)
}

/// The largest plan read (16 bytes a function: four million functions).
const MAX_PLAN_BYTES: u64 = 64 << 20;

/// Patches the named functions of `o` (from `given`, the recorder's plan, if it is of this
/// very file); (patched, refused).
fn patch_object(o: &Loaded, spec: &PatchSpec, given: Option<&Verdicts>) -> (u64, u64) {
    let inside = |start: u64, len: u64| {
        o.exec
            .iter()
            .any(|&(s, e)| s <= start && start.saturating_add(len) <= e)
    };
    let same_file = |v: &&Verdicts| {
        std::fs::metadata(&o.path)
            .is_ok_and(|m| perfaux_patch::verdicts::identity(&m) == v.identity)
    };
    if let Some(v) = given.filter(same_file) {
        let mut refused = v.refused;
        let mut plans = Vec::with_capacity(v.patch.len());
        for &(addr, size) in &v.patch {
            let at = o.bias.wrapping_add(addr);
            // SAFETY: as for `code` below: inside an executable segment of the object.
            let code = inside(at, size)
                .then(|| unsafe { std::slice::from_raw_parts(at as *const u8, size as usize) });
            match code.map(|c| plan_window(at, c)) {
                Some(Ok(p)) => plans.push(p),
                _ => refused += 1,
            }
        }
        return place_and_write(o, &plans, refused);
    }
    // The compiler chose the executable's functions, and only the recorder's plan says which:
    // without it, none rather than all.
    if o.is_main && PLAN_ONLY.load(Ordering::Relaxed) {
        return (0, 0);
    }
    let Some(file) = MappedFile::open(&o.path) else {
        return (0, 0);
    };
    let Ok(funcs) = perfaux_patch::functions(file.bytes()) else {
        return (0, 0);
    };
    let word = |at: u64| -> Option<u32> {
        o.readable
            .iter()
            .any(|&(s, e)| s <= at && at.saturating_add(4) <= e)
            // SAFETY: 4 bytes inside a readable segment of the loaded object (checked),
            // mapped while it is loaded (see below).
            .then(|| unsafe { (at as *const u32).read_unaligned() })
    };
    let code = |at: u64, size: u64| {
        // SAFETY: [at, at + size) lies in an executable segment of the loaded object
        // (checked), mapped and readable while the object is loaded (it is: the loader's
        // own list named it, and nothing unloads during the constructor).
        inside(at, size)
            .then(|| unsafe { std::slice::from_raw_parts(at as *const u8, size as usize) })
    };
    let plan = plan_object(&funcs, spec, &o.path, o.is_main, o.bias, code, &word);
    place_and_write(o, &plan.plans, plan.refused.len() as u64)
}

/// Places the stubs of `plans` near `o` and writes their jumps; (patched, refused), with
/// `refused` already refused.
fn place_and_write(o: &Loaded, plans: &[Plan], mut refused: u64) -> (u64, u64) {
    if plans.is_empty() {
        return (0, refused);
    }
    let all = plans.len() as u64;
    let Some(stubs) = place_stubs(o, plans) else {
        return (0, refused + all);
    };
    refused += all - stubs.len() as u64;
    let written = write_entries(o, &stubs);
    (written, refused + stubs.len() as u64 - written)
}

/// Writes the stubs of `plans` into a sealed region near `o`; each plan placed, with its
/// stub's address (a plan whose stub does not encode is left out).
fn place_stubs<'p>(o: &Loaded, plans: &'p [Plan]) -> Option<Vec<(&'p Plan, u64)>> {
    let lo = o.exec.iter().map(|e| e.0).min()? as usize;
    let hi = o.exec.iter().map(|e| e.1).max()? as usize;
    let cells = 8 * (plans.len() + 1);
    let code_at = cells.next_multiple_of(16);
    let len = code_at + plans.iter().map(stub_bound).sum::<usize>();
    let mut region = StubRegion::near(lo, hi, len)?;
    let base = region.base() as u64;
    region.write(
        0,
        &(crate::trampoline::patched_entry_addr() as u64).to_le_bytes(),
    );
    let mut at = code_at;
    let mut placed = Vec::with_capacity(plans.len());
    for (i, p) in plans.iter().enumerate() {
        let cell = 8 * (i + 1);
        region.write(cell, &p.entry.to_le_bytes());
        let cells = Cells {
            function: base + cell as u64,
            common_entry: base,
        };
        let Ok(bytes) = encode_stub(p, base + at as u64, cells) else {
            continue;
        };
        if at + bytes.len() > region.len() {
            continue;
        }
        region.write(at, &bytes);
        placed.push((p, base + at as u64));
        at = (at + bytes.len()).next_multiple_of(16);
    }
    region.seal().then_some(placed)
}

/// Writes each placed plan's jump at its entry, the object's text writable meanwhile; how many
/// were written.
fn write_entries(o: &Loaded, stubs: &[(&Plan, u64)]) -> u64 {
    if !crate::text::set_writable(&o.exec, true) {
        crate::text::set_writable(&o.exec, false);
        return 0;
    }
    let mut written = 0;
    let mut entries = PATCHED_ENTRIES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for &(p, stub) in stubs {
        let Some(bytes) = patched_bytes(p, stub) else {
            continue;
        };
        // SAFETY: `patch_len` bytes at the function's entry, inside its executable segment
        // (the plan read them there), now writable; no other thread runs (see the module
        // doc), and this thread executes none of the program's code meanwhile.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.patch_at as *mut u8, bytes.len());
        }
        written += 1;
        entries.push(p.entry);
    }
    crate::text::set_writable(&o.exec, false);
    entries.sort_unstable();
    written
}
