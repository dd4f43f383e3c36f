//! The runtime a traced program preloads: the copy build.rs made and this crate carries, or
//! the file `PERFAUX_PRELOAD_LIB` names.
//!
//! Carried rather than installed: a tool built on this crate (`cargo install --path
//! crates/cli`) traces programs with no other file to put in place, and the runtime it
//! preloads is the one built from the same sources as the recorder that reads its memory.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The runtime, built by build.rs.
static RUNTIME: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libperfaux_runtime.so"));

/// The workspace crates (directories relative to the workspace root) the carried runtime is
/// built from: the runtime's package and its path dependencies, from `cargo metadata` at
/// build time. A change under any of them builds the runtime again.
pub const WATCHED: &[&str] = include!(concat!(env!("OUT_DIR"), "/watched.rs"));

/// The environment variable that names a runtime to preload instead of the carried one.
pub const ENV_RUNTIME: &str = "PERFAUX_PRELOAD_LIB";

/// The runtime to preload, as the program's loader finds it.
#[derive(Debug)]
pub struct Runtime {
    /// The path given to `LD_PRELOAD`.
    pub path: PathBuf,
    /// The memfd holding the carried copy (`/proc/PID/fd/N` of this process), kept open for
    /// as long as the recording may start processes.
    _fd: Option<OwnedFd>,
}

/// The carried copy's FNV-1a hash (build.rs), in the name of the file it is kept in.
const RUNTIME_HASH: u64 = include!(concat!(env!("OUT_DIR"), "/runtime_hash.rs"));

impl Runtime {
    /// `PERFAUX_PRELOAD_LIB` if set; else the carried copy kept in the user's cache directory
    /// ([`Runtime::kept`]), a file that perf and the views can open to name the runtime's own
    /// functions in samples; else the carried copy written to a memfd that the program's
    /// loader opens as /proc/PID/fd/N of this process (a path no tool can open once the
    /// recording is over).
    pub fn find() -> std::io::Result<Runtime> {
        if let Some(p) = std::env::var_os(ENV_RUNTIME) {
            return Ok(Runtime {
                path: PathBuf::from(p),
                _fd: None,
            });
        }
        if let Some(path) = crate::tsc_cache::cache_dir().and_then(|d| Runtime::kept(&d)) {
            return Ok(Runtime { path, _fd: None });
        }
        let fd =
            rustix::fs::memfd_create("libperfaux_runtime.so", rustix::fs::MemfdFlags::CLOEXEC)?;
        let mut f = File::from(fd);
        f.write_all(RUNTIME)?;
        let path = PathBuf::from(format!("/proc/{}/fd/{}", std::process::id(), f.as_raw_fd()));
        Ok(Runtime {
            path,
            _fd: Some(f.into()),
        })
    }

    /// The carried runtime's bytes (an ELF shared object).
    pub fn carried() -> &'static [u8] {
        RUNTIME
    }

    /// The carried copy as a file of `dir` (made 0700 if missing), named by its hash: the one
    /// a previous recording left there if it is this user's, written by no one else, and holds
    /// the carried bytes exactly; else written anew (a temporary renamed into place). `None`
    /// where `dir` is not this user's alone, is on a file system mounted noexec (the loader
    /// could not map it), or cannot be written.
    ///
    /// Once its bytes were found or written whole, the file's modification time is set to
    /// [`VERIFIED_MTIME`]: a later recording that finds it there takes the bytes as checked
    /// (any write since, by `write` or through a mapping, set the time to the write's), without
    /// reading 2 MB and comparing them, which was 0.35 ms of every recording's start.
    fn kept(dir: &Path) -> Option<PathBuf> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .ok()?;
        let noexec = rustix::fs::statvfs(dir)
            .map(|v| v.f_flag.contains(rustix::fs::StatVfsMountFlags::NOEXEC))
            .unwrap_or(true);
        if !crate::tsc_cache::own_dir(dir) || noexec {
            return None;
        }
        let path = dir.join(format!("libperfaux_runtime-{RUNTIME_HASH:016x}.so"));
        let same = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .and_then(|mut f| {
                let m = f.metadata()?;
                // SAFETY: geteuid has no preconditions.
                let mine = m.is_file() && m.uid() == unsafe { libc::geteuid() };
                if !mine || m.mode() & 0o022 != 0 || m.len() != RUNTIME.len() as u64 {
                    return Ok(false);
                }
                if m.modified().ok() == Some(verified_mtime()) {
                    return Ok(true);
                }
                let same = same_bytes(&mut f, RUNTIME)?;
                if same {
                    // Best effort: the next recording compares again if the time is not kept.
                    let _ = f.set_modified(verified_mtime());
                }
                Ok(same)
            })
            .unwrap_or(false);
        if same {
            return Some(path);
        }
        let tmp = dir.join(format!(
            ".libperfaux_runtime.{}.{}",
            std::process::id(),
            perfaux_swtrace::clock::monotonic_ns()
        ));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o500)
            .open(&tmp)
            .and_then(|mut f| {
                f.write_all(RUNTIME)?;
                f.set_modified(verified_mtime())
            })
            .and_then(|()| std::fs::rename(&tmp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
            return None;
        }
        Some(path)
    }
}

/// The modification time of a kept runtime whose bytes were checked ([`Runtime::kept`]): a
/// whole second in 2000-2003 (any file system keeps it), which a write never sets, derived
/// from the carried bytes' hash.
const VERIFIED_MTIME: u64 = 946_684_800 + 2 * (RUNTIME_HASH % 50_000_000);

fn verified_mtime() -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_secs(VERIFIED_MTIME)
}

/// Whether `f` from its start holds `want` exactly and ends there: read through one small
/// buffer, since a recording's start checks the kept runtime (megabytes) each time, and a
/// buffer of its whole size cost the recorder a page fault a page of it.
fn same_bytes(f: &mut impl std::io::Read, want: &[u8]) -> std::io::Result<bool> {
    let mut buf = vec![0u8; 64 << 10];
    let mut at = 0;
    loop {
        let n = match f.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(at == want.len());
        }
        if want.get(at..at + n) != Some(&buf[..n]) {
            return Ok(false);
        }
        at += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The carried copy is a shared object, and what `find` writes is that copy.
    #[test]
    fn the_carried_runtime_is_a_shared_object() {
        let b = Runtime::carried();
        assert_eq!(&b[..4], b"\x7fELF");
        // e_type ET_DYN (3), little-endian on the targets the runtime is built for.
        assert_eq!(u16::from_le_bytes([b[16], b[17]]), 3);
        if std::env::var_os(ENV_RUNTIME).is_none() {
            let r = Runtime::find().unwrap();
            assert_eq!(std::fs::read(&r.path).unwrap(), b);
        }
    }

    /// The kept copy's check: equal bytes only, whatever the reads' sizes, and a file longer
    /// or shorter than the runtime is not it.
    #[test]
    fn the_kept_copys_bytes_are_compared_whole() {
        let want: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut same = &want[..];
        assert!(same_bytes(&mut same, &want).unwrap());
        let mut changed = want.clone();
        changed[150_000] ^= 1;
        assert!(!same_bytes(&mut &changed[..], &want).unwrap());
        assert!(!same_bytes(&mut &want[..199_999], &want).unwrap());
        let mut longer = want.clone();
        longer.push(0);
        assert!(!same_bytes(&mut &longer[..], &want).unwrap());
        // Reads of any size: a reader that hands out a few bytes at a time.
        struct Few<'a>(&'a [u8]);
        impl std::io::Read for Few<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(7).min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        assert!(same_bytes(&mut Few(&want), &want).unwrap());
        assert!(!same_bytes(&mut Few(&changed), &want).unwrap());
    }

    /// The kept copy is a file named by the carried bytes' hash, holding them; a damaged or
    /// foreign-writable file of that name is replaced, never used; a directory others may
    /// write into gives none.
    #[test]
    fn the_kept_runtime_is_the_carried_copy_in_a_directory_of_the_users_alone() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("perfaux");
        let path = Runtime::kept(&dir).expect("a kept copy");
        assert_eq!(path.parent(), Some(dir.as_path()));
        assert!(
            path.to_string_lossy()
                .contains(&format!("{RUNTIME_HASH:016x}"))
        );
        assert_eq!(std::fs::read(&path).unwrap(), Runtime::carried());
        // Kept again: the same file.
        assert_eq!(Runtime::kept(&dir), Some(path.clone()));
        // Damaged: written anew.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, b"not the runtime").unwrap();
        assert_eq!(Runtime::kept(&dir), Some(path.clone()));
        assert_eq!(std::fs::read(&path).unwrap(), Runtime::carried());
        // Checked once, then taken by its time: a write of the same length, which sets the
        // time, is found and written anew.
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            verified_mtime()
        );
        assert_eq!(Runtime::kept(&dir), Some(path.clone()));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut same_length = Runtime::carried().to_vec();
        same_length[1000] ^= 0xff;
        std::fs::write(&path, &same_length).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o500)).unwrap();
        assert_eq!(Runtime::kept(&dir), Some(path.clone()));
        assert_eq!(std::fs::read(&path).unwrap(), Runtime::carried());
        // One that holds the bytes, its time not the checked one's (a copy from before it was
        // kept), is compared and given the time.
        std::fs::File::open(&path)
            .unwrap()
            .set_modified(std::time::SystemTime::now())
            .unwrap();
        assert_eq!(Runtime::kept(&dir), Some(path.clone()));
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            verified_mtime()
        );
        // Writable by others: written anew.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(Runtime::kept(&dir), Some(path.clone()));
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o500
        );
        // A directory others may write into: none.
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(Runtime::kept(&open), None);
    }
}
