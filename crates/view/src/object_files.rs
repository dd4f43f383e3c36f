//! The files a recording names (its MMAP records' paths), read as the recording saw them:
//! under perf's `--symfs` directory when one is given, and checked against the build ids the
//! recording holds (HEADER_BUILD_ID). A file whose build id differs (the program was rebuilt
//! since) is not the code that ran: its copy in perf's build-id cache
//! (`~/.debug/.build-id/ab/cdef.../elf`, what `perf record` and `perf archive` keep) is read
//! instead, and where there is none the file is not used, and said once. Decoding Intel PT
//! over the wrong code gives wrong calls, not errors: hence the check.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

/// Where files are read from, and what the recording says they are.
#[derive(Debug, Default)]
pub struct ObjectFiles {
    symfs: Option<PathBuf>,
    /// The recording's build ids by path.
    build_ids: HashMap<String, Vec<u8>>,
    /// perf's build-id cache (`$HOME/.debug`).
    cache: Option<PathBuf>,
    /// What could not be used, and why: for the user, once each.
    notes: Vec<String>,
    noted: HashSet<String>,
}

/// The name perf gives the vdso's map.
const VDSO: &str = "[vdso]";

/// This process's vdso image, copied from its mapping (the kernel maps the same image into
/// every process).
fn own_vdso() -> Option<Vec<u8>> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let line = maps.lines().find(|l| l.ends_with("[vdso]"))?;
    let range = line.split_whitespace().next()?;
    let (a, b) = range.split_once('-')?;
    let (start, end) = (
        usize::from_str_radix(a, 16).ok()?,
        usize::from_str_radix(b, 16).ok()?,
    );
    let len = end.checked_sub(start)?;
    // SAFETY: /proc/self/maps says [start, end) is this process's vdso mapping, readable and
    // never unmapped while the process runs; it is only read, and copied at once.
    let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, len) };
    Some(bytes.to_vec())
}

/// The largest file read: an object file is far smaller; a map of something else (a device,
/// a huge data file mapped executable) is not read.
pub const MAX_OBJECT_FILE: u64 = 1 << 30;

/// A regular file's bytes, if it is one and not larger than [`MAX_OBJECT_FILE`]: a recording
/// may name `/dev/zero` or a FIFO, which would read without end.
fn read_regular(path: &std::path::Path) -> Option<Vec<u8>> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_OBJECT_FILE {
        return None;
    }
    use std::io::Read;
    let mut data = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_OBJECT_FILE)
        .read_to_end(&mut data)
        .ok()?;
    Some(data)
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The GNU build id of an ELF file's bytes.
pub fn elf_build_id(data: &[u8]) -> Option<Vec<u8>> {
    use object::Object;
    let file = object::File::parse(data).ok()?;
    file.build_id().ok().flatten().map(<[u8]>::to_vec)
}

impl ObjectFiles {
    /// Files under `dir` (perf's `--symfs`): a recording's `/usr/lib/x.so` is
    /// `dir/usr/lib/x.so`.
    pub fn set_symfs(&mut self, dir: Option<PathBuf>) {
        self.symfs = dir;
    }

    /// The recording's build ids (path, id).
    pub fn set_build_ids(&mut self, ids: impl IntoIterator<Item = (String, Vec<u8>)>) {
        self.build_ids = ids.into_iter().collect();
        self.cache = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".debug"));
    }

    /// What could not be used, in the order it was found.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Says `what` once for `name` (with the files' own notes).
    pub fn note(&mut self, name: &str, what: String) {
        if self.noted.insert(name.to_owned()) {
            self.notes.push(what);
        }
    }

    /// The copy of the file with build id `id` in perf's cache (`.build-id/ab/cdef.../FILE`,
    /// `elf` for a file, `vdso` for the vdso), if its build id is that.
    fn cached(&self, id: &[u8], file: &str) -> Option<Vec<u8>> {
        let h = hex(id);
        let split = 2.min(h.len());
        let p = self
            .cache
            .as_ref()?
            .join(".build-id")
            .join(&h[..split])
            .join(&h[split..])
            .join(file);
        let d = read_regular(&p)?;
        (elf_build_id(&d).as_deref() == Some(id)).then_some(d)
    }

    /// The vdso the recording's processes ran: perf's cached copy of it, or this machine's own
    /// when its build id is the recording's (the same kernel).
    fn read_vdso(&mut self) -> Option<Vec<u8>> {
        // Without a build id the vdso's code is not known (another kernel's may differ): a
        // trace through it loses the flow there, which the decode says as skipped bytes.
        let want = self.build_ids.get(VDSO).cloned()?;
        if let Some(d) = self
            .cached(&want, "vdso")
            .or_else(|| self.cached(&want, "elf"))
        {
            return Some(d);
        }
        if let Some(own) = own_vdso()
            && elf_build_id(&own).as_deref() == Some(&want[..])
        {
            return Some(own);
        }
        self.note(
            VDSO,
            format!(
                "[vdso]: build id {} is neither in perf's build-id cache nor this kernel's: calls \
                 through it lose the trace's flow (to the next PSB)",
                hex(&want)
            ),
        );
        None
    }

    /// Where the recording's `name` is on this machine.
    pub fn path(&self, name: &str) -> PathBuf {
        match &self.symfs {
            Some(d) => d.join(name.trim_start_matches('/')),
            None => PathBuf::from(name),
        }
    }

    /// The bytes of the file the recording calls `name`, if they are the ones it ran (as
    /// far as its build ids say); `None` if there are none such at hand.
    pub fn read(&mut self, name: &str) -> Option<Vec<u8>> {
        if name == VDSO {
            return self.read_vdso();
        }
        let path = self.path(name);
        let data = read_regular(&path);
        let Some(want) = self.build_ids.get(name).cloned() else {
            return data;
        };
        let have = data.as_deref().and_then(elf_build_id);
        if have.as_deref() == Some(&want[..]) {
            return data;
        }
        // perf's cache: .build-id/<first byte>/<the rest>/elf.
        let h = hex(&want);
        if let Some(d) = self.cached(&want, "elf") {
            return Some(d);
        }
        let why = match (data, have) {
            (None, _) => format!(
                "{}: not found (the recording's build id {h}); its code and symbols are not shown",
                path.display()
            ),
            (Some(_), Some(other)) => format!(
                "{}: build id {} is not the recording's {h} (rebuilt since?); its code and \
                 symbols are not used",
                path.display(),
                hex(&other)
            ),
            (Some(_), None) => format!(
                "{}: has no build id, the recording's is {h}; its code and symbols are not used",
                path.display()
            ),
        };
        self.note(name, why);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test binary as a recording would name it: read when its id is the recording's,
    /// refused (and said once) when not.
    #[test]
    fn a_file_is_read_only_with_the_recordings_build_id() {
        let exe = std::env::current_exe().unwrap();
        let name = exe.to_str().unwrap().to_owned();
        let Some(id) = elf_build_id(&std::fs::read(&exe).unwrap()) else {
            // Linked without a build id: nothing to check against.
            return;
        };
        let mut f = ObjectFiles::default();
        f.set_build_ids([(name.clone(), id.clone())]);
        assert!(f.read(&name).is_some());
        assert!(f.notes().is_empty());
        let mut other = id.clone();
        other[0] ^= 0xff;
        let mut f = ObjectFiles::default();
        f.set_build_ids([(name.clone(), other)]);
        assert!(f.read(&name).is_none());
        assert!(f.read(&name).is_none());
        assert_eq!(f.notes().len(), 1, "{:?}", f.notes());
        assert!(
            f.notes()[0].contains("is not the recording's"),
            "{:?}",
            f.notes()
        );
    }

    /// This machine's vdso, recorded with its build id, is read; with another id, refused and
    /// said.
    #[test]
    fn the_vdso_is_this_kernels_when_its_build_id_is_the_recordings() {
        let Some(own) = own_vdso() else {
            return;
        };
        let Some(id) = elf_build_id(&own) else {
            return;
        };
        let mut f = ObjectFiles::default();
        f.set_build_ids([(VDSO.to_owned(), id.clone())]);
        assert_eq!(f.read(VDSO).as_deref(), Some(&own[..]));
        let mut other = id;
        other[0] ^= 1;
        let mut f = ObjectFiles::default();
        f.set_build_ids([(VDSO.to_owned(), other)]);
        assert!(f.read(VDSO).is_none());
        assert!(
            f.notes()[0].starts_with("[vdso]: build id"),
            "{:?}",
            f.notes()
        );
    }

    /// A map of a device or a FIFO is not read (it would not end).
    #[test]
    fn what_is_no_regular_file_is_not_read() {
        let mut f = ObjectFiles::default();
        assert!(f.read("/dev/zero").is_none());
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path; mkfifo reads it only.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(f.read(fifo.to_str().unwrap()).is_none());
    }

    #[test]
    fn symfs_prefixes_the_recordings_paths() {
        let mut f = ObjectFiles::default();
        f.set_symfs(Some(PathBuf::from("/sysroot")));
        assert_eq!(
            f.path("/usr/lib/libc.so.6"),
            PathBuf::from("/sysroot/usr/lib/libc.so.6")
        );
    }
}
