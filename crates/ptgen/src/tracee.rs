//! The traced child: spawned stopped after its exec (PTRACE_TRACEME), stepped one
//! instruction at a time, its memory and mappings read through /proc.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::JoinHandle;

/// One line of /proc/PID/maps.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// The `rwxp` field.
    pub perms: String,
    /// File offset of `start`.
    pub pgoff: u64,
    /// Device major and minor number.
    pub dev: (u32, u32),
    /// Inode number (0 for anonymous and special mappings).
    pub inode: u64,
    /// The path, or `[vdso]` and the like, or empty for anonymous memory.
    pub name: String,
}

impl Mapping {
    /// Whether it may be executed.
    pub fn is_exec(&self) -> bool {
        self.perms.as_bytes().get(2) == Some(&b'x')
    }

    /// Whether it maps a file on disk (its code can be read back by a decoder).
    pub fn is_file(&self) -> bool {
        self.inode != 0 && self.name.starts_with('/')
    }
}

/// Parses /proc/PID/maps.
pub fn read_maps(pid: i32) -> Result<Vec<Mapping>, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| format!("/proc/{pid}/maps: {e}"))?;
    text.lines().map(parse_maps_line).collect()
}

fn parse_maps_line(line: &str) -> Result<Mapping, String> {
    let bad = || format!("unexpected /proc/PID/maps line {line:?}");
    let mut f = line.splitn(6, ' ');
    let range = f.next().ok_or_else(bad)?;
    let perms = f.next().ok_or_else(bad)?;
    let off = f.next().ok_or_else(bad)?;
    let dev = f.next().ok_or_else(bad)?;
    let inode = f.next().ok_or_else(bad)?;
    let name = f.next().unwrap_or("").trim_start();
    let (s, e) = range.split_once('-').ok_or_else(bad)?;
    let (maj, min) = dev.split_once(':').ok_or_else(bad)?;
    let hex = |s: &str| u64::from_str_radix(s, 16).map_err(|_| bad());
    Ok(Mapping {
        start: hex(s)?,
        end: hex(e)?,
        perms: perms.to_string(),
        pgoff: hex(off)?,
        dev: (hex(maj)? as u32, hex(min)? as u32),
        inode: inode.parse().map_err(|_| bad())?,
        name: name.to_string(),
    })
}

/// In the child between fork and exec: asks to be traced by its parent.
fn trace_me() -> std::io::Result<()> {
    // SAFETY: PTRACE_TRACEME takes no pointers.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_TRACEME,
            0,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    };
    if r == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The registers the recorder looks at.
#[derive(Debug, Clone, Copy)]
pub struct Regs {
    /// The next instruction.
    pub rip: u64,
    /// Before a `syscall`: the system call's number.
    pub rax: u64,
}

/// How a step ended.
pub enum Stop {
    /// Stopped after one instruction, at this RIP.
    Stepped(Regs),
    /// The process exited with this status.
    Exited(i32),
}

/// A child under ptrace, stopped.
pub struct Tracee {
    pub pid: i32,
    mem: File,
    stdout: Option<JoinHandle<Vec<u8>>>,
    done: bool,
    /// The tracer thread's CPU affinity before the recording, restored at the end.
    _pin: Option<Pin>,
}

impl Tracee {
    /// Starts `program` with `args`, stopped at its first user instruction (the dynamic
    /// loader's entry, or a static program's). Its stdout is collected (see
    /// [`Tracee::take_stdout`]); stdin is /dev/null, stderr inherited.
    pub fn spawn(program: &Path, args: &[&str]) -> Result<Self, String> {
        let pin = Pin::here();
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // SAFETY: `trace_me` runs in the forked child before exec and calls only ptrace,
        // which is async-signal-safe; it touches no memory of the parent.
        unsafe { cmd.pre_exec(trace_me) };
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        let pid = child.id() as i32;
        let mut out = child.stdout.take().expect("piped stdout");
        let stdout = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = out.read_to_end(&mut v);
            v
        });
        // The child is never waited through `child`: this tracer reaps it with waitpid.
        drop(child);
        let mut t = Tracee {
            pid,
            mem: File::open("/dev/null").map_err(|e| e.to_string())?,
            stdout: Some(stdout),
            done: false,
            _pin: pin,
        };
        match t.wait()? {
            WaitResult::Stopped(libc::SIGTRAP) => {}
            WaitResult::Stopped(sig) => {
                return Err(format!("child stopped by signal {sig} before its exec"));
            }
            WaitResult::Exited(code) => {
                t.done = true;
                return Err(format!("child exited ({code}) before its exec"));
            }
        }
        // SAFETY: PTRACE_SETOPTIONS on our stopped tracee; data is an integer.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_SETOPTIONS,
                pid,
                std::ptr::null_mut::<libc::c_void>(),
                libc::PTRACE_O_EXITKILL as usize as *mut libc::c_void,
            )
        };
        if r == -1 {
            return Err(format!(
                "PTRACE_SETOPTIONS: {}",
                std::io::Error::last_os_error()
            ));
        }
        t.mem =
            File::open(format!("/proc/{pid}/mem")).map_err(|e| format!("/proc/{pid}/mem: {e}"))?;
        Ok(t)
    }

    fn wait(&mut self) -> Result<WaitResult, String> {
        let mut status = 0;
        loop {
            // SAFETY: waitpid writes the status into our local.
            let r = unsafe { libc::waitpid(self.pid, &mut status, libc::__WALL) };
            if r == -1 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("waitpid: {e}"));
            }
            break;
        }
        if libc::WIFEXITED(status) {
            self.done = true;
            Ok(WaitResult::Exited(libc::WEXITSTATUS(status)))
        } else if libc::WIFSIGNALED(status) {
            self.done = true;
            Ok(WaitResult::Exited(128 + libc::WTERMSIG(status)))
        } else if libc::WIFSTOPPED(status) {
            Ok(WaitResult::Stopped(libc::WSTOPSIG(status)))
        } else {
            Err(format!("waitpid: unexpected status {status:#x}"))
        }
    }

    /// The registers.
    pub fn regs(&self) -> Result<Regs, String> {
        // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
        let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        // SAFETY: PTRACE_GETREGS writes one user_regs_struct at the pointer we give.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_GETREGS,
                self.pid,
                std::ptr::null_mut::<libc::c_void>(),
                &mut regs as *mut libc::user_regs_struct as *mut libc::c_void,
            )
        };
        if r == -1 {
            return Err(format!(
                "PTRACE_GETREGS: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Regs {
            rip: regs.rip,
            rax: regs.rax,
        })
    }

    /// Executes one instruction (a `syscall` with its whole system call; one iteration of
    /// a `rep` string instruction).
    pub fn step(&mut self) -> Result<Stop, String> {
        // SAFETY: PTRACE_SINGLESTEP on our stopped tracee, no signal to deliver.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_SINGLESTEP,
                self.pid,
                std::ptr::null_mut::<libc::c_void>(),
                std::ptr::null_mut::<libc::c_void>(),
            )
        };
        if r == -1 {
            return Err(format!(
                "PTRACE_SINGLESTEP: {}",
                std::io::Error::last_os_error()
            ));
        }
        match self.wait()? {
            WaitResult::Stopped(libc::SIGTRAP) => Ok(Stop::Stepped(self.regs()?)),
            WaitResult::Stopped(sig) => Err(format!(
                "the program received signal {sig}: ptgen does not trace signal delivery"
            )),
            WaitResult::Exited(code) => Ok(Stop::Exited(code)),
        }
    }

    /// Reads up to `buf.len()` bytes at `addr`; returns how many could be read.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> usize {
        let mut n = 0;
        while n < buf.len() {
            match self.mem.read_at(&mut buf[n..], addr + n as u64) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
        }
        n
    }

    /// What the program wrote to its stdout (after it exited).
    pub fn take_stdout(&mut self) -> Vec<u8> {
        self.stdout
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

/// The calling thread pinned to the CPU it runs on (and so the child it forks, which
/// inherits the mask): each single step wakes the other side, and a wake-up on the same CPU
/// costs far less than an IPI to another (on a 2-CPU VM: 20 us per instruction instead of
/// 60). Dropping it restores the thread's mask.
struct Pin {
    old: libc::cpu_set_t,
}

impl Pin {
    fn here() -> Option<Pin> {
        // SAFETY: sched_getcpu takes no arguments.
        let cpu = unsafe { libc::sched_getcpu() };
        let cpu = usize::try_from(cpu).ok()?;
        // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
        let mut old: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: writes at most `size` bytes into `old`.
        if unsafe { libc::sched_getaffinity(0, size, &mut old) } != 0 {
            return None;
        }
        // SAFETY: as above.
        let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: CPU_SET writes one bit of `one`; `cpu` < CPU_SETSIZE (sched_getcpu's).
        unsafe { libc::CPU_SET(cpu, &mut one) };
        // SAFETY: reads `size` bytes of `one`.
        if unsafe { libc::sched_setaffinity(0, size, &one) } != 0 {
            return None;
        }
        Some(Pin { old })
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: reads `size` bytes of the saved mask.
        unsafe { libc::sched_setaffinity(0, size, &self.old) };
    }
}

enum WaitResult {
    Stopped(i32),
    Exited(i32),
}

impl Drop for Tracee {
    fn drop(&mut self) {
        if !self.done {
            // SAFETY: kill on the pid of our own, not yet reaped, child.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let mut status = 0;
            // SAFETY: waitpid writes the status into our local.
            unsafe { libc::waitpid(self.pid, &mut status, libc::__WALL) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines() {
        let m = parse_maps_line(
            "7f3c1a000000-7f3c1a028000 r-xp 00001000 fe:01 1835204                    /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
        )
        .unwrap();
        assert_eq!(m.start, 0x7f3c1a000000);
        assert_eq!(m.pgoff, 0x1000);
        assert_eq!(m.dev, (0xfe, 1));
        assert_eq!(m.inode, 1835204);
        assert!(m.is_exec() && m.is_file());
        assert_eq!(m.name, "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2");
        let v = parse_maps_line(
            "7ffd1b3f0000-7ffd1b3f2000 r-xp 00000000 00:00 0                          [vdso]",
        )
        .unwrap();
        assert!(v.is_exec() && !v.is_file());
        let a = parse_maps_line("7ffd1b3f0000-7ffd1b3f2000 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!(a.name, "");
    }
}
