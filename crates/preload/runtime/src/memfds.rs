//! The recorder's memfds as a traced process finds them: the descriptors it inherited, or,
//! when the process (or an ancestor since the recorder) closed them, the recorder's own
//! through `/proc/RECORDER/fd/N`.
//!
//! A shell runs its commands, and Python's `subprocess` its children, with the descriptors
//! above 2 closed (`close_fds`); their numbers may then name other files. So a descriptor is
//! used only once it is known to be the recorder's memfd: a ring by the inode the recorder
//! wrote beside its number (`shared::fd_word`), the control area by its seals and size, then
//! its magic and version once mapped (the caller tries each candidate in turn). A path
//! under /proc is looked at before it is opened (a regular file, that inode or size), and
//! opened without becoming a controlling terminal: after the recording, or once the
//! recorder's pid is reused, the number may name anything. Opening there needs the recorder
//! alive and the same credentials (a process that changed user, or a recorder made
//! non-dumpable by file capabilities, refuses it): the thread then goes untraced, its slot
//! saying why.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

use perfaux_preload_abi as shared;

/// `PERFAUX_PRELOAD_FD_DIR`, read by the constructor (no allocation or environment read at a
/// thread's first hook, which may run in a signal handler).
static FD_DIR: OnceLock<Option<CString>> = OnceLock::new();

/// Reads the recorder's descriptor directory from the environment (the constructor, before
/// any thread runs); its bytes.
pub(crate) fn remember_fd_dir() -> Option<&'static [u8]> {
    let dir = FD_DIR.get_or_init(|| {
        // SAFETY: getenv with a NUL-terminated name, on the only thread (a constructor).
        let v = unsafe { libc::getenv(c"PERFAUX_PRELOAD_FD_DIR".as_ptr()) };
        debug_assert_eq!(shared::ENV_FD_DIR, "PERFAUX_PRELOAD_FD_DIR");
        // SAFETY: getenv returned null or a NUL-terminated string.
        (!v.is_null()).then(|| unsafe { CStr::from_ptr(v) }.to_owned())
    });
    dir.as_ref().map(|d| d.as_bytes())
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EBADF)
}

/// The recorder's descriptor `fd`, opened read-write through its /proc directory if what it
/// names passes `wanted` (looked at with `stat`, which follows the link, before the open).
fn open_recorders(fd: i32, wanted: impl Fn(&libc::stat) -> bool) -> Result<OwnedFd, i32> {
    let dir = FD_DIR.get().and_then(Option::as_ref).ok_or(libc::EBADF)?;
    let mut path = [0u8; 256];
    let n = {
        use std::io::Write;
        let mut w = &mut path[..];
        w.write_all(dir.as_bytes())
            .map_err(|_| libc::ENAMETOOLONG)?;
        write!(w, "/{fd}\0").map_err(|_| libc::ENAMETOOLONG)?;
        256 - w.len()
    };
    let path = CStr::from_bytes_with_nul(&path[..n]).map_err(|_| libc::EINVAL)?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a NUL-terminated path and a stat buffer stat fills on success.
    if unsafe { libc::stat(path.as_ptr(), st.as_mut_ptr()) } != 0 {
        return Err(errno());
    }
    // SAFETY: written whole by the successful stat.
    let st = unsafe { st.assume_init() };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || !wanted(&st) {
        return Err(libc::ESTALE);
    }
    // SAFETY: a NUL-terminated path; the result is a new descriptor or -1.
    let new = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOCTTY,
        )
    };
    if new < 0 {
        return Err(errno());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// A duplicate of this process's descriptor `fd` (close-on-exec), if it is open.
fn dup(fd: i32) -> Result<OwnedFd, i32> {
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor number; an invalid one fails with EBADF.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if new < 0 {
        return Err(errno());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

fn fstat(fd: &OwnedFd) -> Option<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes a whole stat into the buffer given on success.
    (unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } == 0)
        // SAFETY: written whole by the successful fstat.
        .then(|| unsafe { st.assume_init() })
}

/// Whether `fd` is a memfd sealed against shrinking and growing, as the recorder's are.
fn sealed(fd: &OwnedFd) -> bool {
    // SAFETY: F_GET_SEALS on an open descriptor: the seals, or -1 for a file without.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    let want = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
    seals >= 0 && seals & want == want
}

/// The ring memfd of header word `word` ([`shared::fd_word`]): the inherited descriptor if
/// it is still that file (its inode), else the recorder's; the errno of the last try if
/// neither is.
pub(crate) fn ring(word: u64) -> Result<OwnedFd, i32> {
    let (fd, ino) = shared::fd_word_parts(word);
    let ino_is = |st: &libc::stat| st.st_ino as u32 == ino;
    let is_it = |f: OwnedFd| {
        if sealed(&f) && fstat(&f).is_some_and(|st| ino_is(&st)) {
            Ok(f)
        } else {
            Err(libc::ESTALE)
        }
    };
    dup(fd)
        .and_then(is_it)
        .or_else(|_| open_recorders(fd, ino_is).and_then(is_it))
}

/// The candidates for the control memfd named by `PERFAUX_PRELOAD_FD`, in order: the inherited
/// descriptor, then the recorder's; each a sealed memfd of the control area's size (a file
/// that took the number is never mapped: a short one would fault on the magic's read). The
/// caller maps each and keeps the first with the right magic and version.
pub(crate) fn control_candidates(fd: i32) -> impl Iterator<Item = OwnedFd> {
    let len = shared::total_len() as u64;
    let size_is = move |st: &libc::stat| st.st_size as u64 == len;
    let is_it = move |f: &OwnedFd| sealed(f) && fstat(f).is_some_and(|st| size_is(&st));
    let inherited = dup(fd).ok().filter(is_it);
    let recorders = move || open_recorders(fd, size_is).ok().filter(is_it);
    inherited
        .into_iter()
        .chain(std::iter::once_with(recorders).flatten())
}
