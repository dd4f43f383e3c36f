//! Records wait in a spill file beside the output until the recording ends.
//!
//! perfaux-perfdata's file writer takes its feature sections when it is
//! created, and perfaux's trace section is only complete when the recording
//! ends; so records are appended here as they are drained (bounded memory),
//! and copied into the writer, record by record, once the section is known.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use perfaux_abi::{Endianness, PerfEventHeader};

use crate::error::CliError;

pub struct Spill {
    path: PathBuf,
    w: BufWriter<File>,
    pub records: u64,
}

impl Spill {
    /// A spill file next to `output` (same file system, so no surprise
    /// about space elsewhere).
    pub fn create(output: &Path) -> Result<Self, CliError> {
        let mut name = output
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_else(|| "perf.data".into());
        name.push(".perfaux-spill");
        let path = output.with_file_name(name);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| CliError::msg(format!("{}: cannot create: {e}", path.display())))?;
        Ok(Spill {
            path,
            w: BufWriter::with_capacity(1 << 20, f),
            records: 0,
        })
    }

    /// Appends one whole record.
    pub fn push(&mut self, record: &[u8]) -> Result<(), CliError> {
        self.records += 1;
        self.w
            .write_all(record)
            .map_err(|e| CliError::msg(format!("{}: write: {e}", self.path.display())))
    }

    /// Hands every record, in order, to `f`; removes the file.
    pub fn replay(
        mut self,
        mut f: impl FnMut(&[u8]) -> Result<(), CliError>,
    ) -> Result<(), CliError> {
        let path = self.path.clone();
        let io = |e: std::io::Error| CliError::msg(format!("{}: {e}", path.display()));
        self.w.flush().map_err(io)?;
        let mut r = BufReader::with_capacity(1 << 20, File::open(&path).map_err(io)?);
        let mut rec = Vec::with_capacity(1 << 16);
        loop {
            let mut h = [0u8; 8];
            match r.read_exact(&mut h) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(io(e)),
            }
            let size = usize::from(PerfEventHeader::parse(h, Endianness::NATIVE).size);
            if size < 8 {
                return Err(CliError::msg(format!(
                    "{}: record of size {size}",
                    path.display()
                )));
            }
            rec.clear();
            rec.extend_from_slice(&h);
            rec.resize(size, 0);
            r.read_exact(&mut rec[8..]).map_err(io)?;
            f(&rec)?;
        }
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        // An aborted recording leaves no spill file behind.
        let _ = std::fs::remove_file(&self.path);
    }
}
