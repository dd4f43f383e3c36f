//! The ends of the traced program's processes, seen through pidfds.
//!
//! A thread gives its slot back from its thread-local destructor. A process that ends without
//! running them (`_exit`, a crash, SIGKILL, or `exit` while other threads run: those die in
//! the exit) leaves its threads' slots TRACING, and nothing the program writes afterwards can
//! say otherwise. The recorder watches each traced process with a pidfd, which becomes
//! readable once the process has exited and every thread of it is gone (a zombie counts), so
//! no thread of it can write its slots again; the recording loop then takes their last bytes
//! and gives the slots to the next threads, as for an exec.
//!
//! Only processes of the recorder's own pid namespace are watched (the pid the runtime wrote
//! names another process elsewhere), and only where pidfds can be had (not before Linux 5.3,
//! nor under a seccomp filter that refuses them): elsewhere a process's slots stay held until
//! the recording ends. The runtime is told which namespace is watched
//! ([`ProcessEnds::watched_ns`]), so that a thread finding no free slot waits for a dead
//! process's only where the recorder will free it.

use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, PidfdFlags, pidfd_open};

/// A process as the recording loop names it: (pid, fork time if forked, pid namespace inode).
pub type ProcessKey = (u32, Option<u64>, u64);

/// A watched process and its pidfd (`None`: it was gone before it could be opened).
struct Watched {
    key: ProcessKey,
    fd: Option<OwnedFd>,
}

/// The traced processes whose end the recording loop waits to see.
pub struct ProcessEnds {
    watched: Vec<Watched>,
    /// The recorder's pid namespace (its /proc/self/ns/pid inode); `None` if unreadable or
    /// if pidfds cannot be had here, which watches nothing.
    own_ns: Option<u64>,
}

impl ProcessEnds {
    pub fn new() -> ProcessEnds {
        // A pidfd of the recorder itself says whether pidfds can be had at all.
        let me = Pid::from_raw(std::process::id() as i32);
        let pidfds = me.is_some_and(|me| pidfd_open(me, PidfdFlags::empty()).is_ok());
        ProcessEnds {
            watched: Vec::new(),
            own_ns: std::fs::metadata("/proc/self/ns/pid")
                .ok()
                .map(|m| m.ino())
                .filter(|_| pidfds),
        }
    }

    /// The pid namespace whose processes are watched (0: none).
    pub fn watched_ns(&self) -> u64 {
        self.own_ns.unwrap_or(0)
    }

    /// Watches process `key` from now on, if it is not yet and is of the recorder's pid
    /// namespace. A pid the kernel gave to another process before the first look (the thread
    /// registered after its process was reaped) keeps the slots held until that one ends.
    pub fn watch(&mut self, key: ProcessKey) {
        let (pid, _, ns) = key;
        if self.own_ns != Some(ns) || self.watched.iter().any(|w| w.key == key) {
            return;
        }
        let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
            return;
        };
        match pidfd_open(pid, PidfdFlags::empty()) {
            Ok(fd) => self.watched.push(Watched { key, fd: Some(fd) }),
            // No such process, or the pid is now another process's thread: it ended.
            Err(rustix::io::Errno::SRCH | rustix::io::Errno::INVAL) => {
                self.watched.push(Watched { key, fd: None });
            }
            // EMFILE and the like: unwatched for now, tried again at the next pass.
            Err(_) => {}
        }
    }

    /// The watched processes that ended since the last call; they are watched no more.
    pub fn take_ended(&mut self) -> Vec<ProcessKey> {
        let mut fds: Vec<PollFd<'_>> = self
            .watched
            .iter()
            .filter_map(|w| w.fd.as_ref())
            .map(|fd| PollFd::new(fd, PollFlags::IN))
            .collect();
        if !fds.is_empty() && poll(&mut fds, Some(&Timespec::default())).is_err() {
            return Vec::new();
        }
        let readable: Vec<bool> = fds.iter().map(|p| !p.revents().is_empty()).collect();
        drop(fds);
        let mut readable = readable.into_iter();
        let mut ended = Vec::new();
        self.watched.retain(|w| {
            // The fds polled are the watched ones with an fd, in order.
            let gone = w.fd.is_none() || readable.next().unwrap_or(false);
            if gone {
                ended.push(w.key);
            }
            !gone
        });
        ended
    }

    /// Waits `timeout`, or less if process `pid` (the program) ends first: the recording's
    /// last pass then follows its end at once, not up to a pass later.
    pub fn wait_for(pid: Option<&OwnedFd>, timeout: std::time::Duration) {
        let Some(fd) = pid else {
            std::thread::sleep(timeout);
            return;
        };
        let t = Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: timeout.subsec_nanos().into(),
        };
        // A signal (Ctrl-C, SIGUSR2) ends the wait early too, which the loop wants.
        let _ = poll(&mut [PollFd::new(fd, PollFlags::IN)], Some(&t));
    }

    /// A pidfd of process `pid` (the program, a child of the recorder, so it is still there
    /// until reaped), if pidfds can be had.
    pub fn pidfd(pid: u32) -> Option<OwnedFd> {
        let pid = Pid::from_raw(i32::try_from(pid).ok()?)?;
        pidfd_open(pid, PidfdFlags::empty()).ok()
    }

    /// Stops watching the processes `keep` says no longer hold a slot (all their threads'
    /// slots went to others), so that the watch list stays as short as the slots.
    pub fn retain(&mut self, mut keep: impl FnMut(&ProcessKey) -> bool) {
        self.watched.retain(|w| keep(&w.key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_ns() -> u64 {
        std::fs::metadata("/proc/self/ns/pid").unwrap().ino()
    }

    /// A child is seen ended once it exited (before it is reaped too), and only then; an
    /// already reaped pid is ended at the first look; another namespace's is not watched.
    #[test]
    fn a_process_is_seen_ended_once_it_exited() {
        let mut ends = ProcessEnds::new();
        let mut child = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .unwrap();
        let key = (child.id(), None, own_ns());
        ends.watch(key);
        ends.watch(key);
        assert!(ends.take_ended().is_empty(), "running");
        // Exited but not reaped: a zombie has no thread left.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut seen = Vec::new();
        while seen.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            seen = ends.take_ended();
        }
        assert_eq!(seen, vec![key], "once, though watched twice");
        assert!(child.try_wait().unwrap().is_some(), "it had exited");
        assert!(ends.take_ended().is_empty(), "watched no more");

        // Reaped before it is watched: gone at once.
        let mut c = std::process::Command::new("true").spawn().unwrap();
        c.wait().unwrap();
        let key = (c.id(), Some(7), own_ns());
        ends.watch(key);
        assert_eq!(ends.take_ended(), vec![key]);

        // Another pid namespace: its pid is not ours to look up.
        ends.watch((std::process::id(), None, own_ns() + 1));
        assert!(ends.take_ended().is_empty());
        assert!(ends.watched.is_empty());
    }
}
