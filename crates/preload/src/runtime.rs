//! The runtime a traced program preloads: the copy build.rs made and this crate carries, or
//! the file `PERFAUX_PRELOAD_LIB` names.
//!
//! Carried rather than installed: a tool built on this crate (`cargo install --path
//! crates/cli`) traces programs with no other file to put in place, and the runtime it
//! preloads is the one built from the same sources as the recorder that reads its memory.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

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

impl Runtime {
    /// `PERFAUX_PRELOAD_LIB` if set, else the carried copy, written to a memfd that the
    /// program's loader opens as /proc/PID/fd/N of this process.
    pub fn find() -> std::io::Result<Runtime> {
        if let Some(p) = std::env::var_os(ENV_RUNTIME) {
            return Ok(Runtime {
                path: PathBuf::from(p),
                _fd: None,
            });
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
}
