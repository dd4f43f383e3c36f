//! The file's metadata: the header, the attrs with their ids and names, and
//! the feature sections, read before the first record (file mode).

use crate::attr_bits;
use crate::error::{Error, Result};
use crate::events::{EventAttr, IdMap};
use crate::feature::Feature;
use crate::features::FeatureSections;
use crate::header::{FileHeader, FileSection, Preamble};
use crate::trace_section::PERFAUX_FEATURE_BIT;
use perfaux_abi::Endianness;
use perfaux_abi::attr::{PERF_ATTR_SIZE_MAX, PerfEventAttr};
use perfaux_abi::consts::*;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

/// Limits the reader applies to what the file asks of it.
#[derive(Debug, Clone, Copy)]
pub struct ReaderOptions {
    /// The largest AUXTRACE (or tracing data) payload held in memory.
    pub max_payload: u64,
    /// The largest feature section read.
    pub max_feature_size: u64,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        Self {
            max_payload: 1 << 30,
            max_feature_size: 256 << 20,
        }
    }
}

/// File mode or pipe mode, with the file header in file mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataFormat {
    /// A perf.data file, with its header.
    File(FileHeader),
    /// A pipe-mode stream, with its 16-byte preamble.
    Pipe(Preamble),
}

/// Everything about the file that is not the record stream. In pipe mode
/// the attrs and features arrive as records and are added as they pass.
#[derive(Debug, Clone)]
pub struct Metadata {
    /// File or pipe mode.
    pub format: DataFormat,
    /// Byte order of the file.
    pub endian: Endianness,
    /// The events, in the attrs section's (or HEADER_ATTR records') order.
    pub attrs: Vec<EventAttr>,
    /// The feature sections read so far.
    pub features: FeatureSections,
    /// Why some feature sections of a file could not be read (the features
    /// read before the damage are kept; the records are unaffected).
    pub feature_error: Option<Arc<Error>>,
}

impl Metadata {
    /// Whether the input is a pipe-mode stream.
    pub fn is_pipe(&self) -> bool {
        matches!(self.format, DataFormat::Pipe(_))
    }

    /// Whether simpleperf wrote the file (it sets feature bits from 128).
    pub fn is_simpleperf(&self) -> bool {
        self.features
            .features()
            .any(|f| f >= Feature::SIMPLEPERF_START)
    }
}

pub(super) fn read_exact_at<R: Read>(
    r: &mut R,
    buf: &mut [u8],
    offset: u64,
    what: &str,
) -> Result<()> {
    r.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::truncated(offset, format!("{what}: {} bytes expected", buf.len()))
        } else {
            Error::io(offset, e)
        }
    })
}

/// The end of `section`, checked to lie in the file.
fn in_file(section: FileSection, file_len: u64, what: &str) -> Result<u64> {
    section.end().filter(|&e| e <= file_len).ok_or_else(|| {
        Error::corrupt(
            section.offset,
            format!(
                "{what} section {:#x}+{:#x} runs past the end of the {file_len:#x}-byte file",
                section.offset, section.size
            ),
        )
    })
}

/// Reads `section` of a seekable file after checking it lies in the file.
fn read_section<R: Read + Seek>(
    r: &mut R,
    section: FileSection,
    file_len: u64,
    max: u64,
    what: &str,
) -> Result<Vec<u8>> {
    let end = in_file(section, file_len, what)?;
    if section.size > max {
        return Err(Error::corrupt(
            section.offset,
            format!(
                "{what} section of {} bytes exceeds the {max}-byte limit",
                section.size
            ),
        ));
    }
    debug_assert!(end <= file_len);
    r.seek(SeekFrom::Start(section.offset))
        .map_err(|e| Error::io(section.offset, e))?;
    let mut v = vec![0u8; section.size as usize];
    read_exact_at(r, &mut v, section.offset, what)?;
    Ok(v)
}

/// Reads the header, the attrs and the feature sections of a file-mode
/// perf.data whose preamble `p` was read; returns the metadata, the id map
/// the file header and the end of the data section.
pub(super) fn read_file_metadata<R: Read + Seek>(
    r: &mut R,
    p: Preamble,
    opts: &ReaderOptions,
) -> Result<(Metadata, IdMap, FileHeader, u64)> {
    let file_len = r.seek(SeekFrom::End(0)).map_err(|e| Error::io(0, e))?;
    r.seek(SeekFrom::Start(16)).map_err(|e| Error::io(16, e))?;
    let mut rest = vec![0u8; (p.size - 16) as usize];
    read_exact_at(r, &mut rest, 16, "perf.data file header")?;
    let header = FileHeader::parse(p, &rest)?;
    let e = header.endian;

    // Attrs: each entry is the attr (attr_size - 16 bytes) and its ids section.
    let entry = header.attr_size;
    let min_entry = u64::from(PERF_ATTR_SIZE_VER0) + FileSection::SIZE as u64;
    let max_entry = u64::from(PERF_ATTR_SIZE_MAX) + FileSection::SIZE as u64;
    if !(min_entry..=max_entry).contains(&entry) {
        return Err(Error::corrupt(
            16,
            format!("attr_size {entry} is outside {min_entry}..={max_entry}"),
        ));
    }
    let attrs_raw = read_section(r, header.attrs, file_len, file_len, "attrs")?;
    let mut attrs = Vec::new();
    let mut ids = IdMap::default();
    // Every attr's ids section may claim the whole file: together they may hold no more than
    // the file does, or N attrs pointing at one large section would read it N times over.
    let mut ids_left = file_len;
    for (i, ent) in attrs_raw.chunks_exact(entry as usize).enumerate() {
        let at = header.attrs.offset + i as u64 * entry;
        let attr_len = entry as usize - FileSection::SIZE;
        let (attr, _) = PerfEventAttr::parse(&ent[..attr_len], e)
            .map_err(|err| Error::corrupt(at, format!("attr {i}: {err}")))?;
        let attr = attr_bits::from_file(attr, e);
        let sec = FileSection::parse(&ent[attr_len..], e);
        if sec.size > ids_left {
            return Err(Error::corrupt(
                at,
                format!(
                    "attr {i}: its ids ({} bytes) and the ids before it are more than the file's {file_len} bytes",
                    sec.size
                ),
            ));
        }
        ids_left -= sec.size;
        let raw = read_section(r, sec, file_len, file_len, "attr ids")?;
        let id_list: Vec<u64> = raw
            .chunks_exact(8)
            .map(|c| e.u64(c.try_into().unwrap_or_default()))
            .collect();
        ids.add(i, &attr, &id_list);
        attrs.push(EventAttr {
            attr,
            ids: id_list,
            name: None,
        });
    }

    // Feature sections: a table of {offset, size} after the data, one per set bit.
    let mut features = FeatureSections::new(e);
    let data_end = header
        .data
        .end()
        .ok_or_else(|| Error::corrupt(40, "data section offset + size overflows".to_string()))?;
    // A file cut short (perf record killed, a partial copy) loses its
    // features first: they are reported, and the records still read.
    let mut feature_error = None;
    let nfeat = header.features.len() as u64;
    if nfeat > 0 {
        let table = FileSection {
            offset: data_end,
            size: nfeat * FileSection::SIZE as u64,
        };
        let mut read_features = || -> Result<()> {
            let raw = read_section(r, table, file_len, file_len, "feature table")?;
            for (f, s) in header.features.iter().zip(raw.chunks_exact(16)) {
                let sec = FileSection::parse(s, e);
                let what = f.name();
                if f == Feature(PERFAUX_FEATURE_BIT) {
                    // perfaux's trace section can be most of the file: it is
                    // located, and read piece by piece by its consumers
                    // (crate::trace_section::TraceSection).
                    in_file(sec, file_len, what)?;
                    features.locate(f, sec);
                    continue;
                }
                let data = read_section(r, sec, file_len, opts.max_feature_size, what)?;
                features.insert(f, sec.offset, data);
            }
            Ok(())
        };
        feature_error = read_features().err().map(Arc::new);
    }
    if let Some(Ok(descs)) = features.event_desc() {
        for (a, d) in attrs.iter_mut().zip(descs) {
            a.name = Some(d.name);
        }
    }

    Ok((
        Metadata {
            format: DataFormat::File(header),
            endian: e,
            attrs,
            features,
            feature_error,
        },
        ids,
        header,
        data_end,
    ))
}
