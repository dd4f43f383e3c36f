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

    fn note(&mut self, name: &str, what: String) {
        if self.noted.insert(name.to_owned()) {
            self.notes.push(what);
        }
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
        let path = self.path(name);
        let data = std::fs::read(&path).ok();
        let Some(want) = self.build_ids.get(name).cloned() else {
            return data;
        };
        let have = data.as_deref().and_then(elf_build_id);
        if have.as_deref() == Some(&want[..]) {
            return data;
        }
        // perf's cache: .build-id/<first byte>/<the rest>/elf.
        let h = hex(&want);
        if let Some(cached) = self.cache.as_ref().map(|c| {
            c.join(".build-id")
                .join(&h[..2.min(h.len())])
                .join(&h[2.min(h.len())..])
                .join("elf")
        }) && let Ok(d) = std::fs::read(&cached)
            && elf_build_id(&d).as_deref() == Some(&want[..])
        {
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
