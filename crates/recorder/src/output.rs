//! Where a recording goes, and how it gets there without destroying what
//! the user pointed at.
//!
//! A file output is written to an unnamed file in the output's directory
//! (`O_TMPFILE`: a crash, an abort or SIGKILL leaves nothing behind), or
//! where the file system has no `O_TMPFILE` to a temporary created with
//! `O_CREAT|O_EXCL` (which never follows a link); it is given the output's
//! name only when the file is complete: an existing output is
//! first renamed to `<output>.old`, as perf does (perf renames at start;
//! perfaux at the end, so that a failed recording leaves the previous file
//! untouched). A link at the output is itself renamed away, never written
//! through. Until [`FileOutput::commit`], dropping the output removes the
//! temporary, so a failure leaves nothing behind.
//!
//! What would stop the end is refused at the start, before anything is recorded (a
//! directory named `<output>.old`); a recording that still cannot take its name at the end
//! is kept beside it under another (`<output>.<pid>`), which the error names.
//!
//! The trace section's chunks go straight into the output
//! ([`crate::in_place`]); the records stream to an unnamed file (`O_TMPFILE`)
//! in the same directory, moved after the trace at the end: it has no name to
//! leave behind and it counts against the same disk as the output.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{RecordError, Result};

/// A file-mode output in progress.
pub struct FileOutput {
    path: PathBuf,
    /// The named temporary, or `None` for an unnamed (`O_TMPFILE`) file.
    temp: Option<PathBuf>,
    committed: bool,
    /// The device and inode of the checkpoint of this recording the output's name was given
    /// last ([`Self::put_checkpoint`]): while the name still holds it, the next checkpoint and
    /// the finished file replace it (the file before it is `.old` already); a file another
    /// recording put there since is kept as `.old`, as at the first.
    checkpointed: Option<(u64, u64)>,
    /// Runs once between the previous output's rename and the new file's naming: where a
    /// test puts another recording's commit.
    #[cfg(test)]
    after_retire: Option<Box<dyn FnOnce() + Send>>,
}

impl std::fmt::Debug for FileOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileOutput")
            .field("path", &self.path)
            .field("temp", &self.temp)
            .field("committed", &self.committed)
            .finish_non_exhaustive()
    }
}

fn out_err(path: &Path, what: impl Into<String>) -> impl FnOnce(io::Error) -> RecordError {
    let path = path.to_path_buf();
    let what = what.into();
    move |source| RecordError::Output { path, what, source }
}

/// The directory an output path lives in (`.` for a bare name).
pub fn output_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

impl FileOutput {
    /// Creates the temporary for `path`; returns it open for writing.
    pub fn create(path: &Path) -> Result<(Self, File)> {
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
            return Err(out_err(path, "cannot write the output")(io::Error::from(
                io::ErrorKind::IsADirectory,
            )));
        }
        // A device, a FIFO or a socket at the output is never replaced: the finished file
        // takes the output's place, and `/dev/null` renamed to `/dev/null.old` and replaced by
        // a file would be every process's /dev/null (as root).
        if let Ok(m) = std::fs::symlink_metadata(path)
            && !m.is_file()
            && !m.file_type().is_symlink()
        {
            return Err(RecordError::Config(format!(
                "{}: not a regular file: a recording is written beside the output and takes its \
                 name when whole (the old file becoming .old), which a device, a pipe or a \
                 socket must not have done to it: record to a file",
                path.display()
            )));
        }
        check_old_name(path)?;
        let dir = output_dir(path);
        let name = path
            .file_name()
            .ok_or_else(|| RecordError::Config(format!("{}: not a file name", path.display())))?;
        match OpenOptions::new()
            .write(true)
            .read(true)
            .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
            .mode(0o644)
            .open(dir)
        {
            // The unnamed file takes its name through /proc at the end: without /proc, a
            // named temporary now rather than a recording that cannot be placed then.
            Ok(f) if proc_fd_path(&f).exists() => {
                let out = FileOutput {
                    path: path.to_path_buf(),
                    temp: None,
                    committed: false,
                    checkpointed: None,
                    #[cfg(test)]
                    after_retire: None,
                };
                return Ok((out, f));
            }
            Ok(_) => {}
            // No O_TMPFILE here (EOPNOTSUPP, EISDIR on old kernels): a named temporary.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
                ) => {}
            Err(e) => return Err(out_err(path, "cannot create the output")(e)),
        }
        let pid = std::process::id();
        let mut last = None;
        for n in 0..100u32 {
            let mut t = std::ffi::OsString::from(".");
            t.push(name);
            t.push(format!(".perfaux-{pid}-{n}.tmp"));
            let temp = dir.join(t);
            match OpenOptions::new()
                .write(true)
                .read(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .mode(0o600)
                .open(&temp)
            {
                Ok(f) => {
                    return Ok((
                        FileOutput {
                            path: path.to_path_buf(),
                            temp: Some(temp),
                            committed: false,
                            checkpointed: None,
                            #[cfg(test)]
                            after_retire: None,
                        },
                        f,
                    ));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(out_err(path, "cannot create the output")(e)),
            }
        }
        Err(out_err(path, "cannot create the output")(
            last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists)),
        ))
    }

    /// The path the user gave.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An unnamed file beside the output for data kept until the end.
    pub fn scratch(&self) -> Result<File> {
        tempfile::tempfile_in(output_dir(&self.path)).map_err(out_err(
            &self.path,
            "cannot create scratch space beside the output",
        ))
    }

    /// A new file for a checkpoint ([`crate::Recorder::checkpoint`]), in the output's
    /// directory: unnamed where the file system can (`O_TMPFILE`: a failed checkpoint leaves
    /// nothing), else a dot-named temporary that [`Self::put_checkpoint`] renames or
    /// [`Self::drop_checkpoint`] removes. With it, the name it must be given first (`None`:
    /// it has it).
    pub fn checkpoint_file(&self) -> Result<(File, Option<PathBuf>)> {
        let dir = output_dir(&self.path);
        if let Ok(f) = OpenOptions::new()
            .write(true)
            .read(true)
            .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
            .mode(0o644)
            .open(dir)
            && proc_fd_path(&f).exists()
        {
            return Ok((f, None));
        }
        let temp = self.checkpoint_name();
        let _ = std::fs::remove_file(&temp);
        OpenOptions::new()
            .write(true)
            .read(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(0o644)
            .open(&temp)
            .map(|f| (f, Some(temp)))
            .map_err(out_err(&self.path, "checkpoint: cannot create the copy"))
    }

    /// `.<output>.perfaux-<pid>.checkpoint` beside the output: a checkpoint's name until it
    /// takes the output's.
    fn checkpoint_name(&self) -> PathBuf {
        let mut name = std::ffi::OsString::from(".");
        name.push(self.path.file_name().unwrap_or_default());
        name.push(format!(".perfaux-{}.checkpoint", std::process::id()));
        output_dir(&self.path).join(name)
    }

    /// Gives the unnamed `file` the checkpoint's name ([`Self::checkpoint_name`]), a stale one
    /// of this pid's (a recording killed between its link and its rename) replaced; returns it.
    fn name_as_checkpoint(&self, file: &File) -> io::Result<PathBuf> {
        let temp = self.checkpoint_name();
        let _ = std::fs::remove_file(&temp);
        link_unnamed(file, &temp)?;
        Ok(temp)
    }

    /// Removes a checkpoint that did not take the output's name (its named temporary, if it
    /// had one).
    pub fn drop_checkpoint(&self, named: Option<PathBuf>) {
        if let Some(t) = named {
            let _ = std::fs::remove_file(t);
        }
    }

    /// Gives a checkpoint the output's name, so that the name always holds a whole file:
    /// the copy gets a name of its own first, then the file at the output (unless it is this
    /// recording's last checkpoint) gets `.old` as a second name, then the copy is renamed
    /// over the output in one step. A process killed between the steps leaves the output's
    /// name on the previous file or on the copy, never on nothing. The recording's own file
    /// stays unnamed.
    pub fn put_checkpoint(&mut self, file: File, named: Option<PathBuf>) -> Result<()> {
        let fail = |what: &str| out_err(&self.path, format!("checkpoint: {what}"));
        let temp = match named {
            Some(t) => t,
            None => self
                .name_as_checkpoint(&file)
                .map_err(fail("cannot name the copy"))?,
        };
        let placed = self.keep_previous().and_then(|()| {
            std::fs::rename(&temp, &self.path).map_err(fail("cannot put the copy in place"))
        });
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&temp);
            return Err(e);
        }
        self.checkpointed = file_id(&self.path);
        Ok(())
    }

    /// Whether the output's name holds this recording's last checkpoint.
    fn holds_checkpoint(&self) -> bool {
        self.checkpointed.is_some() && file_id(&self.path) == self.checkpointed
    }

    /// Before a checkpoint takes the output's name: a file there that is not this recording's
    /// checkpoint (the user's previous one, or another recording's) gets the name `.old` too,
    /// replacing the `.old` before it, as the finish does.
    fn keep_previous(&self) -> Result<()> {
        if self.holds_checkpoint() || std::fs::symlink_metadata(&self.path).is_err() {
            return Ok(());
        }
        let old = old_path(&self.path);
        let _ = std::fs::remove_file(&old);
        match std::fs::hard_link(&self.path, &old) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            // A file system without hard links: the previous file is moved, which leaves the
            // name empty until the rename that follows.
            Err(_) => match std::fs::rename(&self.path, &old) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(out_err(
                    &self.path,
                    format!("cannot keep the previous output as {}", old.display()),
                )(e)),
            },
        }
    }

    /// Puts the finished file in place: `<output>` becomes `<output>.old`
    /// if it exists, the temporary becomes `<output>`.
    ///
    /// The file is synced to disk before it gets its name, so that a name always means a
    /// whole recording. Meanwhile the older `<output>.old`, which this replaces, is removed
    /// (freeing its blocks takes as long as the sync); after the sync the previous output
    /// becomes `.old` and the new file takes `<output>` without replacing anything there: a
    /// recording that ended at the same moment and took the name in between becomes `.old` in
    /// turn (the later takes the name, as perf's rename at start has it), so neither is lost.
    ///
    /// A recording that cannot take its name (`<output>.old` became a directory meanwhile, the
    /// directory's permissions changed) is kept beside it as `<output>.<pid>` and the error
    /// ([`RecordError::Kept`]) names where.
    pub fn commit(mut self, file: File) -> Result<()> {
        let old = old_path(&self.path);
        // After a checkpoint the output is this recording's, the file before it `.old`.
        let checkpointed = self.holds_checkpoint();
        let previous = !checkpointed && std::fs::symlink_metadata(&self.path).is_ok();
        let synced = std::thread::scope(|s| {
            let sync = s.spawn(|| file.sync_all());
            if previous {
                // Gone in a moment anyway (replaced below); an error shows at the rename.
                let _ = std::fs::remove_file(&old);
            }
            sync.join()
                .unwrap_or_else(|_| Err(io::Error::other("the sync thread panicked")))
        });
        synced.map_err(out_err(&self.path, "cannot write the output to disk"))?;
        let placed = if checkpointed {
            self.replace_checkpoint(&file)
        } else {
            self.place(&file, &old)
        };
        let (what, source) = match placed {
            Ok(()) => {
                self.committed = true;
                return Ok(());
            }
            Err(failed) => failed,
        };
        match self.keep_aside(&file) {
            Ok(kept) => {
                self.committed = true;
                Err(RecordError::Kept {
                    path: self.path.clone(),
                    kept,
                    what,
                    source,
                })
            }
            Err(_) => Err(out_err(&self.path, what)(source)),
        }
    }

    /// The previous output to `old`, then the file to the output's name (never replacing a
    /// file there), again while another recording takes the name in between.
    fn place(&mut self, file: &File, old: &Path) -> Result<(), (String, io::Error)> {
        let mut taken = None;
        for _ in 0..PLACE_TRIES {
            let retired = match std::fs::rename(&self.path, old) {
                Ok(()) => true,
                // Nothing there, or another recording's commit moved it a moment ago.
                Err(e) if e.kind() == io::ErrorKind::NotFound => false,
                Err(e) => {
                    let what = format!("cannot rename the previous output to {}", old.display());
                    return Err((what, e));
                }
            };
            #[cfg(test)]
            if let Some(hook) = self.after_retire.take() {
                hook();
            }
            let path = self.path.clone();
            match self.name(file, &path) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => taken = Some(e),
                Err(e) => {
                    let mut what = "cannot put the output in place".to_owned();
                    if retired && rename_noreplace(old, &self.path).is_err() {
                        what.push_str(&format!(" (the previous output is {})", old.display()));
                    }
                    return Err((what, e));
                }
            }
        }
        Err((
            format!(
                "cannot put the output in place ({PLACE_TRIES} other recordings took the name first)"
            ),
            taken.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists)),
        ))
    }

    /// The finished file over the last checkpoint, in one rename.
    fn replace_checkpoint(&mut self, file: &File) -> Result<(), (String, io::Error)> {
        let what = || "cannot put the output in place of its checkpoint".to_owned();
        let temp = match self.temp.take() {
            Some(temp) => temp,
            None => self.name_as_checkpoint(file).map_err(|e| (what(), e))?,
        };
        std::fs::rename(&temp, &self.path).map_err(|e| {
            // Named still: keep_aside names the file from the temporary.
            self.temp = Some(temp);
            (what(), e)
        })
    }

    /// Gives the file the name `to` if nothing has it.
    fn name(&mut self, file: &File, to: &Path) -> io::Result<()> {
        match &self.temp {
            None => link_unnamed(file, to),
            Some(temp) => {
                rename_noreplace(temp, to)?;
                self.temp = None;
                Ok(())
            }
        }
    }

    /// Gives the file a name of its own beside the output (`<output>.<pid>`, then
    /// `<output>.<pid>.N`); returns it.
    fn keep_aside(&mut self, file: &File) -> io::Result<PathBuf> {
        let pid = std::process::id();
        let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
        for n in 0..100u32 {
            let mut name = self.path.clone().into_os_string();
            name.push(format!(".{pid}"));
            if n > 0 {
                name.push(format!(".{n}"));
            }
            let kept = PathBuf::from(name);
            match self.name(file, &kept) {
                Ok(()) => return Ok(kept),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }
}

/// Refuses, before anything is recorded, an output whose previous file could not become
/// `<output>.old` at the end: a directory has that name (a rename cannot replace it).
fn check_old_name(path: &Path) -> Result<()> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    let old = old_path(path);
    if std::fs::symlink_metadata(&old).is_ok_and(|m| m.is_dir()) {
        return Err(out_err(
            path,
            format!(
                "cannot keep the previous output as {}: a directory has that name",
                old.display()
            ),
        )(io::Error::from(io::ErrorKind::IsADirectory)));
    }
    Ok(())
}

/// The name of an open file in /proc, which `linkat` follows to the file itself.
fn proc_fd_path(file: &File) -> PathBuf {
    use std::os::unix::io::AsRawFd;
    PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// How many times a commit moves aside a recording that took the output's name between its
/// own two renames (each such recording ended at the same moment as this one).
const PLACE_TRIES: u32 = 64;

/// The device and inode of the file at `path` (not following a link).
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// `<output>.old`.
fn old_path(path: &Path) -> PathBuf {
    let mut old = path.to_path_buf().into_os_string();
    old.push(".old");
    PathBuf::from(old)
}

/// Renames `from` to `to` unless `to` exists (`AlreadyExists` then). A file system without
/// `RENAME_NOREPLACE` gets a hard link and an unlink, which also never replace.
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        Err(e) => Err(e.into()),
    }
}

/// Copies `len` bytes of `src` at `from` into `dst` at `to`, inside the kernel
/// (`copy_file_range`: the records kept beside the output go into place without passing
/// through user memory), else by reads and writes (a kernel or file system that refuses it).
pub(crate) fn copy_range(src: &File, from: u64, dst: &File, to: u64, len: u64) -> io::Result<()> {
    let (mut from, mut to, mut left) = (from, to, len);
    while left > 0 {
        let want = usize::try_from(left.min(1 << 30)).unwrap_or(1 << 30);
        match rustix::fs::copy_file_range(src, Some(&mut from), dst, Some(&mut to), want) {
            Ok(0) => break,
            Ok(n) => left -= n as u64,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    copy_by_reads(src, dst, (from, to, left), len)
}

/// The pieces [`move_range`] copies at a time: a full disk needs room for one.
pub(crate) const MOVE_PIECE: u64 = 1 << 20;

/// [`copy_range`] a MiB at a time, each piece's blocks in `src` given back once copied (a
/// hole punched: where the file system cannot, the copy goes on as [`copy_range`]'s).
pub(crate) fn move_range(src: &File, from: u64, dst: &File, to: u64, len: u64) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        let n = MOVE_PIECE.min(len - done);
        copy_range(src, from + done, dst, to + done, n)?;
        let _ = rustix::fs::fallocate(
            src,
            rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE,
            from + done,
            n,
        );
        done += n;
    }
    Ok(())
}

/// [`copy_range`]'s fallback: `left` bytes of `src` at `from` to `dst` at `to`, by reads and
/// writes (`len`, the whole copy's length, for the error).
fn copy_by_reads(src: &File, dst: &File, at: (u64, u64, u64), len: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let (mut from, mut to, mut left) = at;
    let mut buf = vec![0u8; if left > 0 { 1 << 20 } else { 0 }];
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = src.read_at(&mut buf[..want], from)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the records kept beside the output ended {left} bytes short of {len}"),
            ));
        }
        dst.write_all_at(&buf[..n], to)?;
        (from, to, left) = (from + n as u64, to + n as u64, left - n as u64);
    }
    Ok(())
}

/// Gives the unnamed file `file` the name `path` (linkat through
/// /proc/self/fd, which needs no capability, unlike AT_EMPTY_PATH).
fn link_unnamed(file: &File, path: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let from = std::ffi::CString::new(proc_fd_path(file).into_os_string().as_bytes())?;
    let to = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: both are NUL-terminated strings that live across the call.
    let r = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Drop for FileOutput {
    fn drop(&mut self) {
        if !self.committed
            && let Some(temp) = &self.temp
        {
            // A failed recording leaves no temporary behind.
            let _ = std::fs::remove_file(temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn commit_keeps_the_old_file_and_replaces_a_link_without_following_it() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::write(&target, b"precious").unwrap();
        let out = d.path().join("perf.data");
        std::os::unix::fs::symlink(&target, &out).unwrap();
        let (o, mut f) = FileOutput::create(&out).unwrap();
        f.write_all(b"new").unwrap();
        o.commit(f).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        assert!(
            std::fs::symlink_metadata(&out)
                .unwrap()
                .file_type()
                .is_file()
        );
        let old = d.path().join("perf.data.old");
        assert!(
            std::fs::symlink_metadata(&old)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 3);
    }

    /// A move places the bytes as a copy does and gives the source's blocks back as it goes.
    #[test]
    fn move_range_places_the_bytes_and_frees_the_source() {
        use std::os::unix::fs::{FileExt, MetadataExt};
        let src = tempfile::tempfile().unwrap();
        let bytes: Vec<u8> = (0..(3 << 20) + 17).map(|i: u32| (i % 251) as u8).collect();
        src.write_all_at(&bytes, 0).unwrap();
        src.sync_all().unwrap();
        let held = src.metadata().unwrap().blocks();
        let dst = tempfile::tempfile().unwrap();
        move_range(&src, 0, &dst, 4096, bytes.len() as u64).unwrap();
        let mut got = vec![0u8; bytes.len()];
        dst.read_exact_at(&mut got, 4096).unwrap();
        assert!(got == bytes);
        let left = src.metadata().unwrap().blocks();
        assert!(left < held / 8, "{left} of {held} blocks still held");
    }

    /// The records' copy into place, inside the kernel and by reads and writes: the bytes
    /// land at the offset, the file's other bytes untouched; a short source is an error.
    #[test]
    fn copy_range_places_the_bytes_at_the_offset() {
        use std::os::unix::fs::FileExt;
        let src = tempfile::tempfile().unwrap();
        let bytes: Vec<u8> = (0..(3 << 20) + 17).map(|i: u32| (i % 251) as u8).collect();
        src.write_all_at(&bytes, 0).unwrap();
        for by_reads in [false, true] {
            let dst = tempfile::tempfile().unwrap();
            dst.write_all_at(b"before", 0).unwrap();
            let len = bytes.len() as u64 - 5 - 3;
            if by_reads {
                copy_by_reads(&src, &dst, (3, 4096, len), len).unwrap();
            } else {
                copy_range(&src, 3, &dst, 4096, len).unwrap();
            }
            let mut got = vec![0u8; 4096 + len as usize];
            dst.read_exact_at(&mut got, 0).unwrap();
            assert_eq!(&got[..6], b"before");
            assert!(got[6..4096].iter().all(|&b| b == 0));
            assert!(
                got[4096..] == bytes[3..3 + len as usize],
                "by reads: {by_reads}"
            );
            let short = copy_by_reads(&src, &dst, (0, 0, bytes.len() as u64 + 1), 9);
            assert_eq!(short.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        }
    }

    /// `-o /dev/null`: refused before anything is written, and the device is left as it is
    /// (replaced by the finished file, it became every process's /dev/null).
    #[test]
    fn a_device_is_not_an_output() {
        use std::os::unix::fs::FileTypeExt;
        let e = FileOutput::create(Path::new("/dev/null")).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let m = std::fs::symlink_metadata("/dev/null").unwrap();
        assert!(m.file_type().is_char_device());
        assert!(!Path::new("/dev/null.old").exists());
    }

    #[test]
    fn a_directory_is_not_an_output() {
        let d = tempfile::tempdir().unwrap();
        let e = FileOutput::create(d.path()).unwrap_err();
        assert_eq!(e.io_kind(), Some(io::ErrorKind::IsADirectory));
        assert!(e.to_string().starts_with(&d.path().display().to_string()));
        assert!(d.path().is_dir());
    }

    /// The race of two recordings that end together, provoked: the second commits whole
    /// between the first's two renames (the previous output gone to `.old`, the first not yet
    /// named). Both are kept, the first under the name, the second as `.old`.
    #[test]
    fn a_commit_between_anothers_two_renames_becomes_old() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("same.data");
        std::fs::write(&out, b"previous").unwrap();
        let (mut first, mut f1) = FileOutput::create(&out).unwrap();
        f1.write_all(b"first").unwrap();
        let (second, mut f2) = FileOutput::create(&out).unwrap();
        f2.write_all(b"second").unwrap();
        first.after_retire = Some(Box::new(move || second.commit(f2).unwrap()));
        first.commit(f1).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"first");
        assert_eq!(
            std::fs::read(d.path().join("same.data.old")).unwrap(),
            b"second"
        );
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 2);
    }

    /// The same race with named temporaries (a file system without `O_TMPFILE`).
    #[test]
    fn a_commit_between_anothers_two_renames_becomes_old_with_named_temporaries() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("same.data");
        let named = |body: &[u8], n: u32| {
            let temp = d.path().join(format!(".same.data.test-{n}.tmp"));
            std::fs::write(&temp, body).unwrap();
            let o = FileOutput {
                path: out.clone(),
                temp: Some(temp.clone()),
                committed: false,
                checkpointed: None,
                after_retire: None,
            };
            (o, File::open(&temp).unwrap())
        };
        let (mut first, f1) = named(b"first", 1);
        let (second, f2) = named(b"second", 2);
        first.after_retire = Some(Box::new(move || second.commit(f2).unwrap()));
        first.commit(f1).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"first");
        assert_eq!(
            std::fs::read(d.path().join("same.data.old")).unwrap(),
            b"second"
        );
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 2);
    }

    /// A directory named `<output>.old` would stop the end's rename: refused at the start,
    /// saying which name, the previous output untouched.
    #[test]
    fn a_directory_named_old_is_refused_before_recording() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out.data");
        std::fs::write(&out, b"previous").unwrap();
        std::fs::create_dir(d.path().join("out.data.old")).unwrap();
        let e = FileOutput::create(&out).unwrap_err();
        assert_eq!(e.io_kind(), Some(io::ErrorKind::IsADirectory));
        let msg = e.chain();
        assert!(
            msg.contains("out.data.old: a directory has that name"),
            "{msg}"
        );
        assert_eq!(std::fs::read(&out).unwrap(), b"previous");
        // Without a previous output nothing is renamed there: no reason to refuse.
        std::fs::remove_file(&out).unwrap();
        FileOutput::create(&out).unwrap();
    }

    /// A recording that cannot take its name at the end (the directory appeared while it
    /// ran) is kept beside the output, under a name the error says.
    #[test]
    fn a_recording_that_cannot_take_its_name_is_kept_beside_it() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out.data");
        std::fs::write(&out, b"previous").unwrap();
        let (o, mut f) = FileOutput::create(&out).unwrap();
        f.write_all(b"recording").unwrap();
        std::fs::create_dir(d.path().join("out.data.old")).unwrap();
        let e = o.commit(f).unwrap_err();
        let RecordError::Kept { kept, .. } = &e else {
            panic!("not kept: {}", e.chain());
        };
        let want = d.path().join(format!("out.data.{}", std::process::id()));
        assert_eq!(kept, &want);
        assert_eq!(std::fs::read(kept).unwrap(), b"recording");
        assert!(
            e.chain().contains(&want.display().to_string()),
            "{}",
            e.chain()
        );
        assert!(
            e.chain().contains("cannot rename the previous output"),
            "{}",
            e.chain()
        );
        assert_eq!(std::fs::read(&out).unwrap(), b"previous");
    }

    #[test]
    fn a_dropped_output_leaves_the_previous_file_and_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("perf.data");
        std::fs::write(&out, b"previous").unwrap();
        let (o, mut f) = FileOutput::create(&out).unwrap();
        f.write_all(b"half").unwrap();
        drop(o);
        assert_eq!(std::fs::read(&out).unwrap(), b"previous");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }
}
