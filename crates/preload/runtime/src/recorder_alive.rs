//! Whether the recorder still runs: a process whose `perfaux record` died (SIGKILL, a crash)
//! runs on, and must run at its own speed. Nobody drains its rings or frees its slots any
//! more, so a thread that started then would trace into memory no one reads, and wait for a
//! slot no one frees; it is left untraced instead, and the process stops tracing
//! ([`crate::ACTIVE`]).
//!
//! The recorder is the process named in `PERFAUX_PRELOAD_FD_DIR` (`/proc/PID/fd`), watched
//! through a pidfd opened at the image's start (readable once the recorder exited, as the
//! recorder watches the program's). A pidfd is close-on-exec: an exec'd image opens its own,
//! and one that starts after the recorder's end does not trace.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;
use std::sync::atomic::Ordering;

/// The recorder's pidfd (`None`: the recorder is not known, nothing to watch).
static RECORDER: OnceLock<Option<OwnedFd>> = OnceLock::new();

/// The recorder's pid in a `/proc/PID/fd` path.
fn pid_of_fd_dir(dir: &[u8]) -> Option<libc::pid_t> {
    let rest = dir.strip_prefix(b"/proc/")?;
    let end = rest.iter().position(|&b| b == b'/')?;
    if &rest[end..] != b"/fd" {
        return None;
    }
    std::str::from_utf8(&rest[..end])
        .ok()?
        .parse()
        .ok()
        .filter(|&p| p > 0)
}

/// Opens the recorder's pidfd (the constructor, on the only thread); false if the recorder is
/// gone already (the image must not trace).
pub(crate) fn watch(fd_dir: Option<&[u8]>) -> bool {
    let Some(pid) = fd_dir.and_then(pid_of_fd_dir) else {
        let _ = RECORDER.set(None);
        return true;
    };
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    match i32::try_from(fd) {
        Ok(fd) if fd >= 0 => {
            // SAFETY: a fresh descriptor owned here alone.
            let _ = RECORDER.set(Some(unsafe { OwnedFd::from_raw_fd(fd) }));
            true
        }
        // No such process: the recorder is gone. Any other failure (a kernel without
        // pidfds, no descriptors left) says nothing about it: unwatched.
        _ => {
            let gone = std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            let _ = RECORDER.set(None);
            !gone
        }
    }
}

/// Whether the recorder has exited; if it has, the process stops tracing. One poll(2) with no
/// wait: called where a thread would begin tracing or wait on the recorder, never per call.
pub(crate) fn gone() -> bool {
    let Some(Some(fd)) = RECORDER.get() else {
        return false;
    };
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd that lives across the call; no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    let gone = n == 1 && p.revents & libc::POLLIN != 0;
    if gone {
        crate::ACTIVE.store(false, Ordering::Release);
    }
    gone
}

#[cfg(test)]
mod tests {
    use super::pid_of_fd_dir;

    #[test]
    fn the_recorders_pid_is_read_from_its_fd_directory_only() {
        assert_eq!(pid_of_fd_dir(b"/proc/1234/fd"), Some(1234));
        for bad in [
            &b"/proc/self/fd"[..],
            b"/proc/0/fd",
            b"/proc/-3/fd",
            b"/proc/12/fdx",
            b"/proc/12",
            b"/tmp/12/fd",
            b"",
        ] {
            assert_eq!(
                pid_of_fd_dir(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
