//! The recorder's memfds as a traced process finds them: the descriptors it inherited, or,
//! when the process (or an ancestor since the recorder) closed them, the recorder's own
//! through `/proc/RECORDER/fd/N`.
//!
//! A shell runs its commands, and Python's `subprocess` its children, with the descriptors
//! above 2 closed (`close_fds`); their numbers may then name other files. So a descriptor is
//! used only once it is known to be the recorder's memfd: the control area by its seals and
//! size (its magic and version are checked after mapping), a ring by the inode the recorder
//! wrote beside its number (`shared::fd_word`). Opening through /proc needs the recorder
//! alive (it is, for the recording) and the same credentials (a process that changed user
//! cannot, and goes untraced with the reason in its slot).

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

use perfaux_preload::shared;

/// `PERFAUX_PRELOAD_FD_DIR`, read by the constructor (no allocation or environment read at a
/// thread's first hook, which may run in a signal handler).
static FD_DIR: OnceLock<Option<CString>> = OnceLock::new();

/// Reads the recorder's descriptor directory from the environment (the constructor, before
/// any thread runs).
pub(crate) fn remember_fd_dir() {
    FD_DIR.get_or_init(|| {
        // SAFETY: getenv with a NUL-terminated name, on the only thread (a constructor).
        let v = unsafe { libc::getenv(c"PERFAUX_PRELOAD_FD_DIR".as_ptr()) };
        debug_assert_eq!(shared::ENV_FD_DIR, "PERFAUX_PRELOAD_FD_DIR");
        // SAFETY: getenv returned null or a NUL-terminated string.
        (!v.is_null()).then(|| unsafe { CStr::from_ptr(v) }.to_owned())
    });
}

/// The recorder's descriptor `fd`, opened read-write through its /proc directory.
fn open_recorders(fd: i32) -> Option<OwnedFd> {
    let dir = FD_DIR.get()?.as_ref()?;
    let mut path = [0u8; 256];
    let n = {
        use std::io::Write;
        let mut w = &mut path[..];
        w.write_all(dir.as_bytes()).ok()?;
        write!(w, "/{fd}\0").ok()?;
        256 - w.len()
    };
    let path = CStr::from_bytes_with_nul(&path[..n]).ok()?;
    // SAFETY: a NUL-terminated path; the result is a new descriptor or -1.
    let new = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    // SAFETY: a fresh descriptor we own.
    (new >= 0).then(|| unsafe { OwnedFd::from_raw_fd(new) })
}

/// A duplicate of this process's descriptor `fd` (close-on-exec), if it is open.
fn dup(fd: i32) -> Option<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor number; an invalid one fails with EBADF.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    // SAFETY: a fresh descriptor we own.
    (new >= 0).then(|| unsafe { OwnedFd::from_raw_fd(new) })
}

fn fstat(fd: &OwnedFd) -> Option<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes a whole stat into the buffer given on success.
    (unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } == 0)
        // SAFETY: written whole by the successful fstat.
        .then(|| unsafe { st.assume_init() })
}

/// The ring memfd of header word `word` ([`shared::fd_word`]): the inherited descriptor if
/// it is still that file (its inode), else the recorder's.
pub(crate) fn ring(word: u64) -> Option<OwnedFd> {
    let (fd, ino) = shared::fd_word_parts(word);
    let is_it = |f: &OwnedFd| fstat(f).is_some_and(|st| st.st_ino as u32 == ino);
    dup(fd)
        .filter(is_it)
        .or_else(|| open_recorders(fd).filter(is_it))
}

/// The control memfd named by `PERFAUX_PRELOAD_FD`: the inherited descriptor if it is a memfd
/// sealed at the control area's size, else the recorder's. (A file that took its number is
/// never mapped: a short one would fault on the magic's read.)
pub(crate) fn control(fd: i32) -> Option<OwnedFd> {
    let is_it = |f: &OwnedFd| {
        // SAFETY: F_GET_SEALS on an open descriptor: the seals, or -1 for a file without.
        let seals = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GET_SEALS) };
        seals >= 0
            && seals & (libc::F_SEAL_SHRINK | libc::F_SEAL_GROW)
                == libc::F_SEAL_SHRINK | libc::F_SEAL_GROW
            && fstat(f).is_some_and(|st| st.st_size as u64 == shared::total_len() as u64)
    };
    dup(fd)
        .filter(is_it)
        .or_else(|| open_recorders(fd).filter(is_it))
}
